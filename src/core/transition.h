/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

#include "image-class.h"
#include "macro.h"

/* What the engine's steps share with it, one layer below it: the verb a transition carries
 * out, how its failure is classified and kept for the caller, and the part of the engine a step
 * works with (TransitionContext).  Planning (plan.c), execution (execute.c) and recovery
 * (recover.c) need no more of the engine than this, and never call it.  The names keep the
 * engine's prefix: the command line and the daemon know them as the engine's (engine.h). */

typedef enum EngineVerb {
        ENGINE_MERGE,
        ENGINE_REFRESH,
        ENGINE_UNMERGE,
        ENGINE_ROLLBACK, /* a refresh to the images of an earlier generation (engine.h); the steps
                          * below the engine see a refresh */
        _ENGINE_VERB_MAX,
} EngineVerb;

const char *engine_verb_to_string(EngineVerb v);

typedef enum EngineError {
        ENGINE_OK,
        ENGINE_ERROR_FAILED,
        ENGINE_ERROR_NO_IMAGES,
        ENGINE_ERROR_NO_SUITABLE_IMAGES,
        ENGINE_ERROR_ALREADY_MERGED,
        ENGINE_ERROR_IMAGE_REFUSED,
        ENGINE_ERROR_KERNEL_REFUSED,
        ENGINE_ERROR_FOREIGN_MOUNT,
        ENGINE_ERROR_BUSY,
        _ENGINE_ERROR_MAX,
} EngineError;

/* What a transition did: for the CLI, the daemon and its reply. */
typedef struct EngineResult {
        int r;              /* < 0: failed */
        bool changed;       /* the live tree changed (this transition, or recovery before it) */
        bool recovered;     /* recovery changed the tree before the transition ran */
        bool delayed;       /* the transition is delayed: its new trees wait beneath the old tops */
        uint64_t generation;
        EngineError error;  /* classification of a failure */
        char *message;      /* its message, for the caller */
} EngineResult;

void engine_result_done(EngineResult *r);

/* Logs the failure once and keeps it in r; returns -abs(error) (-EIO for 0).  errno is that
 * error while fmt is formatted, for %m. */
int engine_result_failv(EngineResult *r, EngineError kind, int error, const char *fmt, va_list ap) _printf_(4, 0);

/* Whether SIGINT, SIGTERM or SIGHUP is pending.  A caller that blocks them around a transition
 * (the command line with --no-bus) gets a transition that stops at the last point where
 * nothing has changed yet, or runs to its commit: never one cut in the middle. */
bool engine_stop_requested(void);

/* The engine's state a step works with, lent by the engine for one call (it holds the lock
 * meanwhile): where the trees and the journal are, and where a failure goes. */
typedef struct TransitionContext {
        const char *root;                  /* absolute, canonical: for messages */
        int root_fd;
        int journal_fd;                    /* run/sysextd, while the lock is held */
        const ImageClass *hierarchy_class; /* per hierarchy, in the engine's order */
        bool allow_degraded;               /* DegradedMode=unmount-mount */
        EngineResult *result;              /* a failure is kept here (transition_fail()) */
        /* Recovery: why an interrupted transition cannot be finished yet (recover.c), or NULL;
         * the engine refuses a new transition meanwhile. */
        char **recovery_waits;
        /* Recovery: commit a delayed transition now, whatever its deadline (a new transition,
         * sysextd commit); without it one is committed only once its deadline has passed. */
        bool commit_delayed;
        /* Recovery: set to the generation of the delayed transition it committed (0: none). */
        uint64_t *committed_delayed;
} TransitionContext;

/* engine_result_failv() on the context's result. */
int transition_fail(const TransitionContext *ctx, EngineError kind, int error, const char *fmt, ...) _printf_(4, 5);
