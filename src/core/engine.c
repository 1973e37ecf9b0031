/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The engine: one transition at a time, under a lock, from the live tree to a new one.
 *
 *   1. lock run/sysextd/lock; resolve a pending record left by a crash (recover)
 *   2. look at each hierarchy: what is live, is the top ours, is ours under a foreign mount
 *   3. discover and probe images (merge, refresh); decide per hierarchy:
 *        BUILD   a new overlay from the images that have content for it
 *        BASE    unmerge with mounts below: an overlay of the base alone (keeps them)
 *        DETACH  unmerge with nothing below: our overlay just goes
 *        KEEP    nothing to do
 *   4. staging worker builds every new tree off to the side     (nothing visible changed)
 *   5. journal: new state plus a pending record                 (nothing visible changed)
 *   6. swap each hierarchy (swap.c)                             (the change, per hierarchy)
 *   7. journal: pending record cleared
 * A failure in 2-5 leaves the live tree exactly as it was.  A crash in 6 is resolved by the
 * next start from the pending record: finished forward when the new tree sits beneath the old
 * top, discarded when it never got there.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>

#include "engine.h"
#include "fd-util.h"
#include "log.h"
#include "missing.h"
#include "mounts.h"
#include "overlay.h"
#include "staging.h"
#include "swap.h"
#include "util.h"

#ifdef SYSEXTD_TEST_HOOKS
#include "testhook.h"
#endif

int engine_config_default(EngineConfig *ret) {
        EngineConfig c = {};

        c.trusted_dir = strdup("etc/verity.d");
        if (!c.trusted_dir || strv_split("etc/extensions run/extensions var/lib/extensions", " ", &c.search_dirs) < 0 ||
            strv_split("usr opt", " ", &c.hierarchies) < 0) {
                engine_config_done(&c);
                return -ENOMEM;
        }
        *ret = c;
        return 0;
}

void engine_config_done(EngineConfig *c) {
        strv_free(c->search_dirs);
        strv_free(c->hierarchies);
        free(c->trusted_dir);
        *c = (EngineConfig) {};
}

int engine_new(const char *root, EngineConfig *config, Engine **ret) {
        _cleanup_(engine_freep) Engine *e = NULL;
        char *canonical;

        e = calloc(1, sizeof(*e));
        if (!e)
                return -ENOMEM;
        e->root_fd = e->lock_fd = -EBADF;
        e->config = *config;
        *config = (EngineConfig) {};

        canonical = realpath(root ?: "/", NULL);
        if (!canonical)
                return negative_errno();
        e->root = canonical;
        e->root_fd = open(e->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (e->root_fd < 0)
                return negative_errno();
        *ret = TAKE_PTR(e);
        return 0;
}

Engine *engine_free(Engine *e) {
        if (!e)
                return NULL;
        safe_close(e->root_fd);
        safe_close(e->lock_fd);
        image_list_free(&e->probed);
        engine_config_done(&e->config);
        free(e->root);
        free(e->error);
        free(e);
        return NULL;
}

/* Logs the failure once and keeps it for the bus. */
static int engine_fail(Engine *e, EngineError kind, int error, const char *fmt, ...) _printf_(4, 5);

static int load_journal(Engine *e, Journal *ret) {
        int r = journal_load(e->root_fd, ret);

        if (r > 0)
                log_warning("%s/%s could not be read; it was moved to %s/%s.corrupt and a new one is started.",
                            e->root, JOURNAL_FILE, e->root, JOURNAL_FILE);
        return r;
}
static int engine_fail(Engine *e, EngineError kind, int error, const char *fmt, ...) {
        va_list ap;

        error = error ? -abs(error) : -EIO;
        errno = -error;
        free(e->error);
        va_start(ap, fmt);
        if (vasprintf(&e->error, fmt, ap) < 0)
                e->error = NULL;
        va_end(ap);
        e->error_kind = kind;
        log_error("%s", e->error ?: "Out of memory.");
        return error;
}

static char *hierarchy_path(const Engine *e, const char *h) {
        return path_join(e->root, h);
}

static int engine_lock(Engine *e) {
        int r;

        if (e->lock_fd >= 0)
                return 0;
        r = mkdir_p_at(e->root_fd, JOURNAL_DIR, 0755);
        if (r < 0)
                return engine_fail(e, ENGINE_ERROR_FAILED, r, "Failed to create %s/%s: %m", e->root, JOURNAL_DIR);
        e->lock_fd = openat(e->root_fd, JOURNAL_DIR "/lock", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (e->lock_fd < 0)
                return engine_fail(e, ENGINE_ERROR_FAILED, errno, "Failed to open the lock %s/%s/lock: %m", e->root, JOURNAL_DIR);
        if (flock(e->lock_fd, LOCK_EX | LOCK_NB) < 0) {
                if (errno != EWOULDBLOCK)
                        return engine_fail(e, ENGINE_ERROR_FAILED, errno, "Failed to take the lock: %m");
                log_info("Another transition is running on %s, waiting for it to finish.", e->root);
                if (flock(e->lock_fd, LOCK_EX) < 0)
                        return engine_fail(e, ENGINE_ERROR_FAILED, errno, "Failed to take the lock: %m");
        }
        return 0;
}

static void engine_unlock(Engine *e) {
        e->lock_fd = safe_close(e->lock_fd);
}

/* The marker id of the live top of a hierarchy, if it is ours, and whether it carries
 * extensions (an overlay of the base alone, left by unmerge to keep mounts below it, does
 * not). */
static int live_top_id(const char *target, char **ret_id, bool *ret_has_extensions) {
        _cleanup_close_ int fd = open(target, O_PATH | O_DIRECTORY | O_CLOEXEC);
        struct stat st;

        *ret_id = NULL;
        if (ret_has_extensions)
                *ret_has_extensions = false;
        if (fd < 0)
                return negative_errno();
        if (overlay_fd_is_ours(fd, ret_id) && ret_has_extensions)
                *ret_has_extensions = fstatat(fd, OVERLAY_MARKER_DIR "/extensions", &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                                      st.st_size > 0;
        return 0;
}

static int recover_locked(Engine *e, Journal *j) {
        size_t n_kept = 0;
        int r;

        if (!j->pending)
                return 0;

        for (size_t i = 0; i < j->n_transitions; i++) {
                JournalTransition *t = &j->transitions[i];
                _cleanup_free_ char *target = hierarchy_path(e, t->hierarchy), *top = NULL;
                __attribute__((cleanup(mount_stack_done))) MountStack stack = {};
                JournalHierarchy *h;
                bool done;

                if (!target)
                        return -ENOMEM;
                r = live_top_id(target, &top, NULL);
                if (r >= 0)
                        r = mount_stack_read(target, &stack);
                if (r < 0)
                        return engine_fail(e, ENGINE_ERROR_FAILED, r, "Failed to inspect %s: %m", target);

                if (!top && t->new_id && stack.n_ours >= 2) {
                        /* A foreign mount covers both our old top and the new tree beneath it:
                         * nothing can be decided or detached under it.  Keep the record; the
                         * transition is finished once the foreign mount is gone. */
                        log_warning("A foreign mount (%s, source %s) covers an unfinished transition on %s; it is finished once that mount is gone.",
                                    strna(stack.top_fstype), strna(stack.top_source), target);
                        if (n_kept != i) {
                                JournalTransition tmp = j->transitions[n_kept];
                                j->transitions[n_kept] = *t;
                                *t = tmp;
                        }
                        n_kept++;
                        continue;
                }

                if (t->new_id)
                        done = streq_ptr(top, t->new_id);
                else
                        done = !top || !streq_ptr(top, t->old_id);

                if (!done && t->old_id && streq_ptr(top, t->old_id) && t->new_id && stack.n_ours >= 2) {
                        /* Crashed between the swap and the detach: the new tree waits beneath
                         * the old top.  Finish forward. */
                        _cleanup_free_ char *msg = NULL;

                        r = tree_detach_top(target, t->old_id, &msg);
                        if (r < 0)
                                return engine_fail(e, ENGINE_ERROR_FAILED, r,
                                                   "Failed to finish the interrupted transition on %s: %s", target,
                                                   msg ?: strerror(-r));
                        log_info("Finished an interrupted transition on %s (stale top detached).", target);
                        done = true;
                }

                h = journal_find_hierarchy(j, t->hierarchy);
                if (!h || done)
                        continue;

                /* The swap never happened: the old state is still the live one. */
                log_info("Discarded an interrupted transition on %s; the previous tree is still in place.", target);
                /* The images recorded are the ones the discarded transition saw: forget them, so
                 * that the next refresh rebuilds instead of finding them unchanged. */
                journal_images_clear(j);
                free(h->id);
                h->id = t->old_id ? strdup(t->old_id) : NULL;
                h->merged = !!t->old_extensions;
                strv_free(h->extensions);
                h->extensions = TAKE_PTR(t->old_extensions);
                h->since = t->old_since;
        }

        if (n_kept > 0) {
                /* Drop the resolved records, keep the ones still covered. */
                for (size_t i = n_kept; i < j->n_transitions; i++) {
                        free(j->transitions[i].hierarchy);
                        free(j->transitions[i].old_id);
                        free(j->transitions[i].new_id);
                        strv_free(j->transitions[i].old_extensions);
                }
                j->n_transitions = n_kept;
        } else
                journal_pending_clear(j);
        r = journal_save(e->root_fd, j);
        if (r < 0)
                return engine_fail(e, ENGINE_ERROR_FAILED, r, "Failed to write %s/%s: %m", e->root, JOURNAL_FILE);
        return 1;
}

int engine_recover(Engine *e) {
        _cleanup_journal_ Journal j = {};
        int r;

        r = engine_lock(e);
        if (r < 0)
                return r;
        r = load_journal(e, &j);
        if (r < 0)
                r = engine_fail(e, ENGINE_ERROR_FAILED, r, "Failed to read %s/%s: %m", e->root, JOURNAL_FILE);
        else
                r = recover_locked(e, &j);
        engine_unlock(e);
        return r;
}

static void log_verdict(const Image *img) {
        if (img->verdict == IMAGE_REFUSED)
                log_warning("Skipping %s: %s", img->path, img->reason ?: "refused");
        else if (img->verdict == IMAGE_INCOMPATIBLE)
                log_info("Skipping %s: not compatible with this system: %s", img->path, img->reason ?: "");
}

static uint64_t config_stamp(Engine *e);

static bool cache_lookup(Engine *e, Image *img, bool noexec, uint64_t judged_by) {
        /* noexec is a property of the image mounts: only reuse the default ones. */
        if (!e->cache || noexec || !overlay_detached_layers_supported())
                return false;
        for (size_t i = 0; i < e->cache->n; i++) {
                const Image *c = &e->cache->images[i];
                int fd;

                if (c->verdict != IMAGE_COMPATIBLE || c->root_fd < 0 || !streq(c->path, img->path) ||
                    c->st.st_dev != img->st.st_dev || c->st.st_ino != img->st.st_ino ||
                    c->st.st_size != img->st.st_size || c->st.st_mtim.tv_sec != img->st.st_mtim.tv_sec ||
                    c->st.st_mtim.tv_nsec != img->st.st_mtim.tv_nsec || c->stamp != img->stamp ||
                    c->judged_by != judged_by)
                        continue;
                fd = fcntl(c->root_fd, F_DUPFD_CLOEXEC, 3);
                if (fd < 0)
                        return false;
                img->root_fd = fd;
                img->kind = c->kind;
                img->hierarchies = c->hierarchies;
                img->usr_partition = c->usr_partition;
                img->verity = c->verity;
                img->signed_valid = c->signed_valid;
                img->judged_by = judged_by;
                img->verdict = IMAGE_COMPATIBLE;
                log_debug("Reusing the mount of %s.", img->path);
                return true;
        }
        return false;
}

/* Keeps the images that went into the new tree, for the next transition's cache.  Only where
 * detached mounts serve as layers: before Linux 6.15 the staging worker attached the image
 * mounts in its namespace, which is gone, and their fds are of no use to anyone. */
static void keep_probed(Engine *e, ImageList *images) {
        image_list_free(&e->probed);
        if (!overlay_detached_layers_supported()) {
                image_list_free(images);
                e->probed_valid = true; /* an empty cache */
                return;
        }
        for (size_t i = 0; i < images->n; i++) {
                Image *img = &images->images[i];
                if (img->verdict == IMAGE_COMPATIBLE && img->hierarchies != 0)
                        continue;
                img->root_fd = safe_close(img->root_fd);
                img->loop = loopdev_free(img->loop);
        }
        e->probed = *images;
        *images = (ImageList) {};
        e->probed_valid = true;
}

/* Probes the images of l, discovered by the caller. */
static int probe_all(Engine *e, ImageList *l, bool noexec) {
        _cleanup_release_ Release host = {};
        _cleanup_free_ char *cert_dir = NULL;
        uint64_t judged_by;
        ProbeContext ctx;
        int r;

        r = release_read_host(e->root_fd, &host);
        if (r < 0)
                return engine_fail(e, ENGINE_ERROR_FAILED, r,
                                   "Failed to read the os-release of %s (usr/lib/os-release or etc/os-release): %m", e->root);

        cert_dir = path_join(e->root, e->config.trusted_dir);
        if (!cert_dir)
                return -ENOMEM;
        ctx = (ProbeContext) {
                .host = &host,
                .hierarchies = e->config.hierarchies,
                .mount_attrs = noexec ? MOUNT_ATTR_NOEXEC : 0,
                .policy = e->config.policy,
                .cert_dir = cert_dir,
                .use_dm = verity_dm_available(),
        };
        judged_by = config_stamp(e);
        for (size_t i = 0; i < l->n; i++) {
                if (cache_lookup(e, &l->images[i], noexec, judged_by))
                        continue;
                l->images[i].judged_by = judged_by;
                r = image_probe(&l->images[i], &ctx);
                if (r < 0)
                        return engine_fail(e, ENGINE_ERROR_FAILED, r, "Failed to probe %s: %m", l->images[i].path);
        }
        return 0;
}

int engine_list(Engine *e, ImageList *ret) {
        _cleanup_image_list_ ImageList l = {};
        int r;

        r = image_discover(e->root_fd, e->root, e->config.search_dirs, &l);
        if (r < 0)
                return engine_fail(e, ENGINE_ERROR_FAILED, r, "Failed to look for images under %s: %m", e->root);
        r = probe_all(e, &l, false);
        if (r < 0)
                return r;
        /* Drop mounts and loop devices: list reports, it does not hold anything. */
        for (size_t i = 0; i < l.n; i++) {
                l.images[i].root_fd = safe_close(l.images[i].root_fd);
                l.images[i].loop = loopdev_free(l.images[i].loop);
        }
        *ret = l;
        l = (ImageList) {};
        return 0;
}

typedef enum Plan {
        PLAN_KEEP,
        PLAN_BUILD,
        PLAN_BASE,
        PLAN_DETACH,
} Plan;

typedef struct HierarchyPlan {
        const char *hierarchy;
        char *target;
        bool exists;
        bool top_ours;
        bool top_merged; /* ours, with extensions in it */
        char *top_id;
        MountStack stack;
        char **children;
        Plan plan;
        size_t *layers; /* image indexes, top first */
        size_t n_layers;
        char **names; /* bottom to top */
        char *new_id;
        int tree_fd;
} HierarchyPlan;

static void plans_free(HierarchyPlan *p, size_t n) {
        for (size_t i = 0; i < n; i++) {
                free(p[i].target);
                free(p[i].top_id);
                mount_stack_done(&p[i].stack);
                strv_free(p[i].children);
                free(p[i].layers);
                strv_free(p[i].names);
                free(p[i].new_id);
                safe_close(p[i].tree_fd);
        }
        free(p);
}

/* What the verdicts depend on besides the images: the policy and the trusted certificates. */
static uint64_t config_stamp(Engine *e) {
        _cleanup_free_ char *dir = path_join(e->root, e->config.trusted_dir);
        uint64_t stamp = STAMP_INIT;
        struct dirent *de;
        DIR *d;

        stamp_add_u64(&stamp, e->config.policy);
        stamp_add_string(&stamp, e->config.trusted_dir);
        d = dir ? opendir(dir) : NULL;
        while (d && (de = readdir(d))) {
                struct stat st;
                if (de->d_name[0] == '.' || fstatat(dirfd(d), de->d_name, &st, 0) < 0)
                        continue;
                stamp_add_string(&stamp, de->d_name);
                stamp_add_stat(&stamp, &st);
        }
        if (d)
                closedir(d);
        return stamp;
}

static bool images_unchanged(const ImageList *l, const Journal *j) {
        size_t n_seen = 0;

        /* Same files with the same identity give the same verdicts.  Directories are compared
         * by a stamp over every entry in them, so an edit inside one is noticed. */
        for (size_t i = 0; i < l->n; i++) {
                const Image *img = &l->images[i];
                bool found = false;

                for (size_t k = 0; k < j->n_images; k++) {
                        const JournalImage *m = &j->images[k];
                        if (streq(m->name, img->name) && streq(m->path, img->path) && m->dev == img->st.st_dev &&
                            m->ino == img->st.st_ino && m->size == (uint64_t) img->st.st_size &&
                            m->mtime_nsec == (uint64_t) img->st.st_mtim.tv_sec * 1000000000ULL + img->st.st_mtim.tv_nsec &&
                            m->stamp == img->stamp)
                                found = true;
                }
                if (!found)
                        return false;
                n_seen++;
        }
        return n_seen == j->n_images;
}

static int record_images(Journal *j, const ImageList *l) {
        journal_images_clear(j);
        j->images = calloc(l->n ?: 1, sizeof(JournalImage));
        if (!j->images)
                return -ENOMEM;
        for (size_t i = 0; i < l->n; i++) {
                const Image *img = &l->images[i];
                JournalImage *m = &j->images[j->n_images++];

                m->name = strdup(img->name);
                m->path = strdup(img->path);
                m->kind = strdup(image_kind_to_string(img->kind));
                m->verdict = strdup(image_verdict_to_string(img->verdict));
                m->reason = img->reason ? strdup(img->reason) : NULL;
                m->verity = strdup(verity_mode_to_string(img->verity));
                m->signed_valid = img->signed_valid;
                m->dev = img->st.st_dev;
                m->ino = img->st.st_ino;
                m->size = img->st.st_size;
                m->mtime_nsec = (uint64_t) img->st.st_mtim.tv_sec * 1000000000ULL + img->st.st_mtim.tv_nsec;
                m->stamp = img->stamp;
                if (!m->name || !m->path || !m->kind || !m->verdict || !m->verity || (img->reason && !m->reason))
                        return -ENOMEM;
        }
        return 0;
}

static int transition_locked(Engine *e, EngineVerb verb, const EngineOptions *o) {
        _cleanup_image_list_ ImageList images = {};
        _cleanup_journal_ Journal j = {};
        _cleanup_free_ char *staging = NULL, *msg = NULL;
        size_t n = strv_length(e->config.hierarchies), n_compatible = 0, n_refused = 0, n_incompatible = 0;
        HierarchyPlan *plans = NULL;
        bool strict = o->strict || e->config.strict, noexec = o->noexec || e->config.noexec;
        bool any_ours = false, any_merged = false, any_work = false;
        int r;

        r = load_journal(e, &j);
        if (r < 0)
                return engine_fail(e, ENGINE_ERROR_FAILED, r, "Failed to read %s/%s: %m", e->root, JOURNAL_FILE);
        r = recover_locked(e, &j);
        if (r < 0)
                return r;

        plans = calloc(n ?: 1, sizeof(HierarchyPlan));
        if (!plans)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++)
                plans[i].tree_fd = -EBADF;

        /* 2. What is live. */
        for (size_t i = 0; i < n; i++) {
                HierarchyPlan *p = &plans[i];
                struct stat st;

                p->hierarchy = e->config.hierarchies[i];
                p->target = hierarchy_path(e, p->hierarchy);
                if (!p->target) {
                        r = -ENOMEM;
                        goto finish;
                }
                p->exists = stat(p->target, &st) == 0 && S_ISDIR(st.st_mode);
                if (!p->exists)
                        continue;
                r = mount_stack_read(p->target, &p->stack);
                if (r < 0) {
                        r = engine_fail(e, ENGINE_ERROR_FAILED, r, "Failed to read the mount table for %s: %m", p->target);
                        goto finish;
                }
                r = live_top_id(p->target, &p->top_id, &p->top_merged);
                if (r < 0) {
                        r = engine_fail(e, ENGINE_ERROR_FAILED, r, "Failed to open %s: %m", p->target);
                        goto finish;
                }
                p->top_ours = !!p->top_id;
                if (p->top_ours || p->stack.n_ours > 0)
                        any_ours = true;
                if (p->top_merged)
                        any_merged = true;

                if (!p->top_ours && p->stack.n_ours > 0) {
                        if (verb == ENGINE_MERGE)
                                r = engine_fail(e, ENGINE_ERROR_ALREADY_MERGED, EBUSY,
                                                "Extensions are already merged into %s, below a foreign mount (%s on %s); nothing was changed.",
                                                p->target, strna(p->stack.top_fstype), strna(p->stack.top_source));
                        else
                                r = engine_fail(e, ENGINE_ERROR_FOREIGN_MOUNT, EBUSY,
                                                "A foreign mount (%s, source %s) is on top of sysextd's overlay on %s; refusing to touch it. Unmount it first.",
                                                strna(p->stack.top_fstype), strna(p->stack.top_source), p->target);
                        goto finish;
                }
                if (!p->stack.parent_shared && !p->top_ours)
                        log_warning("%s sits on a mount that does not propagate (private): the merged tree will not reach other mount namespaces.",
                                    p->target);
        }

        if (verb == ENGINE_MERGE && any_merged) {
                for (size_t i = 0; i < n; i++)
                        if (plans[i].top_merged) {
                                r = engine_fail(e, ENGINE_ERROR_ALREADY_MERGED, EBUSY,
                                                "Extensions are already merged into %s; use 'sysextd refresh' to update them or 'sysextd unmerge' first.",
                                                plans[i].target);
                                goto finish;
                        }
        }
        if (verb == ENGINE_UNMERGE && !any_ours) {
                log_info("No extensions are merged under %s, nothing to do.", e->root);
                r = 0;
                goto finish;
        }

        /* 3. Images. */
        if (verb != ENGINE_UNMERGE) {
                bool unchanged;

                r = image_discover(e->root_fd, e->root, e->config.search_dirs, &images);
                if (r < 0) {
                        r = engine_fail(e, ENGINE_ERROR_FAILED, r, "Failed to look for images under %s: %m", e->root);
                        goto finish;
                }
                unchanged = verb == ENGINE_REFRESH && !o->force && j.config_stamp == config_stamp(e) &&
                            images_unchanged(&images, &j);
                if (unchanged)
                        for (size_t i = 0; i < n; i++) {
                                JournalHierarchy *h = journal_find_hierarchy(&j, plans[i].hierarchy);
                                if (!streq_ptr(h && h->merged ? h->id : NULL, plans[i].top_id))
                                        unchanged = false;
                        }
                if (unchanged) {
                        log_info("Extensions under %s are unchanged, nothing to do (use --force to rebuild anyway).", e->root);
                        r = 0;
                        goto finish;
                }
                r = probe_all(e, &images, noexec);
                if (r < 0)
                        goto finish;
                for (size_t i = 0; i < images.n; i++) {
                        log_verdict(&images.images[i]);
                        if (images.images[i].verdict == IMAGE_COMPATIBLE)
                                n_compatible++;
                        else if (images.images[i].verdict == IMAGE_REFUSED)
                                n_refused++;
                        else
                                n_incompatible++;
                }
                if (strict && n_refused > 0) {
                        for (size_t i = 0; i < images.n; i++)
                                if (images.images[i].verdict == IMAGE_REFUSED) {
                                        r = engine_fail(e, ENGINE_ERROR_IMAGE_REFUSED, EBADMSG,
                                                        "Image %s was refused (%s); strict mode, nothing was changed.",
                                                        images.images[i].path, images.images[i].reason);
                                        goto finish;
                                }
                }
                /* A broken update of an extension that is live now must not silently drop
                 * it from the tree: keep the current tree and say why. */
                if (verb == ENGINE_REFRESH)
                        for (size_t i = 0; i < images.n; i++) {
                                Image *img = &images.images[i];
                                bool live = false;

                                if (img->verdict != IMAGE_REFUSED)
                                        continue;
                                for (size_t k = 0; k < j.n_hierarchies; k++)
                                        if (j.hierarchies[k].merged && strv_contains(j.hierarchies[k].extensions, img->name))
                                                live = true;
                                if (live) {
                                        r = engine_fail(e, ENGINE_ERROR_IMAGE_REFUSED, EBADMSG,
                                                        "Image %s was refused (%s); extension '%s' is merged now, so the current tree stays as it is.",
                                                        img->path, img->reason, img->name);
                                        goto finish;
                                }
                        }
                if (n_compatible == 0 && verb == ENGINE_MERGE) {
                        r = engine_fail(e, ENGINE_ERROR_NO_IMAGES, ENOENT,
                                        "No suitable extensions found under %s (%zu incompatible, %zu refused); nothing was merged.",
                                        e->root, n_incompatible, n_refused);
                        goto finish;
                }
        }

        /* Plans per hierarchy. */
        for (size_t i = 0; i < n; i++) {
                HierarchyPlan *p = &plans[i];

                if (!p->exists)
                        continue;
                for (size_t k = images.n; k > 0; k--) {
                        Image *img = &images.images[k - 1];
                        size_t *nl;

                        if (img->verdict != IMAGE_COMPATIBLE || !(img->hierarchies & (1u << i)))
                                continue;
                        nl = realloc(p->layers, sizeof(size_t) * (p->n_layers + 1));
                        if (!nl) {
                                r = -ENOMEM;
                                goto finish;
                        }
                        p->layers = nl;
                        p->layers[p->n_layers++] = k - 1;
                }
                p->names = calloc(p->n_layers + 1, sizeof(char *));
                if (!p->names) {
                        r = -ENOMEM;
                        goto finish;
                }
                for (size_t k = 0; k < p->n_layers; k++) {
                        p->names[k] = strdup(images.images[p->layers[p->n_layers - 1 - k]].name);
                        if (!p->names[k]) {
                                r = -ENOMEM;
                                goto finish;
                        }
                }

                if (p->n_layers > OVERLAY_LAYERS_MAX - 2) {
                        r = engine_fail(e, ENGINE_ERROR_IMAGE_REFUSED, E2BIG,
                                        "Too many extensions for %s: %zu, overlayfs allows at most %d.",
                                        p->target, p->n_layers, OVERLAY_LAYERS_MAX - 2);
                        goto finish;
                }

                if (p->n_layers > 0)
                        p->plan = PLAN_BUILD;
                else if (p->top_ours) {
                        r = mounts_below(p->target, &p->children);
                        if (r < 0) {
                                r = engine_fail(e, ENGINE_ERROR_FAILED, r, "Failed to read the mounts below %s: %m", p->target);
                                goto finish;
                        }
                        /* Mounts below keep an overlay of the base alone in place; one that is
                         * already that stays as it is. */
                        if (strv_length(p->children) == 0)
                                p->plan = PLAN_DETACH;
                        else
                                p->plan = p->top_merged ? PLAN_BASE : PLAN_KEEP;
                } else
                        p->plan = PLAN_KEEP;

                if (p->plan == PLAN_BUILD && !p->children) {
                        r = mounts_below(p->target, &p->children);
                        if (r < 0) {
                                r = engine_fail(e, ENGINE_ERROR_FAILED, r, "Failed to read the mounts below %s: %m", p->target);
                                goto finish;
                        }
                }
                if (p->plan == PLAN_BUILD || p->plan == PLAN_BASE) {
                        r = random_hex(16, &p->new_id);
                        if (r < 0)
                                goto finish;
                }
                if (p->plan == PLAN_BUILD && p->top_ours && !kernel_has_mount_beneath() && !e->config.allow_degraded) {
                        r = engine_fail(e, ENGINE_ERROR_KERNEL_REFUSED, EOPNOTSUPP,
                                        "This kernel cannot mount beneath %s (MOVE_MOUNT_BENEATH needs Linux 6.5); refusing a refresh that would expose the base. Set DegradedMode=unmount-mount in sysextd.conf to accept that.",
                                        p->target);
                        goto finish;
                }
                if (p->plan != PLAN_KEEP)
                        any_work = true;
        }

        if (!any_work) {
                if (verb == ENGINE_UNMERGE)
                        log_info("No extensions are merged under %s, nothing to do.", e->root);
                else
                        log_info("Nothing to do under %s.", e->root);
                r = 0;
                goto finish;
        }

        if (verb != ENGINE_UNMERGE) {
                _cleanup_strv_free_ char **used = NULL;
                for (size_t i = 0; i < images.n; i++)
                        if (images.images[i].verdict == IMAGE_COMPATIBLE &&
                            strv_extend(&used, images.images[i].name) < 0) {
                                r = -ENOMEM;
                                goto finish;
                        }
                if (used) {
                        _cleanup_free_ char *s = strv_join(used, "', '");
                        log_info("Using extensions '%s'.", strna(s));
                }
        }

        /* 4. Build every new tree off to the side. */
        {
                StagingRequest reqs[HIERARCHIES_MAX] = {};
                size_t n_reqs = 0, map[HIERARCHIES_MAX];

                for (size_t i = 0; i < n && n_reqs < HIERARCHIES_MAX; i++) {
                        HierarchyPlan *p = &plans[i];
                        if (p->plan != PLAN_BUILD && p->plan != PLAN_BASE)
                                continue;
                        map[n_reqs] = i;
                        reqs[n_reqs++] = (StagingRequest) {
                                .hierarchy = p->hierarchy,
                                .target = p->target,
                                .children = p->children,
                                .layers = p->layers,
                                .n_layers = p->plan == PLAN_BUILD ? p->n_layers : 0,
                                .id = p->new_id,
                                .names = p->names,
                                .tree_fd = -EBADF,
                        };
                }
                if (n_reqs > 0) {
                        staging = path_join(e->root, JOURNAL_DIR "/staging");
                        if (!staging) {
                                r = -ENOMEM;
                                goto finish;
                        }
                        r = mkdir_p_at(e->root_fd, JOURNAL_DIR "/staging", 0700);
                        if (r < 0) {
                                r = engine_fail(e, ENGINE_ERROR_FAILED, r, "Failed to create %s: %m", staging);
                                goto finish;
                        }
                        r = staging_build(staging, images.images, images.n, reqs, n_reqs, noexec, &msg);
                        if (r < 0) {
                                r = engine_fail(e, r == -ENOENT || r == -ENOTDIR ? ENGINE_ERROR_FAILED : ENGINE_ERROR_KERNEL_REFUSED,
                                                r, "%s; nothing was changed.", msg ?: "Failed to build the new tree");
                                goto finish;
                        }
                        for (size_t k = 0; k < n_reqs; k++)
                                plans[map[k]].tree_fd = reqs[k].tree_fd;
                }
        }

        /* 5. New state with the pending record, before anything visible changes. */
        j.pending = true;
        j.pending_generation = j.generation + 1;
        for (size_t i = 0; i < n; i++) {
                HierarchyPlan *p = &plans[i];
                JournalHierarchy *h;
                JournalTransition *t;

                if (p->plan == PLAN_KEEP)
                        continue;
                r = journal_get_hierarchy(&j, p->hierarchy, &h);
                if (r < 0)
                        goto finish;
                t = realloc(j.transitions, sizeof(JournalTransition) * (j.n_transitions + 1));
                if (!t) {
                        r = -ENOMEM;
                        goto finish;
                }
                j.transitions = t;
                t = &t[j.n_transitions++];
                *t = (JournalTransition) {
                        .hierarchy = strdup(p->hierarchy),
                        .old_id = p->top_id ? strdup(p->top_id) : NULL,
                        .new_id = p->new_id ? strdup(p->new_id) : NULL,
                        .old_extensions = h->merged ? TAKE_PTR(h->extensions) : NULL,
                        .old_since = h->since,
                };
                strv_free(h->extensions);
                h->extensions = NULL;
                free(h->id);
                h->id = p->new_id ? strdup(p->new_id) : NULL;
                h->merged = p->plan == PLAN_BUILD;
                if (h->merged) {
                        h->extensions = p->names;
                        p->names = NULL;
                }
                h->since = now_realtime_usec();
        }
        if (verb != ENGINE_UNMERGE) {
                r = record_images(&j, &images);
                if (r < 0)
                        goto finish;
                j.config_stamp = config_stamp(e);
        }
        r = journal_save(e->root_fd, &j);
        if (r < 0) {
                r = engine_fail(e, ENGINE_ERROR_FAILED, r, "Failed to write %s/%s: %m; nothing was changed.", e->root, JOURNAL_FILE);
                goto finish;
        }

#ifdef SYSEXTD_TEST_HOOKS
        testhook_point("before-swap", 0);
#endif

        /* 6. The swap, hierarchy by hierarchy. */
        for (size_t i = 0; i < n; i++) {
                HierarchyPlan *p = &plans[i];
                SwapResult result;

                if (p->plan == PLAN_KEEP)
                        continue;
                free(msg);
                msg = NULL;
                r = tree_swap(p->target, p->plan == PLAN_DETACH ? -EBADF : p->tree_fd, e->config.allow_degraded, &result, &msg);
                if (r < 0) {
                        /* The journal still holds the pending record: the next start resolves
                         * it against what is live. Do it now, so the state is true at once. */
                        (void) recover_locked(e, &j);
                        r = engine_fail(e, r == -EBUSY ? ENGINE_ERROR_FOREIGN_MOUNT : ENGINE_ERROR_KERNEL_REFUSED, r, "%s",
                                        msg ?: "Failed to swap in the new tree.");
                        goto finish;
                }
                p->tree_fd = safe_close(p->tree_fd);
                switch (result) {
                case SWAP_ATTACHED:
                case SWAP_REPLACED:
                        if (p->plan == PLAN_BUILD)
                                log_info("Merged extensions into '%s'.", p->target);
                        else
                                log_info("Unmerged extensions from '%s' (an overlay of the base alone stays, to keep the mounts below it).",
                                         p->target);
                        break;
                case SWAP_REPLACED_GAP:
                        log_warning("Merged extensions into '%s' in degraded mode (the base was visible for a moment).", p->target);
                        break;
                case SWAP_DETACHED:
                        log_info("Unmerged extensions from '%s'.", p->target);
                        break;
                }
        }

#ifdef SYSEXTD_TEST_HOOKS
        testhook_point("after-swap", 0);
#endif

        /* 7. Commit. */
        j.generation = j.pending_generation;
        journal_pending_clear(&j);
        r = journal_save(e->root_fd, &j);
        if (r < 0) {
                r = engine_fail(e, ENGINE_ERROR_FAILED, r, "Failed to write %s/%s: %m", e->root, JOURNAL_FILE);
                goto finish;
        }
        keep_probed(e, &images);
        r = 1;

finish:
        plans_free(plans, n);
        return r;
}

int engine_transition(Engine *e, EngineVerb verb, const EngineOptions *o) {
        static const EngineOptions none = {};
        int r;

        e->error_kind = ENGINE_OK;
        free(e->error);
        e->error = NULL;
        image_list_free(&e->probed);
        e->probed_valid = false;

        r = engine_lock(e);
        if (r < 0)
                return r;
        r = transition_locked(e, verb, o ?: &none);
        engine_unlock(e);
        if (r < 0 && !e->error)
                engine_fail(e, ENGINE_ERROR_FAILED, r, "Transition failed: %m");
        return r;
}

void engine_status_done(EngineStatus *s) {
        for (size_t i = 0; i < s->n_hierarchies; i++) {
                free(s->hierarchies[i].path);
                strv_free(s->hierarchies[i].extensions);
        }
        free(s->hierarchies);
        journal_done(&s->journal);
        *s = (EngineStatus) {};
}

int engine_status(Engine *e, EngineStatus *ret) {
        EngineStatus s = {};
        size_t n = strv_length(e->config.hierarchies);
        int r;

        r = load_journal(e, &s.journal);
        if (r < 0)
                return engine_fail(e, ENGINE_ERROR_FAILED, r, "Failed to read %s/%s: %m", e->root, JOURNAL_FILE);
        s.generation = s.journal.generation;
        s.beneath = kernel_has_mount_beneath();
        s.mode = s.beneath ? "beneath" : e->config.allow_degraded ? "degraded" : "unsupported";
        s.policy = image_policy_to_string(e->config.policy);
        s.hierarchies = calloc(n ?: 1, sizeof(HierarchyStatus));
        if (!s.hierarchies)
                return -ENOMEM;

        for (size_t i = 0; i < n; i++) {
                HierarchyStatus *h = &s.hierarchies[s.n_hierarchies++];
                _cleanup_free_ char *target = hierarchy_path(e, e->config.hierarchies[i]), *id = NULL;
                __attribute__((cleanup(mount_stack_done))) MountStack stack = {};
                JournalHierarchy *jh = journal_find_hierarchy(&s.journal, e->config.hierarchies[i]);

                h->path = strjoin3("/", e->config.hierarchies[i], "");
                if (!target || !h->path) {
                        engine_status_done(&s);
                        return -ENOMEM;
                }
                if (live_top_id(target, &id, NULL) < 0)
                        continue;
                if (mount_stack_read(target, &stack) >= 0)
                        h->foreign_top = !id && stack.n_ours > 0;
                /* The journal says what we merged; the mount table says whether it is live.
                 * While a transition is pending, the journal already holds its new state: as
                 * long as the old top is live, report the old one from the pending record. */
                {
                        char **extensions = NULL;
                        uint64_t since = 0;

                        for (size_t k = 0; s.journal.pending && k < s.journal.n_transitions; k++) {
                                const JournalTransition *t = &s.journal.transitions[k];
                                if (streq(t->hierarchy, e->config.hierarchies[i]) && t->old_id && streq_ptr(t->old_id, id)) {
                                        extensions = t->old_extensions;
                                        since = t->old_since;
                                        h->merged = !!extensions;
                                        goto found;
                                }
                        }
                        h->merged = id && jh && jh->merged && streq_ptr(jh->id, id);
                        if (h->merged || h->foreign_top) {
                                extensions = jh ? jh->extensions : NULL;
                                since = jh ? jh->since : 0;
                        }
                found:
                        h->since = since;
                        STRV_FOREACH(x, extensions)
                                if (strv_extend(&h->extensions, *x) < 0) {
                                        engine_status_done(&s);
                                        return -ENOMEM;
                                }
                }
        }
        *ret = s;
        return 0;
}
