/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

/* The generation journal, run/sysextd/state.json under the root.
 *
 * It records what the last completed transition left live (per hierarchy: our overlay's id,
 * the extensions in it, since when), the images that were considered and their verdicts,
 * and, while a transition runs, a pending record written *before* the swap.  On the next
 * command or daemon start a pending record is resolved from what the mount table shows:
 * finished forward when the new tree is live, discarded when it is not. */

typedef struct JournalHierarchy {
        char *hierarchy;   /* "usr" */
        bool merged;
        char *id;          /* marker id of our overlay at the top, NULL when none */
        char **extensions; /* names, bottom to top */
        uint64_t since;    /* CLOCK_REALTIME usec of the transition that made it so */
} JournalHierarchy;

typedef struct JournalImage {
        char *name, *path, *kind, *verdict, *reason, *verity;
        bool signed_valid;
        uint64_t dev, ino, size, mtime_nsec, stamp;
} JournalImage;

typedef struct JournalTransition {
        char *hierarchy;
        char *old_id; /* NULL: nothing of ours was live */
        char *new_id; /* NULL: the transition removes our overlay */
        char **old_extensions; /* what was merged before, restored if the swap never happened */
        uint64_t old_since;
} JournalTransition;

typedef struct Journal {
        uint64_t generation;
        uint64_t config_stamp; /* policy and trusted certificates the images were judged by */
        JournalHierarchy *hierarchies;
        size_t n_hierarchies;
        JournalImage *images;
        size_t n_images;

        bool pending;
        uint64_t pending_generation;
        JournalTransition *transitions;
        size_t n_transitions;
} Journal;

#define JOURNAL_DIR "run/sysextd"
#define JOURNAL_FILE "run/sysextd/state.json"

void journal_done(Journal *j);
#define _cleanup_journal_ _cleanup_(journal_done)

int journal_from_json(const char *text, Journal *ret);
int journal_to_json(const Journal *j, char **ret);

/* Load from / save to the root (missing file: empty journal). Saving is atomic (rename).
 * An unreadable journal is moved to state.json.corrupt and an empty one returned, with 1. */
int journal_load(int root_fd, Journal *ret);
int journal_save(int root_fd, const Journal *j);

JournalHierarchy *journal_find_hierarchy(Journal *j, const char *hierarchy);
/* Adds an entry if missing. */
int journal_get_hierarchy(Journal *j, const char *hierarchy, JournalHierarchy **ret);
void journal_images_clear(Journal *j);
void journal_pending_clear(Journal *j);
