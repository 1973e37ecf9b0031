/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Loop devices and the mounts made from them.
 *
 * Order of steps, and what a failure at each leaves behind:
 *   1. LOOP_CTL_GET_FREE, open /dev/loopN        nothing (an unconfigured device)
 *   2. LOOP_CONFIGURE (atomic attach)            EBUSY when another process took the device
 *                                                first: pick the next one and retry
 *   3. BLKGETDISKSEQ                             the device; closing our fd autoclears it
 *   4. fsopen/fsconfig(source=/proc/self/fd/N)   same
 *      CREATE_EXCL, fsmount (detached)
 *   5. st_dev(mount) == st_rdev(loop), diskseq   a mismatch means the device was re-used for
 *      re-read and compared                      other media between 3 and 4: refuse
 * The detached mount lives as long as its fd (or a mount cloned from it), and keeps the loop
 * device busy; when the last one goes, autoclear detaches the device.
 *
 * An erofs image can skip steps 1-3 and 5 (file_mount()): the kernel mounts it from the file we
 * hold open (/proc/self/fd/N resolves to exactly that open file, so nothing can be swapped in
 * between), on a superblock of its own.
 */
#include <fcntl.h>
#include <linux/btrfs.h>
#include <linux/magic.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>

#include "fd-util.h"
#include "kernel.h"
#include "loopdev.h"
#include "missing.h"
#include "util.h"

#ifdef SYSEXTD_TEST_HOOKS
#include "testhook.h"
#endif

int loopdev_read_diskseq(int fd, uint64_t *ret) {
        uint64_t seq = 0;

        if (ioctl(fd, BLKGETDISKSEQ, &seq) < 0)
                return negative_errno();
        *ret = seq;
        return 0;
}

LoopDevice *loopdev_free(LoopDevice *d) {
        if (!d)
                return NULL;
        safe_close(d->fd);
        free(d);
        return NULL;
}

int loopdev_attach(int backing_fd, uint64_t offset, uint64_t size, LoopDevice **ret) {
        _cleanup_close_ int control = -EBADF;
        struct loop_config config = {
                .fd = backing_fd,
                .info.lo_flags = LO_FLAGS_READ_ONLY | LO_FLAGS_AUTOCLEAR | LO_FLAGS_DIRECT_IO,
                .info.lo_offset = offset,
                .info.lo_sizelimit = size,
        };
        int r;

        control = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
        if (control < 0)
                return negative_errno();

        for (unsigned attempt = 0; attempt < 64; attempt++) {
                _cleanup_close_ int fd = -EBADF;
                LoopDevice *d;
                char node[32];
                struct stat st;
                int nr;

                nr = ioctl(control, LOOP_CTL_GET_FREE);
                if (nr < 0)
                        return negative_errno();
                snprintf(node, sizeof(node), "/dev/loop%i", nr);
                fd = open(node, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
                if (fd < 0)
                        return negative_errno();

                r = ioctl(fd, LOOP_CONFIGURE, &config);
                if (r < 0 && errno == EINVAL && (config.info.lo_flags & LO_FLAGS_DIRECT_IO)) {
                        /* Older kernels refuse direct I/O on backing files that cannot do it. */
                        config.info.lo_flags &= ~LO_FLAGS_DIRECT_IO;
                        r = ioctl(fd, LOOP_CONFIGURE, &config);
                }
                if (r < 0) {
                        if (errno == EBUSY)
                                continue; /* raced with another attach, take the next device */
                        return negative_errno();
                }

                if (fstat(fd, &st) < 0)
                        return negative_errno();

                d = calloc(1, sizeof(*d));
                if (!d)
                        return -ENOMEM;
                d->nr = nr;
                d->devnum = st.st_rdev;
                d->fd = TAKE_FD(fd);
                r = loopdev_read_diskseq(d->fd, &d->diskseq);
                if (r < 0) {
                        loopdev_free(d);
                        return r;
                }
                *ret = d;
                return 0;
        }
        return -EBUSY;
}

char *fs_context_message(int fs_fd) {
        char buf[1024], *all = NULL;

        for (;;) {
                ssize_t n = read(fs_fd, buf, sizeof(buf) - 1);
                char *joined;

                if (n <= 0)
                        break;
                buf[n] = 0;
                if (n > 0 && buf[n - 1] == '\n')
                        buf[--n] = 0;
                /* Lines are "e <msg>", "w <msg>" or "i <msg>": keep errors and warnings. */
                if (buf[0] != 'e' && buf[0] != 'w')
                        continue;
                joined = strjoin3(all ?: "", all ? "; " : "", buf + 2);
                free(all);
                all = joined;
                if (!all)
                        break;
        }
        return all;
}

/* btrfs gives its mounts an anonymous device number: which device it is on is asked of btrfs
 * itself.  It must be one device, the one we attached (btrfs assembles multi-device file
 * systems by their fsid from whatever it scanned, so this is not a formality). */
static int btrfs_verify(int mount_fd, dev_t devnum, int dev_fd, char **ret_message) {
        struct btrfs_ioctl_fs_info_args fs = {};
        struct btrfs_ioctl_dev_info_args dev = {};
        _cleanup_close_ int fd = openat(mount_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        char own[PROC_FD_PATH_MAX];
        struct stat st;

        if (fd < 0 || ioctl(fd, BTRFS_IOC_FS_INFO, &fs) < 0)
                return set_message(ret_message, EXDEV, "cannot ask btrfs which device it is on: %m");
        if (fs.num_devices != 1 || fs.max_id != 1)
                return set_message(ret_message, EXDEV, "the btrfs file system spans %llu devices, not just /dev/loop%u",
                                   (unsigned long long) fs.num_devices, minor(devnum));
        dev.devid = 1;
        if (ioctl(fd, BTRFS_IOC_DEV_INFO, &dev) < 0)
                return set_message(ret_message, EXDEV, "cannot ask btrfs which device it is on: %m");
        dev.path[sizeof(dev.path) - 1] = 0;
        /* The name btrfs kept is the path it was given (our fd) or the one it scanned. */
        format_proc_fd_path(own, dev_fd);
        if (streq((const char *) dev.path, own))
                return 0;
        if (stat((const char *) dev.path, &st) < 0 || !S_ISBLK(st.st_mode) || st.st_rdev != devnum)
                return set_message(ret_message, EXDEV, "the btrfs file system is on %s, not on %u:%u", (const char *) dev.path,
                                   major(devnum), minor(devnum));
        return 0;
}

static int loopdev_verify_mount(int mount_fd, dev_t devnum, int dev_fd, uint64_t diskseq, char **ret_message) {
        struct statfs sfs;
        struct stat st;
        uint64_t now;
        int r;

        if (fstat(mount_fd, &st) < 0 || fstatfs(mount_fd, &sfs) < 0)
                return negative_errno();
        if (sfs.f_type == BTRFS_SUPER_MAGIC) {
                r = btrfs_verify(mount_fd, devnum, dev_fd, ret_message);
                if (r < 0)
                        return r;
        } else if (st.st_dev != devnum)
                return set_message(ret_message, EXDEV, "mounted file system is on device %u:%u, not on %u:%u",
                                   major(st.st_dev), minor(st.st_dev), major(devnum), minor(devnum));
        r = loopdev_read_diskseq(dev_fd, &now);
        if (r < 0)
                return r;
        if (now != diskseq)
                return set_message(ret_message, ESTALE,
                                   "disk sequence number of the device changed from %llu to %llu between attach and mount (the device was re-used for other media)",
                                   (unsigned long long) diskseq, (unsigned long long) now);
        return 0;
}

int loopdev_mount(LoopDevice *d, const char *fstype, unsigned attr_flags, int *ret_mount_fd, char **ret_message) {
        return device_mount(d->fd, d->devnum, d->diskseq, d->nr, fstype, attr_flags, ret_mount_fd, ret_message);
}

int device_mount(int dev_fd, dev_t devnum, uint64_t diskseq, long hook_arg, const char *fstype, unsigned attr_flags,
                 int *ret_mount_fd, char **ret_message) {
        _cleanup_close_ int fs_fd = -EBADF, mnt_fd = -EBADF;
        int r;

        fs_fd = fsopen(fstype, FSOPEN_CLOEXEC);
        if (fs_fd < 0)
                return negative_errno();
        if (fsconfig(fs_fd, FSCONFIG_SET_STRING, "source", FORMAT_PROC_FD_PATH(dev_fd), 0) < 0 ||
            fsconfig(fs_fd, FSCONFIG_SET_FLAG, "ro", NULL, 0) < 0)
                goto fail;
        /* xfs refuses a second file system with a UUID it has mounted already: copies of one
         * template and reproducible builds share theirs, and a refresh from v1 to v2 has both
         * live at once.  The image is read-only, so the UUID's one use (the log) is moot. */
        if (streq(fstype, "xfs") && fsconfig(fs_fd, FSCONFIG_SET_FLAG, "nouuid", NULL, 0) < 0)
                goto fail;

#ifdef SYSEXTD_TEST_HOOKS
        testhook_point("loop-before-mount", hook_arg);
#endif

        /* CREATE_EXCL (6.6) refuses to share a superblock someone else already has on this
         * device.  Which command this kernel knows is probed once: a failed CREATE leaves the
         * fs context unusable, so a failure here is final and its message the kernel's own. */
        r = fsconfig(fs_fd, kernel_has(KERNEL_CREATE_EXCL) ? FSCONFIG_CMD_CREATE_EXCL : FSCONFIG_CMD_CREATE, NULL, NULL, 0);
        if (r < 0)
                goto fail;

        mnt_fd = fsmount(fs_fd, FSMOUNT_CLOEXEC, MOUNT_ATTR_RDONLY | attr_flags);
        if (mnt_fd < 0)
                goto fail;

        r = loopdev_verify_mount(mnt_fd, devnum, dev_fd, diskseq, ret_message);
        if (r < 0)
                return r;

        *ret_mount_fd = TAKE_FD(mnt_fd);
        return 0;

fail:
        r = negative_errno();
        *ret_message = fs_context_message(fs_fd);
        return r;
}

int file_mount(int file_fd, const char *fstype, unsigned attr_flags, int *ret_mount_fd, char **ret_message) {
        _cleanup_close_ int fs_fd = -EBADF, mnt_fd = -EBADF;
        struct statfs sfs;
        struct stat st;
        int r;

        fs_fd = fsopen(fstype, FSOPEN_CLOEXEC);
        if (fs_fd < 0)
                return negative_errno();
        if (fsconfig(fs_fd, FSCONFIG_SET_STRING, "source", FORMAT_PROC_FD_PATH(file_fd), 0) < 0 ||
            fsconfig(fs_fd, FSCONFIG_SET_FLAG, "ro", NULL, 0) < 0 ||
            fsconfig(fs_fd, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0 ||
            (mnt_fd = fsmount(fs_fd, FSMOUNT_CLOEXEC, MOUNT_ATTR_RDONLY | attr_flags)) < 0) {
                r = negative_errno();
                /* The kernel asked for a block device: it cannot mount this file itself. */
                if (r == -ENOTBLK)
                        return r;
                *ret_message = fs_context_message(fs_fd);
                return r;
        }
        /* A superblock of its own, from no block device: what file-backed erofs makes. */
        if (fstat(mnt_fd, &st) < 0 || fstatfs(mnt_fd, &sfs) < 0)
                return negative_errno();
        if (sfs.f_type != EROFS_SUPER_MAGIC_V1 || major(st.st_dev) != 0)
                return set_message(ret_message, EXDEV, "the mount made from the file is not a file-backed erofs file system");
        *ret_mount_fd = TAKE_FD(mnt_fd);
        return 0;
}
