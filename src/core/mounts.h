/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Reading the mount table (/proc/self/mountinfo) and the identity of mounts.  Nothing here
 * changes a mount. */

/* One line of mountinfo (proc_pid_mountinfo(5)); the strings point into the table's text,
 * unescaped. */
typedef struct MountRow {
        uint64_t id, parent_id;
        dev_t devno;
        const char *root;
        const char *target;        /* the mount point, without the kernel's " (deleted)" */
        const char *optional;      /* "shared:1 master:2", "" for none */
        const char *fstype;
        const char *source;        /* "" where the kernel shows none */
        const char *super_options; /* the superblock's: "rw,..." */
} MountRow;

typedef struct MountTable {
        char *text;
        MountRow *rows;
        size_t n;
} MountTable;

void mount_table_done(MountTable *t);

/* One operation (a status, a transition): within it, our namespace's table is read again only
 * after the kernel reports a mount change (mounts.c); calls nest.  What changes the propagation
 * of a mount in this process calls mount_table_cache_invalidate() (no event reports that). */
void mount_table_cache_begin(void);
void mount_table_cache_end(void);
void mount_table_cache_invalidate(void);
/* Parses mountinfo text, which the table takes (and frees) on success; a line that is not
 * one of mountinfo: -EBADMSG. */
int mount_table_parse(char *text, MountTable *ret);
const MountRow *mount_table_find(const MountTable *t, uint64_t id);

/* Who a mount is: the kernel's ids for it and its superblock. */
typedef struct MountIdentity {
        uint64_t unique_id; /* STATX_MNT_ID_UNIQUE (Linux 6.8), never reused; 0 where unknown */
        uint64_t id;        /* the 32-bit mount id of mountinfo, reused after the mount is freed */
        dev_t dev;          /* the superblock's device number */
        bool is_root;       /* the fd is the root of its mount */
        bool overlay;       /* the superblock is overlayfs */
} MountIdentity;

/* The identity of the mount an fd is on. */
int mount_identity_of_fd(int fd, MountIdentity *ret);

typedef struct MountEntry {
        uint64_t id, parent_id; /* mountinfo's ids */
        dev_t dev;
        char *fstype;
        char *source;
        bool shared; /* propagates to peers (shared:N) */
        bool slave;  /* receives from a master (master:N) */
        bool sb_writable; /* the file system (not only this mount) is read-write */
} MountEntry;

void mount_entry_done(MountEntry *e);

/* The mounts stacked at one path, bottom first: each one is mounted on the root of the one
 * below it (after MOVE_MOUNT_BENEATH, mountinfo's order is not the stacking order, so the
 * stack is rebuilt from the parent ids).  'parent' is the mount the bottom of the stack sits
 * on, or, with nothing mounted at the path, the mount that contains it. */
typedef struct MountStack {
        MountEntry *entries;
        size_t n;
        MountEntry parent;
        bool has_parent;
        uint64_t top_unique_id; /* of entries[n - 1], read through the live path */
} MountStack;

void mount_stack_done(MountStack *s);

/* Reads the stack at 'rel' below root_fd, whose absolute canonical path (as mountinfo shows
 * it) is 'path'.  The top is what a fresh lookup of the path reaches, so the stack is the one
 * a reader of the path sees; the lookup follows no symlink. */
int mount_stack_read(int root_fd, const char *rel, const char *path, MountStack *ret);

/* A mount below a hierarchy that a new tree must carry. */
typedef struct MountChild {
        char *path;         /* absolute mount point */
        uint64_t id;        /* the visible mount there */
        uint64_t unique_id; /* 0 where the kernel has none */
        char *fstype;
} MountChild;

typedef struct MountChildren {
        MountChild *children; /* sorted by path */
        size_t n;
} MountChildren;

void mount_children_done(MountChildren *c);

/* The mounts strictly below the hierarchy at 'path' (path_fd: a fresh O_PATH fd of its top,
 * as a reader reaches it) that a reader
 * sees: for every mount point mountinfo lists below it, the live path is resolved (no
 * symlinks, no automount triggered) and kept only when it ends on the root of a mount listed
 * there; a mount hidden under another one is not carried.  Nested mounts come along with
 * their top-level ancestor (a recursive clone), so only the top-level ones are listed. */
int mount_children_read(int path_fd, const char *path, MountChildren *ret);

/* Whether two readings list the same mounts at the same places. */
bool mount_children_equal(const MountChildren *a, const MountChildren *b);

/* Whether the mounts below 'path' on the mount top_id are, one for one and at every depth,
 * the mounts below it on base_id (same mount points, file systems, roots and types): then
 * detaching top_id leaves a reader the same mounts below the hierarchy.  *ret false when
 * they differ in any way. */
int mount_below_same(uint64_t top_id, uint64_t base_id, const char *path, bool *ret);

/* The entry of mountinfo with this 32-bit id. */
int mountinfo_find(uint64_t id, MountEntry *ret);
/* The same in the mount namespace of process pid, from /proc/PID/mountinfo (0: ours). */
int mountinfo_find_of(pid_t pid, uint64_t id, MountEntry *ret);

/* The mount points (as mountinfo names them) of every mount of type 'fstype' from 'source'
 * at or below the absolute path 'under', covered or not, in this namespace: a NULL-terminated
 * list, maybe empty. */
int mount_targets_of(const char *fstype, const char *source, const char *under, char ***ret);

/* The mountinfo entry of the mount a live path reaches (its top): fstype and source. */
int mount_top_entry(int fd, MountEntry *ret);

/* This thread's mount namespace (O_RDONLY), and its id (NS_GET_MNTNS_ID, Linux 6.8; 0 where
 * unknown) in *ret_id unless NULL. */
int mount_ns_open_own(uint64_t *ret_id);

/* A visit of this thread to another mount namespace, and the way back: setns() and unshare()
 * move the root and the working directory, which are put back as they were (a chroot too). */
typedef struct MountNsVisit {
        int home, root, cwd;
} MountNsVisit;
#define MOUNT_NS_VISIT_INIT { -EBADF, -EBADF, -EBADF }

/* Remembers where this thread is, and gives it file system information (root, working
 * directory) of its own, as setns() into a mount namespace wants. */
int mount_ns_visit_begin(MountNsVisit *v);
/* Back where mount_ns_visit_begin() was; < 0 (logged) only when this thread could not get
 * back.  Frees v either way. */
int mount_ns_visit_end(MountNsVisit *v);
/* Frees v without going back (only where the visit did not leave). */
void mount_ns_visit_done(MountNsVisit *v);

