/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <json-c/json.h>

#include "manager.h"

/* systemd's varlink interfaces served by the daemon (sysextd(8), VARLINK): io.systemd.sysext and
 * io.systemd.SysUpdate.Notify, on the sockets systemd passes (sysextd-varlink.socket), or, when
 * it passes none and the root is not "/", on sockets of the daemon's own below the root
 * (run/systemd/io.systemd.sysext, run/systemd/sysupdate/notify/io.systemd.sysext): the test
 * hook of a daemon on a throw-away root.  Merge, Refresh, Unmerge and OnCompletedUpdate are
 * authorized as the bus methods are (root, else polkit about the calling process) and run as
 * jobs of the daemon's queue; List as a listing job. */

/* Returns 0 (also when there is nothing to serve) or -errno. */
int varlink_service_start(Manager *m);
void varlink_service_stop(Manager *m);

/* Answers a varlink caller of a job that has ended (doc NULL: its worker died). */
void varlink_service_reply(Manager *m, const VarlinkRequest *req, JobType type, json_object *doc);
/* Answers it with io.systemd.System for -error. */
void varlink_service_fail(const VarlinkRequest *req, int error);
