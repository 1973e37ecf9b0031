/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "dlopen-systemd.h"

/* Asking polkit over the system bus (org.freedesktop.PolicyKit1.Authority), for the bus
 * interface (bus-service.c) and the varlink one (varlink-service.c) alike. */

/* Who asks: a bus client by its unique name, or (bus_name NULL) a process, as varlink knows it
 * from its socket: its PID, that process's start time (so that polkit can tell a reused PID) and
 * its uid. */
typedef struct PolkitSubject {
        const char *bus_name;
        pid_t pid;
        uint64_t start_time;
        uid_t uid;
} PolkitSubject;

/* How long polkit may take (25 s, interactively 120 s; tests shorten both with
 * $SYSEXTD_TEST_POLKIT_TIMEOUT_SEC in a build with test hooks). */
uint64_t polkit_timeout_usec(bool interactive);

/* CheckAuthorization(subject, action, details (key, value, ... NULL), flags, cancellation id),
 * without activating polkit. */
int polkit_check_new(sd_bus *bus, const PolkitSubject *subject, const char *action, char **details, bool interactive,
                     const char *cancellation_id, sd_bus_message **ret);

/* Reads its answer (not an error reply): is_authorized, is_challenge.  -EBADMSG when unreadable. */
int polkit_check_result(sd_bus_message *reply, bool *ret_authorized, bool *ret_challenge);

/* CancelCheckAuthorization: polkit takes down an agent's dialog.  Nothing waits for it. */
void polkit_cancel(sd_bus *bus, const char *cancellation_id);

/* Whether an error reply means that polkit is not there to ask. */
bool polkit_error_unavailable(const sd_bus_error *e);

/* The start time of process pid (field 22 of /proc/PID/stat, in clock ticks since boot), as
 * polkit's unix-process subject wants it. */
int process_start_time(pid_t pid, uint64_t *ret);
