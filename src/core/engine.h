/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "delay.h"
#include "fd-util.h"
#include "follow.h"
#include "image.h"
#include "base.h"
#include "journal.h"
#include "layers.h"
#include "mutable.h"
#include "namespaces.h"
#include "transition.h"
#include "units.h"
#include "watch.h"

/* The engine: merge, refresh, unmerge, list and status on one root.  The CLI verb and the
 * D-Bus method call the same functions.  Functions log what they do; a failure is logged once
 * and its message is also kept in the result for the bus (the verbs, the result and its error
 * kinds are transition.h's, shared with the steps below the engine). */

/* What one class of extensions (sysext, confext) merges from where, and how. */
typedef struct ClassConfig {
        char **search_dirs; /* relative to the root: "etc/extensions", ... */
        char **hierarchies; /* relative to the root: "usr", "opt" */
        bool noexec;        /* sysext: no; confext: yes */
        MutableMode mutable;
        char *overlay_options; /* $SYSTEMD_SYSEXT_OVERLAYFS_MOUNT_OPTIONS; NULL: the defaults */
        int policy;            /* ImagePolicy= of systemd's sysext.conf/confext.conf; < 0: EngineConfig's */
} ClassConfig;

typedef struct EngineConfig {
        ClassConfig classes[_IMAGE_CLASS_MAX];
        ImagePolicy policy;
        char *trusted_dir;   /* relative to the root: "etc/verity.d" */
        bool strict;         /* a refused image fails the whole transition */
        bool allow_degraded; /* no MOVE_MOUNT_BENEATH: accept unmount-then-mount */
        uint64_t delay_usec; /* Delay=: how long a transition waits for namespaces to commit; 0: none */
        unsigned generations; /* Generations=: how many the journal keeps for rollback */
} EngineConfig;

#define ENGINE_GENERATIONS_DEFAULT 3

int engine_config_default(EngineConfig *ret);
void engine_config_done(EngineConfig *c);

typedef struct Engine {
        char *root; /* absolute, canonical; "/" for the host */
        int root_fd;
        int lock_fd;
        int journal_fd; /* run/sysextd, while the lock is held */
        EngineConfig config;
        /* Every class's hierarchies in one list, sysext first: one transaction covers them. */
        char **hierarchies;
        ImageClass hierarchy_class[HIERARCHIES_MAX * _IMAGE_CLASS_MAX];

        EngineResult result; /* of the last call */

        /* Images probed by earlier transitions, still mounted (detached), reused when the
         * file is the same (path and identity) instead of being attached and mounted again.
         * Borrowed; the daemon keeps it.  Used only where detached mounts can be overlay
         * layers (Linux 6.15), since only then does building a tree leave them reusable. */
        const ImageList *cache;
        /* After a successful transition that probed images: the compatible ones that went
         * into the tree, with their mounts: the next cache.  probed_valid says it is set. */
        ImageList probed;
        bool probed_valid;

        /* What the service manager was asked after the last transition (units.h): the jobs
         * queued, never waited for (the daemon reports how they end). */
        UnitActions units;

        /* Set by recovery when an interrupted transition cannot be finished yet (a writable old
         * tree that cannot be sealed, recover.c): why; a new transition is refused meanwhile. */
        char *recovery_waits;

        /* The root below sysextd's trees (base.h), where host facts are read (os-release,
         * trusted certificates), opened on first use in a call and closed at its end. */
        int facts_fd;
        /* Its helper, started when a transition begins and answered when the facts are first
         * needed: it strips our trees off in its namespace while this process reads the
         * journal and the mount table. */
        BaseOpen facts_pending;

        /* The command line's runs in process keep the image mounts of the trees they build for
         * the next run, in a mount namespace of their own (layers.h); set by the caller
         * (engine_keep_layers()).  A transition of anyone else drops those kept. */
        bool keep_layers;
        int layers_ns; /* that namespace, while a transition uses it */
        ImageList *kept; /* its mounts that probe_all() may reuse, while it runs */
        FdRelease release;     /* their clones, let go while the transition goes on */
        FdRelease old_trees;   /* the trees the swap detached, let go likewise */

        /* The last state.json read, kept while its file is the same (journal_load_cached()):
         * the daemon's statuses read it once per transition, and its workers, forked from it,
         * start with it. */
        JournalCache journal_cache;
} Engine;

int engine_new(const char *root, EngineConfig *config, Engine **ret); /* takes *config */
/* The root below sysextd's trees (base_root_open()) that the caller reached before the lock
 * (for the configuration), for the host's facts (os-release, trusted certificates) of the next
 * transition, which then forks no helper of its own to reach them: for a process that runs one
 * transition and ends (the command line), never for the daemon.  Only a copy of the mount
 * tree made with our trees stripped off is taken (what is merged later does not show in it);
 * the root itself, as base_root_open() gives it when nothing of ours was mounted, is not, as a
 * tree merged meanwhile would show in it.  Takes fd. */
void engine_adopt_facts(Engine *e, int fd);
/* The journal's parse made before the engine (journal_cache_prefetch()), taken over: the first
 * load under the lock uses it if state.json still has the bytes it was parsed from. */
void engine_adopt_journal_cache(Engine *e, JournalCache *c);
/* For a process that runs one transition and ends (the command line): the image mounts of the
 * trees it builds are kept for the next such run (layers.h), which reuses those of the files
 * it finds again. */
void engine_keep_layers(Engine *e);
Engine *engine_free(Engine *e);
/* Frees what is kept only to be faster next time (the parsed state.json). */
void engine_drop_caches(Engine *e);
DEFINE_TRIVIAL_CLEANUP_FUNC(Engine *, engine_free);

typedef struct EngineOptions {
        unsigned classes;    /* IMAGE_CLASS_* bits the call covers; 0: every class */
        bool force;          /* as systemd-sysext's --force: the release files are not matched */
        bool always_refresh; /* refresh: rebuild even when nothing changed */
        bool strict;         /* in addition to the configuration */
        int noexec;          /* < 0: the configuration's */
        int mutable[_IMAGE_CLASS_MAX]; /* MutableMode, < 0: the configuration's */
        int policy;          /* ImagePolicy, < 0: the configuration's */
        bool no_reload;      /* no service manager reload, no unit restarts */
        /* A delayed transition (sysextd(8), DELAYED UPDATES): ENGINE_DELAY_CONFIG: Delay= of
         * the configuration; ENGINE_DELAY_DEFAULT (--delay without a value): Delay=, or
         * ENGINE_DELAY_FALLBACK_USEC when that is 0; else this long (0: no delay). */
        uint64_t delay_usec;
        /* refresh --confirm-within=: a new generation rolls back by itself unless confirmed
         * within this long (sysextd(8), ROLLBACK); 0: no confirmation asked. */
        uint64_t confirm_within_usec;
        /* ENGINE_ROLLBACK: to this generation (0: the newest kept older than the live one);
         * unpin: instead, the pins go and a plain refresh runs; deadline: the rollback of a
         * confirmation deadline that passed (the daemon's), to the generation it names, and
         * nothing when the generation was confirmed meanwhile. */
        uint64_t rollback_to;
        bool unpin;
        bool deadline;
} EngineOptions;

#define ENGINE_DELAY_CONFIG UINT64_MAX
#define ENGINE_DELAY_DEFAULT (UINT64_MAX - 1)
#define ENGINE_DELAY_FALLBACK_USEC (300ULL * 1000000ULL)

#define ENGINE_OPTIONS_INIT { .noexec = -1, .mutable = { -1, -1 }, .policy = -1, .delay_usec = ENGINE_DELAY_CONFIG }

/* How long a transition with these options is delayed (0: not delayed). */
uint64_t engine_delay_usec(const EngineConfig *c, const EngineOptions *o);

/* Runs a transition; e->result says what happened.  Returns e->result.r: 1 when the tree
 * changed, 0 when there was nothing to do, < 0 on failure. */
int engine_transition(Engine *e, EngineVerb verb, const EngineOptions *o);

/* Confirms the generation a refresh --confirm-within= made: its deadline goes.  Returns 1 when
 * one waited, 0 when none did (e->result.message says so).  Takes the lock. */
int engine_confirm(Engine *e);

/* The pins, the confirmation deadline and, with generations, the history as recorded (no lock:
 * a snapshot).  engine_history_generations() adds the history to a journal read without it
 * (engine_status()'s). */
int engine_history(Engine *e, bool generations, Journal *ret);
int engine_history_generations(Engine *e, Journal *j);

/* Finishes or discards a transition that a crash interrupted and repairs what others left
 * (also done by every transition).  Takes the lock. */
int engine_recover(Engine *e);

/* Commits a delayed transition (sysextd(8), DELAYED UPDATES).  With pid 0 and no unit: on the
 * host, so that every namespace that still shows the old trees moves (recover.c).  With a pid:
 * only the mount namespace of that process (delay.h), or, when that is the host's, as without;
 * with a unit: each mount namespace of its processes.  A transition whose deadline has passed is
 * committed on the host in any case.  Returns 1 when something moved, 0 when there was nothing
 * to commit (e->result.message says why).  Takes the lock. */
/* delayed_only: a delayed transition only (a process committing its own namespace, unasked):
 * nothing else is brought up to date. */
int engine_commit(Engine *e, pid_t pid, const char *unit, bool delayed_only);
/* With no transition delayed, engine_commit() with a pid brings that one namespace up to date
 * (sysextd(8), NAMESPACES THAT MISSED A SWAP): an older tree of ours with the current one right
 * beneath is dropped there, the base or an older tree with nothing current beneath gets the
 * host's trees as a followed namespace would (once, not followed); an older tree of sysextd
 * that no retired record proves ours is left alone and the call fails, changing nothing. */

/* The mount namespaces that did not get the last swap (namespaces.h), with those that follow
 * the host marked.  No lock: a snapshot. */
int engine_namespaces(Engine *e, StaleNamespaceList *ret);

/* Starts or stops following the mount namespace of a process (follow.h): with follow, it gets
 * the host's trees now and after every transition; without, our trees there are detached.
 * machine: the machine it belongs to, if known.  Takes the lock. */
int engine_follow(Engine *e, pid_t pid, bool follow, const char *machine);
/* follow PID... with many processes: one update of all their namespaces at once; each failure
 * is said in its own line.  Returns < 0 when any failed. */
int engine_follow_many(Engine *e, const pid_t *pids, size_t n);
/* FollowMachines=: the leader pid of machine 'machine' (follow_add_machine(): a machine of its
 * own OS, or in sysextd's namespace, is not followed; returns 1 when it is followed, 0 when
 * not), and the records of a machine that has gone dropped (follow_forget_machine(): returns
 * how many).  Take the lock. */
int engine_follow_machine(Engine *e, pid_t pid, const char *machine);
int engine_forget_machine(Engine *e, const char *machine);
/* The followed namespaces as recorded (no lock: a snapshot). */
int engine_followers(Engine *e, FollowerList *ret);

/* image_discovery_fingerprint() over every class's search directories. */
int engine_discovery_fingerprint(Engine *e, uint64_t *ret);

/* Discovers and probes every image of the classes o covers (NULL: all); the returned list
 * holds verdicts and reasons, no mounts. */
int engine_list(Engine *e, const EngineOptions *o, ImageList *ret);

typedef struct HierarchyStatus {
        char *path;        /* "/usr" as seen inside the root */
        ImageClass klass;
        bool writable;     /* the live tree has an upper directory (mutable modes) */
        bool merged;       /* our tree with extensions is the live top */
        bool foreign_top;  /* a foreign mount is on top of ours */
        char **extensions; /* bottom to top */
        uint64_t since;
        unsigned n_ours;       /* our trees in the stack (more than one: stacked) */
        unsigned n_buried;     /* of ours, below the live one */
        unsigned n_repair;     /* of ours, above the one that should be live (repaired by the next transition) */
        unsigned n_unrecorded; /* overlays from source "sysextd" without a record */
        bool is_symlink;
} HierarchyStatus;

typedef struct EngineStatus {
        uint64_t generation;
        const char *mode;   /* "beneath", "degraded" or "unsupported" */
        const char *policy;
        const char *proof;  /* how ownership is proven on this kernel */
        bool pending;       /* a transition is running, or was interrupted */
        bool incomplete;    /* an interrupted transition was finished for some hierarchies only */
        bool other_namespace; /* the trees were recorded in another mount namespace */
        HierarchyStatus *hierarchies;
        size_t n_hierarchies;
        Journal journal; /* images of the last transition, with verdicts */
        FollowerList followers; /* the namespaces that follow the host */
        /* A delayed transition: when it began and ends (CLOCK_REALTIME µs; 0: none), and which
         * mount namespaces show its old and which its new trees. */
        uint64_t delayed_since, delay_deadline, delayed_generation;
        DelayScan delayed;
        /* Live layers that changed under the live tree since they were merged (watch.h):
         * what the daemon saw (run/sysextd/changed.json) and what a stat() finds now. */
        WatchChangeList changed;
} EngineStatus;

void engine_status_done(EngineStatus *s);
int engine_status(Engine *e, const EngineOptions *o, EngineStatus *ret);

/* What a class's trees get under a call with these options (o may be NULL): the caller's
 * option, else the class's configuration (for the image policy: sysext.conf's or
 * confext.conf's ImagePolicy=, else sysextd.conf's). */
ImagePolicy engine_class_policy(const EngineConfig *c, const EngineOptions *o, ImageClass k);
bool engine_class_noexec(const EngineConfig *c, const EngineOptions *o, ImageClass k);
MutableMode engine_class_mutable(const EngineConfig *c, const EngineOptions *o, ImageClass k);

/* Whether the call with these options covers class c. */
static inline bool engine_options_cover(const EngineOptions *o, ImageClass c) {
        return !o || o->classes == 0 || (o->classes & (1u << c));
}
