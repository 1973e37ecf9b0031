/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Namespaces that follow the host.
 *
 * A container's root is a shared mount in a peer group of its own: nothing the host mounts on
 * its /usr reaches it.  A namespace that follows (sysextd follow PID, FollowMachines=) is
 * reached directly instead, after every transition of the host and at once when it starts
 * following, one namespace at a time:
 *
 *   1. find:    a process in the namespace (the one recorded, or any other: the namespace,
 *               not the PID, is what is followed); none left: the namespace has gone and its
 *               record is dropped without a word
 *   2. clone:   in the host, per hierarchy, the host's live tree (ours, checked by identity)
 *               is cloned, open_tree(OPEN_TREE_CLONE): a detached mount of the same overlay,
 *               made private (a clone of a shared mount is its peer otherwise)
 *   3. enter:   one worker process for all namespaces (a fork costs more than the work in a
 *               namespace) goes from the host's namespace to each one in turn (setns), takes
 *               the process's root as its own (chroot) and the host's /proc, opened before,
 *               as its working directory: the namespace's own /proc may be missing, of another
 *               PID namespace or forged
 *   4. look:    per hierarchy, what shows there from that root (follow_decide()): our tree by
 *               its identity, the host's base (the same directory as below the host's trees),
 *               or something else, left alone and reported; the mounts below it are read and
 *               carried onto the new tree (carry_children(): in a slave copy of the namespace)
 *   5. swap:    swap.c's swap_all() in that namespace, with every rule the host has: the top
 *               checked by identity right before each call, the new trees beneath our old ones
 *               (or on top of the base the first time), all hierarchies of the namespace or
 *               none, our old trees detached last, through pinned fds
 *   6. record:  run/sysextd/follow/NS.json: the identities of our trees there, the host's
 *               generation it shows, what was left alone, the last error
 * A namespace that fails keeps what it showed (swap_all() takes back what it placed) and its
 * record says why; the host's transition and the other namespaces go on.  Stopping (unfollow)
 * detaches our trees there, by identity: the base shows again.
 *
 * What stays behind if we stop: after 2, detached clones that go with their fds; during 5, what
 * swap.c's outcome table says for that namespace; after 5 and before 6, trees of ours there
 * without a record, which the next update finds as "something else" and reports (they are
 * never detached without proof).
 *
 * A delayed transition of the host (delay.c) reaches them as it reaches a service: at step 2 the
 * host's waiting tree is cloned too (host_pending_clone(): in a slave copy of the host's
 * namespace its old top's copy is detached, proven by superblock, and what shows then is
 * proven the waiting tree's copy and cloned), at step 5 it goes beneath ours there and ours
 * stays (swap_all() in delay mode: DELAY), recorded as "waiting".  The namespace commits like
 * a service (delay_commit_namespace(), with the hierarchies below its own root; an umount
 * there too), which the next update records (PROMOTE); after the host's commit the update
 * detaches our old top there, proven ours with the waiting tree right beneath (COMMIT).  While
 * a tree waits beneath ours, unfollow is refused: detaching ours would show it.
 * follow_decide() has the whole table.
 *
 * FollowMachines= (the daemon's machines.c) follows each machine of systemd-machined through its
 * leader, in a machine mode (follow_add_machine()): a machine in sysextd's own namespace is
 * skipped, and one not followed yet that shows neither the host's base nor a tree of the host's
 * at any hierarchy (its own OS) gets no record; a machine that goes has its record dropped
 * (follow_forget_machine()), nothing detached.
 */
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/openat2.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fd-util.h"
#include "fileio.h"
#include "follow.h"
#include "inspect.h"
#include "json-util.h"
#include "kernel.h"
#include "log.h"
#include "missing.h"
#include "swap.h"
#include "util.h"

#ifdef SYSEXTD_TEST_HOOKS
#include "testhook.h"
#endif

#define FOLLOW_FILE_MAX (256 * 1024)
#define FOLLOW_TEXT_MAX 1024
#define FOLLOW_PROBLEMS_MAX 16

static const char *const view_names[_FOLLOW_VIEW_MAX] = {
        [FOLLOW_VIEW_ABSENT] = "absent", [FOLLOW_VIEW_OURS] = "ours", [FOLLOW_VIEW_BASE] = "base",
        [FOLLOW_VIEW_HOST_TREE] = "host-tree", [FOLLOW_VIEW_OTHER] = "other", [FOLLOW_VIEW_WAITING] = "waiting",
};

static const char *const action_names[_FOLLOW_ACTION_MAX] = {
        [FOLLOW_DELAY] = "delay",   [FOLLOW_COMMIT] = "commit", [FOLLOW_PROMOTE] = "promote",
        [FOLLOW_KEEP] = "keep",     [FOLLOW_ATTACH] = "attach", [FOLLOW_REPLACE] = "replace",
        [FOLLOW_DETACH] = "detach", [FOLLOW_LEAVE] = "leave",
};

const char *follow_view_to_string(FollowView v) {
        return v >= 0 && v < _FOLLOW_VIEW_MAX ? view_names[v] : NULL;
}

const char *follow_action_to_string(FollowAction a) {
        return a >= 0 && a < _FOLLOW_ACTION_MAX ? action_names[a] : NULL;
}

/* During a delayed transition of the host, a followed namespace takes part as a service does:
 * the host's new tree goes beneath ours there (DELAY) and ours stays on top until the namespace
 * commits (COMMIT through delay.c, or umount there: PROMOTE at the next update) or the host
 * does (COMMIT here, at the update after its commit).  A namespace that shows the base during a
 * delay gets the host's live tree; it gets the new one at the host's commit. */
FollowAction follow_decide(const FollowFacts *f) {
        switch (f->view) {
        case FOLLOW_VIEW_OURS:
                if (!f->host_tree)
                        /* Stopping with a tree waiting beneath ours would show that tree:
                         * the caller refuses that before (commit first). */
                        return f->waiting ? FOLLOW_LEAVE : FOLLOW_DETACH;
                if (f->waiting && f->waiting_current)
                        return FOLLOW_COMMIT;
                if (f->current)
                        return f->pending && !f->waiting ? FOLLOW_DELAY : FOLLOW_KEEP;
                return FOLLOW_REPLACE;
        case FOLLOW_VIEW_WAITING:
                if (f->host_tree && (f->waiting_current || f->waiting_pending))
                        return FOLLOW_PROMOTE;
                /* Not the host's any more: it is replaced, as our tree would be. */
                return f->host_tree ? FOLLOW_REPLACE : FOLLOW_DETACH;
        case FOLLOW_VIEW_BASE:
                return f->host_tree ? FOLLOW_ATTACH : FOLLOW_KEEP;
        case FOLLOW_VIEW_HOST_TREE:
        case FOLLOW_VIEW_OTHER:
                return FOLLOW_LEAVE;
        default:
                return FOLLOW_KEEP;
        }
}

void follower_done(Follower *f) {
        free(f->name);
        free(f->machine);
        tree_list_done(&f->trees);
        tree_list_done(&f->waiting);
        strv_free(f->problems);
        free(f->error);
        *f = (Follower) {};
}

void follower_list_done(FollowerList *l) {
        for (size_t i = 0; i < l->n; i++)
                follower_done(&l->followers[i]);
        free(l->followers);
        *l = (FollowerList) {};
}

static Tree *tree_of(TreeList *l, const char *hierarchy) {
        for (size_t i = 0; i < l->n; i++)
                if (streq(l->trees[i]->hierarchy, hierarchy))
                        return l->trees[i];
        return NULL;
}

static Tree *follower_tree(Follower *f, const char *hierarchy) {
        return tree_of(&f->trees, hierarchy);
}

static json_object *trees_to_json(const TreeList *l) {
        _cleanup_json_ json_object *a = json_object_new_array();

        if (!a)
                return NULL;
        for (size_t i = 0; i < l->n; i++) {
                _cleanup_free_ char *text = NULL;
                json_object *t;

                if (tree_to_json_string(l->trees[i], &text) < 0)
                        return NULL;
                t = json_parse_object(text);
                if (!t || json_object_array_add(a, t) < 0) {
                        json_object_put(t);
                        return NULL;
                }
        }
        return TAKE_PTR(a);
}

/* One tree per hierarchy at most. */
static int trees_from_json(json_object *a, TreeList *l) {
        if (!a || json_object_array_length(a) > HIERARCHIES_MAX)
                return -EBADMSG;
        for (size_t i = 0; i < json_object_array_length(a); i++) {
                _cleanup_(tree_done) Tree t = {};
                const char *s = json_object_to_json_string(json_object_array_get_idx(a, i));

                if (!s || tree_from_json_string(s, &t) < 0 || tree_of(l, t.hierarchy))
                        return -EBADMSG;
                if (tree_list_add(l, &t) < 0)
                        return -ENOMEM;
        }
        return 0;
}

int follower_to_json_string(const Follower *f, char **ret) {
        _cleanup_json_ json_object *o = json_object_new_object(), *trees = trees_to_json(&f->trees),
                                   *waiting = trees_to_json(&f->waiting);
        const char *s;

        if (!o || !trees || !waiting)
                return -ENOMEM;
        json_object_object_add(o, "namespace", json_object_new_uint64(f->ns));
        json_object_object_add(o, "pid", json_object_new_uint64((uint64_t) f->pid));
        json_object_object_add(o, "name", json_new_string_or_null(f->name));
        json_object_object_add(o, "machine", json_new_string_or_null(f->machine));
        json_object_object_add(o, "generation", json_object_new_uint64(f->generation));
        json_object_object_add(o, "since", json_object_new_uint64(f->since));
        json_object_object_add(o, "trees", TAKE_PTR(trees));
        json_object_object_add(o, "waiting", TAKE_PTR(waiting));
        json_object_object_add(o, "problems", json_new_strv(f->problems));
        json_object_object_add(o, "error", json_new_string_or_null(f->error));
        s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE);
        *ret = s ? strdup(s) : NULL;
        return *ret ? 0 : -ENOMEM;
}

int follower_from_json_string(const char *text, Follower *ret) {
        _cleanup_json_ json_object *o = json_parse_object(text);
        _cleanup_(follower_done) Follower f = {};
        json_object *waiting;
        uint64_t pid;
        int r;

        if (!o)
                return -EBADMSG;
        if (json_get_u64(o, "namespace", &f.ns) < 0 || f.ns == 0 || json_get_u64(o, "pid", &pid) < 0 ||
            pid > INT32_MAX || json_get_string_or_null(o, "name", FOLLOW_TEXT_MAX, &f.name) < 0 ||
            json_get_string_or_null(o, "machine", FOLLOW_TEXT_MAX, &f.machine) < 0 ||
            json_get_u64(o, "generation", &f.generation) < 0 || json_get_u64(o, "since", &f.since) < 0 ||
            json_get_strv(o, "problems", FOLLOW_PROBLEMS_MAX, FOLLOW_TEXT_MAX, &f.problems) < 0 ||
            json_get_string_or_null(o, "error", FOLLOW_TEXT_MAX, &f.error) < 0)
                return -EBADMSG;
        f.pid = (pid_t) pid;
        r = trees_from_json(json_get_array(o, "trees"), &f.trees);
        if (r < 0)
                return r;
        /* Optional: a record written before delays reached followers has none. */
        waiting = json_get_array(o, "waiting");
        if (waiting) {
                r = trees_from_json(waiting, &f.waiting);
                if (r < 0)
                        return r;
        }
        *ret = f;
        f = (Follower) {};
        return 0;
}

static int follow_dir_open(int journal_dir_fd, bool create) {
        int fd = open_directory_at(journal_dir_fd, FOLLOW_DIR, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS);

        if (fd == -ENOENT && create) {
                if (mkdirat(journal_dir_fd, FOLLOW_DIR, 0700) < 0 && errno != EEXIST)
                        return negative_errno();
                fd = open_directory_at(journal_dir_fd, FOLLOW_DIR, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS);
        }
        return fd;
}

static void follower_file_name(uint64_t ns, char buf[static 32]) {
        snprintf(buf, 32, "%" PRIu64 ".json", ns);
}

static int follower_save(int journal_dir_fd, const Follower *f) {
        _cleanup_close_ int dfd = follow_dir_open(journal_dir_fd, true);
        _cleanup_free_ char *text = NULL;
        char name[32];
        int r;

        if (dfd < 0)
                return dfd;
        r = follower_to_json_string(f, &text);
        if (r < 0)
                return r;
        follower_file_name(f->ns, name);
        return write_file_atomic_at(dfd, name, text, 0600);
}

static void follower_forget(int journal_dir_fd, uint64_t ns) {
        _cleanup_close_ int dfd = follow_dir_open(journal_dir_fd, false);
        char name[32];

        follower_file_name(ns, name);
        if (dfd >= 0)
                (void) unlinkat(dfd, name, 0);
}

int follower_list_load(int journal_dir_fd, FollowerList *ret) {
        _cleanup_(follower_list_done) FollowerList l = {};
        _cleanup_closedir_ DIR *d = NULL;
        struct dirent *de;
        int dfd;

        dfd = follow_dir_open(journal_dir_fd, false);
        if (dfd == -ENOENT) {
                *ret = (FollowerList) {};
                return 0;
        }
        if (dfd < 0)
                return dfd;
        d = fdopendir(dfd);
        if (!d) {
                safe_close(dfd);
                return negative_errno();
        }
        while ((de = readdir(d))) {
                _cleanup_free_ char *text = NULL;
                _cleanup_(follower_done) Follower f = {};
                char name[32];
                Follower *a;
                int r;

                if (de->d_name[0] == '.' || !endswith(de->d_name, ".json"))
                        continue;
                r = read_file_at(dirfd(d), de->d_name, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS, FOLLOW_FILE_MAX, &text, NULL,
                                 NULL);
                if (r == -ENOMEM)
                        return r;
                if (r >= 0)
                        r = follower_from_json_string(text, &f);
                if (r >= 0) {
                        follower_file_name(f.ns, name);
                        if (!streq(name, de->d_name))
                                r = -EBADMSG;
                }
                if (r < 0) {
                        _cleanup_free_ char *aside = strjoin3(de->d_name, ".corrupt", "");
                        log_warning("The record %s/%s of a followed namespace could not be read; it was moved aside.",
                                    FOLLOW_DIR, de->d_name);
                        if (aside)
                                (void) renameat(dirfd(d), de->d_name, dirfd(d), aside);
                        continue;
                }
                a = reallocarray(l.followers, l.n + 1, sizeof(Follower));
                if (!a)
                        return -ENOMEM;
                l.followers = a;
                l.followers[l.n++] = f;
                f = (Follower) {};
        }
        *ret = l;
        l = (FollowerList) {};
        return 0;
}

int follow_namespace_of(pid_t pid, uint64_t *ret) {
        char path[64];
        struct stat st;

        if (pid <= 0)
                return -ESRCH;
        snprintf(path, sizeof(path), "/proc/%i/ns/mnt", (int) pid);
        if (stat(path, &st) < 0)
                return errno == ENOENT ? -ESRCH : negative_errno();
        *ret = st.st_ino;
        return 0;
}

/* A process in namespace ns: the hint if it still is, else the first one met. */
static pid_t namespace_find_process(uint64_t ns, pid_t hint) {
        _cleanup_closedir_ DIR *proc = NULL;
        struct dirent *p;
        uint64_t n;

        if (follow_namespace_of(hint, &n) >= 0 && n == ns)
                return hint;
        proc = opendir("/proc");
        if (!proc)
                return 0;
        while ((p = readdir(proc))) {
                char *end;
                long pid = strtol(p->d_name, &end, 10);

                if (*end || pid <= 0)
                        continue;
                if (follow_namespace_of((pid_t) pid, &n) >= 0 && n == ns)
                        return (pid_t) pid;
        }
        return 0;
}

/* The unit of a process from its cgroup ("foo.service"), its machine ("machine-NAME.scope"
 * below machine.slice), else its command name. */
static void process_names(pid_t pid, char **ret_name, char **ret_machine) {
        _cleanup_free_ char *cgroup = NULL, *comm = NULL;
        char path[64];
        char *name = NULL, *machine = NULL;

        snprintf(path, sizeof(path), "/proc/%i/cgroup", (int) pid);
        if (read_file_at(AT_FDCWD, path, 0, 64 * 1024, &cgroup, NULL, NULL) >= 0) {
                char *line = strstr(cgroup, "0::/");
                _cleanup_strv_free_ char **parts = NULL;

                if (line) {
                        line[strcspn(line, "\n")] = 0;
                        (void) strv_split(line + 3, "/", &parts);
                }
                STRV_FOREACH(c, parts) {
                        const char *m = startswith(*c, "machine-");
                        if (m && endswith(m, ".scope") && !machine)
                                machine = strndup(m, strlen(m) - strlen(".scope"));
                        if (endswith(*c, ".service") || endswith(*c, ".scope")) {
                                free(name);
                                name = strdup(*c);
                        }
                }
        }
        if (!name) {
                snprintf(path, sizeof(path), "/proc/%i/comm", (int) pid);
                if (read_file_at(AT_FDCWD, path, 0, 256, &comm, NULL, NULL) >= 0) {
                        comm[strcspn(comm, "\n")] = 0;
                        name = TAKE_PTR(comm);
                }
        }
        *ret_name = name;
        *ret_machine = machine;
}

/* What the child reports per hierarchy: a fixed record, all of them in one pipe write. */
typedef struct FollowOutcome {
        int action;          /* FollowAction */
        int view;            /* FollowView */
        int state;           /* SwapState, for the actions that swap */
        uint64_t unique_id;  /* the identity of the new tree there */
        uint64_t mount_id;
        uint64_t dev;
        char message[480];
} FollowOutcome;

typedef struct FollowInput {
        const char *rel;      /* in the namespace, below its root */
        const char *hierarchy; /* the host's name of it ("usr") */
        int tree_fd;          /* a clone of the host's tree, -EBADF: none */
        const Tree *host;     /* the host's tree */
        int pending_fd;       /* a clone of the host's tree waiting beneath it (delayed), -EBADF */
        const Tree *pending;  /* the host's waiting tree, NULL: the host's transition is not delayed */
        const Tree *waiting;  /* the waiting tree beneath ours there (from the record), NULL: none */
        dev_t base_dev;       /* the host's base directory of the hierarchy */
        ino_t base_ino;
        bool base_known;
        const Tree *old;      /* our tree there (from the record), NULL: none */
} FollowInput;

/* The fds the child enters the namespace with, kept to enter it again. */
typedef struct FollowEntry {
        int ns_fd;   /* the namespace */
        int root_fd; /* the process's root there */
        int proc_fd; /* the host's /proc */
} FollowEntry;

static int follow_enter(const FollowEntry *ctx) {
        if (setns(ctx->ns_fd, CLONE_NEWNS) < 0)
                return negative_errno();
        if (fchdir(ctx->root_fd) < 0 || chroot(".") < 0 || fchdir(ctx->proc_fd) < 0)
                return negative_errno();
        proc_prefix_use_cwd();
        return 0;
}

/* Step 4's carrying: a detached mount goes onto a detached tree only when both were cloned in
 * one namespace (Linux 6.15), and the host's tree was cloned in the host's.  So, as staging does
 * before 6.15: in a private copy of the namespace (a slave: nothing goes back), the mounts
 * below are cloned, the host's tree is attached at the hierarchy, the clones on it, and the
 * whole is cloned again, recursively: a detached tree that can go anywhere.  Then back into the
 * namespace itself. */
static int carry_children(FollowInput *in, size_t n, MountChildren *children, char paths[][PATH_MAX],
                          const FollowEntry *ctx, FollowOutcome *out) {
        int clones[HIERARCHIES_MAX][64], n_clones[HIERARCHIES_MAX] = {};
        _cleanup_close_ int root = -EBADF;
        size_t failed = SIZE_MAX;
        int r = 0;

        /* Each mount below must be one its owner lets be copied: an unbindable one is refused
         * here, as on the host.  (Asked in the namespace itself: its copy made below is no
         * longer unbindable.) */
        root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (root < 0)
                return negative_errno();
        for (size_t i = 0; i < n; i++)
                for (size_t c = 0; in[i].tree_fd >= 0 && c < children[i].n; c++) {
                        int probe = open_tree(root, children[i].children[c].path + 1,
                                              OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_SYMLINK_NOFOLLOW);
                        if (probe < 0) {
                                r = negative_errno();
                                snprintf(out[i].message, sizeof(out[i].message), "%s: the mount %s there cannot be carried over: %s",
                                         in[i].rel, children[i].children[c].path,
                                         r == -EINVAL ? "it is unbindable, or not a mount sysextd may copy" : strerror(-r));
                                return r;
                        }
                        safe_close(probe);
                }
        root = safe_close(root);

        if (unshare(CLONE_NEWNS) < 0)
                return negative_errno();
        root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (root < 0)
                return negative_errno();
        /* The mounts below are cloned as they are, before anything changes in the copy. */
        for (size_t i = 0; i < n && r >= 0; i++)
                for (size_t c = 0; in[i].tree_fd >= 0 && c < children[i].n && r >= 0; c++) {
                        if (n_clones[i] >= (int) ELEMENTSOF(clones[i])) {
                                r = -E2BIG;
                                failed = i;
                                break;
                        }
                        clones[i][n_clones[i]] = open_tree(root, children[i].children[c].path + 1,
                                                           OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE | AT_SYMLINK_NOFOLLOW);
                        if (clones[i][n_clones[i]] < 0) {
                                r = negative_errno();
                                failed = i;
                        } else
                                n_clones[i]++;
                }
        /* Nothing done in the copy from here on reaches the namespace. */
        if (r >= 0 && mount(NULL, "/", NULL, MS_SLAVE | MS_REC, NULL) < 0)
                r = negative_errno();
        for (size_t i = 0; i < n && r >= 0; i++) {
                int whole;

                if (in[i].tree_fd < 0 || children[i].n == 0)
                        continue;
                failed = i;
                if (move_mount(in[i].tree_fd, "", root, in[i].rel, MOVE_MOUNT_F_EMPTY_PATH) < 0) {
                        r = negative_errno();
                        break;
                }
                for (int c = 0; c < n_clones[i] && r >= 0; c++)
                        if (move_mount(clones[i][c], "", root, children[i].children[c].path + 1, MOVE_MOUNT_F_EMPTY_PATH) < 0)
                                r = negative_errno();
                if (r < 0)
                        break;
                whole = open_tree(root, in[i].rel, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
                if (whole < 0) {
                        r = negative_errno();
                        break;
                }
                safe_close(in[i].tree_fd);
                in[i].tree_fd = whole;
        }
        for (size_t i = 0; i < n; i++)
                for (int c = 0; c < n_clones[i]; c++)
                        safe_close(clones[i][c]);
        if (r < 0) {
                if (failed < n)
                        snprintf(out[failed].message, sizeof(out[failed].message),
                                 "%s: the mounts below %s there cannot be carried over: %s", in[failed].rel, paths[failed],
                                 strerror(-r));
                return r;
        }
        /* Back into the namespace; the copy goes with its last process. */
        return follow_enter(ctx);
}

/* COMMIT in a namespace: our old top is detached there, checked on a pinned fd right before: it
 * is ours by identity, and right beneath it (its parent mount) is the waiting tree, by its
 * superblock.  What shows then is that tree, with the mounts below it carried when it was put
 * there. */
static int follow_commit_top(int fd, const Tree *old, const Tree *waiting, const char *path, char *message, size_t size) {
        MountEntry top = {}, below = {};
        MountIdentity m;
        int r = 0;

        if (!old || !waiting || tree_check_fd(old, fd, NULL) <= 0 || mount_identity_of_fd(fd, &m) < 0 ||
            mountinfo_find(m.id, &top) < 0 || mountinfo_find(top.parent_id, &below) < 0 || below.dev != waiting->dev ||
            !streq_ptr(below.fstype, "overlay")) {
                snprintf(message, size, "%s: the tree waiting beneath sysextd's there is not right beneath it; nothing was changed",
                         path);
                r = -EBUSY;
        } else if (umount2(FORMAT_PROC_FD_PATH(fd), MNT_DETACH) < 0) {
                r = negative_errno();
                snprintf(message, size, "%s: the previous tree could not be detached there: %s", path, strerror(-r));
        }
        mount_entry_done(&top);
        mount_entry_done(&below);
        return r;
}

/* Step 4 and 5, in the child, in the namespace. */
static int follow_in_namespace(FollowInput *in, size_t n, const FollowEntry *ctx, FollowOutcome *out) {
        _cleanup_close_ int root = -EBADF;
        SwapTarget targets[HIERARCHIES_MAX] = {};
        MountChildren children[HIERARCHIES_MAX] = {};
        Tree news[HIERARCHIES_MAX] = {};
        Tree olds[HIERARCHIES_MAX] = {};
        char paths[HIERARCHIES_MAX][PATH_MAX];
        _cleanup_free_ char *msg = NULL;
        size_t n_targets = 0, map[HIERARCHIES_MAX];
        bool need_carry = false, any_delay = false;
        int r = 0;

        root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (root < 0)
                return negative_errno();

        for (size_t i = 0; i < n; i++) {
                _cleanup_close_ int fd = -EBADF;
                MountIdentity m;
                struct stat st;
                bool current = false;
                const Tree *ours;

                snprintf(paths[i], sizeof(paths[i]), "/%s", in[i].rel);
                fd = hierarchy_open(root, in[i].rel);
                if (fd == -ENOENT || fd == -ENOTDIR || fd == -ELOOP) {
                        out[i].view = FOLLOW_VIEW_ABSENT;
                        out[i].action = FOLLOW_KEEP;
                        continue;
                }
                if (fd < 0 || mount_identity_of_fd(fd, &m) < 0 || fstat(fd, &st) < 0) {
                        snprintf(out[i].message, sizeof(out[i].message), "%s: cannot be inspected there: %s", in[i].rel,
                                 strerror(fd < 0 ? -fd : errno));
                        return -EIO;
                }
                if (in[i].old && tree_check_fd(in[i].old, fd, NULL) > 0) {
                        out[i].view = FOLLOW_VIEW_OURS;
                        current = in[i].host && in[i].old->dev == in[i].host->dev;
                } else if (in[i].waiting && tree_check_fd(in[i].waiting, fd, NULL) > 0)
                        out[i].view = FOLLOW_VIEW_WAITING;
                else if (in[i].base_known && st.st_dev == in[i].base_dev && st.st_ino == in[i].base_ino)
                        out[i].view = FOLLOW_VIEW_BASE;
                else if (m.overlay && in[i].host && m.dev == in[i].host->dev)
                        out[i].view = FOLLOW_VIEW_HOST_TREE;
                else
                        out[i].view = FOLLOW_VIEW_OTHER;
                out[i].action = follow_decide(&(FollowFacts) {
                        .view = out[i].view,
                        .host_tree = in[i].tree_fd >= 0,
                        .current = current,
                        .pending = in[i].pending_fd >= 0,
                        .waiting = in[i].waiting,
                        .waiting_current = in[i].waiting && in[i].host && in[i].waiting->dev == in[i].host->dev,
                        .waiting_pending = in[i].waiting && in[i].pending && in[i].waiting->dev == in[i].pending->dev,
                });
                ours = out[i].view == FOLLOW_VIEW_WAITING ? in[i].waiting : in[i].old;

                if (out[i].action == FOLLOW_LEAVE) {
                        _cleanup_free_ char *what = NULL;
                        MountEntry e = {};

                        if (out[i].view == FOLLOW_VIEW_OURS)
                                what = strdup("sysextd's tree with a delayed transition's tree beneath it (commit it first)");
                        else if (out[i].view == FOLLOW_VIEW_HOST_TREE)
                                what = strdup("the host's tree already (it receives the host's mounts, or someone bound it there)");
                        else if (m.is_root && mountinfo_find(m.id, &e) >= 0)
                                what = mount_entry_describe(&e);
                        else
                                what = strdup("a directory that is not the host's");
                        mount_entry_done(&e);
                        snprintf(out[i].message, sizeof(out[i].message), "%s shows %s; left alone", in[i].rel, strna(what));
                        continue;
                }
                if (IN_SET(out[i].action, FOLLOW_KEEP, FOLLOW_PROMOTE))
                        continue;
                if (out[i].action == FOLLOW_COMMIT) {
                        r = follow_commit_top(fd, in[i].old, in[i].waiting, paths[i], out[i].message, sizeof(out[i].message));
                        if (r < 0)
                                goto finish;
                        out[i].state = SWAP_DETACHED;
                        continue;
                }
                if (out[i].action == FOLLOW_DELAY) {
                        /* The host's waiting tree goes beneath ours; ours stays on top. */
                        safe_close(in[i].tree_fd);
                        in[i].tree_fd = TAKE_FD(in[i].pending_fd);
                        news[i] = *in[i].pending;
                        any_delay = true;
                } else if (in[i].tree_fd >= 0)
                        news[i] = *in[i].host;

                /* A swap at this hierarchy. */
                if (ours) {
                        olds[i] = *ours;
                        olds[i].writable = false; /* the host sealed it before its own swap */
                }
                r = mount_children_read(fd, paths[i], &children[i]);
                if (r < 0) {
                        snprintf(out[i].message, sizeof(out[i].message), "%s: cannot read the mounts below it there: %s",
                                 in[i].rel, strerror(-r));
                        goto finish;
                }
                if (in[i].tree_fd >= 0) {
                        news[i].writable = false;
                        news[i].workdir = NULL;
                        r = tree_set_identity(&news[i], in[i].tree_fd);
                        if (r < 0) {
                                snprintf(out[i].message, sizeof(out[i].message), "%s: the host's tree cannot be identified: %s",
                                         in[i].rel, strerror(-r));
                                goto finish;
                        }
                        if (children[i].n > 0)
                                need_carry = true;
                }
                map[n_targets] = i;
                targets[n_targets++] = (SwapTarget) {
                        .root_fd = root,
                        .rel = in[i].rel,
                        .path = paths[i],
                        .tree_fd = in[i].tree_fd,
                        .new_tree = in[i].tree_fd >= 0 ? &news[i] : NULL,
                        .old = ours ? &olds[i] : NULL,
                        .planned_top_id = m.id,
                        .children = &children[i],
                };
        }

        /* The mounts below, as they are there, carried by the new trees. */
        if (need_carry) {
                r = carry_children(in, n, children, paths, ctx, out);
                if (r < 0)
                        goto finish;
                safe_close(root);
                root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
                if (root < 0) {
                        r = negative_errno();
                        goto finish;
                }
                for (size_t k = 0; k < n_targets; k++) {
                        size_t i = map[k];

                        targets[k].root_fd = root;
                        targets[k].tree_fd = in[i].tree_fd;
                        if (in[i].tree_fd >= 0) {
                                r = tree_set_identity(&news[i], in[i].tree_fd);
                                if (r < 0)
                                        goto finish;
                        }
                }
        }

        /* A delayed swap in a namespace leaves every old top there: the other swaps there wait
         * for the host's commit too. */
        if (any_delay)
                for (size_t k = 0; k < n_targets; k++)
                        if (out[map[k]].action != FOLLOW_DELAY) {
                                out[map[k]].action = FOLLOW_KEEP;
                                targets[k].tree_fd = -EBADF;
                                targets[k].new_tree = NULL;
                                targets[k].old = NULL;
                        }
        if (any_delay) {
                size_t w = 0;

                for (size_t k = 0; k < n_targets; k++)
                        if (out[map[k]].action == FOLLOW_DELAY) {
                                targets[w] = targets[k];
                                map[w++] = map[k];
                        }
                n_targets = w;
        }
        if (n_targets > 0) {
                r = swap_all(targets, n_targets,
                             &(SwapOptions) {
                                     .mount_beneath = kernel_has_mount_beneath(),
                                     .allow_degraded = false,
                                     .delay = any_delay,
                             },
                             &msg);
                for (size_t k = 0; k < n_targets; k++) {
                        FollowOutcome *o = &out[map[k]];

                        o->state = targets[k].state;
                        if (targets[k].new_tree) {
                                o->unique_id = news[map[k]].unique_id;
                                o->mount_id = news[map[k]].mount_id;
                                o->dev = news[map[k]].dev;
                        }
                }
                if (r < 0)
                        snprintf(out[map[0]].message, sizeof(out[map[0]].message), "%s", strna(msg));
        }
finish:
        for (size_t i = 0; i < n; i++)
                mount_children_done(&children[i]);
        return r;
}

/* The host's tree of a hierarchy: ours, with extensions (a tree of the base alone, left to
 * carry the host's own mounts, is no extension: a follower shows its base then). */
static const Tree *host_tree(const FollowHost *h, const char *rel) {
        JournalHierarchy *jh = journal_find_hierarchy((Journal *) h->journal, rel);
        const Tree *t;

        if (!jh || !jh->tree)
                return NULL;
        t = tree_list_find((TreeList *) &h->journal->trees, jh->tree);
        return t && !t->base_only ? t : NULL;
}

/* Step 2: a clone of the host's live tree at rel, proven ours right before. */
static int host_tree_clone(const FollowHost *h, const char *rel, const Tree *t, int *ret) {
        _cleanup_close_ int fd = hierarchy_open(h->root_fd, rel);
        int clone, r;

        if (fd < 0)
                return fd;
        r = tree_check_fd(t, fd, NULL);
        if (r <= 0)
                return r < 0 ? r : -ESTALE;
        clone = open_tree(fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
        if (clone < 0)
                return negative_errno();
        /* A clone of a shared mount is its peer: what happens on the host's tree (mounts on it,
         * its staging copies going) would reach the namespace's copy.  Private, it is the
         * namespace's own; attached below a shared parent there, it gets a peer group there. */
        if (mount_setattr(clone, "", AT_EMPTY_PATH, &(struct mount_attr) { .propagation = MS_PRIVATE },
                          sizeof(struct mount_attr)) < 0) {
                r = negative_errno();
                safe_close(clone);
                return r;
        }
        *ret = clone;
        return 0;
}

/* Step 2 during a delayed transition: a clone of the host's waiting tree, which no path reaches
 * (the host's old top covers it).  In a copy of the host's namespace (a slave: nothing goes
 * back), the copy of the old top is detached, proven by its superblock, and what shows then is
 * proven the waiting tree's copy and cloned.  The caller enters the host's namespace again
 * after it. */
static int host_pending_clone(const FollowHost *h, const char *rel, const Tree *live, const Tree *pending, int *ret) {
        _cleanup_free_ char *path = path_join(h->root, rel);
        _cleanup_close_ int fd = -EBADF;
        MountIdentity m;
        int clone, r;

        if (!path)
                return -ENOMEM;
        if (!live)
                return -ESTALE;
        if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_SLAVE | MS_REC, NULL) < 0)
                return negative_errno();
        fd = openat_resolve(AT_FDCWD, path, O_PATH | O_DIRECTORY | O_CLOEXEC, RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
        if (fd < 0)
                return fd;
        if (mount_identity_of_fd(fd, &m) < 0 || !m.overlay || !m.is_root || m.dev != live->dev)
                return -ESTALE;
        if (umount2(FORMAT_PROC_FD_PATH(fd), MNT_DETACH) < 0)
                return negative_errno();
        safe_close(fd);
        fd = openat_resolve(AT_FDCWD, path, O_PATH | O_DIRECTORY | O_CLOEXEC, RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
        if (fd < 0)
                return fd;
        if (mount_identity_of_fd(fd, &m) < 0 || !m.overlay || !m.is_root || m.dev != pending->dev)
                return -ESTALE;
        clone = open_tree(fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
        if (clone < 0)
                return negative_errno();
        if (mount_setattr(clone, "", AT_EMPTY_PATH, &(struct mount_attr) { .propagation = MS_PRIVATE },
                          sizeof(struct mount_attr)) < 0) {
                r = negative_errno();
                safe_close(clone);
                return r;
        }
        *ret = clone;
        return 0;
}

/* The host's tree waiting beneath its live one at rel, while its transition is delayed. */
static const Tree *host_pending_tree(const FollowHost *h, const char *rel) {
        if (!journal_delayed(h->journal))
                return NULL;
        for (size_t i = 0; i < h->journal->n_transitions; i++) {
                const JournalTransition *t = &h->journal->transitions[i];

                if (streq(t->hierarchy, rel) && t->new_tree && t->old_tree)
                        return tree_list_find((TreeList *) &h->journal->trees, t->new_tree);
        }
        return NULL;
}

/* One namespace's update: prepared in the host, carried out by the worker, recorded from its
 * report. */
typedef struct FollowJob {
        Follower *f;
        char *rel_owned[HIERARCHIES_MAX]; /* the paths in the namespace, with FollowHost.ns_prefix */
        bool stop;
        pid_t pid;
        FollowInput in[HIERARCHIES_MAX];
        size_t n;
} FollowJob;

/* What the worker sends back per job, in the order of the jobs. */
typedef struct FollowReport {
        int r; /* < 0: the namespace was not updated (-ESRCH: it has gone) */
        char message[480];
        FollowOutcome out[HIERARCHIES_MAX];
} FollowReport;

/* Step 1 and what step 4 needs from the host.  -ESRCH: the namespace has gone. */
static int follow_prepare(const FollowHost *h, Follower *f, bool stop, FollowJob *ret) {
        FollowJob j = { .f = f, .stop = stop };

        j.pid = namespace_find_process(f->ns, f->pid);
        if (j.pid <= 0)
                return -ESRCH;
        f->pid = j.pid;
        if (!f->name) {
                _cleanup_free_ char *machine = NULL;
                process_names(j.pid, &f->name, &machine);
                if (!f->machine)
                        f->machine = TAKE_PTR(machine);
        }
        STRV_FOREACH(rel, h->hierarchies) {
                FollowInput *i = &j.in[j.n];
                _cleanup_close_ int base = -EBADF;
                struct stat st;

                if (!isempty(h->ns_prefix)) {
                        j.rel_owned[j.n] = strjoin3(h->ns_prefix, "/", *rel);
                        if (!j.rel_owned[j.n]) {
                                for (size_t k = 0; k < j.n; k++)
                                        free(j.rel_owned[k]);
                                return -ENOMEM;
                        }
                }
                *i = (FollowInput) { .rel = j.rel_owned[j.n] ?: *rel, .hierarchy = *rel, .tree_fd = -EBADF,
                                     .pending_fd = -EBADF,
                                     .old = follower_tree(f, *rel), .waiting = tree_of(&f->waiting, *rel) };
                j.n++;
                i->host = stop ? NULL : host_tree(h, *rel);
                i->pending = stop || !i->host ? NULL : host_pending_tree(h, *rel);
                base = openat_resolve(h->base_fd, *rel, O_PATH | O_DIRECTORY | O_CLOEXEC,
                                      RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
                if (base >= 0 && fstat(base, &st) >= 0) {
                        i->base_dev = st.st_dev;
                        i->base_ino = st.st_ino;
                        i->base_known = true;
                }
        }
        *ret = j;
        return 0;
}

static int write_full(int fd, const void *p, size_t size) {
        for (size_t done = 0; done < size;) {
                ssize_t k = write(fd, (const char *) p + done, size - done);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        return k < 0 ? negative_errno() : -EIO;
                done += k;
        }
        return 0;
}

static int read_full(int fd, void *p, size_t size) {
        for (size_t done = 0; done < size;) {
                ssize_t k = read(fd, (char *) p + done, size - done);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        return k < 0 ? negative_errno() : -EPIPE;
                done += k;
        }
        return 0;
}

/* Steps 2-5 for one job, in the worker, which starts each job in the host's namespace. */
static void follow_job_run(const FollowHost *h, FollowJob *j, int host_ns, int proc_fd, FollowReport *rep) {
        _cleanup_close_ int ns_fd = -EBADF, root_fd = -EBADF;
        char path[64];
        int r;

        if (setns(host_ns, CLONE_NEWNS) < 0 || fchdir(proc_fd) < 0) {
                rep->r = negative_errno();
                snprintf(rep->message, sizeof(rep->message), "The host's namespace could not be entered again: %s",
                         strerror(-rep->r));
                return;
        }
        for (size_t i = 0; i < j->n; i++) {
                if (!j->in[i].pending)
                        continue;
                r = host_pending_clone(h, j->in[i].hierarchy, j->in[i].host, j->in[i].pending, &j->in[i].pending_fd);
                if (r >= 0 && (setns(host_ns, CLONE_NEWNS) < 0 || fchdir(proc_fd) < 0))
                        r = negative_errno();
                if (r < 0) {
                        rep->r = r;
                        snprintf(rep->message, sizeof(rep->message),
                                 "The host's tree of /%s waiting for the delayed transition cannot be cloned: %s", j->in[i].rel,
                                 strerror(-r));
                        return;
                }
        }
        for (size_t i = 0; i < j->n; i++) {
                if (!j->in[i].host)
                        continue;
                r = host_tree_clone(h, j->in[i].hierarchy, j->in[i].host, &j->in[i].tree_fd);
                if (r < 0) {
                        rep->r = r;
                        snprintf(rep->message, sizeof(rep->message), "The host's tree of /%s cannot be cloned: %s", j->in[i].rel,
                                 strerror(-r));
                        return;
                }
        }
        snprintf(path, sizeof(path), "%i/ns/mnt", (int) j->pid);
        ns_fd = openat(proc_fd, path, O_RDONLY | O_CLOEXEC);
        snprintf(path, sizeof(path), "%i/root", (int) j->pid);
        root_fd = openat(proc_fd, path, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (ns_fd < 0 || root_fd < 0) {
                rep->r = errno == ENOENT ? -ESRCH : negative_errno();
                snprintf(rep->message, sizeof(rep->message), "The namespace could not be entered: %s", strerror(-rep->r));
                return;
        }
        r = follow_enter(&(FollowEntry) { .ns_fd = ns_fd, .root_fd = root_fd, .proc_fd = proc_fd });
        if (r < 0) {
                rep->r = r;
                snprintf(rep->message, sizeof(rep->message), "The namespace could not be entered: %s", strerror(-r));
                return;
        }
        rep->r = follow_in_namespace(j->in, j->n, &(FollowEntry) { .ns_fd = ns_fd, .root_fd = root_fd, .proc_fd = proc_fd },
                                     rep->out);
}

/* Steps 2-5 for every job, in one worker process: one fork for any number of namespaces (a
 * fork costs more than the work in a namespace).  reps[k] gets job k's report; a job the
 * worker did not report (it died) gets -EIO. */
static int follow_jobs_run(const FollowHost *h, FollowJob *jobs, size_t n_jobs, FollowReport *reps) {
        _cleanup_close_ int host_ns = -EBADF, proc_fd = -EBADF;
        int pipe_fds[2] = { -EBADF, -EBADF };
        size_t k = 0;
        pid_t child;
        int status = 0;

        if (n_jobs == 0)
                return 0;
        host_ns = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);
        proc_fd = open("/proc", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (host_ns < 0 || proc_fd < 0 || pipe2(pipe_fds, O_CLOEXEC) < 0)
                return negative_errno();
        child = fork();
        if (child < 0) {
                safe_close(pipe_fds[0]);
                safe_close(pipe_fds[1]);
                return negative_errno();
        }
        if (child == 0) {
                (void) prctl(PR_SET_PDEATHSIG, SIGKILL);
                pipe_fds[0] = safe_close(pipe_fds[0]);
                proc_prefix_use_cwd();
                for (size_t i = 0; i < n_jobs; i++) {
                        FollowReport rep = {};

                        follow_job_run(h, &jobs[i], host_ns, proc_fd, &rep);
                        for (size_t x = 0; x < jobs[i].n; x++) {
                                jobs[i].in[x].tree_fd = safe_close(jobs[i].in[x].tree_fd);
                                jobs[i].in[x].pending_fd = safe_close(jobs[i].in[x].pending_fd);
                        }
                        if (write_full(pipe_fds[1], &rep, sizeof(rep)) < 0)
                                _exit(1);
                }
                _exit(0);
        }
        pipe_fds[1] = safe_close(pipe_fds[1]);
        for (; k < n_jobs; k++)
                if (read_full(pipe_fds[0], &reps[k], sizeof(FollowReport)) < 0)
                        break;
        for (size_t i = k; i < n_jobs; i++) {
                reps[i] = (FollowReport) { .r = -EIO };
                snprintf(reps[i].message, sizeof(reps[i].message), "The worker that updates the followed namespaces died.");
        }
        pipe_fds[0] = safe_close(pipe_fds[0]);
        while (waitpid(child, &status, 0) < 0)
                if (errno != EINTR)
                        return negative_errno();
        for (size_t i = 0; i < n_jobs; i++) {
                reps[i].message[sizeof(reps[i].message) - 1] = 0;
                for (size_t x = 0; x < HIERARCHIES_MAX; x++)
                        reps[i].out[x].message[sizeof(reps[i].out[x].message) - 1] = 0;
        }
        return 0;
}

static int strv_extend_safe(char ***l, const char *s) {
        _cleanup_free_ char *safe = NULL;
        return strv_extend(l, string_safe(s, &safe));
}

/* A record of a tree of ours in a followed namespace, made from the host's record of it (t) and
 * what the worker found there (o). */
static int follower_add_tree(TreeList *l, const char *rel, const Tree *host, uint64_t generation, const FollowOutcome *o) {
        _cleanup_(tree_done) Tree t = {};
        _cleanup_free_ char *id = NULL;

        if (random_hex(TREE_ID_LEN / 2, &id) < 0 || !(t.hierarchy = strdup(rel)) ||
            (host && strv_copy(host->extensions, &t.extensions) < 0))
                return -ENOMEM;
        t.id = TAKE_PTR(id);
        t.generation = generation;
        t.unique_id = o->unique_id;
        t.mount_id = o->mount_id;
        t.dev = (dev_t) o->dev;
        t.since = now_realtime_usec();
        if (tree_list_add(l, &t) < 0)
                return -ENOMEM;
        t = (Tree) {};
        return 0;
}

/* The waiting tree of hierarchy rel shows there: it becomes the recorded one. */
static int follower_promote(Follower *f, const char *rel) {
        Tree *w = tree_of(&f->waiting, rel), *old = tree_of(&f->trees, rel);
        _cleanup_(tree_done) Tree t = {};

        if (!w)
                return 0;
        t = (Tree) { .generation = w->generation, .unique_id = w->unique_id, .mount_id = w->mount_id, .dev = w->dev,
                     .since = now_realtime_usec() };
        if (!(t.id = strdup(w->id)) || !(t.hierarchy = strdup(w->hierarchy)) || strv_copy(w->extensions, &t.extensions) < 0)
                return -ENOMEM;
        if (old)
                tree_list_drop(&f->trees, old->id);
        tree_list_drop(&f->waiting, w->id);
        if (tree_list_add(&f->trees, &t) < 0)
                return -ENOMEM;
        t = (Tree) {};
        return 0;
}

/* Step 6: the record of one namespace from its job's report.  Returns 0, -ESRCH when the
 * namespace has gone, or < 0 with f->error set. */
static int follow_record(const FollowHost *h, FollowJob *j, const FollowReport *rep) {
        Follower *f = j->f;
        bool failed = false;
        int r;

        free(f->error);
        f->error = NULL;
        strv_free(f->problems);
        f->problems = NULL;
        f->shows_host = false;
        if (rep->r == -ESRCH)
                return -ESRCH;
        for (size_t i = 0; i < j->n; i++) {
                const FollowOutcome *o = &rep->out[i];
                const char *rel = j->in[i].hierarchy;

                if (IN_SET(o->view, FOLLOW_VIEW_OURS, FOLLOW_VIEW_BASE, FOLLOW_VIEW_HOST_TREE))
                        f->shows_host = true;

                if (o->action == FOLLOW_LEAVE)
                        (void) strv_extend_safe(&f->problems, o->message);
                if (o->action == FOLLOW_PROMOTE || (o->action == FOLLOW_COMMIT && o->state == SWAP_DETACHED)) {
                        /* The waiting tree shows there now: it is the one recorded. */
                        r = follower_promote(f, rel);
                        if (r < 0)
                                return r;
                        continue;
                }
                if (o->action == FOLLOW_DELAY && o->state == SWAP_DELAYED) {
                        r = follower_add_tree(&f->waiting, rel, j->in[i].pending, h->journal->pending_generation, o);
                        if (r < 0)
                                return r;
                        continue;
                }
                if (!IN_SET(o->action, FOLLOW_ATTACH, FOLLOW_REPLACE, FOLLOW_DETACH, FOLLOW_DELAY, FOLLOW_COMMIT))
                        continue;
                if (!IN_SET(o->state, SWAP_ATTACHED, SWAP_REPLACED, SWAP_DETACHED)) {
                        failed = true;
                        continue;
                }
                /* The old tree there is gone (ours, or the waiting one that showed); the new
                 * one, if any, is recorded. */
                if (j->in[i].old)
                        tree_list_drop(&f->trees, j->in[i].old->id);
                if (j->in[i].waiting)
                        tree_list_drop(&f->waiting, j->in[i].waiting->id);
                if (o->state != SWAP_DETACHED) {
                        r = follower_add_tree(&f->trees, rel, j->in[i].host, h->journal->generation, o);
                        if (r < 0)
                                return r;
                }
        }
        if (rep->r < 0 || failed) {
                const char *why = rep->message[0] ? rep->message : NULL;

                for (size_t i = 0; i < j->n && !why; i++)
                        if (rep->out[i].message[0] && rep->out[i].action != FOLLOW_LEAVE)
                                why = rep->out[i].message;
                (void) set_message(&f->error, 0, "%s", why ?: "The namespace could not be updated.");
                return -EIO;
        }
        f->generation = j->stop ? 0 : h->journal->generation;
        f->since = now_realtime_usec();
        return 0;
}

/* Brings the namespaces to what the host shows (stop: to their base).  results[k]: 0, -ESRCH
 * (gone), or < 0 with the follower's error set. */
static int follow_many(const FollowHost *h, Follower **fs, size_t n, bool stop, int *results) {
        _cleanup_free_ FollowJob *jobs = calloc(n ?: 1, sizeof(FollowJob));
        _cleanup_free_ FollowReport *reps = calloc(n ?: 1, sizeof(FollowReport));
        _cleanup_free_ size_t *of = calloc(n ?: 1, sizeof(size_t));
        size_t n_jobs = 0;
        int r;

        if (!jobs || !reps || !of)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                results[i] = follow_prepare(h, fs[i], stop, &jobs[n_jobs]);
                if (results[i] < 0)
                        continue;
#ifdef SYSEXTD_TEST_HOOKS
                testhook_point("follow-enter", (long) jobs[n_jobs].pid);
#endif
                of[n_jobs++] = i;
        }
        r = follow_jobs_run(h, jobs, n_jobs, reps);
        for (size_t k = 0; r >= 0 && k < n_jobs; k++) {
                results[of[k]] = follow_record(h, &jobs[k], &reps[k]);
                if (results[of[k]] == -ENOMEM)
                        r = -ENOMEM;
        }
        for (size_t k = 0; k < n_jobs; k++)
                for (size_t x = 0; x < HIERARCHIES_MAX; x++)
                        free(jobs[k].rel_owned[x]);
        return r < 0 ? r : 0;
}

static int follow_one(const FollowHost *h, Follower *f, bool stop) {
        int result, r;

        r = follow_many(h, &f, 1, stop, &result);
        if (r < 0) {
                (void) set_message(&f->error, 0, "The namespace could not be updated: %s", strerror(-r));
                return r;
        }
        return result;
}

/* A failure is a warning each time; what was left alone is said when it is followed, and
 * otherwise only in status. */
static void log_follower(const Follower *f, const char *what, bool problems) {
        _cleanup_free_ char *name = NULL, *error = NULL;

        if (f->error)
                log_warning("Mount namespace %" PRIu64 " (process %i, %s) %s: %s", f->ns, (int) f->pid,
                            string_safe(f->name ?: "?", &name), what, string_safe(f->error, &error));
        STRV_FOREACH(p, problems ? f->problems : NULL) {
                _cleanup_free_ char *s = NULL;
                log_info("Mount namespace %" PRIu64 " (process %i): %s.", f->ns, (int) f->pid, string_safe(*p, &s));
        }
}

/* machine_mode: FollowMachines= (follow_add_machine()).  Returns 1 when followed, 0 when a
 * machine was skipped or not followed. */
static int follow_add_full(const FollowHost *h, pid_t pid, const char *machine, bool machine_mode, char **ret_message) {
        _cleanup_(follower_list_done) FollowerList l = {};
        _cleanup_(follower_done) Follower fresh = {};
        _cleanup_free_ char *safe_machine = NULL;
        Follower *f = NULL;
        uint64_t ns, own;
        int r;

        *ret_message = NULL;
        r = follow_namespace_of(pid, &ns);
        if (r < 0)
                return set_message(ret_message, -r, "Process %i cannot be followed: %s.", (int) pid,
                                   r == -ESRCH ? "no such process" : strerror(-r));
        if (mount_namespace_id(&own) >= 0 && own == ns) {
                if (machine_mode) {
                        log_debug("Machine %s is in sysextd's own mount namespace; not followed.",
                                  string_safe(strna(machine), &safe_machine));
                        return 0;
                }
                return set_message(ret_message, EINVAL,
                                   "Process %i is in sysextd's own mount namespace: it sees every transition already.",
                                   (int) pid);
        }
        r = follower_list_load(h->journal_fd, &l);
        if (r < 0)
                return set_message(ret_message, -r, "Failed to read the followed namespaces: %s", strerror(-r));
        for (size_t i = 0; i < l.n; i++)
                if (l.followers[i].ns == ns)
                        f = &l.followers[i];
        if (!f) {
                fresh.ns = ns;
                fresh.pid = pid;
                if (machine && !(fresh.machine = strdup(machine)))
                        return set_message(ret_message, ENOMEM, "Out of memory.");
                f = &fresh;
        } else {
                f->pid = pid;
                if (machine && !f->machine && !(f->machine = strdup(machine)))
                        return set_message(ret_message, ENOMEM, "Out of memory.");
        }
        r = follow_one(h, f, false);
        if (r == -ESRCH)
                return set_message(ret_message, ESRCH, "Process %i has gone; its namespace was not followed.", (int) pid);
        /* A machine of its own OS: nothing was changed there (every hierarchy was left alone or
         * is absent), and nothing is recorded.  One that is followed already stays so. */
        if (machine_mode && f == &fresh && r >= 0 && !f->shows_host) {
                log_info("Machine %s has its own /usr; not followed.", string_safe(strna(machine), &safe_machine));
                return 0;
        }
        if (follower_save(h->journal_fd, f) < 0)
                return set_message(ret_message, EIO, "Failed to record the followed namespace of process %i.", (int) pid);
        log_follower(f, "could not be updated", true);
        if (r < 0)
                return set_message(ret_message, -r, "Process %i's mount namespace is followed, but it could not be updated now: %s",
                                   (int) pid, strna(f->error));
        if (f->machine)
                log_info("Mount namespace %" PRIu64 " of machine %s (process %i) follows the host (generation %" PRIu64 ").", ns,
                         string_safe(f->machine, &safe_machine), (int) pid, f->generation);
        else
                log_info("Mount namespace %" PRIu64 " of process %i follows the host (generation %" PRIu64 ").", ns, (int) pid,
                         f->generation);
        return 1;
}

/* Many processes at once: one worker goes through every namespace, the host's trees are cloned
 * once.  A namespace named twice is followed once. */
int follow_add_many(const FollowHost *h, const pid_t *pids, size_t n) {
        _cleanup_(follower_list_done) FollowerList l = {};
        _cleanup_free_ Follower *fresh = calloc(n ?: 1, sizeof(Follower));
        _cleanup_free_ Follower **fs = calloc(n ?: 1, sizeof(Follower *));
        _cleanup_free_ int *results = calloc(n ?: 1, sizeof(int));
        _cleanup_free_ pid_t *of = calloc(n ?: 1, sizeof(pid_t));
        size_t n_fresh = 0, k = 0;
        uint64_t own = 0;
        int r, failed = 0;

        if (!fresh || !fs || !results || !of)
                return -ENOMEM;
        r = follower_list_load(h->journal_fd, &l);
        if (r < 0)
                return log_error_errno(r, "Failed to read the followed namespaces: %m");
        (void) mount_namespace_id(&own);
        for (size_t i = 0; i < n; i++) {
                Follower *f = NULL;
                uint64_t ns;

                r = follow_namespace_of(pids[i], &ns);
                if (r < 0) {
                        log_error("Process %i cannot be followed: %s.", (int) pids[i], r == -ESRCH ? "no such process" : strerror(-r));
                        failed++;
                        continue;
                }
                if (ns == own) {
                        log_error("Process %i is in sysextd's own mount namespace: it sees every transition already.", (int) pids[i]);
                        failed++;
                        continue;
                }
                for (size_t x = 0; x < l.n && !f; x++)
                        if (l.followers[x].ns == ns)
                                f = &l.followers[x];
                for (size_t x = 0; x < n_fresh && !f; x++)
                        if (fresh[x].ns == ns)
                                f = &fresh[x];
                if (!f) {
                        f = &fresh[n_fresh++];
                        f->ns = ns;
                } else {
                        bool seen = false;

                        for (size_t x = 0; x < k && !seen; x++)
                                seen = fs[x] == f;
                        if (seen)
                                continue;
                }
                f->pid = pids[i];
                of[k] = pids[i];
                fs[k++] = f;
        }
        r = follow_many(h, fs, k, false, results);
        if (r < 0) {
                log_error_errno(r, "Failed to follow the mount namespaces: %m");
                failed += (int) k;
                k = 0;
        }
        for (size_t i = 0; i < k; i++) {
                Follower *f = fs[i];

                if (results[i] == -ESRCH) {
                        log_error("Process %i has gone; its namespace was not followed.", (int) of[i]);
                        failed++;
                        continue;
                }
                if (follower_save(h->journal_fd, f) < 0) {
                        log_error("Failed to record the followed namespace of process %i.", (int) of[i]);
                        failed++;
                        continue;
                }
                log_follower(f, "could not be updated", true);
                if (results[i] < 0) {
                        _cleanup_free_ char *why = NULL;

                        log_error("Process %i's mount namespace is followed, but it could not be updated now: %s", (int) of[i],
                                  string_safe(strna(f->error), &why));
                        failed++;
                } else
                        log_info("Mount namespace %" PRIu64 " of process %i follows the host (generation %" PRIu64 ").", f->ns,
                                 (int) of[i], f->generation);
        }
        for (size_t i = 0; i < n_fresh; i++)
                follower_done(&fresh[i]);
        return failed;
}

int follow_add(const FollowHost *h, pid_t pid, const char *machine, char **ret_message) {
        int r = follow_add_full(h, pid, machine, false, ret_message);
        return r < 0 ? r : 0;
}

int follow_add_machine(const FollowHost *h, pid_t pid, const char *machine, char **ret_message) {
        return follow_add_full(h, pid, machine, true, ret_message);
}

int follow_forget_machine(const FollowHost *h, const char *machine) {
        _cleanup_(follower_list_done) FollowerList l = {};
        _cleanup_free_ char *safe = NULL;
        int r, n = 0;

        r = follower_list_load(h->journal_fd, &l);
        if (r < 0)
                return r;
        for (size_t i = 0; i < l.n; i++) {
                if (!streq_ptr(l.followers[i].machine, machine))
                        continue;
                follower_forget(h->journal_fd, l.followers[i].ns);
                log_info("Machine %s has gone; its mount namespace %" PRIu64 " is no longer followed.",
                         string_safe(machine, &safe), l.followers[i].ns);
                n++;
        }
        return n;
}

int follow_once(const FollowHost *h, pid_t pid, TreeList *olds, char **ret_message) {
        _cleanup_(follower_done) Follower f = { .pid = pid };
        _cleanup_free_ char *safe = NULL;
        int r;

        *ret_message = NULL;
        r = follow_namespace_of(pid, &f.ns);
        if (r < 0)
                return set_message(ret_message, -r, "Process %i: %s.", (int) pid, r == -ESRCH ? "no such process" : strerror(-r));
        f.trees = *olds;
        *olds = (TreeList) {};
        r = follow_one(h, &f, false);
        if (r == -ESRCH)
                return set_message(ret_message, ESRCH, "Process %i has gone; its namespace was not updated.", (int) pid);
        if (r < 0)
                return set_message(ret_message, -r, "%s", string_safe(f.error ?: "The namespace could not be updated.", &safe));
        return 0;
}

int follow_remove(const FollowHost *h, pid_t pid, char **ret_message) {
        _cleanup_(follower_list_done) FollowerList l = {};
        Follower *f = NULL;
        uint64_t ns;
        int r;

        *ret_message = NULL;
        r = follow_namespace_of(pid, &ns);
        if (r < 0)
                return set_message(ret_message, -r, "Process %i: %s.", (int) pid,
                                   r == -ESRCH ? "no such process" : strerror(-r));
        r = follower_list_load(h->journal_fd, &l);
        if (r < 0)
                return set_message(ret_message, -r, "Failed to read the followed namespaces: %s", strerror(-r));
        for (size_t i = 0; i < l.n; i++)
                if (l.followers[i].ns == ns)
                        f = &l.followers[i];
        if (!f)
                return set_message(ret_message, ENOENT, "The mount namespace of process %i is not followed.", (int) pid);
        f->pid = pid;
        r = follow_one(h, f, true);
        /* Our tree with a delayed transition's beneath it is left there (detaching it would show
         * the waiting one): still followed until that is committed. */
        if (r >= 0 && f->waiting.n > 0) {
                (void) follower_save(h->journal_fd, f);
                return set_message(ret_message, EBUSY,
                                   "A delayed transition waits in the mount namespace of process %i; commit it first (sysextd commit --pid=%i), then unfollow.",
                                   (int) pid, (int) pid);
        }
        if (r < 0 && r != -ESRCH) {
                (void) follower_save(h->journal_fd, f);
                return set_message(ret_message, -r, "Failed to stop following the mount namespace of process %i: %s",
                                   (int) pid, strna(f->error));
        }
        follower_forget(h->journal_fd, ns);
        log_info("Mount namespace %" PRIu64 " of process %i no longer follows the host.", ns, (int) pid);
        return 0;
}

int follow_update_all(const FollowHost *h, FollowerList *l) {
        _cleanup_free_ Follower **fs = NULL;
        _cleanup_free_ int *results = NULL;
        int r, n_failed = 0;

        if (l->n == 0)
                return 0;
        fs = calloc(l->n, sizeof(Follower *));
        results = calloc(l->n, sizeof(int));
        if (!fs || !results)
                return -ENOMEM;
        for (size_t i = 0; i < l->n; i++)
                fs[i] = &l->followers[i];
        r = follow_many(h, fs, l->n, false, results);
        if (r < 0)
                return r;
        for (size_t i = 0; i < l->n; i++) {
                Follower *f = &l->followers[i];

                if (results[i] == -ESRCH) {
                        log_debug("Mount namespace %" PRIu64 " has gone; it is no longer followed.", f->ns);
                        follower_forget(h->journal_fd, f->ns);
                        continue;
                }
                if (results[i] < 0)
                        n_failed++;
                log_follower(f, "could not be updated", false);
                (void) follower_save(h->journal_fd, f);
        }
        return n_failed;
}
