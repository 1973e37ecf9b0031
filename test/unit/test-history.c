/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The journal entry of a transition (history.h): its MESSAGE_ID per kind and its fields. */
#include <stdlib.h>
#include <string.h>

#include "history.h"
#include "tests.h"
#include "util.h"

static const char *field(char **l, const char *key) {
        size_t n = strlen(key);

        for (char **f = l; f && *f; f++)
                if (strncmp(*f, key, n) == 0 && (*f)[n] == '=')
                        return *f + n + 1;
        return NULL;
}

static size_t count(char **l, const char *key) {
        size_t n = strlen(key), c = 0;

        for (char **f = l; f && *f; f++)
                c += strncmp(*f, key, n) == 0 && (*f)[n] == '=';
        return c;
}

int main(void) {
        Image imgs[3] = {
                { .name = (char *) "app", .path = (char *) "/var/lib/extensions/app.raw", .verdict = IMAGE_COMPATIBLE },
                { .name = (char *) "old", .path = (char *) "/var/lib/extensions/old.raw", .verdict = IMAGE_INCOMPATIBLE },
                { .name = (char *) "tools\n2", .path = (char *) "/run/extensions/tools\n2", .verdict = IMAGE_COMPATIBLE },
        };
        ImageList l = { .images = imgs, .n = 3 };
        const char *ids[_HISTORY_KIND_MAX];
        char **f = NULL;

        /* Five kinds, five distinct 128-bit ids in journalctl's form. */
        for (HistoryKind k = 0; k < _HISTORY_KIND_MAX; k++) {
                ids[k] = history_message_id(k);
                CHECK(ids[k] && strlen(ids[k]) == 32 && strspn(ids[k], "0123456789abcdef") == 32);
                for (HistoryKind o = 0; o < k; o++)
                        CHECK(strcmp(ids[k], ids[o]) != 0);
        }
        CHECK(!history_message_id(_HISTORY_KIND_MAX));
        CHECK(history_fields(_HISTORY_KIND_MAX, 1, "/", &l, false, &f) == -EINVAL);

        CHECK(history_fields(HISTORY_REFRESH, 7, "/", &l, false, &f) == 0);
        CHECK_STREQ(field(f, "MESSAGE_ID"), HISTORY_MESSAGE_ID_REFRESH);
        CHECK_STREQ(field(f, "SYSEXTD_VERB"), "refresh");
        CHECK_STREQ(field(f, "SYSEXTD_GENERATION"), "7");
        CHECK_STREQ(field(f, "SYSEXTD_ROOT"), "/");
        CHECK_STREQ(field(f, "SYSEXTD_DELAYED"), "0");
        CHECK_STREQ(field(f, "PRIORITY"), "6");
        /* Only the merged images; a newline in a name never reaches the journal raw. */
        CHECK_STREQ(field(f, "SYSEXTD_IMAGES"), "app tools\\x0a2");
        CHECK(count(f, "SYSEXTD_IMAGE") == 2);
        CHECK_STREQ(field(f, "SYSEXTD_IMAGE"), "app /var/lib/extensions/app.raw");
        CHECK_STREQ(field(f, "MESSAGE"), "Refreshed extensions under /: generation 7 with app tools\\x0a2.");
        for (char **p = f; p && *p; p++)
                CHECK(!strchr(*p, '\n'));
        strv_free(f);
        f = NULL;

        CHECK(history_fields(HISTORY_MERGE, 1, "/tmp/root", &l, true, &f) == 0);
        CHECK_STREQ(field(f, "MESSAGE_ID"), HISTORY_MESSAGE_ID_MERGE);
        CHECK_STREQ(field(f, "SYSEXTD_DELAYED"), "1");
        CHECK_STREQ(field(f, "SYSEXTD_ROOT"), "/tmp/root");
        CHECK(strstr(field(f, "MESSAGE"), "delayed"));
        strv_free(f);
        f = NULL;

        CHECK(history_fields(HISTORY_UNMERGE, 9, "/", NULL, false, &f) == 0);
        CHECK_STREQ(field(f, "MESSAGE_ID"), HISTORY_MESSAGE_ID_UNMERGE);
        CHECK_STREQ(field(f, "SYSEXTD_IMAGES"), "");
        CHECK(count(f, "SYSEXTD_IMAGE") == 0);
        CHECK_STREQ(field(f, "MESSAGE"), "Unmerged the extensions under / (generation 9).");
        strv_free(f);
        f = NULL;

        CHECK(history_fields(HISTORY_COMMIT, 4, "/", &l, false, &f) == 0);
        CHECK_STREQ(field(f, "MESSAGE_ID"), HISTORY_MESSAGE_ID_COMMIT);
        CHECK_STREQ(field(f, "SYSEXTD_VERB"), "commit");
        strv_free(f);
        f = NULL;

        CHECK(history_fields(HISTORY_ROLLBACK, 5, "/", &l, false, &f) == 0);
        CHECK_STREQ(field(f, "MESSAGE_ID"), HISTORY_MESSAGE_ID_ROLLBACK);
        CHECK_STREQ(field(f, "SYSEXTD_VERB"), "rollback");
        strv_free(f);
        return tap_finish();
}
