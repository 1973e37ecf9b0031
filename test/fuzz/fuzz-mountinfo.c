/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The mountinfo parser (mounts.c) on any bytes: a table it accepts has every field of every
 * row, each row is found by its id, and nothing it reads lies outside the text. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mounts.h"
#include "util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_(mount_table_done) MountTable t = {};
        char *text = strndup((const char *) data, size);

        if (!text)
                return 0;
        if (mount_table_parse(text, &t) < 0) {
                free(text);
                return 0;
        }
        for (size_t i = 0; i < t.n; i++) {
                const MountRow *m = &t.rows[i];

                if (!m->root || !m->target || !m->optional || !m->fstype || !m->source || !m->super_options)
                        abort();
                if (strlen(m->root) + strlen(m->target) + strlen(m->fstype) + strlen(m->source) > size)
                        abort();
                if (!mount_table_find(&t, m->id))
                        abort();
        }
        return 0;
}
