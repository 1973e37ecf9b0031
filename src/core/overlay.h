/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* Overlay assembly with the new mount API. */

/* Every sysextd overlay has the source "sysextd" and, in its top layer (above every image),
 * the directory .sysextd with the tree's id, generation and extensions: a hint for people.
 * Ownership is never decided by it (tree.h); sysextd does not read it.  An image that ships
 * that path is refused. */
#define OVERLAY_MARKER_DIR ".sysextd"
#define OVERLAY_SOURCE "sysextd"

/* Layers are given top first (the order of overlayfs' lowerdir). */
#define OVERLAY_LAYERS_MAX 500

typedef struct OverlayParam {
        char *key;
        char *value; /* NULL for flags */
        int fd;      /* a layer's fd, given as such where the kernel takes one (value names it too); or -1 */
} OverlayParam;

/* What to mount. */
typedef struct OverlaySpec {
        char *const *layers;  /* lower layers, top first */
        const int *layer_fds; /* NULL, or for each layer an fd open on it (or -1) */
        const char *upper;    /* upper and work directory: a writable overlay; NULL: read-only */
        const char *work;
        unsigned attrs;       /* MOUNT_ATTR_NODEV, _NOSUID, _NOEXEC for the mount */
        /* Extra options, "key[=value],...": each replaces the default of the same key of a
         * read-only overlay (overlay_options_merge), all of them replace the defaults of a
         * writable one ($SYSTEMD_SYSEXT_OVERLAYFS_MOUNT_OPTIONS).  NULL: the defaults. */
        const char *options;
} OverlaySpec;

/* The defaults.  Read-only: layers come from images we did not build, so never follow
 * redirect or metacopy xattrs out of a layer.  Writable (as systemd-sysext): renames without
 * copying whole directories, no partial copy-ups left behind, no atime writes, and no index,
 * without which two trees could not share an upper directory (swap.c). */
#define OVERLAY_OPTIONS_READ_ONLY "redirect_dir=nofollow,metacopy=off"
#define OVERLAY_OPTIONS_WRITABLE "redirect_dir=on,noatime,metacopy=off,index=off"

/* The defaults with each option of 'given' replacing the default of the same key, then the
 * given ones in their order ("metacopy=on" also drops a default redirect_dir=, which the kernel
 * refuses next to it).  *ret is allocated. */
int overlay_options_merge(const char *defaults, const char *given, char **ret);

/* -EINVAL where an option names a layer or the source (lowerdir, lowerdir+, upperdir, workdir,
 * datadir+, source: sysextd gives those itself), is empty or holds control characters; the
 * offending option in *ret_bad (allocated) when it is not NULL. */
int overlay_options_check(const char *options, char **ret_bad);

typedef struct OverlayPlan {
        OverlayParam *params; /* fsconfig() calls, in order */
        size_t n;
        unsigned attrs;       /* MOUNT_ATTR_* for fsmount() */
} OverlayPlan;

void overlay_plan_done(OverlayPlan *p);

/* Builds the fsconfig() calls: with lowerdir_plus one "lowerdir+" per layer (Linux 6.8),
 * otherwise one "lowerdir" string with ':' and '\' escaped, which must fit the kernel's 256
 * byte limit for fsconfig strings (-E2BIG otherwise); then upperdir and workdir, and the
 * options, of which the per-mount ones (noatime, nosuid, ...) become attributes.  -EINVAL
 * for fewer than two layers read-only or one writable, more than OVERLAY_LAYERS_MAX, or an
 * option that names a layer (lowerdir, upperdir, workdir, datadir, source). */
int overlay_plan_build(const OverlaySpec *s, bool lowerdir_plus, OverlayPlan *ret);

/* Creates the overlay as a detached mount (read-only unless it has an upper directory), with
 * lowerdir+ where the kernel has it, else the single string.  *ret_message carries the
 * kernel's words on failure. */
int overlay_mount(const OverlaySpec *s, int *ret_mount_fd, char **ret_message);

/* The same with mount(2) at 'where' (for kernels before 6.8, whose fsconfig() limits the one
 * lowerdir string to 256 bytes; mount(2) takes a page). */
int overlay_mount_legacy(const OverlaySpec *s, const char *where, char **ret_message);
