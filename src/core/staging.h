/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "image.h"
#include "mutable.h"

/* The staging worker: builds complete new trees off to the side, in a private mount
 * namespace of a child process, and hands them back as detached mount fds. */

typedef struct StagingRequest {
        const char *target;    /* absolute path of the live hierarchy, "/R/usr" */
        char **children;       /* absolute mount points below target to carry over */
        size_t *layers;        /* indexes into the image array, top first; empty: base only */
        size_t n_layers;
        const char *hierarchy; /* "usr": the directory of each image that is its layer */
        const dev_t *ours;     /* devices of our overlays on top of target, top first: the
                                * worker takes them off (in its namespace) to reach the base */
        size_t n_ours;
        bool old_writable;     /* ours[0], the live top, is a writable tree: the directories
                                * above each child's mount point are copied up through it
                                * before the new tree looks them up (step 1) */
        /* The marker layer's content. */
        const char *id;
        uint64_t generation;
        char **names;          /* extension names, bottom to top */

        /* The overlay's mount: MOUNT_ATTR_NODEV, _NOSUID, _NOEXEC; extra options (NULL: the
         * defaults, overlay.h). */
        unsigned attrs;
        const char *options;
        /* Mutable modes (mutable.h).  The base is the bottom layer unless base_layer is
         * false (the hierarchy is its own upper directory). */
        bool base_layer;
        MutableUpper upper;
        int upper_fd;          /* MUTABLE_UPPER_DIR: the upper directory, O_PATH */
        int work_fd;           /* MUTABLE_UPPER_DIR: its fresh, empty work directory, O_PATH */
        const char *work_name; /* MUTABLE_UPPER_HIERARCHY: the work directory beside target */
        int import_fd;         /* a read-only layer right below the marker, -EBADF: none */
        /* In the worker: the same directories reached in its namespace (it exits with them). */
        int upper_fd_here, work_fd_here, import_fd_here;

        int tree_fd;           /* result: detached tree, the overlay with its children */
} StagingRequest;

/* Runs the worker.  staging_dir_fd is an empty directory (run/sysextd/staging) that the
 * worker mounts a private tmpfs on, in its own namespace only.  On failure returns -errno
 * and a message for people in *ret_message; nothing is left mounted anywhere.  ret_ns: NULL,
 * or where the worker's namespace goes, emptied (a tmpfs with an empty "l" as its root), for
 * the kept layers (layers.h); left as it was when the worker could not give it.
 * ret_pid: NULL, and the worker is waited for; or, once it answered, its pid goes there and
 * it is left to end (tearing down its namespace, emptying the one sent) while the caller goes
 * on: the caller reaps it with staging_reap() before it trusts *ret_ns and before it gives the
 * lock back (the worker holds the lock's fd until it exits). */
int staging_build(int staging_dir_fd, Image *images, size_t n_images, StagingRequest *reqs, size_t n_reqs, int *ret_ns,
                  pid_t *ret_pid, char **ret_message);

/* Waits for the worker *pid (0: none) and sets *pid to 0: true when it exited 0 (the
 * namespace it sent is emptied). */
bool staging_reap(pid_t *pid);
