/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bench-status N — GetStatus() latency of the daemon, for tools/bench: N calls of
 * org.sysextd1.Manager.GetStatus over the system bus ($DBUS_SYSTEM_BUS_ADDRESS) from one
 * connection, one after the other, each timed from the send to the parsed reply.  Prints
 * "p50 p99 max" in microseconds.  A C sd-bus client: busctl's own start and parsing would be
 * most of what a shell loop measures.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-bus.h>
#include <time.h>

static uint64_t now_us(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000ULL + (uint64_t) ts.tv_nsec / 1000;
}

static int cmp(const void *a, const void *b) {
        uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;

        return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
        sd_bus *bus = NULL;
        uint64_t *t;
        long n;
        int r;

        if (argc != 2 || (n = strtol(argv[1], NULL, 10)) <= 0 || n > 1000000) {
                fprintf(stderr, "usage: %s N\n", argv[0]);
                return 2;
        }
        t = calloc((size_t) n, sizeof(uint64_t));
        if (!t)
                return 1;
        r = sd_bus_open_system(&bus);
        if (r < 0) {
                fprintf(stderr, "bench-status: cannot connect to the system bus: %s\n", strerror(-r));
                return 1;
        }
        for (long i = 0; i < n; i++) {
                sd_bus_error error = SD_BUS_ERROR_NULL;
                sd_bus_message *reply = NULL;
                uint64_t t0 = now_us();

                r = sd_bus_call_method(bus, "org.sysextd1", "/org/sysextd1", "org.sysextd1.Manager", "GetStatus", &error,
                                       &reply, NULL);
                if (r < 0) {
                        fprintf(stderr, "bench-status: GetStatus: %s\n", error.message ?: strerror(-r));
                        return 1;
                }
                /* The reply is read to its end, as a client that prints it would. */
                while ((r = sd_bus_message_skip(reply, NULL)) > 0)
                        ;
                t[i] = now_us() - t0;
                sd_bus_message_unref(reply);
                sd_bus_error_free(&error);
        }
        qsort(t, (size_t) n, sizeof(uint64_t), cmp);
        printf("%llu %llu %llu\n", (unsigned long long) t[(n - 1) / 2], (unsigned long long) t[(n * 99 + 99) / 100 - 1],
               (unsigned long long) t[n - 1]);
        sd_bus_flush_close_unref(bus);
        free(t);
        return 0;
}
