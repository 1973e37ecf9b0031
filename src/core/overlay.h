/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* Overlay assembly with the new mount API. */

/* The marker every sysextd overlay carries in its bottom layer; a mount is ours only if its
 * root has this file (and it is an overlay whose source is OVERLAY_SOURCE). */
#define OVERLAY_MARKER_DIR ".sysextd"
#define OVERLAY_MARKER_ID ".sysextd/id"
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

/* Creates the overlay as a detached mount: read-only, nodev (and noexec if asked).  Tries
 * lowerdir+ first and falls back to the single string on kernels without it.
 * *ret_message carries the kernel's words on failure. */
int overlay_mount(char *const *layers, bool noexec, int *ret_mount_fd, char **ret_message);

/* Whether overlayfs takes detached mounts as layers (Linux 6.15): then image mounts are used
 * through their fds, never attached, and can serve the next tree too.  Probed once. */
bool overlay_detached_layers_supported(void);

/* Says whether the mount whose root fd is given is one of ours: overlayfs and our marker. */
bool overlay_fd_is_ours(int fd, char **ret_id);
