/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "testhook.h"

void testhook_point(const char *name, long arg) {
        const char *want = getenv("SYSEXTD_TEST_HOOK"), *exec;
        char buf[32];

        if (!want || strcmp(want, name) != 0)
                return;

        exec = getenv("SYSEXTD_TEST_HOOK_EXEC");
        if (!exec) {
                fprintf(stderr, "test hook %s: killing myself\n", name);
                raise(SIGKILL);
                return;
        }
        snprintf(buf, sizeof(buf), "%ld", arg);
        setenv("SYSEXTD_TEST_HOOK_ARG", buf, 1);
        if (system(exec) != 0)
                fprintf(stderr, "test hook %s: '%s' failed\n", name, exec);
}
