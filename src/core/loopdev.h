/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdint.h>
#include <sys/types.h>

#include "macro.h"

/* A loop device attached by us.  The device is configured read-only and with autoclear, so it
 * goes away by itself once the last user (our fd, or a superblock mounted from it) is gone:
 * closing the fd of an unused device detaches it. */
typedef struct LoopDevice {
        int fd;           /* open block device, read-only */
        int nr;           /* N of /dev/loopN */
        dev_t devnum;     /* st_rdev of the device */
        uint64_t diskseq; /* disk sequence number read right after LOOP_CONFIGURE */
} LoopDevice;

/* Attaches backing_fd to a free loop device with LOOP_CONFIGURE (read-only, autoclear, direct
 * I/O where the backing file system allows it) and records the diskseq.  offset and size
 * (0: to the end) select a partition of a disk image. */
int loopdev_attach(int backing_fd, uint64_t offset, uint64_t size, LoopDevice **ret);
LoopDevice *loopdev_free(LoopDevice *d);
DEFINE_TRIVIAL_CLEANUP_FUNC(LoopDevice *, loopdev_free);

int loopdev_read_diskseq(int fd, uint64_t *ret);

/* Mounts the file system on the loop device as a detached mount (fsopen/fsmount), from
 * /proc/self/fd/N so that the mount uses exactly the device we hold, with CREATE_EXCL where the
 * kernel has it so an existing superblock is never reused.  Then checks that the superblock is
 * on our device and that the diskseq is unchanged.  On failure *ret_message may carry the
 * kernel's own words from the fs context. */
int loopdev_mount(LoopDevice *d, const char *fstype, unsigned attr_flags, int *ret_mount_fd, char **ret_message);

/* The same for any block device we hold open (a dm-verity device over our loop device). */
int device_mount(int dev_fd, dev_t devnum, uint64_t diskseq, long hook_arg, const char *fstype, unsigned attr_flags,
                 int *ret_mount_fd, char **ret_message);

/* Mounts an erofs image straight from its file (Linux 6.12+) as a detached, read-only mount:
 * no loop device.  -ENOTBLK (and no message) when the kernel cannot: it has no file-backed
 * erofs, or the file's file system does not serve page-cache reads (tmpfs, overlayfs). */
int file_mount(int file_fd, const char *fstype, unsigned attr_flags, int *ret_mount_fd, char **ret_message);

/* Reads the fs context's error messages ("e overlay: ..." lines) into one string. */
char *fs_context_message(int fs_fd);
