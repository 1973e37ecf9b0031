/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "dlopen-systemd.h"
#include "json-util.h"
#include "manager.h"

/* How the unit jobs a transition queued end (unit-jobs.c has the design), in the bus process:
 * the UnitJobs property and the UnitJobsFinished signal. */

/* The service manager's JobRemoved signals are watched from the start (and the daemon
 * subscribes to them), so that no job's end is missed. */
void unit_jobs_watch(Manager *m);
void unit_jobs_take(Manager *m, json_object *jobs, uint64_t generation);
size_t unit_jobs_pending(const Manager *m);
void unit_jobs_done(Manager *m);
int bus_append_unit_jobs(sd_bus_message *reply, const Manager *m);
