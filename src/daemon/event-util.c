/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <time.h>

#include "event-util.h"

int event_arm_after(sd_event *e, sd_event_source **s, uint64_t usec, sd_event_time_handler_t handler, void *userdata) {
        int r;

        if (!*s)
                r = sd_event_add_time_relative(e, s, CLOCK_MONOTONIC, usec, 0, handler, userdata);
        else
                r = sd_event_source_set_time_relative(*s, usec);
        return r < 0 ? r : sd_event_source_set_enabled(*s, SD_EVENT_ONESHOT);
}
