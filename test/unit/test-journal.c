/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "journal.h"
#include "tests.h"
#include "util.h"

int main(void) {
        _cleanup_journal_ Journal j = {}, k = {};
        _cleanup_free_ char *text = NULL, *text2 = NULL;
        JournalHierarchy *h;

        j.generation = 7;
        CHECK(journal_get_hierarchy(&j, "usr", &h) == 0);
        h->merged = true;
        h->id = strdup("00ff");
        h->since = 1234567;
        CHECK(strv_extend(&h->extensions, "a") == 0);
        CHECK(journal_get_hierarchy(&j, "usr", &h) == 0 && j.n_hierarchies == 1);

        j.images = calloc(1, sizeof(JournalImage));
        j.images[0] = (JournalImage) { .name = strdup("a"), .path = strdup("/var/lib/extensions/a.raw"),
                                       .kind = strdup("erofs"), .verdict = strdup("compatible"), .dev = 1, .ino = 2,
                                       .size = 4096, .mtime_nsec = 99 };
        j.n_images = 1;

        j.pending = true;
        j.pending_generation = 8;
        j.transitions = calloc(1, sizeof(JournalTransition));
        j.transitions[0] = (JournalTransition) { .hierarchy = strdup("usr"), .old_id = strdup("00ff"),
                                                 .new_id = strdup("11ee"), .old_since = 5 };
        CHECK(strv_extend(&j.transitions[0].old_extensions, "a") == 0);
        j.n_transitions = 1;

        CHECK(journal_to_json(&j, &text) == 0);
        CHECK(journal_from_json(text, &k) == 0);
        CHECK(k.generation == 7);
        CHECK(k.n_hierarchies == 1 && k.hierarchies[0].merged && k.hierarchies[0].since == 1234567);
        CHECK_STREQ(k.hierarchies[0].id, "00ff");
        CHECK(strv_length(k.hierarchies[0].extensions) == 1);
        CHECK(k.n_images == 1 && k.images[0].size == 4096 && k.images[0].mtime_nsec == 99);
        CHECK_STREQ(k.images[0].kind, "erofs");
        CHECK(k.pending && k.pending_generation == 8 && k.n_transitions == 1);
        CHECK_STREQ(k.transitions[0].new_id, "11ee");
        CHECK(k.transitions[0].old_since == 5 && strv_length(k.transitions[0].old_extensions) == 1);
        /* Round trip is stable. */
        CHECK(journal_to_json(&k, &text2) == 0);
        CHECK_STREQ(text2, text);

        journal_pending_clear(&k);
        CHECK(!k.pending && k.n_transitions == 0);

        CHECK(journal_from_json("not json", &k) < 0);
        CHECK(journal_from_json("{\"hierarchies\":[{\"merged\":true}]}", &k) < 0);
        return tap_finish();
}
