/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "history.h"
#include "journal-send.h"
#include "log.h"
#include "util.h"

static const char *const kind_table[_HISTORY_KIND_MAX] = {
        [HISTORY_MERGE] = "merge",     [HISTORY_REFRESH] = "refresh", [HISTORY_UNMERGE] = "unmerge",
        [HISTORY_ROLLBACK] = "rollback", [HISTORY_COMMIT] = "commit",
};

static const char *const id_table[_HISTORY_KIND_MAX] = {
        [HISTORY_MERGE] = HISTORY_MESSAGE_ID_MERGE,       [HISTORY_REFRESH] = HISTORY_MESSAGE_ID_REFRESH,
        [HISTORY_UNMERGE] = HISTORY_MESSAGE_ID_UNMERGE,   [HISTORY_ROLLBACK] = HISTORY_MESSAGE_ID_ROLLBACK,
        [HISTORY_COMMIT] = HISTORY_MESSAGE_ID_COMMIT,
};

const char *history_kind_to_string(HistoryKind k) {
        return k >= 0 && k < _HISTORY_KIND_MAX ? kind_table[k] : NULL;
}

const char *history_message_id(HistoryKind k) {
        return k >= 0 && k < _HISTORY_KIND_MAX ? id_table[k] : NULL;
}

/* Appends "KEY=value" with value made safe; takes nothing. */
static int add(char ***l, const char *key, const char *value) {
        _cleanup_free_ char *buf = NULL;
        const char *safe = string_safe(value, &buf);
        char *f;

        if (!safe || asprintf(&f, "%s=%s", key, safe) < 0)
                return -ENOMEM;
        return strv_push(l, f);
}

int history_fields(HistoryKind k, uint64_t generation, const char *root, const ImageList *images, bool delayed,
                   char ***ret) {
        _cleanup_strv_free_ char **l = NULL, **names = NULL;
        _cleanup_free_ char *joined = NULL, *message = NULL, *gen = NULL;
        int r;

        if (k < 0 || k >= _HISTORY_KIND_MAX)
                return -EINVAL;
        for (size_t i = 0; images && i < images->n; i++)
                if (images->images[i].verdict == IMAGE_COMPATIBLE && strv_extend(&names, images->images[i].name) < 0)
                        return -ENOMEM;
        joined = names ? strv_join(names, " ") : strdup("");
        if (!joined || asprintf(&gen, "%" PRIu64, generation) < 0)
                return -ENOMEM;
        switch (k) {
        case HISTORY_UNMERGE:
                r = asprintf(&message, "Unmerged the extensions under %s (generation %" PRIu64 ").", root, generation);
                break;
        case HISTORY_COMMIT:
                r = asprintf(&message, "Committed the delayed transition of generation %" PRIu64 " under %s: %s.",
                             generation, root, names ? joined : "no extensions");
                break;
        default:
                r = asprintf(&message, "%s%s under %s: generation %" PRIu64 " with %s%s.",
                             k == HISTORY_MERGE ? "Merged" : k == HISTORY_REFRESH ? "Refreshed" : "Rolled back",
                             k == HISTORY_ROLLBACK ? " the extensions" : " extensions", root, generation,
                             names ? joined : "no extensions", delayed ? " (delayed: every namespace keeps the previous trees until it commits)" : "");
                break;
        }
        if (r < 0)
                return -ENOMEM;
        if (add(&l, "MESSAGE_ID", history_message_id(k)) < 0 || add(&l, "MESSAGE", message) < 0 ||
            add(&l, "PRIORITY", "6") < 0 || add(&l, "SYSEXTD_VERB", history_kind_to_string(k)) < 0 ||
            add(&l, "SYSEXTD_GENERATION", gen) < 0 || add(&l, "SYSEXTD_ROOT", root) < 0 ||
            add(&l, "SYSEXTD_DELAYED", delayed ? "1" : "0") < 0 || add(&l, "SYSEXTD_IMAGES", joined) < 0)
                return -ENOMEM;
        for (size_t i = 0; images && i < images->n; i++) {
                _cleanup_free_ char *v = NULL;
                const Image *img = &images->images[i];

                if (img->verdict != IMAGE_COMPATIBLE)
                        continue;
                if (asprintf(&v, "%s %s", img->name, img->path) < 0 || add(&l, "SYSEXTD_IMAGE", v) < 0)
                        return -ENOMEM;
        }
        *ret = TAKE_PTR(l);
        return 0;
}

void history_log(HistoryKind k, uint64_t generation, const char *root, const ImageList *images, bool delayed) {
        _cleanup_strv_free_ char **fields = NULL;
        int r;

        r = history_fields(k, generation, root, images, delayed, &fields);
        if (r < 0) {
                log_debug("Cannot build the journal entry of generation %" PRIu64 ": %s", generation, strerror(-r));
                return;
        }
        r = journal_send_to(JOURNAL_SOCKET, (const char *const *) fields);
        if (r < 0)
                log_debug("Cannot write the journal entry of generation %" PRIu64 ": %s", generation, strerror(-r));
}
