/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Planning a transition, from inspected state to a plan, without I/O.
 *
 * Per hierarchy, with L the live tree of ours (stack_analyze()), C "mounts below it or a
 * buried tree of ours under L" and N "images have content for it":
 *
 *   verb     state                 action
 *   -------+----------------------+--------------------------------------------------------
 *   any    | ours covered by a    | refused: merge "already merged", refresh and unmerge
 *          | foreign mount        | "a foreign mount is on top"; nothing is touched
 *   merge  | L with extensions    | refused: already merged
 *   merge, | N                    | BUILD (beneath L when there is one, else on top)
 *   refresh| not N, L extensions  | C ? BASE : DETACH  (refresh: every image is gone)
 *          | not N, L base only   | C ? KEEP : DETACH
 *          | not N, no L          | KEEP
 *   unmerge| L with extensions    | C ? BASE : DETACH
 *          | L base only          | C ? KEEP : DETACH
 *          | no L                 | KEEP
 * "N" also holds in a mutable mode (mutable.h) without extension content: every hierarchy
 * of the class gets a tree.  A hierarchy that does not exist is BUILT, with "create", when N
 * (a mutable mode counts only with an upper or imported directory), and left alone otherwise.
 * A hierarchy of a class the call does not cover (--class=) is KEPT as it is.
 * Replacing L without MOVE_MOUNT_BENEATH is refused unless degraded mode is allowed.
 *
 * Images, for merge and refresh: a refused image fails the transition under --strict; a
 * refused update of an extension that is live now keeps the current tree (the transition is
 * refused), unless the refusal is the policy's (the trusted certificates or ImagePolicy=
 * changed): such an image is taken out, with a note.  A merge that finds no image at all is
 * no error (no_images, as with systemd-sysext), and neither is one whose images were all
 * incompatible (n_incompatible): the engine says how many were ignored.
 *
 * A refresh has nothing to do when the images found are the ones the journal recorded
 * (plan_images_unchanged()): an image is the one recorded when both have a verified verity
 * root hash and it is the same (a copy to a new inode is the same image), else when it is the
 * same file, unchanged (plan_image_same()).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "overlay.h"
#include "plan.h"
#include "util.h"

static const char *const action_names[_ACTION_MAX] = {
        [ACTION_KEEP] = "keep",
        [ACTION_BUILD] = "build",
        [ACTION_BASE] = "base",
        [ACTION_DETACH] = "detach",
};

const char *hierarchy_action_to_string(HierarchyAction a) {
        return a >= 0 && a < _ACTION_MAX ? action_names[a] : NULL;
}

void stack_analyze(const HierarchyState *h, const char *current_tree, StackView *ret) {
        StackView v = {};
        size_t n = h->stack.n;
        ssize_t top_foreign = -1;

        for (size_t i = 0; i < n; i++) {
                if (h->roles[i] == STACK_OURS)
                        v.n_ours++;
                else {
                        top_foreign = (ssize_t) i;
                        if (h->roles[i] == STACK_UNRECORDED)
                                v.n_unrecorded++;
                }
        }

        if (v.n_ours == 0) {
                *ret = v;
                return;
        }

        if (top_foreign == (ssize_t) n - 1) {
                /* A foreign mount on top: ours below it are covered. */
                for (size_t i = n; i > 0; i--)
                        if (h->roles[i - 1] == STACK_OURS) {
                                v.covered = true;
                                v.covered_tree = h->trees[i - 1];
                                break;
                        }
                *ret = v;
                return;
        }

        /* A run of ours at the top, from top_foreign + 1 to n - 1. */
        v.run_start = (size_t) (top_foreign + 1);
        {
                bool ours_below_foreign = false;

                for (ssize_t i = 0; i < top_foreign; i++)
                        if (h->roles[i] == STACK_OURS)
                                ours_below_foreign = true;
                if (ours_below_foreign) {
                        /* The run hides a foreign mount that covers ours: it goes, and what is
                         * ours below is covered, as it was before the run was put there. */
                        v.n_repair = n - v.run_start;
                        v.covered = true;
                        for (ssize_t i = top_foreign; i >= 0; i--)
                                if (h->roles[i] == STACK_OURS) {
                                        v.covered_tree = h->trees[i];
                                        break;
                                }
                        *ret = v;
                        return;
                }
        }

        /* The intended tree of the run: the journal's, else the newest. */
        {
                size_t intended = SIZE_MAX;

                for (size_t i = v.run_start; i < n; i++)
                        if (current_tree && streq(h->trees[i]->id, current_tree))
                                intended = i;
                if (intended == SIZE_MAX)
                        for (size_t i = v.run_start; i < n; i++)
                                if (intended == SIZE_MAX || h->trees[i]->generation > h->trees[intended]->generation)
                                        intended = i;
                v.live = h->trees[intended];
                v.live_index = intended;
                v.n_repair = n - 1 - intended;
                v.n_buried = intended - v.run_start;
        }
        *ret = v;
}

void plan_done(Plan *p) {
        for (size_t i = 0; i < p->n_hierarchies; i++) {
                free(p->hierarchies[i].layers);
                strv_free(p->hierarchies[i].names);
        }
        free(p->hierarchies);
        free(p->message);
        strv_free(p->dropped);
        *p = (Plan) {};
}

static int refuse(Plan *p, EngineError kind, int error, const char *fmt, ...) _printf_(4, 5);
static int refuse(Plan *p, EngineError kind, int error, const char *fmt, ...) {
        va_list ap;

        free(p->message);
        va_start(ap, fmt);
        if (vasprintf(&p->message, fmt, ap) < 0)
                p->message = NULL;
        va_end(ap);
        p->error = kind;
        p->errno_value = error;
        return p->message ? 0 : -ENOMEM;
}

static bool live_has_extension(const PlanInput *in, ImageClass klass, const char *name) {
        for (size_t i = 0; i < in->n_hierarchies; i++) {
                const Tree *t = in->hierarchies[i].view.live;

                if (in->hierarchies[i].klass != klass)
                        continue;
                if (t && !t->base_only && strv_contains(t->extensions, name))
                        return true;
        }
        return false;
}

static size_t count_in(const ImageList *l, unsigned classes) {
        size_t n = 0;

        for (size_t i = 0; i < l->n; i++)
                n += !!(classes & (1u << l->images[i].klass));
        return n;
}

bool plan_image_same(const Image *recorded, const Image *found) {
        if (recorded->klass != found->klass || !streq(recorded->name, found->name) ||
            !streq(recorded->path, found->path))
                return false;

        /* Verity first, as systemd-sysext 260 has it: the root hash names the content, so a copy
         * of a merged image (a new inode and mtime, new sidecars) is the same image, and another
         * root hash is another image whatever the file.  Only a hash that was verified counts
         * (one the journal has for a merged image), and only one whose source discovery reads:
         * a disk image's comes from its partitions, so there the file decides.  Besides the
         * hash, what discovery sees that the verdict depends on: the size (the same root hash
         * covers the same data, so a file of another size is another layout around it) and
         * whether a signature is beside it (signed_valid: a merged file system image has one
         * exactly when its NAME.roothash.p7s was there).  The same file (device and inode)
         * with the same hash is judged by its identity and its sidecars' as well (below), so
         * that a hash tree or signature changed in place beside it is verified again. */
        if (recorded->roothash && found->roothash && recorded->verdict == IMAGE_COMPATIBLE &&
            recorded->kind != IMAGE_DDI) {
                if (!streq(recorded->roothash, found->roothash))
                        return false;
                if (recorded->st.st_dev != found->st.st_dev || recorded->st.st_ino != found->st.st_ino)
                        return recorded->st.st_size == found->st.st_size &&
                               recorded->signed_valid == found->signature_sidecar;
        }

        /* Else the file: the same one with the same identity gives the same verdict.  Its stamp
         * covers a raw image's sidecars and every entry of a directory image, so an edit inside
         * one is noticed. */
        return recorded->st.st_dev == found->st.st_dev && recorded->st.st_ino == found->st.st_ino &&
               recorded->st.st_size == found->st.st_size && recorded->st.st_mtim.tv_sec == found->st.st_mtim.tv_sec &&
               recorded->st.st_mtim.tv_nsec == found->st.st_mtim.tv_nsec && recorded->stamp == found->stamp;
}

bool plan_images_unchanged(const ImageList *l, const ImageList *recorded, unsigned classes) {
        if (count_in(l, classes) != count_in(recorded, classes))
                return false;
        for (size_t i = 0; i < l->n; i++) {
                const Image *img = &l->images[i];
                bool found = false;

                if (!(classes & (1u << img->klass)))
                        continue;
                for (size_t k = 0; k < recorded->n && !found; k++)
                        found = plan_image_same(&recorded->images[k], img);
                if (!found)
                        return false;
        }
        return true;
}

static int check_images(const PlanInput *in, Plan *p) {
        size_t n_compatible = 0, n_refused = 0, n_incompatible = 0;

        for (size_t i = 0; i < in->images->n; i++) {
                const Image *img = &in->images->images[i];

                if (img->verdict == IMAGE_COMPATIBLE)
                        n_compatible++;
                else if (img->verdict == IMAGE_REFUSED)
                        n_refused++;
                else
                        n_incompatible++;
        }

        for (size_t i = 0; in->strict && i < in->images->n; i++) {
                const Image *img = &in->images->images[i];
                if (img->verdict == IMAGE_REFUSED)
                        return refuse(p, ENGINE_ERROR_IMAGE_REFUSED, EBADMSG,
                                      "Image %s was refused (%s); strict mode, nothing was changed.", img->path,
                                      strna(img->reason));
        }

        /* A broken update of an extension that is live now must not silently drop it from
         * the tree: keep the current tree and say why.  One that the policy no longer allows
         * is taken out. */
        for (size_t i = 0; in->verb == ENGINE_REFRESH && i < in->images->n; i++) {
                const Image *img = &in->images->images[i];
                char *note;

                if (img->verdict != IMAGE_REFUSED || !live_has_extension(in, img->klass, img->name))
                        continue;
                if (!img->refused_by_policy)
                        return refuse(p, ENGINE_ERROR_IMAGE_REFUSED, EBADMSG,
                                      "Image %s was refused (%s); extension '%s' is merged now, so the current tree stays as it is.",
                                      img->path, strna(img->reason), img->name);
                if (asprintf(&note, "Image %s no longer passes the image policy (%s); extension '%s' is taken out of the merged tree.",
                             img->path, strna(img->reason), img->name) < 0 ||
                    strv_push(&p->dropped, note) < 0)
                        return -ENOMEM;
        }

        p->n_incompatible = n_incompatible;
        p->n_refused = n_refused;
        if (n_compatible == 0 && in->verb == ENGINE_MERGE && n_refused > 0)
                return refuse(p, ENGINE_ERROR_IMAGE_REFUSED, ENOENT,
                              "No extension could be merged: %zu refused, %zu incompatible; nothing was merged.", n_refused,
                              n_incompatible);
        /* None compatible and none refused: nothing to merge, an error only when images were
         * found (decided once the hierarchies are planned, see plan_transition()). */
        p->no_images = n_compatible == 0;
        return 0;
}

static int plan_layers(const PlanInput *in, size_t h, HierarchyPlan *hp) {
        hp->layers = calloc(in->images->n + 1, sizeof(size_t));
        if (!hp->layers)
                return -ENOMEM;
        for (size_t k = in->images->n; k > 0; k--) {
                const Image *img = &in->images->images[k - 1];
                if (img->verdict == IMAGE_COMPATIBLE && (img->hierarchies & (1u << h)))
                        hp->layers[hp->n_layers++] = k - 1;
        }
        hp->names = calloc(hp->n_layers + 1, sizeof(char *));
        if (!hp->names)
                return -ENOMEM;
        for (size_t k = 0; k < hp->n_layers; k++) {
                hp->names[k] = strdup(in->images->images[hp->layers[hp->n_layers - 1 - k]].name);
                if (!hp->names[k])
                        return -ENOMEM;
        }
        return 0;
}

/* The refusals that follow from the stacks alone, before any image is looked at. */
static int check_stacks(const PlanInput *in, Plan *p) {
        for (size_t i = 0; i < in->n_hierarchies; i++) {
                const PlanHierarchy *h = &in->hierarchies[i];

                /* Covered hierarchies: nothing can be done under a foreign mount. */
                if (h->skip || !h->view.covered)
                        continue;
                if (in->verb == ENGINE_MERGE)
                        return refuse(p, ENGINE_ERROR_ALREADY_MERGED, EBUSY,
                                      "Extensions are already merged into %s, below a foreign mount; nothing was changed.",
                                      h->state->path);
                return refuse(p, ENGINE_ERROR_FOREIGN_MOUNT, EBUSY,
                              "A foreign mount is on top of sysextd's tree on %s; refusing to touch it. Unmount it first.",
                              h->state->path);
        }
        if (in->verb == ENGINE_MERGE)
                for (size_t i = 0; i < in->n_hierarchies; i++) {
                        const Tree *live = in->hierarchies[i].view.live;
                        if (!in->hierarchies[i].skip && live && !live->base_only)
                                return refuse(p, ENGINE_ERROR_ALREADY_MERGED, EBUSY,
                                              "Extensions are already merged into %s; use 'sysextd refresh' to update them or 'sysextd unmerge' first.",
                                              in->hierarchies[i].state->path);
                }
        return 0;
}

int plan_check(const PlanInput *in, Plan *ret) {
        Plan p = {};
        int r = check_stacks(in, &p);

        if (r < 0) {
                plan_done(&p);
                return r;
        }
        *ret = p;
        return 0;
}

int plan_transition(const PlanInput *in, Plan *ret) {
        _cleanup_(plan_done) Plan p = {};
        int r;

        p.hierarchies = calloc(in->n_hierarchies ?: 1, sizeof(HierarchyPlan));
        if (!p.hierarchies)
                return -ENOMEM;
        p.n_hierarchies = in->n_hierarchies;

        r = check_stacks(in, &p);
        if (r < 0 || p.error != ENGINE_OK)
                goto finish;

        if (in->verb != ENGINE_UNMERGE) {
                if (in->verb == ENGINE_REFRESH && in->unchanged && !in->always_refresh) {
                        *ret = p;
                        p = (Plan) {};
                        return 0; /* nothing to do */
                }
                r = check_images(in, &p);
                if (r < 0 || p.error != ENGINE_OK)
                        goto finish;
        }

        for (size_t i = 0; i < in->n_hierarchies; i++) {
                const PlanHierarchy *h = &in->hierarchies[i];
                HierarchyPlan *hp = &p.hierarchies[i];
                const Tree *live = h->view.live;
                /* Mounts below that the base beneath has too come back as they are when our
                 * trees go: only others need a tree to carry them. */
                bool carry = (h->state->children.n > 0 && !h->state->base_has_children) || h->view.n_buried > 0;

                /* In a mutable mode every hierarchy of the class gets a tree, even without
                 * extension content; one that does not exist only if it will be writable. */
                bool always = in->verb != ENGINE_UNMERGE && h->mutable.always &&
                              (h->state->exists || h->mutable.upper != MUTABLE_UPPER_NONE || h->mutable.import_dir);

                if (h->skip)
                        continue;
                if (in->verb != ENGINE_UNMERGE) {
                        r = plan_layers(in, i, hp);
                        if (r < 0)
                                return r;
                        if (hp->n_layers > OVERLAY_LAYERS_MAX - 3) {
                                r = refuse(&p, ENGINE_ERROR_IMAGE_REFUSED, E2BIG,
                                           "Too many extensions for %s: %zu, overlayfs allows at most %d.", h->state->path,
                                           hp->n_layers, OVERLAY_LAYERS_MAX - 3);
                                goto finish;
                        }
                }
                if (!h->state->exists) {
                        /* Created for the extensions that have content for it, as by
                         * systemd-sysext; left in place after unmerge. */
                        if (hp->n_layers > 0 || always) {
                                hp->action = ACTION_BUILD;
                                hp->create = true;
                                p.any_work = true;
                        }
                        continue;
                }

                if (hp->n_layers > 0 || always)
                        hp->action = ACTION_BUILD;
                else if (live && !live->base_only)
                        hp->action = carry ? ACTION_BASE : ACTION_DETACH;
                else if (live)
                        hp->action = carry ? ACTION_KEEP : ACTION_DETACH;
                else
                        hp->action = ACTION_KEEP;
                hp->replace = live && hp->action != ACTION_KEEP && hp->action != ACTION_DETACH;

                if (hp->replace && !in->mount_beneath && !in->allow_degraded) {
                        r = refuse(&p, ENGINE_ERROR_KERNEL_REFUSED, EOPNOTSUPP,
                                   "This kernel cannot mount beneath %s (MOVE_MOUNT_BENEATH needs Linux 6.5); refusing a refresh that would expose the base. Set DegradedMode=unmount-mount in sysextd.conf to accept that.",
                                   h->state->path);
                        goto finish;
                }
                if (hp->action != ACTION_KEEP)
                        p.any_work = true;
        }
        /* A merge that finds only incompatible images is no error either: systemd-sysext 252,
         * 257 and current main exit 0 with the count; the engine reports it. */
        r = 0;
finish:
        if (r < 0)
                return r;
        *ret = p;
        p = (Plan) {};
        return 0;
}
