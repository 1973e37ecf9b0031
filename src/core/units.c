/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Images that ship units (units.h).
 *
 *   1. probe (image.c, with unit-files.c): unit_files_scan() records every unit file and
 *      drop-in the image ships (Image.shipped_units), unit_wanted_scan() the links that enable
 *      a unit, T.wants/U and T.requires/U (Image.wanted_units), read from its own layer beneath
 *      its root, no symlink followed; kept in the journal with the image
 *   2. plan (pure): unit_actions_plan() from the images before and after a transition: which
 *      units to stop, restart or reload-or-restart, and the names refused, with the reason;
 *      and the candidates for a start: units an added or changed image with
 *      EXTENSION_RELOAD_MANAGER=1 newly enables and ships, each with what it is enabled for
 *   3. run: reload the service manager (synchronous, bounded), then enqueue the jobs and
 *      never wait for them; a candidate start only if a unit it is enabled for is being
 *      started (asked of the manager now: at boot, multi-user.target's start job was computed
 *      before the merge, and a reload adds no job), otherwise it is dropped without a word.
 *      The command line enqueues them itself; the daemon's worker enqueues them and its bus
 *      process reports how they ended (src/daemon/unit-jobs.c).
 * Nothing here changes a tree: a failure in 3 is a warning.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "units.h"
#include "util.h"

#define MANAGER_CALL_TIMEOUT_USEC (120ULL * 1000000ULL)
#define JOB_CALL_TIMEOUT_USEC (25ULL * 1000000ULL)
#define MANAGER_PRIVATE_SOCKET "/run/systemd/private"
#define MANAGER_PRIVATE_ADDRESS "unix:path=" MANAGER_PRIVATE_SOCKET
#define MANAGER_SERVICE "org.freedesktop.systemd1"
#define MANAGER_PATH "/org/freedesktop/systemd1"
#define MANAGER_INTERFACE "org.freedesktop.systemd1.Manager"

static const char *const kind_names[_UNIT_JOB_KIND_MAX] = {
        [UNIT_JOB_STOP] = "stop",
        [UNIT_JOB_RESTART] = "restart",
        [UNIT_JOB_RELOAD_OR_RESTART] = "reload-or-restart",
        [UNIT_JOB_START] = "start",
};

static const char *const kind_methods[_UNIT_JOB_KIND_MAX] = {
        [UNIT_JOB_STOP] = "StopUnit",
        [UNIT_JOB_RESTART] = "RestartUnit",
        [UNIT_JOB_RELOAD_OR_RESTART] = "ReloadOrRestartUnit",
        [UNIT_JOB_START] = "StartUnit",
};

const char *unit_job_kind_to_string(UnitJobKind k) {
        return k >= 0 && k < _UNIT_JOB_KIND_MAX ? kind_names[k] : NULL;
}

int unit_job_kind_from_string(const char *s) {
        int i = s ? string_table_find(kind_names, _UNIT_JOB_KIND_MAX, s) : -1;
        return i >= 0 ? i : -EINVAL;
}

const char *unit_job_kind_method(UnitJobKind k) {
        return k >= 0 && k < _UNIT_JOB_KIND_MAX ? kind_methods[k] : NULL;
}

void unit_actions_done(UnitActions *a) {
        for (size_t i = 0; i < a->n; i++) {
                free(a->actions[i].unit);
                free(a->actions[i].image);
                strv_free(a->actions[i].wanted_by);
                free(a->actions[i].job);
                free(a->actions[i].error);
        }
        free(a->actions);
        strv_free(a->warnings);
        *a = (UnitActions) {};
}

/* ---- the plan ------------------------------------------------------------------------- */

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

static int warn(UnitActions *a, const char *fmt, ...) _printf_(2, 3);
static int warn(UnitActions *a, const char *fmt, ...) {
        va_list ap;
        char *w;
        int r;

        va_start(ap, fmt);
        r = vasprintf(&w, fmt, ap);
        va_end(ap);
        if (r < 0)
                return -ENOMEM;
        return strv_push(&a->warnings, w);
}

/* Whether a job of kind k replaces one of kind old for the same unit: a restart wins over a
 * reload-or-restart, either over a stop (a unit still there) and over a start (it starts the
 * unit whatever its targets do).  A start replaces nothing: a unit an image enables is one it
 * ships, so no stop is planned for it, and a restart or reload-or-restart starts it anyway. */
static bool kind_wins(UnitJobKind k, UnitJobKind old) {
        switch (old) {
        case UNIT_JOB_STOP:
        case UNIT_JOB_START:
                return IN_SET(k, UNIT_JOB_RESTART, UNIT_JOB_RELOAD_OR_RESTART);
        case UNIT_JOB_RELOAD_OR_RESTART:
                return k == UNIT_JOB_RESTART;
        default:
                return false;
        }
}

/* wanted_by: for a start, the unit it is enabled for (T of T.wants/U). */
static int add_action(UnitActions *a, const char *unit, UnitJobKind kind, const char *image, const char *wanted_by) {
        UnitAction *n;

        for (size_t i = 0; i < a->n; i++) {
                UnitAction *x = &a->actions[i];

                if (!streq(x->unit, unit))
                        continue;
                if (kind_wins(kind, x->kind)) {
                        char *img = strdup(image);

                        if (!img)
                                return -ENOMEM;
                        free(x->image);
                        x->image = img;
                        x->kind = kind;
                        strv_free(x->wanted_by);
                        x->wanted_by = NULL;
                } else if (kind == UNIT_JOB_START && x->kind == UNIT_JOB_START && !strv_contains(x->wanted_by, wanted_by))
                        return strv_extend(&x->wanted_by, wanted_by); /* enabled for another unit too */
                return 0;
        }
        n = realloc(a->actions, sizeof(UnitAction) * (a->n + 1));
        if (!n)
                return -ENOMEM;
        a->actions = n;
        n[a->n] = (UnitAction) { .unit = strdup(unit), .kind = kind, .image = strdup(image) };
        if (!n[a->n].unit || !n[a->n].image || (wanted_by && strv_extend(&n[a->n].wanted_by, wanted_by) < 0)) {
                free(n[a->n].unit);
                free(n[a->n].image);
                strv_free(n[a->n].wanted_by);
                return -ENOMEM;
        }
        a->n++;
        return 0;
}

static const char *list_key(UnitJobKind k) {
        return k == UNIT_JOB_RESTART ? "EXTENSION_RESTART_UNITS" : "EXTENSION_RELOAD_OR_RESTART_UNITS";
}

static char *const *listed(const Image *img, UnitJobKind k) {
        return k == UNIT_JOB_RESTART ? img->restart_units : img->reload_or_restart_units;
}

static bool lists(const Image *img, const char *unit) {
        return strv_contains(img->restart_units, unit) || strv_contains(img->reload_or_restart_units, unit);
}

/* Whether the image enables its own unit through the link (T.wants/U, T.requires/U): one it
 * ships a unit file for (its template's for an instance), of a type an image may start. */
static bool enables_own(const Image *img, const char *link, char **ret_target, char **ret_unit) {
        _cleanup_free_ char *target = NULL, *unit = NULL;

        if (!img || !strv_contains(img->wanted_units, link) || unit_wanted_link_split(link, &target, &unit) < 0 ||
            unit_type_refused(unit) || unit_shipped(unit, img->shipped_units) != UNIT_SHIPPED_FILE)
                return false;
        if (ret_target)
                *ret_target = TAKE_PTR(target);
        if (ret_unit)
                *ret_unit = TAKE_PTR(unit);
        return true;
}

/* The units the image enables that it ships, to be started after the reload if what they are
 * enabled for is being started (at boot: the target's start job predates the merge, and a
 * reload adds no job).  Only with EXTENSION_RELOAD_MANAGER=1.  A link the image's previous
 * version (old) had, to a unit it shipped too, was a candidate when that version came. */
static int consider_enabled(UnitActions *a, const Image *img, const Image *old) {
        if (!img->reload_manager)
                return 0;
        STRV_FOREACH(l, img->wanted_units) {
                _cleanup_free_ char *target = NULL, *unit = NULL;
                int r;

                if (!enables_own(img, *l, &target, &unit) || enables_own(old, *l, NULL, NULL))
                        continue;
                r = add_action(a, unit, UNIT_JOB_START, img->name, target);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* An image that is merged after the transition (added, or the new version of a changed one,
 * old): the units it lists and ships, and those it enables. */
static int consider_present(UnitActions *a, const Image *img, const Image *old) {
        int r;

        if (img->reload_manager)
                a->reload = true;
        for (UnitJobKind k = UNIT_JOB_RESTART; k <= UNIT_JOB_RELOAD_OR_RESTART; k++)
                STRV_FOREACH(u, listed(img, k)) {
                        const char *type;

                        if (!unit_name_valid(*u)) {
                                _cleanup_free_ char *safe = NULL;

                                r = warn(a, "Invalid unit name '%s' in %s= of %s, ignoring.", string_safe(*u, &safe),
                                         list_key(k), img->name);
                        } else if ((type = unit_type_refused(*u)))
                                r = warn(a, "Extension %s lists %s in %s=, but %s are never restarted by an image, ignoring it.",
                                         img->name, *u, list_key(k), type);
                        else if (unit_shipped(*u, img->shipped_units) == UNIT_NOT_SHIPPED)
                                r = warn(a, "Extension %s ships no unit file or drop-in for %s, not restarting it.", img->name,
                                         *u);
                        else {
                                a->reload = true;
                                r = add_action(a, *u, k, img->name, NULL);
                        }
                        if (r < 0)
                                return r;
                }
        return consider_enabled(a, img, old);
}

/* Whether a unit file for the unit stays merged: shipped by an image after the transition,
 * or by an image of a class the transition did not cover. */
static bool file_stays(const ImageList *before, const ImageList *after, unsigned classes, const char *unit) {
        for (size_t i = 0; i < after->n; i++) {
                const Image *img = &after->images[i];

                if (img->verdict == IMAGE_COMPATIBLE && (classes & (1u << img->klass)) &&
                    unit_shipped(unit, img->shipped_units) == UNIT_SHIPPED_FILE)
                        return true;
        }
        for (size_t i = 0; i < before->n; i++) {
                const Image *img = &before->images[i];

                if (img->verdict == IMAGE_COMPATIBLE && !(classes & (1u << img->klass)) &&
                    unit_shipped(unit, img->shipped_units) == UNIT_SHIPPED_FILE)
                        return true;
        }
        return false;
}

/* An image that goes (removed, or the old version of a changed one, then now is the new):
 * the units it listed and shipped.  Its refused names were reported when it came. */
static int consider_gone(UnitActions *a, const Image *old, const Image *now, const ImageList *before,
                         const ImageList *after, unsigned classes) {
        int r;

        if (old->reload_manager)
                a->reload = true;
        for (UnitJobKind k = UNIT_JOB_RESTART; k <= UNIT_JOB_RELOAD_OR_RESTART; k++)
                STRV_FOREACH(u, listed(old, k)) {
                        UnitShipped s;

                        if (!unit_name_valid(*u) || unit_type_refused(*u))
                                continue;
                        s = unit_shipped(*u, old->shipped_units);
                        if (s == UNIT_NOT_SHIPPED)
                                continue;
                        a->reload = true;
                        if (now && lists(now, *u) && unit_shipped(*u, now->shipped_units) != UNIT_NOT_SHIPPED)
                                continue; /* the new version asks for it itself */
                        if (s == UNIT_SHIPPED_FILE && !file_stays(before, after, classes, *u))
                                r = add_action(a, *u, UNIT_JOB_STOP, old->name, NULL); /* its unit went */
                        else
                                r = add_action(a, *u, k, old->name, NULL); /* the unit stays, changed */
                        if (r < 0)
                                return r;
                }
        return 0;
}

static int by_kind(const void *x, const void *y) {
        const UnitAction *a = x, *b = y;
        return a->kind != b->kind ? (a->kind < b->kind ? -1 : 1) : 0;
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
                r = consider_present(&a, img, old); /* added or changed */
                if (r >= 0 && old)
                        r = consider_gone(&a, old, img, before, after, classes);
        }
        for (size_t i = 0; r >= 0 && i < before->n; i++) {
                const Image *img = &before->images[i];

                if (img->verdict == IMAGE_COMPATIBLE && (classes & (1u << img->klass)) && !find(after, img))
                        r = consider_gone(&a, img, NULL, before, after, classes); /* removed */
        }
        if (r < 0) {
                unit_actions_done(&a);
                return r;
        }
        /* Stops first, then restarts, then reloads-or-restarts, then starts; in the order listed
         * within each (insertion sort: qsort is not stable). */
        for (size_t i = 1; i < a.n; i++)
                for (size_t j = i; j > 0 && by_kind(&a.actions[j - 1], &a.actions[j]) > 0; j--) {
                        UnitAction t = a.actions[j];
                        a.actions[j] = a.actions[j - 1];
                        a.actions[j - 1] = t;
                }
        *ret = a;
        return 0;
}

/* ---- running it ----------------------------------------------------------------------- */

int unit_manager_connect(sd_bus **ret) {
        _cleanup_free_ char *why = NULL;
        int r;

        r = dlopen_libsystemd(&why);
        if (r < 0) {
                log_debug("Cannot talk to the service manager: %s", strna(why));
                return r;
        }

        /* As systemd's bus_connect_system_systemd(): the manager's private socket for root,
         * which exists before the system bus does (early boot). */
        if (geteuid() == 0 && !getenv("DBUS_SYSTEM_BUS_ADDRESS") && access(MANAGER_PRIVATE_SOCKET, F_OK) >= 0) {
                _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;

                r = sd_bus_new(&bus);
                if (r >= 0)
                        r = sd_bus_set_address(bus, MANAGER_PRIVATE_ADDRESS);
                if (r >= 0)
                        r = sd_bus_start(bus);
                if (r >= 0) {
                        *ret = TAKE_PTR(bus);
                        return 0;
                }
                log_debug("Failed to connect to the service manager's private socket, trying the system bus: %s",
                          strerror(-r));
        }
        return sd_bus_open_system(ret);
}

static int manager_reload(sd_bus *bus, char **ret_error) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        int r;

        r = sd_bus_message_new_method_call(bus, &m, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                                           "org.freedesktop.systemd1.Manager", "Reload");
        if (r >= 0)
                r = sd_bus_call(bus, m, MANAGER_CALL_TIMEOUT_USEC, &error, NULL);
        if (r < 0)
                *ret_error = strdup(error.message ?: strerror(-r));
        return r;
}

static int call_job(sd_bus *bus, const char *method, const char *unit, char **ret_job, sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL, *reply = NULL;
        const char *path;
        int r;

        r = sd_bus_message_new_method_call(bus, &m, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                                           "org.freedesktop.systemd1.Manager", method);
        if (r >= 0)
                r = sd_bus_message_append(m, "ss", unit, "replace");
        if (r >= 0)
                r = sd_bus_call(bus, m, JOB_CALL_TIMEOUT_USEC, error, &reply);
        if (r >= 0)
                r = sd_bus_message_read(reply, "o", &path);
        if (r < 0)
                return r;
        *ret_job = strdup(path);
        return *ret_job ? 0 : -ENOMEM;
}

int unit_job_enqueue(sd_bus *bus, const UnitAction *a, char **ret_job, UnitJobKind *ret_kind, char **ret_error) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        UnitJobKind kind = a->kind;
        int r;

        r = call_job(bus, unit_job_kind_method(kind), a->unit, ret_job, &error);
        /* Its unit file is gone (another image's went with it): stop what runs.  Not on
         * LoadFailed: a unit file that does not parse is no reason to stop a running service.
         * Never for a start: what is not there is not started. */
        if (r < 0 && IN_SET(kind, UNIT_JOB_RESTART, UNIT_JOB_RELOAD_OR_RESTART) &&
            sd_bus_error_has_name(&error, "org.freedesktop.systemd1.NoSuchUnit")) {
                sd_bus_error_free(&error);
                kind = UNIT_JOB_STOP;
                r = call_job(bus, "StopUnit", a->unit, ret_job, &error);
        }
        if (r < 0) {
                *ret_error = strdup(error.message ?: strerror(-r));
                return r;
        }
        *ret_kind = kind;
        return 0;
}

/* Whether the unit is being started: its ActiveState is "activating", or a start (or restart)
 * job is queued for it.  A target has no "activating" state: at boot, multi-user.target is
 * "inactive" with a start job waiting for what it is ordered after.  A unit not loaded is not
 * being started.  1 yes, 0 no, < 0 could not tell (*ret_error: why).  Logs nothing. */
static int unit_being_started(sd_bus *bus, const char *unit, char **ret_error) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_free_ char *path = NULL, *state = NULL, *job = NULL, *type = NULL;
        const char *s;
        uint32_t id = 0;
        int r;

        r = sd_bus_call_method(bus, MANAGER_SERVICE, MANAGER_PATH, MANAGER_INTERFACE, "GetUnit", &error, &reply, "s", unit);
        if (r < 0 && sd_bus_error_has_name(&error, "org.freedesktop.systemd1.NoSuchUnit"))
                return 0;
        if (r >= 0)
                r = sd_bus_message_read(reply, "o", &s);
        if (r >= 0 && !(path = strdup(s)))
                r = -ENOMEM;
        reply = sd_bus_message_unref(reply);
        if (r >= 0)
                r = sd_bus_get_property_string(bus, MANAGER_SERVICE, path, "org.freedesktop.systemd1.Unit", "ActiveState",
                                               &error, &state);
        if (r >= 0 && streq(state, "activating"))
                return 1;
        if (r >= 0)
                r = sd_bus_get_property(bus, MANAGER_SERVICE, path, "org.freedesktop.systemd1.Unit", "Job", &error, &reply,
                                        "(uo)");
        if (r >= 0)
                r = sd_bus_message_read(reply, "(uo)", &id, &s);
        if (r >= 0 && id != 0 && !(job = strdup(s)))
                r = -ENOMEM;
        if (r >= 0 && id == 0)
                return 0;
        if (r >= 0) {
                r = sd_bus_get_property_string(bus, MANAGER_SERVICE, job, "org.freedesktop.systemd1.Job", "JobType", &error,
                                               &type);
                /* The job ended meanwhile: the unit is no longer being started. */
                if (r < 0 && (sd_bus_error_has_name(&error, SD_BUS_ERROR_UNKNOWN_OBJECT) ||
                              sd_bus_error_has_name(&error, "org.freedesktop.systemd1.NoSuchJob")))
                        return 0;
        }
        if (r < 0) {
                *ret_error = strdup(error.message ?: strerror(-r));
                return r;
        }
        return STR_IN_SET(type, "start", "restart");
}

/* For a start: the first unit it is enabled for that is being started (*ret_target), each asked
 * once per run (starting, idle: the answers so far).  1 found, 0 none, < 0 could not tell
 * (*ret_target: about which, *ret_error: why). */
static int find_starting(sd_bus *bus, const UnitAction *x, char ***starting, char ***idle, const char **ret_target,
                         char **ret_error) {
        STRV_FOREACH(t, x->wanted_by) {
                int r;

                if (strv_contains(*starting, *t)) {
                        *ret_target = *t;
                        return 1;
                }
                if (strv_contains(*idle, *t))
                        continue;
                r = unit_being_started(bus, *t, ret_error);
                if (r < 0) {
                        *ret_target = *t;
                        return r;
                }
                (void) strv_extend(r > 0 ? starting : idle, *t); /* saves asking again, no more */
                if (r > 0) {
                        *ret_target = *t;
                        return 1;
                }
        }
        return 0;
}

int unit_actions_run(UnitActions *a) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        _cleanup_(strv_freep) char **starting = NULL, **idle = NULL;
        _cleanup_free_ char *error = NULL;
        int r;

        STRV_FOREACH(w, a->warnings)
                log_warning("%s", *w);
        if (!a->reload && a->n == 0)
                return 0;
        r = unit_manager_connect(&bus);
        if (r < 0)
                return log_warning_errno(r, "Failed to connect to the service manager to reload it: %m");
        r = manager_reload(bus, &error);
        if (r < 0) {
                log_warning("Failed to reload the service manager: %s", strna(error));
                return r;
        }
        log_info("Reloaded the service manager (an extension ships units).");
        for (size_t i = 0; i < a->n; i++) {
                UnitAction *x = &a->actions[i];
                const char *target = NULL;
                UnitJobKind kind;

                free(x->job), free(x->error);
                x->job = x->error = NULL;
                if (x->kind == UNIT_JOB_START) {
                        r = find_starting(bus, x, &starting, &idle, &target, &x->error);
                        if (r < 0) {
                                log_warning("Failed to learn whether %s is being started, not starting %s (extension %s): %s",
                                            target, x->unit, x->image, strna(x->error));
                                continue;
                        }
                        if (r == 0)
                                continue; /* enabling is not starting (as systemd-sysext): nothing said */
                }
                r = unit_job_enqueue(bus, x, &x->job, &kind, &x->error);
                if (r < 0)
                        log_warning("Failed to queue the %s of %s (for extension %s): %s", unit_job_kind_to_string(x->kind), x->unit,
                                    x->image, strna(x->error));
                else {
                        x->kind = kind;
                        if (target)
                                log_info("Queued start of %s (extension %s): it is enabled for %s, which is being started.",
                                         x->unit, x->image, target);
                        else
                                log_info("Queued %s of %s (extension %s).", unit_job_kind_to_string(kind), x->unit, x->image);
                }
        }
        return 1;
}
