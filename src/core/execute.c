/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Carrying out a plan, in this order:
 *
 *   1. stage:  a fresh work directory for every writable tree (mutable.h), then the staging
 *              worker builds every new tree off to the side  (nothing visible changed; a
 *              failure: the work directories go, nothing else to undo; in process, the kept
 *              mounts of files no longer found went meanwhile, and stay gone)
 *   2. begin:  a record for every new tree (its identity, taken from the detached mount),
 *              then state.json with the pending record: old and new tree per hierarchy
 *              (nothing visible changed; a failure: the new records go, nothing else)
 *   3. swap:   swap.c, all hierarchies or none; the old trees it detached beneath end on a
 *              thread (their pinned fds, ExecuteOptions.old_trees)
 *   4. commit: state.json with what is live now and the new generation; the records (and
 *              work directories) of the trees that went are removed
 * A delayed transition (o->delay_usec) writes the delay into the pending record of step 2, so a
 * crash from then on keeps it delayed; its swap stops with the new trees beneath the old tops
 * (swap.c), and its commit keeps the pending record of every hierarchy that waits: the old tops
 * go when the delay ends or someone commits (recover.c, delay.c).  Hierarchies where nothing of
 * ours was live are committed at once, as without a delay.
 * A crash after 2 is resolved by the next start from the pending record (recover.c).  A
 * commit that cannot be written (a full run/) leaves the pending record of step 2 in place:
 * the new tree is live, the message says so, and the next start records it.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <linux/openat2.h>
#include <string.h>

#include "execute.h"
#include "fd-util.h"
#include "kernel.h"
#include "log.h"
#include "staging.h"
#include "swap.h"
#include "util.h"

#ifdef SYSEXTD_TEST_HOOKS
#include "testhook.h"
#endif

typedef struct Work {
        size_t hierarchy;  /* index into the states */
        HierarchyAction action;
        const Tree *old;   /* our live tree */
        Tree *new_tree;    /* its record, in the journal's list once begun */
        char *new_id;
        dev_t *ours;       /* devices of the run of ours on top, top first */
        size_t n_ours;
        char **children;   /* mount points below, for the worker */
        int tree_fd;
        SwapTarget target;
        /* A writable tree: its work directory (below the root) and fd. */
        char *workdir;
        int work_fd;
} Work;

static void work_done(Work *w) {
        free(w->new_id);
        free(w->ours);
        strv_free(w->children);
        safe_close(w->tree_fd);
        free(w->workdir);
        safe_close(w->work_fd);
}

/* The journal's images after this transition: the ones it probed, and for the classes it
 * did not cover (--class=) those recorded before. */
static int images_for_journal(const ImageList *images, const ImageList *before, unsigned classes, ImageList *ret) {
        ImageList l = {};

        l.images = calloc(images->n + before->n + 1, sizeof(Image));
        if (!l.images)
                return -ENOMEM;
        for (int pass = 0; pass < 2; pass++)
                for (size_t i = 0; i < (pass == 0 ? before->n : images->n); i++) {
                        const Image *s = pass == 0 ? &before->images[i] : &images->images[i];
                        Image *d;

                        if ((pass == 0) == !!(classes & (1u << s->klass)))
                                continue;
                        d = &l.images[l.n++];
                        *d = *s;
                        /* Nothing of s's is owned by d until copied (image_list_free() below). */
                        d->restart_units = d->reload_or_restart_units = d->shipped_units = d->wanted_units = NULL;
                        d->root_fd = -EBADF;
                        d->loop = NULL;
                        d->name = strdup(s->name);
                        d->path = strdup(s->path);
                        d->rel = s->rel ? strdup(s->rel) : NULL;
                        d->version = s->version ? strdup(s->version) : NULL;
                        d->reason = s->reason ? strdup(s->reason) : NULL;
                        d->fstype = s->fstype ? strdup(s->fstype) : NULL;
                        d->roothash = s->roothash ? strdup(s->roothash) : NULL;
                        if (!d->name || !d->path || (s->rel && !d->rel) || (s->version && !d->version) || (s->reason && !d->reason) ||
                            (s->fstype && !d->fstype) || (s->roothash && !d->roothash) ||
                            strv_copy(s->restart_units, &d->restart_units) < 0 ||
                            strv_copy(s->reload_or_restart_units, &d->reload_or_restart_units) < 0 ||
                            strv_copy(s->shipped_units, &d->shipped_units) < 0 ||
                            strv_copy(s->wanted_units, &d->wanted_units) < 0) {
                                image_list_free(&l);
                                return -ENOMEM;
                        }
                }
        *ret = l;
        return 0;
}

static void log_outcome(const SwapTarget *t, HierarchyAction action) {
        switch (t->state) {
        case SWAP_ATTACHED:
        case SWAP_REPLACED:
                if (action == ACTION_BUILD)
                        log_info("Merged extensions into '%s'.", t->path);
                else
                        log_info("Unmerged extensions from '%s' (an overlay of the base alone stays, to keep the mounts below it).",
                                 t->path);
                break;
        case SWAP_REPLACED_GAP:
                log_warning("Merged extensions into '%s' in degraded mode (the base was visible for a moment).", t->path);
                break;
        case SWAP_DETACHED:
                log_info("Unmerged extensions from '%s'.", t->path);
                break;
        case SWAP_DELAYED:
                log_info("The new tree of '%s' waits beneath the previous one, which stays until the transition is committed.",
                         t->path);
                break;
        case SWAP_BURIED:
                log_warning("The new tree for %s could not be taken back (its parent mount does not propagate); it stays, unused and invisible, beneath the live tree.",
                            t->path);
                break;
        default:
                break;
        }
}

/* The work directory of a writable tree, made fresh for it beside the upper directory. */
static int make_workdir(const TransitionContext *ctx, Work *w, const MutableSetup *m, const char *path) {
        _cleanup_free_ char *name = NULL;
        int r;

        r = mutable_workdir_create(m, w->new_id, &w->workdir);
        if (r < 0)
                return transition_fail(ctx, ENGINE_ERROR_FAILED, r, "Failed to create the work directory for %s beside %s: %m; nothing was changed.",
                                       path, strna(m->dir_path));
        r = mutable_workdir_name(m, w->new_id, &name);
        if (r < 0)
                return r;
        w->work_fd = openat_resolve(m->parent_fd, name, O_PATH | O_DIRECTORY, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS);
        if (w->work_fd < 0)
                return transition_fail(ctx, ENGINE_ERROR_FAILED, w->work_fd, "Failed to open the work directory %s/%s: %m", ctx->root,
                                       w->workdir);
        return 0;
}

static void remove_workdir(const TransitionContext *ctx, const char *rel) {
        int r;

        if (!rel)
                return;
        r = mutable_workdir_remove(ctx->root_fd, rel);
        if (r < 0)
                log_debug("Could not remove the work directory %s/%s: %s", ctx->root, rel, strerror(-r));
}

static int stage(const TransitionContext *ctx, Work *work, size_t n_work, HierarchyState *states, const Plan *plan,
                 ImageList *images, const ExecuteOptions *o, uint64_t generation) {
        StagingRequest reqs[HIERARCHIES_MAX] = {};
        size_t map[HIERARCHIES_MAX], n_reqs = 0;
        _cleanup_free_ char *msg = NULL;
        _cleanup_close_ int staging_fd = -EBADF;
        LayersSweep sweep = {};
        int r;

        for (size_t k = 0; k < n_work; k++) {
                Work *w = &work[k];
                const HierarchyPlan *hp = &plan->hierarchies[w->hierarchy];
                const MutableSetup *m = o->mutables ? &o->mutables[w->hierarchy] : NULL;
                bool build = w->action == ACTION_BUILD;
                ImageClass klass = ctx->hierarchy_class[w->hierarchy];
                MutableUpper upper = build && m ? m->d.upper : MUTABLE_UPPER_NONE;

                if (w->action != ACTION_BUILD && w->action != ACTION_BASE)
                        continue;
                if (upper == MUTABLE_UPPER_DIR || upper == MUTABLE_UPPER_HIERARCHY) {
                        r = make_workdir(ctx, w, m, states[w->hierarchy].path);
                        if (r < 0)
                                return r;
                }
                map[n_reqs] = k;
                reqs[n_reqs++] = (StagingRequest) {
                        .target = states[w->hierarchy].path,
                        .children = w->children,
                        .layers = hp->layers,
                        .n_layers = build ? hp->n_layers : 0,
                        .hierarchy = states[w->hierarchy].name,
                        .ours = w->ours,
                        .n_ours = w->n_ours,
                        .old_writable = w->old && w->old->writable && w->n_ours > 0,
                        .id = w->new_id,
                        .generation = generation,
                        .names = build ? hp->names : NULL,
                        .attrs = o->attrs[klass],
                        .options = o->options[klass],
                        .base_layer = !build || !m || m->d.base_layer,
                        .upper = upper,
                        .upper_fd = upper == MUTABLE_UPPER_DIR ? m->dir_fd : -EBADF,
                        .work_fd = upper == MUTABLE_UPPER_DIR ? w->work_fd : -EBADF,
                        .work_name = upper == MUTABLE_UPPER_HIERARCHY ? strrchr(w->workdir, '/') ? strrchr(w->workdir, '/') + 1 : w->workdir : NULL,
                        .import_fd = build && m && m->d.import_dir ? m->dir_fd : -EBADF,
                        .upper_fd_here = -EBADF,
                        .work_fd_here = -EBADF,
                        .import_fd_here = -EBADF,
                        .tree_fd = -EBADF,
                };
        }
        if (n_reqs == 0)
                return 0;

        if (mkdirat(ctx->journal_fd, "staging", 0700) < 0 && errno != EEXIST)
                return transition_fail(ctx, ENGINE_ERROR_FAILED, errno, "Failed to create %s/%s/staging: %m", ctx->root, JOURNAL_DIR);
        staging_fd = openat_resolve(ctx->journal_fd, "staging", O_PATH | O_DIRECTORY, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS);
        if (staging_fd < 0)
                return transition_fail(ctx, ENGINE_ERROR_FAILED, staging_fd, "Failed to open %s/%s/staging: %m", ctx->root, JOURNAL_DIR);

        /* The kept mounts of files discovery no longer found (replaced or removed) go while the
         * worker builds the new trees (layers.h): the trees still live hold their own
         * references, which end with them after the swap.  Waited for before anything is
         * recorded, so that what is kept after any interruption from here on is known. */
        layers_sweep_start(&sweep, o->sweep_ns, images->images, images->n);
        r = staging_build(staging_fd, images->images, images->n, reqs, n_reqs, o->layers_ns, o->staging_pid, &msg);
        layers_sweep_finish(&sweep);
        if (r < 0)
                return transition_fail(ctx, r == -ENOENT || r == -ENOTDIR || r == -EBUSY ? ENGINE_ERROR_FAILED : ENGINE_ERROR_KERNEL_REFUSED,
                                       r, "%s; nothing was changed.", msg ?: "Failed to build the new tree");
        for (size_t k = 0; k < n_reqs; k++)
                work[map[k]].tree_fd = reqs[k].tree_fd;
        /* The trees hold their layers: the clones of kept mounts go, beside what follows. */
        if (o->release)
                layers_release_start(o->release, images->images, images->n);
        return 0;
}

/* Adds the new tree records to the journal's list and to disk. */
static int begin_trees(const TransitionContext *ctx, Journal *j, Work *work, size_t n_work, HierarchyState *states,
                       const Plan *plan, const MutableSetup *mutables, uint64_t generation) {
        int r;

        for (size_t k = 0; k < n_work; k++) {
                Work *w = &work[k];
                Tree t = {};

                if (w->tree_fd < 0)
                        continue;
                t.id = strdup(w->new_id);
                t.hierarchy = strdup(states[w->hierarchy].name);
                if (!t.id || !t.hierarchy) {
                        tree_done(&t);
                        return -ENOMEM;
                }
                t.generation = generation;
                t.base_only = w->action == ACTION_BASE;
                t.writable = w->action == ACTION_BUILD && mutables &&
                             mutables[w->hierarchy].d.upper != MUTABLE_UPPER_NONE;
                if (w->workdir) {
                        t.workdir = strdup(w->workdir);
                        if (!t.workdir) {
                                tree_done(&t);
                                return -ENOMEM;
                        }
                }
                t.since = now_realtime_usec();
                if (!t.base_only) {
                        char **names = plan->hierarchies[w->hierarchy].names;
                        STRV_FOREACH(x, names)
                                if (strv_extend(&t.extensions, *x) < 0) {
                                        tree_done(&t);
                                        return -ENOMEM;
                                }
                }
                r = tree_set_identity(&t, w->tree_fd);
                if (r >= 0)
                        r = tree_save(ctx->journal_fd, &t);
                if (r < 0) {
                        tree_done(&t);
                        return transition_fail(ctx, ENGINE_ERROR_FAILED, r, "Failed to record the new tree for %s in %s/%s: %m; nothing was changed.",
                                               states[w->hierarchy].path, ctx->root, JOURNAL_DIR);
                }
                r = tree_list_add(&j->trees, &t);
                if (r < 0)
                        return r;
                w->new_tree = tree_list_find(&j->trees, w->new_id);
        }
        return 0;
}

static void forget_new_trees(const TransitionContext *ctx, Journal *j, Work *work, size_t n_work) {
        for (size_t k = 0; k < n_work; k++)
                if (work[k].new_tree) {
                        (void) tree_remove(ctx->journal_fd, work[k].new_id);
                        tree_list_drop(&j->trees, work[k].new_id);
                        work[k].new_tree = NULL;
                }
}

/* What each hierarchy that changes needs: the new tree's id, the run of ours on top (for the
 * worker to take off in its namespace to reach the base) and the mount points below it. */
static int prepare_work(const Plan *plan, const PlanHierarchy *views, const HierarchyState *states, Work *work,
                        size_t *ret_n) {
        size_t n = 0;
        int r;

        for (size_t i = 0; i < plan->n_hierarchies && n < HIERARCHIES_MAX; i++) {
                const HierarchyPlan *hp = &plan->hierarchies[i];
                const StackView *v = &views[i].view;
                Work *w;

                if (hp->action == ACTION_KEEP)
                        continue;
                w = &work[n++];
                *w = (Work) { .hierarchy = i, .action = hp->action, .old = v->live, .tree_fd = -EBADF, .work_fd = -EBADF };
                if (hp->action != ACTION_BUILD && hp->action != ACTION_BASE)
                        continue;
                r = random_hex(TREE_ID_LEN / 2, &w->new_id);
                if (r < 0)
                        goto fail;
                if (v->live) {
                        w->n_ours = v->live_index + 1 - v->run_start;
                        w->ours = calloc(w->n_ours, sizeof(dev_t));
                        if (!w->ours) {
                                r = -ENOMEM;
                                goto fail;
                        }
                        for (size_t k = 0; k < w->n_ours; k++)
                                w->ours[k] = states[i].stack.entries[v->live_index - k].dev;
                }
                for (size_t k = 0; k < states[i].children.n; k++)
                        if (strv_extend(&w->children, states[i].children.children[k].path) < 0) {
                                r = -ENOMEM;
                                goto fail;
                        }
        }
        *ret_n = n;
        return 0;
fail:
        *ret_n = n; /* the caller frees what was prepared */
        return r;
}

/* Step 2: the new trees' records, then state.json with the pending record and the images this
 * transition is made of (none after unmerge: a later refresh merges again rather than finding
 * them unchanged), before anything visible changes.  On failure nothing is left of it. */
static int begin_transition(const TransitionContext *ctx, EngineVerb verb, Journal *j, Work *work, size_t n_work,
                            HierarchyState *states, const Plan *plan, const ImageList *images, const ExecuteOptions *o,
                            uint64_t generation) {
        ImageList none = {}, next = {};
        int r;

        r = begin_trees(ctx, j, work, n_work, states, plan, o->mutables, generation);
        if (r < 0) {
                forget_new_trees(ctx, j, work, n_work);
                return r;
        }
        j->pending = true;
        j->pending_generation = generation;
        j->delayed_since = j->delay_deadline = 0;
        if (o->delay_usec > 0)
                for (size_t k = 0; k < n_work; k++)
                        if (work[k].old) {
                                /* Only where an old top stays is there anything to wait for. */
                                j->delayed_since = now_realtime_usec();
                                j->delay_deadline = j->delayed_since + o->delay_usec;
                                break;
                        }
        for (size_t k = 0; k < n_work; k++) {
                r = journal_add_transition(j, states[work[k].hierarchy].name, work[k].old ? work[k].old->id : NULL,
                                           work[k].new_id);
                if (r < 0)
                        return r;
        }
        r = images_for_journal(verb != ENGINE_UNMERGE ? images : &none, &j->images, o->classes, &next);
        if (r < 0)
                return r;
        image_list_free(&j->images);
        j->images = next;
        j->incomplete = false;
        r = mount_namespace_id(&j->mount_ns);
        if (r >= 0)
                r = journal_save(ctx->journal_fd, j);
        if (r < 0) {
                r = transition_fail(ctx, ENGINE_ERROR_FAILED, r, "Failed to write %s/%s/%s: %m; nothing was changed.", ctx->root,
                                    JOURNAL_DIR, JOURNAL_STATE);
                forget_new_trees(ctx, j, work, n_work);
        }
        return r;
}

/* Step 3's input: per hierarchy the new tree, our old tree and the top the plan saw. */
static void fill_targets(const TransitionContext *ctx, const Work *work, size_t n_work, const HierarchyState *states,
                         SwapTarget *targets) {
        for (size_t k = 0; k < n_work; k++) {
                const HierarchyState *h = &states[work[k].hierarchy];

                targets[k] = (SwapTarget) {
                        .root_fd = ctx->root_fd,
                        .rel = h->name,
                        .path = h->path,
                        .tree_fd = work[k].tree_fd,
                        .new_tree = work[k].new_tree,
                        .old = work[k].old,
                        .planned_top_id = h->stack.n > 0 ? h->stack.entries[h->stack.n - 1].id : h->stack.parent.id,
                        .children = &h->children,
                };
        }
}

static bool target_changed(const SwapTarget *t) {
        return IN_SET(t->state, SWAP_ATTACHED, SWAP_REPLACED, SWAP_REPLACED_GAP, SWAP_DETACHED);
}

/* Step 4, in the journal: what is live now on every hierarchy, whatever the swap reached. */
static int record_outcome(Journal *j, const Work *work, const SwapTarget *targets, size_t n_work,
                          const HierarchyState *states, bool *changed) {
        int r;

        for (size_t k = n_work; k > 0; k--) {
                const Work *w = &work[k - 1];
                const SwapTarget *t = &targets[k - 1];
                const char *name = states[w->hierarchy].name, *now;

                log_outcome(t, w->action);
                log_debug("Swap of %s: %s.", t->path, swap_state_to_string(t->state));
                if (t->state == SWAP_COVERED)
                        continue; /* keeps its pending transition: finished once the foreign mount goes */
                if (t->state == SWAP_DELAYED)
                        continue; /* keeps its pending transition: committed later (recover.c) */
                if (target_changed(t)) {
                        now = t->state == SWAP_DETACHED ? NULL : w->new_id;
                        *changed = true;
                } else
                        now = w->old ? w->old->id : NULL;
                r = journal_set_tree(j, name, now);
                if (r < 0)
                        return r;
                journal_drop_transition_of(j, name);
        }
        return 0;
}

/* The commit could not be written: say where the new tree is live all the same. */
static int fail_commit(const TransitionContext *ctx, const SwapTarget *targets, size_t n_work, bool changed,
                       uint64_t generation, int r) {
        _cleanup_free_ char *where = NULL;

        if (!changed)
                return transition_fail(ctx, ENGINE_ERROR_FAILED, r, "Failed to write %s/%s/%s: %m", ctx->root, JOURNAL_DIR,
                                       JOURNAL_STATE);
        for (size_t k = 0; k < n_work; k++)
                if (target_changed(&targets[k])) {
                        char *s = strjoin3(where ?: "", where ? ", " : "", targets[k].path);
                        free(where);
                        where = s;
                }
        return transition_fail(ctx, ENGINE_ERROR_FAILED, r,
                               "The new tree is live on %s (generation %" PRIu64 "), but recording it in %s/%s/%s failed: %m; it is recorded at the next start.",
                               strna(where), generation, ctx->root, JOURNAL_DIR, JOURNAL_STATE);
}

/* After the commit: the records (and work directories) of the trees that went — the old one
 * where the swap went through (sealed and detached: nothing writes through it any more), the
 * new one where it did not. */
static void drop_gone_trees(const TransitionContext *ctx, Journal *j, Work *work, const SwapTarget *targets,
                            size_t n_work) {
        for (size_t k = 0; k < n_work; k++) {
                const SwapTarget *t = &targets[k];
                _cleanup_free_ char *gone = NULL;

                if (IN_SET(t->state, SWAP_REPLACED, SWAP_REPLACED_GAP, SWAP_DETACHED)) {
                        if (!work[k].old)
                                continue;
                        gone = strdup(work[k].old->id);
                        remove_workdir(ctx, work[k].old->workdir);
                } else if (IN_SET(t->state, SWAP_UNTOUCHED, SWAP_ROLLED_BACK)) {
                        remove_workdir(ctx, work[k].workdir);
                        if (!work[k].new_tree)
                                continue;
                        gone = strdup(work[k].new_id);
                }
                /* A copy: the id belongs to the record that is dropped. */
                if (!gone)
                        continue;
                (void) tree_remove(ctx->journal_fd, gone);
                tree_list_drop(&j->trees, gone);
        }
}

int execute_transition(const TransitionContext *ctx, EngineVerb verb, Journal *j, HierarchyState *states,
                       const PlanHierarchy *views, const Plan *plan, ImageList *images, const ExecuteOptions *o,
                       bool *ret_changed) {
        Work work[HIERARCHIES_MAX] = {};
        SwapTarget targets[HIERARCHIES_MAX];
        int old_fds[HIERARCHIES_MAX];
        size_t n_work = 0;
        uint64_t generation = j->generation + 1;
        _cleanup_free_ char *msg = NULL;
        bool changed = false;
        uint64_t sealed_usec = 0;
        int r, swap_r;

        r = prepare_work(plan, views, states, work, &n_work);
        if (r < 0)
                goto finish;

        /* 1. Stage. */
        r = stage(ctx, work, n_work, states, plan, images, o, generation);
        if (r < 0)
                goto finish;
        /* The last point at which an interrupt stops the transition with nothing changed. */
        if (engine_stop_requested()) {
                r = transition_fail(ctx, ENGINE_ERROR_FAILED, EINTR, "Interrupted; nothing was changed.");
                goto finish;
        }

        /* 2. Begin. */
        r = begin_transition(ctx, verb, j, work, n_work, states, plan, images, o, generation);
        if (r < 0)
                goto finish;
#ifdef SYSEXTD_TEST_HOOKS
        testhook_point("before-swap", 0);
#endif

        /* 3. Swap. */
        fill_targets(ctx, work, n_work, states, targets);
        for (size_t k = 0; k < n_work; k++)
                old_fds[k] = -EBADF;
        swap_r = swap_all(targets, n_work,
                          &(SwapOptions) {
                                  .mount_beneath = kernel_has_mount_beneath(),
                                  .allow_degraded = ctx->allow_degraded,
                                  .delay = journal_delayed(j),
                                  .seal_wait_usec = SWAP_SEAL_WAIT_USEC,
                                  .ret_sealed_usec = &sealed_usec,
                                  .ret_old_fds = old_fds,
                          },
                          &msg);
        /* The old trees end (their layers let go, the file systems only they held ended)
         * beside the commit. */
        if (o->old_trees)
                fd_release_start(o->old_trees, old_fds, n_work);
        else
                for (size_t k = 0; k < n_work; k++)
                        safe_close(old_fds[k]);
        if (swap_r >= 0 && sealed_usec > 0)
                log_info("Handed the writable trees over: writes to them failed (read-only) for %" PRIu64 ".%03" PRIu64 " ms.",
                         sealed_usec / 1000, sealed_usec % 1000);
#ifdef SYSEXTD_TEST_HOOKS
        if (swap_r >= 0)
                testhook_point("after-swap", 0);
#endif

        /* 4. Commit. */
        r = record_outcome(j, work, targets, n_work, states, &changed);
        if (r < 0)
                goto finish;
        if (changed)
                j->generation = generation;
        if (swap_r < 0 && verb != ENGINE_UNMERGE && !changed)
                /* Nothing changed: the images recorded are not the live ones. */
                image_list_free(&j->images);
        /* A new generation live: its record in the history goes with this save, so that no
         * moment has state.json saying a generation the history lacks. */
        if (changed && swap_r >= 0 && o->generations_keep > 0)
                r = journal_save_recording(ctx->journal_fd, j, o->generations_keep, o->record_error);
        else
                r = journal_save(ctx->journal_fd, j);
#ifdef SYSEXTD_TEST_HOOKS
        if (r >= 0)
                testhook_point("after-commit", 0);
#endif
        if (r < 0) {
                r = fail_commit(ctx, targets, n_work, changed, generation, r);
                goto finish;
        }
        drop_gone_trees(ctx, j, work, targets, n_work);
        if (swap_r >= 0 && journal_delayed(j)) {
                _cleanup_free_ char *until = format_timestamp(j->delay_deadline);

                ctx->result->delayed = true;
                log_info("The transition to generation %" PRIu64 " is delayed until %s: every mount namespace keeps the previous trees until it commits (sysextd commit).",
                         generation, strna(until));
        }

        if (swap_r < 0) {
                r = transition_fail(ctx, swap_r == -EBUSY ? ENGINE_ERROR_FOREIGN_MOUNT : ENGINE_ERROR_KERNEL_REFUSED, swap_r, "%s",
                                    msg ?: "Failed to swap in the new tree.");
                goto finish;
        }
        r = 1;
finish:
        *ret_changed = changed;
        for (size_t k = 0; k < n_work; k++) {
                /* Staged or begun but never swapped: its work directory goes with it. */
                if (r < 0 && !work[k].new_tree && work[k].workdir)
                        remove_workdir(ctx, work[k].workdir);
                work_done(&work[k]);
        }
        return r;
}
