/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * vmtest-reader: measures the window a refresh opens on a file.
 *
 *   vmtest-reader FILE OUTFILE [INTERVAL_US]
 *
 * Reads FILE (open, read, close) in a loop, every INTERVAL_US microseconds (default 200),
 * and classifies each read by its first line: "v1", "v2", any other "vN" (an extension's
 * version: good),
 * "base" (the unextended base: a window), anything else or an error such as ENOENT (an
 * error, also a window).  A window is a run of bad reads between good ones; its length is
 * measured from the last good read before it to the first good read after it, so it is an
 * upper bound of how long the base was visible.
 *
 * Signals: SIGUSR1 resets the counters (start of a measurement), SIGUSR2 writes them to
 * OUTFILE (atomically, via OUTFILE.tmp), SIGTERM writes them and exits.  The line is
 *   reads=N v1=N v2=N vn=N base=N err=N windows=N window_ms=F max_window_ms=F last=WORD
 * (vn: reads of a version other than v1 and v2).
 * Built on the host by test/vm/run (statically when possible) and run inside the guest.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t want_reset, want_dump, want_exit;

static void on_signal(int sig) {
        if (sig == SIGUSR1)
                want_reset = 1;
        else if (sig == SIGUSR2)
                want_dump = 1;
        else
                want_exit = 1;
}

static double now_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

struct counts {
        unsigned long reads, v1, v2, vn, base, err, windows;
        double window_ms, max_window_ms;
};

static void dump(const char *out, const struct counts *c, const char *last) {
        char tmp[4096];
        FILE *f;

        snprintf(tmp, sizeof tmp, "%s.tmp", out);
        f = fopen(tmp, "we");
        if (!f)
                return;
        fprintf(f, "reads=%lu v1=%lu v2=%lu vn=%lu base=%lu err=%lu windows=%lu window_ms=%.3f max_window_ms=%.3f last=%s\n",
                c->reads, c->v1, c->v2, c->vn, c->base, c->err, c->windows, c->window_ms, c->max_window_ms, last);
        if (fclose(f) == 0)
                rename(tmp, out);
}

int main(int argc, char **argv) {
        struct counts c = {0};
        struct sigaction sa = {.sa_handler = on_signal};
        struct timespec pause = {0};
        const char *file, *out;
        char last[64] = "none";
        double last_good = -1, bad_since = -1;
        long interval_us = 200;

        if (argc < 3) {
                fprintf(stderr, "usage: %s FILE OUTFILE [INTERVAL_US]\n", argv[0]);
                return 2;
        }
        file = argv[1];
        out = argv[2];
        if (argc > 3)
                interval_us = strtol(argv[3], NULL, 10);
        pause.tv_sec = interval_us / 1000000;
        pause.tv_nsec = (interval_us % 1000000) * 1000;

        sigemptyset(&sa.sa_mask);
        sigaction(SIGUSR1, &sa, NULL);
        sigaction(SIGUSR2, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGINT, &sa, NULL);

        while (!want_exit) {
                char buf[64];
                ssize_t n = -1;
                int fd, good;
                double t;

                if (want_reset) {
                        want_reset = 0;
                        memset(&c, 0, sizeof c);
                        last_good = bad_since = -1;
                }
                if (want_dump) {
                        want_dump = 0;
                        dump(out, &c, last);
                }

                fd = open(file, O_RDONLY | O_CLOEXEC);
                if (fd >= 0) {
                        n = read(fd, buf, sizeof buf - 1);
                        close(fd);
                }
                t = now_ms();
                c.reads++;
                if (n <= 0) {
                        c.err++;
                        snprintf(last, sizeof last, "error:%d", n < 0 ? errno : 0);
                        good = 0;
                } else {
                        buf[n] = 0;
                        buf[strcspn(buf, "\n")] = 0;
                        snprintf(last, sizeof last, "%s", buf);
                        if (strcmp(buf, "v1") == 0) {
                                c.v1++;
                                good = 1;
                        } else if (strcmp(buf, "v2") == 0) {
                                c.v2++;
                                good = 1;
                        } else if (buf[0] == 'v' && buf[1] && strspn(buf + 1, "0123456789") == strlen(buf + 1)) {
                                c.vn++;
                                good = 1;
                        } else {
                                if (strcmp(buf, "base") == 0)
                                        c.base++;
                                else
                                        c.err++;
                                good = 0;
                        }
                }

                if (good) {
                        if (bad_since >= 0) {
                                double w = t - bad_since;
                                c.window_ms += w;
                                if (w > c.max_window_ms)
                                        c.max_window_ms = w;
                                bad_since = -1;
                        }
                        last_good = t;
                } else if (bad_since < 0) {
                        c.windows++;
                        bad_since = last_good >= 0 ? last_good : t;
                }

                if (interval_us > 0)
                        nanosleep(&pause, NULL);
        }
        dump(out, &c, last);
        return 0;
}
