/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "engine.h"
#include "image.h"

/* sysextd.conf(5): systemd-style INI, parsed here (settings.c). */

typedef struct DaemonConfig {
        uint64_t idle_timeout_usec; /* 0: never exit when idle */
        bool follow_machines;       /* FollowMachines=: follow every machine systemd-machined knows */
        bool refresh_on_change;     /* OnImageChange=refresh: a live layer that changed is refreshed
                                     * by the daemon (else: report) */
} DaemonConfig;

/* Reads 'path', or etc/sysextd/sysextd.conf below root_fd when path is NULL (a missing default
 * file means defaults; root, the root's path, for messages).  Fills the engine's configuration
 * (starting from the defaults) and the daemon's, then validates it (config_validate()).  On a
 * bad line returns -EINVAL with *ret_message naming file, line and key. */
int config_load(int root_fd, const char *root, const char *path, EngineConfig *ret, DaemonConfig *ret_daemon,
                char **ret_message);

/* The same for a text in memory ('name' for messages). */
int config_parse_string(const char *name, const char *text, EngineConfig *ret, DaemonConfig *ret_daemon,
                        char **ret_message);

/* Refuses what cannot work: no hierarchy, the root itself or sysextd's runtime directory as a
 * hierarchy, one inside another, one listed twice, more than HIERARCHIES_MAX. */
int config_validate(const EngineConfig *c, char **ret_message);

/* systemd-sysext's environment, over the configuration: $SYSTEMD_SYSEXT_HIERARCHIES and
 * $SYSTEMD_CONFEXT_HIERARCHIES (an invalid one is an error), $SYSTEMD_SYSEXT_MUTABLE_MODE and
 * $SYSTEMD_CONFEXT_MUTABLE_MODE (an invalid one is ignored, with a warning), and
 * $SYSTEMD_SYSEXT_OVERLAYFS_MOUNT_OPTIONS / $SYSTEMD_CONFEXT_OVERLAYFS_MOUNT_OPTIONS.  Then
 * validates the result. */
int config_apply_environment(EngineConfig *c, char **ret_message);

#define CONFIG_DEFAULT_PATH "etc/sysextd/sysextd.conf"
#define CONFIG_DEFAULT_IDLE_TIMEOUT_USEC (30ULL * 1000000ULL)
