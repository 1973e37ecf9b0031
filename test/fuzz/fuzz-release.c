/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The os-release / extension-release parser and the matching rules, on any bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "release.h"
#include "util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_free_ char *text = NULL, *reason = NULL;
        _cleanup_release_ Release rel = {}, host = {};

        text = strndup((const char *) data, size);
        if (!text)
                return 0;
        if (release_parse(text, &rel) < 0)
                return 0;
        if (release_parse("ID=debian\nVERSION_ID=12\nID_LIKE=\"ubuntu fedora\"\nSYSEXT_LEVEL=1.0\n", &host) < 0)
                abort();
        (void) release_match(&host, &rel, IMAGE_CLASS_SYSEXT, &reason);
        free(reason);
        reason = NULL;
        (void) release_match(&host, &rel, IMAGE_CLASS_CONFEXT, &reason);
        return 0;
}
