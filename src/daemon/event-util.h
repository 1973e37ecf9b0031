/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdint.h>

#include "dlopen-systemd.h"

/* Arms the one-shot monotonic timer *s to call handler usec from now, made on first use and
 * moved on by later calls: the idle exit, the heap's trim, the watch's debounce. */
int event_arm_after(sd_event *e, sd_event_source **s, uint64_t usec, sd_event_time_handler_t handler, void *userdata);
