/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * How the unit jobs of images that ship units end (units.h), in the bus process.
 *
 * A transition's worker reloads the service manager and queues the jobs (never waiting for
 * them) and lists them in its report (a start of a unit an image enables is queued, and
 * listed, only when what it is enabled for is being started).  Here, from the start of the daemon, the manager's
 * JobRemoved signals are watched (after Subscribe(), which makes systemd send them to us
 * whoever queued the job); the last UNIT_JOBS_SEEN_MAX are kept, because a job can end before
 * the worker's report arrives.  The report's jobs are the UnitJobs property ("" while a job
 * runs); when the last one ends, UnitJobsFinished(generation, jobs) is emitted.  A later
 * transition's jobs replace those of an earlier one.  Nothing here ever blocks the bus loop or
 * the queue of transitions.
 */
#include <string.h>

#include "bus-api.h"
#include "json-util.h"
#include "log.h"
#include "unit-jobs.h"
#include "util.h"

#define UNIT_STRING_MAX 1024
/* How long a queued job is reported on: one whose JobRemoved never comes (the manager went
 * away, the signal was missed) then ends as "unknown", so it holds nothing up for ever, the
 * daemon's idle exit included. */
#define UNIT_JOBS_WAIT_USEC (15ULL * 60ULL * 1000000ULL)

static void unit_jobs_changed(Manager *m, bool finished_one);

static int on_unit_jobs_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        Manager *m = userdata;
        bool any = false;

        for (size_t i = 0; i < m->n_unit_jobs; i++)
                if (!m->unit_jobs[i].result) {
                        m->unit_jobs[i].result = strdup("unknown");
                        any = any || m->unit_jobs[i].result;
                        log_warning("No word from the service manager on the %s of %s (extension %s) after %llu s; no longer waiting for it.",
                                    m->unit_jobs[i].action, m->unit_jobs[i].unit, m->unit_jobs[i].image,
                                    UNIT_JOBS_WAIT_USEC / 1000000ULL);
                }
        m->unit_jobs_timer = sd_event_source_unref(m->unit_jobs_timer);
        if (any)
                unit_jobs_changed(m, true);
        return 0;
}

static void unit_job_free_all(Manager *m) {
        m->unit_jobs_timer = sd_event_source_disable_unref(m->unit_jobs_timer);
        for (size_t i = 0; i < m->n_unit_jobs; i++) {
                free(m->unit_jobs[i].unit);
                free(m->unit_jobs[i].action);
                free(m->unit_jobs[i].image);
                free(m->unit_jobs[i].job);
                free(m->unit_jobs[i].result);
        }
        free(m->unit_jobs);
        m->unit_jobs = NULL;
        m->n_unit_jobs = 0;
}

size_t unit_jobs_pending(const Manager *m) {
        size_t n = 0;

        for (size_t i = 0; i < m->n_unit_jobs; i++)
                if (!m->unit_jobs[i].result)
                        n++;
        return n;
}

static void bus_emit_unit_jobs_finished(Manager *m) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *signal = NULL;
        int r;

        r = sd_bus_message_new_signal(m->bus, &signal, SYSEXTD_BUS_PATH, SYSEXTD_BUS_INTERFACE, "UnitJobsFinished");
        if (r >= 0)
                r = sd_bus_message_append(signal, "t", m->unit_jobs_generation);
        if (r >= 0)
                r = bus_append_unit_jobs(signal, m);
        if (r >= 0)
                r = sd_bus_send(m->bus, signal, NULL);
        if (r < 0)
                log_warning_errno(r, "Failed to send UnitJobsFinished: %m");
}

static void unit_jobs_changed(Manager *m, bool finished_one) {
        (void) sd_bus_emit_properties_changed(m->bus, SYSEXTD_BUS_PATH, SYSEXTD_BUS_INTERFACE, "UnitJobs", NULL);
        if (finished_one && m->n_unit_jobs > 0 && unit_jobs_pending(m) == 0) {
                bus_emit_unit_jobs_finished(m);
                m->ops->update_idle(m);
        }
}

/* Sets the result of the job with this path; true if it is one of ours. */
static bool record_result(Manager *m, const char *job, const char *result) {
        for (size_t i = 0; i < m->n_unit_jobs; i++) {
                UnitJob *u = &m->unit_jobs[i];

                if (u->job && !u->result && streq(u->job, job)) {
                        u->result = strdup(result);
                        if (!u->result)
                                return false;
                        if (streq(result, "done"))
                                log_info("The %s of %s (extension %s) is done.", u->action, u->unit, u->image);
                        else
                                log_warning("The %s of %s (extension %s) ended '%s'.", u->action, u->unit, u->image,
                                            result);
                        return true;
                }
        }
        return false;
}

static int on_job_removed(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;
        const char *path, *unit, *result;
        SeenJob *s;
        uint32_t id;

        if (sd_bus_message_read(msg, "uoss", &id, &path, &unit, &result) < 0)
                return 0;
        s = &m->seen[m->seen_next];
        free(s->job), free(s->result);
        s->job = strdup(path);
        s->result = strdup(result);
        if (!s->job || !s->result) {
                free(s->job), free(s->result);
                s->job = s->result = NULL;
        }
        m->seen_next = (m->seen_next + 1) % UNIT_JOBS_SEEN_MAX;
        if (record_result(m, path, result))
                unit_jobs_changed(m, true);
        return 0;
}

void unit_jobs_watch(Manager *m) {
        int r;

        /* Only our own root's units are ever restarted (never under --root=). */
        if (!streq(m->engine->root, "/"))
                return;
        r = sd_bus_match_signal(m->bus, &m->job_removed_slot, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                                "org.freedesktop.systemd1.Manager", "JobRemoved", on_job_removed, m);
        if (r < 0) {
                log_debug("Failed to watch the service manager's jobs: %s", strerror(-r));
                return;
        }
        /* Asynchronous, unanswered: a bus without systemd on it just says no. */
        (void) sd_bus_call_method_async(m->bus, NULL, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                                        "org.freedesktop.systemd1.Manager", "Subscribe", NULL, NULL, NULL);
}

void unit_jobs_take(Manager *m, json_object *jobs, uint64_t generation) {
        size_t n = jobs ? json_object_array_length(jobs) : 0;
        UnitJob *l;
        bool any_ended = false;

        if (n == 0)
                return;
        l = calloc(n, sizeof(UnitJob));
        if (!l) {
                log_warning("Out of memory: the unit jobs of generation %" PRIu64 " are not reported.", generation);
                return;
        }
        unit_job_free_all(m);
        m->unit_jobs = l;
        m->unit_jobs_generation = generation;
        for (size_t i = 0; i < n; i++) {
                json_object *o = json_object_array_get_idx(jobs, i);
                UnitJob *u = &m->unit_jobs[m->n_unit_jobs];

                if (json_get_string(o, "unit", UNIT_STRING_MAX, &u->unit) < 0 ||
                    json_get_string(o, "action", UNIT_STRING_MAX, &u->action) < 0 ||
                    json_get_string(o, "image", UNIT_STRING_MAX, &u->image) < 0) {
                        free(u->unit), free(u->action), free(u->image);
                        *u = (UnitJob) {};
                        continue;
                }
                m->n_unit_jobs++;
                if (json_get_string(o, "job", UNIT_STRING_MAX, &u->job) < 0) {
                        u->job = NULL;
                        u->result = strdup("not-queued");
                        any_ended = true;
                        continue;
                }
                /* Ended already, before the report came? */
                for (size_t k = 0; k < UNIT_JOBS_SEEN_MAX; k++)
                        if (m->seen[k].job && m->seen[k].result && streq(m->seen[k].job, u->job)) {
                                any_ended = record_result(m, u->job, m->seen[k].result) || any_ended;
                                break;
                        }
        }
        if (unit_jobs_pending(m) > 0 &&
            sd_event_add_time_relative(m->event, &m->unit_jobs_timer, CLOCK_MONOTONIC, UNIT_JOBS_WAIT_USEC, 0,
                                       on_unit_jobs_timeout, m) < 0)
                log_warning("Failed to arm the timer for the unit jobs of generation %" PRIu64 "; they are reported while the daemon runs.",
                            generation);
        unit_jobs_changed(m, any_ended);
        m->ops->update_idle(m);
}

void unit_jobs_done(Manager *m) {
        unit_job_free_all(m);
        for (size_t k = 0; k < UNIT_JOBS_SEEN_MAX; k++) {
                free(m->seen[k].job);
                free(m->seen[k].result);
                m->seen[k] = (SeenJob) {};
        }
        m->job_removed_slot = sd_bus_slot_unref(m->job_removed_slot);
}

/* a(ssss): unit, action, image, result ("" while the job runs). */
int bus_append_unit_jobs(sd_bus_message *reply, const Manager *m) {
        int r = sd_bus_message_open_container(reply, 'a', SYSEXTD_UNIT_JOB_STRUCT);

        for (size_t i = 0; r >= 0 && i < m->n_unit_jobs; i++) {
                const UnitJob *u = &m->unit_jobs[i];

                _cleanup_free_ char *unit = NULL, *image = NULL, *result = NULL;

                /* The names come from images (through the journal): made safe for the bus. */
                r = sd_bus_message_append(reply, SYSEXTD_UNIT_JOB_STRUCT, string_safe(u->unit, &unit), u->action,
                                          string_safe(u->image, &image), string_safe(u->result ?: "", &result));
        }
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        return r;
}
