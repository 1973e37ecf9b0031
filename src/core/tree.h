/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "mounts.h"

/* Trees: the overlays sysextd attached, each known by its identity.
 *
 * A mount is sysextd's only when its identity matches a tree recorded here, never because of
 * what can be read through it.  Each tree is recorded in run/sysextd/trees/ID.json, written
 * before the tree is attached anywhere (its identity is known while it is still a detached
 * mount: attaching keeps the mount and its ids), and removed once it is detached.  A record
 * is a file of its own so that losing or garbling state.json loses no proof of ownership.
 *
 * The proof, checked on a pinned fd immediately before every detach:
 *   Linux 6.8+   the unique mount id (STATX_MNT_ID_UNIQUE, never reused), and the
 *                superblock's device number;
 *   before       the 32-bit mount id (reused by the kernel once the mount is freed) together
 *                with the superblock's device number, the file system type (overlay) and the
 *                source "sysextd" that mountinfo shows for that id; a tree's generation tells
 *                the records apart.
 * A bind of one of our overlays made by someone else is another mount (other ids, same
 * device number): it is not ours. */

typedef struct Tree {
        char *id;           /* random hex, the record's name and the content of the marker */
        char *hierarchy;    /* "usr" */
        uint64_t generation;
        uint64_t unique_id; /* 0 on kernels without unique mount ids */
        uint64_t mount_id;  /* 32-bit mount id */
        dev_t dev;
        bool base_only;     /* an overlay of the base alone, left to carry mounts below it */
        char **extensions;  /* names, bottom to top */
        uint64_t since;     /* CLOCK_REALTIME usec of the transition that made it */
        bool writable;      /* has an upper directory (mutable modes): sealed before it goes */
        char *workdir;      /* its work directory below the root, removed with it; NULL: none
                             * on disk (read-only, or a tmpfs of its own) */
} Tree;

/* Each tree is allocated on its own, so a pointer to one stays valid while others are added
 * or dropped. */
typedef struct TreeList {
        Tree **trees;
        size_t n;
} TreeList;

void tree_done(Tree *t);
void tree_list_done(TreeList *l);

#define TREES_DIR "trees"
#define TREE_ID_LEN 32

/* Whether id can be a tree's: TREE_ID_LEN lowercase hex digits. */
bool tree_id_valid(const char *id);

/* Whether 'rel' can be a tree's work directory (Tree.workdir, made by mutable.c): below the
 * root, normalized, last component .sysextd-*-work.TREEID. */
bool tree_workdir_valid(const char *rel);

/* Records in the journal directory (an fd of run/sysextd). */
int tree_save(int journal_dir_fd, const Tree *t);
int tree_remove(int journal_dir_fd, const char *id);

/* Retired trees: tree_remove() keeps the record, moved to run/sysextd/retired/ID.json (the
 * newest RETIRED_MAX of them, by the time the tree was recorded).  A copy of a tree the host
 * detached stays in a namespace that did not receive the detach (a private /usr, a slave
 * copy with mounts of its own on it); its superblock is the retired tree's, and it lives
 * for as long as that copy: the device number is not given to another file system meanwhile.
 * That is the proof sysextd commit --pid= needs to take such a copy away (namespaces.h). */
#define RETIRED_DIR "retired"
#define RETIRED_MAX 32
/* The retired tree whose superblock is dev: 1 and *ret, 0 when none is recorded. */
int tree_retired_find_dev(int journal_dir_fd, dev_t dev, Tree *ret);
/* Loads every record; a record that fails validation is renamed to ID.json.corrupt and
 * reported in *ret_n_corrupt. */
int tree_list_load(int journal_dir_fd, TreeList *ret, unsigned *ret_n_corrupt);

Tree *tree_list_find(TreeList *l, const char *id);
int tree_list_add(TreeList *l, Tree *t); /* takes the content of *t */
void tree_list_drop(TreeList *l, const char *id);

/* Fills the identity fields from the tree's mount (a detached tree fd, before it is
 * attached). */
int tree_set_identity(Tree *t, int tree_fd);

/* Whether the mountinfo entry of a mount (covered or not) is this tree: same 32-bit id,
 * device, overlay from source "sysextd"; plus the unique id when both sides know it. */
bool tree_matches_entry(const Tree *t, const MountEntry *e, uint64_t unique_id);

/* The check before a detach: is the mount fd is on (the root of) this tree?  Returns 1 yes,
 * 0 no (with *ret_reason saying what it is instead), < 0 error. */
int tree_check_fd(const Tree *t, int fd, char **ret_reason);

/* Which proof this kernel allows: "unique mount id" or "mount id, device and source". */
const char *tree_proof_string(void);

int tree_to_json_string(const Tree *t, char **ret);
int tree_from_json_string(const char *text, Tree *ret);
