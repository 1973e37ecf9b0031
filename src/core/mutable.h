/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "tree.h"

/* Mutable modes, as systemd-sysext has them (--mutable=, Mutable=, $SYSTEMD_SYSEXT_MUTABLE_MODE):
 * where writes to a merged hierarchy go.  The mutable directory of hierarchy H is
 * var/lib/extensions.mutable/H below the root (H with '/' turned into '.': "usr", "opt", "etc",
 * "foo.bar"), symlinks followed inside the root.
 *
 *   mode              upper directory             the mutable directory    H's own content
 *   -----------------+---------------------------+------------------------+----------------
 *   no                none (read-only)            ignored                  bottom layer
 *   auto              the mutable directory, if   used if it exists        bottom layer
 *                     it exists; else none
 *   yes               the mutable directory       created if missing       bottom layer
 *   import            none (read-only)            a read-only layer above  bottom layer
 *                                                 the extensions
 *   ephemeral         a tmpfs of the tree's own   ignored                  bottom layer
 *   ephemeral-import  a tmpfs of the tree's own   a read-only layer above  bottom layer
 *                                                 the extensions
 * A mutable directory that is (a symlink to) H itself makes H its own upper directory (auto,
 * yes: writes go to H as if nothing were merged; H is then no layer) and is refused by import
 * and ephemeral-import (it would be imported into itself).  An existing mutable directory
 * must have H's permission bits (auto, yes); one created by yes gets them.  In every mode but
 * no, each hierarchy of the class gets a tree, even without extension content.
 *
 * Work directories: overlayfs needs one per mounted overlay, on the upper directory's mount.
 * Every writable tree gets a fresh, empty one beside the upper directory,
 * .sysextd-H-work.TREEID, so that the next tree never shares a work directory with the one it
 * replaces (see swap.c for how the upper directory passes from one to the next).  A work
 * directory goes with its tree; those of trees no longer recorded are removed at the next
 * transition. */

typedef enum MutableMode {
        MUTABLE_NO,
        MUTABLE_YES,
        MUTABLE_AUTO,
        MUTABLE_IMPORT,
        MUTABLE_EPHEMERAL,
        MUTABLE_EPHEMERAL_IMPORT,
        _MUTABLE_MAX,
} MutableMode;

const char *mutable_mode_to_string(MutableMode m);
/* The names above, and booleans ("1", "yes", "true", "on" for yes; "0", "no", ... for no). */
int mutable_mode_from_string(const char *s);

#define MUTABLE_BASE_DIR "var/lib/extensions.mutable"

typedef enum MutableUpper {
        MUTABLE_UPPER_NONE,      /* read-only tree */
        MUTABLE_UPPER_DIR,       /* the mutable directory */
        MUTABLE_UPPER_HIERARCHY, /* the hierarchy's own directory */
        MUTABLE_UPPER_TMPFS,     /* a tmpfs of the tree's own (ephemeral modes) */
        _MUTABLE_UPPER_MAX,
} MutableUpper;

/* What was found for one hierarchy (mutable_prepare() gathers it). */
typedef struct MutableFacts {
        bool hierarchy_exists;
        mode_t hierarchy_mode;  /* permission bits; 0755 for a missing hierarchy */
        bool dir_exists;        /* the mutable directory resolves to a directory */
        bool dir_is_hierarchy;  /* ... which is the hierarchy itself */
        mode_t dir_mode;        /* its permission bits */
        bool dir_read_only;     /* on a read-only mount */
        bool dir_parent_same_mount; /* its parent (where work directories go) is on its mount */
} MutableFacts;

typedef struct MutableDecision {
        MutableUpper upper;
        bool create_dir;  /* yes: the mutable directory is created first */
        bool import_dir;  /* the mutable directory is a read-only layer above the extensions */
        bool base_layer;  /* the hierarchy's own content is the bottom layer */
        bool always;      /* a tree even without extension content */
} MutableDecision;

/* The table above: pure.  Returns 0, or -errno with *ret_message (in systemd-sysext's words)
 * for a refusal.  hierarchy and dir name the two for messages. */
int mutable_decide(MutableMode mode, const MutableFacts *f, const char *hierarchy, const char *dir,
                   MutableDecision *ret, char **ret_message);

/* One hierarchy's mutable set-up, ready for staging. */
typedef struct MutableSetup {
        MutableMode mode;
        MutableDecision d;
        char *component;  /* "usr": names the mutable directory and the work directories */
        char *dir_path;   /* the mutable directory as resolved, for people ("/R/data/up") */
        int dir_fd;       /* O_PATH: the upper directory (DIR) or the imported layer */
        int parent_fd;    /* O_PATH: where work directories go (DIR: beside it; HIERARCHY:
                           * the hierarchy's parent) */
        char *parent_rel; /* the same below the root ("var/lib/extensions.mutable", "") */
        uint64_t stamp;   /* what the tree depends on, for a refresh's "unchanged" */
        dev_t dir_dev;    /* the mutable directory's identity, where it exists */
        ino_t dir_ino;
        char *unsafe_path; /* the directory itself or an ancestor (up to the root) that someone
                            * other than root owns or may write to */
} MutableSetup;

void mutable_setup_done(MutableSetup *s);

/* Gathers the facts for hierarchy 'name' ("usr"; path "/R/usr" for messages; st its live
 * directory, NULL when missing), decides, and for yes creates the mutable directory.  For
 * MUTABLE_NO only fills mode and d. */
int mutable_prepare(int root_fd, const char *root, const char *name, const char *path, const struct stat *st,
                    MutableMode mode, MutableSetup *ret, char **ret_message);

/* Whether a directory of this owner and mode may hold an upper directory or be its ancestor:
 * owned by root and writable by nobody else (no group or other write bit). */
bool mutable_owner_safe(uid_t uid, mode_t mode);

/* Where the mutable directories of n hierarchies (setups[i] for hierarchy paths[i], canonical)
 * may not be, for the ones used as an upper directory or imported: refused (-EINVAL, -EPERM
 * with *ret_message) when one lies inside any hierarchy or is another hierarchy (the merged
 * tree would contain its own upper directory, or two hierarchies would share one), lies in a
 * directory images are found in (forbidden: canonical paths), is the one of another
 * hierarchy (two writable overlays on one upper directory), or has an ancestor someone other
 * than root owns or may write to (unsafe_path).  Pure. */
int mutable_check_placement(const MutableSetup *setups, char *const *paths, size_t n, char *const *forbidden,
                            char **ret_message);

/* "var/lib/extensions.mutable/.sysextd-usr-work.ID": the work directory of tree ID. */
int mutable_workdir_name(const MutableSetup *s, const char *tree_id, char **ret_name);

/* Creates the (empty) work directory of tree ID; *ret_rel: its path below the root. */
int mutable_workdir_create(const MutableSetup *s, const char *tree_id, char **ret_rel);

/* Removes a work directory recorded as rel (below the root); only a name of ours. */
int mutable_workdir_remove(int root_fd, const char *rel);

/* Removes the work directories beside s that belong to no tree in 'trees'. */
void mutable_gc(const MutableSetup *s, const TreeList *trees);
