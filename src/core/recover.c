/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Recovery: what a crash, a kill or someone else left behind is resolved before anything
 * else runs, under the lock, from the journal and the mount table.
 *
 * 1. A pending record (written before a swap began) is resolved per hierarchy, from where
 *    its old tree O and new tree N are in the stack (recover_decide()):
 *
 *      stack at the hierarchy (top last)      decision
 *      --------------------------------------+------------------------------------------
 *      a foreign mount on top, O or N below  | COVERED: keep the record, touch nothing
 *      ... N            (O not there)        | DONE: N is live
 *      ... N O          (N right below O)    | FINISH: detach O (identity checked), N live
 *      ... O            (N not there)        | DISCARD: the swap never happened; O stays
 *      ... O, N elsewhere below              | DISCARD: O stays (N is buried, reported)
 *      no new tree (unmerge): O not there    | DONE: O was detached
 *      no new tree: O on top                 | DISCARD
 *      neither O nor N there                 | GONE: nothing of ours is live
 *
 *    A FINISH whose old tree is writable seals it first (swap_seal_all(), all of the
 *    transition's or none): when a file is held open for writing on one, every FINISH of the
 *    transition waits, every old tree is made writable again (also one sealed before the
 *    crash), the record is kept and the engine refuses transitions (the context's
 *    recovery_waits, transition.h) until it is closed.  A DISCARD makes its writable old tree
 *    writable again (it may have been sealed for the handover that did not happen).
 *
 *    A delayed transition (execute.c) leaves every hierarchy at FINISH on purpose (a delayed
 *    unmerge, with no new tree, leaves O on top: FINISH too, where a plain record would
 *    DISCARD).  Until its deadline its FINISHes wait and the record stays as it is, delay
 *    included (a crash keeps it delayed); the other decisions are taken as usual (someone
 *    who detached O on the host has committed it: DONE).  Once the deadline has passed, or
 *    when the engine asks (ctx->commit_delayed: a new transition, sysextd commit), the
 *    FINISHes run: O is detached on the host, by identity, and propagation takes it out of
 *    every namespace that still has it.  Its generation is the one it was delayed as.
 *
 *    When some hierarchies are DONE or FINISH and others DISCARD, the transition was
 *    interrupted between them: what is live is recorded as it is, and the journal is marked
 *    incomplete so that the next refresh completes it (the daemon runs one at once).
 *    DONE and FINISH advance the generation exactly as a commit does.
 *
 * 2. Stacks are repaired (plan.h, stack_analyze()): ours above the tree that should be live
 *    are detached, top first (an interrupted transition whose record was lost: readers go
 *    from one complete tree of ours to another); ours put over a foreign mount that covers
 *    ours are detached, so that mount shows again.  Nothing foreign is ever detached.
 *
 * 3. The journal's record of what is live is brought in line with the stack (someone may
 *    have unmounted our tree), and tree records whose mount is gone are forgotten.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fd-util.h"
#include "inspect.h"
#include "log.h"
#include "plan.h"
#include "recover.h"
#include "swap.h"
#include "util.h"

static const char *const decision_names[_RECOVER_DECISION_MAX] = {
        [RECOVER_DONE] = "done",
        [RECOVER_FINISH] = "finish",
        [RECOVER_DISCARD] = "discard",
        [RECOVER_COVERED] = "covered",
        [RECOVER_GONE] = "gone",
};

const char *recover_decision_to_string(RecoverDecision d) {
        return d >= 0 && d < _RECOVER_DECISION_MAX ? decision_names[d] : NULL;
}

static ssize_t position_of(const HierarchyState *h, const char *tree) {
        for (size_t i = 0; tree && i < h->stack.n; i++)
                if (h->roles[i] == STACK_OURS && streq(h->trees[i]->id, tree))
                        return (ssize_t) i;
        return -1;
}

RecoverDecision recover_decide(const HierarchyState *h, const char *old_tree, const char *new_tree) {
        ssize_t top = (ssize_t) h->stack.n - 1, o = position_of(h, old_tree), n = position_of(h, new_tree);

        if (top >= 0 && h->roles[top] != STACK_OURS && (o >= 0 || n >= 0))
                return RECOVER_COVERED;
        if (new_tree) {
                if (n >= 0 && n == top)
                        return RECOVER_DONE;
                if (o >= 0 && o == top)
                        return n >= 0 && n == top - 1 ? RECOVER_FINISH : RECOVER_DISCARD;
                if (n < 0 && o < 0)
                        return old_tree ? RECOVER_GONE : RECOVER_DISCARD;
                /* Something else of ours is on top, with O or N below it. */
                return RECOVER_DISCARD;
        }
        return o < 0 ? RECOVER_DONE : RECOVER_DISCARD;
}

/* recover_decide(), and a delayed unmerge's old top, which stays on purpose: FINISH. */
static RecoverDecision decide(const Journal *j, const HierarchyState *h, const JournalTransition *t) {
        RecoverDecision d = recover_decide(h, t->old_tree, t->new_tree);

        if (d == RECOVER_DISCARD && journal_delayed(j) && !t->new_tree && t->old_tree && h->stack.n > 0 &&
            position_of(h, t->old_tree) == (ssize_t) h->stack.n - 1)
                return RECOVER_FINISH;
        return d;
}

static HierarchyState *find_state(HierarchyState *states, size_t n, const char *name) {
        for (size_t i = 0; i < n; i++)
                if (streq(states[i].name, name))
                        return &states[i];
        return NULL;
}

static int reinspect(const TransitionContext *ctx, Journal *j, HierarchyState *states, size_t n) {
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *name = strdup(states[i].name);
                int r;

                if (!name)
                        return -ENOMEM;
                hierarchy_state_done(&states[i]);
                r = hierarchy_inspect(ctx->root_fd, ctx->root, name, j, &states[i]);
                if (r < 0)
                        return transition_fail(ctx, ENGINE_ERROR_FAILED, r, "Failed to inspect %s/%s: %m", ctx->root, name);
        }
        return 0;
}

/* Before a FINISH detaches a writable old tree, that tree is sealed (swap.c: two writable
 * trees never share an upper directory; a crash may have come before the seal, or between
 * the seals of two hierarchies).  All of the transition's writable old trees are sealed, or
 * none: when a file is held open for writing on one, each stays writable and on top, its
 * new tree waits beneath it unseen, and the record is kept: it is finished at a later start,
 * once the file is closed.  Returns whether the FINISHes may go ahead. */
static bool seal_for_finish(const TransitionContext *ctx, Journal *j, HierarchyState *states, size_t n,
                            SwapTarget *targets, size_t *ret_n) {
        _cleanup_free_ char *msg = NULL;
        size_t k = 0;

        for (size_t i = 0; i < j->n_transitions; i++) {
                const JournalTransition *t = &j->transitions[i];
                HierarchyState *h = find_state(states, n, t->hierarchy);
                const Tree *old = tree_list_find(&j->trees, t->old_tree);

                if (!h || !h->exists || !old || !old->writable || decide(j, h, t) != RECOVER_FINISH)
                        continue;
                targets[k++] = (SwapTarget) {
                        .root_fd = ctx->root_fd, .rel = h->name, .path = h->path, .tree_fd = -EBADF, .old = old,
                };
        }
        *ret_n = k;
        if (k == 0 || swap_seal_all(targets, k, SWAP_SEAL_WAIT_USEC, &msg) >= 0)
                return true;
        /* Every one writable again, also one sealed before the crash (between two seals):
         * swap_seal_all() gives back only what it sealed itself. */
        for (size_t i = 0; i < k; i++)
                targets[i].sealed = true;
        swap_unseal_all(targets, k);
        if (asprintf(ctx->recovery_waits,
                     "An interrupted transition cannot be finished yet: %s Until then the previous trees stay live and writable, and the new ones wait beneath them unseen.",
                     strna(msg)) < 0)
                *ctx->recovery_waits = NULL;
        log_warning("%s", strna(*ctx->recovery_waits));
        return false;
}

static int resolve_pending(const TransitionContext *ctx, Journal *j, HierarchyState *states, size_t n,
                           bool *ret_changed) {
        _cleanup_free_ SwapTarget *sealed = calloc(j->n_transitions ?: 1, sizeof(SwapTarget));
        bool forward = false, discarded = false, may_finish;
        bool delayed = journal_delayed(j);
        bool due = delayed && (ctx->commit_delayed || now_realtime_usec() >= j->delay_deadline);
        uint64_t pending_generation = j->pending_generation;
        size_t n_sealed = 0;

        if (!sealed)
                return -ENOMEM;
        may_finish = seal_for_finish(ctx, j, states, n, sealed, &n_sealed);
        for (size_t i = 0; i < j->n_transitions;) {
                JournalTransition *t = &j->transitions[i];
                HierarchyState *h = find_state(states, n, t->hierarchy);
                Tree *old = tree_list_find(&j->trees, t->old_tree);
                RecoverDecision d;
                _cleanup_free_ char *msg = NULL;
                const char *now;
                int r;

                if (!h || !h->exists) {
                        log_warning("Dropped the pending record of an interrupted transition on %s/%s: that hierarchy %s.",
                                    ctx->root, t->hierarchy, h ? "no longer exists" : "is no longer configured");
                        (void) journal_set_tree(j, t->hierarchy, NULL);
                        journal_drop_transition(j, i);
                        continue;
                }

                d = decide(j, h, t);
                /* A delayed transition waits for its deadline, or for a commit. */
                if (d == RECOVER_FINISH && delayed && !due) {
                        log_debug("Delayed transition on %s: waiting.", h->path);
                        i++;
                        continue;
                }
                /* All of the transition's hierarchies wait, not only the writable ones: no
                 * new /usr beside an old /opt meanwhile. */
                if (d == RECOVER_FINISH && !may_finish) {
                        i++;
                        continue;
                }
                if (d == RECOVER_FINISH) {
                        r = tree_detach(ctx->root_fd, h->name, h->path, old, &msg);
                        if (r < 0) {
                                log_warning("Could not finish the interrupted transition on %s: %s", h->path, strna(msg));
                                /* Still on top: writable again. */
                                for (size_t k = 0; k < n_sealed; k++)
                                        if (sealed[k].old == old)
                                                swap_unseal_all(&sealed[k], 1);
                                d = RECOVER_COVERED;
                        }
                }
                log_debug("Pending transition on %s: %s.", h->path, recover_decision_to_string(d));

                switch (d) {
                case RECOVER_COVERED:
                        log_warning("A foreign mount covers an unfinished transition on %s; it is finished once that mount is gone.",
                                    h->path);
                        i++;
                        continue;
                case RECOVER_DONE:
                case RECOVER_FINISH:
                        if (delayed)
                                log_info("Committed the delayed transition on %s.", h->path);
                        else
                                log_info("Finished an interrupted transition on %s.", h->path);
                        now = t->new_tree;
                        forward = true;
                        break;
                case RECOVER_DISCARD:
                        if (old && old->writable) {
                                /* It may have been sealed for a handover that did not happen
                                 * (an unmerge or a refresh killed after the seal): writable
                                 * again, as it was. */
                                _cleanup_close_ int fd = hierarchy_open(ctx->root_fd, h->name);

                                if (fd >= 0 && tree_check_fd(old, fd, NULL) > 0 && tree_seal_fd(fd, false) < 0)
                                        log_warning("The previous tree on %s could not be made writable again.", h->path);
                        }
                        log_info("Discarded an interrupted transition on %s; the previous tree is still in place.", h->path);
                        now = t->old_tree;
                        discarded = true;
                        break;
                case RECOVER_GONE:
                default:
                        log_warning("Neither the previous nor the new tree of an interrupted transition is mounted on %s any more.",
                                    h->path);
                        now = NULL;
                        forward = true;
                        break;
                }
                r = journal_set_tree(j, t->hierarchy, now);
                if (r < 0)
                        return r;
                journal_drop_transition(j, i);
        }

        if (forward) {
                /* A delayed transition may have advanced the generation already (a hierarchy
                 * where nothing of ours was live got its tree at once). */
                j->generation = delayed ? MAX(j->generation, pending_generation)
                                        : MAX(j->generation + 1, pending_generation);
                *ret_changed = true;
        }
        if (discarded) {
                /* The images recorded are the ones the interrupted transition saw: forget
                 * them, so that the next refresh rebuilds instead of finding them unchanged. */
                image_list_free(&j->images);
                if (forward)
                        j->incomplete = true;
        }
        if (j->n_transitions == 0) {
                journal_pending_clear(j);
                if (delayed && forward && ctx->committed_delayed)
                        *ctx->committed_delayed = pending_generation;
        }
        return 0;
}

static bool pending_for(const Journal *j, const char *hierarchy) {
        for (size_t i = 0; i < j->n_transitions; i++)
                if (streq(j->transitions[i].hierarchy, hierarchy))
                        return true;
        return false;
}

static int repair_stacks(const TransitionContext *ctx, Journal *j, HierarchyState *states, size_t n,
                         bool *ret_changed) {
        for (size_t i = 0; i < n; i++) {
                HierarchyState *h = &states[i];
                JournalHierarchy *jh = journal_find_hierarchy(j, h->name);
                const char *current = jh ? jh->tree : NULL, *now;
                StackView v;
                int r;

                if (!h->exists)
                        continue;
                stack_analyze(h, current, &v);
                for (size_t k = 0; k < v.n_repair; k++) {
                        const Tree *t = h->trees[h->stack.n - 1 - k];
                        _cleanup_free_ char *msg = NULL;

                        r = tree_detach(ctx->root_fd, h->name, h->path, t, &msg);
                        if (r < 0)
                                return transition_fail(ctx, ENGINE_ERROR_FAILED, r, "Failed to repair the mounts at %s: %s", h->path,
                                                       strna(msg));
                        log_info("Detached a stale tree of sysextd (generation %" PRIu64 ") from %s.", t->generation, h->path);
                        *ret_changed = true;
                }
                if (v.n_buried > 0 && !pending_for(j, h->name))
                        log_warning("%zu earlier tree(s) of sysextd lie buried beneath the live one on %s; they go when the hierarchy's parent mount does.",
                                    v.n_buried, h->path);

                now = v.live ? v.live->id : v.covered_tree ? v.covered_tree->id : NULL;
                if (!streq_ptr(now, current) && !pending_for(j, h->name)) {
                        /* Someone else changed what is live (or the record was lost): record
                         * the truth.  The images recorded no longer describe it: forget them,
                         * so that the next refresh rebuilds. */
                        r = journal_set_tree(j, h->name, now);
                        if (r < 0)
                                return r;
                        image_list_free(&j->images);
                        *ret_changed = true;
                }
        }
        return 0;
}

static int forget_gone_trees(const TransitionContext *ctx, Journal *j, bool *ret_dirty) {
        for (size_t i = 0; i < j->trees.n;) {
                Tree *t = j->trees.trees[i];
                MountEntry m = {};
                bool referenced = false;
                int r;

                r = mountinfo_find(t->mount_id, &m);
                if (r >= 0 && tree_matches_entry(t, &m, 0)) {
                        mount_entry_done(&m);
                        i++;
                        continue;
                }
                mount_entry_done(&m);
                if (r < 0 && r != -ENOENT)
                        return r;
                for (size_t k = 0; k < j->n_transitions; k++)
                        if (streq_ptr(j->transitions[k].old_tree, t->id) || streq_ptr(j->transitions[k].new_tree, t->id))
                                referenced = true;
                if (referenced) {
                        i++;
                        continue;
                }
                for (size_t k = 0; k < j->n_hierarchies; k++)
                        if (streq_ptr(j->hierarchies[k].tree, t->id)) {
                                free(j->hierarchies[k].tree);
                                j->hierarchies[k].tree = NULL;
                        }
                r = tree_remove(ctx->journal_fd, t->id);
                if (r < 0)
                        return r;
                log_debug("Forgot tree %s: its mount is gone.", t->id);
                tree_list_drop(&j->trees, t->id);
                *ret_dirty = true;
        }
        return 0;
}

int recover_run(const TransitionContext *ctx, Journal *j, HierarchyState *states, size_t n, bool *ret_changed) {
        bool forward = false, repaired = false, dirty = false;
        int r;

        free(*ctx->recovery_waits);
        *ctx->recovery_waits = NULL;
        if (j->pending) {
                r = resolve_pending(ctx, j, states, n, &forward);
                if (r < 0)
                        return r;
                dirty = true;
                r = reinspect(ctx, j, states, n);
                if (r < 0)
                        return r;
        }

        r = repair_stacks(ctx, j, states, n, &repaired);
        if (r < 0)
                return r;
        if (repaired) {
                /* A change of what is live is a new generation, like any commit. */
                if (!forward)
                        j->generation++;
                dirty = true;
                r = reinspect(ctx, j, states, n);
                if (r < 0)
                        return r;
        }

        r = forget_gone_trees(ctx, j, &dirty);
        if (r < 0)
                return transition_fail(ctx, ENGINE_ERROR_FAILED, r, "Failed to update the tree records in %s/%s: %m", ctx->root,
                                       JOURNAL_DIR);

        if (dirty) {
                r = journal_save(ctx->journal_fd, j);
                if (r < 0)
                        return transition_fail(ctx, ENGINE_ERROR_FAILED, r, "Failed to write %s/%s/%s: %m", ctx->root, JOURNAL_DIR,
                                               JOURNAL_STATE);
        }
        *ret_changed = forward || repaired;
        return 0;
}
