/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The sysextd.conf parser and its validation, on any bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "settings.h"
#include "util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_free_ char *text = NULL, *msg = NULL;
        EngineConfig c = {};
        DaemonConfig d = {};

        text = strndup((const char *) data, size);
        if (!text)
                return 0;
        if (config_parse_string("fuzz.conf", text, &c, &d, &msg) >= 0)
                engine_config_done(&c);
        return 0;
}
