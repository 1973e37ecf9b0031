/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "generation.h"
#include "image.h"
#include "tree.h"

/* The generation journal: run/sysextd/ under the root.
 *
 *   state.json      what the last completed transition left live: the generation, per
 *                   hierarchy the tree that is (or should be) its top, the images that were
 *                   considered with their verdicts, the mount namespace all of it refers to,
 *                   and, while a transition runs, the pending record written before the swap;
 *                   a delayed transition (sysextd(8), DELAYED UPDATES) keeps its pending
 *                   record, with when the delay began and when it ends, until it is committed;
 *                   It also keeps the pins of the last rollback, a refresh waiting for
 *                   confirmation (sysextd confirm) with its deadline, and the last rollback
 *                   with what caused it (sysextd(8), ROLLBACK); all optional, so that a file
 *                   written before them loads with none;
 *   generations/N.json the history (generation.h): generation N as it went live, for the last
 *                   Generations= generations.  Each is the state.json that the commit of N
 *                   wrote, kept as a hard link made before that file is renamed into place
 *                   (journal_save_recording(): no moment has state.json naming a generation
 *                   the history lacks; state.json is replaced by rename, never rewritten in
 *                   place), so recording a generation costs a link and an unlink, whatever the
 *                   number of images: state.json carries the generation's "when" and
 *                   "mutable" modes for this, and only its compatible images count.  Read
 *                   only by what needs it (rollback, the listing of generations).  Files
 *                   newer than state.json's generation (a state.json started afresh) are
 *                   ignored and removed by the next record; one that fails validation is
 *                   left out, and moved to N.json.corrupt by the next holder of the lock
 *                   that reads or records the history.  The history of an earlier version,
 *                   in generations.json or as "generations" in state.json, is read where it
 *                   is and moved here the same way (a reader without the lock writes
 *                   nothing);
 *   trees/ID.json   one record per tree sysextd attached and has not detached (tree.h): the
 *                   identity that proves a mount is ours.
 *
 * Everything read back is validated (types, ranges, lengths); a state.json that fails is
 * moved to state.json.corrupt with a warning and a new one started, so no content can crash
 * sysextd or lock everyone out.  The tree records survive that, and with them the proof of
 * what is ours. */

typedef struct JournalHierarchy {
        char *hierarchy; /* "usr" */
        char *tree;      /* id of the tree that should be the top, NULL: nothing of ours */
} JournalHierarchy;

typedef struct JournalTransition {
        char *hierarchy;
        char *old_tree; /* NULL: nothing of ours was live */
        char *new_tree; /* NULL: the transition removes our tree */
} JournalTransition;

typedef struct Journal {
        uint64_t generation;
        uint64_t config_stamp; /* policy and trusted certificates the images were judged by */
        uint64_t mount_ns;     /* inode of the mount namespace the trees live in; 0: none yet */
        bool incomplete;       /* an interrupted transition was finished for some hierarchies only */
        bool forced;           /* the trees were built with --force (incompatible images merged) */
        /* When the generation went live (CLOCK_REALTIME µs) and the MutableMode of each class's
         * trees: what generations/N.json, a link of this file, needs.  0 and "no": not known
         * (a state.json written before they were recorded). */
        uint64_t when;
        int mutable[_IMAGE_CLASS_MAX];
        JournalHierarchy *hierarchies;
        size_t n_hierarchies;
        ImageList images;

        bool pending;
        uint64_t pending_generation;
        /* A delayed transition: the new trees wait beneath the old tops until it is committed
         * (CLOCK_REALTIME µs); 0 and 0: not delayed.  Optional in state.json: a file written
         * before delays existed loads as not delayed. */
        uint64_t delayed_since;
        uint64_t delay_deadline;
        JournalTransition *transitions;
        size_t n_transitions;

        TreeList trees; /* from trees/ */

        /* History and rollback (generation.h, sysextd(8) ROLLBACK).  Optional in state.json. */
        Generation *generations; /* oldest first; generations/ */
        size_t n_generations;
        bool generations_loaded; /* generations holds the history (journal_load_generations()) */
        bool generations_dirty;  /* it came from an earlier version's state.json: the next
                                  * journal_save() moves it to generations/ */
        PinList pins;
        /* A refresh with --confirm-within=: the generation waiting, since when and until when
         * (CLOCK_REALTIME µs), and the generation a passed deadline rolls back to; 0: none. */
        uint64_t confirm_generation, confirm_since, confirm_deadline, confirm_target;
        /* The last rollback: when, from and to which generation, why ("command", "deadline"),
         * and, when a deadline's rollback failed, why it did (NULL otherwise).  0: none yet. */
        uint64_t rollback_when, rollback_from, rollback_to;
        char *rollback_reason;
        char *rollback_error;
} Journal;

#define JOURNAL_DIR "run/sysextd"
#define JOURNAL_STATE "state.json"
#define JOURNAL_GENERATIONS "generations"
#define JOURNAL_GENERATIONS_LEGACY "generations.json"
#define JOURNAL_VERSION 2
/* The longest delay a transition may have (a year): --delay= and Delay= are checked against it,
 * and a state.json that says more is not sysextd's. */
#define JOURNAL_DELAY_MAX_USEC (365ULL * 86400ULL * 1000000ULL)
/* Generations= and --confirm-within= are checked against these, as is state.json. */
#define JOURNAL_GENERATIONS_MAX 64
#define JOURNAL_CONFIRM_MAX_USEC JOURNAL_DELAY_MAX_USEC

void journal_done(Journal *j);
#define _cleanup_journal_ _cleanup_(journal_done)

int journal_from_json(const char *text, Journal *ret);
int journal_to_json(const Journal *j, char **ret);
/* An earlier version's generations.json: the history into j, which holds state.json's fields
 * (entries newer than its generation are dropped); and the history of j in that form. */
int journal_generations_from_json(const char *text, Journal *j);
int journal_generations_to_json(const Journal *j, char **ret);

/* Opens (creating it if asked) run/sysextd below the root, resolved inside the root. */
int journal_dir_open(int root_fd, bool create, int *ret_fd);

/* A copy of what state.json holds of from: not the tree records, not the history. */
int journal_copy(const Journal *from, Journal *ret);

/* The last state.json parsed, known by its size and a 64-bit FNV-1a hash of its bytes: a
 * load reads the file (microseconds) and parses it (a millisecond with 50 images) only when
 * those differ. */
typedef struct JournalCache {
        bool valid;
        size_t size;
        uint64_t stamp;
        Journal journal;
} JournalCache;
void journal_cache_done(JournalCache *c);
/* Fills cache from state.json in the journal directory of root_fd (nothing is created), for a
 * later journal_load_cached(), which uses it only when the bytes it reads under the lock are
 * the same: parsing (0.3-0.7 ms for 50 images) can be done without the lock, while something
 * else is waited for.  Nothing is written; a file missing, unreadable or invalid leaves the
 * cache empty for the load to meet. */
void journal_cache_prefetch(int root_fd, JournalCache *cache);

/* Loads state.json and the tree records from the journal directory fd (missing: empty).
 * Returns 1 when state.json failed validation and was moved aside, 0 otherwise;
 * *ret_n_corrupt_trees counts tree records that were moved aside. */
int journal_load(int dir_fd, Journal *ret, unsigned *ret_n_corrupt_trees);
/* The same, parsing state.json only when its bytes are not the ones cache holds (then cache
 * holds it after).  The tree records are always read. */
int journal_load_cached(int dir_fd, JournalCache *cache, Journal *ret, unsigned *ret_n_corrupt_trees);
/* Loads the history (generations/) into j (loaded by journal_load()) unless it is there
 * already.  writable (the caller holds the lock): an earlier version's history is moved there
 * first, and a file that fails validation is moved aside (N.json.corrupt); otherwise nothing
 * is written: the earlier version's history is read where it is, and a bad file is left for
 * the next transition.  Returns how many files failed (that part of the history is not
 * there), or a negative errno. */
int journal_load_generations(int dir_fd, Journal *j, bool writable);
/* Saves state.json atomically (tree records are saved one by one with tree_save()), after
 * moving a history that came with it from an earlier version to generations/. */
int journal_save(int dir_fd, Journal *j);

JournalHierarchy *journal_find_hierarchy(Journal *j, const char *hierarchy);
/* Sets the tree of a hierarchy (adding the entry when missing); tree may be NULL. */
int journal_set_tree(Journal *j, const char *hierarchy, const char *tree);

/* journal_save() that records j's generation in the history too, keeping the newest keep
 * (0: no record), without a moment where state.json says a generation its record is missing
 * for: generations/N.json is linked to the new state.json before that is renamed into place.
 * Returns < 0 when state.json was not saved; a record that failed (state.json saved all the
 * same) is *ret_record_error. */
int journal_save_recording(int dir_fd, Journal *j, unsigned keep, int *ret_record_error);
void journal_confirm_clear(Journal *j);
/* Records the last rollback (error may be NULL). */
int journal_set_rollback(Journal *j, uint64_t when, uint64_t from, uint64_t to, const char *reason, const char *error);

void journal_pending_clear(Journal *j);
/* Whether the pending record is of a delayed transition. */
static inline bool journal_delayed(const Journal *j) {
        return j->pending && j->delay_deadline > 0;
}
int journal_add_transition(Journal *j, const char *hierarchy, const char *old_tree, const char *new_tree);
void journal_drop_transition(Journal *j, size_t i);
void journal_drop_transition_of(Journal *j, const char *hierarchy);
