/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Delayed transitions, seen from the mount namespaces (delay.c has the order of steps): which
 * namespaces show the old and which the new trees of a delayed transition, and committing one
 * namespace by dropping the old top there.  Nothing here touches the host's namespace or the
 * journal: recovery commits on the host (recover.c). */

/* One hierarchy of a delayed transition. */
typedef struct DelayHierarchy {
        const char *path; /* absolute, as the processes of the namespaces see it: "/R/usr" */
        const char *rel;  /* below the root: "usr", as a followed namespace has it below its own */
        dev_t old_dev;    /* the old tree's superblock (every copy of it has the same) */
        dev_t new_dev;    /* the new tree's */
        bool has_new;     /* false: a delayed unmerge, no new tree beneath */
} DelayHierarchy;

/* A mount namespace, by the first process met in it. */
typedef struct DelayNamespace {
        uint64_t ns;  /* inode of /proc/PID/ns/mnt */
        pid_t pid;
        char *unit;   /* last component of its cgroup path ("foo.service"), or NULL */
} DelayNamespace;

typedef struct DelayScan {
        DelayNamespace *old; /* show the old tree at some hierarchy */
        size_t n_old;
        DelayNamespace *new; /* show the new tree at every hierarchy */
        size_t n_new;
} DelayScan;

void delay_scan_done(DelayScan *s);

/* Every mount namespace on the machine (each once, by its first process) that shows the old or
 * the new trees, through /proc/PID/root.  Namespaces that show neither are left out.  The
 * namespaces in followed (follow.h) have the hierarchies below their own root ("/usr"). */
int delay_scan(const DelayHierarchy *h, size_t n, const uint64_t *followed, size_t n_followed, DelayScan *ret);

/* The inode of the mount namespace of process pid (-ESRCH: none such). */
int delay_namespace_of(pid_t pid, uint64_t *ret);

/* The last component of the cgroup path of process pid (cgroup v2, "0::" line; else the first),
 * allocated, or NULL. */
char *delay_unit_of(pid_t pid);

/* The unit of mount namespace ns: of its first process 'first', or, where that one is in no
 * unit (a helper that entered it), of the first of its processes that is; allocated, or NULL. */
char *delay_namespace_unit(uint64_t ns, pid_t first);

/* The processes whose cgroup's last component is 'unit', one per mount namespace. */
int delay_pids_of_unit(const char *unit, pid_t **ret, size_t *ret_n);

/* Commits the namespace of process pid: a child process enters it and, at every hierarchy,
 * detaches the top if and only if it is a copy of the old tree (overlay from "sysextd", the old
 * tree's device) with a copy of the new tree right beneath it, checked on a pinned fd right
 * before umount2().  All hierarchies are checked first: one that shows something else leaves
 * every one as it is.  Returns 1 when it committed, 0 when the namespace already shows the new
 * trees everywhere, < 0 with *ret_message on failure. */
int delay_commit_namespace(pid_t pid, const DelayHierarchy *h, size_t n, bool followed, char **ret_message);
