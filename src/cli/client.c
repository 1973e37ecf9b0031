/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <inttypes.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bus-api.h"
#include "client.h"
#include "client-varlink.h"
#include "dlopen-systemd.h"
#include "fd-util.h"
#include "log.h"
#include "json-util.h"
#include "missing.h"
#include "output.h"
#include "util.h"

/* The root the call is for, canonical: sent with every call that takes options (the daemon
 * refuses one for another root), asked for before any other call (check_root()). */
static const char *wanted_root = NULL;

/* The options a call carries: the root, what was asked for, the daemon's configuration for
 * the rest. */
static int append_options(sd_bus_message *m, const EngineOptions *o) {
        static const char *const mutable_key[_IMAGE_CLASS_MAX] = { "sysext-mutable", "confext-mutable" };
        int r;

        r = sd_bus_message_open_container(m, 'a', "{sv}");
        if (r >= 0 && wanted_root)
                r = sd_bus_message_append(m, "{sv}", "root", "s", wanted_root);
        if (r >= 0 && o->force)
                r = sd_bus_message_append(m, "{sv}", "force", "b", 1);
        if (r >= 0 && o->always_refresh)
                r = sd_bus_message_append(m, "{sv}", "always-refresh", "b", 1);
        if (r >= 0 && o->strict)
                r = sd_bus_message_append(m, "{sv}", "strict", "b", 1);
        if (r >= 0 && o->no_reload)
                r = sd_bus_message_append(m, "{sv}", "no-reload", "b", 1);
        if (r >= 0 && o->noexec >= 0)
                r = sd_bus_message_append(m, "{sv}", "noexec", "b", o->noexec > 0);
        if (r >= 0 && o->policy >= 0)
                r = sd_bus_message_append(m, "{sv}", "image-policy", "s", image_policy_to_string(o->policy));
        if (r >= 0 && o->confirm_within_usec > 0)
                r = sd_bus_message_append(m, "{sv}", "confirm-within", "t", o->confirm_within_usec / 1000000ULL);
        if (r >= 0 && o->unpin)
                r = sd_bus_message_append(m, "{sv}", "unpin", "b", 1);
        if (r >= 0 && o->delay_usec != ENGINE_DELAY_CONFIG)
                r = sd_bus_message_append(m, "{sv}", "delay", "t",
                                          o->delay_usec == ENGINE_DELAY_DEFAULT ? UINT64_MAX : o->delay_usec / 1000000ULL);
        for (int k = 0; r >= 0 && k < _IMAGE_CLASS_MAX; k++) {
                if ((o->classes & (1u << k)))
                        r = sd_bus_message_append(m, "{sv}", "class", "s", image_class_to_string(k));
                if (r >= 0 && o->mutable[k] >= 0)
                        r = sd_bus_message_append(m, "{sv}", mutable_key[k], "s", mutable_mode_to_string(o->mutable[k]));
        }
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        return r;
}

/* Sends a call made ready and waits for the reply; a failure is printed as the daemon's message,
 * one line.  Returns 1 when the daemon found no (suitable) images, which is no failure. */
static int call_send(sd_bus *bus, sd_bus_message *m, sd_bus_message **ret) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        int r;

        r = sd_bus_call(bus, m, SYSEXTD_CALL_TIMEOUT_USEC, &error, ret);
        if (r < 0 && sd_bus_error_has_names(&error, SYSEXTD_ERROR_NO_IMAGES, SYSEXTD_ERROR_NO_SUITABLE_IMAGES)) {
                /* Nothing (suitable) to merge is no failure, as with systemd-sysext. */
                log_info("%s", error.message ?: "No extensions found.");
                return 1;
        }
        if (r < 0) {
                if (sd_bus_error_has_names(&error, SD_BUS_ERROR_SERVICE_UNKNOWN, SD_BUS_ERROR_NAME_HAS_NO_OWNER,
                                           "org.freedesktop.DBus.Error.Spawn.ServiceNotFound"))
                        log_error("The sysextd daemon is not available on the system bus (%s); start sysextd.service or use --no-bus.",
                                  error.message ?: error.name);
                else
                        log_error("%s", error.message ?: strerror(-r));
                return r;
        }
        return 0;
}

static int call(sd_bus *bus, const char *method, const EngineOptions *o, sd_bus_message **ret) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        int r;

        r = sd_bus_message_new_method_call(bus, &m, SYSEXTD_BUS_NAME, SYSEXTD_BUS_PATH, SYSEXTD_BUS_INTERFACE, method);
        if (r < 0)
                return log_error_errno(r, "Failed to create the bus message: %m");
        if (o) {
                r = append_options(m, o);
                if (r < 0)
                        return log_error_errno(r, "Failed to create the bus message: %m");
        }
        return call_send(bus, m, ret);
}

/* For calls without options: the daemon's root must be the one wanted. */
static int check_root(sd_bus *bus, const char *wanted) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_free_ char *served = NULL;
        int r;

        r = sd_bus_get_property_string(bus, SYSEXTD_BUS_NAME, SYSEXTD_BUS_PATH, SYSEXTD_BUS_INTERFACE, "Root", &error,
                                       &served);
        if (r < 0) {
                if (sd_bus_error_has_names(&error, SD_BUS_ERROR_SERVICE_UNKNOWN, SD_BUS_ERROR_NAME_HAS_NO_OWNER,
                                           "org.freedesktop.DBus.Error.Spawn.ServiceNotFound"))
                        return log_error_errno(r, "The sysextd daemon is not available on the system bus (%s); start sysextd.service or use --no-bus.",
                                               error.message ?: error.name);
                return log_error_errno(r, "Failed to ask the sysextd daemon for its root: %s", error.message ?: strerror(-r));
        }
        if (!streq(served, wanted))
                return log_error_errno(EXDEV, "The sysextd daemon serves %s, not %s; use --no-bus to work on %s.", served,
                                       wanted, wanted);
        return 0;
}

/* The reply of Merge, Refresh, Unmerge and Commit: (t generation, b changed, a(us) messages). */
static int print_transition_reply(sd_bus_message *reply, const OutputOptions *out) {
        uint64_t generation;
        int changed, r;
        uint32_t level;
        const char *text;

        r = sd_bus_message_read(reply, "tb", &generation, &changed);
        if (r < 0)
                return log_error_errno(r, "Failed to parse the reply: %m");
        r = sd_bus_message_enter_container(reply, 'a', "(us)");
        if (r < 0)
                return log_error_errno(r, "Failed to parse the reply: %m");
        while ((r = sd_bus_message_read(reply, "(us)", &level, &text)) > 0)
                if ((int) level <= log_get_max_level())
                        fprintf(stderr, "%s\n", text);
        if (r < 0)
                return log_error_errno(r, "Failed to parse the reply: %m");
        if (out->format == OUTPUT_JSON)
                printf("{\"generation\":%" PRIu64 ",\"changed\":%s}\n", generation, changed ? "true" : "false");
        return 0;
}

static int transition(sd_bus *bus, const char *method, const EngineOptions *o, const OutputOptions *out) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        int r;

        r = call(bus, method, o, &reply);
        if (r != 0)
                return r < 0 ? r : 0;
        return print_transition_reply(reply, out);
}

static int or_default(int v, int fallback) {
        return v < 0 ? fallback : v;
}

/* Rollback(t generation, a{sv} options). */
static int rollback(sd_bus *bus, const EngineOptions *o, const OutputOptions *out) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL, *reply = NULL;
        int r;

        r = sd_bus_message_new_method_call(bus, &m, SYSEXTD_BUS_NAME, SYSEXTD_BUS_PATH, SYSEXTD_BUS_INTERFACE, "Rollback");
        if (r >= 0)
                r = sd_bus_message_append(m, "t", o->rollback_to);
        if (r >= 0)
                r = append_options(m, o);
        if (r < 0)
                return log_error_errno(r, "Failed to create the bus message: %m");
        r = call_send(bus, m, &reply);
        if (r != 0)
                return r < 0 ? r : 0;
        return print_transition_reply(reply, out);
}

/* GetRollback(): the history, pins and deadline, into j (as the journal has them).  A daemon
 * that does not know the method has none to tell. */
static int get_rollback(sd_bus *bus, Journal *j) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        const char *reason, *err, *klass, *name, *version, *from, *path;
        uint64_t generation;
        int forced, r;

        r = sd_bus_call_method(bus, SYSEXTD_BUS_NAME, SYSEXTD_BUS_PATH, SYSEXTD_BUS_INTERFACE, "GetRollback", &error, &reply,
                               NULL);
        if (r < 0) {
                if (!sd_bus_error_has_name(&error, SD_BUS_ERROR_UNKNOWN_METHOD))
                        log_warning("Failed to ask for the generations and pins: %s", error.message ?: strerror(-r));
                return 0;
        }
        r = sd_bus_message_read(reply, SYSEXTD_CONFIRM_STRUCT SYSEXTD_LAST_ROLLBACK_STRUCT, &j->confirm_generation,
                                &j->confirm_since, &j->confirm_deadline, &j->confirm_target, &j->rollback_when,
                                &j->rollback_from, &j->rollback_to, &reason, &err);
        if (r < 0)
                return log_error_errno(r, "Failed to parse the generations: %m");
        if (!isempty(reason) && journal_set_rollback(j, j->rollback_when, j->rollback_from, j->rollback_to, reason,
                                                     isempty(err) ? NULL : err) < 0)
                return log_oom();
        r = sd_bus_message_enter_container(reply, 'a', SYSEXTD_PIN_STRUCT);
        while (r >= 0 && (r = sd_bus_message_read(reply, SYSEXTD_PIN_STRUCT, &klass, &name, &version, &from, &generation)) > 0) {
                Pin *n = realloc(j->pins.pins, sizeof(Pin) * (j->pins.n + 1));

                if (!n)
                        return log_oom();
                j->pins.pins = n;
                n[j->pins.n] = (Pin) {
                        .klass = or_default(image_class_from_string(klass), IMAGE_CLASS_SYSEXT),
                        .name = strdup(name),
                        .version = isempty(version) ? NULL : strdup(version),
                        .from_version = isempty(from) ? NULL : strdup(from),
                        .generation = generation,
                };
                if (!n[j->pins.n++].name)
                        return log_oom();
        }
        if (r >= 0)
                r = sd_bus_message_exit_container(reply);
        if (r >= 0)
                r = sd_bus_message_enter_container(reply, 'a', SYSEXTD_GENERATION_STRUCT);
        while (r >= 0 && (r = sd_bus_message_enter_container(reply, 'r', "ttba(ssss)")) > 0) {
                Generation g = {};

                r = sd_bus_message_read(reply, "ttb", &g.generation, &g.when, &forced);
                g.forced = forced;
                if (r >= 0)
                        r = sd_bus_message_enter_container(reply, 'a', "(ssss)");
                while (r >= 0 && (r = sd_bus_message_read(reply, "(ssss)", &klass, &name, &version, &path)) > 0) {
                        Image *n = realloc(g.images.images, sizeof(Image) * (g.images.n + 1));

                        if (!n) {
                                generation_done(&g);
                                return log_oom();
                        }
                        g.images.images = n;
                        n[g.images.n] = (Image) {
                                .klass = or_default(image_class_from_string(klass), IMAGE_CLASS_SYSEXT),
                                .name = strdup(name),
                                .path = strdup(path),
                                .version = isempty(version) ? NULL : strdup(version),
                                .verdict = IMAGE_COMPATIBLE,
                                .root_fd = -EBADF,
                        };
                        if (!n[g.images.n++].name || !n[g.images.n - 1].path) {
                                generation_done(&g);
                                return log_oom();
                        }
                }
                if (r >= 0)
                        r = sd_bus_message_exit_container(reply);
                if (r >= 0)
                        r = sd_bus_message_exit_container(reply);
                if (r >= 0)
                        r = generations_push(&j->generations, &j->n_generations, &g, JOURNAL_GENERATIONS_MAX);
                generation_done(&g);
        }
        if (r >= 0)
                r = sd_bus_message_exit_container(reply);
        if (r < 0)
                return log_error_errno(r, "Failed to parse the generations: %m");
        return 0;
}

/* Confirm(a{sv} options). */
static int confirm(sd_bus *bus, const OutputOptions *out) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL, *reply = NULL;
        int r;

        r = sd_bus_message_new_method_call(bus, &m, SYSEXTD_BUS_NAME, SYSEXTD_BUS_PATH, SYSEXTD_BUS_INTERFACE, "Confirm");
        if (r >= 0)
                r = sd_bus_message_append(m, "a{sv}", 0);
        if (r < 0)
                return log_error_errno(r, "Failed to create the bus message: %m");
        r = call_send(bus, m, &reply);
        if (r != 0)
                return r < 0 ? r : 0;
        return print_transition_reply(reply, out);
}

/* Commit with "pid" or "unit", or "all" when neither is named: as --no-bus, the command
 * without arguments commits everywhere (a process committing its own namespace calls Commit
 * itself, with no option). */
static int commit(sd_bus *bus, const ClientCommit *c, const OutputOptions *out) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL, *reply = NULL;
        int r;

        r = sd_bus_message_new_method_call(bus, &m, SYSEXTD_BUS_NAME, SYSEXTD_BUS_PATH, SYSEXTD_BUS_INTERFACE, "Commit");
        if (r >= 0)
                r = sd_bus_message_open_container(m, 'a', "{sv}");
        if (r >= 0) {
                if (c && c->pid > 0)
                        r = sd_bus_message_append(m, "{sv}", "pid", "u", (uint32_t) c->pid);
                else if (c && c->unit)
                        r = sd_bus_message_append(m, "{sv}", "unit", "s", c->unit);
                else
                        r = sd_bus_message_append(m, "{sv}", "all", "b", 1);
        }
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        if (r < 0)
                return log_error_errno(r, "Failed to create the bus message: %m");
        r = call_send(bus, m, &reply);
        if (r != 0)
                return r < 0 ? r : 0;
        return print_transition_reply(reply, out);
}

/* Follow or Unfollow, one call per PID, each with a pidfd of the process: the daemon is never
 * given a bare PID that another process may have by the time it looks.  Goes on after a
 * failure, as --no-bus does; returns the first. */
static int follow(sd_bus *bus, char *const *pids, bool start) {
        int ret = 0;

        STRV_FOREACH(p, pids) {
                _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL, *reply = NULL;
                _cleanup_close_ int fd = -EBADF;
                pid_t pid = (pid_t) atoi(*p); /* checked by the argument parser */
                int r;

                fd = sys_pidfd_open(pid, 0);
                if (fd < 0) {
                        if (errno == ESRCH)
                                r = log_error_errno(ESRCH, "No such process: %i", (int) pid);
                        else if (errno == ENOSYS)
                                r = log_error_errno(ENOSYS, "Cannot name process %i to the daemon: this kernel has no pidfd_open() (Linux 5.3).",
                                                    (int) pid);
                        else
                                r = log_error_errno(errno, "Failed to open process %i: %m", (int) pid);
                } else {
                        r = sd_bus_message_new_method_call(bus, &m, SYSEXTD_BUS_NAME, SYSEXTD_BUS_PATH, SYSEXTD_BUS_INTERFACE,
                                                           start ? "Follow" : "Unfollow");
                        if (r >= 0)
                                r = sd_bus_message_append(m, "h", fd);
                        if (r < 0)
                                r = log_error_errno(r, "Failed to create the bus message: %m");
                        else
                                r = call_send(bus, m, &reply);
                }
                if (r < 0 && ret == 0)
                        ret = r;
        }
        return ret;
}


static int list(sd_bus *bus, const EngineOptions *o, const OutputOptions *out) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_image_list_ ImageList l = {};
        _cleanup_json_ json_object *a = NULL;
        const char *name, *kind, *path, *status, *reason, *verity, *klass;
        int is_signed, r;

        r = call(bus, "ListImagesEx", o, &reply);
        if (r < 0)
                return r;
        r = sd_bus_message_enter_container(reply, 'a', SYSEXTD_IMAGE_EX_STRUCT);
        /* The same image records as in process, so that both print the same. */
        while (r >= 0 &&
               (r = sd_bus_message_read(reply, SYSEXTD_IMAGE_EX_STRUCT, &name, &kind, &path, &status, &reason, &verity,
                                        &is_signed, &klass)) > 0) {
                Image *n = realloc(l.images, sizeof(Image) * (l.n + 1)), *img;

                if (!n)
                        return log_oom();
                l.images = n;
                img = &l.images[l.n++];
                *img = (Image) {
                        .name = strdup(name),
                        .path = strdup(path),
                        .reason = isempty(reason) ? NULL : strdup(reason),
                        .kind = or_default(image_kind_from_string(kind), IMAGE_UNKNOWN),
                        .verdict = or_default(image_verdict_from_string(status), IMAGE_UNPROBED),
                        .verity = or_default(verity_mode_from_string(verity), VERITY_NONE),
                        .signed_valid = is_signed,
                        .klass = or_default(image_class_from_string(klass), IMAGE_CLASS_SYSEXT),
                        .root_fd = -EBADF,
                };
                if (!img->name || !img->path || (!isempty(reason) && !img->reason))
                        return log_oom();
        }
        if (r < 0)
                return log_error_errno(r, "Failed to parse the reply: %m");
        a = output_list_json(&l);
        {
                _cleanup_journal_ Journal history = {};

                if (get_rollback(bus, &history) >= 0)
                        output_list_pins(a, &history.pins);
        }
        output_list(a, out);
        return 0;
}

/* One entry of ListFollowed, as the engine's record (the hierarchies as trees that have only
 * their hierarchy), so that status prints it as --no-bus does. */
static int read_follower(sd_bus_message *reply, Follower *ret) {
        _cleanup_(follower_done) Follower f = {};
        _cleanup_strv_free_ char **hierarchies = NULL;
        const char *name, *machine, *error;
        int32_t pid;
        int r;

        r = sd_bus_message_enter_container(reply, 'r', "tisstasass");
        if (r <= 0)
                return r;
        r = sd_bus_message_read(reply, "tisst", &f.ns, &pid, &name, &machine, &f.generation);
        if (r >= 0)
                r = sd_bus_message_read_strv(reply, &hierarchies);
        if (r >= 0)
                r = sd_bus_message_read_strv(reply, &f.problems);
        if (r >= 0)
                r = sd_bus_message_read(reply, "s", &error);
        if (r >= 0)
                r = sd_bus_message_exit_container(reply);
        if (r < 0)
                return r;
        f.pid = pid;
        if ((!isempty(name) && !(f.name = strdup(name))) || (!isempty(machine) && !(f.machine = strdup(machine))) ||
            (!isempty(error) && !(f.error = strdup(error))))
                return -ENOMEM;
        STRV_FOREACH(h, hierarchies) {
                Tree t = { .hierarchy = strdup(*h) };

                if (!t.hierarchy || tree_list_add(&f.trees, &t) < 0) {
                        tree_done(&t);
                        return -ENOMEM;
                }
        }
        *ret = f;
        f = (Follower) {};
        return 1;
}

/* ListFollowed(): the namespaces that follow the host.  A daemon that does not know the method
 * (older than it) has none; one that cannot say is reported, and the rest of the status is
 * printed all the same. */
static int list_followed(sd_bus *bus, FollowerList *ret) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(follower_list_done) FollowerList l = {};
        int r;

        r = sd_bus_call_method(bus, SYSEXTD_BUS_NAME, SYSEXTD_BUS_PATH, SYSEXTD_BUS_INTERFACE, "ListFollowed", &error, &reply,
                               NULL);
        if (r < 0 && sd_bus_error_has_name(&error, SD_BUS_ERROR_UNKNOWN_METHOD)) {
                *ret = (FollowerList) {};
                return 0;
        }
        if (r < 0) {
                log_warning("Failed to list the followed namespaces: %s", error.message ?: strerror(-r));
                *ret = (FollowerList) {};
                return 0;
        }
        r = sd_bus_message_enter_container(reply, 'a', SYSEXTD_FOLLOWER_STRUCT);
        for (;;) {
                Follower f = {}, *a;

                if (r >= 0)
                        r = read_follower(reply, &f);
                if (r <= 0)
                        break;
                a = reallocarray(l.followers, l.n + 1, sizeof(Follower));
                if (!a) {
                        follower_done(&f);
                        return log_oom();
                }
                l.followers = a;
                l.followers[l.n++] = f;
        }
        if (r >= 0)
                r = sd_bus_message_exit_container(reply);
        if (r < 0)
                return log_error_errno(r, "Failed to parse the list of followed namespaces: %m");
        *ret = l;
        l = (FollowerList) {};
        return 0;
}

static int read_delay_namespaces(sd_bus_message *reply, DelayNamespace **ret, size_t *ret_n) {
        const char *unit;
        uint64_t ns;
        int32_t pid;
        int r;

        r = sd_bus_message_enter_container(reply, 'a', SYSEXTD_DELAY_NS_STRUCT);
        while (r >= 0 && (r = sd_bus_message_read(reply, SYSEXTD_DELAY_NS_STRUCT, &ns, &pid, &unit)) > 0) {
                DelayNamespace *n = reallocarray(*ret, *ret_n + 1, sizeof(DelayNamespace));

                if (!n)
                        return -ENOMEM;
                *ret = n;
                n[*ret_n] = (DelayNamespace) { .ns = ns, .pid = pid, .unit = isempty(unit) ? NULL : strdup(unit) };
                if (!isempty(unit) && !n[*ret_n].unit)
                        return -ENOMEM;
                (*ret_n)++;
        }
        return r < 0 ? r : sd_bus_message_exit_container(reply);
}

/* GetDelay(): the delayed transition, into the status.  A daemon that does not know the method
 * has none to tell. */
static int get_delay(sd_bus *bus, EngineStatus *s) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        int r;

        r = sd_bus_call_method(bus, SYSEXTD_BUS_NAME, SYSEXTD_BUS_PATH, SYSEXTD_BUS_INTERFACE, "GetDelay", &error, &reply, NULL);
        if (r < 0) {
                if (!sd_bus_error_has_name(&error, SD_BUS_ERROR_UNKNOWN_METHOD))
                        log_warning("Failed to ask for the delayed transition: %s", error.message ?: strerror(-r));
                return 0;
        }
        r = sd_bus_message_read(reply, "ttt", &s->delayed_generation, &s->delayed_since, &s->delay_deadline);
        if (r >= 0)
                r = read_delay_namespaces(reply, &s->delayed.old, &s->delayed.n_old);
        if (r >= 0)
                r = read_delay_namespaces(reply, &s->delayed.new, &s->delayed.n_new);
        if (r < 0)
                return log_error_errno(r, "Failed to parse the delayed transition: %m");
        return 0;
}

/* ListChangedImages(): the live layers that changed under the live tree, into the status.  A
 * daemon that does not know the method has none to tell. */
static int list_changed(sd_bus *bus, EngineStatus *s) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        const char *name, *path, *how, *description;
        uint64_t generation, since;
        int r;

        r = sd_bus_call_method(bus, SYSEXTD_BUS_NAME, SYSEXTD_BUS_PATH, SYSEXTD_BUS_INTERFACE, "ListChangedImages", &error, &reply,
                               NULL);
        if (r < 0) {
                if (!sd_bus_error_has_name(&error, SD_BUS_ERROR_UNKNOWN_METHOD))
                        log_warning("Failed to ask for the layers that changed: %s", error.message ?: strerror(-r));
                return 0;
        }
        r = sd_bus_message_enter_container(reply, 'a', SYSEXTD_CHANGED_IMAGE_STRUCT);
        while (r >= 0 &&
               (r = sd_bus_message_read(reply, SYSEXTD_CHANGED_IMAGE_STRUCT, &name, &path, &how, &description, &generation, &since)) > 0) {
                int h = watch_how_from_string(how);

                r = watch_change_add(&s->changed, name, path, h > 0 ? h : WATCH_MODIFIED, description, generation, since);
        }
        if (r >= 0)
                r = sd_bus_message_exit_container(reply);
        if (r < 0)
                return log_error_errno(r, "Failed to parse the layers that changed: %m");
        return 0;
}

/* ListNamespaces(): the namespaces that did not get the last swap, printed as --no-bus does. */
static int namespaces(sd_bus *bus, const OutputOptions *out) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_(stale_namespace_list_done) StaleNamespaceList l = {};
        _cleanup_strv_free_ char **names = NULL;
        _cleanup_json_ json_object *o = NULL;
        int r;

        r = call(bus, "ListNamespaces", NULL, &reply);
        if (r < 0)
                return r;
        r = sd_bus_message_enter_container(reply, 'a', SYSEXTD_NAMESPACE_STRUCT);
        while (r >= 0 && (r = sd_bus_message_enter_container(reply, 'r', "tiussbba(ss)")) > 0) {
                StaleNamespace x = {}, *a;
                const char *unit, *machine, *name, *shows;
                int32_t pid;
                uint32_t n_processes;
                int followed, own_root;

                r = sd_bus_message_read(reply, "tiussbb", &x.ns, &pid, &n_processes, &unit, &machine, &followed, &own_root);
                if (r >= 0)
                        r = sd_bus_message_enter_container(reply, 'a', "(ss)");
                while (r >= 0 && (r = sd_bus_message_read(reply, "(ss)", &name, &shows)) > 0) {
                        int v = _NAMESPACE_VIEW_MAX;

                        if (x.n >= NAMESPACE_HIERARCHIES_MAX)
                                continue;
                        for (int k = 0; k < _NAMESPACE_VIEW_MAX; k++)
                                if (streq(namespace_view_to_string(k), shows))
                                        v = k;
                        x.tops[x.n++].view = v == _NAMESPACE_VIEW_MAX ? NAMESPACE_VIEW_OWN : (NamespaceView) v;
                        if (l.n == 0 && strv_extend(&names, name) < 0)
                                return log_oom();
                }
                if (r >= 0)
                        r = sd_bus_message_exit_container(reply);
                if (r >= 0)
                        r = sd_bus_message_exit_container(reply);
                if (r < 0)
                        break;
                x.pid = pid;
                x.n_processes = n_processes;
                x.followed = followed;
                x.own_root = own_root;
                if ((!isempty(unit) && !(x.unit = strdup(unit))) || (!isempty(machine) && !(x.machine = strdup(machine)))) {
                        stale_namespace_done(&x);
                        return log_oom();
                }
                a = reallocarray(l.namespaces, l.n + 1, sizeof(StaleNamespace));
                if (!a) {
                        stale_namespace_done(&x);
                        return log_oom();
                }
                l.namespaces = a;
                l.namespaces[l.n++] = x;
        }
        if (r >= 0)
                r = sd_bus_message_exit_container(reply);
        if (r < 0)
                return log_error_errno(r, "Failed to parse the reply: %m");
        o = output_namespaces_json(&l, names);
        output_namespaces(o, out);
        return 0;
}

static int status(sd_bus *bus, const EngineOptions *opts, const OutputOptions *out) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL, *stacks = NULL, *backings = NULL;
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(engine_status_done) EngineStatus s = {};
        _cleanup_free_ char *proof = NULL;
        _cleanup_json_ json_object *o = NULL;
        const char *path, *name, *verdict, *reason, *verity, *backing;
        uint32_t n_trees, n_buried;
        int merged, foreign, is_signed, r;
        uint64_t since;

        r = call(bus, "GetStatus", NULL, &reply);
        if (r < 0)
                return r;
        /* Into the same EngineStatus the engine fills in process, printed the same way. */
        r = sd_bus_message_read(reply, "st", &s.mode, &s.generation);
        if (r >= 0)
                r = sd_bus_message_enter_container(reply, 'a', SYSEXTD_HIERARCHY_STRUCT);
        while (r >= 0 && (r = sd_bus_message_enter_container(reply, 'r', "sbastb")) > 0) {
                HierarchyStatus *n = realloc(s.hierarchies, sizeof(HierarchyStatus) * (s.n_hierarchies + 1)), *h;

                if (!n)
                        return log_oom();
                s.hierarchies = n;
                h = &s.hierarchies[s.n_hierarchies++];
                *h = (HierarchyStatus) {};
                r = sd_bus_message_read(reply, "sb", &path, &merged);
                if (r >= 0)
                        r = sd_bus_message_read_strv(reply, &h->extensions);
                if (r >= 0)
                        r = sd_bus_message_read(reply, "tb", &since, &foreign);
                if (r >= 0)
                        r = sd_bus_message_exit_container(reply);
                h->path = strdup(path);
                if (!h->path)
                        return log_oom();
                h->merged = merged;
                h->since = since;
                h->foreign_top = foreign;
                h->n_ours = merged || foreign;
        }
        if (r >= 0)
                r = sd_bus_message_exit_container(reply);
        if (r >= 0)
                r = sd_bus_message_enter_container(reply, 'a', SYSEXTD_SKIPPED_STRUCT);
        while (r >= 0 && (r = sd_bus_message_read(reply, SYSEXTD_SKIPPED_STRUCT, &name, &path, &verdict, &reason)) > 0) {
                Image *n = realloc(s.journal.images.images, sizeof(Image) * (s.journal.images.n + 1)), *img;

                if (!n)
                        return log_oom();
                s.journal.images.images = n;
                img = &n[s.journal.images.n++];
                *img = (Image) { .name = strdup(name), .path = strdup(path), .reason = isempty(reason) ? NULL : strdup(reason),
                                 .verdict = or_default(image_verdict_from_string(verdict), IMAGE_REFUSED), .root_fd = -EBADF };
                if (img->verdict == IMAGE_COMPATIBLE) /* a skipped image is not compatible */
                        img->verdict = IMAGE_REFUSED;
                if (!img->name || !img->path)
                        return log_oom();
        }
        if (r >= 0)
                r = sd_bus_message_exit_container(reply);
        if (r >= 0)
                r = sd_bus_message_read(reply, "s", &s.policy);
        if (r >= 0)
                r = sd_bus_message_enter_container(reply, 'a', SYSEXTD_MERGED_IMAGE_STRUCT);
        while (r >= 0 && (r = sd_bus_message_read(reply, SYSEXTD_MERGED_IMAGE_STRUCT, &name, &path, &verity, &is_signed)) > 0) {
                Image *n = realloc(s.journal.images.images, sizeof(Image) * (s.journal.images.n + 1)), *img;

                if (!n)
                        return log_oom();
                s.journal.images.images = n;
                img = &n[s.journal.images.n++];
                *img = (Image) { .name = strdup(name), .path = strdup(path), .verdict = IMAGE_COMPATIBLE,
                                 .verity = or_default(verity_mode_from_string(verity), VERITY_NONE), .signed_valid = is_signed,
                                 .root_fd = -EBADF };
                if (!img->name || !img->path)
                        return log_oom();
        }
        if (r >= 0)
                r = sd_bus_message_exit_container(reply);
        /* The classes (at the end, newer than the rest). */
        if (r >= 0 && sd_bus_message_at_end(reply, false) == 0) {
                const char *klass;
                int writable;

                r = sd_bus_message_enter_container(reply, 'a', SYSEXTD_CLASS_STRUCT);
                while (r >= 0 && (r = sd_bus_message_read(reply, SYSEXTD_CLASS_STRUCT, &path, &klass, &writable)) > 0)
                        for (size_t i = 0; i < s.n_hierarchies; i++)
                                if (streq(s.hierarchies[i].path, path)) {
                                        s.hierarchies[i].klass = or_default(image_class_from_string(klass), IMAGE_CLASS_SYSEXT);
                                        s.hierarchies[i].writable = writable;
                                }
        }
        if (r < 0)
                return log_error_errno(r, "Failed to parse the reply: %m");
        /* --class= picks the hierarchies of one class. */
        for (size_t i = 0; i < s.n_hierarchies;)
                if (!engine_options_cover(opts, s.hierarchies[i].klass)) {
                        free(s.hierarchies[i].path);
                        strv_free(s.hierarchies[i].extensions);
                        memmove(&s.hierarchies[i], &s.hierarchies[i + 1], sizeof(HierarchyStatus) * (s.n_hierarchies - i - 1));
                        s.n_hierarchies--;
                } else
                        i++;

        /* Newer than GetStatus: how ownership is proven, and how trees are stacked. */
        if (sd_bus_get_property_string(bus, SYSEXTD_BUS_NAME, SYSEXTD_BUS_PATH, SYSEXTD_BUS_INTERFACE, "OwnershipProof", &error,
                                       &proof) >= 0)
                s.proof = proof;
        sd_bus_error_free(&error);
        if (sd_bus_get_property(bus, SYSEXTD_BUS_NAME, SYSEXTD_BUS_PATH, SYSEXTD_BUS_INTERFACE, "Stacks", &error, &stacks,
                                "a(suu)") >= 0 &&
            sd_bus_message_enter_container(stacks, 'a', "(suu)") >= 0)
                while (sd_bus_message_read(stacks, "(suu)", &path, &n_trees, &n_buried) > 0)
                        for (size_t i = 0; i < s.n_hierarchies; i++)
                                if (streq(s.hierarchies[i].path, path)) {
                                        s.hierarchies[i].n_ours = n_trees;
                                        s.hierarchies[i].n_buried = n_buried;
                                }

        sd_bus_error_free(&error);
        if (sd_bus_get_property(bus, SYSEXTD_BUS_NAME, SYSEXTD_BUS_PATH, SYSEXTD_BUS_INTERFACE, "ImageBackings", &error,
                                &backings, "a(ss)") >= 0 &&
            sd_bus_message_enter_container(backings, 'a', "(ss)") >= 0)
                while (sd_bus_message_read(backings, "(ss)", &name, &backing) > 0)
                        for (size_t i = 0; i < s.journal.images.n; i++)
                                if (s.journal.images.images[i].verdict == IMAGE_COMPATIBLE &&
                                    streq(s.journal.images.images[i].name, name))
                                        s.journal.images.images[i].backing =
                                                or_default(image_backing_from_string(backing), IMAGE_BACKING_NONE);

        r = list_followed(bus, &s.followers);
        if (r < 0)
                return r;
        r = get_delay(bus, &s);
        if (r < 0)
                return r;
        r = get_rollback(bus, &s.journal);
        if (r < 0)
                return r;
        r = list_changed(bus, &s);
        if (r < 0)
                return r;

        o = output_status_json(&s);
        output_status(o, out);
        /* The strings borrowed from the reply are not the status' to free. */
        s.mode = s.policy = s.proof = NULL;
        return 0;
}

static int run_verb(sd_bus *bus, const char *verb, char *const *pids, const ClientCommit *c, const EngineOptions *o,
                    const OutputOptions *out) {
        if (streq(verb, "merge"))
                return transition(bus, "Merge", o, out);
        if (streq(verb, "refresh"))
                return transition(bus, "Refresh", o, out);
        if (streq(verb, "unmerge"))
                return transition(bus, "Unmerge", o, out);
        if (STR_IN_SET(verb, "follow", "unfollow"))
                return follow(bus, pids, streq(verb, "follow"));
        if (streq(verb, "list"))
                return list(bus, o, out);
        if (streq(verb, "namespaces"))
                return namespaces(bus, out);
        if (streq(verb, "commit"))
                return commit(bus, c, out);
        if (streq(verb, "rollback"))
                return rollback(bus, o, out);
        if (streq(verb, "confirm"))
                return confirm(bus, out);
        return status(bus, o, out);
}

int client_run(const char *verb, const char *root, char *const *pids, const ClientCommit *c, const EngineOptions *o,
               const OutputOptions *out) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        _cleanup_free_ char *wanted = NULL, *why = NULL;
        int r;

        wanted = realpath(root ?: "/", NULL);
        if (!wanted)
                return log_error_errno(errno, "Failed to resolve %s: %m", root ?: "/");
        if (client_varlink_usable(verb, geteuid(), o)) {
                bool answered;

                r = client_varlink_transition(wanted, verb, o, out, &answered);
                if (answered)
                        return r;
        }
        r = dlopen_libsystemd(&why);
        if (r < 0)
                return log_error_errno(r, "Cannot reach the daemon: %s; use --no-bus to run without it.", strna(why));
        r = sd_bus_open_system(&bus);
        if (r < 0)
                return log_error_errno(r, "Failed to connect to the system bus: %m; use --no-bus to run without the daemon.");
        /* Someone at a terminal can be asked by a polkit agent to authenticate. */
        (void) sd_bus_set_allow_interactive_authorization(bus, isatty(STDIN_FILENO));

        /* The calls that take options carry the root; the others ask for the daemon's first. */
        if (STR_IN_SET(verb, "merge", "refresh", "unmerge", "rollback", "list")) {
                wanted_root = wanted;
                r = run_verb(bus, verb, pids, c, o, out);
                wanted_root = NULL; /* (freed with 'wanted') */
                return r;
        }
        r = check_root(bus, wanted);
        if (r < 0)
                return r;
        return run_verb(bus, verb, pids, c, o, out);
}
