/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Kernel interfaces newer than the headers of the oldest distribution we build on (Debian 12:
 * glibc 2.36, linux-libc-dev 6.1).  glibc's <sys/mount.h> declares the new mount API but cannot
 * be combined with <linux/mount.h>, so the constants it lacks are defined here. */

#include <linux/fs.h>
#include <linux/loop.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef MOVE_MOUNT_BENEATH
#define MOVE_MOUNT_BENEATH 0x00000200 /* Linux 6.5 */
#endif

#ifndef FSCONFIG_CMD_CREATE_EXCL
#define FSCONFIG_CMD_CREATE_EXCL 8 /* Linux 6.6 */
#endif

#ifndef BLKGETDISKSEQ
#define BLKGETDISKSEQ _IOR(0x12, 128, __u64) /* Linux 5.15 */
#endif

#ifndef LOOP_CONFIGURE
#define LOOP_CONFIGURE 0x4C0A /* Linux 5.8 */
#endif

#ifndef STATX_MNT_ID
#define STATX_MNT_ID 0x00001000U
#endif
#ifndef STATX_MNT_ID_UNIQUE
#define STATX_MNT_ID_UNIQUE 0x00004000U /* Linux 6.8 */
#endif
#ifndef STATX_ATTR_MOUNT_ROOT
#define STATX_ATTR_MOUNT_ROOT 0x00002000
#endif

#ifndef OVERLAYFS_SUPER_MAGIC
#define OVERLAYFS_SUPER_MAGIC 0x794c7630
#endif

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434 /* Linux 5.3 */
#endif

/* glibc 2.36 declares pidfd_open() only in <sys/pidfd.h>, which not every distribution ships. */
static inline int sys_pidfd_open(pid_t pid, unsigned flags) {
        return (int) syscall(SYS_pidfd_open, pid, flags);
}

/* The id of the mount namespace of an nsfs fd (Linux 6.8). */
#ifndef NS_GET_MNTNS_ID
#define NS_GET_MNTNS_ID _IOR(0xb7, 0x5, __u64)
#endif

/* glibc has no wrapper for pivot_root(). */
static inline int sys_pivot_root(const char *new_root, const char *put_old) {
        return (int) syscall(SYS_pivot_root, new_root, put_old);
}
