/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>

/* Reading the mount table (libmount, /proc/self/mountinfo).  Nothing here changes a mount. */

typedef struct MountStack {
        unsigned n_mounts; /* mounts whose mount point is exactly the path */
        unsigned n_ours;   /* of those, sysextd overlays (fstype overlay, source "sysextd") */
        char *top_fstype;  /* the topmost mount at the path, NULL when none */
        char *top_source;
        bool top_is_ours;
        bool parent_shared; /* the mount the path sits on propagates (shared:N) */
} MountStack;

void mount_stack_done(MountStack *s);

/* Describes the stack of mounts at 'path' (absolute, canonical). */
int mount_stack_read(const char *path, MountStack *ret);

/* The mount points strictly below 'path' whose mounts must be carried to a new tree: each
 * visible mount below path whose mount point is not itself below another one of the list
 * (those come along with a recursive clone). Sorted by path. */
int mounts_below(const char *path, char ***ret);

/* Number of lines of /proc/self/mountinfo (for tests and status). */
int mounts_count(unsigned *ret);
