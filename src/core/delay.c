/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Delayed transitions, seen from the mount namespaces.
 *
 * A delayed transition (swap.c, execute.c) left the new tree N beneath our old top O at each of
 * its hierarchies, on the host, and by propagation in every namespace that receives it (N'
 * beneath O').  A namespace moves to N when O' is dropped there; the host dropping O drops O'
 * everywhere that still has it (umount propagation follows N, the parent), which is recovery's
 * FINISH (recover.c), not this file's.
 *
 * Committing one namespace (sysextd commit --pid=N, --unit=, the bus's Commit()):
 *   1. enter:  a child process enters the namespace of the process (setns), takes its root as
 *              its own (chroot /proc/N/root) and the host's /proc, opened before, as its
 *              working directory (proc_prefix_use_cwd(), as follow.c does): the namespace's own
 *              /proc may be missing, of another PID namespace or forged
 *   2. look:   at every hierarchy, what a reader there reaches: a copy of O (overlay from source
 *              "sysextd" on O's superblock) with a copy of N right beneath it (its parent mount
 *              on N's superblock), or already N; anything else stops here with nothing changed
 *   3. drop:   per hierarchy, on a freshly pinned fd, the same check again and umount2() of
 *              that fd (MNT_DETACH): the top it checked, nothing else.  A slave's unmount does
 *              not propagate back: the host and every other namespace keep what they show.
 * What stays if we stop: after 3 for some hierarchies, that namespace shows N there and O at
 * the others; running the commit again finishes it, as does the host's commit.
 *
 * The same steps serve sysextd commit --pid= with nothing delayed (engine.c, namespaces.h):
 * there O is an older tree proven ours by its retired record (tree.h) and N the host's
 * current tree, right beneath it in a namespace that kept O' when the host dropped O.
 *
 * Status (delay_scan()): every mount namespace, once, by its first process: per hierarchy,
 * openat2() of the path relative to an O_PATH fd of /proc/PID/root (no symlinks, no magic
 * links, beneath it), fstat(): the superblock it shows, compared with O's and N's.
 */
#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "delay.h"
#include "fd-util.h"
#include "fileio.h"
#include "missing.h"
#include "mounts.h"
#include "util.h"

#define SYSEXTD_SOURCE "sysextd"

void delay_scan_done(DelayScan *s) {
        for (size_t i = 0; i < s->n_old; i++)
                free(s->old[i].unit);
        for (size_t i = 0; i < s->n_new; i++)
                free(s->new[i].unit);
        free(s->old);
        free(s->new);
        *s = (DelayScan) {};
}

int delay_namespace_of(pid_t pid, uint64_t *ret) {
        char path[64];
        struct stat st;

        snprintf(path, sizeof(path), "/proc/%i/ns/mnt", (int) pid);
        if (stat(path, &st) < 0)
                return errno == ENOENT ? -ESRCH : negative_errno();
        *ret = st.st_ino;
        return 0;
}

char *delay_unit_of(pid_t pid) {
        _cleanup_free_ char *text = NULL;
        char path[64], *line, *found = NULL, *save = NULL, *slash;

        snprintf(path, sizeof(path), "/proc/%i/cgroup", (int) pid);
        if (read_file_at(AT_FDCWD, path, 0, 64 * 1024, &text, NULL, NULL) < 0)
                return NULL;
        for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                char *p = strchr(line, ':');

                p = p ? strchr(p + 1, ':') : NULL;
                if (!p)
                        continue;
                if (!found || startswith(line, "0::"))
                        found = p + 1;
                if (startswith(line, "0::"))
                        break;
        }
        if (!found)
                return NULL;
        slash = strrchr(found, '/');
        found = slash ? slash + 1 : found;
        return isempty(found) ? NULL : strdup(found);
}

static bool is_unit_name(const char *u) {
        return u && (endswith(u, ".service") || endswith(u, ".scope"));
}

/* The unit of a namespace: of its first process met, or, where that one is in no unit (a
 * helper that entered it, say), of the first of its processes that is. */
char *delay_namespace_unit(uint64_t ns, pid_t first) {
        _cleanup_closedir_ DIR *proc = NULL;
        char *u = delay_unit_of(first);
        struct dirent *p;

        if (is_unit_name(u))
                return u;
        proc = opendir("/proc");
        while (proc && (p = readdir(proc))) {
                char *end, *v;
                long pid = strtol(p->d_name, &end, 10);
                uint64_t n;

                if (*end || pid <= 0 || pid > INT32_MAX || delay_namespace_of((pid_t) pid, &n) < 0 || n != ns)
                        continue;
                v = delay_unit_of((pid_t) pid);
                if (is_unit_name(v)) {
                        free(u);
                        return v;
                }
                free(v);
        }
        return u;
}

static int push_namespace(DelayNamespace **a, size_t *n, uint64_t ns, pid_t pid) {
        DelayNamespace *x = reallocarray(*a, *n + 1, sizeof(DelayNamespace));

        if (!x)
                return -ENOMEM;
        *a = x;
        x[(*n)++] = (DelayNamespace) { .ns = ns, .pid = pid, .unit = delay_namespace_unit(ns, pid) };
        return 0;
}

static bool seen_before(const uint64_t *seen, size_t n, uint64_t ns) {
        for (size_t i = 0; i < n; i++)
                if (seen[i] == ns)
                        return true;
        return false;
}

/* Calls f for the first process of every mount namespace; stops at f's error. */
static int for_each_namespace(int (*f)(pid_t pid, uint64_t ns, void *userdata), void *userdata) {
        _cleanup_closedir_ DIR *proc = opendir("/proc");
        _cleanup_free_ uint64_t *seen = NULL;
        size_t n_seen = 0;
        struct dirent *p;

        if (!proc)
                return negative_errno();
        while ((p = readdir(proc))) {
                uint64_t ns, *x;
                char *end;
                long pid;
                int r;

                if (p->d_name[0] < '1' || p->d_name[0] > '9')
                        continue;
                pid = strtol(p->d_name, &end, 10);
                if (*end || pid <= 0 || pid > INT32_MAX || delay_namespace_of((pid_t) pid, &ns) < 0 ||
                    seen_before(seen, n_seen, ns))
                        continue;
                x = reallocarray(seen, n_seen + 1, sizeof(uint64_t));
                if (!x)
                        return -ENOMEM;
                seen = x;
                seen[n_seen++] = ns;
                r = f((pid_t) pid, ns, userdata);
                if (r < 0)
                        return r;
        }
        return 0;
}

typedef struct ScanContext {
        const DelayHierarchy *h;
        size_t n;
        const uint64_t *followed;
        size_t n_followed;
        DelayScan *scan;
} ScanContext;

/* Where a hierarchy is, below a namespace's root: the host's path, or, in a namespace that
 * follows the host, the hierarchy below its own root. */
static const char *hierarchy_path(const DelayHierarchy *h, bool followed) {
        return followed && h->rel ? h->rel : h->path + strspn(h->path, "/");
}

static int scan_one(pid_t pid, uint64_t ns, void *userdata) {
        ScanContext *c = userdata;
        _cleanup_close_ int root = -EBADF;
        bool any_old = false, all_new = true;
        char path[64];

        bool followed = seen_before(c->followed, c->n_followed, ns);

        snprintf(path, sizeof(path), "/proc/%i/root", (int) pid);
        root = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (root < 0)
                return 0;
        for (size_t i = 0; i < c->n; i++) {
                _cleanup_close_ int fd = -EBADF;
                struct stat st;

                fd = openat_resolve(root, hierarchy_path(&c->h[i], followed), O_PATH | O_DIRECTORY,
                                    RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
                if (fd < 0 || fstat(fd, &st) < 0) {
                        all_new = false;
                        continue;
                }
                if (st.st_dev == c->h[i].old_dev)
                        any_old = true;
                else if (c->h[i].has_new ? st.st_dev != c->h[i].new_dev : false)
                        all_new = false;
        }
        if (any_old)
                return push_namespace(&c->scan->old, &c->scan->n_old, ns, pid);
        if (all_new && c->n > 0)
                return push_namespace(&c->scan->new, &c->scan->n_new, ns, pid);
        return 0;
}

int delay_scan(const DelayHierarchy *h, size_t n, const uint64_t *followed, size_t n_followed, DelayScan *ret) {
        _cleanup_(delay_scan_done) DelayScan s = {};
        ScanContext c = { .h = h, .n = n, .followed = followed, .n_followed = n_followed, .scan = &s };
        int r;

        r = for_each_namespace(scan_one, &c);
        if (r < 0)
                return r;
        *ret = s;
        s = (DelayScan) {};
        return 0;
}

int delay_pids_of_unit(const char *unit, pid_t **ret, size_t *ret_n) {
        _cleanup_closedir_ DIR *proc = opendir("/proc");
        _cleanup_free_ pid_t *pids = NULL;
        _cleanup_free_ uint64_t *seen = NULL;
        size_t n = 0;
        struct dirent *p;

        if (!proc)
                return negative_errno();
        while ((p = readdir(proc))) {
                _cleanup_free_ char *u = NULL;
                uint64_t ns;
                char *end;
                long pid;
                void *x;

                if (p->d_name[0] < '1' || p->d_name[0] > '9')
                        continue;
                pid = strtol(p->d_name, &end, 10);
                if (*end || pid <= 0 || pid > INT32_MAX)
                        continue;
                u = delay_unit_of((pid_t) pid);
                if (!u || !streq(u, unit) || delay_namespace_of((pid_t) pid, &ns) < 0 || seen_before(seen, n, ns))
                        continue;
                x = reallocarray(pids, n + 1, sizeof(pid_t));
                if (!x)
                        return -ENOMEM;
                pids = x;
                x = reallocarray(seen, n + 1, sizeof(uint64_t));
                if (!x)
                        return -ENOMEM;
                seen = x;
                pids[n] = (pid_t) pid;
                seen[n++] = ns;
        }
        *ret = TAKE_PTR(pids);
        *ret_n = n;
        return 0;
}

typedef enum View {
        VIEW_OLD,   /* a copy of the old tree with a copy of the new one right beneath */
        VIEW_NEW,   /* the new tree (or, for an unmerge, no longer the old one) */
        VIEW_OTHER,
} View;

/* Step 2 on a pinned fd of the hierarchy, in the namespace. */
static View look(int fd, const DelayHierarchy *h, char *why, size_t why_size) {
        MountIdentity m;
        MountEntry top = {}, below = {};
        View v = VIEW_OTHER;

        if (mount_identity_of_fd(fd, &m) < 0) {
                snprintf(why, why_size, "it cannot be inspected");
                return VIEW_OTHER;
        }
        if (m.dev != h->old_dev) {
                if (!h->has_new || m.dev == h->new_dev)
                        return VIEW_NEW;
                snprintf(why, why_size, "it shows neither the previous nor the new tree of sysextd");
                return VIEW_OTHER;
        }
        if (!m.is_root || !m.overlay || mount_top_entry(fd, &top) < 0 || !streq_ptr(top.source, SYSEXTD_SOURCE)) {
                snprintf(why, why_size, "what shows there is not a copy of sysextd's previous tree");
                goto finish;
        }
        if (!h->has_new) {
                v = VIEW_OLD;
                goto finish;
        }
        if (mountinfo_find(top.parent_id, &below) < 0 || below.dev != h->new_dev || !streq_ptr(below.fstype, "overlay") ||
            !streq_ptr(below.source, SYSEXTD_SOURCE)) {
                snprintf(why, why_size, "the new tree is not right beneath the previous one there");
                goto finish;
        }
        v = VIEW_OLD;
finish:
        mount_entry_done(&top);
        mount_entry_done(&below);
        return v;
}

static int open_hierarchy(const DelayHierarchy *h, bool followed) {
        _cleanup_free_ char *p = strjoin3("/", hierarchy_path(h, followed), "");

        /* From this process's root, which is the namespace's process's. */
        if (!p)
                return -ENOMEM;
        return openat_resolve(AT_FDCWD, p, O_PATH | O_DIRECTORY, RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
}

typedef struct CommitReport {
        int r;
        char message[512];
} CommitReport;

/* Steps 2 and 3, in the child, in the namespace. */
static void commit_in_namespace(const DelayHierarchy *h, size_t n, bool followed, CommitReport *rep) {
        View views[64];
        size_t n_old = 0;

        if (n > ELEMENTSOF(views)) {
                rep->r = -E2BIG;
                return;
        }
        for (size_t i = 0; i < n; i++) {
                _cleanup_close_ int fd = open_hierarchy(&h[i], followed);
                char why[256] = "";

                if (fd < 0) {
                        rep->r = fd;
                        snprintf(rep->message, sizeof(rep->message), "%s cannot be opened there: %s; nothing was changed.",
                                 h[i].path, strerror(-fd));
                        return;
                }
                views[i] = look(fd, &h[i], why, sizeof(why));
                if (views[i] == VIEW_OTHER) {
                        rep->r = -EBUSY;
                        snprintf(rep->message, sizeof(rep->message), "At %s %s; nothing was changed there.", h[i].path, why);
                        return;
                }
                if (views[i] == VIEW_OLD)
                        n_old++;
        }
        if (n_old == 0) {
                rep->r = 0;
                return;
        }
        for (size_t i = 0; i < n; i++) {
                _cleanup_close_ int fd = -EBADF;
                char why[256] = "";

                if (views[i] != VIEW_OLD)
                        continue;
                /* The check and the detach on one pinned fd: umount2() takes the top the
                 * check has just identified. */
                fd = open_hierarchy(&h[i], followed);
                if (fd < 0 || look(fd, &h[i], why, sizeof(why)) != VIEW_OLD) {
                        rep->r = -EBUSY;
                        snprintf(rep->message, sizeof(rep->message), "At %s %s (it changed during the commit).", h[i].path,
                                 fd < 0 ? "nothing can be opened" : why);
                        return;
                }
                if (umount2(FORMAT_PROC_FD_PATH(fd), MNT_DETACH) < 0) {
                        rep->r = negative_errno();
                        snprintf(rep->message, sizeof(rep->message), "Failed to detach the previous tree from %s there: %s",
                                 h[i].path, strerror(-rep->r));
                        return;
                }
        }
        rep->r = 1;
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

int delay_commit_namespace(pid_t pid, const DelayHierarchy *h, size_t n, bool followed, char **ret_message) {
        _cleanup_close_ int ns_fd = -EBADF, root_fd = -EBADF, proc_fd = -EBADF;
        int pipe_fds[2] = { -EBADF, -EBADF };
        CommitReport rep = { .r = -EIO };
        char path[64];
        int status = 0, r;
        pid_t child;

        snprintf(path, sizeof(path), "/proc/%i/ns/mnt", (int) pid);
        ns_fd = open(path, O_RDONLY | O_CLOEXEC);
        snprintf(path, sizeof(path), "/proc/%i/root", (int) pid);
        root_fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (ns_fd < 0 || root_fd < 0)
                return set_message(ret_message, errno == ENOENT ? ESRCH : errno, "No such process: %i.", (int) pid);
        proc_fd = open("/proc", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (proc_fd < 0 || pipe2(pipe_fds, O_CLOEXEC) < 0)
                return set_message(ret_message, errno, "Failed to prepare entering the namespace of process %i: %m", (int) pid);
        child = fork();
        if (child < 0) {
                r = negative_errno();
                safe_close(pipe_fds[0]);
                safe_close(pipe_fds[1]);
                return set_message(ret_message, -r, "Failed to start a process: %m");
        }
        if (child == 0) {
                (void) prctl(PR_SET_PDEATHSIG, SIGKILL);
                safe_close(pipe_fds[0]);
                if (setns(ns_fd, CLONE_NEWNS) < 0 || fchdir(root_fd) < 0 || chroot(".") < 0 || fchdir(proc_fd) < 0) {
                        rep.r = negative_errno();
                        snprintf(rep.message, sizeof(rep.message), "Failed to enter the mount namespace of process %i: %s",
                                 (int) pid, strerror(-rep.r));
                } else {
                        proc_prefix_use_cwd();
                        commit_in_namespace(h, n, followed, &rep);
                }
                if (write(pipe_fds[1], &rep, sizeof(rep)) != (ssize_t) sizeof(rep))
                        _exit(1);
                _exit(0);
        }
        pipe_fds[1] = safe_close(pipe_fds[1]);
        r = read_full(pipe_fds[0], &rep, sizeof(rep));
        safe_close(pipe_fds[0]);
        while (waitpid(child, &status, 0) < 0)
                if (errno != EINTR)
                        break;
        if (r < 0)
                return set_message(ret_message, EIO, "The process that commits the namespace of process %i died.", (int) pid);
        rep.message[sizeof(rep.message) - 1] = 0;
        if (rep.r < 0)
                return set_message(ret_message, -rep.r, "Cannot commit the mount namespace of process %i: %s", (int) pid,
                                   rep.message[0] ? rep.message : strerror(-rep.r));
        return rep.r;
}
