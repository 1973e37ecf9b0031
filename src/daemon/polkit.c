/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * polkit's CheckAuthorization (polkit.h), shared by the bus and the varlink interfaces: the
 * query, its answer, its cancellation.  The callers keep their own state and reply.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "log.h"
#include "polkit.h"
#include "util.h"

#define POLKIT_TIMEOUT_USEC (25ULL * 1000000ULL)
#define POLKIT_INTERACTIVE_TIMEOUT_USEC (120ULL * 1000000ULL)

uint64_t polkit_timeout_usec(bool interactive) {
#ifdef SYSEXTD_TEST_HOOKS
        /* Tests shorten both timeouts to this many seconds. */
        const char *e = getenv("SYSEXTD_TEST_POLKIT_TIMEOUT_SEC");
        char *end;
        unsigned long sec;

        if (e) {
                errno = 0;
                sec = strtoul(e, &end, 10);
                if (errno == 0 && end != e && *end == 0 && sec > 0 && sec < 3600)
                        return (uint64_t) sec * 1000000ULL;
        }
#endif
        return interactive ? POLKIT_INTERACTIVE_TIMEOUT_USEC : POLKIT_TIMEOUT_USEC;
}

static int append_subject(sd_bus_message *q, const PolkitSubject *s) {
        if (s->bus_name)
                return sd_bus_message_append(q, "(sa{sv})", "system-bus-name", 1, "name", "s", s->bus_name);
        return sd_bus_message_append(q, "(sa{sv})", "unix-process", 3, "pid", "u", (uint32_t) s->pid, "start-time", "t",
                                     s->start_time, "uid", "i", (int32_t) s->uid);
}

int polkit_check_new(sd_bus *bus, const PolkitSubject *subject, const char *action, char **details, bool interactive,
                     const char *cancellation_id, sd_bus_message **ret) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *q = NULL;
        int r;

        r = sd_bus_message_new_method_call(bus, &q, "org.freedesktop.PolicyKit1", "/org/freedesktop/PolicyKit1/Authority",
                                           "org.freedesktop.PolicyKit1.Authority", "CheckAuthorization");
        if (r >= 0)
                r = append_subject(q, subject);
        if (r >= 0)
                r = sd_bus_message_append(q, "s", action);
        if (r >= 0)
                r = sd_bus_message_open_container(q, 'a', "{ss}");
        for (char **d = details; r >= 0 && d && d[0] && d[1]; d += 2)
                r = sd_bus_message_append(q, "{ss}", d[0], d[1]);
        if (r >= 0)
                r = sd_bus_message_close_container(q);
        if (r >= 0)
                r = sd_bus_message_append(q, "us", (uint32_t) (interactive ? 1 : 0), cancellation_id);
        /* Without the activation of polkit being our problem: it is there or it is not. */
        if (r >= 0)
                r = sd_bus_message_set_auto_start(q, false);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(q);
        return 0;
}

int polkit_check_result(sd_bus_message *reply, bool *ret_authorized, bool *ret_challenge) {
        int authorized = 0, challenge = 0;

        if (sd_bus_message_enter_container(reply, 'r', "bba{ss}") < 0 ||
            sd_bus_message_read(reply, "bb", &authorized, &challenge) < 0)
                return -EBADMSG;
        *ret_authorized = authorized;
        *ret_challenge = challenge;
        return 0;
}

void polkit_cancel(sd_bus *bus, const char *cancellation_id) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *q = NULL;
        int r;

        if (!cancellation_id)
                return;
        r = sd_bus_message_new_method_call(bus, &q, "org.freedesktop.PolicyKit1", "/org/freedesktop/PolicyKit1/Authority",
                                           "org.freedesktop.PolicyKit1.Authority", "CancelCheckAuthorization");
        if (r >= 0)
                r = sd_bus_message_append(q, "s", cancellation_id);
        if (r >= 0)
                r = sd_bus_message_set_expect_reply(q, false);
        if (r >= 0)
                r = sd_bus_message_set_auto_start(q, false);
        if (r >= 0)
                r = sd_bus_send(bus, q, NULL);
        if (r < 0)
                log_debug_errno(r, "Failed to cancel the polkit query %s: %m", cancellation_id);
}

bool polkit_error_unavailable(const sd_bus_error *e) {
        return sd_bus_error_has_names(e, SD_BUS_ERROR_SERVICE_UNKNOWN, SD_BUS_ERROR_NAME_HAS_NO_OWNER,
                                      "org.freedesktop.DBus.Error.Spawn.ServiceNotFound");
}

int process_start_time(pid_t pid, uint64_t *ret) {
        _cleanup_fclose_ FILE *f = NULL;
        char path[64], buf[1024], *p;
        unsigned long long t;
        size_t n;

        snprintf(path, sizeof(path), "/proc/%i/stat", (int) pid);
        f = fopen(path, "re");
        if (!f)
                return -errno;
        n = fread(buf, 1, sizeof(buf) - 1, f);
        buf[n] = 0;
        /* The command name may hold anything, ')' too: fields start after the last ')'. */
        p = strrchr(buf, ')');
        if (!p)
                return -EBADMSG;
        p++;
        /* Field 3 (state) is the first after ")", so the start time (22) is the 20th. */
        for (int i = 0; i < 19; i++) {
                p = strchr(p + 1, ' ');
                if (!p)
                        return -EBADMSG;
        }
        if (sscanf(p, " %llu", &t) != 1)
                return -EBADMSG;
        *ret = t;
        return 0;
}
