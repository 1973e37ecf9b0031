/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The swap: replacing the live tree of a hierarchy in one step.
 *
 *   0. pin the current top:      old = open(target, O_PATH)      (is it ours? marker check)
 *   1. new tree beneath old:     move_mount(new, target, BENEATH) (one syscall; propagates
 *                                                                 to every peer and slave)
 *   2. check old is still top and still ours
 *   3. detach old lazily:        umount2(/proc/self/fd/<old>, MNT_DETACH)
 *
 * Outcome if we stop after each step (crash, kill, error):
 *   step | what readers see                     | what the next start does
 *   -----+--------------------------------------+--------------------------------------------
 *    0   | old tree                             | discards the pending record
 *    1   | old tree (new one waits beneath it)  | finishes: detaches the stale top
 *    2   | old tree                             | same as 1
 *    3   | new tree                             | commits the pending record
 * Readers never see the bare base: before 3 the old top covers the new tree, after 3 the new
 * tree is the top.  Nothing of ours live (first merge, or a foreign mount such as a /usr
 * partition on top): the new tree is attached on top instead, never beneath a foreign mount.
 *
 * Degraded mode (kernel without MOVE_MOUNT_BENEATH, only when the configuration allows it):
 * detach old, then attach new: readers see the base in between, as with systemd-sysext.
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>

#include "fd-util.h"
#include "missing.h"
#include "overlay.h"
#include "swap.h"
#include "util.h"

#ifdef SYSEXTD_TEST_HOOKS
#include "testhook.h"
#endif

bool kernel_has_mount_beneath(void) {
        static int cached = -1;

        if (cached < 0) {
                /* Unknown flags are rejected with EINVAL before any path is looked at; a
                 * kernel that knows the flag fails on the empty path instead. */
                int r = move_mount(-EBADF, "", -EBADF, "", MOVE_MOUNT_BENEATH);
                cached = !(r < 0 && errno == EINVAL);
        }
        return cached;
}

static int explain(int r, const char *target, const char *what, char **ret_message) {
        const char *why;

        switch (-r) {
        case EINVAL:
                why = "mount propagation would overmount it, or it is not a mount the kernel lets us stack beneath";
                break;
        case ENOSPC:
                why = "the mount limit is reached (see /proc/sys/fs/mount-max)";
                break;
        case ELOOP:
                why = "the new tree would contain the place it is mounted on";
                break;
        case EPERM:
                why = "permission denied (CAP_SYS_ADMIN in the initial user namespace is needed)";
                break;
        default:
                why = strerror(-r);
        }
        if (asprintf(ret_message, "Kernel refused to %s %s: %s.", what, target, why) < 0)
                *ret_message = NULL;
        return r;
}

static int detach_pinned(int old_fd, const char *target, char **ret_message) {
        uint64_t top_id = 0, old_id = 0;
        int r;

        /* Only detach what is still the top and still ours: a mount someone put on top in the
         * meantime would go with it. */
        r = fd_mount_id(AT_FDCWD, target, &top_id, NULL);
        if (r >= 0)
                r = fd_mount_id(old_fd, NULL, &old_id, NULL);
        if (r < 0)
                return explain(r, target, "inspect", ret_message);
        if (top_id != old_id) {
                if (asprintf(ret_message,
                             "A foreign mount was placed on top of %s during the swap; sysextd's previous layer stays below it and was not detached.",
                             target) < 0)
                        *ret_message = NULL;
                return -EBUSY;
        }
        if (!overlay_fd_is_ours(old_fd, NULL)) {
                if (asprintf(ret_message, "The top of %s is no longer sysextd's overlay; refusing to detach it.", target) < 0)
                        *ret_message = NULL;
                return -EBUSY;
        }
        if (umount2(FORMAT_PROC_FD_PATH(old_fd), MNT_DETACH) < 0)
                return explain(negative_errno(), target, "detach the old tree from", ret_message);
        return 0;
}

int tree_swap(const char *target, int new_tree_fd, bool allow_degraded, SwapResult *ret, char **ret_message) {
        _cleanup_close_ int old_fd = -EBADF;
        bool old_ours;
        int r;

        old_fd = open(target, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (old_fd < 0)
                return explain(negative_errno(), target, "open", ret_message);
        old_ours = overlay_fd_is_ours(old_fd, NULL);

        if (new_tree_fd < 0) {
                if (!old_ours) {
                        *ret = SWAP_DETACHED;
                        return 0;
                }
                r = detach_pinned(old_fd, target, ret_message);
                if (r >= 0)
                        *ret = SWAP_DETACHED;
                return r;
        }

        if (!old_ours) {
                if (move_mount(new_tree_fd, "", AT_FDCWD, target, MOVE_MOUNT_F_EMPTY_PATH) < 0)
                        return explain(negative_errno(), target, "attach the new tree on", ret_message);
                *ret = SWAP_ATTACHED;
                return 0;
        }

        if (!kernel_has_mount_beneath()) {
                if (!allow_degraded) {
                        if (asprintf(ret_message,
                                     "This kernel cannot mount beneath %s (MOVE_MOUNT_BENEATH needs Linux 6.5); refusing a refresh that would expose the base. Set DegradedMode=unmount-mount in sysextd.conf to accept that.",
                                     target) < 0)
                                *ret_message = NULL;
                        return -EOPNOTSUPP;
                }
                r = detach_pinned(old_fd, target, ret_message);
                if (r < 0)
                        return r;
                if (move_mount(new_tree_fd, "", AT_FDCWD, target, MOVE_MOUNT_F_EMPTY_PATH) < 0)
                        return explain(negative_errno(), target, "attach the new tree on", ret_message);
                *ret = SWAP_REPLACED_GAP;
                return 0;
        }

        if (move_mount(new_tree_fd, "", AT_FDCWD, target, MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_BENEATH) < 0)
                return explain(negative_errno(), target, "mount the new tree beneath", ret_message);

#ifdef SYSEXTD_TEST_HOOKS
        testhook_point("swap-after-beneath", 0);
#endif

        r = detach_pinned(old_fd, target, ret_message);
        if (r < 0)
                return r;
        *ret = SWAP_REPLACED;
        return 0;
}

int tree_detach_top(const char *target, const char *expected_id, char **ret_message) {
        _cleanup_close_ int fd = open(target, O_PATH | O_DIRECTORY | O_CLOEXEC);
        _cleanup_free_ char *id = NULL;

        if (fd < 0)
                return explain(negative_errno(), target, "open", ret_message);
        if (!overlay_fd_is_ours(fd, &id) || !streq(id, expected_id)) {
                if (asprintf(ret_message, "The top of %s is not the sysextd overlay %s; refusing to detach it.", target,
                             expected_id) < 0)
                        *ret_message = NULL;
                return -ESTALE;
        }
        return detach_pinned(fd, target, ret_message);
}
