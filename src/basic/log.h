/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <errno.h>
#include <stdbool.h>

#include "macro.h"

/* Logging for the command line and the daemon.  Helpers below src/core never log errors they
 * return: the caller that knows the context (image, path) logs once.  Every log_*() call
 * returns -abs(error) so that "return log_error_errno(r, ...)" works, and sets errno to the
 * error while formatting so that %m prints it. */

enum {
        LOG_LEVEL_ERR = 3,
        LOG_LEVEL_WARNING = 4,
        LOG_LEVEL_NOTICE = 5,
        LOG_LEVEL_INFO = 6,
        LOG_LEVEL_DEBUG = 7,
};

void log_set_max_level(int level);
int log_get_max_level(void);
void log_set_prefix(const char *prefix);

/* A sink that receives every message at or below the max level besides stderr (the daemon uses
 * it to collect the messages of a request and return them to the caller). */
typedef void (*log_sink_t)(int level, const char *message, void *userdata);
void log_set_sink(log_sink_t sink, void *userdata);

int log_internal(int level, int error, const char *file, int line, const char *format, ...) _printf_(5, 6);

#define log_full_errno(level, error, ...) log_internal((level), (error), __FILE__, __LINE__, __VA_ARGS__)

#define log_debug(...) log_full_errno(LOG_LEVEL_DEBUG, 0, __VA_ARGS__)
#define log_info(...) log_full_errno(LOG_LEVEL_INFO, 0, __VA_ARGS__)
#define log_notice(...) log_full_errno(LOG_LEVEL_NOTICE, 0, __VA_ARGS__)
#define log_warning(...) log_full_errno(LOG_LEVEL_WARNING, 0, __VA_ARGS__)
#define log_error(...) log_full_errno(LOG_LEVEL_ERR, 0, __VA_ARGS__)

#define log_debug_errno(e, ...) log_full_errno(LOG_LEVEL_DEBUG, (e), __VA_ARGS__)
#define log_info_errno(e, ...) log_full_errno(LOG_LEVEL_INFO, (e), __VA_ARGS__)
#define log_warning_errno(e, ...) log_full_errno(LOG_LEVEL_WARNING, (e), __VA_ARGS__)
#define log_error_errno(e, ...) log_full_errno(LOG_LEVEL_ERR, (e), __VA_ARGS__)

#define log_oom() log_error_errno(ENOMEM, "Out of memory.")
