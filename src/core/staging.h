/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "image.h"

/* The staging worker: builds complete new trees off to the side, in a private mount
 * namespace of a child process, and hands them back as detached mount fds. */

typedef struct StagingRequest {
        const char *hierarchy; /* "usr" */
        const char *target;    /* absolute path of the live hierarchy, "/R/usr" */
        char **children;       /* absolute mount points below target to carry over */
        size_t *layers;        /* indexes into the image array, top first; empty: base only */
        size_t n_layers;
        const char *id;        /* marker id for the new overlay */
        char **names;          /* extension names written into the marker layer */

        int tree_fd;           /* result: detached tree, the overlay with its children */
} StagingRequest;

/* Runs the worker.  'staging_dir' is an existing empty directory (under run/sysextd) that
 * the worker mounts a private tmpfs on, in its own namespace only.  On failure returns
 * -errno and a message for people in *ret_message; nothing is left mounted anywhere. */
int staging_build(const char *staging_dir, Image *images, size_t n_images, StagingRequest *reqs, size_t n_reqs,
                  bool noexec, char **ret_message);
