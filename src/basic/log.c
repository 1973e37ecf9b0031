/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

static int max_level = LOG_LEVEL_INFO;
static const char *prefix = NULL;
static log_sink_t sink = NULL;
static void *sink_userdata = NULL;

void log_set_max_level(int level) {
        max_level = level;
}

int log_get_max_level(void) {
        return max_level;
}

void log_set_prefix(const char *p) {
        prefix = p;
}

void log_set_sink(log_sink_t s, void *userdata) {
        sink = s;
        sink_userdata = userdata;
}

int log_internal(int level, int error, const char *file, int line, const char *format, ...) {
        int saved = errno;
        char buf[2048];
        va_list ap;

        error = abs(error);
        if (level > max_level)
                goto finish;

        errno = error;
        va_start(ap, format);
        (void) vsnprintf(buf, sizeof(buf), format, ap);
        va_end(ap);

        if (sink)
                sink(level, buf, sink_userdata);

        if (max_level >= LOG_LEVEL_DEBUG)
                fprintf(stderr, "%s%s(%s:%d) %s\n", prefix ?: "", prefix ? ": " : "", file, line, buf);
        else
                fprintf(stderr, "%s%s%s\n", prefix ?: "", prefix ? ": " : "", buf);

finish:
        errno = saved;
        return -error;
}
