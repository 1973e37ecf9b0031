/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once


#include "dlopen-systemd.h"
#include "json-util.h"
#include "manager.h"

/* The bus interface, org.sysextd1(5) (bus-service.c): the object the daemon serves, the
 * replies to the calls it queued (from the worker's document), the TreeChanged signal and the
 * FollowFailed signals. */

int bus_service_register(Manager *m);
int bus_reply_transition(sd_bus_message *request, json_object *doc);
int bus_reply_list(sd_bus_message *request, json_object *doc);
int bus_reply_follow(sd_bus_message *request, json_object *doc);
int bus_reply_failure(sd_bus_message *request, json_object *doc, const char *fallback);
void bus_emit_tree_changed(Manager *m, const EngineStatus *s);
/* Drops the status the property getters share (Manager.status_snapshot). */
void manager_drop_status_snapshot(Manager *m);
/* FollowFailed for every followed namespace whose last update failed, as recorded now. */
void bus_emit_follow_failed(Manager *m);
/* ImageChanged for a live layer that changed under the live tree (layer-watch.h). */
void bus_emit_image_changed(Manager *m, const WatchChange *c);
