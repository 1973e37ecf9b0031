/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "journal.h"
#include "tree.h"

/* Namespaces that follow the host (follow.c has the design). */

/* What a followed namespace shows at a hierarchy, seen from its process's root. */
typedef enum FollowView {
        FOLLOW_VIEW_ABSENT,    /* no such directory there */
        FOLLOW_VIEW_OURS,      /* the tree sysextd put there, by its identity */
        FOLLOW_VIEW_BASE,      /* the host's base of the hierarchy (same directory) */
        FOLLOW_VIEW_HOST_TREE, /* a copy or bind of the host's tree that is not ours there
                                * (propagation, or someone's bind): it follows without us */
        FOLLOW_VIEW_OTHER,     /* something else: the container's own OS, a foreign mount */
        FOLLOW_VIEW_WAITING,   /* the tree a delayed transition put beneath ours there, by its
                                * identity: the namespace dropped our old top itself */
        _FOLLOW_VIEW_MAX,
} FollowView;

typedef enum FollowAction {
        FOLLOW_KEEP,    /* up to date, or nothing to do */
        FOLLOW_ATTACH,  /* the base shows: the host's tree goes on top of it */
        FOLLOW_REPLACE, /* our older tree shows: the host's tree goes beneath it, ours is detached */
        FOLLOW_DETACH,  /* our tree goes (the host has none, or the namespace stops following) */
        FOLLOW_LEAVE,   /* not ours and not the base: left alone, reported */
        FOLLOW_DELAY,   /* the host's transition is delayed: its new tree goes beneath ours there,
                         * ours stays on top until the namespace or the host commits */
        FOLLOW_COMMIT,  /* the tree waiting beneath ours is the host's now: ours is detached */
        FOLLOW_PROMOTE, /* the waiting tree shows already (the namespace committed): recorded */
        _FOLLOW_ACTION_MAX,
} FollowAction;

const char *follow_view_to_string(FollowView v);
const char *follow_action_to_string(FollowAction a);

/* What a decision knows of one hierarchy of a followed namespace. */
typedef struct FollowFacts {
        FollowView view;
        bool host_tree; /* the host shows a tree of ours with extensions (and the namespace keeps
                         * following) */
        bool current;   /* the namespace's tree of ours is already the host's (same superblock) */
        bool pending;   /* the host's transition is delayed: a new tree waits beneath its own */
        bool waiting;   /* a tree of a delayed transition waits beneath ours there (recorded) */
        bool waiting_current; /* that tree is the host's live tree (same superblock) */
        bool waiting_pending; /* that tree is the host's waiting tree (same superblock) */
} FollowFacts;

/* The decision for one hierarchy of a followed namespace: pure. */
FollowAction follow_decide(const FollowFacts *f);

/* A namespace that follows the host: run/sysextd/follow/NS.json. */
typedef struct Follower {
        uint64_t ns;         /* the inode of its mount namespace: its identity */
        pid_t pid;           /* the process last found in it (a hint: PIDs are reused) */
        char *name;          /* its unit, or its command name */
        char *machine;       /* the machine it belongs to (systemd-machined), NULL: none */
        uint64_t generation; /* the host's generation it shows */
        uint64_t since;      /* CLOCK_REALTIME µs of its last update */
        TreeList trees;      /* our trees there, one per hierarchy at most (Tree.hierarchy) */
        TreeList waiting;    /* a delayed transition's trees beneath them, one per hierarchy */
        char **problems;     /* hierarchies left alone there and why ("usr: …") */
        char *error;         /* why its last update failed; NULL: it did not */
        /* Not recorded: the last update found the host's base or a tree of the host at some
         * hierarchy there (a machine without it has its own OS: follow_add_machine()). */
        bool shows_host;
} Follower;

void follower_done(Follower *f);

typedef struct FollowerList {
        Follower *followers;
        size_t n;
} FollowerList;

void follower_list_done(FollowerList *l);

#define FOLLOW_DIR "follow"

int follower_to_json_string(const Follower *f, char **ret);
int follower_from_json_string(const char *text, Follower *ret);

/* Every record in the journal directory; a record that fails validation is moved aside. */
int follower_list_load(int journal_dir_fd, FollowerList *ret);

/* What the host shows, for the followers: everything below is read and changed under the
 * engine's lock. */
typedef struct FollowHost {
        int root_fd;
        const char *root;     /* its canonical path, for messages */
        int journal_fd;       /* run/sysextd */
        int base_fd;          /* the root below sysextd's trees (base.h) */
        char *const *hierarchies;
        const Journal *journal; /* what is live on the host: trees per hierarchy, generation */
        /* Where the hierarchies are in the namespaces, below their roots: NULL or "": at their
         * names ("usr", a container's own root); else below this path ("R" for "/R/usr", a
         * namespace whose root is the host's). */
        const char *ns_prefix;
} FollowHost;

/* The mount namespace of a process: its inode. */
int follow_namespace_of(pid_t pid, uint64_t *ret);

/* Starts following the namespace of pid (updated at once), or stops (our trees there are
 * detached and the base shows again).  Returns 0 with *ret_message NULL on success; < 0 with
 * *ret_message saying why otherwise. */
int follow_add(const FollowHost *h, pid_t pid, const char *machine, char **ret_message);
int follow_remove(const FollowHost *h, pid_t pid, char **ret_message);
/* Starts following the namespaces of many processes at once (one worker for all).  Each that
 * cannot be followed, or is followed but could not be updated, is said in one line at error
 * level.  Returns how many of them failed, < 0 when none could be tried. */
int follow_add_many(const FollowHost *h, const pid_t *pids, size_t n);

/* FollowMachines=: as follow_add() for the leader of machine 'machine', except that a namespace
 * that is sysextd's own is skipped, and one not followed yet whose hierarchies show neither the
 * host's base nor a tree of the host (the machine's own OS) is not followed, with one line at
 * info level and no record.  Returns 1 when it was followed (or updated), 0 when it was skipped
 * or not followed, < 0 with *ret_message as follow_add(). */
int follow_add_machine(const FollowHost *h, pid_t pid, const char *machine, char **ret_message);
/* The records of machine 'machine' are dropped (systemd-machined said it has gone; its
 * namespace goes with it): nothing is detached there.  Returns how many. */
int follow_forget_machine(const FollowHost *h, const char *machine);

/* Brings the namespace of pid to what the host shows once, as follow_add() would, without
 * recording it as followed.  olds: the trees of ours there (taken), proven by the caller
 * (sysextd commit --pid=, namespaces.h): each is replaced by the host's tree, the base gets the
 * host's tree on top.  Returns 0, or < 0 with *ret_message. */
int follow_once(const FollowHost *h, pid_t pid, TreeList *olds, char **ret_message);

/* After every transition: each followed namespace of l (follower_list_load()) gets the host's
 * trees.  A namespace that has gone is dropped without a word; one that fails is recorded with
 * its error and does not stop the others.  Returns how many failed. */
int follow_update_all(const FollowHost *h, FollowerList *l);
