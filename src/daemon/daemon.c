/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The daemon: org.sysextd1 on the system bus (bus-service.c has the interface).
 *
 * The bus loop never does mount work.  Merge, Refresh and Unmerge become jobs that run the
 * engine in a worker process (worker.c); they are queued and run one at a time in arrival
 * order (the engine's lock also serialises them against `sysextd --no-bus` and the boot
 * unit).  Rollback is a transition job like Refresh; Confirm is a job of the same queue
 * (engine_confirm() in a worker: it takes the engine's lock).  A refresh with --confirm-within=
 * leaves a deadline in the journal; the daemon arms a timer for it whenever it reads the journal
 * (at start too: a deadline that passed while it was not running rolls back at once), queues a
 * rollback (EngineOptions.deadline) when it passes, and does not exit when idle meanwhile.
 * Follow and Unfollow are jobs of the same queue: engine_follow() in a worker, on the
 * PID of the caller's pidfd, which the job holds until it has run (checked again in the
 * worker: a process that exited meanwhile is refused, never its PID's next owner).  After
 * every transition job that succeeded, the followed namespaces it updated are read back and
 * each whose update failed is announced with FollowFailed, before the caller's reply.
 * With FollowMachines=yes the machines of systemd-machined are followed through the same queue
 * (machines.c), and the daemon does not exit when idle: it would miss machines that start.
 * ListImages, which attaches and mounts images to read them, runs as one job of its own beside
 * the queue: at most one at a time, shared by every caller who asks while it runs, and its
 * answer is kept and given again while the images, the trusted certificates and the host's
 * release file are unchanged.  GetStatus and the properties read the journal and the
 * mount table in the bus process: they answer while a transition runs.
 *
 * After a transition the worker hands over the mounts of the images in the new tree; the
 * daemon keeps them as its image cache, and the next transition reuses every image that did
 * not change, so a refresh costs in proportion to what changed.  The worker sends its result
 * first and the cache after it: the callers are answered meanwhile.
 *
 * Lifecycle: at start, before serving anyone, stale dm-verity devices are removed and an
 * interrupted transition is resolved (a partly finished one is completed by a refresh job);
 * when a transition's worker dies without a report, a recovery job (a worker that only runs
 * recovery) is queued at once, so a tree it sealed does not stay read-only until a next call.
 * On SIGTERM the running transition finishes and its caller gets the answer, queued ones are
 * told the daemon is going, then it exits.  When idle it gives the bus name back first,
 * asynchronously, and keeps answering until the bus confirms: a call that arrived meanwhile
 * is answered, later ones activate a new instance.
 */
#include <assert.h>
#include <fcntl.h>
#include <inttypes.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "bus-api.h"
#include "bus-service.h"
#include "daemon.h"
#include "dlopen-systemd.h"
#include "event-util.h"
#include "fd-util.h"
#include "image-json.h"
#include "json-util.h"
#include "kernel.h"
#include "layer-watch.h"
#include "log.h"
#include "machines.h"
#include "manager.h"
#include "unit-jobs.h"
#include "units.h"
#include "util.h"
#include "varlink-service.h"
#include "varlink.h"
#include "verity.h"

#ifdef SYSEXTD_TEST_HOOKS
#include "testhook.h"
#endif

static void job_free(Job *j) {
        if (!j)
                return;
        sd_event_source_disable_unref(j->io_source);
        sd_event_source_disable_unref(j->child_source);
        if (j->pid > 0 && !j->exited) {
                (void) kill(j->pid, SIGKILL);
                (void) waitpid(j->pid, NULL, 0);
        }
        safe_close(j->fd);
        safe_close(j->pidfd);
        free(j->unit);
        free(j->machine);
        for (size_t i = 0; i < j->n_requests; i++)
                sd_bus_message_unref(j->requests[i]);
        free(j->requests);
        for (size_t i = 0; i < j->n_vrequests; i++)
                varlink_call_unref(j->vrequests[i].call);
        free(j->vrequests);
        worker_report_done(&j->report);
        free(j);
}

static Job *job_new(Manager *m, JobType type, sd_bus_message *request) {
        Job *j = calloc(1, sizeof(Job));

        if (!j)
                return NULL;
        *j = (Job) { .manager = m, .type = type, .fd = -EBADF, .pidfd = -EBADF };
        if (request) {
                j->requests = malloc(sizeof(sd_bus_message *));
                if (!j->requests) {
                        free(j);
                        return NULL;
                }
                j->requests[j->n_requests++] = sd_bus_message_ref(request);
        }
        return j;
}

static int job_add_request(Job *j, sd_bus_message *request) {
        sd_bus_message **n = realloc(j->requests, sizeof(sd_bus_message *) * (j->n_requests + 1));

        if (!n)
                return -ENOMEM;
        j->requests = n;
        j->requests[j->n_requests++] = sd_bus_message_ref(request);
        return 0;
}

/* A varlink caller waits for j too. */
static int job_add_vrequest(Job *j, VarlinkCall *call, unsigned classes, bool manager) {
        VarlinkRequest *n = realloc(j->vrequests, sizeof(VarlinkRequest) * (j->n_vrequests + 1));

        if (!n)
                return -ENOMEM;
        j->vrequests = n;
        j->vrequests[j->n_vrequests++] = (VarlinkRequest) { .call = varlink_call_ref(call), .classes = classes,
                                                            .manager = manager };
        return 0;
}

/* Every varlink caller of j is answered with io.systemd.System for -error (org.sysextd1.Manager's
 * with Failed, as the bus's callers are). */
static void job_fail_varlink(Job *j, int error) {
        for (size_t i = 0; i < j->n_vrequests; i++)
                varlink_service_fail(&j->vrequests[i], error);
}

static int manager_start_next(Manager *m);
static int manager_queue_job(Manager *m, Job *j);
static int manager_queue_transition(Manager *m, sd_bus_message *request, EngineVerb verb, const EngineOptions *o);
static void manager_update_idle(Manager *m);
static void manager_update_delay(Manager *m, uint64_t deadline);
static void manager_update_confirm(Manager *m, uint64_t deadline);

/* ---- in the worker ---------------------------------------------------------------------- */

typedef struct Collected {
        json_object *messages;
} Collected;

static void collect(int level, const char *message, void *userdata) {
        Collected *c = userdata;
        json_object *e = json_object_new_array();

        json_object_array_add(e, json_object_new_int(level));
        json_object_array_add(e, json_object_new_string(message));
        json_object_array_add(c->messages, e);
}

static void add_result(json_object *doc, const EngineResult *res) {
        json_object_object_add(doc, "r", json_object_new_int(res->r));
        json_object_object_add(doc, "changed", json_object_new_boolean(res->changed));
        json_object_object_add(doc, "recovered", json_object_new_boolean(res->recovered));
        json_object_object_add(doc, "generation", json_object_new_uint64(res->generation));
        json_object_object_add(doc, "kind", json_object_new_int(res->error));
        json_object_object_add(doc, "error", json_object_new_string(res->message ?: ""));
}

static int run_transition(void *userdata, json_object *doc) {
        Job *j = userdata;
        Manager *m = j->manager;
        Collected c = { .messages = json_object_new_array() };
        Engine *e = m->engine;

        log_set_sink(collect, &c);
        e->cache = &m->cache;
        if (j->recovery)
                (void) engine_recover(e);
        else
                (void) engine_transition(e, j->verb, &j->options);
        log_set_sink(NULL, NULL);
        add_result(doc, &e->result);
        json_object_object_add(doc, "messages", c.messages);
        /* The unit jobs it queued (not waited for): the bus process reports how they end. */
        if (e->units.n > 0) {
                json_object *a = json_object_new_array();

                for (size_t i = 0; i < e->units.n; i++) {
                        const UnitAction *x = &e->units.actions[i];
                        json_object *o;

                        if (!x->job && !x->error)
                                continue; /* not asked (--no-reload, another root, no reload, a start
                                           * whose target is not being started) */
                        o = json_object_new_object();

                        json_object_object_add(o, "unit", json_object_new_string(x->unit));
                        json_object_object_add(o, "action", json_object_new_string(unit_job_kind_to_string(x->kind)));
                        json_object_object_add(o, "image", json_object_new_string(x->image));
                        if (x->job)
                                json_object_object_add(o, "job", json_object_new_string(x->job));
                        json_object_array_add(a, o);
                }
                json_object_object_add(doc, "unit_jobs", a);
        }
        /* Whether a cache follows (run_transition_handover()): a worker that dies before it
         * was sent leaves the daemon none. */
        if (e->result.r >= 0 && e->probed_valid)
                json_object_object_add(doc, "cache_follows", json_object_new_boolean(true));
        return e->result.r;
}

/* After the result: the images that went into the new tree, with their mounts, become the
 * daemon's cache, described in the handover document, their fds sent after it; one whose mount
 * came from the daemon's cache is named by its entry's id instead (image-json.h,
 * image_cache_from_handover()), so that a refresh hands over what changed only. */
static int run_transition_handover(void *userdata, json_object *doc, int **ret_fds, size_t *ret_n_fds) {
        Job *j = userdata;
        Engine *e = j->manager->engine;
        json_object *a;
        int *fds;
        size_t n = 0;

        if (e->result.r < 0 || !e->probed_valid)
                return 0;
        fds = calloc(e->probed.n + 1, sizeof(int));
        if (!fds)
                return -ENOMEM;
        a = json_object_new_array();
        for (size_t i = 0; i < e->probed.n; i++) {
                const Image *img = &e->probed.images[i];

                if (img->root_fd < 0)
                        continue;
                if (img->cache_id != 0) {
                        json_object *o = json_object_new_object();

                        json_object_object_add(o, "cached", json_object_new_uint64(img->cache_id));
                        json_object_array_add(a, o);
                        continue;
                }
                json_object_array_add(a, image_to_json(img, IMAGE_JSON_WORKER));
                fds[n++] = img->root_fd;
        }
        json_object_object_add(doc, "cache", a);
        *ret_fds = fds;
        *ret_n_fds = n;
        return 0;
}

/* Follow or Unfollow.  The pidfd is asked for its PID once more first: while the process lives
 * its PID is not reused, so a process that exited since the call is refused here rather than
 * its PID's next owner followed.  (engine_follow() looks the namespace up right after: a
 * process would have to exit and its PID be taken again in between.) */
static int run_follow(void *userdata, json_object *doc) {
        Job *j = userdata;
        Engine *e = j->manager->engine;
        pid_t pid = 0;

        /* A machine that has gone: its records are dropped. */
        if (j->machine && !j->follow) {
                (void) engine_forget_machine(e, j->machine);
                add_result(doc, &e->result);
                return e->result.r;
        }
        if (pidfd_get_pid(j->pidfd, &pid) < 0 || pid != j->target) {
                _cleanup_free_ char *msg = NULL;
                EngineResult gone = { .r = -ESRCH, .error = ENGINE_ERROR_FAILED };

                if (asprintf(&msg,
                             j->follow ? "Process %i has exited; its mount namespace was not followed."
                                       : "Process %i has exited; name another process in its mount namespace (one with no process left is no longer followed).",
                             (int) j->target) < 0)
                        msg = NULL;
                gone.message = msg;
                add_result(doc, &gone);
                return gone.r;
        }
        if (j->machine)
                (void) engine_follow_machine(e, pid, j->machine);
        else
                (void) engine_follow(e, pid, j->follow, NULL);
        add_result(doc, &e->result);
        return e->result.r;
}

/* Commit: the caller's namespace (its pidfd checked as for Follow), a unit's, or everywhere. */
static int run_commit(void *userdata, json_object *doc) {
        Job *j = userdata;
        Engine *e = j->manager->engine;
        Collected c = { .messages = json_object_new_array() };
        pid_t pid = 0;

        if (j->pidfd >= 0 && (pidfd_get_pid(j->pidfd, &pid) < 0 || pid != j->target)) {
                _cleanup_free_ char *msg = NULL;
                EngineResult gone = { .r = -ESRCH, .error = ENGINE_ERROR_FAILED };

                if (asprintf(&msg, "Process %i has exited; its mount namespace was not committed.", (int) j->target) < 0)
                        msg = NULL;
                gone.message = msg;
                add_result(doc, &gone);
                json_object_object_add(doc, "messages", c.messages);
                return gone.r;
        }
        log_set_sink(collect, &c);
        (void) engine_commit(e, pid, j->unit, j->self);
        log_set_sink(NULL, NULL);
        /* The reply says whether a namespace moved, as the command's --json does. */
        if (e->result.r > 0)
                e->result.changed = true;
        add_result(doc, &e->result);
        json_object_object_add(doc, "messages", c.messages);
        return e->result.r;
}

/* Confirm: the deadline of a refresh --confirm-within= goes. */
static int run_confirm(void *userdata, json_object *doc) {
        Job *j = userdata;
        Engine *e = j->manager->engine;
        Collected c = { .messages = json_object_new_array() };

        log_set_sink(collect, &c);
        (void) engine_confirm(e);
        log_set_sink(NULL, NULL);
        if (e->result.r > 0)
                e->result.changed = true;
        add_result(doc, &e->result);
        json_object_object_add(doc, "messages", c.messages);
        return e->result.r;
}

static int run_list(void *userdata, json_object *doc) {
        Job *j = userdata;
        Engine *e = j->manager->engine;
        _cleanup_image_list_ ImageList l = {};
        int r;

        r = engine_list(e, NULL, &l);
        e->result.r = r;
        add_result(doc, &e->result);
        if (r >= 0)
                json_object_object_add(doc, "images", image_list_to_json(&l, IMAGE_JSON_PUBLIC));
        return r;
}

/* ---- in the bus process ------------------------------------------------------------------ */

static bool doc_succeeded(json_object *doc) {
        json_object *v;
        return doc && json_object_object_get_ex(doc, "r", &v) && json_object_is_type(v, json_type_int) &&
               json_object_get_int(v) >= 0;
}

/* How long the daemon waits after the last job before it gives the heap back. */
#define TRIM_DELAY_USEC (2 * UINT64_C(1000000))

static int on_trim(sd_event_source *s, uint64_t usec, void *userdata) {
        Manager *m = userdata;

        if (!m->queue && !m->listing) {
                /* The parsed state.json kept for the next status and worker goes too: an idle
                 * daemon keeps no more than it needs to answer (the next status parses it). */
                engine_drop_caches(m->engine);
                (void) malloc_trim(0);
        }
        return 0;
}

/* The heap goes back to the kernel (malloc_trim()) when no job has come for TRIM_DELAY_USEC, not
 * after each: trimming costs a TLB flush on every CPU, and the next job's parsing would fault the
 * same pages back in, which in a burst of refreshes or status calls is most of their time. */
static void manager_trim_later(Manager *m) {
        (void) event_arm_after(m->event, &m->trim_timer, TRIM_DELAY_USEC, on_trim, m);
}

static void manager_emit_changes(Manager *m, const EngineStatus *s) {
        manager_update_delay(m, s->pending && s->delay_deadline > 0 ? s->delay_deadline : 0);
        manager_update_confirm(m, s->journal.confirm_generation > 0 ? s->journal.confirm_deadline : 0);
        if (s->generation == m->generation)
                return;
        bus_emit_tree_changed(m, s);
}

/* The worker's cache description plus the fds that followed it: the next image cache, with
 * the entries of the last that it names.  One that was to follow and did not (the worker died
 * after its result) leaves none. */
static int take_cache(Manager *m, Job *j) {
        ImageList l = {};
        json_object *a = json_get_array(j->report.handover, "cache"), *follows = NULL;
        int r;

        if (!a) {
                if (!json_object_object_get_ex(j->report.doc, "cache_follows", &follows) || !json_object_get_boolean(follows))
                        return 0;
                image_list_free(&m->cache);
                return -EBADMSG;
        }
        if (m->next_cache_id == 0)
                m->next_cache_id = 1;
        r = image_cache_from_handover(a, &m->cache, j->report.fds, j->report.n_fds, &m->next_cache_id, &l);
        image_list_free(&m->cache);
        if (r < 0)
                return r;
        m->cache = l;
        return 0;
}

/* When a worker died without a report, what it may have left half done (a tree sealed
 * read-only, a new one waiting beneath) is resolved at once, not when someone calls next: by a
 * worker of its own (recovery takes the lock and may wait for a writer to close a file, which
 * the bus loop must not), queued like a transition.  'complete': a transition it finds
 * finished for some hierarchies only is then completed with a refresh (not when the worker
 * that died was such a refresh: no endless round of them). */
static int manager_queue_recovery(Manager *m, bool complete) {
        Job *j;

        if (m->exiting)
                return 0;
        j = job_new(m, JOB_TRANSITION, NULL);
        if (!j)
                return -ENOMEM;
        j->verb = ENGINE_REFRESH; /* for messages only */
        j->options = (EngineOptions) ENGINE_OPTIONS_INIT;
        j->recovery = true;
        j->complete = complete;
        return manager_queue_job(m, j);
}

/* After recovery (at the start, or a recovery job): the refresh that completes an incomplete
 * transition, if asked for. */
static void manager_after_recovery(Manager *m, bool complete) {
        _cleanup_(engine_status_done) EngineStatus s = {};

        if (engine_status(m->engine, NULL, &s) < 0 || !s.incomplete)
                return;
        if (!complete) {
                log_warning("The interrupted transition is still finished for some hierarchies only; the next refresh completes it.");
                return;
        }
        log_info("The interrupted transition was finished for some hierarchies only; completing it with a refresh.");
        (void) manager_queue_transition(m, NULL, ENGINE_REFRESH, &(EngineOptions) ENGINE_OPTIONS_INIT);
}

static void post_status_free(Manager *m) {
        if (m->post_status) {
                engine_status_done(m->post_status);
                free(m->post_status);
                m->post_status = NULL;
        }
}

static void manager_exit_if_done(Manager *m);

/* See Manager.post_job: step 1 reads the status and emits the signals, step 2 rebuilds the
 * layer watch, each in a dispatch of its own. */
static int on_post_job(sd_event_source *s, void *userdata);

/* How long a step of the work after a job waits at most for calls to stop coming: at idle
 * priority it would wait for ever while the bus is never quiet (GetStatus is open to anyone),
 * and with it the next job and the deadlines' timers. */
#define POST_JOB_LATEST_USEC (20 * UINT64_C(1000))

static int on_post_job_late(sd_event_source *s, uint64_t usec, void *userdata) {
        Manager *m = userdata;

        int enabled = SD_EVENT_OFF;

        if (m->post_job_pending && m->post_job && sd_event_source_get_enabled(m->post_job, &enabled) >= 0 &&
            enabled != SD_EVENT_OFF)
                return on_post_job(m->post_job, m);
        return 0;
}

/* The next job is one after which the live layers are watched anew. */
static bool next_job_rebuilds(const Manager *m) {
        return m->queue && m->queue->pid == 0 && (m->queue->type == JOB_TRANSITION || m->queue->type == JOB_COMMIT);
}

static int on_post_job(sd_event_source *s, void *userdata) {
        Manager *m = userdata;
        bool keep_rebuild = false;

        if (!m->post_status) {
                EngineStatus *st = calloc(1, sizeof(EngineStatus));

                if (st && engine_status(m->engine, NULL, st) >= 0) {
                        manager_emit_changes(m, st);
                        /* A transition waits: the watch is rebuilt after it (its own post_job
                         * does, or manager_start_next() if it does not start), not for trees
                         * about to go.  (check_all() leaves them alone meanwhile.) */
                        if (m->post_job_rebuild && next_job_rebuilds(m))
                                keep_rebuild = true;
                        else if (m->post_job_rebuild && s && sd_event_source_set_enabled(s, SD_EVENT_ONESHOT) >= 0) {
                                m->post_status = st;
                                (void) event_arm_after(m->event, &m->post_job_timer, POST_JOB_LATEST_USEC, on_post_job_late, m);
                                return 0;
                        } else if (m->post_job_rebuild)
                                layer_watch_rebuild(m, st);
                }
                if (st) {
                        engine_status_done(st);
                        free(st);
                }
        } else {
                layer_watch_rebuild(m, m->post_status);
                post_status_free(m);
        }
        m->post_job_rebuild = keep_rebuild;
        m->post_job_pending = false;
        if (s)
                (void) sd_event_source_set_enabled(s, SD_EVENT_OFF); /* run by the timer */
        if (m->post_job_timer)
                (void) sd_event_source_set_enabled(m->post_job_timer, SD_EVENT_OFF);
        (void) manager_start_next(m);
        /* The worker's report and the journal were parsed into many small objects, all freed
         * now: the heap they took goes back to the kernel once the daemon waits. */
        if (!m->queue)
                manager_trim_later(m);
        manager_update_idle(m);
        manager_exit_if_done(m);
        return 0;
}

static void manager_post_job(Manager *m) {
        int r = 0;

        if (!m->post_job) {
                r = sd_event_add_defer(m->event, &m->post_job, on_post_job, m);
                if (r >= 0)
                        (void) sd_event_source_set_priority(m->post_job, SD_EVENT_PRIORITY_IDLE);
        }
        if (r >= 0)
                r = sd_event_source_set_enabled(m->post_job, SD_EVENT_ONESHOT);
        if (r >= 0)
                (void) event_arm_after(m->event, &m->post_job_timer, POST_JOB_LATEST_USEC, on_post_job_late, m);
        post_status_free(m); /* a step 2 still to come is replaced by this job's step 1 */
        m->post_job_pending = r >= 0;
        if (r < 0) {
                /* Without the defer source: all of it now. */
                log_warning_errno(r, "Failed to defer the work after a job, doing it now: %m");
                m->post_job_pending = true;
                (void) on_post_job(NULL, m);
        }
}

static void manager_exit_if_done(Manager *m) {
        if ((m->exiting || m->releasing == 2) && !m->queue && !m->listing && m->n_authorizing == 0 && !m->post_job_pending)
                (void) sd_event_exit(m->event, 0);
}

/* The callers hear the outcome as soon as the worker's result is in: the worker may still be
 * handing over its cache and exiting then (its memory given back), which they need not wait
 * for; the next job does.  A worker that died before reporting is answered once it is reaped,
 * with how it died. */
static void job_answer(Job *j) {
        Manager *m = j->manager;
        json_object *doc = j->report.doc;
        _cleanup_json_ json_object *died_doc = NULL;
        _cleanup_free_ char *died = NULL;
        int r;

        j->answered = true;
        /* The job may have changed what the getters' status says, and what a listing says (a
         * rollback's pins): a caller who asks next must not hear the old. */
        manager_drop_status_snapshot(m);
        if (j->type != JOB_LIST)
                json_object_putp(&m->list_cache);

        /* A transition (or recovery) that succeeded updated the followed namespaces, each
         * recording its error anew: the failed ones are announced before its caller hears that
         * it ended. */
        if (IN_SET(j->type, JOB_TRANSITION, JOB_COMMIT) && doc_succeeded(doc))
                bus_emit_follow_failed(m);
        /* What a transition started (the units of images that ship them) is in UnitJobs from
         * now on; the confirmation deadline's rollback has nobody to answer: its outcome goes to
         * the log (status shows it too). */
        if (j->type == JOB_TRANSITION && doc) {
                uint64_t generation = 0;

                (void) json_get_u64(doc, "generation", &generation);
                unit_jobs_take(m, json_get_array(doc, "unit_jobs"), generation);
                if (j->verb == ENGINE_ROLLBACK && j->options.deadline && j->n_requests + j->n_vrequests == 0) {
                        json_object *e = NULL;
                        const char *why = json_object_object_get_ex(doc, "error", &e) && e ? json_object_get_string(e) : "";

                        if (doc_succeeded(doc))
                                log_info("The deadline's rollback is done: generation %" PRIu64 " is live.", generation);
                        else
                                log_error("The deadline's rollback failed: %s", isempty(why) ? "see status" : why);
                }
        }

        if (!doc && asprintf(&died, "The sysextd worker died before reporting (%s%s); the tree is as the journal in run/sysextd says.",
                             WIFSIGNALED(j->status) ? "signal " : "exit status ",
                             WIFSIGNALED(j->status) ? strsignal(WTERMSIG(j->status))
                             : WEXITSTATUS(j->status)  ? "non-zero"
                                                       : "0") < 0)
                died = NULL;
        for (size_t i = 0; i < j->n_requests; i++) {
                if (!doc)
                        r = sd_bus_reply_method_errorf(j->requests[i], SYSEXTD_ERROR_FAILED, "%s",
                                                       died ?: "The sysextd worker died before reporting.");
                else if (IN_SET(j->type, JOB_TRANSITION, JOB_COMMIT, JOB_CONFIRM))
                        r = bus_reply_transition(j->requests[i], doc);
                else if (j->type == JOB_FOLLOW)
                        r = bus_reply_follow(j->requests[i], doc);
                else
                        r = bus_reply_list(j->requests[i], doc);
                if (r < 0)
                        log_warning_errno(r, "Failed to send a reply: %m");
        }
        /* A varlink caller hears the same: io.systemd.sysext's as an I/O error. */
        if (!doc && j->n_vrequests > 0) {
                died_doc = json_object_new_object();
                if (died_doc && (json_object_object_add(died_doc, "r", json_object_new_int(-EIO)) < 0 ||
                                 json_object_object_add(died_doc, "error", json_object_new_string(
                                                                                   died ?: "The sysextd worker died before reporting.")) < 0))
                        json_object_putp(&died_doc);
        }
        for (size_t i = 0; i < j->n_vrequests; i++)
                varlink_service_reply(m, &j->vrequests[i], j->type, doc ?: died_doc);
        /* The callers hear the outcome now, not after what follows (the status read for the
         * signals, the watch built anew). */
        if (j->n_requests > 0)
                (void) sd_bus_flush(m->bus);
}

static void job_finish(Job *j) {
        Manager *m = j->manager;
        json_object *doc = j->report.doc;

        if (!j->report.eof)
                return;
        /* (A listing is answered at its end: until then, who asks for one joins it.) */
        if (!j->answered && (j->exited || (doc && j->type != JOB_LIST)))
                job_answer(j);
        /* The next job waits for this worker's end: it may hold the lock until then. */
        if (!j->exited)
                return;
        manager_drop_status_snapshot(m);

        if (j->type != JOB_LIST) {
                bool died = !doc, recovery = j->recovery, complete = j->complete;
                bool transition = j->type == JOB_TRANSITION;
                JobType j_type = j->type;
                size_t n_requests = j->n_requests + j->n_vrequests; /* callers on the bus or over varlink */

                assert(m->queue == j);
                /* A successful transition that probed images hands over the next cache
                 * (maybe empty, after unmerge); otherwise the tree did not change and neither
                 * does the cache. */
                if (transition && doc_succeeded(doc) && !recovery && take_cache(m, j) < 0)
                        log_warning("The worker's image cache could not be read; the next transition probes every image.");
                m->queue = j->next;
                job_free(j);
                /* The listing may no longer be what a new one would say. */
                json_object_putp(&m->list_cache);
                /* A queued transition resolves what a dead worker left first thing anyway. */
                if (died && !recovery && !m->queue)
                        (void) manager_queue_recovery(m, /* complete= */ n_requests > 0);
                else if (!died && recovery)
                        manager_after_recovery(m, complete);
                /* One status read for what follows: the signals, the deadlines' timers, the
                 * live layers watched anew (they may be others now); then the next job. */
                m->post_job_rebuild = m->post_job_rebuild || transition || j_type == JOB_COMMIT;
                manager_post_job(m);
        } else {
                if (doc_succeeded(doc) && j->fingerprint != 0) {
                        uint64_t now = 0;
                        json_object_putp(&m->list_cache);
                        if (engine_discovery_fingerprint(m->engine, &now) >= 0 &&
                            now == j->fingerprint) {
                                m->list_cache = json_object_get(doc);
                                m->list_fingerprint = now;
                        }
                }
                m->listing = NULL;
                job_free(j);
        }
        manager_update_idle(m);
        manager_exit_if_done(m);
}

static int on_worker_output(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Job *j = userdata;
        int r = worker_read(fd, &j->report);

        if (r == 0) {
                /* The result is in: its callers hear it while the worker hands over its cache
                 * (a listing is answered at its end: until then, who asks for one joins it). */
                if (j->report.doc && !j->answered && j->type != JOB_LIST)
                        job_answer(j);
                return 0;
        }
        if (r < 0)
                log_warning_errno(r, "A worker sent an unreadable report: %m");
        j->report.eof = true;
        j->io_source = sd_event_source_disable_unref(j->io_source);
        job_finish(j);
        return 0;
}

static int on_worker_exit(sd_event_source *s, const siginfo_t *si, void *userdata) {
        Job *j = userdata;

        /* sd-event reaps the child; rebuild a wait status for the message. */
        j->status = si->si_code == CLD_EXITED ? W_EXITCODE(si->si_status, 0) : (si->si_status & 0x7f);
        j->exited = true;
        j->child_source = sd_event_source_disable_unref(j->child_source);
        job_finish(j);
        return 0;
}

static int job_start(Job *j) {
        Manager *m = j->manager;
        int r;

        manager_drop_status_snapshot(m);
        r = worker_start(j->type == JOB_TRANSITION ? run_transition
                         : j->type == JOB_FOLLOW   ? run_follow
                         : j->type == JOB_COMMIT   ? run_commit
                         : j->type == JOB_CONFIRM  ? run_confirm
                                                   : run_list,
                         j->type == JOB_TRANSITION ? run_transition_handover : NULL, j, &j->pid, &j->fd);
        if (r < 0)
                return r;
        r = sd_event_add_io(m->event, &j->io_source, j->fd, EPOLLIN, on_worker_output, j);
        if (r < 0)
                return r;
        r = sd_event_add_child(m->event, &j->child_source, j->pid, WEXITED, on_worker_exit, j);
        if (r < 0)
                return r;
        if (j->type == JOB_TRANSITION)
                (void) sd_notifyf(false, "STATUS=Running %s (generation %" PRIu64 ").", engine_verb_to_string(j->verb),
                                  m->generation);
        else if (j->type == JOB_FOLLOW && j->machine && !j->follow)
                (void) sd_notify(false, "STATUS=Forgetting a machine that has gone.");
        else if (j->type == JOB_FOLLOW)
                (void) sd_notifyf(false, "STATUS=%s the mount namespace of process %i.", j->follow ? "Following" : "Unfollowing",
                                  (int) j->target);
        else if (j->type == JOB_COMMIT)
                (void) sd_notify(false, "STATUS=Committing the delayed transition.");
        else if (j->type == JOB_CONFIRM)
                (void) sd_notify(false, "STATUS=Confirming the generation.");
        return 0;
}

static int manager_start_next(Manager *m) {
        /* After the last job's status and watch (on_post_job(), which calls this again). */
        if (m->post_job_pending)
                return 0;
        while (m->queue && m->queue->pid == 0) {
                Job *j = m->queue;
                int r = job_start(j);

                if (r >= 0)
                        return 0;
                for (size_t i = 0; i < j->n_requests; i++)
                        (void) sd_bus_reply_method_errorf(j->requests[i], SYSEXTD_ERROR_FAILED, "Failed to start a worker: %s",
                                                          strerror(-r));
                job_fail_varlink(j, r);
                m->queue = j->next;
                job_free(j);
        }
        /* A watch left for a job that then did not start (on_post_job()) is rebuilt now. */
        if (!m->queue && m->post_job_rebuild) {
                m->post_job_rebuild = false;
                layer_watch_rebuild(m, NULL);
        }
        if (!m->queue)
                (void) sd_notify(false, "STATUS=Idle.");
        return 0;
}

/* Appends j to the queue (the head is the running job) and starts it if it is first. */
static int manager_queue_job(Manager *m, Job *j) {
        Job **tail;

        for (tail = &m->queue; *tail; tail = &(*tail)->next)
                ;
        *tail = j;
        manager_update_idle(m);
        return manager_start_next(m);
}

/* A transition for a bus caller (request), a varlink caller (call), or the daemon itself. */
static int manager_queue_transition_full(Manager *m, sd_bus_message *request, VarlinkCall *call, bool manager,
                                         EngineVerb verb, const EngineOptions *o) {
        Job *j;

        if (m->exiting) {
                if (request)
                        (void) sd_bus_reply_method_errorf(request, SYSEXTD_ERROR_BUSY,
                                                          "sysextd is shutting down; the request was not run.");
                if (call)
                        varlink_service_fail(&(VarlinkRequest) { .call = call, .manager = manager }, -ESHUTDOWN);
                return 0;
        }
        j = job_new(m, JOB_TRANSITION, request);
        if (!j)
                return -ENOMEM;
        if (call && job_add_vrequest(j, call, 0, manager) < 0) {
                job_free(j);
                return -ENOMEM;
        }
        j->verb = verb;
        j->options = *o;
        return manager_queue_job(m, j);
}

static int manager_queue_transition(Manager *m, sd_bus_message *request, EngineVerb verb, const EngineOptions *o) {
        return manager_queue_transition_full(m, request, NULL, false, verb, o);
}

static int manager_queue_transition_varlink(Manager *m, VarlinkCall *call, EngineVerb verb, const EngineOptions *o,
                                            bool manager) {
        return manager_queue_transition_full(m, NULL, call, manager, verb, o);
}

static int manager_queue_follow(Manager *m, sd_bus_message *request, int pidfd, pid_t pid, bool follow) {
        _cleanup_close_ int fd = pidfd;
        Job *j;

        if (m->exiting) {
                (void) sd_bus_reply_method_errorf(request, SYSEXTD_ERROR_BUSY, "sysextd is shutting down; the request was not run.");
                return 0;
        }
        j = job_new(m, JOB_FOLLOW, request);
        if (!j)
                return -ENOMEM;
        j->pidfd = TAKE_FD(fd);
        j->target = pid;
        j->follow = follow;
        return manager_queue_job(m, j);
}

static int manager_queue_commit(Manager *m, sd_bus_message *request, int pidfd, pid_t pid, char *unit, bool self) {
        _cleanup_close_ int fd = pidfd;
        _cleanup_free_ char *u = unit;
        Job *j;

        if (m->exiting) {
                if (request)
                        (void) sd_bus_reply_method_errorf(request, SYSEXTD_ERROR_BUSY, "sysextd is shutting down; the request was not run.");
                return 0;
        }
        j = job_new(m, JOB_COMMIT, request);
        if (!j)
                return -ENOMEM;
        j->pidfd = TAKE_FD(fd);
        j->target = pid;
        j->unit = TAKE_PTR(u);
        j->self = self;
        return manager_queue_job(m, j);
}

static int manager_queue_confirm(Manager *m, sd_bus_message *request) {
        Job *j;

        if (m->exiting) {
                (void) sd_bus_reply_method_errorf(request, SYSEXTD_ERROR_BUSY, "sysextd is shutting down; the request was not run.");
                return 0;
        }
        j = job_new(m, JOB_CONFIRM, request);
        if (!j)
                return -ENOMEM;
        return manager_queue_job(m, j);
}

static int on_confirm_deadline(sd_event_source *s, uint64_t usec, void *userdata) {
        Manager *m = userdata;
        EngineOptions o = ENGINE_OPTIONS_INIT;

        log_warning("The generation waiting for confirmation was not confirmed in time; rolling back.");
        /* Met once: the job's end sets the timer again if the journal still says so (the
         * engine ends the wait whether the rollback succeeds or fails). */
        m->confirm_deadline = 0;
        o.deadline = true;
        o.no_reload = !streq(m->engine->root, "/");
        if (manager_queue_transition(m, NULL, ENGINE_ROLLBACK, &o) < 0) {
                log_warning("Failed to queue the rollback of the generation that was not confirmed; trying again in a minute.");
                /* The timer has fired: armed again a minute from now, and the daemon stays. */
                manager_update_confirm(m, usec);
        }
        manager_update_idle(m);
        return 0;
}

/* Arms (or disarms) a deadline's realtime *timer for deadline, recorded in *slot; 0 disarms.  A
 * deadline that passed and whose timer has fired already (what it started did not run, or
 * failed) is tried again in a minute, not in a loop. */
static void arm_deadline(Manager *m, sd_event_source **timer, uint64_t *slot, uint64_t deadline,
                         sd_event_time_handler_t handler, const char *failure) {
        uint64_t when = deadline;

        if (deadline > 0 && deadline <= now_realtime_usec() && *timer && sd_event_source_get_enabled(*timer, NULL) == 0)
                when = now_realtime_usec() + 60ULL * 1000000ULL;
        *slot = deadline;
        if (deadline == 0) {
                (void) sd_event_source_set_enabled(*timer, SD_EVENT_OFF);
                return;
        }
        if (!*timer) {
                if (sd_event_add_time(m->event, timer, CLOCK_REALTIME, when, 0, handler, m) < 0) {
                        log_warning("%s", failure);
                        return;
                }
        } else
                (void) sd_event_source_set_time(*timer, when);
        (void) sd_event_source_set_enabled(*timer, SD_EVENT_ONESHOT);
}

/* Arms (or disarms) the confirmation deadline's timer from what the journal says. */
static void manager_update_confirm(Manager *m, uint64_t deadline) {
        arm_deadline(m, &m->confirm_timer, &m->confirm_deadline, deadline, on_confirm_deadline,
                     "Failed to set a timer for the confirmation deadline; it is not rolled back by itself.");
}

static int on_delay_deadline(sd_event_source *s, uint64_t usec, void *userdata) {
        Manager *m = userdata;

        log_info("The delay of the pending transition has ended; committing it in every mount namespace.");
        /* The deadline is met once: the job's end sets the timer again if it is still delayed
         * (a commit that failed is tried again a while later). */
        m->delay_deadline = 0;
        if (manager_queue_commit(m, NULL, -EBADF, 0, NULL, false) < 0)
                log_warning("Failed to queue the commit of the delayed transition; the next command commits it.");
        return 0;
}

/* Arms (or disarms) the deadline timer from what the journal says is delayed. */
static void manager_update_delay(Manager *m, uint64_t deadline) {
        arm_deadline(m, &m->delay_timer, &m->delay_deadline, deadline, on_delay_deadline,
                     "Failed to set a timer for the delay's deadline; the next command after it commits.");
}

static int manager_queue_machine(Manager *m, const char *machine, int pidfd, pid_t pid) {
        _cleanup_close_ int fd = pidfd;
        Job *j;

        if (m->exiting)
                return 0;
        j = job_new(m, JOB_FOLLOW, NULL);
        if (!j)
                return -ENOMEM;
        j->machine = strdup(machine);
        if (!j->machine) {
                job_free(j);
                return -ENOMEM;
        }
        j->pidfd = TAKE_FD(fd);
        j->target = pid;
        j->follow = j->pidfd >= 0;
        return manager_queue_job(m, j);
}

/* A listing for a bus caller (request) or a varlink caller (call, for the classes it asked for):
 * from the last listing while nothing changed, else from the running listing job or a new one. */
static int manager_list_images_full(Manager *m, sd_bus_message *request, VarlinkCall *call, unsigned classes) {
        uint64_t fingerprint = 0;
        int r;

        if (m->exiting) {
                if (call)
                        return varlink_call_error_errno(call, -ESHUTDOWN);
                return sd_bus_reply_method_errorf(request, SYSEXTD_ERROR_BUSY, "sysextd is shutting down.");
        }
        manager_update_idle(m);
        if (engine_discovery_fingerprint(m->engine, &fingerprint) < 0)
                fingerprint = 0;
        if (m->list_cache && fingerprint != 0 && fingerprint == m->list_fingerprint) {
                if (call) {
                        varlink_service_reply(m, &(VarlinkRequest) { .call = call, .classes = classes }, JOB_LIST, m->list_cache);
                        return 0;
                }
                return bus_reply_list(request, m->list_cache);
        }
        if (m->listing)
                /* One listing at a time; everyone who asks meanwhile gets its answer. */
                return call ? job_add_vrequest(m->listing, call, classes, false) : job_add_request(m->listing, request);

        m->listing = job_new(m, JOB_LIST, request);
        if (!m->listing)
                return -ENOMEM;
        if (call && job_add_vrequest(m->listing, call, classes, false) < 0) {
                job_free(m->listing);
                m->listing = NULL;
                return -ENOMEM;
        }
        m->listing->fingerprint = fingerprint;
        r = job_start(m->listing);
        if (r < 0) {
                job_free(m->listing);
                m->listing = NULL;
                if (call)
                        return varlink_call_error_errno(call, r);
                return sd_bus_reply_method_errorf(request, SYSEXTD_ERROR_FAILED, "Failed to start a worker: %s", strerror(-r));
        }
        return 0;
}

static int manager_list_images(Manager *m, sd_bus_message *request) {
        return manager_list_images_full(m, request, NULL, 0);
}

static int manager_list_images_varlink(Manager *m, VarlinkCall *call, unsigned classes) {
        return manager_list_images_full(m, NULL, call, classes);
}

static int on_name_released(sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;

        /* Every call routed to us before the name went has been dispatched by now (the bus
         * answers in order): answer what they started, then go. */
        m->releasing = 2;
        manager_exit_if_done(m);
        return 0;
}

static int on_idle(sd_event_source *s, uint64_t usec, void *userdata) {
        Manager *m = userdata;
        int r;

        if (m->queue || m->listing || m->n_authorizing > 0 || m->releasing || unit_jobs_pending(m) > 0 ||
            varlink_server_n_connections(m->varlink) > 0 ||
            layer_watch_keeps_alive(m))
                return 0;
        log_info("Idle for %" PRIu64 " s, exiting.", m->dconfig.idle_timeout_usec / 1000000);
        (void) sd_notify(false, "STOPPING=1\nSTATUS=Exiting on idle.");
        m->releasing = 1;
        r = sd_bus_release_name_async(m->bus, NULL, SYSEXTD_BUS_NAME, on_name_released, m);
        if (r < 0)
                return sd_event_exit(m->event, 0);
#ifdef SYSEXTD_TEST_HOOKS
        /* The name is on its way back: calls that reach us meanwhile must still be answered. */
        (void) sd_bus_flush(m->bus);
        testhook_point("daemon-releasing", 0);
#endif
        return 0;
}

static void manager_update_idle(Manager *m) {
        if (m->dconfig.idle_timeout_usec == 0 || m->releasing)
                return;
        if (m->queue || m->listing || m->n_authorizing > 0 || m->post_job_pending || unit_jobs_pending(m) > 0 || m->delay_deadline > 0 ||
            m->confirm_deadline > 0 || varlink_server_n_connections(m->varlink) > 0 ||
            layer_watch_keeps_alive(m)) {
                (void) sd_event_source_set_enabled(m->idle_timer, SD_EVENT_OFF);
                return;
        }
        (void) event_arm_after(m->event, &m->idle_timer, m->dconfig.idle_timeout_usec, on_idle, m);
}

static int on_sigterm(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        Manager *m = userdata;

        if (m->exiting)
                return 0;
        m->exiting = true;
        (void) sd_notify(false, "STOPPING=1\nSTATUS=Shutting down.");
        /* The running transition finishes and is answered; the ones behind it are not run,
         * nor the head when it has not started (it waits for the work after the last job). */
        if (m->queue) {
                bool running = m->queue->pid > 0;
                Job *rest = running ? m->queue->next : m->queue;

                if (running) {
                        log_info("Received %s, exiting after the running transition.", strsignal(si->ssi_signo));
                        m->queue->next = NULL;
                } else
                        m->queue = NULL;
                while (rest) {
                        Job *n = rest->next;
                        for (size_t i = 0; i < rest->n_requests; i++)
                                (void) sd_bus_reply_method_errorf(rest->requests[i], SYSEXTD_ERROR_BUSY,
                                                                  "sysextd is shutting down; the request was not run.");
                        job_fail_varlink(rest, -ESHUTDOWN);
                        job_free(rest);
                        rest = n;
                }
        }
        /* A listing changes nothing: it is cut short. */
        if (m->listing) {
                for (size_t i = 0; i < m->listing->n_requests; i++)
                        (void) sd_bus_reply_method_errorf(m->listing->requests[i], SYSEXTD_ERROR_BUSY,
                                                          "sysextd is shutting down.");
                job_fail_varlink(m->listing, -ESHUTDOWN);
                job_free(m->listing);
                m->listing = NULL;
        }
        manager_exit_if_done(m);
        return 0;
}

static void raise_fd_limit(void) {
        struct rlimit rl;

        /* Every image needs a few fds (its file, loop device, mount, layer); the hard limit is
         * what the unit allows. */
        if (getrlimit(RLIMIT_NOFILE, &rl) >= 0 && rl.rlim_cur < rl.rlim_max) {
                rl.rlim_cur = rl.rlim_max;
                (void) setrlimit(RLIMIT_NOFILE, &rl);
        }
}

/* For the bus interface and the unit jobs, below the daemon (manager.h). */
static const ManagerOps manager_ops = {
        .queue_transition = manager_queue_transition,
        .queue_follow = manager_queue_follow,
        .queue_commit = manager_queue_commit,
        .queue_confirm = manager_queue_confirm,
        .queue_machine = manager_queue_machine,
        .list_images = manager_list_images,
        .queue_transition_varlink = manager_queue_transition_varlink,
        .list_images_varlink = manager_list_images_varlink,
        .update_idle = manager_update_idle,
        .exit_if_done = manager_exit_if_done,
};

int daemon_run(const char *root, EngineConfig *config, const DaemonConfig *dconfig) {
        Manager m = { .ops = &manager_ops, .dconfig = *dconfig };
        _cleanup_free_ char *why = NULL;
        sigset_t ss;
        int r;

        log_set_prefix(NULL);
        r = dlopen_libsystemd(&why);
        if (r < 0)
                return log_error_errno(r, "Cannot run the daemon: %s", strna(why));
        raise_fd_limit();

        r = engine_new(root, config, &m.engine);
        if (r < 0)
                return log_error_errno(r, "Failed to open the root %s: %m", root ?: "/");
        /* A daemon that has gone hears of no machine: with FollowMachines=yes it stays. */
        if (m.dconfig.follow_machines && streq(m.engine->root, "/"))
                m.dconfig.idle_timeout_usec = 0;

        /* Probe the kernel once here: every worker is forked from this process and inherits
         * the answers instead of probing again. */
        kernel_probe_all();

        /* Before serving anyone: dm-verity devices a killed process left, and a transition a
         * crash interrupted. */
        if (kernel_has(KERNEL_DEVICE_MAPPER)) {
                r = verity_remove_stale_devices();
                if (r > 0)
                        log_info("Removed %i unused dm-verity device(s) of an earlier sysextd.", r);
        }
        (void) engine_recover(m.engine);
        {
                _cleanup_(engine_status_done) EngineStatus s = {};
                if (engine_status(m.engine, NULL, &s) >= 0)
                        m.generation = s.generation;
        }

        sigemptyset(&ss);
        sigaddset(&ss, SIGCHLD);
        sigaddset(&ss, SIGTERM);
        sigaddset(&ss, SIGINT);
        if (sigprocmask(SIG_BLOCK, &ss, NULL) < 0) {
                r = log_error_errno(errno, "Failed to block signals: %m");
                goto finish;
        }

        r = sd_event_default(&m.event);
        if (r < 0) {
                log_error_errno(r, "Failed to allocate the event loop: %m");
                goto finish;
        }
        (void) sd_event_add_signal(m.event, NULL, SIGTERM, on_sigterm, &m);
        (void) sd_event_add_signal(m.event, NULL, SIGINT, on_sigterm, &m);
        (void) sd_event_set_watchdog(m.event, true);

        r = sd_bus_open_system(&m.bus);
        if (r < 0) {
                log_error_errno(r, "Failed to connect to the system bus: %m");
                goto finish;
        }
        /* Serving nobody makes no sense: go when the bus does. */
        (void) sd_bus_set_exit_on_disconnect(m.bus, true);
        r = bus_service_register(&m);
        if (r < 0) {
                log_error_errno(r, "Failed to register the object: %m");
                goto finish;
        }
        r = sd_bus_request_name(m.bus, SYSEXTD_BUS_NAME, 0);
        if (r < 0) {
                log_error_errno(r, "Failed to acquire the name %s: %m", SYSEXTD_BUS_NAME);
                goto finish;
        }
        r = sd_bus_attach_event(m.bus, m.event, SD_EVENT_PRIORITY_NORMAL);
        if (r < 0) {
                log_error_errno(r, "Failed to attach the bus to the event loop: %m");
                goto finish;
        }
        /* systemd's varlink interfaces, on the sockets systemd passed (or our own below a root). */
        r = varlink_service_start(&m);
        if (r < 0) {
                log_error_errno(r, "Failed to serve varlink: %m");
                goto finish;
        }
        /* How the unit jobs of images that ship units end, watched from now on. */
        unit_jobs_watch(&m);
        /* FollowMachines=: machined's machines, listed and watched from now on. */
        machines_watch(&m);

        if (m.engine->result.recovered) {
                _cleanup_(engine_status_done) EngineStatus s = {};

                if (engine_status(m.engine, NULL, &s) >= 0)
                        bus_emit_tree_changed(&m, &s);
        }
        manager_after_recovery(&m, /* complete= */ true);
        {
                /* and the deadlines of a delayed transition and of a confirmation */
                _cleanup_(engine_status_done) EngineStatus s = {};

                if (engine_status(m.engine, NULL, &s) >= 0)
                        manager_emit_changes(&m, &s);
        }
        /* The live layers, watched from now on; what changed while no daemon watched is found
         * now. */
        if (layer_watch_start(&m) < 0)
                log_warning("Failed to watch the live layers; status still finds what changed under them.");
        manager_update_idle(&m);
        log_info("Serving %s for %s (generation %" PRIu64 ", %s mode).", SYSEXTD_BUS_NAME, m.engine->root, m.generation,
                 kernel_has_mount_beneath() ? "mount-beneath" : m.engine->config.allow_degraded ? "degraded" : "no-refresh");
        (void) sd_notify(false, "READY=1\nSTATUS=Idle.");

        r = sd_event_loop(m.event);
        if (r < 0)
                log_error_errno(r, "Event loop failed: %m");

        /* Answer what is still in the output queue, then go. */
        (void) sd_bus_flush(m.bus);

finish:
        while (m.queue) {
                Job *n = m.queue->next;
                /* A running worker is waited for: it holds the lock and must not be killed
                 * in the middle of a swap. */
                if (m.queue->pid > 0 && !m.queue->exited) {
                        (void) waitpid(m.queue->pid, NULL, 0);
                        m.queue->exited = true;
                }
                job_free(m.queue);
                m.queue = n;
        }
        job_free(m.listing);
        manager_drop_status_snapshot(&m);
        m.status_snapshot_drop = sd_event_source_disable_unref(m.status_snapshot_drop);
        m.trim_timer = sd_event_source_disable_unref(m.trim_timer);
        m.post_job = sd_event_source_disable_unref(m.post_job);
        m.post_job_timer = sd_event_source_disable_unref(m.post_job_timer);
        post_status_free(&m);
        varlink_service_stop(&m);
        unit_jobs_done(&m);
        machines_done(&m);
        layer_watch_done(&m);
        json_object_putp(&m.list_cache);
        image_list_free(&m.cache);
        sd_event_source_disable_unref(m.idle_timer);
        sd_event_source_disable_unref(m.delay_timer);
        sd_event_source_disable_unref(m.confirm_timer);
        sd_bus_slot_unref(m.vtable_slot);
        sd_bus_flush_close_unref(m.bus);
        sd_event_unref(m.event);
        engine_free(m.engine);
        return r < 0 ? r : 0;
}
