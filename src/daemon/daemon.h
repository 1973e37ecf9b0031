/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "settings.h"
#include "engine.h"

/* Runs org.sysextd1 until idle or SIGTERM.  Takes the configuration. Returns 0 or -errno. */
int daemon_run(const char *root, EngineConfig *config, const DaemonConfig *dconfig);
