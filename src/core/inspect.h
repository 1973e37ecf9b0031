/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "journal.h"
#include "mounts.h"
#include "tree.h"

/* What is live at each hierarchy, read from the mount table and matched against the tree
 * records (I/O; the decisions made from it are in plan.c and recover.c). */

typedef enum StackRole {
        STACK_FOREIGN,    /* not ours: a partition, a bind someone made, another tool's overlay */
        STACK_OURS,       /* matches a recorded tree */
        STACK_UNRECORDED, /* an overlay from source "sysextd" that no record proves ours */
} StackRole;

typedef struct HierarchyState {
        char *name;       /* "usr", below the root */
        char *path;       /* "/R/usr", as mountinfo shows it */
        bool exists;      /* a directory, reached without a symlink */
        bool is_symlink;  /* the hierarchy itself (or a component) is a symlink: refused */
        MountStack stack; /* bottom first */
        StackRole *roles; /* per stack entry */
        Tree **trees;     /* per stack entry: the record of an ours entry (borrowed from the journal) */
        MountChildren children;
        bool base_has_children; /* the mounts below our live tree are, at every depth, those on
                                 * the base beneath it (mount_below_same): detaching our trees
                                 * leaves them as they are */
        bool parent_propagates;
} HierarchyState;

void hierarchy_state_done(HierarchyState *h);
void hierarchy_states_free(HierarchyState *h, size_t n);

/* Reads hierarchy 'name' below root_fd (root_path is its canonical path) and matches the
 * stack against the trees of j.  A missing hierarchy is not an error (exists false). */
int hierarchy_inspect(int root_fd, const char *root_path, const char *name, Journal *j, HierarchyState *ret);

/* Opens the hierarchy's live path anew (what a reader reaches now), O_PATH. */
int hierarchy_open(int root_fd, const char *name);

/* "tmpfs from 'foreign'" for messages about the mount at the top. */
char *mount_entry_describe(const MountEntry *e);

/* The inode of this process's mount namespace. */
int mount_namespace_id(uint64_t *ret);
