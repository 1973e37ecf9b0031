/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <systemd/sd-bus.h>

#include "json-util.h"
#include "manager.h"

/* The bus interface, org.sysextd1(5) (bus-service.c): the object the daemon serves, the
 * replies to the calls it queued (from the worker's document) and the TreeChanged signal. */

int bus_service_register(Manager *m);
int bus_reply_transition(sd_bus_message *request, json_object *doc);
int bus_reply_list(sd_bus_message *request, json_object *doc);
int bus_reply_failure(sd_bus_message *request, json_object *doc, const char *fallback);
void bus_emit_tree_changed(Manager *m);
