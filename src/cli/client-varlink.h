/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "engine.h"
#include "output.h"

/* merge, refresh and unmerge for root, through the daemon's own varlink interface
 * (org.sysextd1.Manager, varlink-sysext.h) on its socket below the root: one hop to the daemon,
 * no dbus-daemon between, and no libsystemd loaded.  The same answer as over the bus; the bus
 * is used for every other verb and caller, and whenever this cannot be. */

/* Whether a call can go this way: one of those verbs, by root, with no option the interface does
 * not take (an image policy, a delay, confirm-within, a mutable mode). */
bool client_varlink_usable(const char *verb, uid_t euid, const EngineOptions *o);

/* Sends the call to the daemon serving root (canonical) and prints its answer as the bus
 * client does.  *ret_answered is false when no sysextd listens there for it (no socket, one not
 * owned by root, nobody accepting or a full backlog, a server that does not know the interface,
 * or one that went before it read the call): nothing was run and the caller uses the bus.  Once
 * the call may have run (the server read it), it is never sent again: returns 0, or < 0 after
 * saying why (also for a daemon that closed without answering). */
int client_varlink_transition(const char *root, const char *verb, const EngineOptions *o, const OutputOptions *out,
                              bool *ret_answered);
