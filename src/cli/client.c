/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <systemd/sd-bus.h>

#include "bus-api.h"
#include "client.h"
#include "log.h"
#include "output.h"
#include "util.h"

static int call(sd_bus *bus, const char *method, const EngineOptions *o, sd_bus_message **ret) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        int r;

        r = sd_bus_message_new_method_call(bus, &m, SYSEXTD_BUS_NAME, SYSEXTD_BUS_PATH, SYSEXTD_BUS_INTERFACE, method);
        if (r < 0)
                return log_error_errno(r, "Failed to create the bus message: %m");
        if (o) {
                r = sd_bus_message_append(m, "a{sv}", 3, "force", "b", o->force, "noexec", "b", o->noexec, "strict",
                                          "b", o->strict);
                if (r < 0)
                        return log_error_errno(r, "Failed to create the bus message: %m");
        }
        r = sd_bus_call(bus, m, SYSEXTD_CALL_TIMEOUT_USEC, &error, ret);
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

static int check_root(sd_bus *bus, const char *root) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_free_ char *served = NULL, *wanted = NULL;
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
        wanted = realpath(root ?: "/", NULL);
        if (!wanted)
                return log_error_errno(errno, "Failed to resolve %s: %m", root);
        if (!streq(served, wanted))
                return log_error_errno(EXDEV, "The sysextd daemon serves %s, not %s; use --no-bus to work on %s.", served,
                                       wanted, wanted);
        return 0;
}

static int transition(sd_bus *bus, const char *method, const EngineOptions *o, bool json) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        uint64_t generation;
        int changed, r;
        uint32_t level;
        const char *text;

        r = call(bus, method, o, &reply);
        if (r < 0)
                return r;
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
        if (json)
                printf("{\"generation\":%" PRIu64 ",\"changed\":%s}\n", generation, changed ? "true" : "false");
        return 0;
}

static int list(sd_bus *bus, bool json) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        json_object *a = json_object_new_array();
        const char *name, *kind, *path, *status, *reason, *verity;
        int is_signed, r;

        r = call(bus, "ListImages", NULL, &reply);
        if (r < 0)
                goto finish;
        r = sd_bus_message_enter_container(reply, 'a', SYSEXTD_IMAGE_STRUCT);
        if (r < 0)
                goto parse_error;
        while ((r = sd_bus_message_read(reply, SYSEXTD_IMAGE_STRUCT, &name, &kind, &path, &status, &reason, &verity,
                                        &is_signed)) > 0) {
                json_object *o = json_object_new_object();
                json_object_object_add(o, "name", json_object_new_string(name));
                json_object_object_add(o, "kind", json_object_new_string(kind));
                json_object_object_add(o, "path", json_object_new_string(path));
                json_object_object_add(o, "status", json_object_new_string(status));
                json_object_object_add(o, "compatible", json_object_new_boolean(streq(status, "compatible")));
                json_object_object_add(o, "reason", isempty(reason) ? NULL : json_object_new_string(reason));
                json_object_object_add(o, "verity", json_object_new_string(verity));
                json_object_object_add(o, "signed", json_object_new_boolean(is_signed));
                json_object_array_add(a, o);
        }
        if (r < 0)
                goto parse_error;
        if (json)
                output_json(a);
        else
                output_list_text(a);
        r = 0;
        goto finish;
parse_error:
        log_error_errno(r, "Failed to parse the reply: %m");
finish:
        json_object_put(a);
        return r;
}

static int status(sd_bus *bus, bool json) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        json_object *o = json_object_new_object(), *a = json_object_new_array(), *sk = json_object_new_array(),
                    *im = json_object_new_array();
        const char *mode, *path, *name, *verdict, *reason, *policy, *verity;
        _cleanup_free_ char *proof = NULL;
        uint64_t generation, since;
        uint32_t n_trees, n_buried;
        int merged, foreign, is_signed, r;

        json_object_object_add(o, "hierarchies", a);
        json_object_object_add(o, "skipped", sk);
        json_object_object_add(o, "images", im);
        r = call(bus, "GetStatus", NULL, &reply);
        if (r < 0)
                goto finish;
        r = sd_bus_message_read(reply, "st", &mode, &generation);
        if (r < 0)
                goto parse_error;
        json_object_object_add(o, "mode", json_object_new_string(mode));
        json_object_object_add(o, "generation", json_object_new_uint64(generation));
        r = sd_bus_message_enter_container(reply, 'a', SYSEXTD_HIERARCHY_STRUCT);
        if (r < 0)
                goto parse_error;
        while ((r = sd_bus_message_enter_container(reply, 'r', "sbastb")) > 0) {
                _cleanup_strv_free_ char **ext = NULL;
                json_object *e = json_object_new_object(), *x = json_object_new_array();
                _cleanup_free_ char *ts = NULL;

                json_object_array_add(a, e);
                r = sd_bus_message_read(reply, "sb", &path, &merged);
                if (r >= 0)
                        r = sd_bus_message_read_strv(reply, &ext);
                if (r >= 0)
                        r = sd_bus_message_read(reply, "tb", &since, &foreign);
                if (r >= 0)
                        r = sd_bus_message_exit_container(reply);
                if (r < 0)
                        goto parse_error;
                ts = merged && since ? format_timestamp(since) : NULL;
                json_object_object_add(e, "hierarchy", json_object_new_string(path));
                json_object_object_add(e, "merged", json_object_new_boolean(merged));
                STRV_FOREACH(n, ext)
                        json_object_array_add(x, json_object_new_string(*n));
                json_object_object_add(e, "extensions", x);
                json_object_object_add(e, "since", ts ? json_object_new_string(ts) : NULL);
                json_object_object_add(e, "since_usec", json_object_new_uint64(merged ? since : 0));
                if (foreign)
                        json_object_object_add(e, "foreign_mount_on_top", json_object_new_boolean(true));
        }
        if (r < 0)
                goto parse_error;
        r = sd_bus_message_exit_container(reply);
        if (r >= 0)
                r = sd_bus_message_enter_container(reply, 'a', SYSEXTD_SKIPPED_STRUCT);
        if (r < 0)
                goto parse_error;
        while ((r = sd_bus_message_read(reply, SYSEXTD_SKIPPED_STRUCT, &name, &path, &verdict, &reason)) > 0) {
                json_object *e = json_object_new_object();
                json_object_object_add(e, "name", json_object_new_string(name));
                json_object_object_add(e, "path", json_object_new_string(path));
                json_object_object_add(e, "status", json_object_new_string(verdict));
                json_object_object_add(e, "reason", isempty(reason) ? NULL : json_object_new_string(reason));
                json_object_array_add(sk, e);
        }
        if (r < 0)
                goto parse_error;
        r = sd_bus_message_exit_container(reply);
        if (r >= 0)
                r = sd_bus_message_read(reply, "s", &policy);
        if (r >= 0)
                r = sd_bus_message_enter_container(reply, 'a', SYSEXTD_MERGED_IMAGE_STRUCT);
        if (r < 0)
                goto parse_error;
        json_object_object_add(o, "policy", json_object_new_string(policy));
        while ((r = sd_bus_message_read(reply, SYSEXTD_MERGED_IMAGE_STRUCT, &name, &path, &verity, &is_signed)) > 0) {
                json_object *e = json_object_new_object();
                json_object_object_add(e, "name", json_object_new_string(name));
                json_object_object_add(e, "path", json_object_new_string(path));
                json_object_object_add(e, "verity", json_object_new_string(verity));
                json_object_object_add(e, "signed", json_object_new_boolean(is_signed));
                json_object_array_add(im, e);
        }
        if (r < 0)
                goto parse_error;
        /* Newer than GetStatus: how ownership is proven, and how trees are stacked. */
        {
                _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
                _cleanup_(sd_bus_message_unrefp) sd_bus_message *stacks = NULL;

                if (sd_bus_get_property_string(bus, SYSEXTD_BUS_NAME, SYSEXTD_BUS_PATH, SYSEXTD_BUS_INTERFACE, "OwnershipProof",
                                               &error, &proof) >= 0)
                        json_object_object_add(o, "ownership_proof", json_object_new_string(proof));
                sd_bus_error_free(&error);
                if (sd_bus_get_property(bus, SYSEXTD_BUS_NAME, SYSEXTD_BUS_PATH, SYSEXTD_BUS_INTERFACE, "Stacks", &error,
                                        &stacks, "a(suu)") >= 0 &&
                    sd_bus_message_enter_container(stacks, 'a', "(suu)") >= 0)
                        while (sd_bus_message_read(stacks, "(suu)", &path, &n_trees, &n_buried) > 0)
                                for (size_t i = 0; i < json_object_array_length(a); i++) {
                                        json_object *e = json_object_array_get_idx(a, i), *v;
                                        if (json_object_object_get_ex(e, "hierarchy", &v) &&
                                            streq(json_object_get_string(v), path)) {
                                                json_object_object_add(e, "trees", json_object_new_int((int) n_trees));
                                                if (n_buried > 0)
                                                        json_object_object_add(e, "buried_trees",
                                                                               json_object_new_int((int) n_buried));
                                        }
                                }
        }
        if (json)
                output_json(o);
        else
                output_status_text(o);
        r = 0;
        goto finish;
parse_error:
        log_error_errno(r, "Failed to parse the reply: %m");
finish:
        json_object_put(o);
        return r;
}

int client_run(const char *verb, const char *root, const EngineOptions *o, bool json) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        int r;

        r = sd_bus_open_system(&bus);
        if (r < 0)
                return log_error_errno(r, "Failed to connect to the system bus: %m; use --no-bus to run without the daemon.");

        r = check_root(bus, root);
        if (r < 0)
                return r;

        if (streq(verb, "merge"))
                return transition(bus, "Merge", o, json);
        if (streq(verb, "refresh"))
                return transition(bus, "Refresh", o, json);
        if (streq(verb, "unmerge"))
                return transition(bus, "Unmerge", o, json);
        if (streq(verb, "list"))
                return list(bus, json);
        return status(bus, json);
}
