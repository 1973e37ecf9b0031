/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The journal reader (state.json) and the tree record reader, on any bytes; what they accept
 * must survive a round trip. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "journal.h"
#include "tree.h"
#include "util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_free_ char *text = NULL, *again = NULL, *third = NULL;
        _cleanup_journal_ Journal j = {}, k = {};
        _cleanup_(tree_done) Tree t = {};

        text = strndup((const char *) data, size);
        if (!text)
                return 0;
        if (journal_from_json(text, &j) >= 0) {
                if (journal_to_json(&j, &again) < 0 || journal_from_json(again, &k) < 0 || journal_to_json(&k, &third) < 0)
                        abort();
                if (!streq(again, third))
                        abort();
        }
        if (tree_from_json_string(text, &t) >= 0) {
                _cleanup_free_ char *s = NULL;
                if (tree_to_json_string(&t, &s) < 0)
                        abort();
        }
        return 0;
}
