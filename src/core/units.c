/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Images that ship units (units.h): the plan is pure, from the images before and after a
 * transition; running it talks to systemd over the system bus, as systemctl does.
 */
#include <stdio.h>
#include <string.h>
#include <systemd/sd-bus.h>

#include "log.h"
#include "units.h"
#include "util.h"

#define MANAGER_CALL_TIMEOUT_USEC (120ULL * 1000000ULL)
#define JOB_WAIT_USEC (90ULL * 1000000ULL)

void unit_actions_done(UnitActions *a) {
        strv_free(a->restart);
        strv_free(a->reload_or_restart);
        strv_free(a->warnings);
        *a = (UnitActions) {};
}

bool unit_name_valid(const char *name) {
        static const char *const types[] = { ".service", ".socket", ".target", ".device", ".mount", ".automount",
                                             ".swap", ".timer", ".path", ".slice", ".scope" };
        const char *at, *dot;
        bool typed = false;

        if (isempty(name) || strlen(name) > 255 || !utf8_is_valid(name))
                return false;
        for (const char *c = name; *c; c++)
                if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
                      strchr(":-_.\\@", *c)))
                        return false;
        for (size_t i = 0; i < ELEMENTSOF(types); i++)
                if (endswith(name, types[i]) && strlen(name) > strlen(types[i]))
                        typed = true;
        if (!typed || name[0] == '.' || name[0] == '@')
                return false;
        dot = strrchr(name, '.');
        at = strchr(name, '@');
        /* foo@bar.service is an instance; foo@.service a template, which cannot run. */
        if (at && (at + 1 == dot || strchr(at + 1, '@')))
                return false;
        return true;
}

static const Image *find(const ImageList *l, const Image *img) {
        for (size_t i = 0; i < l->n; i++)
                if (l->images[i].verdict == IMAGE_COMPATIBLE && l->images[i].klass == img->klass &&
                    streq(l->images[i].name, img->name))
                        return &l->images[i];
        return NULL;
}

static bool same_image(const Image *a, const Image *b) {
        return streq_ptr(a->path, b->path) && a->st.st_dev == b->st.st_dev && a->st.st_ino == b->st.st_ino &&
               a->st.st_size == b->st.st_size && a->st.st_mtim.tv_sec == b->st.st_mtim.tv_sec &&
               a->st.st_mtim.tv_nsec == b->st.st_mtim.tv_nsec && a->stamp == b->stamp;
}

static int add_units(UnitActions *a, char ***list, char *const *units, const Image *img, const char *key) {
        STRV_FOREACH(u, units) {
                if (!unit_name_valid(*u)) {
                        char *w;
                        _cleanup_free_ char *safe = NULL;

                        if (asprintf(&w, "Invalid unit name '%s' in %s= of %s, ignoring.", string_safe(*u, &safe), key,
                                     img->name) < 0 ||
                            strv_push(&a->warnings, w) < 0)
                                return -ENOMEM;
                        continue;
                }
                if (!strv_contains(*list, *u) && strv_extend(list, *u) < 0)
                        return -ENOMEM;
        }
        return 0;
}

/* An image the transition added, removed or changed: what it asks for. */
static int consider(UnitActions *a, const Image *img) {
        int r;

        if (img->reload_manager || strv_length(img->restart_units) > 0 || strv_length(img->reload_or_restart_units) > 0)
                a->reload = true;
        r = add_units(a, &a->restart, img->restart_units, img, "EXTENSION_RESTART_UNITS");
        if (r >= 0)
                r = add_units(a, &a->reload_or_restart, img->reload_or_restart_units, img, "EXTENSION_RELOAD_OR_RESTART_UNITS");
        return r;
}

int unit_actions_plan(const ImageList *before, const ImageList *after, unsigned classes, UnitActions *ret) {
        UnitActions a = {};
        int r = 0;

        for (size_t i = 0; r >= 0 && i < after->n; i++) {
                const Image *img = &after->images[i], *old;

                if (img->verdict != IMAGE_COMPATIBLE || !(classes & (1u << img->klass)))
                        continue;
                old = find(before, img);
                if (old && same_image(old, img))
                        continue;
                r = consider(&a, img); /* added or changed */
                if (r >= 0 && old)
                        r = consider(&a, old);
        }
        for (size_t i = 0; r >= 0 && i < before->n; i++) {
                const Image *img = &before->images[i];

                if (img->verdict == IMAGE_COMPATIBLE && (classes & (1u << img->klass)) && !find(after, img))
                        r = consider(&a, img); /* removed */
        }
        if (r < 0) {
                unit_actions_done(&a);
                return r;
        }
        /* EXTENSION_RESTART_UNITS= wins. */
        for (size_t i = 0; a.reload_or_restart && a.reload_or_restart[i];) {
                if (strv_contains(a.restart, a.reload_or_restart[i])) {
                        free(a.reload_or_restart[i]);
                        memmove(&a.reload_or_restart[i], &a.reload_or_restart[i + 1],
                                sizeof(char *) * (strv_length(a.reload_or_restart + i + 1) + 1));
                } else
                        i++;
        }
        *ret = a;
        return 0;
}

typedef struct JobWait {
        const char *path;
        bool done;
        char *result;
} JobWait;

static int on_job_removed(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        JobWait *w = userdata;
        const char *path, *unit, *result;
        uint32_t id;

        if (sd_bus_message_read(m, "uoss", &id, &path, &unit, &result) < 0)
                return 0;
        if (w->path && streq(path, w->path)) {
                w->done = true;
                free(w->result);
                w->result = strdup(result);
        }
        return 0;
}

/* Calls METHOD(unit, "replace") and waits for its job.  1 done, 0 the unit does not exist
 * (NoSuchUnit, LoadFailed), < 0 failed (logged). */
static int unit_job(sd_bus *bus, const char *method, const char *unit) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_(sd_bus_slot_unrefp) sd_bus_slot *slot = NULL;
        JobWait w = {};
        uint64_t deadline;
        int r;

        r = sd_bus_match_signal(bus, &slot, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                                "org.freedesktop.systemd1.Manager", "JobRemoved", on_job_removed, &w);
        if (r < 0)
                return log_warning_errno(r, "Failed to watch the jobs of the service manager: %m");
        r = sd_bus_call_method(bus, "org.freedesktop.systemd1", "/org/freedesktop/systemd1", "org.freedesktop.systemd1.Manager",
                               method, &error, &reply, "ss", unit, "replace");
        if (r < 0) {
                if (sd_bus_error_has_names(&error, "org.freedesktop.systemd1.NoSuchUnit", "org.freedesktop.systemd1.LoadFailed"))
                        return 0;
                log_warning("Failed to %s %s: %s", method, unit, error.message ?: strerror(-r));
                return r;
        }
        r = sd_bus_message_read(reply, "o", &w.path);
        if (r < 0)
                return log_warning_errno(r, "Failed to read the job of %s: %m", unit);
        deadline = now_monotonic_usec() + JOB_WAIT_USEC;
        while (!w.done) {
                uint64_t now = now_monotonic_usec();

                if (now >= deadline) {
                        log_warning("The job to %s %s did not finish in %llu s; not waiting for it any more.", method, unit,
                                    (unsigned long long) (JOB_WAIT_USEC / 1000000ULL));
                        return -ETIMEDOUT;
                }
                r = sd_bus_process(bus, NULL);
                if (r < 0)
                        return log_warning_errno(r, "Failed to wait for the job of %s: %m", unit);
                if (r == 0)
                        (void) sd_bus_wait(bus, deadline - now);
        }
        if (!streq_ptr(w.result, "done"))
                log_warning("The job to %s %s ended '%s'.", method, unit, strna(w.result));
        free(w.result);
        return 1;
}

static void run_list(sd_bus *bus, const char *method, char *const *units) {
        STRV_FOREACH(u, units) {
                int r = unit_job(bus, method, *u);

                if (r == 0) {
                        /* Gone, e.g. shipped by the extension that went: stop what runs. */
                        r = unit_job(bus, "StopUnit", *u);
                        if (r == 0)
                                log_debug("Unit '%s' is already gone, nothing to stop.", *u);
                        else if (r > 0)
                                log_info("Stopped %s, whose unit is gone.", *u);
                } else if (r > 0)
                        log_info("%s %s.", streq(method, "RestartUnit") ? "Restarted" : "Reloaded or restarted", *u);
        }
}

void unit_actions_run(const UnitActions *a) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        int r;

        STRV_FOREACH(w, a->warnings)
                log_warning("%s", *w);
        if (!a->reload)
                return;
        r = sd_bus_open_system(&bus);
        if (r < 0) {
                log_warning_errno(r, "Failed to connect to the system bus to reload the service manager: %m");
                return;
        }
        {
                _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;

                r = sd_bus_message_new_method_call(bus, &m, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                                                   "org.freedesktop.systemd1.Manager", "Reload");
                if (r >= 0)
                        r = sd_bus_call(bus, m, MANAGER_CALL_TIMEOUT_USEC, &error, NULL);
        }
        if (r < 0) {
                log_warning("Failed to reload the service manager: %s", error.message ?: strerror(-r));
                return;
        }
        log_info("Reloaded the service manager (an extension ships units).");
        run_list(bus, "RestartUnit", a->restart);
        run_list(bus, "ReloadOrRestartUnit", a->reload_or_restart);
}
