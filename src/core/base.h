/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

/* The base: the root as it is below sysextd's trees (base.c). */

/* An fd for the root directory of 'root' (root_fd, its canonical path) as it is with every
 * overlay of sysextd taken off: a detached copy of its mount tree, made in a private mount
 * namespace, or simply a duplicate of root_fd when none of sysextd's overlays is mounted
 * below it.  Read host facts through it, with RESOLVE_IN_ROOT. */
int base_root_open(int root_fd, const char *root, int *ret_fd);

/* The same in two steps, so that the caller works while the helper does (the helper process is
 * forked by _start(), its answer taken by _finish()).  _cancel() ends one not finished, and
 * frees one finished (b may be { .sock = -EBADF, .fd = -EBADF } never started).  A helper that
 * answered is reaped by _cancel(), not by _finish(): its exit, which tears down its copy of the
 * mount tree, is nothing the caller need wait for (the caller cancels before it unlocks: the
 * helper inherited the lock). */
typedef struct BaseOpen {
        pid_t pid; /* the helper; 0: none (fd is the answer, or nothing was started) */
        int sock;
        int fd;
        bool answered; /* pid has answered and is exiting, to be reaped */
} BaseOpen;
int base_root_open_start(int root_fd, const char *root, BaseOpen *ret);
int base_root_open_finish(BaseOpen *b, int *ret_fd);
void base_open_cancel(BaseOpen *b);
