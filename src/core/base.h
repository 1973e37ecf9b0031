/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The base: the root as it is below sysextd's trees (base.c). */

/* An fd for the root directory of 'root' (root_fd, its canonical path) as it is with every
 * overlay of sysextd taken off: a detached copy of its mount tree, made in a private mount
 * namespace, or simply a duplicate of root_fd when none of sysextd's overlays is mounted
 * below it.  Read host facts through it, with RESOLVE_IN_ROOT. */
int base_root_open(int root_fd, const char *root, int *ret_fd);
