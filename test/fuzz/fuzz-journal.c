/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The journal readers (state.json, an earlier version's generations.json) and the tree record reader, on any bytes;
 * what they accept must survive a round trip. */
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
        /* The same bytes as generations.json, read into the journal above (or an empty one). */
        {
                _cleanup_journal_ Journal g = { .generation = j.generation ?: UINT64_MAX }, h = { .generation = UINT64_MAX };
                _cleanup_free_ char *s1 = NULL, *s2 = NULL;

                if (journal_generations_from_json(text, &g) >= 0) {
                        if (journal_generations_to_json(&g, &s1) < 0 || journal_generations_from_json(s1, &h) < 0 ||
                            journal_generations_to_json(&h, &s2) < 0 || !streq(s1, s2))
                                abort();
                }
        }
        if (tree_from_json_string(text, &t) >= 0) {
                _cleanup_free_ char *s = NULL;
                if (tree_to_json_string(&t, &s) < 0)
                        abort();
        }
        return 0;
}
