/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Mount namespaces that did not get the last swap.
 *
 * A swap reaches every namespace that receives the host's propagation.  Some do not, or keep
 * what they had: a service whose /usr is private (it shows a copy of an older tree of ours,
 * nothing beneath it), a slave copy with a mount of its own on our old tree (the kernel keeps
 * the old top there, the new tree right beneath it), a container that is not followed (it
 * shows the host's base).  Finding them (sysextd status --namespaces, ListNamespaces()):
 *
 *   1. every mount namespace once, by its first process in /proc (and how many it has)
 *   2. per hierarchy, openat2() relative to an O_PATH fd of /proc/PID/root (no symlinks, no
 *      magic links, beneath it): below the host's path where the namespace's root is the
 *      host's root directory, else below the namespace's own root (a container); fstat(),
 *      fstatfs(), statx(STATX_MNT_ID) and, for the root of an overlay, its mountinfo entry
 *      and its parent's from /proc/PID/mountinfo
 *   3. namespace_classify() (pure): the host's current tree, an older tree of ours (source
 *      "sysextd", another superblock) with or without the current one right beneath, the
 *      host's base (same directory), or something else (its own OS: not listed)
 * Nothing here changes anything; bringing one namespace up to date is engine_commit()'s
 * (sysextd commit --pid=), with the proof of ownership from the retired tree records (tree.h).
 */
#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "delay.h"
#include "fd-util.h"
#include "fileio.h"
#include "inspect.h"
#include "missing.h"
#include "mounts.h"
#include "namespaces.h"
#include "util.h"

#define SYSEXTD_SOURCE "sysextd"

static const char *const view_names[_NAMESPACE_VIEW_MAX] = {
        [NAMESPACE_VIEW_ABSENT] = "absent",
        [NAMESPACE_VIEW_CURRENT] = "current",
        [NAMESPACE_VIEW_OLDER_OVER_CURRENT] = "older-over-current",
        [NAMESPACE_VIEW_OLDER] = "older",
        [NAMESPACE_VIEW_BASE] = "base",
        [NAMESPACE_VIEW_OWN] = "own",
};

static const char *const view_words[_NAMESPACE_VIEW_MAX] = {
        [NAMESPACE_VIEW_ABSENT] = "absent",
        [NAMESPACE_VIEW_CURRENT] = "current tree",
        [NAMESPACE_VIEW_OLDER_OVER_CURRENT] = "older tree, current beneath",
        [NAMESPACE_VIEW_OLDER] = "older tree",
        [NAMESPACE_VIEW_BASE] = "base",
        [NAMESPACE_VIEW_OWN] = "its own",
};

const char *namespace_view_to_string(NamespaceView v) {
        return v >= 0 && v < _NAMESPACE_VIEW_MAX ? view_names[v] : NULL;
}

const char *namespace_view_describe(NamespaceView v) {
        return v >= 0 && v < _NAMESPACE_VIEW_MAX ? view_words[v] : NULL;
}

bool namespace_view_stale(NamespaceView v) {
        return IN_SET(v, NAMESPACE_VIEW_OLDER_OVER_CURRENT, NAMESPACE_VIEW_OLDER, NAMESPACE_VIEW_BASE);
}

NamespaceView namespace_classify(const NamespaceLook *l) {
        bool is_base;

        if (!l->exists)
                return NAMESPACE_VIEW_ABSENT;
        if (l->current_dev != 0 && l->dev == l->current_dev)
                return NAMESPACE_VIEW_CURRENT;
        is_base = l->base_known && l->dev == l->base_dev && l->ino == l->base_ino;
        if (is_base)
                /* Where the host has no extensions, its base is what it shows too. */
                return l->current_dev != 0 ? NAMESPACE_VIEW_BASE : NAMESPACE_VIEW_CURRENT;
        if ((uint32_t) l->top_magic == (uint32_t) OVERLAYFS_SUPER_MAGIC && l->top_is_root && l->top_sysextd)
                return l->current_dev != 0 && l->beneath_dev == l->current_dev && l->beneath_sysextd
                               ? NAMESPACE_VIEW_OLDER_OVER_CURRENT
                               : NAMESPACE_VIEW_OLDER;
        return NAMESPACE_VIEW_OWN;
}

void stale_namespace_done(StaleNamespace *s) {
        free(s->unit);
        free(s->machine);
        *s = (StaleNamespace) {};
}

void stale_namespace_list_done(StaleNamespaceList *l) {
        for (size_t i = 0; i < l->n; i++)
                stale_namespace_done(&l->namespaces[i]);
        free(l->namespaces);
        *l = (StaleNamespaceList) {};
}

/* "machine-NAME.scope" anywhere in the process's cgroup path: NAME. */
static char *machine_of(pid_t pid) {
        _cleanup_free_ char *text = NULL;
        char path[64], *p;

        snprintf(path, sizeof(path), "/proc/%i/cgroup", (int) pid);
        if (read_file_at(AT_FDCWD, path, 0, 64 * 1024, &text, NULL, NULL) < 0)
                return NULL;
        for (p = strstr(text, "/machine-"); p; p = strstr(p + 1, "/machine-")) {
                char *name = p + strlen("/machine-");
                size_t len = strcspn(name, "/\n");

                if (len > strlen(".scope") && strncmp(name + len - strlen(".scope"), ".scope", strlen(".scope")) == 0)
                        return strndup(name, len - strlen(".scope"));
        }
        return NULL;
}

/* Whether the root of process pid is the directory that is ours. */
static bool root_is_ours(int root_fd) {
        struct stat a, b;

        return fstat(root_fd, &a) >= 0 && stat("/", &b) >= 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

static const char *relative_path(const StaleNamespace *s, const NamespaceHierarchy *h) {
        return s->own_root ? h->name : h->path + strspn(h->path, "/");
}

char *namespace_hierarchy_path(const StaleNamespace *s, const NamespaceHierarchy *h) {
        return strjoin3("/", relative_path(s, h), "");
}

static void look_one(pid_t pid, int root_fd, const StaleNamespace *s, const NamespaceHierarchy *h, NamespaceTop *ret) {
        _cleanup_close_ int fd = -EBADF;
        NamespaceLook l = {
                .current_dev = h->current_dev,
                .base_known = h->base_known,
                .base_dev = h->base_dev,
                .base_ino = h->base_ino,
        };
        MountIdentity m = {};
        MountEntry top = {}, below = {};
        struct statfs sfs;
        struct stat st;

        *ret = (NamespaceTop) { .view = NAMESPACE_VIEW_ABSENT };
        fd = openat_resolve(root_fd, relative_path(s, h), O_PATH | O_DIRECTORY,
                            RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
        if (fd < 0)
                return; /* absent, or nothing that can be looked at: nothing to update */
        if (fstat(fd, &st) < 0 || fstatfs(fd, &sfs) < 0 || mount_identity_of_fd(fd, &m) < 0) {
                ret->view = NAMESPACE_VIEW_OWN;
                return;
        }
        l.exists = true;
        l.dev = st.st_dev;
        l.ino = st.st_ino;
        l.top_magic = (unsigned long) sfs.f_type;
        l.top_is_root = m.is_root;
        /* The mount table only for the root of an overlay: the rest is decided without it. */
        if (m.overlay && m.is_root && mountinfo_find_of(pid, m.id, &top) >= 0) {
                l.top_sysextd = streq_ptr(top.source, SYSEXTD_SOURCE) && streq_ptr(top.fstype, "overlay");
                if (l.top_sysextd && mountinfo_find_of(pid, top.parent_id, &below) >= 0) {
                        l.beneath_dev = below.dev;
                        l.beneath_sysextd = streq_ptr(below.fstype, "overlay") && streq_ptr(below.source, SYSEXTD_SOURCE);
                }
        }
        mount_entry_done(&top);
        mount_entry_done(&below);
        *ret = (NamespaceTop) {
                .view = namespace_classify(&l),
                .dev = st.st_dev,
                .unique_id = m.unique_id,
                .mount_id = m.id,
        };
}

int namespace_look(pid_t pid, const NamespaceHierarchy *h, size_t n, StaleNamespace *ret) {
        _cleanup_close_ int root_fd = -EBADF;
        StaleNamespace s = { .pid = pid };
        char path[64];
        int r;

        if (n > NAMESPACE_HIERARCHIES_MAX)
                return -E2BIG;
        r = delay_namespace_of(pid, &s.ns);
        if (r < 0)
                return r;
        snprintf(path, sizeof(path), "/proc/%i/root", (int) pid);
        root_fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (root_fd < 0)
                return errno == ENOENT ? -ESRCH : negative_errno();
        s.own_root = !root_is_ours(root_fd);
        s.n = n;
        for (size_t i = 0; i < n; i++)
                look_one(pid, root_fd, &s, &h[i], &s.tops[i]);
        *ret = s;
        return 0;
}

typedef struct Seen {
        uint64_t ns;
        pid_t first;
        unsigned n;
} Seen;

int namespaces_scan(const NamespaceHierarchy *h, size_t n, StaleNamespaceList *ret) {
        _cleanup_(stale_namespace_list_done) StaleNamespaceList l = {};
        _cleanup_closedir_ DIR *proc = opendir("/proc");
        _cleanup_free_ Seen *seen = NULL;
        size_t n_seen = 0;
        struct dirent *p;
        uint64_t own = 0;
        int r;

        if (!proc)
                return negative_errno();
        (void) mount_namespace_id(&own);
        /* 1: every namespace once, with its first process and how many it has. */
        while ((p = readdir(proc))) {
                uint64_t ns;
                char *end;
                long pid;
                size_t k;

                if (p->d_name[0] < '1' || p->d_name[0] > '9')
                        continue;
                pid = strtol(p->d_name, &end, 10);
                if (*end || pid <= 0 || pid > INT32_MAX || delay_namespace_of((pid_t) pid, &ns) < 0 || ns == own)
                        continue;
                for (k = 0; k < n_seen && seen[k].ns != ns; k++)
                        ;
                if (k == n_seen) {
                        Seen *x = reallocarray(seen, n_seen + 1, sizeof(Seen));

                        if (!x)
                                return -ENOMEM;
                        seen = x;
                        seen[n_seen++] = (Seen) { .ns = ns, .first = (pid_t) pid };
                }
                seen[k].n++;
        }
        /* 2, 3: what each shows. */
        for (size_t k = 0; k < n_seen; k++) {
                StaleNamespace s = {};
                bool stale = false;
                StaleNamespace *x;

                r = namespace_look(seen[k].first, h, n, &s);
                if (r == -E2BIG || r == -ENOMEM)
                        return r;
                if (r < 0 || s.ns != seen[k].ns)
                        continue; /* gone meanwhile */
                for (size_t i = 0; i < s.n; i++)
                        stale = stale || namespace_view_stale(s.tops[i].view);
                if (!stale)
                        continue;
                s.n_processes = seen[k].n;
                s.unit = delay_namespace_unit(s.ns, s.pid);
                s.machine = machine_of(s.pid);
                x = reallocarray(l.namespaces, l.n + 1, sizeof(StaleNamespace));
                if (!x) {
                        stale_namespace_done(&s);
                        return -ENOMEM;
                }
                l.namespaces = x;
                l.namespaces[l.n++] = s;
        }
        *ret = l;
        l = (StaleNamespaceList) {};
        return 0;
}
