/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <errno.h>
#include <stdbool.h>

/* The base: the root as it is below sysextd's trees (base.c). */

/* An fd for the root directory of 'root' (root_fd, its canonical path) as it is with every
 * overlay of sysextd taken off: a detached copy of its mount tree, made in a private mount
 * namespace, or simply a duplicate of root_fd when none of sysextd's overlays is mounted
 * below it.  Read host facts through it, with RESOLVE_IN_ROOT. */
int base_root_open(int root_fd, const char *root, int *ret_fd);

/* The same in two steps, so that the caller works while the helper does (the helper, a thread
 * in a mount namespace of its own, is started by _start(), its answer taken by _finish()).
 * _cancel() waits for one not finished and drops its answer, and frees one finished (b may be
 * BASE_OPEN_INIT, never started).  _pending(): started and not yet finished. */
typedef struct BaseJob BaseJob;
typedef struct BaseOpen {
        BaseJob *job; /* the helper; NULL: none (fd is the answer, or nothing was started) */
        int fd;
} BaseOpen;
#define BASE_OPEN_INIT ((BaseOpen) { .fd = -EBADF })
int base_root_open_start(int root_fd, const char *root, BaseOpen *ret);
int base_root_open_finish(BaseOpen *b, int *ret_fd);
bool base_open_pending(const BaseOpen *b);
void base_open_cancel(BaseOpen *b);
