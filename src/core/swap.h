/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>

/* Whether move_mount(2) knows MOVE_MOUNT_BENEATH (Linux 6.5). Probed once. */
bool kernel_has_mount_beneath(void);

typedef enum SwapResult {
        SWAP_ATTACHED,      /* nothing of ours was live: the new tree went on top */
        SWAP_REPLACED,      /* beneath the old top, old top detached */
        SWAP_REPLACED_GAP,  /* degraded mode: old top detached first, then the new tree attached */
        SWAP_DETACHED,      /* no new tree: our old top detached */
} SwapResult;

/* Puts new_tree_fd (a detached tree, or -EBADF for none) at target and lazily detaches our old
 * top there, if any.  Never detaches a mount that is not ours.  *ret_message explains a
 * failure in words for people. */
int tree_swap(const char *target, int new_tree_fd, bool allow_degraded, SwapResult *ret, char **ret_message);

/* Lazily detaches the top of target if it is our overlay with the marker id expected_id
 * (finishing a transition a crash interrupted after the swap). */
int tree_detach_top(const char *target, const char *expected_id, char **ret_message);
