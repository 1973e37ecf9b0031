/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>

#include "inspect.h"
#include "transition.h"

/* Recovery: resolving what a crash, a kill or a foreign mount left behind, before anything
 * else runs (recover.c opens with the decision table). */

typedef enum RecoverDecision {
        RECOVER_DONE,    /* the transition's new state is live: record it */
        RECOVER_FINISH,  /* the new tree waits beneath the old top: detach the old top, record */
        RECOVER_DISCARD, /* the swap never happened here: the old tree stays live */
        RECOVER_COVERED, /* a foreign mount covers the transition: keep the record, touch nothing */
        RECOVER_GONE,    /* neither tree is there any more (someone else unmounted them) */
        _RECOVER_DECISION_MAX,
} RecoverDecision;

const char *recover_decision_to_string(RecoverDecision d);

/* The decision for one pending hierarchy transition from old_tree to new_tree (tree ids;
 * either may be NULL) given the inspected stack.  Pure. */
RecoverDecision recover_decide(const HierarchyState *h, const char *old_tree, const char *new_tree);

/* Runs under the engine's lock with the loaded journal: resolves a pending record, repairs
 * stacks (plan.h: stack_analyze), forgets tree records whose mount is gone, and saves the
 * journal when anything changed.  *ret_changed says whether the live tree changed (the
 * generation advanced).  Re-inspects *states afterwards.  Sets *ctx->recovery_waits (else
 * NULL) when an interrupted transition cannot be finished yet; a failure is kept in
 * ctx->result. */
int recover_run(const TransitionContext *ctx, Journal *j, HierarchyState *states, size_t n, bool *ret_changed);
