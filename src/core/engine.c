/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The engine: one transition at a time, under a lock, from the live tree to a new one.
 *
 *   1. lock run/sysextd/lock; load the journal and the tree records
 *   2. inspect each hierarchy: the stack of mounts at it, which of them are ours (tree.h)
 *   3. recover (recover.c): a pending record left by a crash, stacks others disturbed; a
 *      delayed transition is committed first (a new transition never waits beneath one
 *      that is still delayed: at most two trees of ours per hierarchy)
 *   4. merge, refresh: the mutable set-up of each hierarchy (mutable.c), then discover and
 *      probe the images of every class the call covers (sysext, confext); with pins
 *      (generation.h) every version of a version directory is discovered and the pins choose
 *      among them.  A rollback is a refresh of every class whose images are exactly those of
 *      an earlier generation (generation_select(); one gone or changed: refused here)
 *   5. plan (plan.c, pure): per hierarchy build, base, detach or keep, or refuse; create the
 *      hierarchies the plan builds that do not exist
 *   6. execute (execute.c): stage, begin, swap (swap.c), commit
 *   7. unlock; for the running system, what images that ship units ask of the service
 *      manager (units.c, decided in 6 before the journal changes)
 * After 6, a transition that changed the trees records its generation in the history of the
 * journal (the last Generations=), a rollback its pins and the end of a wait for confirmation,
 * a refresh with --confirm-within= the deadline (saved once more: a failure to save loses
 * history, never trees).
 * Besides transitions: confirm (the deadline goes), commit (a delayed transition, recover.c
 * and delay.c; with nothing delayed and a pid, that one namespace brought up to date,
 * namespaces.h), follow, status and the namespaces that missed a swap (namespaces.c, a look through /proc without the lock).
 * A failure in 1-5 leaves the live tree exactly as it was (a hierarchy created in 5 stays,
 * empty, as systemd-sysext leaves it); for 6 see execute.c.
 */
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>

#include "base.h"
#include "delay.h"
#include "engine.h"
#include "execute.h"
#include "fd-util.h"
#include "fileio.h"
#include "follow.h"
#include "history.h"
#include "inspect.h"
#include "kernel.h"
#include "layers.h"
#include "log.h"
#include "missing.h"
#include "namespaces.h"
#include "plan.h"
#include "recover.h"
#include "staging.h"
#include "tree.h"
#include "util.h"

#ifdef SYSEXTD_TEST_HOOKS
#include "testhook.h"
#endif

/* systemd's search paths and hierarchies: no extensions below /usr (an image inside the tree
 * it extends), no configuration extensions in /etc. */
#define SYSEXT_SEARCH_DIRS "etc/extensions run/extensions var/lib/extensions"
#define CONFEXT_SEARCH_DIRS "run/confexts var/lib/confexts usr/local/lib/confexts usr/lib/confexts"

int engine_config_default(EngineConfig *ret) {
        EngineConfig c = {};

        c.trusted_dir = strdup("etc/verity.d");
        if (!c.trusted_dir || strv_split(SYSEXT_SEARCH_DIRS, " ", &c.classes[IMAGE_CLASS_SYSEXT].search_dirs) < 0 ||
            strv_split("usr opt", " ", &c.classes[IMAGE_CLASS_SYSEXT].hierarchies) < 0 ||
            strv_split(CONFEXT_SEARCH_DIRS, " ", &c.classes[IMAGE_CLASS_CONFEXT].search_dirs) < 0 ||
            strv_split("etc", " ", &c.classes[IMAGE_CLASS_CONFEXT].hierarchies) < 0) {
                engine_config_done(&c);
                return -ENOMEM;
        }
        /* As systemd-confext: /etc nosuid, nodev and noexec. */
        c.classes[IMAGE_CLASS_CONFEXT].noexec = true;
        c.generations = ENGINE_GENERATIONS_DEFAULT;
        for (int k = 0; k < _IMAGE_CLASS_MAX; k++)
                c.classes[k].policy = -1;
        *ret = c;
        return 0;
}

void engine_config_done(EngineConfig *c) {
        for (int k = 0; k < _IMAGE_CLASS_MAX; k++) {
                strv_free(c->classes[k].search_dirs);
                strv_free(c->classes[k].hierarchies);
                free(c->classes[k].overlay_options);
        }
        free(c->trusted_dir);
        *c = (EngineConfig) {};
}

int engine_new(const char *root, EngineConfig *config, Engine **ret) {
        _cleanup_(engine_freep) Engine *e = NULL;
        char *canonical;

        e = calloc(1, sizeof(*e));
        if (!e)
                return -ENOMEM;
        e->root_fd = e->lock_fd = e->journal_fd = e->facts_fd = e->layers_ns = -EBADF;
        e->facts_pending = BASE_OPEN_INIT;
        e->config = *config;
        *config = (EngineConfig) {};
        for (int k = 0; k < _IMAGE_CLASS_MAX; k++)
                STRV_FOREACH(h, e->config.classes[k].hierarchies) {
                        size_t n = strv_length(e->hierarchies);

                        if (n >= HIERARCHIES_MAX)
                                return -E2BIG;
                        if (strv_extend(&e->hierarchies, *h) < 0)
                                return -ENOMEM;
                        e->hierarchy_class[n] = k;
                }

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

void engine_adopt_journal_cache(Engine *e, JournalCache *c) {
        journal_cache_done(&e->journal_cache);
        e->journal_cache = *c;
        *c = (JournalCache) {};
}

void engine_adopt_facts(Engine *e, int fd) {
        MountIdentity mnt, root_mnt;

        /* A copy of the mount tree made with our trees stripped off (base.h): what is mounted
         * later does not show in it.  The root itself, as base_root_open() gives it when none
         * of our trees was there, would show a tree merged meanwhile (by a transition this one
         * waits for at the lock): that one is reached again, under the lock. */
        if (mount_identity_of_fd(fd, &mnt) < 0 || mount_identity_of_fd(e->root_fd, &root_mnt) < 0 || mnt.id == root_mnt.id) {
                safe_close(fd);
                return;
        }
        safe_close(e->facts_fd);
        e->facts_fd = fd;
}

void engine_keep_layers(Engine *e) {
        e->keep_layers = true;
}

void engine_drop_caches(Engine *e) {
        journal_cache_done(&e->journal_cache);
}

Engine *engine_free(Engine *e) {
        if (!e)
                return NULL;
        safe_close(e->root_fd);
        safe_close(e->lock_fd);
        safe_close(e->journal_fd);
        safe_close(e->facts_fd);
        safe_close(e->layers_ns);
        fd_release_finish(&e->release);
        fd_release_finish(&e->old_trees);
        base_open_cancel(&e->facts_pending);
        image_list_free(&e->probed);
        unit_actions_done(&e->units);
        free(e->recovery_waits);
        journal_cache_done(&e->journal_cache);
        engine_config_done(&e->config);
        strv_free(e->hierarchies);
        engine_result_done(&e->result);
        free(e->root);
        free(e);
        return NULL;
}

/* Logs the failure once and keeps it in e->result; returns -abs(error) (-EIO for 0). */
static int engine_fail(Engine *e, EngineError kind, int error, const char *fmt, ...) _printf_(4, 5);
static int engine_fail(Engine *e, EngineError kind, int error, const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        error = engine_result_failv(&e->result, kind, error, fmt, ap);
        va_end(ap);
        return error;
}

/* What the steps below the engine work with (transition.h), for one call under the lock. */
static TransitionContext step_context(Engine *e) {
        return (TransitionContext) {
                .root = e->root,
                .root_fd = e->root_fd,
                .journal_fd = e->journal_fd,
                .hierarchy_class = e->hierarchy_class,
                .allow_degraded = e->config.allow_degraded,
                .result = &e->result,
                .recovery_waits = &e->recovery_waits,
        };
}

static int stop_if_requested(Engine *e) {
        if (!engine_stop_requested())
                return 0;
        return engine_fail(e, ENGINE_ERROR_FAILED, EINTR, "Interrupted; nothing was changed.");
}

static int load_journal(Engine *e, int dir_fd, Journal *ret) {
        unsigned n_corrupt = 0;
        int r = journal_load_cached(dir_fd, &e->journal_cache, ret, &n_corrupt);

        if (r > 0)
                log_warning("%s/%s/%s could not be read; it was moved to %s.corrupt and a new one is started.", e->root,
                            JOURNAL_DIR, JOURNAL_STATE, JOURNAL_STATE);
        if (r >= 0 && n_corrupt > 0)
                log_warning("%u tree record(s) in %s/%s/%s could not be read and were moved aside; the mounts they described are not touched.",
                            n_corrupt, e->root, JOURNAL_DIR, TREES_DIR);
        if (r < 0)
                return engine_fail(e, ENGINE_ERROR_FAILED, r, "Failed to read %s/%s/%s: %m", e->root, JOURNAL_DIR, JOURNAL_STATE);
        return 0;
}

static void warn_history_bad(Engine *e, int n, bool moved) {
        if (moved)
                log_warning("%d file(s) of the history in %s/%s/ could not be read and were moved aside (.corrupt appended); the generations they held are gone from the history.",
                            n, e->root, JOURNAL_DIR);
        else
                log_warning("%d file(s) of the history in %s/%s/ could not be read; the generations they held are not listed (the next transition moves the files aside).",
                            n, e->root, JOURNAL_DIR);
}

/* The history (generations/), for a rollback, under the lock.  A file that fails is moved
 * aside with a warning, and the history goes on without it. */
static int load_generations(Engine *e, int dir_fd, Journal *j) {
        int r = journal_load_generations(dir_fd, j, true);

        if (r > 0)
                warn_history_bad(e, r, true);
        if (r < 0)
                return engine_fail(e, ENGINE_ERROR_FAILED, r, "Failed to read %s/%s/%s/: %m", e->root, JOURNAL_DIR,
                                   JOURNAL_GENERATIONS);
        return 0;
}

static int engine_lock(Engine *e) {
        _cleanup_close_ int dfd = -EBADF;
        struct stat st;
        int r;

        if (e->lock_fd >= 0)
                return 0;
        r = journal_dir_open(e->root_fd, true, &dfd);
        if (r < 0)
                return engine_fail(e, ENGINE_ERROR_FAILED, r, "Failed to create %s/%s: %m", e->root, JOURNAL_DIR);
        /* Not a FIFO or a device someone put there: a regular file, created if missing. */
        e->lock_fd = openat(dfd, "lock", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY, 0600);
        if (e->lock_fd < 0)
                return engine_fail(e, ENGINE_ERROR_FAILED, errno, "Failed to open the lock %s/%s/lock: %m", e->root, JOURNAL_DIR);
        if (fstat(e->lock_fd, &st) < 0 || !S_ISREG(st.st_mode)) {
                e->lock_fd = safe_close(e->lock_fd);
                return engine_fail(e, ENGINE_ERROR_FAILED, EBADFD, "The lock %s/%s/lock is not a regular file.", e->root,
                                   JOURNAL_DIR);
        }
        if (flock(e->lock_fd, LOCK_EX | LOCK_NB) < 0) {
                if (errno != EWOULDBLOCK)
                        return engine_fail(e, ENGINE_ERROR_FAILED, errno, "Failed to take the lock: %m");
                log_info("Another transition is running on %s, waiting for it to finish.", e->root);
                if (flock(e->lock_fd, LOCK_EX) < 0)
                        return engine_fail(e, ENGINE_ERROR_FAILED, errno, "Failed to take the lock: %m");
        }
        e->journal_fd = TAKE_FD(dfd);
        return 0;
}

static void engine_unlock(Engine *e) {
        e->lock_fd = safe_close(e->lock_fd);
        e->journal_fd = safe_close(e->journal_fd);
}

static int inspect_all(Engine *e, Journal *j, HierarchyState **ret, size_t *ret_n) {
        size_t n = strv_length(e->hierarchies);
        HierarchyState *states = calloc(n ?: 1, sizeof(HierarchyState));
        int r;

        if (!states)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                r = hierarchy_inspect(e->root_fd, e->root, e->hierarchies[i], j, &states[i]);
                if (r < 0) {
                        hierarchy_states_free(states, i);
                        return engine_fail(e, ENGINE_ERROR_FAILED, r, "Failed to inspect %s/%s: %m", e->root,
                                           e->hierarchies[i]);
                }
        }
        *ret = states;
        *ret_n = n;
        return 0;
}

/* The trees recorded must be in this mount namespace: their ids mean nothing in another. */
static int check_namespace(Engine *e, const Journal *j) {
        uint64_t ns;
        int r;

        if (j->mount_ns == 0 || j->trees.n == 0)
                return 0;
        r = mount_namespace_id(&ns);
        if (r < 0)
                return engine_fail(e, ENGINE_ERROR_FAILED, r, "Failed to read this process's mount namespace: %m");
        if (ns != j->mount_ns)
                return engine_fail(e, ENGINE_ERROR_FAILED, EXDEV,
                                   "The trees recorded in %s/%s were merged in another mount namespace (%" PRIu64 ", this one is %" PRIu64 "); run sysextd in that namespace (for the host: nsenter --mount=/proc/1/ns/mnt).",
                                   e->root, JOURNAL_DIR, j->mount_ns, ns);
        return 0;
}

/* What recovery does with a delayed transition (recover.c). */
typedef enum DelayCommit {
        DELAY_COMMIT_IF_DUE, /* once its deadline has passed */
        DELAY_COMMIT_FIRST,  /* now: a new transition is about to run */
        DELAY_COMMIT_NOW,    /* now: sysextd commit */
} DelayCommit;

static int recover_locked(Engine *e, Journal *j, HierarchyState **states, size_t *n, bool *ret_changed, DelayCommit how) {
        TransitionContext ctx;
        uint64_t committed = 0, generation;
        int r;

        r = load_journal(e, e->journal_fd, j);
        if (r < 0)
                return r;
        r = check_namespace(e, j);
        if (r < 0)
                return r;
        r = inspect_all(e, j, states, n);
        if (r < 0)
                return r;
        ctx = step_context(e);
        ctx.commit_delayed = how != DELAY_COMMIT_IF_DUE;
        ctx.committed_delayed = &committed;
        generation = j->generation;
        r = recover_run(&ctx, j, *states, *n, ret_changed);
        /* An interrupted transition finished: the mounts the last run kept were taken from the
         * trees it replaced (layers.h), and would stay until the next transition that builds a
         * tree.  (One discarded, or a delayed one committed, leaves the generation they are of
         * live.) */
        if (r >= 0 && j->generation != generation)
                (void) layers_drop(e->journal_fd);
        if (r >= 0 && committed > 0) {
                history_log(HISTORY_COMMIT, committed, e->root, &j->images, false);
                if (how == DELAY_COMMIT_FIRST)
                        log_info("Committed the delayed transition of generation %" PRIu64 " first.", committed);
                else if (how == DELAY_COMMIT_NOW)
                        log_info("Committed the delayed transition of generation %" PRIu64 ".", committed);
                else
                        log_info("The delay of the transition of generation %" PRIu64 " has ended; committed it.", committed);
        }
        return r;
}

/* The namespaces that follow the host (follow.h) get what it shows now.  Under the lock, with
 * the journal of what is live. */
static void update_followers(Engine *e, Journal *j) {
        _cleanup_(follower_list_done) FollowerList l = {};
        _cleanup_close_ int base = -EBADF;
        int r;

        r = follower_list_load(e->journal_fd, &l);
        if (r < 0) {
                log_warning("Failed to read the followed namespaces in %s/%s/%s/, they were not updated: %s", e->root, JOURNAL_DIR,
                            FOLLOW_DIR, strerror(-r));
                return;
        }
        if (l.n == 0)
                return; /* none: the base below our trees is not needed */
        /* The helpers forked from here would get copies of the clones still being let go, and
         * their exits, waited for, the last close of some. */
        fd_release_finish(&e->release);
        fd_release_finish(&e->old_trees);
        r = base_root_open(e->root_fd, e->root, &base);
        if (r < 0) {
                log_warning("Failed to reach %s below sysextd's trees, the followed namespaces were not updated: %s", e->root,
                            strerror(-r));
                return;
        }
        r = follow_update_all(&(FollowHost) {
                .root_fd = e->root_fd,
                .root = e->root,
                .journal_fd = e->journal_fd,
                .base_fd = base,
                .hierarchies = e->hierarchies,
                .journal = j,
        }, &l);
        if (r < 0)
                log_warning("Failed to update the followed namespaces: %s", strerror(-r));
}

int engine_recover(Engine *e) {
        _cleanup_journal_ Journal j = {};
        HierarchyState *states = NULL;
        size_t n = 0;
        bool changed = false;
        int r;

        engine_result_done(&e->result);
        r = engine_lock(e);
        mount_table_cache_begin();
        if (r >= 0)
                r = recover_locked(e, &j, &states, &n, &changed, DELAY_COMMIT_IF_DUE);
        if (r >= 0)
                update_followers(e, &j);
        mount_table_cache_end();
        hierarchy_states_free(states, n);
        engine_unlock(e);
        e->result.r = r;
        e->result.changed = e->result.recovered = changed;
        e->result.generation = j.generation;
        return r < 0 ? r : changed;
}

static void log_verdict(const Image *img) {
        _cleanup_free_ char *p = NULL, *why = NULL;

        if (img->verdict == IMAGE_REFUSED)
                log_warning("Skipping %s: %s", string_safe(img->path, &p), string_safe(img->reason ?: "refused", &why));
        else if (img->verdict == IMAGE_INCOMPATIBLE)
                log_info("Skipping %s: not compatible with this system: %s", string_safe(img->path, &p),
                         string_safe(img->reason ?: "", &why));
        else if (img->reload_manager_invalid)
                log_warning("EXTENSION_RELOAD_MANAGER= in the extension-release file of %s is not a boolean, ignoring it (the service manager is not reloaded for it).",
                            string_safe(img->path, &p));
}

ImagePolicy engine_class_policy(const EngineConfig *c, const EngineOptions *o, ImageClass k) {
        if (o && o->policy >= 0 && o->policy < _IMAGE_POLICY_MAX)
                return (ImagePolicy) o->policy;
        if (c->classes[k].policy >= 0 && c->classes[k].policy < _IMAGE_POLICY_MAX)
                return (ImagePolicy) c->classes[k].policy;
        return c->policy;
}

static void effective_policies(const Engine *e, const EngineOptions *o, ImagePolicy ret[static _IMAGE_CLASS_MAX]) {
        for (int k = 0; k < _IMAGE_CLASS_MAX; k++)
                ret[k] = engine_class_policy(&e->config, o, k);
}

/* The root below sysextd's trees, for host facts (base.h): opened once per call. */
static int engine_facts(Engine *e, int *ret) {
        int r;

        if (e->facts_fd < 0) {
                if (base_open_pending(&e->facts_pending))
                        r = base_root_open_finish(&e->facts_pending, &e->facts_fd);
                else
                        r = base_root_open(e->root_fd, e->root, &e->facts_fd);
                if (r == -EPERM) {
                        /* Not allowed a mount namespace: not allowed to change a tree either,
                         * and the trees seen are the ones there are. */
                        e->facts_fd = fcntl(e->root_fd, F_DUPFD_CLOEXEC, 3);
                        r = e->facts_fd < 0 ? negative_errno() : 0;
                }
                if (r < 0)
                        return engine_fail(e, ENGINE_ERROR_FAILED, r,
                                           "Failed to reach %s below sysextd's trees (to read the host's os-release and trusted certificates there): %m",
                                           e->root);
        }
        *ret = e->facts_fd;
        return 0;
}

static void engine_facts_close(Engine *e) {
        e->facts_fd = safe_close(e->facts_fd);
        base_open_cancel(&e->facts_pending);
}

/* The base's helper, started now and answered when engine_facts() first needs it; a failure
 * here is left for engine_facts() to meet again and report. */
static void engine_facts_start(Engine *e) {
        if (e->facts_fd >= 0 || base_open_pending(&e->facts_pending))
                return;
        if (base_root_open_start(e->root_fd, e->root, &e->facts_pending) < 0)
                base_open_cancel(&e->facts_pending);
}

/* What the verdicts depend on besides the images: the policy of each class, the trusted
 * certificates, the hierarchies and, for a verdict, --force: one made under --force (release files not
 * matched) holds for calls with --force only, or the image cache would let an image of another
 * OS into a later rebuild without it.  A tree's stamp leaves --force out: a plain refresh that
 * finds the same images keeps what a forced one merged, as with systemd-sysext (the journal
 * records that the trees were forced: gather_images()). */
static uint64_t config_stamp(Engine *e, int facts_fd, const ImagePolicy *policy, bool force) {
        _cleanup_closedir_ DIR *d = NULL;
        uint64_t stamp = STAMP_INIT;
        struct dirent *de;
        int fd;

        for (int k = 0; k < _IMAGE_CLASS_MAX; k++)
                stamp_add_u64(&stamp, policy[k]);
        if (force)
                stamp_add_string(&stamp, "force");
        /* An image's hierarchies are bits of this list (a mount kept between runs carries
         * them: layers.h). */
        for (size_t i = 0; e->hierarchies && e->hierarchies[i]; i++) {
                stamp_add_string(&stamp, e->hierarchies[i]);
                stamp_add_u64(&stamp, e->hierarchy_class[i]);
        }
        stamp_add_string(&stamp, e->config.trusted_dir);
        fd = open_directory_at(facts_fd, e->config.trusted_dir, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
        if (fd >= 0) {
                d = fdopendir(fd);
                if (!d)
                        safe_close(fd);
        }
        while (d && (de = readdir(d))) {
                struct stat st;
                if (de->d_name[0] == '.' || fstatat(dirfd(d), de->d_name, &st, 0) < 0)
                        continue;
                stamp_add_string(&stamp, de->d_name);
                stamp_add_stat(&stamp, &st);
        }
        return stamp;
}

bool engine_class_noexec(const EngineConfig *c, const EngineOptions *o, ImageClass k) {
        return o && o->noexec >= 0 ? o->noexec > 0 : c->classes[k].noexec;
}

MutableMode engine_class_mutable(const EngineConfig *c, const EngineOptions *o, ImageClass k) {
        return o && o->mutable[k] >= 0 && o->mutable[k] < _MUTABLE_MAX ? (MutableMode) o->mutable[k] : c->classes[k].mutable;
}

/* The attributes of a class's trees: nodev always, configuration extensions nosuid too (as
 * systemd-confext), noexec as configured. */
static unsigned class_attrs(const Engine *e, const EngineOptions *o, ImageClass k) {
        return MOUNT_ATTR_NODEV | (k == IMAGE_CLASS_CONFEXT ? MOUNT_ATTR_NOSUID : 0) |
               (engine_class_noexec(&e->config, o, k) ? MOUNT_ATTR_NOEXEC : 0);
}

/* The daemon's cache (e->cache), or the mounts kept by the last run in process (e->kept, whose
 * fds are taken: nothing else uses them). */
static bool cache_lookup(Engine *e, Image *img, bool noexec, uint64_t judged_by) {
        const ImageList *cache = e->kept ?: e->cache;

        /* noexec is a property of the image mounts: only reuse the default ones. */
        if (!cache || noexec || !kernel_has(KERNEL_DETACHED_LAYERS) || img->verdict == IMAGE_REFUSED)
                return false;
        for (size_t i = 0; i < cache->n; i++) {
                const Image *c = &cache->images[i];
                int fd;

                if (c->verdict != IMAGE_COMPATIBLE || c->root_fd < 0 || !streq(c->path, img->path) ||
                    c->st.st_dev != img->st.st_dev || c->st.st_ino != img->st.st_ino ||
                    c->st.st_size != img->st.st_size || c->st.st_mtim.tv_sec != img->st.st_mtim.tv_sec ||
                    c->st.st_mtim.tv_nsec != img->st.st_mtim.tv_nsec || c->stamp != img->stamp ||
                    c->judged_by != judged_by)
                        continue;
                /* Its loop device must still read that file (watch.h): a backing file swapped
                 * with LOOP_CHANGE_FD keeps the image's identity but not what the layer reads. */
                if (c->loop_devnum != 0) {
                        uint64_t seq;

                        if (watch_read_diskseq(c->loop_devnum, &seq) < 0 || seq != c->loop_diskseq) {
                                log_debug("Not reusing the mount of %s: its loop device changed media.", img->path);
                                continue;
                        }
                }
                fd = e->kept ? TAKE_FD(e->kept->images[i].root_fd) : fcntl(c->root_fd, F_DUPFD_CLOEXEC, 3);
                if (fd < 0)
                        return false;
                img->root_fd = fd;
                img->kind = c->kind;
                img->hierarchies = c->hierarchies;
                img->usr_partition = c->usr_partition;
                img->verity = c->verity;
                img->signed_valid = c->signed_valid;
                img->judged_by = judged_by;
                /* What its release file asked of the service manager and the units it ships
                 * (the same file: the same answer), for the journal and the next plan. */
                img->reload_manager = c->reload_manager;
                img->reload_manager_invalid = c->reload_manager_invalid;
                strv_free(img->restart_units);
                strv_free(img->reload_or_restart_units);
                strv_free(img->shipped_units);
                strv_free(img->wanted_units);
                img->restart_units = img->reload_or_restart_units = img->shipped_units = img->wanted_units = NULL;
                /* The root hash it was verified against, for the journal (not the one discovery
                 * read: a disk image's comes from its partitions). */
                free(img->roothash);
                img->roothash = c->roothash ? strdup(c->roothash) : NULL;
                free(img->fstype);
                img->fstype = c->fstype ? strdup(c->fstype) : NULL;
                if ((c->roothash && !img->roothash) || (c->fstype && !img->fstype) || strv_copy(c->restart_units, &img->restart_units) < 0 ||
                    strv_copy(c->reload_or_restart_units, &img->reload_or_restart_units) < 0 ||
                    strv_copy(c->shipped_units, &img->shipped_units) < 0 ||
                    strv_copy(c->wanted_units, &img->wanted_units) < 0) {
                        img->root_fd = safe_close(img->root_fd);
                        return false; /* probed anew */
                }
                /* The entry's id, once reused: the daemon keeps that entry (not for the kept
                 * layers, which are not the daemon's). */
                img->cache_id = e->kept ? 0 : c->cache_id;
                img->kept_clone = e->kept;
                img->loop_devnum = c->loop_devnum;
                img->loop_diskseq = c->loop_diskseq;
                img->backing = c->backing;
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
        if (!kernel_has(KERNEL_DETACHED_LAYERS)) {
                image_list_free(images);
                e->probed_valid = true; /* an empty cache */
                return;
        }
        for (size_t i = 0; i < images->n; i++) {
                Image *img = &images->images[i];
                if (img->verdict == IMAGE_COMPATIBLE && img->hierarchies != 0)
                        continue;
                image_release(img);
        }
        e->probed = *images;
        *images = (ImageList) {};
        e->probed_valid = true;
}

/* The host's os-release, as far as the verdicts read it. */
static void stamp_add_release(uint64_t *stamp, const Release *host) {
        stamp_add_string(stamp, strempty(host->id));
        stamp_add_u64(stamp, strv_length(host->id_like));
        STRV_FOREACH(s, host->id_like)
                stamp_add_string(stamp, *s);
        stamp_add_string(stamp, strempty(host->version_id));
        for (int k = 0; k < _IMAGE_CLASS_MAX; k++) {
                stamp_add_string(stamp, strempty(host->level[k]));
                stamp_add_u64(stamp, host->scope[k] ? strv_length(host->scope[k]) + 1 : 0);
                STRV_FOREACH(s, host->scope[k])
                        stamp_add_string(stamp, *s);
        }
        stamp_add_string(stamp, strempty(host->architecture));
        stamp_add_u64(stamp, host->initrd);
}

/* Probes the images of l, discovered by the caller. */
static int probe_all(Engine *e, ImageList *l, const EngineOptions *o) {
        _cleanup_release_ Release host = {};
        _cleanup_free_ char *cert_display = NULL;
        uint64_t judged_by;
        ProbeContext ctx;
        _cleanup_free_ Image **pending = NULL;
        _cleanup_free_ int *fds = NULL;
        size_t n_pending = 0, failed = 0;
        int facts_fd, r;

        r = engine_facts(e, &facts_fd);
        if (r < 0)
                return r;
        r = release_read_host(facts_fd, &host);
        if (r < 0)
                return engine_fail(e, ENGINE_ERROR_FAILED, r,
                                   "Failed to read the os-release of %s (usr/lib/os-release or etc/os-release): %m", e->root);

        cert_display = path_join(e->root, e->config.trusted_dir);
        if (!cert_display)
                return -ENOMEM;
        ctx = (ProbeContext) {
                .root_fd = e->root_fd,
                .host = &host,
                .hierarchies = e->hierarchies,
                .hierarchy_class = e->hierarchy_class,
                .force = o && o->force,
                .mount_attrs = {
                        [IMAGE_CLASS_SYSEXT] = engine_class_noexec(&e->config, o, IMAGE_CLASS_SYSEXT) ? MOUNT_ATTR_NOEXEC : 0,
                        [IMAGE_CLASS_CONFEXT] = engine_class_noexec(&e->config, o, IMAGE_CLASS_CONFEXT) ? MOUNT_ATTR_NOEXEC : 0,
                },
                .cert_dir = e->config.trusted_dir,
                .cert_root_fd = facts_fd,
                .cert_display = cert_display,
                .use_dm = kernel_has(KERNEL_DEVICE_MAPPER),
        };
        effective_policies(e, o, ctx.policy);
        /* And the host's os-release: a mount kept between runs (layers.h) must not carry a
         * verdict made against another. */
        judged_by = config_stamp(e, facts_fd, ctx.policy, ctx.force);
        stamp_add_release(&judged_by, &host);
        /* Each image up to its mount; the mounts of plain erofs images then all at once, on
         * several threads (image_probe_mounted_all()). */
        pending = calloc(l->n ?: 1, sizeof(Image *));
        fds = calloc(l->n ?: 1, sizeof(int));
        if (!pending || !fds)
                return -ENOMEM;
        for (size_t i = 0; i < l->n; i++) {
                int fd = -EBADF;

                r = stop_if_requested(e);
                if (r < 0)
                        goto finish;
                if (cache_lookup(e, &l->images[i], ctx.mount_attrs[l->images[i].klass] != 0, judged_by))
                        continue;
                l->images[i].judged_by = judged_by;
                r = image_probe_begin(&l->images[i], &ctx, &fd);
                if (r < 0) {
                        r = engine_fail(e, ENGINE_ERROR_FAILED, r, "Failed to probe %s: %m", l->images[i].path);
                        goto finish;
                }
                if (r > 0) {
                        pending[n_pending] = &l->images[i];
                        fds[n_pending++] = fd;
                }
        }
#ifdef SYSEXTD_TEST_HOOKS
        testhook_point("probe-mounts", (long) n_pending);
#endif
        /* (It checks for a stop itself, before each image.) */
        r = image_probe_mounted_all(pending, fds, n_pending, &ctx, &failed);
        if (r == -EINTR)
                r = engine_fail(e, ENGINE_ERROR_FAILED, EINTR, "Interrupted; nothing was changed.");
        else if (r < 0 && failed < n_pending)
                r = engine_fail(e, ENGINE_ERROR_FAILED, r, "Failed to probe %s: %m", pending[failed]->path);
        else if (r < 0)
                r = engine_fail(e, ENGINE_ERROR_FAILED, r, "Failed to probe the images: %m");
finish:
        for (size_t i = 0; i < n_pending; i++)
                safe_close(fds[i]);
        return r < 0 ? r : 0;
}

/* probe_all(), reusing the image mounts the last run in process kept (layers.h) for the files
 * found again as the journal recorded them, unless the daemon saw one written meanwhile
 * (watch.h: a write whose time was set back keeps the file's identity). */
static int probe_kept(Engine *e, const Journal *j, ImageList *images, const EngineOptions *o) {
        _cleanup_(layers_fetched_free) ImageList kept = {};
        _cleanup_(watch_change_list_done) WatchChangeList changed = {};
        int r;

        if (e->keep_layers && !e->cache && kernel_has(KERNEL_DETACHED_LAYERS) && e->layers_ns < 0 &&
            layers_open(e->journal_fd, j->generation, &e->layers_ns) > 0) {
                r = layers_fetch(e->layers_ns, &j->images, images, &kept);
                if (r < 0)
                        return engine_fail(e, ENGINE_ERROR_FAILED, r, "Failed to reuse the image mounts kept under %s/%s/layers: %m",
                                           e->root, JOURNAL_DIR);
                if (kept.n > 0 && watch_changes_load(e->journal_fd, j, &changed) >= 0)
                        for (size_t i = 0; i < kept.n; i++) {
                                const WatchChange *c = watch_change_find(&changed, kept.images[i].path);
                                if (c && IN_SET(c->how, WATCH_MEDIA_CHANGED, WATCH_MODIFIED))
                                        kept.images[i].root_fd = safe_close(kept.images[i].root_fd);
                        }
                e->kept = &kept;
        }
        r = probe_all(e, images, o);
        e->kept = NULL;
        return r;
}

/* After a transition that changed the trees: the mounts of their images are kept for the next
 * run in process (layers.h), or, by anyone else and after an unmerge, those kept are dropped.
 * fresh: the staging worker's emptied namespace, when none was kept yet. */
static void keep_layers(Engine *e, const EngineOptions *o, EngineVerb verb, int fresh, uint64_t generation) {
        _cleanup_free_ Image **keep = NULL;
        int ns = e->layers_ns >= 0 ? e->layers_ns : fresh;
        size_t n = 0;

        if (e->keep_layers && verb != ENGINE_UNMERGE && ns >= 0 && (keep = calloc(e->probed.n ?: 1, sizeof(Image *))))
                for (size_t i = 0; i < e->probed.n; i++) {
                        Image *img = &e->probed.images[i];

                        /* Mounted without attributes (ProbeContext.mount_attrs). */
                        if (layers_image_eligible(img) && (img->root_fd >= 0 || img->kept_dev != 0) &&
                            !engine_class_noexec(&e->config, o, img->klass))
                                keep[n++] = img;
                }
        if (n > 0)
                (void) layers_keep(e->journal_fd, e->root, ns, ns == fresh, generation, keep, n);
        else
                (void) layers_drop(e->journal_fd);
}

/* Every image of the classes o covers, each class's in its search directories. */
static int discover_all(Engine *e, const EngineOptions *o, bool all_versions, ImageList *ret) {
        _cleanup_image_list_ ImageList all = {};
        int r;

        for (int k = 0; k < _IMAGE_CLASS_MAX; k++) {
                _cleanup_image_list_ ImageList l = {};

                if (!engine_options_cover(o, k))
                        continue;
                r = image_discover_ex(e->root_fd, e->root, e->config.classes[k].search_dirs, k, all_versions, &l);
                if (r >= 0)
                        r = image_list_append(&all, &l);
                if (r < 0)
                        return engine_fail(e, ENGINE_ERROR_FAILED, r, "Failed to look for %s images under %s: %m",
                                           image_class_to_string(k), e->root);
        }
        *ret = all;
        all = (ImageList) {};
        return 0;
}

int engine_discovery_fingerprint(Engine *e, uint64_t *ret) {
        uint64_t fp = STAMP_INIT;

        for (int k = 0; k < _IMAGE_CLASS_MAX; k++) {
                uint64_t one;
                int r = image_discovery_fingerprint(e->root_fd, e->config.classes[k].search_dirs, e->config.trusted_dir, &one);
                if (r < 0)
                        return r;
                stamp_add_u64(&fp, one);
        }
        *ret = fp ?: 1;
        return 0;
}

int engine_list(Engine *e, const EngineOptions *o, ImageList *ret) {
        _cleanup_image_list_ ImageList l = {};
        int r;

        {
                _cleanup_journal_ Journal j = {};

                /* What a refresh would merge: the pinned versions (a snapshot of the pins). */
                (void) engine_history(e, false, &j);
                r = discover_all(e, o, j.pins.n > 0, &l);
                if (r < 0)
                        return r;
                if (j.pins.n > 0) {
                        r = pins_apply(&l, &j.pins, o && o->classes ? o->classes & IMAGE_CLASS_ALL : IMAGE_CLASS_ALL, NULL);
                        if (r < 0)
                                return r;
                }
        }
        r = probe_all(e, &l, o);
        engine_facts_close(e);
        if (r < 0)
                return r;
#ifdef SYSEXTD_TEST_HOOKS
        testhook_point("list-probed", (long) l.n);
#endif
        /* list reports, it does not hold anything. */
        for (size_t i = 0; i < l.n; i++)
                image_release(&l.images[i]);
        *ret = l;
        l = (ImageList) {};
        return 0;
}

/* Where the upper directories are: outside every hierarchy (of either class) and every
 * search directory, one per hierarchy, owned by root (mutable_check_placement). */
static int check_mutable_placement(Engine *e, const HierarchyState *states, size_t n, const MutableSetup *mutables) {
        _cleanup_free_ char *msg = NULL;
        _cleanup_strv_free_ char **forbidden = NULL;
        _cleanup_free_ char **paths = NULL;
        int r;

        paths = calloc(n + 1, sizeof(char *));
        if (!paths)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++)
                paths[i] = states[i].path;
        for (int k = 0; k < _IMAGE_CLASS_MAX; k++)
                STRV_FOREACH(sd, e->config.classes[k].search_dirs) {
                        _cleanup_close_ int fd = openat_resolve(e->root_fd, *sd, O_PATH | O_DIRECTORY, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
                        char *p = fd >= 0 ? path_of_fd(fd) : path_join(e->root, *sd);

                        if (strv_push(&forbidden, p) < 0) /* frees p */
                                return -ENOMEM;
                }
        r = mutable_check_placement(mutables, paths, n, forbidden, &msg);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return engine_fail(e, ENGINE_ERROR_FAILED, r, "%s Nothing was changed.", msg ?: "Mutable mode failed.");
        return 0;
}

/* The mutable set-up of every hierarchy a merge or refresh covers (MUTABLE_NO for the rest). */
static int prepare_mutables(Engine *e, const EngineOptions *o, HierarchyState *states, size_t n, PlanHierarchy *views,
                            MutableSetup *mutables, const Journal *j) {
        bool writing = false; /* some tree of this transition has an upper or imported directory */
        int r;

        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *msg = NULL;
                _cleanup_close_ int fd = -EBADF;
                struct stat st;
                bool have_st = false;

                if (views[i].skip)
                        continue;
                if (states[i].exists) {
                        fd = hierarchy_open(e->root_fd, states[i].name);
                        have_st = fd >= 0 && fstat(fd, &st) >= 0;
                }
                r = mutable_prepare(e->root_fd, e->root, states[i].name, states[i].path, have_st ? &st : NULL,
                                    engine_class_mutable(&e->config, o, views[i].klass), &mutables[i], &msg);
                if (r == -ENOMEM)
                        return r;
                if (r < 0)
                        return engine_fail(e, ENGINE_ERROR_FAILED, r, "%s Nothing was changed.", msg ?: "Mutable mode failed.");
                views[i].mutable = mutables[i].d;
        }
        r = check_mutable_placement(e, states, n, mutables);
        if (r < 0)
                return r;
        /* A writable overlay from source "sysextd" that no record proves ours (its record was
         * lost) may write to any upper directory and use any work directory of ours: no
         * writable tree is built while it is there, and no work directory is removed. */
        for (size_t i = 0; i < n; i++)
                writing = writing || mutables[i].d.upper != MUTABLE_UPPER_NONE || mutables[i].d.import_dir;
        for (size_t k = 0; k < n; k++)
                for (size_t s = 0; s < states[k].stack.n; s++) {
                        if (states[k].roles[s] != STACK_UNRECORDED || !states[k].stack.entries[s].sb_writable)
                                continue;
                        if (writing && s == states[k].stack.n - 1)
                                return engine_fail(e, ENGINE_ERROR_FOREIGN_MOUNT, EBUSY,
                                                   "%s has a writable overlay from source 'sysextd' that sysextd has no record of (its record was lost): it may write to the same upper directory, so no writable tree is built while it is mounted. Unmount it (umount -l %s, after the processes that use it are done) and run the command again. Nothing was changed.",
                                                   states[k].path, states[k].path);
                        if (writing)
                                return engine_fail(e, ENGINE_ERROR_FOREIGN_MOUNT, EBUSY,
                                                   "%s has a writable overlay from source 'sysextd' that sysextd has no record of (its record was lost), mount %" PRIu64 ", below the top of the hierarchy: it may write to the same upper directory, so no writable tree is built while it is mounted. Nothing was changed.",
                                                   states[k].path, states[k].stack.entries[s].id);
                        return 0;
                }
        /* Work directories no tree of ours uses any more (a crash, an interrupted swap). */
        for (size_t i = 0; i < n; i++)
                if (!views[i].skip)
                        mutable_gc(&mutables[i], &j->trees);
        return 0;
}

/* Creates the directories of hierarchies the plan builds although they do not exist, and
 * inspects them again. */
static int create_hierarchies(Engine *e, Journal *j, HierarchyState *states, PlanHierarchy *views, const Plan *plan,
                              size_t n) {
        for (size_t i = 0; i < n; i++) {
                _cleanup_close_ int fd = -EBADF;
                JournalHierarchy *jh;
                int r;

                if (!plan->hierarchies[i].create)
                        continue;
                fd = mkdir_p_in_root(e->root_fd, states[i].name, 0755);
                if (fd < 0)
                        return engine_fail(e, ENGINE_ERROR_FAILED, fd, "Failed to create hierarchy mount point '%s': %m; nothing was changed.",
                                           states[i].path);
                log_info("Created %s, which did not exist, for the extensions that have content for it.", states[i].path);
                hierarchy_state_done(&states[i]);
                r = hierarchy_inspect(e->root_fd, e->root, e->hierarchies[i], j, &states[i]);
                if (r < 0)
                        return engine_fail(e, ENGINE_ERROR_FAILED, r, "Failed to inspect %s/%s: %m", e->root, e->hierarchies[i]);
                jh = journal_find_hierarchy(j, states[i].name);
                stack_analyze(&states[i], jh ? jh->tree : NULL, &views[i].view);
        }
        return 0;
}

/* What a tree depends on besides its images: the policy and certificates, and per class the
 * mount options, the mutable mode and its directories. */
static uint64_t transition_stamp(Engine *e, int facts_fd, const EngineOptions *o, const MutableSetup *mutables, size_t n) {
        ImagePolicy policy[_IMAGE_CLASS_MAX];
        uint64_t stamp;

        effective_policies(e, o, policy);
        stamp = config_stamp(e, facts_fd, policy, false);

        for (int k = 0; k < _IMAGE_CLASS_MAX; k++) {
                stamp_add_u64(&stamp, class_attrs(e, o, k));
                stamp_add_string(&stamp, strempty(e->config.classes[k].overlay_options));
        }
        for (size_t i = 0; i < n; i++)
                stamp_add_u64(&stamp, mutables[i].stamp);
        return stamp;
}

/* Why a transition had nothing to do; a merge that found no image at all, or only
 * incompatible ones, is no error (as with systemd-sysext 252, 257 and main), but its callers
 * can tell (ENGINE_ERROR_NO_IMAGES or ENGINE_ERROR_NO_SUITABLE_IMAGES with r = 0). */
static void report_nothing_to_do(Engine *e, EngineVerb verb, const Plan *plan, bool unchanged) {
        if (unchanged)
                log_info("Extensions under %s are unchanged, nothing to do: skipping extension refresh because no change was found, use --always-refresh=yes to always do a refresh.",
                         e->root);
        else if (verb == ENGINE_UNMERGE)
                log_info("No extensions are merged under %s, nothing to do.", e->root);
        else if (plan->no_images && verb == ENGINE_MERGE) {
                free(e->result.message);
                e->result.message = NULL;
                if (plan->n_incompatible == 0)
                        e->result.message = strdup("No extensions found.");
                else if (asprintf(&e->result.message,
                                  "No suitable extensions found (%zu ignored due to incompatible image(s)); nothing was merged, use --force to merge them anyway.",
                                  plan->n_incompatible) < 0)
                        e->result.message = NULL;
                e->result.error = plan->n_incompatible > 0 ? ENGINE_ERROR_NO_SUITABLE_IMAGES : ENGINE_ERROR_NO_IMAGES;
                log_info("%s", strna(e->result.message));
        } else if (plan->no_images && plan->n_incompatible + plan->n_refused > 0)
                log_info("No suitable extensions found (%zu ignored due to incompatible image(s), %zu refused); nothing is merged.",
                         plan->n_incompatible, plan->n_refused);
        else if (plan->no_images)
                log_info("No extensions found.");
        else
                log_info("Nothing to do under %s.", e->root);
}

static int log_using(const ImageList *images) {
        _cleanup_strv_free_ char **used = NULL;
        _cleanup_free_ char *joined = NULL, *safe = NULL;

        for (size_t i = 0; i < images->n; i++)
                if (images->images[i].verdict == IMAGE_COMPATIBLE && strv_extend(&used, images->images[i].name) < 0)
                        return -ENOMEM;
        joined = used ? strv_join(used, "', '") : NULL;
        if (joined)
                log_info("Using extensions '%s'.", string_safe(joined, &safe));
        return 0;
}

static unsigned covered_classes(const EngineOptions *o) {
        return o->classes ? o->classes & IMAGE_CLASS_ALL : IMAGE_CLASS_ALL;
}

/* What the planner sees of each hierarchy: its class, whether this call covers it, and its
 * stack read against the journal's record.  A hierarchy that is a symlink is refused. */
static int analyze_hierarchies(Engine *e, const EngineOptions *o, Journal *j, HierarchyState *states, size_t n,
                               PlanHierarchy **ret, bool *ret_any_live) {
        _cleanup_free_ PlanHierarchy *views = calloc(n ?: 1, sizeof(PlanHierarchy));
        bool any_live = false;

        if (!views)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                JournalHierarchy *jh = journal_find_hierarchy(j, states[i].name);

                views[i].state = &states[i];
                views[i].klass = e->hierarchy_class[i];
                views[i].skip = !engine_options_cover(o, e->hierarchy_class[i]);
                if (views[i].skip)
                        continue;
                if (states[i].is_symlink)
                        return engine_fail(e, ENGINE_ERROR_FAILED, ELOOP,
                                           "%s is a symbolic link; sysextd merges only into real directories (resolve it in the configuration's Hierarchies=).",
                                           states[i].path);
                stack_analyze(&states[i], jh ? jh->tree : NULL, &views[i].view);
                if (views[i].view.live || views[i].view.covered)
                        any_live = true;
        }
        *ret = TAKE_PTR(views);
        *ret_any_live = any_live;
        return 0;
}

/* Step 4: the images, probed unless a refresh finds them (and everything else that goes into
 * a tree: stamp) unchanged. */
static int gather_images(Engine *e, const EngineOptions *o, Journal *j, const Generation *target, const MutableSetup *mutables,
                         size_t n, EngineVerb verb, bool any_live, ImageList *images, uint64_t *ret_stamp, bool *ret_unchanged,
                         bool *ret_pins_changed) {
        uint64_t stamp;
        bool unchanged;
        int facts_fd, r;

        /* Every version of every image when a rollback or a pin chooses among them. */
        r = discover_all(e, o, target || j->pins.n > 0, images);
        if (r < 0)
                return r;
        if (target) {
                _cleanup_image_list_ ImageList chosen = {};
                _cleanup_free_ char *msg = NULL;
                const Image *missing = NULL;

                r = generation_select(images, target, &chosen, &missing);
                if (r == -ENOENT) {
                        r = generation_missing_message(target->generation, missing, &msg);
                        if (r < 0)
                                return r;
                        return engine_fail(e, ENGINE_ERROR_IMAGE_REFUSED, ENOENT, "%s", msg);
                }
                if (r < 0)
                        return r;
                image_list_free(images);
                *images = chosen;
                chosen = (ImageList) {};
        } else if (j->pins.n > 0) {
                _cleanup_strv_free_ char **notes = NULL;

                r = pins_apply(images, &j->pins, covered_classes(o), &notes);
                if (r < 0)
                        return r;
                if (r > 0)
                        *ret_pins_changed = true;
                STRV_FOREACH(note, notes)
                        log_info("%s", *note);
                for (size_t i = 0; i < j->pins.n; i++)
                        log_info("Keeping %s at %s%s, pinned by the rollback to generation %" PRIu64 " (sysextd rollback --unpin releases it).",
                                 j->pins.pins[i].name, j->pins.pins[i].version ? "version " : "none",
                                 strempty(j->pins.pins[i].version), j->pins.pins[i].generation);
        }
        r = engine_facts(e, &facts_fd);
        if (r < 0)
                return r;
        stamp = transition_stamp(e, facts_fd, o, mutables, n);
        /* --force is no part of the comparison (as with systemd-sysext): the same images are
         * the same, so a plain refresh keeps what a forced one merged; but --force on trees
         * built without it may merge more, so it is no "unchanged". */
        unchanged = verb == ENGINE_REFRESH && !target && !o->always_refresh && !j->incomplete && j->config_stamp == stamp && any_live &&
                    (!o->force || j->forced) && plan_images_unchanged(images, &j->images, covered_classes(o));
        /* A live layer that changed under the tree while its file kept its identity (its loop
         * device's backing file swapped, a write whose time was set back: watch.h) is no
         * "unchanged": it is probed anew, never reused. */
        if (unchanged) {
                _cleanup_(watch_change_list_done) WatchChangeList changed = {};

                /* A file replaced or deleted is judged by identity above (a verity image's copy
                 * with the same root hash is the same image). */
                if (watch_scan(e->root_fd, e->root, e->journal_fd, j, &changed) >= 0)
                        for (size_t i = 0; unchanged && i < changed.n; i++)
                                if (IN_SET(changed.changes[i].how, WATCH_MEDIA_CHANGED, WATCH_MODIFIED)) {
                                        log_info("%s changed under the live tree (%s); refreshing.", changed.changes[i].path,
                                                 changed.changes[i].description);
                                        unchanged = false;
                                }
        }
        if (!unchanged) {
                r = probe_kept(e, j, images, o);
                if (r < 0)
                        return r;
                for (size_t i = 0; i < images->n; i++)
                        log_verdict(&images->images[i]);
        }
        /* A rollback merges exactly what the generation had: an image judged otherwise now
         * stops it, before anything changes. */
        for (size_t i = 0; target && i < images->n; i++)
                if (images->images[i].verdict != IMAGE_COMPATIBLE) {
                        _cleanup_free_ char *safe = NULL;
                        return engine_fail(e, ENGINE_ERROR_IMAGE_REFUSED, EPERM,
                                           "Cannot roll back to generation %" PRIu64 ": image %s (%s) is no longer accepted: %s. Nothing was changed.",
                                           target->generation, images->images[i].name, images->images[i].path,
                                           string_safe(strna(images->images[i].reason), &safe));
                }
        *ret_stamp = stamp;
        *ret_unchanged = unchanged;
        return 0;
}

/* Step 6: carry the plan out; the units to restart are decided before, while the journal
 * still has the images merged until now, and kept only when the transition changed a tree. */
static int run_plan(Engine *e, EngineVerb verb, const EngineOptions *o, Journal *j, HierarchyState *states,
                    const PlanHierarchy *views, const Plan *plan, ImageList *images, MutableSetup *mutables,
                    uint64_t delay, bool *ret_changed, int *ret_record_error) {
        static const ImageList none = {};
        ExecuteOptions xo = { .classes = covered_classes(o), .mutables = mutables, .delay_usec = delay, .sweep_ns = -EBADF,
                              .generations_keep = e->config.generations, .record_error = ret_record_error };
        TransitionContext ctx = step_context(e);
        UnitActions units = {};
        _cleanup_close_ int fresh = -EBADF;
        /* The staging worker ends (tears its namespace down) while the swap goes on; it is
         * reaped before the kept layers take its namespace, and always before the lock goes. */
        _cleanup_(staging_reap) pid_t worker = 0;
        int r;

        xo.staging_pid = &worker;
        xo.release = &e->release;
        xo.old_trees = &e->old_trees;
        if (e->keep_layers)
                xo.sweep_ns = e->layers_ns;
        for (int k = 0; k < _IMAGE_CLASS_MAX; k++) {
                xo.attrs[k] = class_attrs(e, o, k);
                xo.options[k] = e->config.classes[k].overlay_options;
        }
        r = unit_actions_plan(&j->images, verb == ENGINE_UNMERGE ? &none : images, xo.classes, &units);
        if (r < 0)
                return r;
        /* The staging worker's namespace, to keep the image mounts in. */
        if (e->keep_layers && e->layers_ns < 0 && verb != ENGINE_UNMERGE && kernel_has(KERNEL_DETACHED_LAYERS))
                xo.layers_ns = &fresh;
        r = execute_transition(&ctx, verb, j, states, views, plan, images, &xo, ret_changed);
        if (r >= 0 && *ret_changed) {
                unit_actions_done(&e->units);
                e->units = units;
        } else
                unit_actions_done(&units);
        if (r >= 0)
                keep_probed(e, images);
        /* Its namespace is emptied once it exited 0; else it is not to be kept. */
        if (fresh >= 0 && !staging_reap(&worker))
                fresh = safe_close(fresh);
        if (r >= 0 && *ret_changed)
                keep_layers(e, o, verb, fresh, j->generation);
        return r;
}

uint64_t engine_delay_usec(const EngineConfig *c, const EngineOptions *o) {
        if (!o || o->delay_usec == ENGINE_DELAY_CONFIG)
                return c->delay_usec;
        if (o->delay_usec == ENGINE_DELAY_DEFAULT)
                return c->delay_usec > 0 ? c->delay_usec : ENGINE_DELAY_FALLBACK_USEC;
        return o->delay_usec;
}

/* A delayed transition: refused, before anything changes, where it cannot be delayed. */
static int check_delay(Engine *e, const EngineOptions *o, EngineVerb verb, const HierarchyState *states,
                       const PlanHierarchy *views, size_t n) {
        if (!kernel_has_mount_beneath())
                return engine_fail(e, ENGINE_ERROR_FAILED, EOPNOTSUPP,
                                   "This kernel cannot mount beneath (MOVE_MOUNT_BENEATH needs Linux 6.5): a transition cannot be delayed. Nothing was changed.");
        for (size_t i = 0; i < n; i++) {
                MutableMode m = engine_class_mutable(&e->config, o, views[i].klass);

                if (views[i].skip)
                        continue;
                if (views[i].view.live && views[i].view.live->writable)
                        return engine_fail(e, ENGINE_ERROR_FAILED, EBUSY,
                                           "Cannot delay the transition of %s: its tree is writable (mutable mode), and a writable tree cannot be delayed (two writable overlays must not share an upper directory). Nothing was changed.",
                                           states[i].path);
                if (verb != ENGINE_UNMERGE && m != MUTABLE_NO && m != MUTABLE_AUTO)
                        return engine_fail(e, ENGINE_ERROR_FAILED, EBUSY,
                                           "Cannot delay the transition of %s: its new tree would be writable (--mutable=%s), and writable trees cannot be delayed. Nothing was changed.",
                                           states[i].path, mutable_mode_to_string(m));
        }
        return 0;
}

/* A rollback's preparation, once the journal is loaded: the generation to go to (*ret_target,
 * pointing into j), the generation live now (for the pins) and the options it runs with: every
 * class, the generation's mutable modes and --force unless the caller said otherwise, and no
 * Delay= (a rollback is never delayed unless asked).  With --unpin: the pins go and *ret_target
 * stays NULL (a plain refresh).  A deadline's rollback when the generation was confirmed
 * meanwhile, or its deadline moved: 0 and nothing to do. */
static int prepare_rollback(Engine *e, Journal *j, const EngineOptions *o, EngineOptions *ro, const Generation **ret_target,
                            Generation *ret_current, bool *ret_nothing) {
        static const int no_modes[_IMAGE_CLASS_MAX] = {};
        _cleanup_free_ char *msg = NULL;
        const Generation *target;
        uint64_t want = o->rollback_to;
        int r;

        *ro = *o;
        ro->classes = 0;
        *ret_target = NULL;
        *ret_nothing = false;
        if (o->unpin) {
                if (j->pins.n == 0)
                        log_info("Nothing is pinned.");
                for (size_t i = 0; i < j->pins.n; i++)
                        log_info("Unpinned %s (pinned by the rollback to generation %" PRIu64 ").", j->pins.pins[i].name,
                                 j->pins.pins[i].generation);
                pin_list_done(&j->pins);
                return 0;
        }
        if (o->deadline) {
                if (j->confirm_generation == 0 || j->confirm_deadline > now_realtime_usec()) {
                        log_info("The generation waiting for confirmation was confirmed, or its deadline moved; no rollback.");
                        *ret_nothing = true;
                        return 0;
                }
                want = j->confirm_target;
                log_warning("Generation %" PRIu64 " was not confirmed in time (sysextd confirm); rolling back to generation %" PRIu64 ".",
                            j->confirm_generation, want);
                if (want == 0)
                        return engine_fail(e, ENGINE_ERROR_FAILED, ENOENT,
                                           "Cannot roll back: generation %" PRIu64 " had no generation before it.", j->confirm_generation);
        }
        r = load_generations(e, e->journal_fd, j);
        if (r < 0)
                return r;
        target = generation_find(j->generations, j->n_generations, j->generation, want, &msg);
        if (!target)
                return msg ? engine_fail(e, ENGINE_ERROR_FAILED, ENOENT, "%s", msg) : -ENOMEM;
        /* What a rollback asked for by a caller may do is what the caller's options say (the
         * daemon authorizes by them): a generation built with --force, or with writable trees
         * where the configuration now says otherwise, is gone back to only when the caller says
         * so.  The deadline's rollback restores what the confirmed refresh was allowed. */
        if (!o->deadline) {
                if (target->forced && !o->force)
                        return engine_fail(e, ENGINE_ERROR_FAILED, EPERM,
                                           "Generation %" PRIu64 " was merged with --force: roll back to it with --force, or to another generation.",
                                           target->generation);
                for (int k = 0; k < _IMAGE_CLASS_MAX; k++)
                        if (o->mutable[k] < 0 && target->mutable[k] >= 0 && target->mutable[k] < _MUTABLE_MAX &&
                            (MutableMode) target->mutable[k] != engine_class_mutable(&e->config, NULL, k))
                                return engine_fail(e, ENGINE_ERROR_FAILED, EPERM,
                                                   "Generation %" PRIu64 " had its %s trees merged with --mutable=%s, which sysextd.conf does not say now: roll back to it with %s--mutable=%s, or to another generation.",
                                                   target->generation, image_class_to_string(k),
                                                   mutable_mode_to_string(target->mutable[k]),
                                                   k == IMAGE_CLASS_CONFEXT ? "--class=confext " : "",
                                                   mutable_mode_to_string(target->mutable[k]));
        }
        for (int k = 0; k < _IMAGE_CLASS_MAX; k++)
                if (ro->mutable[k] < 0)
                        ro->mutable[k] = target->mutable[k];
        ro->force = ro->force || target->forced;
        if (ro->delay_usec == ENGINE_DELAY_CONFIG)
                ro->delay_usec = 0;
        r = generation_from_images(j->generation, 0, no_modes, false, &j->images, ret_current);
        if (r < 0)
                return r;
        log_debug("Rolling back from generation %" PRIu64 " to the images of generation %" PRIu64 ".", j->generation,
                 target->generation);
        *ret_target = target;
        return 0;
}

/* After a transition that changed the trees (whose generation went into the history with the
 * commit's save of state.json, execute.c): a rollback pins what it went to and ends a wait for
 * confirmation, a refresh with --confirm-within= starts or renews one.  Saved at once (a
 * failure to save is logged: the trees are live either way). */
static void record_history(Engine *e, Journal *j, const EngineOptions *o, const Generation *target, const Generation *current,
                           uint64_t before, int record_error) {
        uint64_t now = now_realtime_usec(), to = target ? target->generation : 0;
        _cleanup_(pin_list_done) PinList pins = {};
        bool dirty = false;
        int r = 0;

        /* The generation was recorded with the commit's save (execute.c). */
        if (record_error < 0)
                log_warning("Failed to record generation %" PRIu64 " in the history in %s/%s/%s/: %s", j->generation, e->root,
                            JOURNAL_DIR, JOURNAL_GENERATIONS, strerror(-record_error));
        /* Before the history changes: target points into it. */
        if (target)
                r = pins_for_rollback(current, target, &pins);
        if (r >= 0 && to > 0) {
                pin_list_done(&j->pins);
                j->pins = pins;
                pins = (PinList) {};
                for (size_t i = 0; i < j->pins.n; i++)
                        log_info("Pinned %s at %s%s (rolled back from %s); later refreshes keep it until a newer version than that appears, or sysextd rollback --unpin.",
                                 j->pins.pins[i].name, j->pins.pins[i].version ? "version " : "none",
                                 strempty(j->pins.pins[i].version), j->pins.pins[i].from_version ?: "none");
                journal_confirm_clear(j);
                r = journal_set_rollback(j, now, before, to, o->deadline ? "deadline" : "command", NULL);
                log_info("Rolled back to the images of generation %" PRIu64 ": generation %" PRIu64 " is live.", to, j->generation);
                dirty = true;
        }
        if (r >= 0 && to == 0 && o->confirm_within_usec > 0) {
                if (j->confirm_generation == 0)
                        j->confirm_target = before;
                j->confirm_generation = j->generation;
                j->confirm_since = now;
                j->confirm_deadline = now + o->confirm_within_usec;
                dirty = true;
                {
                        _cleanup_free_ char *until = format_timestamp(j->confirm_deadline);
                        log_info("Generation %" PRIu64 " must be confirmed (sysextd confirm) by %s, or it is rolled back to generation %" PRIu64 ".",
                                 j->generation, strna(until), j->confirm_target);
                }
        }
        /* Nothing else changed (a plain refresh): the commit's save stands. */
        if (r >= 0 && dirty)
                r = journal_save(e->journal_fd, j);
        if (r < 0)
                log_warning("Failed to record the rollback or the wait for confirmation of generation %" PRIu64 " in %s/%s/%s: %s",
                            j->generation, e->root, JOURNAL_DIR, JOURNAL_STATE, strerror(-r));
}

static int transition_locked(Engine *e, EngineVerb verb, const EngineOptions *o) {
        _cleanup_image_list_ ImageList images = {};
        _cleanup_journal_ Journal j = {};
        _cleanup_(generation_done) Generation current = {};
        const Generation *target = NULL;
        EngineOptions ro;
        bool rollback = verb == ENGINE_ROLLBACK, rolling_back = false, loaded = false, pins_changed = false;
        uint64_t before = 0;
        _cleanup_(plan_done) Plan plan = {};
        _cleanup_free_ PlanHierarchy *views = NULL;
        MutableSetup mutables[HIERARCHIES_MAX];
        HierarchyState *states = NULL;
        size_t n = 0;
        uint64_t delay = 0;
        bool strict = o->strict || e->config.strict;
        bool recovered = false, changed = false, unchanged = false, any_live = false;
        uint64_t stamp = 0;
        int record_error = 0, r;

        for (size_t i = 0; i < HIERARCHIES_MAX; i++)
                mutables[i] = (MutableSetup) { .dir_fd = -EBADF, .parent_fd = -EBADF };

        /* 1-3. */
        r = recover_locked(e, &j, &states, &n, &recovered, DELAY_COMMIT_FIRST);
        if (r < 0)
                goto finish;
        loaded = true;
        before = j.generation;
        if (e->recovery_waits) {
                r = engine_fail(e, ENGINE_ERROR_BUSY, EBUSY, "%s Nothing was changed.", e->recovery_waits);
                goto finish;
        }
        /* A rollback is a refresh to the images of an earlier generation (its delayed
         * transition, if one waited, was committed first, above). */
        if (rollback) {
                bool nothing;

                verb = ENGINE_REFRESH;
                r = prepare_rollback(e, &j, o, &ro, &target, &current, &nothing);
                if (r < 0)
                        goto finish;
                if (nothing) {
                        r = 0;
                        goto finish;
                }
                if (o->unpin)
                        pins_changed = true;
                rolling_back = target != NULL;
                o = &ro;
        }

        r = analyze_hierarchies(e, o, &j, states, n, &views, &any_live);
        if (r < 0)
                goto finish;
        if (journal_delayed(&j)) {
                /* Not committed: a foreign mount covers it, or a detach failed (logged). */
                r = engine_fail(e, ENGINE_ERROR_BUSY, EBUSY,
                                "The delayed transition of generation %" PRIu64 " could not be committed first; nothing was changed.",
                                j.pending_generation);
                goto finish;
        }
        delay = engine_delay_usec(&e->config, o);
        if (delay > 0) {
                r = check_delay(e, o, verb, states, views, n);
                if (r < 0)
                        goto finish;
        }

        {
                _cleanup_(plan_done) Plan early = {};
                r = plan_check(&(PlanInput) { .verb = verb, .hierarchies = views, .n_hierarchies = n }, &early);
                if (r < 0)
                        goto finish;
                if (early.error != ENGINE_OK) {
                        r = engine_fail(e, early.error, early.errno_value, "%s", early.message);
                        goto finish;
                }
        }

        if (verb == ENGINE_UNMERGE && !any_live) {
                log_info("No extensions are merged under %s, nothing to do.", e->root);
                r = 0;
                goto finish;
        }

        /* 4. Mutable modes and images. */
        if (verb != ENGINE_UNMERGE) {
                r = prepare_mutables(e, o, states, n, views, mutables, &j);
                if (r < 0)
                        goto finish;
                for (size_t i = 0; delay > 0 && i < n; i++)
                        if (!views[i].skip && (mutables[i].d.upper != MUTABLE_UPPER_NONE || mutables[i].d.import_dir)) {
                                r = engine_fail(e, ENGINE_ERROR_FAILED, EBUSY,
                                                "Cannot delay the transition of %s: its new tree would be writable (mutable mode), and writable trees cannot be delayed. Nothing was changed.",
                                                states[i].path);
                                goto finish;
                        }
                r = gather_images(e, o, &j, target, mutables, n, verb, any_live, &images, &stamp, &unchanged, &pins_changed);
                if (r < 0)
                        goto finish;
        }

        /* 5. Plan. */
        r = plan_transition(&(PlanInput) {
                                    .verb = verb,
                                    .always_refresh = o->always_refresh,
                                    .strict = strict,
                                    .mount_beneath = kernel_has_mount_beneath(),
                                    .allow_degraded = e->config.allow_degraded,
                                    .hierarchies = views,
                                    .n_hierarchies = n,
                                    .images = &images,
                                    .unchanged = unchanged,
                            },
                            &plan);
        if (r < 0)
                goto finish;
        if (plan.error != ENGINE_OK) {
                r = engine_fail(e, plan.error, plan.errno_value, "%s", plan.message);
                goto finish;
        }
        STRV_FOREACH(note, plan.dropped)
                log_warning("%s", *note);

        for (size_t i = 0; i < n; i++)
                log_debug("Plan for %s: %s%s.", states[i].path, hierarchy_action_to_string(plan.hierarchies[i].action),
                          plan.hierarchies[i].replace ? " (beneath the live tree)" : "");
        if (!plan.any_work) {
                if (target)
                        log_info("The live trees have the images of generation %" PRIu64 " already; nothing to do.",
                                 target->generation);
                else
                        report_nothing_to_do(e, verb, &plan, unchanged);
                if (o->confirm_within_usec > 0)
                        log_info("Nothing changed, so nothing waits for confirmation.");
                r = 0;
                goto finish;
        }
        if (plan.no_images && verb == ENGINE_MERGE)
                log_info("No extensions found, proceeding in mutable mode.");

        if (verb != ENGINE_UNMERGE) {
                r = log_using(&images);
                if (r >= 0)
                        r = create_hierarchies(e, &j, states, views, &plan, n);
                if (r < 0)
                        goto finish;
                for (size_t i = 0; i < n; i++)
                        if (plan.hierarchies[i].action == ACTION_BUILD && !views[i].view.live && !states[i].parent_propagates)
                                log_warning("%s sits on a mount that does not propagate (private): the merged tree will not reach other mount namespaces.",
                                            states[i].path);
                j.config_stamp = stamp;
                j.forced = o && o->force;
        }

        /* What the history's record of the new generation (made with the commit's save of
         * state.json, execute.c) says of it besides its images. */
        j.when = now_realtime_usec();
        for (int k = 0; k < _IMAGE_CLASS_MAX; k++)
                j.mutable[k] = engine_class_mutable(&e->config, o, k);

        /* 6. */
        r = stop_if_requested(e);
        if (r >= 0)
                r = run_plan(e, verb, o, &j, states, views, &plan, &images, mutables, delay, &changed, &record_error);

finish:
        if (r >= 0 && changed)
                record_history(e, &j, o, target, &current, before, record_error);
        else if (r >= 0 && pins_changed) {
                int k = journal_save(e->journal_fd, &j);
                if (k < 0)
                        log_warning("Failed to record the pins in %s/%s/%s: %s", e->root, JOURNAL_DIR, JOURNAL_STATE, strerror(-k));
        } else if (r >= 0 && rollback && o->deadline && target) {
                /* Nothing to do: the live trees are what the deadline goes back to.  The wait
                 * ends all the same. */
                int k;

                journal_confirm_clear(&j);
                k = journal_set_rollback(&j, now_realtime_usec(), j.generation, target->generation, "deadline", NULL);
                if (k >= 0)
                        k = journal_save(e->journal_fd, &j);
                if (k < 0)
                        log_warning("Failed to record the end of the wait for confirmation in %s/%s/%s: %s", e->root, JOURNAL_DIR,
                                    JOURNAL_STATE, strerror(-k));
        } else if (r < 0 && rollback && o->deadline && loaded) {
                /* A deadline's rollback that failed is not tried again and again: the wait
                 * ends, and status says why the rollback did not happen. */
                int k;

                journal_confirm_clear(&j);
                k = journal_set_rollback(&j, now_realtime_usec(), j.generation, target ? target->generation : 0, "deadline",
                                         e->result.message ?: "the rollback failed");
                if (k >= 0)
                        k = journal_save(e->journal_fd, &j);
                if (k < 0)
                        log_warning("Failed to record the failed rollback in %s/%s/%s: %s", e->root, JOURNAL_DIR, JOURNAL_STATE,
                                    strerror(-k));
        }
        e->result.changed = recovered || changed;
        e->result.recovered = recovered;
        if (r < 0)
                e->result.delayed = false;
        e->result.generation = j.generation;
        /* A delayed transition counts too: its trees are in place beneath the old ones. */
        if (r >= 0 && (changed || e->result.delayed))
                history_log(rolling_back             ? HISTORY_ROLLBACK
                            : verb == ENGINE_MERGE   ? HISTORY_MERGE
                            : verb == ENGINE_REFRESH ? HISTORY_REFRESH
                                                     : HISTORY_UNMERGE,
                            j.generation, e->root, &j.images, e->result.delayed);
        if (r >= 0)
                update_followers(e, &j);
        hierarchy_states_free(states, n);
        for (size_t i = 0; i < HIERARCHIES_MAX; i++)
                mutable_setup_done(&mutables[i]);
        return r < 0 ? r : changed;
}

int engine_transition(Engine *e, EngineVerb verb, const EngineOptions *o) {
        static const EngineOptions none = ENGINE_OPTIONS_INIT;
        int r;

        engine_result_done(&e->result);
        image_list_free(&e->probed);
        unit_actions_done(&e->units);
        e->probed_valid = false;

        r = engine_lock(e);
        if (r >= 0) {
                mount_table_cache_begin();
                if (verb != ENGINE_UNMERGE)
                        engine_facts_start(e);
                r = transition_locked(e, verb, o ?: &none);
                mount_table_cache_end();
        }
        /* The base's helper first: it was started under the lock, and is joined (if its answer was
         * not taken) before the lock goes. */
        engine_facts_close(e);
        e->layers_ns = safe_close(e->layers_ns);
        fd_release_finish(&e->release);
        fd_release_finish(&e->old_trees);
        engine_unlock(e);
        /* Images that ship units: the running system's service manager, once the trees are in
         * place and the lock is given back (never for another root, never with --no-reload). */
        /* A delayed transition: the units follow its commit, not its start (left to the
         * administrator: sysextd(8), DELAYED UPDATES). */
        if (r > 0 && !e->result.delayed && !(o && o->no_reload) && streq(e->root, "/"))
                (void) unit_actions_run(&e->units);
        if (r < 0 && !e->result.message)
                engine_fail(e, ENGINE_ERROR_FAILED, r, "Transition failed: %m");
        e->result.r = r;
        return r;
}

void engine_status_done(EngineStatus *s) {
        for (size_t i = 0; i < s->n_hierarchies; i++) {
                free(s->hierarchies[i].path);
                strv_free(s->hierarchies[i].extensions);
        }
        free(s->hierarchies);
        journal_done(&s->journal);
        follower_list_done(&s->followers);
        delay_scan_done(&s->delayed);
        watch_change_list_done(&s->changed);
        *s = (EngineStatus) {};
}

/* The hierarchies of a delayed transition as delay.h sees them (the paths point into states). */
static int delay_hierarchies(Journal *j, const HierarchyState *states, size_t n, DelayHierarchy *ret, size_t *ret_n) {
        size_t k = 0;

        for (size_t i = 0; i < j->n_transitions; i++) {
                const JournalTransition *t = &j->transitions[i];
                const Tree *old = tree_list_find(&j->trees, t->old_tree), *new_tree = tree_list_find(&j->trees, t->new_tree);
                const HierarchyState *h = NULL;

                for (size_t x = 0; x < n; x++)
                        if (streq(states[x].name, t->hierarchy))
                                h = &states[x];
                if (!h || !old || (t->new_tree && !new_tree))
                        continue; /* nothing of ours to wait on there */
                if (k >= HIERARCHIES_MAX * _IMAGE_CLASS_MAX)
                        return -E2BIG;
                ret[k++] = (DelayHierarchy) {
                        .path = h->path,
                        .rel = h->name,
                        .old_dev = old->dev,
                        .new_dev = new_tree ? new_tree->dev : 0,
                        .has_new = new_tree,
                };
        }
        *ret_n = k;
        return 0;
}

/* Whether mount namespace ns follows the host (its hierarchies are below its own root). */
static bool engine_is_followed(Engine *e, uint64_t ns) {
        _cleanup_(follower_list_done) FollowerList l = {};
        bool found = false;

        if (engine_followers(e, &l) < 0)
                return false;
        for (size_t i = 0; i < l.n && !found; i++)
                found = l.followers[i].ns == ns;
        return found;
}

/* The host's side of every hierarchy for namespaces.h: the current tree (ours, with extensions)
 * and the base directory, read below sysextd's trees (base_fd).  The strings point into e
 * and into paths (freed by the caller). */
static int namespace_hierarchies(Engine *e, const Journal *j, int base_fd, NamespaceHierarchy *ret, char ***paths,
                                 size_t *ret_n) {
        size_t n = strv_length(e->hierarchies);

        if (n > NAMESPACE_HIERARCHIES_MAX)
                return -E2BIG;
        for (size_t i = 0; i < n; i++) {
                JournalHierarchy *jh = journal_find_hierarchy((Journal *) j, e->hierarchies[i]);
                const Tree *t = jh && jh->tree ? tree_list_find((TreeList *) &j->trees, jh->tree) : NULL;
                _cleanup_close_ int fd = -EBADF;
                struct stat st;
                char *path = strjoin3(streq(e->root, "/") ? "" : e->root, "/", e->hierarchies[i]);

                if (!path || strv_push(paths, path) < 0) {
                        free(path);
                        return -ENOMEM;
                }
                ret[i] = (NamespaceHierarchy) {
                        .name = e->hierarchies[i],
                        .path = path,
                        .current_dev = t && !t->base_only ? t->dev : 0,
                };
                fd = openat_resolve(base_fd, e->hierarchies[i], O_PATH | O_DIRECTORY | O_CLOEXEC,
                                    RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
                if (fd >= 0 && fstat(fd, &st) >= 0) {
                        ret[i].base_dev = st.st_dev;
                        ret[i].base_ino = st.st_ino;
                        ret[i].base_known = true;
                }
        }
        *ret_n = n;
        return 0;
}

int engine_namespaces(Engine *e, StaleNamespaceList *ret) {
        _cleanup_journal_ Journal j = {};
        _cleanup_close_ int dfd = -EBADF, base = -EBADF;
        _cleanup_strv_free_ char **paths = NULL;
        _cleanup_(follower_list_done) FollowerList followers = {};
        NamespaceHierarchy h[NAMESPACE_HIERARCHIES_MAX];
        size_t n = 0;
        int r;

        r = journal_dir_open(e->root_fd, false, &dfd);
        if (r >= 0) {
                r = load_journal(e, dfd, &j);
                if (r < 0)
                        return r;
                (void) follower_list_load(dfd, &followers);
        } else if (r != -ENOENT)
                return engine_fail(e, ENGINE_ERROR_FAILED, r, "Failed to open %s/%s: %m", e->root, JOURNAL_DIR);
        r = base_root_open(e->root_fd, e->root, &base);
        if (r < 0)
                return engine_fail(e, ENGINE_ERROR_FAILED, r, "Failed to reach %s below sysextd's trees: %m", e->root);
        r = namespace_hierarchies(e, &j, base, h, &paths, &n);
        if (r >= 0)
                r = namespaces_scan(h, n, ret);
        if (r < 0)
                return engine_fail(e, ENGINE_ERROR_FAILED, r, "Failed to look at the mount namespaces: %m");
        for (size_t i = 0; i < ret->n; i++)
                for (size_t k = 0; k < followers.n; k++)
                        if (followers.followers[k].ns == ret->namespaces[i].ns)
                                ret->namespaces[i].followed = true;
        return 0;
}

/* "process 123, foo.service" / "process 123, machine bar" / "process 123": who a namespace is,
 * for messages. */
static char *namespace_who(const StaleNamespace *s) {
        _cleanup_free_ char *safe = NULL;
        char buf[512];

        if (s->unit)
                snprintf(buf, sizeof(buf), "process %i, %s", (int) s->pid, string_safe(s->unit, &safe));
        else if (s->machine)
                snprintf(buf, sizeof(buf), "process %i, machine %s", (int) s->pid, string_safe(s->machine, &safe));
        else
                snprintf(buf, sizeof(buf), "process %i", (int) s->pid);
        return strdup(buf);
}

/* sysextd commit --pid= with no delayed transition: brings the namespace of pid to the host's
 * trees (namespaces.h).  An older tree of ours is proven by a retired record of its superblock
 * (tree.h); none there: it is left alone and nothing changes.  Under the lock, with what is
 * live. */
static int update_namespace(Engine *e, Journal *j, pid_t pid) {
        _cleanup_(stale_namespace_done) StaleNamespace s = {};
        _cleanup_(tree_list_done) TreeList olds = {};
        _cleanup_strv_free_ char **paths = NULL, **dpaths = NULL;
        _cleanup_close_ int base = -EBADF;
        _cleanup_free_ char *who = NULL, *msg = NULL, *prefix = NULL;
        NamespaceHierarchy h[NAMESPACE_HIERARCHIES_MAX];
        DelayHierarchy dh[NAMESPACE_HIERARCHIES_MAX];
        size_t n = 0, n_dh = 0;
        bool follow = false;
        uint64_t own;
        int r;

        r = base_root_open(e->root_fd, e->root, &base);
        if (r < 0)
                return engine_fail(e, ENGINE_ERROR_FAILED, r, "Failed to reach %s below sysextd's trees: %m", e->root);
        r = namespace_hierarchies(e, j, base, h, &paths, &n);
        if (r < 0)
                return engine_fail(e, ENGINE_ERROR_FAILED, r, "Failed to prepare the update: %m");
        r = namespace_look(pid, h, n, &s);
        if (r == -ESRCH)
                return engine_fail(e, ENGINE_ERROR_FAILED, ESRCH, "No such process: %i.", (int) pid);
        if (r < 0)
                return engine_fail(e, ENGINE_ERROR_FAILED, r, "Failed to look at the mount namespace of process %i: %m", (int) pid);
        if (mount_namespace_id(&own) >= 0 && own == s.ns) {
                e->result.message = strdup("The process is in sysextd's own mount namespace: it shows the host's trees.");
                log_info("Process %i is in sysextd's own mount namespace: it shows the host's trees; nothing to do.", (int) pid);
                return 0;
        }
        s.unit = delay_namespace_unit(s.ns, pid);
        who = namespace_who(&s);
        if (!who)
                return -ENOMEM;

        /* Every hierarchy is checked before anything changes. */
        for (size_t i = 0; i < n; i++) {
                const NamespaceTop *t = &s.tops[i];
                _cleanup_(tree_done) Tree old = {};
                _cleanup_free_ char *at = namespace_hierarchy_path(&s, &h[i]), *id = NULL;

                if (!at)
                        return -ENOMEM;
                if (t->view == NAMESPACE_VIEW_OWN)
                        log_info("Mount namespace of %s: %s shows something else (its own); left alone.", who, at);
                if (t->view == NAMESPACE_VIEW_BASE)
                        follow = true;
                if (!IN_SET(t->view, NAMESPACE_VIEW_OLDER, NAMESPACE_VIEW_OLDER_OVER_CURRENT))
                        continue;
                r = tree_retired_find_dev(e->journal_fd, t->dev, &old);
                if (r < 0)
                        return engine_fail(e, ENGINE_ERROR_FAILED, r, "Failed to read the retired trees: %m");
                if (r == 0)
                        return engine_fail(e, ENGINE_ERROR_FOREIGN_MOUNT, EBUSY,
                                           "Mount namespace of %s: %s shows an older sysextd tree not recorded; left alone, nothing was changed.",
                                           who, at);
                if (t->view == NAMESPACE_VIEW_OLDER_OVER_CURRENT) {
                        /* delay.c drops the top there: a copy of that tree with the current one
                         * right beneath, checked again on a pinned fd in the namespace. */
                        if (strv_push(&dpaths, TAKE_PTR(at)) < 0)
                                return -ENOMEM;
                        dh[n_dh++] = (DelayHierarchy) {
                                .path = dpaths[strv_length(dpaths) - 1],
                                .old_dev = t->dev,
                                .new_dev = h[i].current_dev,
                                .has_new = true,
                        };
                        continue;
                }
                /* One-shot follow: the copy there, by the identity it has there, is ours to
                 * replace (checked again right before the swap). */
                follow = true;
                if (random_hex(TREE_ID_LEN / 2, &id) < 0)
                        return -ENOMEM;
                free(old.id);
                old.id = TAKE_PTR(id);
                free(old.hierarchy);
                old.hierarchy = strdup(h[i].name);
                old.unique_id = t->unique_id;
                old.mount_id = t->mount_id;
                old.dev = t->dev;
                old.writable = false;
                free(old.workdir);
                old.workdir = NULL;
                if (!old.hierarchy || tree_list_add(&olds, &old) < 0)
                        return -ENOMEM;
        }
        if (n_dh == 0 && !follow) {
                e->result.message = strdup("The namespace shows the host's trees; nothing to do.");
                log_info("Mount namespace of %s shows the host's trees; nothing to do.", who);
                return 0;
        }
        if (n_dh > 0) {
                r = delay_commit_namespace(pid, dh, n_dh, false, &msg);
                if (r < 0)
                        return engine_fail(e, r == -ESRCH ? ENGINE_ERROR_FAILED : ENGINE_ERROR_FOREIGN_MOUNT, r, "Mount namespace of %s: %s", who,
                                           strna(msg));
                for (size_t k = 0; k < n_dh; k++)
                        log_info("Mount namespace of %s: %s: the older tree was detached, the current one shows.", who, dh[k].path);
        }
        if (follow) {
                if (!s.own_root && !streq(e->root, "/")) {
                        prefix = strdup(e->root + 1);
                        if (!prefix)
                                return -ENOMEM;
                }
                r = follow_once(&(FollowHost) {
                                        .root_fd = e->root_fd,
                                        .root = e->root,
                                        .journal_fd = e->journal_fd,
                                        .base_fd = base,
                                        .hierarchies = e->hierarchies,
                                        .journal = j,
                                        .ns_prefix = prefix,
                                },
                                pid, &olds, &msg);
                if (r < 0)
                        return engine_fail(e, r == -ESRCH ? ENGINE_ERROR_FAILED : ENGINE_ERROR_KERNEL_REFUSED, r,
                                           "Mount namespace of %s: %s", who, strna(msg));
                log_info("Mount namespace of %s: the host's trees of generation %" PRIu64 " placed there (not followed).", who,
                         j->generation);
        }
        return 1;
}

int engine_commit(Engine *e, pid_t pid, const char *unit, bool delayed_only) {
        _cleanup_journal_ Journal j = {};
        _cleanup_free_ pid_t *pids = NULL;
        HierarchyState *states = NULL;
        size_t n = 0, n_pids = 0, n_dh = 0;
        DelayHierarchy dh[HIERARCHIES_MAX * _IMAGE_CLASS_MAX];
        bool changed = false, host = pid <= 0 && !unit, moved = false;
        uint64_t own = 0;
        int r;

        engine_result_done(&e->result);
        r = engine_lock(e);
        if (r >= 0)
                r = recover_locked(e, &j, &states, &n, &changed, host ? DELAY_COMMIT_NOW : DELAY_COMMIT_IF_DUE);
        if (r < 0)
                goto finish;
        if (host) {
                if (journal_delayed(&j))
                        r = engine_fail(e, ENGINE_ERROR_BUSY, EBUSY,
                                        "The delayed transition of generation %" PRIu64 " could not be committed (see above); it stays delayed.",
                                        j.pending_generation);
                else
                        r = changed;
                if (r == 0) {
                        e->result.message = strdup("No transition is delayed; nothing to commit.");
                        log_info("No transition is delayed under %s; nothing to commit.", e->root);
                }
                goto finish;
        }
        if (!journal_delayed(&j) && pid > 0 && !delayed_only) {
                r = update_namespace(e, &j, pid);
                goto finish;
        }
        if (!journal_delayed(&j)) {
                e->result.message = strdup("No transition is delayed; nothing to commit.");
                log_info("No transition is delayed under %s; nothing to commit.", e->root);
                r = changed;
                goto finish;
        }
        if (unit) {
                _cleanup_free_ char *safe = NULL;

                r = delay_pids_of_unit(unit, &pids, &n_pids);
                if (r < 0) {
                        r = engine_fail(e, ENGINE_ERROR_FAILED, r, "Failed to find the processes of %s: %m", string_safe(unit, &safe));
                        goto finish;
                }
                if (n_pids == 0) {
                        r = engine_fail(e, ENGINE_ERROR_FAILED, ESRCH, "No process of unit %s runs.", string_safe(unit, &safe));
                        goto finish;
                }
        } else {
                pids = calloc(1, sizeof(pid_t));
                if (!pids) {
                        r = -ENOMEM;
                        goto finish;
                }
                pids[n_pids++] = pid;
        }
        r = mount_namespace_id(&own);
        if (r >= 0)
                r = delay_hierarchies(&j, states, n, dh, &n_dh);
        if (r < 0) {
                r = engine_fail(e, ENGINE_ERROR_FAILED, r, "Failed to prepare the commit: %m");
                goto finish;
        }
        for (size_t i = 0; i < n_pids; i++) {
                _cleanup_free_ char *msg = NULL;
                uint64_t ns;

                r = delay_namespace_of(pids[i], &ns);
                if (r < 0) {
                        r = engine_fail(e, ENGINE_ERROR_FAILED, r, "No such process: %i.", (int) pids[i]);
                        goto finish;
                }
                if (ns == own) {
                        /* The host's own namespace: its commit is everyone's. */
                        TransitionContext ctx = step_context(e);
                        uint64_t committed = 0;
                        bool c = false;

                        ctx.commit_delayed = true;
                        ctx.committed_delayed = &committed;
                        r = recover_run(&ctx, &j, states, n, &c);
                        if (r < 0)
                                goto finish;
                        if (committed > 0)
                                log_info("Process %i is in sysextd's own mount namespace: committed the delayed transition of generation %" PRIu64 " for every namespace.",
                                         (int) pids[i], committed);
                        moved = moved || c;
                        changed = changed || c;
                        break;
                }
                r = delay_commit_namespace(pids[i], dh, n_dh, engine_is_followed(e, ns), &msg);
                if (r < 0) {
                        r = engine_fail(e, r == -ESRCH ? ENGINE_ERROR_FAILED : ENGINE_ERROR_FOREIGN_MOUNT, r, "%s", strna(msg));
                        goto finish;
                }
                if (r == 0)
                        log_info("The mount namespace of process %i already shows the new trees; nothing to do.", (int) pids[i]);
                else {
                        log_info("Committed the delayed transition of generation %" PRIu64 " in the mount namespace of process %i.",
                                 j.pending_generation, (int) pids[i]);
                        moved = true;
                }
        }
        r = moved;
finish:
        if (r >= 0 && changed)
                update_followers(e, &j); /* the host's trees changed: the followed namespaces get them */
        hierarchy_states_free(states, n);
        engine_unlock(e);
        e->result.r = r;
        e->result.changed = changed;
        e->result.generation = j.generation;
        return r;
}

static int status_read(Engine *e, const EngineOptions *o, EngineStatus *ret) {
        _cleanup_(engine_status_done) EngineStatus s = {};
        _cleanup_close_ int dfd = -EBADF;
        HierarchyState *states = NULL;
        size_t n = 0;
        uint64_t ns;
        int r;

        r = journal_dir_open(e->root_fd, false, &dfd);
        if (r >= 0) {
                r = load_journal(e, dfd, &s.journal);
                if (r < 0)
                        return r;
        } else if (r != -ENOENT)
                return engine_fail(e, ENGINE_ERROR_FAILED, r, "Failed to open %s/%s: %m", e->root, JOURNAL_DIR);

        s.generation = s.journal.generation;
        s.mode = kernel_has_mount_beneath() ? "beneath" : e->config.allow_degraded ? "degraded" : "unsupported";
        s.policy = image_policy_to_string(engine_class_policy(&e->config, o, IMAGE_CLASS_SYSEXT));
        s.proof = tree_proof_string();
        s.pending = s.journal.pending;
        s.incomplete = s.journal.incomplete;
        s.other_namespace = s.journal.mount_ns != 0 && s.journal.trees.n > 0 && mount_namespace_id(&ns) >= 0 &&
                            ns != s.journal.mount_ns;

        r = inspect_all(e, &s.journal, &states, &n);
        if (r < 0)
                return r;
        if (dfd >= 0) {
                r = follower_list_load(dfd, &s.followers);
                if (r < 0) {
                        hierarchy_states_free(states, n);
                        return engine_fail(e, ENGINE_ERROR_FAILED, r, "Failed to read %s/%s/%s: %m", e->root, JOURNAL_DIR,
                                           FOLLOW_DIR);
                }
        }
        s.hierarchies = calloc(n ?: 1, sizeof(HierarchyStatus));
        if (!s.hierarchies) {
                hierarchy_states_free(states, n);
                return -ENOMEM;
        }
        if (journal_delayed(&s.journal)) {
                DelayHierarchy dh[HIERARCHIES_MAX * _IMAGE_CLASS_MAX];
                size_t n_dh = 0;

                s.delayed_since = s.journal.delayed_since;
                s.delay_deadline = s.journal.delay_deadline;
                s.delayed_generation = s.journal.pending_generation;
                _cleanup_free_ uint64_t *followed = calloc(s.followers.n ?: 1, sizeof(uint64_t));

                for (size_t i = 0; followed && i < s.followers.n; i++)
                        followed[i] = s.followers.followers[i].ns;
                r = followed ? delay_hierarchies(&s.journal, states, n, dh, &n_dh) : -ENOMEM;
                if (r >= 0)
                        r = delay_scan(dh, n_dh, followed, s.followers.n, &s.delayed);
                if (r < 0) {
                        hierarchy_states_free(states, n);
                        return engine_fail(e, ENGINE_ERROR_FAILED, r, "Failed to find the mount namespaces of the delayed transition: %m");
                }
        }
        /* What changed under the live layers; a failure to look is no failure of the status. */
        if (!s.pending || journal_delayed(&s.journal)) {
                r = watch_scan(e->root_fd, e->root, dfd, &s.journal, &s.changed);
                if (r == -ENOMEM) {
                        hierarchy_states_free(states, n);
                        return r;
                }
        }
        for (size_t i = 0; i < n; i++) {
                HierarchyStatus *h;
                JournalHierarchy *jh = journal_find_hierarchy(&s.journal, states[i].name);
                const Tree *shown;
                StackView v;

                if (!engine_options_cover(o, e->hierarchy_class[i]))
                        continue;
                h = &s.hierarchies[s.n_hierarchies++];
                h->klass = e->hierarchy_class[i];

                h->path = strjoin3("/", states[i].name, "");
                if (!h->path) {
                        hierarchy_states_free(states, n);
                        return -ENOMEM;
                }
                h->is_symlink = states[i].is_symlink;
                if (!states[i].exists)
                        continue;
                stack_analyze(&states[i], jh ? jh->tree : NULL, &v);
                /* What readers see: the live tree; under a foreign mount, the tree it covers. */
                shown = v.live ?: v.covered_tree;
                h->merged = v.live && !v.live->base_only;
                h->writable = v.live && v.live->writable;
                h->foreign_top = v.covered;
                h->n_ours = v.n_ours;
                h->n_buried = v.n_buried;
                h->n_repair = v.n_repair;
                h->n_unrecorded = v.n_unrecorded;
                if (shown && !shown->base_only) {
                        h->since = shown->since;
                        STRV_FOREACH(x, shown->extensions)
                                if (strv_extend(&h->extensions, *x) < 0) {
                                        hierarchy_states_free(states, n);
                                        return -ENOMEM;
                                }
                }
        }
        hierarchy_states_free(states, n);
        *ret = s;
        s = (EngineStatus) {};
        return 0;
}

int engine_status(Engine *e, const EngineOptions *o, EngineStatus *ret) {
        int r;

        mount_table_cache_begin();
        r = status_read(e, o, ret);
        mount_table_cache_end();
        return r;
}

typedef enum FollowOp {
        FOLLOW_OP_ADD,
        FOLLOW_OP_REMOVE,
        FOLLOW_OP_MACHINE,
        FOLLOW_OP_FORGET_MACHINE,
        FOLLOW_OP_ADD_MANY,
} FollowOp;

/* Under the lock, after recovery: what is live must be what the journal says before anyone
 * follows it. */
static int engine_follow_op(Engine *e, FollowOp op, pid_t pid, const char *machine, const pid_t *pids, size_t n_pids) {
        _cleanup_journal_ Journal j = {};
        _cleanup_close_ int base = -EBADF;
        _cleanup_free_ char *msg = NULL;
        HierarchyState *states = NULL;
        size_t n = 0;
        bool changed = false;
        int r;

        engine_result_done(&e->result);
        r = engine_lock(e);
        if (r >= 0)
                r = recover_locked(e, &j, &states, &n, &changed, DELAY_COMMIT_IF_DUE);
        hierarchy_states_free(states, n);
        if (r >= 0) {
                r = base_root_open(e->root_fd, e->root, &base);
                if (r < 0)
                        r = engine_fail(e, ENGINE_ERROR_FAILED, r, "Failed to reach %s below sysextd's trees: %m", e->root);
        }
        if (r >= 0) {
                FollowHost h = {
                        .root_fd = e->root_fd,
                        .root = e->root,
                        .journal_fd = e->journal_fd,
                        .base_fd = base,
                        .hierarchies = e->hierarchies,
                        .journal = &j,
                };
                switch (op) {
                case FOLLOW_OP_ADD:
                        r = follow_add(&h, pid, machine, &msg);
                        break;
                case FOLLOW_OP_REMOVE:
                        r = follow_remove(&h, pid, &msg);
                        break;
                case FOLLOW_OP_MACHINE:
                        r = follow_add_machine(&h, pid, machine, &msg);
                        break;
                case FOLLOW_OP_FORGET_MACHINE:
                        r = follow_forget_machine(&h, machine);
                        if (r < 0)
                                (void) set_message(&msg, -r, "Failed to read the followed namespaces: %s", strerror(-r));
                        break;
                case FOLLOW_OP_ADD_MANY:
                        /* Each failure was said in its own line. */
                        r = follow_add_many(&h, pids, n_pids);
                        if (r > 0)
                                (void) set_message(&msg, ESRCH, "%i of %zu processes could not be followed (see above).", r, n_pids);
                        r = r > 0 ? -ESRCH : r;
                        if (r < 0 && !msg)
                                (void) set_message(&msg, -r, "Failed to follow the mount namespaces: %s", strerror(-r));
                        break;
                }
                if (r < 0)
                        r = engine_fail(e, r == -ESRCH || r == -ENOENT || r == -EINVAL ? ENGINE_ERROR_FAILED : ENGINE_ERROR_KERNEL_REFUSED,
                                        r, "%s", strna(msg));
        }
        engine_unlock(e);
        e->result.r = r;
        e->result.changed = changed;
        e->result.generation = j.generation;
        return r;
}

int engine_follow(Engine *e, pid_t pid, bool follow, const char *machine) {
        return engine_follow_op(e, follow ? FOLLOW_OP_ADD : FOLLOW_OP_REMOVE, pid, machine, NULL, 0);
}

int engine_follow_many(Engine *e, const pid_t *pids, size_t n) {
        return engine_follow_op(e, FOLLOW_OP_ADD_MANY, 0, NULL, pids, n);
}

int engine_follow_machine(Engine *e, pid_t pid, const char *machine) {
        return engine_follow_op(e, FOLLOW_OP_MACHINE, pid, machine, NULL, 0);
}

int engine_forget_machine(Engine *e, const char *machine) {
        return engine_follow_op(e, FOLLOW_OP_FORGET_MACHINE, 0, machine, NULL, 0);
}

int engine_followers(Engine *e, FollowerList *ret) {
        _cleanup_close_ int dfd = -EBADF;
        int r;

        r = journal_dir_open(e->root_fd, false, &dfd);
        if (r == -ENOENT) {
                *ret = (FollowerList) {};
                return 0;
        }
        if (r < 0)
                return r;
        return follower_list_load(dfd, ret);
}

int engine_history(Engine *e, bool generations, Journal *ret) {
        _cleanup_close_ int dfd = -EBADF;
        int r;

        r = journal_dir_open(e->root_fd, false, &dfd);
        if (r == -ENOENT) {
                *ret = (Journal) {};
                return 0;
        }
        if (r < 0)
                return r;
        r = journal_load(dfd, ret, NULL);
        if (r >= 0 && generations) {
                r = journal_load_generations(dfd, ret, false);
                if (r > 0)
                        warn_history_bad(e, r, false);
        }
        return r < 0 ? r : 0;
}

int engine_history_generations(Engine *e, Journal *j) {
        _cleanup_close_ int dfd = -EBADF;
        int r;

        r = journal_dir_open(e->root_fd, false, &dfd);
        if (r == -ENOENT)
                return 0;
        if (r >= 0)
                r = journal_load_generations(dfd, j, false);
        if (r > 0)
                warn_history_bad(e, r, false);
        return r < 0 ? r : 0;
}

int engine_confirm(Engine *e) {
        _cleanup_journal_ Journal j = {};
        int r;

        engine_result_done(&e->result);
        r = engine_lock(e);
        if (r >= 0)
                r = load_journal(e, e->journal_fd, &j);
        if (r >= 0 && j.confirm_generation == 0) {
                e->result.message = strdup("Nothing waits for confirmation.");
                log_info("Nothing waits for confirmation.");
                r = 0;
        } else if (r >= 0) {
                uint64_t g = j.confirm_generation;

                journal_confirm_clear(&j);
                r = journal_save(e->journal_fd, &j);
                if (r < 0)
                        r = engine_fail(e, ENGINE_ERROR_FAILED, r, "Failed to record the confirmation in %s/%s/%s: %m", e->root,
                                        JOURNAL_DIR, JOURNAL_STATE);
                else {
                        log_info("Generation %" PRIu64 " is confirmed; it is no longer rolled back by itself.", g);
                        r = 1;
                }
        }
        engine_unlock(e);
        e->result.r = r;
        e->result.generation = j.generation;
        return r;
}
