/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>

#include "engine.h"
#include "image.h"
#include "inspect.h"
#include "journal.h"
#include "mutable.h"
#include "plan.h"

/* Carrying out a plan: stage, begin, swap, commit (execute.c has the order and what each
 * failure leaves behind). */
typedef struct ExecuteOptions {
        unsigned classes;               /* the classes the transition covers */
        unsigned attrs[_IMAGE_CLASS_MAX];  /* mount attributes of each class's trees */
        const char *options[_IMAGE_CLASS_MAX]; /* extra overlay options, NULL: the defaults */
        const MutableSetup *mutables;   /* per hierarchy (merge, refresh) */
} ExecuteOptions;

int execute_transition(Engine *e, EngineVerb verb, Journal *j, HierarchyState *states, const PlanHierarchy *views,
                       const Plan *plan, ImageList *images, const ExecuteOptions *o, bool *ret_changed);
