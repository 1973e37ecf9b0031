/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fd-util.h"
#include "kernel.h"
#include "missing.h"
#include "util.h"

static const char *const feature_names[_KERNEL_FEATURE_MAX] = {
        [KERNEL_MOUNT_BENEATH] = "mount-beneath",
        [KERNEL_CREATE_EXCL] = "create-excl",
        [KERNEL_LOWERDIR_PLUS] = "lowerdir-plus",
        [KERNEL_UNIQUE_MOUNT_ID] = "unique-mount-id",
        [KERNEL_DETACHED_LAYERS] = "detached-layers",
        [KERNEL_DEVICE_MAPPER] = "device-mapper",
};

const char *kernel_feature_to_string(KernelFeature f) {
        return f >= 0 && f < _KERNEL_FEATURE_MAX ? feature_names[f] : NULL;
}

static bool probe_mount_beneath(void) {
        /* Unknown flags are refused with EINVAL before any path is looked at; a kernel that
         * knows the flag fails on the empty paths instead (ENOENT or EBADF). */
        return !(move_mount(-EBADF, "", -EBADF, "", MOVE_MOUNT_BENEATH) < 0 && errno == EINVAL);
}

static bool probe_create_excl(void) {
        _cleanup_close_ int fs = fsopen("tmpfs", FSOPEN_CLOEXEC);

        /* Before 6.6 the command is unknown: EOPNOTSUPP (not EINVAL). */
        return fs >= 0 && fsconfig(fs, FSCONFIG_CMD_CREATE_EXCL, NULL, NULL, 0) >= 0;
}

static bool probe_lowerdir_plus(void) {
        _cleanup_close_ int bogus = fsopen("overlay", FSOPEN_CLOEXEC), fs = fsopen("overlay", FSOPEN_CLOEXEC);

        /* Setting a layer only records it; the context is never created.  Before 6.5 overlayfs
         * has no mount-API parser of its own: the kernel's legacy one takes any key and only
         * the mount fails, so a key that cannot exist must be refused for the answer to mean
         * anything. */
        return bogus >= 0 && fs >= 0 && fsconfig(bogus, FSCONFIG_SET_STRING, "sysextd-no-such-option", "x", 0) < 0 &&
               fsconfig(fs, FSCONFIG_SET_STRING, "lowerdir+", "/", 0) >= 0;
}

static bool probe_unique_mount_id(void) {
        struct statx sx = {};

        return statx(AT_FDCWD, "/", 0, STATX_MNT_ID_UNIQUE, &sx) >= 0 && (sx.stx_mask & STATX_MNT_ID_UNIQUE);
}

static int detached_tmpfs(void) {
        _cleanup_close_ int fs = fsopen("tmpfs", FSOPEN_CLOEXEC);

        if (fs < 0 || fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
                return -EBADF;
        return fsmount(fs, FSMOUNT_CLOEXEC, 0);
}

static bool probe_detached_layers(void) {
        /* Two throw-away detached tmpfs mounts as the layers of an overlay: nothing is
         * attached anywhere, everything goes away with the fds. */
        _cleanup_close_ int a = detached_tmpfs(), b = detached_tmpfs(), fs = fsopen("overlay", FSOPEN_CLOEXEC);

        return a >= 0 && b >= 0 && fs >= 0 &&
               fsconfig(fs, FSCONFIG_SET_STRING, "lowerdir+", FORMAT_PROC_FD_PATH(a), 0) >= 0 &&
               fsconfig(fs, FSCONFIG_SET_STRING, "lowerdir+", FORMAT_PROC_FD_PATH(b), 0) >= 0 &&
               fsconfig(fs, FSCONFIG_SET_FLAG, "ro", NULL, 0) >= 0 && fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) >= 0;
}

static bool probe_device_mapper(void) {
        _cleanup_close_ int fd = open("/dev/mapper/control", O_RDWR | O_CLOEXEC);
        return fd >= 0;
}

static bool disabled_for_test(KernelFeature f) {
#ifdef SYSEXTD_TEST_HOOKS
        const char *e = getenv("SYSEXTD_TEST_KERNEL");
        _cleanup_strv_free_ char **l = NULL;
        char want[64];

        if (!e || strv_split(e, ", ", &l) < 0)
                return false;
        snprintf(want, sizeof(want), "no-%s", feature_names[f]);
        return strv_contains(l, want);
#else
        return false;
#endif
}

bool kernel_has(KernelFeature f) {
        static bool (*const probes[_KERNEL_FEATURE_MAX])(void) = {
                [KERNEL_MOUNT_BENEATH] = probe_mount_beneath,
                [KERNEL_CREATE_EXCL] = probe_create_excl,
                [KERNEL_LOWERDIR_PLUS] = probe_lowerdir_plus,
                [KERNEL_UNIQUE_MOUNT_ID] = probe_unique_mount_id,
                [KERNEL_DETACHED_LAYERS] = probe_detached_layers,
                [KERNEL_DEVICE_MAPPER] = probe_device_mapper,
        };
        static signed char cache[_KERNEL_FEATURE_MAX] = { -1, -1, -1, -1, -1, -1 };

        if (f < 0 || f >= _KERNEL_FEATURE_MAX)
                return false;
        if (cache[f] < 0) {
                int saved = errno;
                cache[f] = !disabled_for_test(f) && probes[f]();
                errno = saved;
        }
        return cache[f];
}

void kernel_probe_all(void) {
        for (int f = 0; f < _KERNEL_FEATURE_MAX; f++)
                (void) kernel_has(f);
}
