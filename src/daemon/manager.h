/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "dlopen-systemd.h"
#include "engine.h"
#include "settings.h"
#include "worker.h"

/* The daemon's state, shared by daemon.c (jobs, lifecycle), bus-service.c (the bus interface)
 * and unit-jobs.c (how the unit jobs of a transition end).  No global state: everything hangs
 * off the Manager.
 *
 * daemon.c is on top: it runs the event loop, registers the bus interface, answers the calls it
 * queued (bus-service.h) and hands the unit jobs over (unit-jobs.h).  The two below it reach
 * its job queue and lifecycle only through the Manager's ops, which daemon.c fills in: no
 * module includes the header of one that calls it. */

typedef struct Manager Manager;
typedef struct MachineLookup MachineLookup;
typedef struct VarlinkServer VarlinkServer;
typedef struct VarlinkCall VarlinkCall;

/* A varlink caller waiting for a job (varlink-service.c): the call, and for List the classes it
 * asked for. */
typedef struct VarlinkRequest {
        VarlinkCall *call;
        unsigned classes;
        bool manager; /* org.sysextd1.Manager's call (varlink-sysext.h) */
} VarlinkRequest;
typedef struct LayerWatch LayerWatch;

/* What the bus interface and the unit jobs ask of the daemon (daemon.c). */
typedef struct ManagerOps {
        /* Queues a transition (request NULL: one of the daemon's own); the request is answered
         * when it has run, or now when the daemon is going. */
        int (*queue_transition)(Manager *m, sd_bus_message *request, EngineVerb verb, const EngineOptions *o);
        /* Queues a Follow (follow) or Unfollow of the mount namespace of the process of pidfd
         * (taken, closed in every case), whose PID is pid, in the same queue: the request is
         * answered when it has run, or now when the daemon is going. */
        int (*queue_follow)(Manager *m, sd_bus_message *request, int pidfd, pid_t pid, bool follow);
        /* Queues the commit of a delayed transition (Commit): in the mount namespace of the
         * process of pidfd (taken), whose PID is pid; in the namespaces of unit's processes
         * (taken); or, with neither, everywhere.  self: the caller's own namespace, unasked: a
         * delayed transition only. */
        int (*queue_commit)(Manager *m, sd_bus_message *request, int pidfd, pid_t pid, char *unit, bool self);
        /* Queues a Confirm (engine_confirm() in a worker), in the same queue. */
        int (*queue_confirm)(Manager *m, sd_bus_message *request);
        /* FollowMachines= (machines.h): queues, in the same queue, a follow of machine 'machine'
         * through its leader's pidfd (taken, closed in every case) whose PID is pid, in the
         * machine mode of engine_follow_machine(); with pidfd < 0, the drop of that machine's
         * records.  Nobody waits for an answer. */
        int (*queue_machine)(Manager *m, const char *machine, int pidfd, pid_t pid);
        /* Answers a ListImages call: from the last listing while nothing changed, else from a
         * listing job (one at a time, shared). */
        int (*list_images)(Manager *m, sd_bus_message *request);
        /* The same for a varlink caller (varlink-service.c): the call is referenced and
         * answered when the job has run (or now, when the daemon is going). */
        int (*queue_transition_varlink)(Manager *m, VarlinkCall *call, EngineVerb verb, const EngineOptions *o, bool manager);
        int (*list_images_varlink)(Manager *m, VarlinkCall *call, unsigned classes);
        /* Something began or ended: the idle timer is stopped, or started again. */
        void (*update_idle)(Manager *m);
        /* Exits the event loop when the daemon is going (SIGTERM, idle) and nothing is left to
         * answer. */
        void (*exit_if_done)(Manager *m);
} ManagerOps;

/* A unit job a transition queued for an image that ships units (units.h), and how it ended. */
typedef struct UnitJob {
        char *unit;
        char *action; /* "restart", "reload-or-restart", "stop", "start" */
        char *image;
        char *job;    /* object path; NULL: it could not be queued */
        char *result; /* NULL while it runs; systemd's result ("done", "failed", ...), or
                       * "not-queued" */
} UnitJob;

/* JobRemoved signals seen, kept a while: a job may end before the worker's report that queued
 * it reaches the bus process. */
#define UNIT_JOBS_SEEN_MAX 256
typedef struct SeenJob {
        char *job;
        char *result;
} SeenJob;

typedef enum JobType {
        JOB_TRANSITION,
        JOB_FOLLOW, /* Follow or Unfollow: engine_follow() in a worker, queued with the transitions */
        JOB_COMMIT, /* Commit, or the delay's deadline: engine_commit() in a worker, in the same queue */
        JOB_CONFIRM, /* Confirm: engine_confirm() in a worker, in the same queue */
        JOB_LIST,
} JobType;

typedef struct Job {
        Manager *manager;
        JobType type;
        EngineVerb verb;
        /* A transition job that only resolves what a dead worker left (engine_recover()), and
         * whether a transition it finds incomplete is then completed with a refresh. */
        bool recovery, complete;
        EngineOptions options;
        /* The callers waiting for this job: one for a transition; for a listing, everyone
         * who asked while it ran. */
        sd_bus_message **requests;
        size_t n_requests;
        VarlinkRequest *vrequests; /* the same over varlink */
        size_t n_vrequests;
        uint64_t fingerprint; /* listing: of the images it looks at */
        /* Follow or Unfollow: the caller's pidfd (held: while the process lives, its PID is not
         * reused), that PID, and which of the two. */
        int pidfd;
        pid_t target;
        bool follow;
        char *unit; /* Commit: the unit whose namespaces are committed */
        bool self;  /* Commit: of the caller's own namespace, not authorized: a delayed transition only */
        /* FollowMachines=: the machine whose leader (follow) is followed, or whose records
         * (!follow) are dropped; NULL: a Follow or Unfollow call. */
        char *machine;

        pid_t pid;
        int fd;
        sd_event_source *io_source, *child_source;
        WorkerReport report;
        bool answered; /* its callers: once the result is in, maybe before the handover and the exit */
        bool exited;
        int status;

        struct Job *next;
} Job;

struct Manager {
        const ManagerOps *ops;
        sd_event *event;
        sd_bus *bus;
        sd_bus_slot *vtable_slot;
        VarlinkServer *varlink; /* io.systemd.sysext and io.systemd.SysUpdate.Notify (varlink-service.c) */
        Engine *engine; /* read-only use in the bus process: status and properties */
        DaemonConfig dconfig;

        Job *queue;    /* transitions and Follow/Unfollow, in arrival order; the head runs */
        Job *listing;  /* the running ListImages job */
        /* The last listing's reply document and what it was made from: repeated ListImages
         * calls are answered from it while nothing changed. */
        json_object *list_cache;
        uint64_t list_fingerprint;

        sd_event_source *idle_timer;
        uint64_t generation;
        /* A delayed transition's deadline (CLOCK_REALTIME µs, 0: none is delayed) and the timer
         * that commits it everywhere then; the daemon does not go idle while one waits. */
        uint64_t delay_deadline;
        sd_event_source *delay_timer;
        /* A refresh --confirm-within= waiting for Confirm: its deadline (CLOCK_REALTIME µs, 0:
         * none), from the journal, so it survives the daemon's restart, and the timer that
         * queues the rollback then; the daemon does not go idle while one waits. */
        uint64_t confirm_deadline;
        sd_event_source *confirm_timer;

        /* Image mounts kept between transitions (see Engine.cache): the images merged now.
         * Replaced after every successful transition, from what its worker sends back: the
         * entries it reused by their ids (Image.cache_id), the others in full. */
        ImageList cache;
        uint64_t next_cache_id; /* the id of the next entry (from 1) */

        /* The unit jobs of the last transition that queued any (unit-jobs.c). */
        UnitJob *unit_jobs;
        size_t n_unit_jobs;
        uint64_t unit_jobs_generation;
        sd_event_source *unit_jobs_timer; /* gives up on jobs that never report (UNIT_JOBS_WAIT_USEC) */
        SeenJob seen[UNIT_JOBS_SEEN_MAX];
        size_t seen_next;
        sd_bus_slot *job_removed_slot;

        /* FollowMachines= (machines.c): systemd-machined's signals, its listing in flight, and
         * the machines being looked up. */
        sd_bus_slot *machine_new_slot, *machine_removed_slot, *machined_owner_slot, *list_machines_slot;
        MachineLookup *machine_lookups;

        /* The live layers watched for changes under the live tree (layer-watch.c). */
        LayerWatch *watch;

        /* The status the property getters read (bus-service.c, property_status()): a
         * PropertiesChanged or a GetAll calls several getters in one dispatch, and each would read
         * the journal and mountinfo and look at every live image again.  Either borrowed from the
         * caller that emits the signal, or read once and dropped by a defer source on the event
         * loop's next iteration, and at once whenever a job starts or ends. */
        const EngineStatus *status_borrowed;
        EngineStatus *status_snapshot;
        sd_event_source *status_snapshot_drop;

        sd_event_source *trim_timer; /* malloc_trim() once no job came for TRIM_DELAY_USEC */

        /* What follows a job, after its callers were answered: a status read for the signals,
         * then the live layers watched anew, each a dispatch of its own at idle priority, so
         * that bus calls waiting meanwhile are answered between them, but each within
         * POST_JOB_LATEST_USEC however busy the bus; the next job starts after both
         * (manager_start_next() waits while post_job_pending). */
        sd_event_source *post_job;
        sd_event_source *post_job_timer; /* runs a step that waited POST_JOB_LATEST_USEC */
        bool post_job_pending;
        bool post_job_rebuild;
        EngineStatus *post_status; /* between the two steps */

        bool exiting;   /* SIGTERM: the running transition finishes and is answered, then exit */
        int releasing;  /* idle: 1 while the bus name is being given back, 2 once it is */
        unsigned n_authorizing; /* polkit queries in flight */
};
