/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "image.h"
#include "inspect.h"
#include "journal.h"
#include "mutable.h"
#include "transition.h"

/* Planning: pure functions from what was inspected to what a transition does.  No I/O; every
 * branch has a unit test (test/unit/test-plan.c). */

/* What a stack of mounts at one hierarchy means.
 *
 *   stack, bottom first               meaning                        repair
 *   ---------------------------------+------------------------------+---------------------------
 *   (nothing of ours)                | not merged                   | -
 *   ... T                            | T live                       | -
 *   ... T S1 .. Sk  (all ours)       | T intended, S above it stale | detach Sk .. S1 (finishing
 *                                    | (an interrupted transition   | forward what was interrupted:
 *                                    | whose record was lost)       | readers go from one of our
 *                                    |                              | trees to another)
 *   ... B T  (B ours, below T)       | B buried under the live T    | none possible without a
 *                                    |                              | window: reported
 *   ... O F                          | O covered by foreign F       | - (nothing is touched)
 *   ... O F N1 .. Nk                 | N attached over a foreign    | detach Nk .. N1: F shows
 *                                    | mount that covers ours       | again, O is covered
 * T, the intended tree of a run of ours at the top, is the journal's current tree when it is in
 * the run, else the one with the highest generation. */
typedef struct StackView {
        const Tree *live;         /* our tree on top once repaired; NULL: none */
        size_t live_index;        /* its place in the stack */
        bool covered;             /* ours below a foreign mount that is on top */
        const Tree *covered_tree; /* the topmost of ours under it */
        size_t n_repair;          /* ours to detach from the top, one by one */
        size_t n_ours;
        size_t n_buried;          /* ours below the live tree */
        size_t n_unrecorded;      /* overlays from source "sysextd" without a record */
        size_t run_start;         /* first index of the run of ours that ends at the live tree */
} StackView;

void stack_analyze(const HierarchyState *h, const char *current_tree, StackView *ret);

typedef enum HierarchyAction {
        ACTION_KEEP,   /* nothing to do */
        ACTION_BUILD,  /* a new overlay of the images that have content for it */
        ACTION_BASE,   /* an overlay of the base alone: unmerge, keeping mounts below */
        ACTION_DETACH, /* our live tree just goes */
        _ACTION_MAX,
} HierarchyAction;

const char *hierarchy_action_to_string(HierarchyAction a);

typedef struct HierarchyPlan {
        HierarchyAction action;
        bool replace;      /* a live tree of ours is replaced (beneath it); else on top */
        bool create;       /* the hierarchy does not exist: its directory is created first */
        size_t *layers;    /* image indexes, top first */
        size_t n_layers;
        char **names;      /* extension names, bottom to top */
} HierarchyPlan;

typedef struct PlanHierarchy {
        const HierarchyState *state;
        StackView view;
        ImageClass klass;
        bool skip;               /* not covered by this call (--class=): kept as it is */
        MutableDecision mutable; /* merge, refresh: the mode's decision (mutable.h) */
} PlanHierarchy;

typedef struct PlanInput {
        EngineVerb verb;
        bool always_refresh;
        bool strict;
        bool mount_beneath;  /* the kernel has MOVE_MOUNT_BENEATH */
        bool allow_degraded; /* DegradedMode=unmount-mount */
        const PlanHierarchy *hierarchies;
        size_t n_hierarchies;
        const ImageList *images; /* probed (merge, refresh) */
        bool unchanged;          /* images, policy and live trees as the journal has them */
} PlanInput;

typedef struct Plan {
        HierarchyPlan *hierarchies;
        size_t n_hierarchies;
        bool any_work;
        /* Refusal: the transition must not run. */
        EngineError error;
        int errno_value;
        char *message;
        /* Notes for the log: images taken out because they no longer pass the policy. */
        char **dropped;
        /* Merge and refresh found no compatible image; mutable modes still build their trees.
         * With no image at all that is no error, as with systemd-sysext; a merge whose images
         * were all incompatible or refused fails (the counts say which). */
        bool no_images;
        size_t n_incompatible;
        size_t n_refused;
} Plan;

void plan_done(Plan *p);

/* The refusals that follow from the stacks alone (a foreign mount on top of ours, already
 * merged): checked before any image is probed.  p->error set, or ENGINE_OK. */
int plan_check(const PlanInput *in, Plan *ret);

/* Decides what the transition does per hierarchy.  Returns 0 with p->error set (and
 * p->message) when it must be refused, < 0 only for -ENOMEM. */
int plan_transition(const PlanInput *in, Plan *ret);

/* Whether a discovered image is one the journal recorded: the same class, name and path, and
 * then, when both have a root hash (the recorded one verified, of a merged file system image;
 * the found one read from NAME.roothash), the same root hash, size and signature presence,
 * whatever the file's identity (systemd-sysext 260's rule); else the same file identity
 * (device, inode, size, mtime) and stamp. */
bool plan_image_same(const Image *recorded, const Image *found);

/* Whether the images found are the ones the journal recorded (plan_image_same()), looking at
 * the classes in the mask only: then a refresh has nothing to do. */
bool plan_images_unchanged(const ImageList *images, const ImageList *recorded, unsigned classes);
