/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "manager.h"

/* FollowMachines= (machines.c has the design), in the bus process: every machine that
 * systemd-machined knows is followed, and forgotten when it goes. */

/* Subscribes to machined's signals and lists its machines; nothing when FollowMachines= is off
 * or the root is not the host's.  Asynchronous: never waits for machined. */
void machines_watch(Manager *m);
void machines_done(Manager *m);
