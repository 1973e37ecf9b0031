/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>

#include "engine.h"
#include "output.h"

/* The D-Bus side of the command line: the same verbs, answered by the daemon. */
int client_run(const char *verb, const char *root, const EngineOptions *o, const OutputOptions *out);
