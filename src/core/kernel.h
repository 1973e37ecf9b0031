/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>

/* What this kernel can do, probed once per process (the daemon probes before it forks, so
 * workers inherit the answers).  Each probe is a harmless call that fails early on kernels
 * without the feature; nothing is attached anywhere.
 *
 *   feature                 since  used for
 *   mount-beneath           6.5    MOVE_MOUNT_BENEATH: the swap without a window
 *   create-excl             6.6    FSCONFIG_CMD_CREATE_EXCL: never share a superblock
 *   lowerdir-plus           6.8    one fsconfig() call per overlay layer
 *   unique-mount-id         6.8    STATX_MNT_ID_UNIQUE: the identity of our trees
 *   detached-layers         6.15   detached mounts as overlay layers (image mounts reused)
 *   device-mapper           -      /dev/mapper/control: dm-verity rather than user space
 *
 * Builds with test hooks honour $SYSEXTD_TEST_KERNEL, a comma-separated list of "no-FEATURE"
 * words, so that the fallback paths run on a kernel that has everything. */

typedef enum KernelFeature {
        KERNEL_MOUNT_BENEATH,
        KERNEL_CREATE_EXCL,
        KERNEL_LOWERDIR_PLUS,
        KERNEL_UNIQUE_MOUNT_ID,
        KERNEL_DETACHED_LAYERS,
        KERNEL_DEVICE_MAPPER,
        _KERNEL_FEATURE_MAX,
} KernelFeature;

bool kernel_has(KernelFeature f);
const char *kernel_feature_to_string(KernelFeature f);

/* Probes every feature now (the daemon, before forking workers). */
void kernel_probe_all(void);

static inline bool kernel_has_mount_beneath(void) {
        return kernel_has(KERNEL_MOUNT_BENEATH);
}
