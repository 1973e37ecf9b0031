/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mounts.h"
#include "tree.h"

/* The swap of every hierarchy of a transition, all of them or none (swap.c has the outcome
 * table). */

typedef enum SwapState {
        SWAP_UNTOUCHED,   /* nothing happened at this hierarchy */
        SWAP_PLACED,      /* the new tree waits beneath the old top (readers see the old one) */
        SWAP_ATTACHED,    /* nothing of ours was live: the new tree went on top */
        SWAP_REPLACED,    /* the new tree is live, the old top detached */
        SWAP_REPLACED_GAP,/* degraded mode: old top detached first, then the new tree attached */
        SWAP_DETACHED,    /* no new tree: our old top detached */
        SWAP_ROLLED_BACK, /* placed or attached, then taken back: the old tree is live as before */
        SWAP_BURIED,      /* placed, could not be taken back: it waits, invisible, beneath the old
                           * top (a parent mount that does not propagate) */
        SWAP_COVERED,     /* placed, but a foreign mount went on top before the old top could be
                           * detached: finished once that mount is gone */
        SWAP_DELAYED,     /* a delayed swap: the new tree waits beneath the old top (or, with no
                           * new tree, the old top stays), which each namespace drops when it
                           * commits (delay.h) */
        _SWAP_STATE_MAX,
} SwapState;

const char *swap_state_to_string(SwapState s);

typedef struct SwapTarget {
        /* Where: a hierarchy below the root. */
        int root_fd;
        const char *rel;  /* "usr" */
        const char *path; /* "/R/usr", for messages and mountinfo */

        int tree_fd;          /* the new tree (detached), -EBADF: none (our old top just goes) */
        const Tree *new_tree; /* its record (identity) */
        const Tree *old;      /* our live tree to replace or detach; NULL: nothing of ours live */
        /* With old NULL, what the transition planned on top: the mount there (planned_top_id,
         * 32-bit id) or, with none mounted at the path, the mount containing it. */
        uint64_t planned_top_id;
        /* The mounts below, as planned: re-read right before the swap, which stops when they
         * differ. */
        const MountChildren *children;

        SwapState state;
        bool sealed;      /* the old tree (writable) was made read-only for the handover */
        uint64_t sealed_at; /* CLOCK_MONOTONIC µs when its seal began (0: never sealed) */
} SwapTarget;

typedef struct SwapOptions {
        bool mount_beneath;  /* the kernel has MOVE_MOUNT_BENEATH */
        bool allow_degraded; /* without it: unmount, then mount */
        bool delay;          /* stop after step 1: old tops stay, writable ones are refused */
        uint64_t seal_wait_usec; /* how long a seal waits for files open for writing to close */
        uint64_t *ret_sealed_usec; /* if set: how long the first sealed tree was read-only
                                    * before the last old top was detached (0: none sealed) */
        /* If set (n entries, -EBADF each to begin with): the pinned fd of each old top that
         * step 3 detached (not the degraded swap's), its last reference unless another
         * namespace keeps a copy or something on it is still open: its close is then the old
         * tree's end (every layer's clone let go, file systems no other mount holds ended),
         * the caller's to make where it does not wait for it. */
        int *ret_old_fds;
} SwapOptions;

#define SWAP_SEAL_WAIT_USEC (2ULL * 1000000ULL)

/* Makes a writable tree read-only (ro) or writable again, on a pinned fd of its root: its
 * superblock, so every mount of it in every namespace.  -EBUSY while a file on it is open for
 * writing. */
int tree_seal_fd(int fd, bool ro);

/* Step 2 of the swap on its own (also for recovery): every target's old tree that is
 * writable made read-only, or none: a refusal (a file open for writing after wait_usec)
 * leaves each writable as it was, with *ret_message naming the process. */
int swap_seal_all(SwapTarget *targets, size_t n, uint64_t wait_usec, char **ret_message);
/* Makes every target sealed by swap_seal_all() writable again (its old tree still on top). */
void swap_unseal_all(SwapTarget *targets, size_t n);

/* Swaps every target.  Returns 0 when every target reached its end state (REPLACED,
 * ATTACHED, DETACHED, or UNTOUCHED for those with nothing to do; with o->delay, DELAYED for
 * every target with an old tree); < 0 with *ret_message otherwise, each target's state saying
 * what happened to it. */
int swap_all(SwapTarget *targets, size_t n, const SwapOptions *o, char **ret_message);

/* Lazily detaches the top of a hierarchy if it is the tree t, checked on a pinned fd
 * immediately before umount2().  -EBUSY with *ret_message when the top is something else. */
int tree_detach(int root_fd, const char *rel, const char *path, const Tree *t, char **ret_message);
/* The same, the pinned fd of the tree detached handed over in *ret_fd (see ret_old_fds). */
int tree_detach_pinned(int root_fd, const char *rel, const char *path, const Tree *t, int *ret_fd, char **ret_message);

/* Turns a kernel error of a mount operation into words for people. */
int swap_explain(int r, const char *path, const char *what, char **ret_message);
