/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Minimal TAP producer for the unit tests. */
static int tap_n = 0, tap_failed = 0;

#define CHECK(cond)                                                                          \
        do {                                                                                 \
                tap_n++;                                                                     \
                if (cond)                                                                    \
                        printf("ok %d - %s\n", tap_n, #cond);                                \
                else {                                                                       \
                        printf("not ok %d - %s (%s:%d)\n", tap_n, #cond, __FILE__, __LINE__); \
                        tap_failed++;                                                        \
                }                                                                            \
        } while (0)

#define CHECK_STREQ(a, b)                                                                     \
        do {                                                                                  \
                const char *_a = (a), *_b = (b);                                              \
                tap_n++;                                                                      \
                if (_a && _b && strcmp(_a, _b) == 0)                                          \
                        printf("ok %d - %s\n", tap_n, #a);                                    \
                else {                                                                        \
                        printf("not ok %d - %s: got \"%s\", want \"%s\" (%s:%d)\n", tap_n, #a, \
                               _a ? _a : "(null)", _b ? _b : "(null)", __FILE__, __LINE__);   \
                        tap_failed++;                                                         \
                }                                                                             \
        } while (0)

static inline int tap_finish(void) {
        printf("1..%d\n", tap_n);
        return tap_failed ? 1 : 0;
}
