/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdint.h>

#include "engine.h"

/* sysextd.conf(5): INI, parsed with libinih. */

typedef struct DaemonConfig {
        uint64_t idle_timeout_usec; /* 0: never exit when idle */
} DaemonConfig;

/* Reads 'path', or ROOT/etc/sysextd/sysextd.conf when path is NULL (a missing default file
 * means defaults).  Fills the engine's configuration (starting from the defaults) and the
 * daemon's.  On a bad line returns -EINVAL with *ret_message naming file, line and key. */
int config_load(const char *root, const char *path, EngineConfig *ret, DaemonConfig *ret_daemon, char **ret_message);

#define CONFIG_DEFAULT_PATH "etc/sysextd/sysextd.conf"
#define CONFIG_DEFAULT_IDLE_TIMEOUT_USEC (30ULL * 1000000ULL)
