/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>

#include "engine.h"
#include "output.h"

/* The D-Bus side of the command line: the same verbs, answered by the daemon.  pids: the
 * arguments of follow and unfollow (checked: positive decimal numbers). */
int client_run(const char *verb, const char *root, char *const *pids, const EngineOptions *o, const OutputOptions *out);
