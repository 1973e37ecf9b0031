/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdint.h>

#include "image.h"

/* The update history in the system journal: one structured entry per transition that changed
 * what is live, with a MESSAGE_ID per kind, so that `journalctl MESSAGE_ID=…` lists a
 * machine's merges, refreshes, unmerges, rollbacks and delayed commits.  Fields (sysextd(8),
 * JOURNAL): SYSEXTD_VERB, SYSEXTD_GENERATION, SYSEXTD_ROOT, SYSEXTD_DELAYED (a transition that
 * waits for its commit), SYSEXTD_IMAGES (the merged images, "NAME" each, bottom to top,
 * space-separated) and one SYSEXTD_IMAGE per merged image ("NAME PATH").  Sent over journald's
 * native protocol (journal-send.h), so that a run in process needs no libsystemd; sending never
 * fails a transition. */
typedef enum HistoryKind {
        HISTORY_MERGE,
        HISTORY_REFRESH,
        HISTORY_UNMERGE,
        HISTORY_ROLLBACK,
        HISTORY_COMMIT, /* a delayed transition committed on the host */
        _HISTORY_KIND_MAX,
} HistoryKind;

#define HISTORY_MESSAGE_ID_MERGE "616a4a8c1bfe496390e35a295053c91e"
#define HISTORY_MESSAGE_ID_REFRESH "0a89d217eccc4447b65d40cf2c08122d"
#define HISTORY_MESSAGE_ID_UNMERGE "4bf710652f274fa791c053089297d0ec"
#define HISTORY_MESSAGE_ID_ROLLBACK "f4d6bcd0a396445f89791bedc100a8f3"
#define HISTORY_MESSAGE_ID_COMMIT "d9cca3544a7845289b5a7a43253aeed9"

const char *history_kind_to_string(HistoryKind k);
const char *history_message_id(HistoryKind k);

/* The fields of the entry ("KEY=value" each, MESSAGE= and PRIORITY= included), every value
 * made safe for the journal (string_safe()).  images: the journal's list; only the compatible
 * ones are merged.  delayed: the new trees wait beneath the old ones. */
int history_fields(HistoryKind k, uint64_t generation, const char *root, const ImageList *images, bool delayed,
                   char ***ret);

/* Sends it to the system journal; a failure is logged at debug level and otherwise ignored. */
void history_log(HistoryKind k, uint64_t generation, const char *root, const ImageList *images, bool delayed);
