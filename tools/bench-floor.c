/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bench-floor IMAGE... — the syscall floor of a merge, for tools/bench: what the kernel needs
 * to put N erofs images under one overlay, with nothing else around it.  Each image is
 * opened and mounted detached straight from its file (file-backed erofs; a loop device when
 * the kernel says ENOTBLK), the detached mounts become the lower layers of one read-only
 * overlay (lowerdir+, Linux 6.8), which is mounted detached too; then everything is closed.
 * Prints the microseconds it took, measured inside the process (no process start, no
 * discovery, no release files, no journal, no swap).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <time.h>
#include <unistd.h>

static int mount_erofs(const char *source) {
        int fs = fsopen("erofs", FSOPEN_CLOEXEC), m = -1;

        if (fs < 0)
                return -1;
        if (fsconfig(fs, FSCONFIG_SET_STRING, "source", source, 0) == 0 &&
            fsconfig(fs, FSCONFIG_SET_FLAG, "ro", NULL, 0) == 0 && fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) == 0)
                m = fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_RDONLY);
        close(fs);
        return m;
}

/* A loop device over fd (read-only, autoclear), for a kernel or file system without
 * file-backed erofs. */
static int loop_over(int fd) {
        struct loop_config c = { .fd = (unsigned) fd, .info.lo_flags = LO_FLAGS_READ_ONLY | LO_FLAGS_AUTOCLEAR };
        int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC), nr, dev = -1;
        char path[32];

        if (ctl < 0)
                return -1;
        for (int tries = 0; tries < 16 && dev < 0; tries++) {
                nr = ioctl(ctl, LOOP_CTL_GET_FREE);
                if (nr < 0)
                        break;
                snprintf(path, sizeof path, "/dev/loop%d", nr);
                dev = open(path, O_RDONLY | O_CLOEXEC);
                if (dev >= 0 && ioctl(dev, LOOP_CONFIGURE, &c) < 0) {
                        close(dev);
                        dev = -1;
                }
        }
        close(ctl);
        return dev;
}

int main(int argc, char **argv) {
        int n = argc - 1, *mounts = calloc(n > 0 ? n : 1, sizeof(int)), fs, ovl;
        struct timespec t0, t1;
        char src[64];

        if (n < 1 || !mounts) {
                fprintf(stderr, "usage: bench-floor IMAGE...\n");
                return 2;
        }
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (int i = 0; i < n; i++) {
                int fd = open(argv[i + 1], O_RDONLY | O_CLOEXEC | O_NOCTTY);

                if (fd < 0) {
                        fprintf(stderr, "bench-floor: %s: %m\n", argv[i + 1]);
                        return 1;
                }
                snprintf(src, sizeof src, "/proc/self/fd/%d", fd);
                mounts[i] = mount_erofs(src);
                if (mounts[i] < 0 && errno == ENOTBLK) {
                        int dev = loop_over(fd);

                        snprintf(src, sizeof src, "/proc/self/fd/%d", dev);
                        mounts[i] = dev >= 0 ? mount_erofs(src) : -1;
                        if (dev >= 0)
                                close(dev);
                }
                close(fd);
                if (mounts[i] < 0) {
                        fprintf(stderr, "bench-floor: cannot mount %s: %m\n", argv[i + 1]);
                        return 1;
                }
        }
        fs = fsopen("overlay", FSOPEN_CLOEXEC);
        if (fs < 0 || fsconfig(fs, FSCONFIG_SET_STRING, "source", "bench-floor", 0) < 0) {
                fprintf(stderr, "bench-floor: overlay: %m\n");
                return 1;
        }
        /* The top layer first, as overlayfs takes them. */
        for (int i = n - 1; i >= 0; i--) {
                snprintf(src, sizeof src, "/proc/self/fd/%d", mounts[i]);
                if (fsconfig(fs, FSCONFIG_SET_STRING, "lowerdir+", src, 0) < 0) {
                        fprintf(stderr, "bench-floor: lowerdir+ %s: %m\n", argv[i + 1]);
                        return 1;
                }
        }
        if (n == 1 && fsconfig(fs, FSCONFIG_SET_STRING, "lowerdir+", "/", 0) < 0)
                return 1; /* overlayfs wants two layers without an upper one */
        if (fsconfig(fs, FSCONFIG_SET_FLAG, "ro", NULL, 0) < 0 || fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0 ||
            (ovl = fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_RDONLY)) < 0) {
                fprintf(stderr, "bench-floor: overlay: %m\n");
                return 1;
        }
        clock_gettime(CLOCK_MONOTONIC, &t1);
        close(ovl);
        close(fs);
        for (int i = 0; i < n; i++)
                close(mounts[i]);
        printf("%lld\n", (long long) (t1.tv_sec - t0.tv_sec) * 1000000LL + (t1.tv_nsec - t0.tv_nsec) / 1000);
        return 0;
}
