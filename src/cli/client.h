/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>

#include "engine.h"
#include "output.h"

/* The D-Bus side of the command line: the same verbs, answered by the daemon (root's merge,
 * refresh and unmerge first try the daemon's own varlink interface: client-varlink.h).  pids: the
 * arguments of follow and unfollow (checked: positive decimal numbers); commit_pid and
 * commit_unit: commit's --pid= and --unit= (neither: every namespace). */
typedef struct ClientCommit {
        pid_t pid;
        const char *unit;
} ClientCommit;

int client_run(const char *verb, const char *root, char *const *pids, const ClientCommit *commit, const EngineOptions *o,
               const OutputOptions *out);
