/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>

#include "fd-util.h"
#include "image.h"
#include "inspect.h"
#include "journal.h"
#include "layers.h"
#include "mutable.h"
#include "plan.h"
#include "transition.h"

/* Carrying out a plan: stage, begin, swap, commit (execute.c has the order and what each
 * failure leaves behind). */
typedef struct ExecuteOptions {
        unsigned classes;               /* the classes the transition covers */
        unsigned attrs[_IMAGE_CLASS_MAX];  /* mount attributes of each class's trees */
        const char *options[_IMAGE_CLASS_MAX]; /* extra overlay options, NULL: the defaults */
        const MutableSetup *mutables;   /* per hierarchy (merge, refresh) */
        uint64_t delay_usec;            /* > 0: a delayed transition (swap.c), this long */
        /* > 0: the commit that makes a new generation live records it in the history
         * (journal_save_recording()), keeping this many; the record's error goes to
         * *record_error (the transition stands). */
        unsigned generations_keep;
        int *record_error;
        /* NULL, or where the staging worker's emptied namespace goes, for the kept layers
         * (layers.h), when it builds a tree. */
        int *layers_ns;
        /* NULL, or where the staging worker's pid goes once it answered, left to end while the
         * transition goes on: the caller reaps it (staging_reap()), also when it failed. */
        pid_t *staging_pid;
        /* NULL, or where the clones of kept mounts among the images go once the new trees are
         * built (layers_release_start()). */
        FdRelease *release;
        /* The kept layers' namespace (layers.h) to sweep while the staging worker builds the new
         * trees (waited for once it answered), or -EBADF. */
        int sweep_ns;
        /* NULL, or where the old trees the swap detached are let go (fd_release_start()). */
        FdRelease *old_trees;
} ExecuteOptions;

/* Under the engine's lock, with ctx lent by it: a failure is logged and kept in ctx->result. */
int execute_transition(const TransitionContext *ctx, EngineVerb verb, Journal *j, HierarchyState *states,
                       const PlanHierarchy *views, const Plan *plan, ImageList *images, const ExecuteOptions *o,
                       bool *ret_changed);
