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
} OverlayParam;

typedef struct OverlayPlan {
        OverlayParam *params;
        size_t n;
} OverlayPlan;

void overlay_plan_done(OverlayPlan *p);

/* Builds the fsconfig() calls for a read-only overlay of 'layers' (top first): with
 * lowerdir_plus one "lowerdir+" per layer (Linux 6.8), otherwise one "lowerdir" string with
 * ':' and '\' escaped, which must fit the kernel's 256 byte limit for fsconfig strings
 * (-E2BIG otherwise).  Adds the options for untrusted layers. -EINVAL for fewer than two or
 * more than OVERLAY_LAYERS_MAX layers. */
int overlay_plan_build(char *const *layers, bool lowerdir_plus, OverlayPlan *ret);

/* Creates the overlay as a detached mount: read-only, nodev (and noexec if asked), with
 * lowerdir+ where the kernel has it, else the single string.  *ret_message carries the
 * kernel's words on failure. */
int overlay_mount(char *const *layers, bool noexec, int *ret_mount_fd, char **ret_message);

/* The same with mount(2) at 'where' (for kernels before 6.8, whose fsconfig() limits the one
 * lowerdir string to 256 bytes; mount(2) takes a page). */
int overlay_mount_legacy(char *const *layers, bool noexec, const char *where, char **ret_message);
