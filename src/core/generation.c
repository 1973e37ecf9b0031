/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/sysmacros.h>

#include "generation.h"
#include "util.h"

void generation_done(Generation *g) {
        image_list_free(&g->images);
        *g = (Generation) {};
}

void generations_free(Generation *l, size_t n) {
        for (size_t i = 0; i < n; i++)
                generation_done(&l[i]);
        free(l);
}

void pin_done(Pin *p) {
        free(p->name);
        free(p->version);
        free(p->from_version);
        *p = (Pin) {};
}

void pin_list_done(PinList *l) {
        for (size_t i = 0; i < l->n; i++)
                pin_done(&l->pins[i]);
        free(l->pins);
        *l = (PinList) {};
}

static int pin_list_add(PinList *l, ImageClass klass, const char *name, const char *version, const char *from,
                        uint64_t generation) {
        Pin *n = realloc(l->pins, sizeof(Pin) * (l->n + 1)), *p;

        if (!n)
                return -ENOMEM;
        l->pins = n;
        p = &n[l->n];
        *p = (Pin) {
                .klass = klass,
                .name = strdup(name),
                .version = version ? strdup(version) : NULL,
                .from_version = from ? strdup(from) : NULL,
                .generation = generation,
        };
        if (!p->name || (version && !p->version) || (from && !p->from_version)) {
                pin_done(p);
                return -ENOMEM;
        }
        l->n++;
        return 0;
}

int pin_list_copy(const PinList *from, PinList *ret) {
        PinList l = {};

        for (size_t i = 0; i < from->n; i++) {
                const Pin *p = &from->pins[i];
                int r = pin_list_add(&l, p->klass, p->name, p->version, p->from_version, p->generation);
                if (r < 0) {
                        pin_list_done(&l);
                        return r;
                }
        }
        *ret = l;
        return 0;
}

int image_copy(const Image *s, Image *ret) {
        Image d = *s;

        d.root_fd = -EBADF;
        d.loop = NULL;
        d.name = strdup(s->name);
        d.path = strdup(s->path);
        d.rel = s->rel ? strdup(s->rel) : NULL;
        d.version = s->version ? strdup(s->version) : NULL;
        d.reason = s->reason ? strdup(s->reason) : NULL;
        d.fstype = s->fstype ? strdup(s->fstype) : NULL;
        d.roothash = s->roothash ? strdup(s->roothash) : NULL;
        d.restart_units = d.reload_or_restart_units = d.shipped_units = d.wanted_units = NULL;
        if (!d.name || !d.path || (s->rel && !d.rel) || (s->version && !d.version) || (s->reason && !d.reason) ||
            (s->fstype && !d.fstype) || (s->roothash && !d.roothash) || strv_copy(s->restart_units, &d.restart_units) < 0 ||
            strv_copy(s->reload_or_restart_units, &d.reload_or_restart_units) < 0 ||
            strv_copy(s->shipped_units, &d.shipped_units) < 0 || strv_copy(s->wanted_units, &d.wanted_units) < 0) {
                image_done(&d);
                return -ENOMEM;
        }
        *ret = d;
        return 0;
}

int generation_from_images(uint64_t generation, uint64_t when, const int mutable[static _IMAGE_CLASS_MAX], bool forced,
                           const ImageList *images, Generation *ret) {
        Generation g = { .generation = generation, .when = when, .forced = forced };

        for (int k = 0; k < _IMAGE_CLASS_MAX; k++)
                g.mutable[k] = mutable[k];
        g.images.images = calloc(images->n + 1, sizeof(Image));
        if (!g.images.images)
                return -ENOMEM;
        for (size_t i = 0; i < images->n; i++) {
                int r;

                if (images->images[i].verdict != IMAGE_COMPATIBLE)
                        continue;
                r = image_copy(&images->images[i], &g.images.images[g.images.n]);
                if (r < 0) {
                        generation_done(&g);
                        return r;
                }
                /* A generation records what was merged, not how it was judged then. */
                free(g.images.images[g.images.n].reason);
                g.images.images[g.images.n].reason = NULL;
                g.images.n++;
        }
        *ret = g;
        return 0;
}

int generations_push(Generation **list, size_t *n, Generation *g, unsigned keep) {
        Generation *l;

        if (keep < 1)
                keep = 1;
        /* The same generation again (a journal saved twice): the newer record wins. */
        if (*n > 0 && (*list)[*n - 1].generation == g->generation) {
                generation_done(&(*list)[*n - 1]);
                (*list)[*n - 1] = *g;
                *g = (Generation) {};
        } else {
                l = realloc(*list, sizeof(Generation) * (*n + 1));
                if (!l)
                        return -ENOMEM;
                *list = l;
                l[(*n)++] = *g;
                *g = (Generation) {};
        }
        while (*n > keep) {
                generation_done(&(*list)[0]);
                memmove(&(*list)[0], &(*list)[1], sizeof(Generation) * (*n - 1));
                (*n)--;
        }
        return 0;
}

static char *kept_list(const Generation *list, size_t n) {
        _cleanup_strv_free_ char **l = NULL;

        for (size_t i = 0; i < n; i++) {
                char buf[32];

                snprintf(buf, sizeof(buf), "%" PRIu64, list[i].generation);
                if (strv_extend(&l, buf) < 0)
                        return NULL;
        }
        return l ? strv_join(l, ", ") : strdup("none");
}

const Generation *generation_find(const Generation *list, size_t n, uint64_t current, uint64_t want, char **ret_message) {
        _cleanup_free_ char *kept = NULL;
        const Generation *best = NULL;
        int r;

        *ret_message = NULL;
        for (size_t i = 0; i < n; i++) {
                if (want > 0 && list[i].generation == want && want != current)
                        return &list[i];
                if (want == 0 && list[i].generation < current && (!best || list[i].generation > best->generation))
                        best = &list[i];
        }
        if (best)
                return best;
        kept = kept_list(list, n);
        if (!kept)
                return NULL;
        if (want > 0 && want == current)
                r = asprintf(ret_message, "Generation %" PRIu64 " is the live one; nothing to roll back to (kept: %s).", want, kept);
        else if (want > 0)
                r = asprintf(ret_message,
                             "Cannot roll back to generation %" PRIu64 ": it is not kept (kept: %s; Generations= in sysextd.conf says how many are).",
                             want, kept);
        else
                r = asprintf(ret_message,
                             "Cannot roll back: no generation older than the live one (%" PRIu64 ") is kept (kept: %s).", current, kept);
        if (r < 0)
                *ret_message = NULL;
        return NULL;
}

bool generation_image_same(const Image *recorded, const Image *found) {
        if (recorded->klass != found->klass || !streq(recorded->name, found->name) || !streq(recorded->path, found->path) ||
            !streq_ptr(recorded->version, found->version))
                return false;
        /* A root hash discovery reads (NAME.roothash beside NAME.verity) must be the one the
         * image was verified against; a disk image's comes from its partitions, which
         * discovery does not read: there the file decides. */
        if (recorded->roothash && found->roothash && !streq(recorded->roothash, found->roothash))
                return false;
        return recorded->st.st_dev == found->st.st_dev && recorded->st.st_ino == found->st.st_ino &&
               recorded->st.st_size == found->st.st_size && recorded->st.st_mtim.tv_sec == found->st.st_mtim.tv_sec &&
               recorded->st.st_mtim.tv_nsec == found->st.st_mtim.tv_nsec && recorded->stamp == found->stamp;
}

int generation_select(ImageList *candidates, const Generation *g, ImageList *ret, const Image **ret_missing) {
        _cleanup_free_ bool *take = calloc(candidates->n + 1, sizeof(bool));
        ImageList l = {};
        size_t k = 0;

        if (!take)
                return -ENOMEM;
        for (size_t i = 0; i < g->images.n; i++) {
                bool found = false;

                for (size_t c = 0; c < candidates->n && !found; c++)
                        if (!take[c] && generation_image_same(&g->images.images[i], &candidates->images[c]))
                                found = take[c] = true;
                if (!found) {
                        *ret_missing = &g->images.images[i];
                        return -ENOENT;
                }
        }
        l.images = calloc(g->images.n + 1, sizeof(Image));
        if (!l.images)
                return -ENOMEM;
        for (size_t c = 0; c < candidates->n; c++) {
                if (take[c])
                        l.images[l.n++] = candidates->images[c];
                else
                        candidates->images[k++] = candidates->images[c];
        }
        candidates->n = k;
        *ret = l;
        *ret_missing = NULL;
        return 0;
}

int generation_missing_message(uint64_t generation, const Image *missing, char **ret) {
        _cleanup_free_ char *version = NULL, *safe_name = NULL, *safe_path = NULL;
        int r;

        if (missing->version && asprintf(&version, " version %s", missing->version) < 0)
                return -ENOMEM;
        r = asprintf(ret,
                     "Cannot roll back to generation %" PRIu64 ": image %s%s (%s, %u:%u:%" PRIu64 ") is gone or changed; put it back or roll back to another generation.",
                     generation, string_safe(missing->name, &safe_name), version ?: "", string_safe(missing->path, &safe_path),
                     major(missing->st.st_dev), minor(missing->st.st_dev), (uint64_t) missing->st.st_ino);
        if (r < 0) {
                *ret = NULL;
                return -ENOMEM;
        }
        return 0;
}

static const Image *generation_image(const Generation *g, ImageClass klass, const char *name) {
        for (size_t i = 0; i < g->images.n; i++)
                if (g->images.images[i].klass == klass && streq(g->images.images[i].name, name))
                        return &g->images.images[i];
        return NULL;
}

int pins_for_rollback(const Generation *from, const Generation *to, PinList *ret) {
        PinList l = {};
        int r;

        for (int pass = 0; pass < 2; pass++) {
                const Generation *g = pass == 0 ? to : from;

                for (size_t i = 0; i < g->images.n; i++) {
                        const Image *img = &g->images.images[i];
                        const Image *t = generation_image(to, img->klass, img->name);
                        const Image *f = generation_image(from, img->klass, img->name);

                        if (pass == 1 && t)
                                continue; /* done in the first pass */
                        /* Nothing to choose between: neither is a version. */
                        if ((!t || !t->version) && (!f || !f->version))
                                continue;
                        if (t && f && streq_ptr(t->version, f->version))
                                continue;
                        r = pin_list_add(&l, img->klass, img->name, t ? t->version : NULL, f ? f->version : NULL,
                                         to->generation);
                        if (r < 0) {
                                pin_list_done(&l);
                                return r;
                        }
                }
        }
        *ret = l;
        return 0;
}

PinDecision pin_decide(const Pin *p, const char *newest) {
        const char *than = p->from_version ?: p->version;

        /* Newer than what was rolled back from (or, when nothing versioned was, than what was
         * rolled back to): the pin has done its job. */
        if (newest && than && version_compare(newest, than) > 0)
                return PIN_RELEASE;
        return PIN_KEEP;
}

const Pin *pin_find(const PinList *l, ImageClass klass, const char *name) {
        for (size_t i = 0; i < l->n; i++)
                if (l->pins[i].klass == klass && streq(l->pins[i].name, name))
                        return &l->pins[i];
        return NULL;
}

static void pin_drop(PinList *l, size_t i) {
        pin_done(&l->pins[i]);
        memmove(&l->pins[i], &l->pins[i + 1], sizeof(Pin) * (l->n - i - 1));
        l->n--;
}

/* Keeps the images of candidates that keep[] says, in order; frees the rest. */
static void keep_only(ImageList *candidates, const bool *keep) {
        size_t k = 0;

        for (size_t i = 0; i < candidates->n; i++) {
                if (keep[i])
                        candidates->images[k++] = candidates->images[i];
                else
                        image_done(&candidates->images[i]);
        }
        candidates->n = k;
}

void generation_keep_picked(ImageList *candidates) {
        size_t k = 0;

        for (size_t i = 0; i < candidates->n; i++) {
                if (candidates->images[i].picked)
                        candidates->images[k++] = candidates->images[i];
                else
                        image_done(&candidates->images[i]);
        }
        candidates->n = k;
}

int pins_apply(ImageList *candidates, PinList *pins, unsigned classes, char ***ret_notes) {
        _cleanup_strv_free_ char **notes = NULL;
        _cleanup_free_ bool *keep = calloc(candidates->n + 1, sizeof(bool));
        int dropped = 0;

        if (!keep)
                return -ENOMEM;
        /* First what the pins say, releasing those done with. */
        for (size_t i = 0; i < pins->n;) {
                const Pin *p = &pins->pins[i];
                const char *newest = NULL;
                bool have_pinned = false;
                char *note = NULL;
                int r = 0;

                if (!(classes & (1u << p->klass))) {
                        i++;
                        continue; /* not looked for: nothing to decide */
                }
                for (size_t c = 0; c < candidates->n; c++) {
                        const Image *img = &candidates->images[c];

                        if (img->klass != p->klass || !streq(img->name, p->name) || !img->version)
                                continue;
                        if (!newest || version_compare(img->version, newest) > 0)
                                newest = img->version;
                        if (p->version && streq(img->version, p->version))
                                have_pinned = true;
                }
                if (pin_decide(p, newest) == PIN_RELEASE)
                        r = asprintf(&note, "Unpinned %s: version %s is newer than %s, the version rolled back from.", p->name,
                                     newest, p->from_version ?: p->version);
                else if (p->version && !have_pinned)
                        r = asprintf(&note, "Unpinned %s: its pinned version %s is gone; using the newest there is.", p->name,
                                     p->version);
                else {
                        i++;
                        continue;
                }
                if (r < 0)
                        return -ENOMEM;
                r = strv_extend(&notes, note);
                free(note);
                if (r < 0)
                        return r;
                pin_drop(pins, i);
                dropped++;
        }

        for (size_t c = 0; c < candidates->n; c++) {
                const Image *img = &candidates->images[c];
                const Pin *p = pin_find(pins, img->klass, img->name);

                if (!p)
                        keep[c] = img->picked;
                else
                        keep[c] = p->version && streq_ptr(img->version, p->version);
                /* One per name: two entries of the same version (one with an architecture, one
                 * without) give the first. */
                for (size_t b = 0; keep[c] && p && b < c; b++)
                        if (keep[b] && candidates->images[b].klass == img->klass && streq(candidates->images[b].name, img->name))
                                keep[c] = false;
        }
        keep_only(candidates, keep);
        if (ret_notes)
                *ret_notes = TAKE_PTR(notes);
        return dropped;
}
