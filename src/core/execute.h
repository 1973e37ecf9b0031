/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>

#include "engine.h"
#include "image.h"
#include "inspect.h"
#include "journal.h"
#include "plan.h"

/* Carrying out a plan: stage, begin, swap, commit (execute.c has the order and what each
 * failure leaves behind). */
int execute_transition(Engine *e, EngineVerb verb, Journal *j, HierarchyState *states, const PlanHierarchy *views,
                       const Plan *plan, ImageList *images, bool noexec, bool *ret_changed);
