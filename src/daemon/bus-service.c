/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The bus interface of the daemon, org.sysextd1(5): the vtable, the methods, the properties
 * and the signals, in the manner of systemd's timedated.  Every string that goes on the bus
 * passes string_safe(): valid UTF-8 without control characters, whatever an image's file name
 * or a reason held, so that no reply can fail to be sent.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "authorize.h"
#include "bus-api.h"
#include "bus-service.h"
#include "delay.h"
#include "fd-util.h"
#include "inspect.h"
#include "json-util.h"
#include "kernel.h"
#include "log.h"
#include "missing.h"
#include "polkit.h"
#include "unit-jobs.h"
#include "util.h"

/* Appends s made safe for the bus. */
static int append_string(sd_bus_message *m, const char *s) {
        _cleanup_free_ char *buf = NULL;
        return sd_bus_message_append_basic(m, 's', string_safe(s ?: "", &buf));
}

static int append_strv(sd_bus_message *m, char *const *l) {
        int r = sd_bus_message_open_container(m, 'a', "s");

        STRV_FOREACH(s, l)
                if (r >= 0)
                        r = append_string(m, *s);
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        return r;
}

static int doc_int(json_object *doc, const char *key, int fallback) {
        json_object *v;
        return json_object_object_get_ex(doc, key, &v) && json_object_is_type(v, json_type_int) ? json_object_get_int(v)
                                                                                             : fallback;
}

static bool doc_bool(json_object *doc, const char *key) {
        json_object *v;
        return json_object_object_get_ex(doc, key, &v) && json_object_is_type(v, json_type_boolean) &&
               json_object_get_boolean(v);
}

int bus_reply_failure(sd_bus_message *request, json_object *doc, const char *fallback) {
        _cleanup_free_ char *buf = NULL;
        const char *text = json_peek_string(doc, "error");
        int kind = doc_int(doc, "kind", ENGINE_ERROR_FAILED);

        if (kind < 0 || kind >= _ENGINE_ERROR_MAX)
                kind = ENGINE_ERROR_FAILED;
        return sd_bus_reply_method_errorf(request, sysextd_error_name(kind), "%s", string_safe(isempty(text) ? fallback : text, &buf));
}

int bus_reply_transition(sd_bus_message *request, json_object *doc) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        json_object *msgs, *v;
        uint64_t generation = 0;
        int r;

        if (doc_int(doc, "r", -1) < 0 || IN_SET(doc_int(doc, "kind", 0), ENGINE_ERROR_NO_IMAGES, ENGINE_ERROR_NO_SUITABLE_IMAGES))
                return bus_reply_failure(request, doc, "The transition failed.");

        (void) json_get_u64(doc, "generation", &generation);
        r = sd_bus_message_new_method_return(request, &reply);
        if (r >= 0)
                r = sd_bus_message_append(reply, "tb", generation, doc_bool(doc, "changed"));
        if (r >= 0)
                r = sd_bus_message_open_container(reply, 'a', "(us)");
        msgs = json_get_array(doc, "messages");
        for (size_t i = 0; r >= 0 && msgs && i < json_object_array_length(msgs); i++) {
                json_object *e = json_object_array_get_idx(msgs, i);

                if (!json_object_is_type(e, json_type_array) || json_object_array_length(e) != 2)
                        continue;
                v = json_object_array_get_idx(e, 1);
                r = sd_bus_message_open_container(reply, 'r', "us");
                if (r >= 0)
                        r = sd_bus_message_append(reply, "u", (uint32_t) json_object_get_int(json_object_array_get_idx(e, 0)));
                if (r >= 0)
                        r = append_string(reply, json_object_is_type(v, json_type_string) ? json_object_get_string(v) : "");
                if (r >= 0)
                        r = sd_bus_message_close_container(reply);
        }
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        return r < 0 ? r : sd_bus_send(NULL, reply, NULL);
}

/* Follow and Unfollow answer nothing when they succeeded. */
int bus_reply_follow(sd_bus_message *request, json_object *doc) {
        if (doc_int(doc, "r", -1) < 0)
                return bus_reply_failure(request, doc, "Following the mount namespace failed.");
        return sd_bus_reply_method_return(request, NULL);
}

/* The classes a ListImagesEx call asks for (its options, read again from the request), every
 * class for ListImages. */
static unsigned list_classes(sd_bus_message *request, bool *ret_ex) {
        unsigned classes = 0;
        const char *key, *v;

        *ret_ex = streq_ptr(sd_bus_message_get_member(request), "ListImagesEx");
        if (!*ret_ex || sd_bus_message_rewind(request, true) < 0 || sd_bus_message_enter_container(request, 'a', "{sv}") < 0)
                return IMAGE_CLASS_ALL;
        while (sd_bus_message_enter_container(request, 'e', "sv") > 0) {
                if (sd_bus_message_read(request, "s", &key) < 0)
                        break;
                if (streq(key, "class") && sd_bus_message_read(request, "v", "s", &v) >= 0) {
                        int k = image_class_from_string(v);
                        if (k >= 0)
                                classes |= 1u << k;
                } else if (sd_bus_message_skip(request, "v") < 0)
                        break;
                if (sd_bus_message_exit_container(request) < 0)
                        break;
        }
        return classes ?: IMAGE_CLASS_ALL;
}

int bus_reply_list(sd_bus_message *request, json_object *doc) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        json_object *images;
        bool ex;
        unsigned classes = list_classes(request, &ex);
        int r;

        if (doc_int(doc, "r", -1) < 0)
                return bus_reply_failure(request, doc, "Listing images failed.");

        r = sd_bus_message_new_method_return(request, &reply);
        if (r >= 0)
                r = sd_bus_message_open_container(reply, 'a', ex ? SYSEXTD_IMAGE_EX_STRUCT : SYSEXTD_IMAGE_STRUCT);
        images = json_get_array(doc, "images");
        for (size_t i = 0; r >= 0 && images && i < json_object_array_length(images); i++) {
                json_object *e = json_object_array_get_idx(images, i);
                int k = image_class_from_string(json_peek_string(e, "class"));

                if (k < 0 || !(classes & (1u << k)))
                        continue;
                r = sd_bus_message_open_container(reply, 'r', ex ? "ssssssbs" : "ssssssb");
                if (r >= 0)
                        r = append_string(reply, json_peek_string(e, "name"));
                if (r >= 0)
                        r = append_string(reply, json_peek_string(e, "kind"));
                if (r >= 0)
                        r = append_string(reply, json_peek_string(e, "path"));
                if (r >= 0)
                        r = append_string(reply, json_peek_string(e, "status"));
                if (r >= 0)
                        r = append_string(reply, json_peek_string(e, "reason"));
                if (r >= 0)
                        r = append_string(reply, json_peek_string(e, "verity"));
                if (r >= 0)
                        r = sd_bus_message_append(reply, "b", doc_bool(e, "signed"));
                if (r >= 0 && ex)
                        r = append_string(reply, image_class_to_string(k));
                if (r >= 0)
                        r = sd_bus_message_close_container(reply);
        }
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        return r < 0 ? r : sd_bus_send(NULL, reply, NULL);
}

void bus_emit_tree_changed(Manager *m, const EngineStatus *s) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *signal = NULL;
        _cleanup_strv_free_ char **all = NULL;

        m->generation = s->generation;
        for (size_t i = 0; i < s->n_hierarchies; i++)
                STRV_FOREACH(x, s->hierarchies[i].extensions)
                        if (!strv_contains(all, *x))
                                (void) strv_extend(&all, *x);

        m->status_borrowed = s; /* the getters of the signal read this status */
        (void) sd_bus_emit_properties_changed(m->bus, SYSEXTD_BUS_PATH, SYSEXTD_BUS_INTERFACE, "Generation", "Merged",
                                              "Hierarchies", "Extensions", NULL);
        m->status_borrowed = NULL;
        if (sd_bus_message_new_signal(m->bus, &signal, SYSEXTD_BUS_PATH, SYSEXTD_BUS_INTERFACE, "TreeChanged") >= 0 &&
            sd_bus_message_append(signal, "t", m->generation) >= 0 && append_strv(signal, all) >= 0)
                (void) sd_bus_send(m->bus, signal, NULL);
}

void bus_emit_image_changed(Manager *m, const WatchChange *c) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *signal = NULL;
        int r;

        r = sd_bus_message_new_signal(m->bus, &signal, SYSEXTD_BUS_PATH, SYSEXTD_BUS_INTERFACE, "ImageChanged");
        if (r >= 0)
                r = append_string(signal, c->name);
        if (r >= 0)
                r = append_string(signal, c->path);
        if (r >= 0)
                r = append_string(signal, watch_how_to_string(c->how));
        if (r >= 0)
                r = append_string(signal, c->description);
        if (r >= 0)
                r = sd_bus_message_append(signal, "t", c->generation);
        if (r >= 0)
                r = sd_bus_send(m->bus, signal, NULL);
        if (r < 0)
                log_warning_errno(r, "Failed to emit ImageChanged for %s: %m", c->path);
}

void bus_emit_follow_failed(Manager *m) {
        _cleanup_(follower_list_done) FollowerList l = {};
        int r;

        r = engine_followers(m->engine, &l);
        if (r < 0) {
                log_warning_errno(r, "Failed to read the followed namespaces after the transition: %m");
                return;
        }
        for (size_t i = 0; i < l.n; i++) {
                _cleanup_(sd_bus_message_unrefp) sd_bus_message *signal = NULL;
                const Follower *f = &l.followers[i];

                if (!f->error)
                        continue;
                r = sd_bus_message_new_signal(m->bus, &signal, SYSEXTD_BUS_PATH, SYSEXTD_BUS_INTERFACE, "FollowFailed");
                if (r >= 0)
                        r = sd_bus_message_append(signal, "ti", f->ns, (int32_t) f->pid);
                if (r >= 0)
                        r = append_string(signal, f->error);
                if (r >= 0)
                        r = sd_bus_send(m->bus, signal, NULL);
                if (r < 0)
                        log_warning_errno(r, "Failed to emit FollowFailed for mount namespace %" PRIu64 ": %m", f->ns);
        }
}

/* The caller's uid as the bus saw it at connection time: never augmented from /proc, where
 * the caller's process may since have become someone else. */
static int caller_uid(sd_bus_message *message, uid_t *ret) {
        _cleanup_(sd_bus_creds_unrefp) sd_bus_creds *creds = NULL;
        int r;

        r = sd_bus_query_sender_creds(message, SD_BUS_CREDS_EUID, &creds);
        if (r < 0)
                return r;
        return sd_bus_creds_get_euid(creds, ret);
}

/* Authorization of the mutating methods, as systemd's daemons do it: root is let through
 * without asking; anyone else is asked about through polkit's CheckAuthorization, for the
 * action org.sysextd1.manage (default auth_admin_keep) or, when an option weakens the
 * configuration, org.sysextd1.manage-unsafe (default auth_admin; authorize.h says which
 * options), with the options as details for rules to look at, and with user interaction only
 * when the caller allowed it (the message's interactive-authorization flag).  The answer comes
 * asynchronously; the bus loop goes on meanwhile.
 *
 * polkit gets a bounded time to answer: a query that waits for a person who never answers must
 * not keep the daemon from exiting when idle or hold the caller forever.  When it expires the
 * caller is refused, an interactive query is cancelled (CancelCheckAuthorization, so that
 * polkit takes down its dialog), and the query is forgotten. */

/* What a mutating call asks for, run once it is authorized: a transition, or (is_follow) a
 * Follow or Unfollow of the process of a pidfd. */
typedef struct Mutation {
        EngineVerb verb;
        EngineOptions options;
        bool is_follow;
        bool follow; /* Follow, not Unfollow */
        bool is_commit;
        bool is_confirm;
        bool self;   /* Commit: the caller's own namespace (not authorized) */
        char *unit;  /* Commit: the unit whose namespaces are committed (owned) */
        pid_t pid;   /* Follow, Unfollow, Commit (0: every namespace, or the unit's) */
        int pidfd;   /* owned */
} Mutation;

static const char *mutation_name(const Mutation *x) {
        if (x->is_confirm)
                return "confirm";
        if (x->is_commit)
                return "commit";
        if (x->is_follow)
                return x->follow ? "follow" : "unfollow";
        return engine_verb_to_string(x->verb);
}

/* Hands the call to the daemon's queue (the pidfd goes with it). */
static int mutation_queue(Manager *m, sd_bus_message *request, Mutation *x) {
        if (x->is_confirm)
                return m->ops->queue_confirm(m, request);
        if (x->is_commit)
                return m->ops->queue_commit(m, request, TAKE_FD(x->pidfd), x->pid, TAKE_PTR(x->unit), x->self);
        if (x->is_follow)
                return m->ops->queue_follow(m, request, TAKE_FD(x->pidfd), x->pid, x->follow);
        return m->ops->queue_transition(m, request, x->verb, &x->options);
}

typedef struct Authorization {
        Manager *manager;
        sd_bus_message *request;
        Mutation call;
        unsigned unsafe; /* AUTHORIZE_UNSAFE_* */
        bool interactive;
        uint64_t timeout_usec;
        uint64_t started_usec; /* CLOCK_MONOTONIC */
        char *cancellation_id;
        sd_bus_slot *slot;
} Authorization;

static void authorization_free(Authorization *a) {
        Manager *m;

        if (!a)
                return;
        m = a->manager;
        sd_bus_slot_unref(a->slot);
        sd_bus_message_unref(a->request);
        safe_close(a->call.pidfd);
        free(a->call.unit);
        free(a->cancellation_id);
        free(a);
        m->n_authorizing--;
        m->ops->update_idle(m);
        m->ops->exit_if_done(m);
}

/* Tells polkit we no longer wait for an interactive query (it takes down the agent's dialog).
 * Nothing waits for the answer. */
static void authorization_cancel(Authorization *a) {
        if (a->interactive)
                polkit_cancel(a->manager->bus, a->cancellation_id);
}

/* "org.sysextd1.manage", or the unsafe action with the options that need it. */
static char *describe_action(const Authorization *a) {
        _cleanup_free_ char *opts = NULL;
        char *s;

        if (!a->unsafe)
                return strdup("polkit action " SYSEXTD_POLKIT_ACTION);
        opts = authorize_unsafe_to_string(&a->manager->engine->config, &a->call.options);
        if (!opts || asprintf(&s, "polkit action " SYSEXTD_POLKIT_ACTION_UNSAFE ", for options that weaken the configuration: %s",
                              opts) < 0)
                return NULL;
        return s;
}

static int reply_polkit_error(Authorization *a, const sd_bus_error *e) {
        _cleanup_free_ char *buf = NULL;
        uint64_t elapsed = now_monotonic_usec() - a->started_usec;

        if (polkit_error_unavailable(e))
                /* The same whatever the options: which action would have been asked does not
                 * matter when nobody can be asked. */
                return sd_bus_reply_method_errorf(a->request, SYSEXTD_ERROR_ACCESS_DENIED,
                                                  "Only root may change the merged tree: polkit, which could allow others (actions "
                                                  SYSEXTD_POLKIT_ACTION " and " SYSEXTD_POLKIT_ACTION_UNSAFE "), is not available.");
        /* sd-bus's own timeout (the bus says NoReply too when polkit went away without an
         * answer: that happens before the time is up). */
        if (sd_bus_error_has_names(e, SD_BUS_ERROR_NO_REPLY, SD_BUS_ERROR_TIMEOUT) && elapsed + 100000 >= a->timeout_usec) {
                log_warning("polkit did not answer a%s query for action %s within %" PRIu64 " s; refusing the call.",
                            a->interactive ? "n interactive" : "", authorize_action(a->unsafe), a->timeout_usec / 1000000);
                authorization_cancel(a);
                return sd_bus_reply_method_errorf(a->request, SYSEXTD_ERROR_ACCESS_DENIED,
                                                  "polkit did not answer within %" PRIu64 " s whether the caller may change the merged tree (action %s); refusing.",
                                                  a->timeout_usec / 1000000, authorize_action(a->unsafe));
        }
        return sd_bus_reply_method_errorf(a->request, SYSEXTD_ERROR_ACCESS_DENIED,
                                          "Cannot ask polkit whether the caller may change the merged tree: %s",
                                          string_safe(e->message ?: e->name, &buf));
}

static int on_authorization(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        Authorization *a = userdata;
        Manager *m = a->manager;
        const sd_bus_error *e = sd_bus_message_get_error(reply);
        _cleanup_free_ char *what = NULL;
        bool authorized = false, challenge = false;
        int r;

        if (e)
                r = reply_polkit_error(a, e);
        else if (polkit_check_result(reply, &authorized, &challenge) < 0)
                r = sd_bus_reply_method_errorf(a->request, SYSEXTD_ERROR_ACCESS_DENIED,
                                               "polkit sent an answer that cannot be read; refusing.");
        else if (authorized) {
                r = mutation_queue(m, a->request, &a->call);
                if (r < 0) /* nothing was sent (no memory for the job): the caller must hear */
                        r = sd_bus_reply_method_errnof(a->request, r, "Failed to queue the %s: %m", mutation_name(&a->call));
        } else {
                /* Out of memory for the options' description: the action's name alone. */
                what = describe_action(a);
                if (challenge && !a->interactive)
                        r = sd_bus_reply_method_errorf(a->request, SD_BUS_ERROR_INTERACTIVE_AUTHORIZATION_REQUIRED,
                                                       "Changing the merged tree needs authentication (%s); call with interactive authorization allowed.",
                                                       what ?: authorize_action(a->unsafe));
                else
                        r = sd_bus_reply_method_errorf(a->request, SYSEXTD_ERROR_ACCESS_DENIED,
                                                       "The caller is not authorized to change the merged tree (%s).",
                                                       what ?: authorize_action(a->unsafe));
        }
        if (r < 0)
                log_warning_errno(r, "Failed to answer the %s call of %s after its authorization: %m", mutation_name(&a->call),
                                  strna(sd_bus_message_get_sender(a->request)));
        authorization_free(a);
        return 0;
}

/* CheckAuthorization for the sender of message. */
static int polkit_query_new(Manager *m, sd_bus_message *message, const Authorization *a, sd_bus_message **ret) {
        _cleanup_strv_free_ char **details = NULL;
        int r;

        if (a->call.is_confirm)
                r = authorize_confirm_details(&details);
        else if (a->call.is_commit)
                r = authorize_commit_details(a->call.pid, a->call.unit, &details);
        else if (a->call.is_follow)
                r = authorize_follow_details(a->call.follow, a->call.pid, &details);
        else
                r = authorize_details(&m->engine->config, a->call.verb, &a->call.options, &details);
        if (r < 0)
                return r;
        return polkit_check_new(m->bus, &(PolkitSubject) { .bus_name = sd_bus_message_get_sender(message) },
                                authorize_action(a->unsafe), details, a->interactive, a->cancellation_id, ret);
}

/* Runs the call now for root; asks polkit about anyone else.  Takes x's pidfd in every case. */
static int authorize_and_queue(Manager *m, sd_bus_message *message, Mutation *x, sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *q = NULL;
        Authorization *a;
        uint64_t cookie = 0;
        uid_t uid;
        int r;

        r = caller_uid(message, &uid);
        if (r < 0) {
                x->pidfd = safe_close(x->pidfd);
                free(x->unit);
                x->unit = NULL;
                return sd_bus_error_set(error, SYSEXTD_ERROR_ACCESS_DENIED, "Cannot tell who is calling; refusing.");
        }
        if (uid == 0)
                return mutation_queue(m, message, x);

        a = calloc(1, sizeof(*a));
        if (!a) {
                x->pidfd = safe_close(x->pidfd);
                free(x->unit);
                x->unit = NULL;
                return -ENOMEM;
        }
        *a = (Authorization) { .manager = m, .request = sd_bus_message_ref(message), .call = *x,
                               .unsafe = x->is_follow || x->is_commit || x->is_confirm ? 0
                                                                                       : authorize_unsafe(&m->engine->config, &x->options),
                               .interactive = sd_bus_message_get_allow_interactive_authorization(message) > 0 };
        x->pidfd = -EBADF; /* the authorization's now, as is the unit */
        x->unit = NULL;
        a->timeout_usec = polkit_timeout_usec(a->interactive);
        m->n_authorizing++;
        m->ops->update_idle(m);
        /* Unique among our queries: the caller's unique name and its call's serial. */
        (void) sd_bus_message_get_cookie(message, &cookie);
        if (asprintf(&a->cancellation_id, "sysextd-%s-%" PRIu64, sd_bus_message_get_sender(message) ?: "", cookie) < 0) {
                a->cancellation_id = NULL;
                authorization_free(a);
                return -ENOMEM;
        }
        r = polkit_query_new(m, message, a, &q);
        if (r >= 0) {
                a->started_usec = now_monotonic_usec();
                r = sd_bus_call_async(m->bus, &a->slot, q, on_authorization, a, a->timeout_usec);
        }
        if (r < 0) {
                authorization_free(a);
                return r;
        }
        return 0;
}

#define KNOWN_OPTIONS \
        "always-refresh, class, confext-mutable, confirm-within (Refresh), delay, force, image-policy, mutable, no-reload, noexec, root, strict, sysext-mutable, unpin (Rollback)"
/* Of one method only: Refresh's confirm-within (t, seconds), Rollback's unpin (b). */

static int read_option_string(sd_bus_message *message, const char *key, const char **ret, sd_bus_error *error) {
        _cleanup_free_ char *safe = NULL;
        const char *contents;
        int r;

        r = sd_bus_message_peek_type(message, NULL, &contents);
        if (r < 0)
                return r;
        if (!streq(contents, "s"))
                return sd_bus_error_setf(error, SYSEXTD_ERROR_INVALID_OPTION, "Option '%s' takes a string (s), not '%s'.", key,
                                         string_safe(contents, &safe));
        return sd_bus_message_read(message, "v", "s", ret);
}

/* 'root' is the daemon's root, which the option "root" must name when given. */
static int parse_options(sd_bus_message *message, const char *root, EngineVerb verb, EngineOptions *o, sd_bus_error *error) {
        int r, any_mutable = -1;

        r = sd_bus_message_enter_container(message, 'a', "{sv}");
        if (r < 0)
                return r;
        while ((r = sd_bus_message_enter_container(message, 'e', "sv")) > 0) {
                _cleanup_free_ char *safe = NULL, *safe_value = NULL;
                const char *key, *contents, *v = NULL;
                bool *target = NULL;
                int b;

                r = sd_bus_message_read(message, "s", &key);
                if (r < 0)
                        return r;
                if (streq(key, "root")) {
                        const char *wanted;

                        /* The root the caller means, canonical (the client sends it first,
                         * instead of reading the property Root before its call). */
                        r = read_option_string(message, key, &v, error);
                        if (r < 0)
                                return r;
                        wanted = string_safe(v, &safe_value);
                        if (!streq(v, root))
                                return sd_bus_error_setf(error, SYSEXTD_ERROR_WRONG_ROOT,
                                                         "The sysextd daemon serves %s, not %s; use --no-bus to work on %s.", root,
                                                         wanted, wanted);
                } else if (streq(key, "class")) {
                        int k;
                        r = read_option_string(message, key, &v, error);
                        if (r < 0)
                                return r;
                        k = image_class_from_string(v);
                        if (k < 0)
                                return sd_bus_error_setf(error, SYSEXTD_ERROR_INVALID_OPTION,
                                                         "Option 'class' is 'sysext' or 'confext', not '%s'.", string_safe(v, &safe_value));
                        o->classes |= 1u << k;
                } else if (STR_IN_SET(key, "mutable", "sysext-mutable", "confext-mutable")) {
                        int m;
                        r = read_option_string(message, key, &v, error);
                        if (r < 0)
                                return r;
                        m = mutable_mode_from_string(v);
                        if (m < 0)
                                return sd_bus_error_setf(error, SYSEXTD_ERROR_INVALID_OPTION,
                                                         "Option '%s' is no, yes, auto, import, ephemeral or ephemeral-import, not '%s'.",
                                                         key, string_safe(v, &safe_value));
                        if (streq(key, "mutable"))
                                any_mutable = m;
                        else
                                o->mutable[streq(key, "sysext-mutable") ? IMAGE_CLASS_SYSEXT : IMAGE_CLASS_CONFEXT] = m;
                } else if (streq(key, "delay")) {
                        uint64_t sec;

                        /* Seconds, as --delay=; 0: none (over Delay= of the configuration);
                         * UINT64_MAX: as --delay alone. */
                        r = sd_bus_message_peek_type(message, NULL, &contents);
                        if (r < 0)
                                return r;
                        if (!streq(contents, "t"))
                                return sd_bus_error_setf(error, SYSEXTD_ERROR_INVALID_OPTION,
                                                         "Option 'delay' takes a number of seconds (t), not '%s'.", string_safe(contents, &safe));
                        r = sd_bus_message_read(message, "v", "t", &sec);
                        if (r < 0)
                                return r;
                        if (sec == UINT64_MAX) /* as --delay alone */
                                o->delay_usec = ENGINE_DELAY_DEFAULT;
                        else if (sec > JOURNAL_DELAY_MAX_USEC / 1000000ULL)
                                return sd_bus_error_setf(error, SYSEXTD_ERROR_INVALID_OPTION,
                                                         "Option 'delay' is at most %llu seconds (a year), not %llu.",
                                                         (unsigned long long) (JOURNAL_DELAY_MAX_USEC / 1000000ULL),
                                                         (unsigned long long) sec);
                        else
                                o->delay_usec = sec * 1000000ULL;
                } else if (streq(key, "confirm-within") && verb == ENGINE_REFRESH) {
                        uint64_t sec;

                        r = sd_bus_message_peek_type(message, NULL, &contents);
                        if (r < 0)
                                return r;
                        if (!streq(contents, "t"))
                                return sd_bus_error_setf(error, SYSEXTD_ERROR_INVALID_OPTION,
                                                         "Option 'confirm-within' takes a number of seconds (t), not '%s'.",
                                                         string_safe(contents, &safe));
                        r = sd_bus_message_read(message, "v", "t", &sec);
                        if (r < 0)
                                return r;
                        if (sec == 0 || sec > JOURNAL_CONFIRM_MAX_USEC / 1000000ULL)
                                return sd_bus_error_setf(error, SYSEXTD_ERROR_INVALID_OPTION,
                                                         "Option 'confirm-within' is 1 to %llu seconds (a year), not %llu.",
                                                         (unsigned long long) (JOURNAL_CONFIRM_MAX_USEC / 1000000ULL),
                                                         (unsigned long long) sec);
                        o->confirm_within_usec = sec * 1000000ULL;
                } else if (streq(key, "image-policy")) {
                        int k;
                        r = read_option_string(message, key, &v, error);
                        if (r < 0)
                                return r;
                        k = image_policy_parse(v);
                        if (k < 0)
                                return sd_bus_error_setf(error, SYSEXTD_ERROR_INVALID_OPTION,
                                                         "Option 'image-policy' is open, verity, signed or a systemd image policy, not '%s'.",
                                                         string_safe(v, &safe_value));
                        o->policy = k;
                } else {
                        if (streq(key, "force"))
                                target = &o->force;
                        else if (streq(key, "no-reload"))
                                target = &o->no_reload;
                        else if (streq(key, "always-refresh"))
                                target = &o->always_refresh;
                        else if (streq(key, "strict"))
                                target = &o->strict;
                        else if (streq(key, "unpin") && verb == ENGINE_ROLLBACK)
                                target = &o->unpin;
                        else if (!streq(key, "noexec"))
                                return sd_bus_error_setf(error, SYSEXTD_ERROR_INVALID_OPTION, "Unknown option '%s' (known: %s).",
                                                         string_safe(key, &safe), KNOWN_OPTIONS);
                        r = sd_bus_message_peek_type(message, NULL, &contents);
                        if (r < 0)
                                return r;
                        if (!streq(contents, "b"))
                                return sd_bus_error_setf(error, SYSEXTD_ERROR_INVALID_OPTION,
                                                         "Option '%s' takes a boolean (b), not '%s'.", key, string_safe(contents, &safe));
                        r = sd_bus_message_read(message, "v", "b", &b);
                        if (r < 0)
                                return r;
                        if (target)
                                *target = b;
                        else
                                o->noexec = !!b;
                }
                r = sd_bus_message_exit_container(message);
                if (r < 0)
                        return r;
        }
        if (r < 0)
                return r;
        /* "mutable": as --mutable=, for system extensions or the classes the call names. */
        for (int k = 0; any_mutable >= 0 && k < _IMAGE_CLASS_MAX; k++)
                if ((o->classes ? (o->classes & (1u << k)) : k == IMAGE_CLASS_SYSEXT) && o->mutable[k] < 0)
                        o->mutable[k] = any_mutable;
        return sd_bus_message_exit_container(message);
}

static int method_transition(sd_bus_message *message, void *userdata, sd_bus_error *error, EngineVerb verb) {
        Manager *m = userdata;
        Mutation x = { .verb = verb, .options = ENGINE_OPTIONS_INIT, .pidfd = -EBADF };
        int r;

        r = parse_options(message, m->engine->root, verb, &x.options, error);
        if (r < 0)
                return r;
        r = authorize_and_queue(m, message, &x, error);
        return r < 0 ? r : 1;
}

/* Rollback(t generation, a{sv} options): generation 0 is the newest kept before the live one;
 * options as Refresh's, and unpin (b): the pins go and a refresh runs instead. */
static int method_rollback(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;
        Mutation x = { .verb = ENGINE_ROLLBACK, .options = ENGINE_OPTIONS_INIT, .pidfd = -EBADF };
        uint64_t generation;
        int r;

        r = sd_bus_message_read(message, "t", &generation);
        if (r < 0)
                return r;
        r = parse_options(message, m->engine->root, ENGINE_ROLLBACK, &x.options, error);
        if (r < 0)
                return r;
        if (generation > 0 && x.options.unpin)
                return sd_bus_error_set(error, SYSEXTD_ERROR_INVALID_OPTION,
                                        "Rollback takes a generation or the option unpin, not both.");
        x.options.rollback_to = generation;
        r = authorize_and_queue(m, message, &x, error);
        return r < 0 ? r : 1;
}

/* Confirm(a{sv} options): no option is known yet. */
static int method_confirm(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;
        _cleanup_free_ char *safe = NULL;
        Mutation x = { .is_confirm = true, .pidfd = -EBADF };
        const char *key;
        int r;

        r = sd_bus_message_enter_container(message, 'a', "{sv}");
        if (r < 0)
                return r;
        r = sd_bus_message_enter_container(message, 'e', "sv");
        if (r < 0)
                return r;
        if (r > 0) {
                r = sd_bus_message_read(message, "s", &key);
                if (r < 0)
                        return r;
                return sd_bus_error_setf(error, SYSEXTD_ERROR_INVALID_OPTION, "Unknown option '%s' of Confirm (it takes none).",
                                         string_safe(key, &safe));
        }
        r = sd_bus_message_exit_container(message);
        if (r < 0)
                return r;
        r = authorize_and_queue(m, message, &x, error);
        return r < 0 ? r : 1;
}

static int method_merge(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        return method_transition(message, userdata, error, ENGINE_MERGE);
}

static int method_refresh(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        return method_transition(message, userdata, error, ENGINE_REFRESH);
}

static int method_unmerge(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        return method_transition(message, userdata, error, ENGINE_UNMERGE);
}

/* Follow(h pidfd) and Unfollow(h pidfd).  Only a pidfd names the process: a PID could have been
 * reused by the time the call is run, a pidfd cannot refer to another process. */
static int method_follow(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;
        const char *member = sd_bus_message_get_member(message);
        Mutation x = { .is_follow = true, .follow = streq_ptr(member, "Follow"), .pidfd = -EBADF };
        int fd, r;

        r = sd_bus_message_read(message, "h", &fd);
        if (r < 0)
                return r;
        r = pidfd_get_pid(fd, &x.pid);
        if (r == -EBADF)
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                         "%s takes a pidfd (pidfd_open(2)) of a process in the mount namespace; the file descriptor given is not one.",
                                         strna(member));
        if (r == -ESRCH)
                return sd_bus_error_set(error, SYSEXTD_ERROR_FAILED, "The process of the pidfd has exited.");
        if (r == -EREMOTE)
                return sd_bus_error_set(error, SYSEXTD_ERROR_FAILED,
                                        "The process of the pidfd is in a PID namespace that sysextd does not see.");
        if (r < 0)
                return sd_bus_error_setf(error, SYSEXTD_ERROR_FAILED, "Cannot read the process of the pidfd: %s", strerror(-r));
        /* The message's fd goes with the message: the job keeps a copy of its own. */
        x.pidfd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        if (x.pidfd < 0)
                return -errno;
        r = authorize_and_queue(m, message, &x, error);
        return r < 0 ? r : 1;
}

/* The characters of a unit name (systemd.unit(5)). */
static bool unit_name_chars(const char *u) {
        return strspn(u, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789:-_.\\@") == strlen(u);
}

/* A pidfd of process pid, opened at once: the job holds it, so that the PID cannot name another
 * process by the time the job runs. */
static int commit_pidfd(pid_t pid, const char *whose, int *ret, sd_bus_error *error) {
        int fd = sys_pidfd_open(pid, 0);

        if (fd < 0 && errno == ESRCH)
                return sd_bus_error_setf(error, SYSEXTD_ERROR_FAILED, "No such process: %i (%s).", (int) pid, whose);
        if (fd < 0)
                return sd_bus_error_setf(error, SYSEXTD_ERROR_FAILED, "Cannot open process %i (%s): %s", (int) pid, whose,
                                         strerror(errno));
        *ret = fd;
        return 0;
}

/* Commit(a{sv} options): a delayed transition, committed
 *   - with no option: in the caller's own mount namespace (found from its credentials), for
 *     any caller: it only drops, there, the old top that the host's transition replaced;
 *   - "pid" (u): in the mount namespace of that process; "unit" (s): in every namespace of that
 *     unit's processes; "all" (b) true: everywhere (the host drops its old tops).  These are
 *     authorized like Refresh.
 * A caller in sysextd's own namespace commits everywhere only with "all": its namespace's
 * commit is everyone's. */
static int method_commit(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;
        _cleanup_free_ char *safe = NULL;
        Mutation x = { .is_commit = true, .pidfd = -EBADF };
        const char *key, *contents, *unit = NULL;
        uint32_t pid = 0;
        int all = 0, r;

        r = sd_bus_message_enter_container(message, 'a', "{sv}");
        if (r < 0)
                return r;
        while ((r = sd_bus_message_enter_container(message, 'e', "sv")) > 0) {
                const char *want;

                r = sd_bus_message_read(message, "s", &key);
                if (r < 0)
                        return r;
                want = streq(key, "pid") ? "u" : streq(key, "unit") ? "s" : streq(key, "all") ? "b" : NULL;
                if (!want)
                        return sd_bus_error_setf(error, SYSEXTD_ERROR_INVALID_OPTION, "Unknown option '%s' of Commit (known: all, pid, unit).",
                                                 string_safe(key, &safe));
                r = sd_bus_message_peek_type(message, NULL, &contents);
                if (r < 0)
                        return r;
                if (!streq(contents, want))
                        return sd_bus_error_setf(error, SYSEXTD_ERROR_INVALID_OPTION, "Option '%s' takes type '%s', not '%s'.", key,
                                                 want, string_safe(contents, &safe));
                if (streq(key, "pid"))
                        r = sd_bus_message_read(message, "v", "u", &pid);
                else if (streq(key, "unit"))
                        r = sd_bus_message_read(message, "v", "s", &unit);
                else
                        r = sd_bus_message_read(message, "v", "b", &all);
                if (r < 0)
                        return r;
                r = sd_bus_message_exit_container(message);
                if (r < 0)
                        return r;
        }
        if (r < 0)
                return r;
        r = sd_bus_message_exit_container(message);
        if (r < 0)
                return r;
        if ((pid > 0) + !!unit + !!all > 1)
                return sd_bus_error_set(error, SYSEXTD_ERROR_INVALID_OPTION, "Commit takes one of the options all, pid and unit.");
        if (unit && (isempty(unit) || strlen(unit) > 256 || !unit_name_chars(unit) || strchr(unit, '/')))
                return sd_bus_error_setf(error, SYSEXTD_ERROR_INVALID_OPTION, "Option 'unit' is a unit name, not '%s'.",
                                         string_safe(unit, &safe));
        if (pid > INT32_MAX)
                return sd_bus_error_setf(error, SYSEXTD_ERROR_INVALID_OPTION, "Option 'pid' is a process ID, not %" PRIu32 ".", pid);

        if (!all && pid == 0 && !unit) {
                _cleanup_(sd_bus_creds_unrefp) sd_bus_creds *creds = NULL;
                uint64_t caller_ns = 0, own = 0;
                pid_t caller = 0;

                r = sd_bus_query_sender_creds(message, SD_BUS_CREDS_PID, &creds);
                if (r >= 0)
                        r = sd_bus_creds_get_pid(creds, &caller);
                if (r < 0 || caller <= 0)
                        return sd_bus_error_set(error, SYSEXTD_ERROR_FAILED,
                                                "Cannot tell the calling process, so not its mount namespace either; name it with the option pid.");
                r = commit_pidfd(caller, "the caller", &x.pidfd, error);
                if (r < 0)
                        return r;
                if (mount_namespace_id(&own) >= 0 && delay_namespace_of(caller, &caller_ns) >= 0 && caller_ns == own) {
                        x.pidfd = safe_close(x.pidfd);
                        return sd_bus_error_set(error, SYSEXTD_ERROR_FAILED,
                                                "The caller is in sysextd's own mount namespace, whose commit is every namespace's; call Commit with the option all to commit everywhere.");
                }
                x.pid = caller;
                x.self = true;
                /* Its own namespace only, and only a delayed transition: nobody else's view
                 * changes, and nothing is mounted there that the host did not already delay. */
                r = mutation_queue(m, message, &x);
                return r < 0 ? r : 1;
        }
        if (pid > 0) {
                r = commit_pidfd((pid_t) pid, "option pid", &x.pidfd, error);
                if (r < 0)
                        return r;
                x.pid = (pid_t) pid;
        }
        if (unit) {
                x.unit = strdup(unit);
                if (!x.unit) {
                        x.pidfd = safe_close(x.pidfd);
                        return -ENOMEM;
                }
        }
        r = authorize_and_queue(m, message, &x, error);
        return r < 0 ? r : 1;
}

static int append_follower(sd_bus_message *reply, const Follower *f) {
        _cleanup_strv_free_ char **hierarchies = NULL;
        int r;

        for (size_t i = 0; i < f->trees.n; i++)
                if (strv_extend(&hierarchies, f->trees.trees[i]->hierarchy) < 0)
                        return -ENOMEM;
        r = sd_bus_message_open_container(reply, 'r', "tisstasass");
        if (r >= 0)
                r = sd_bus_message_append(reply, "ti", f->ns, (int32_t) f->pid);
        if (r >= 0)
                r = append_string(reply, f->name);
        if (r >= 0)
                r = append_string(reply, f->machine);
        if (r >= 0)
                r = sd_bus_message_append(reply, "t", f->generation);
        if (r >= 0)
                r = append_strv(reply, hierarchies);
        if (r >= 0)
                r = append_strv(reply, f->problems);
        if (r >= 0)
                r = append_string(reply, f->error);
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        return r;
}

/* The followed namespaces as recorded: read in the bus process, also while a job runs. */
static int method_list_followed(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;
        _cleanup_(follower_list_done) FollowerList l = {};
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        int r;

        m->ops->update_idle(m);
        r = engine_followers(m->engine, &l);
        if (r < 0)
                return sd_bus_error_setf(error, SYSEXTD_ERROR_FAILED, "Failed to read the followed namespaces: %s", strerror(-r));
        r = sd_bus_message_new_method_return(message, &reply);
        if (r >= 0)
                r = sd_bus_message_open_container(reply, 'a', SYSEXTD_FOLLOWER_STRUCT);
        for (size_t i = 0; r >= 0 && i < l.n; i++)
                r = append_follower(reply, &l.followers[i]);
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        if (r < 0)
                return r;
        return sd_bus_send(NULL, reply, NULL);
}

/* The namespaces that did not get the last swap: read in the bus process, also while a job
 * runs (a look through /proc, and the base reached as base.h does, in a helper process). */
static int status_error(Manager *m, sd_bus_error *error);

static int method_list_namespaces(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;
        _cleanup_(stale_namespace_list_done) StaleNamespaceList l = {};
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        int r;

        m->ops->update_idle(m);
        r = engine_namespaces(m->engine, &l);
        if (r < 0)
                return status_error(m, error);
        r = sd_bus_message_new_method_return(message, &reply);
        if (r >= 0)
                r = sd_bus_message_open_container(reply, 'a', SYSEXTD_NAMESPACE_STRUCT);
        for (size_t i = 0; r >= 0 && i < l.n; i++) {
                const StaleNamespace *x = &l.namespaces[i];

                r = sd_bus_message_open_container(reply, 'r', "tiussbba(ss)");
                if (r >= 0)
                        r = sd_bus_message_append(reply, "tiu", x->ns, (int32_t) x->pid, (uint32_t) x->n_processes);
                if (r >= 0)
                        r = append_string(reply, x->unit);
                if (r >= 0)
                        r = append_string(reply, x->machine);
                if (r >= 0)
                        r = sd_bus_message_append(reply, "bb", x->followed, x->own_root);
                if (r >= 0)
                        r = sd_bus_message_open_container(reply, 'a', "(ss)");
                for (size_t k = 0; r >= 0 && k < x->n && m->engine->hierarchies[k]; k++)
                        r = sd_bus_message_append(reply, "(ss)", m->engine->hierarchies[k],
                                                  namespace_view_to_string(x->tops[k].view));
                if (r >= 0)
                        r = sd_bus_message_close_container(reply);
                if (r >= 0)
                        r = sd_bus_message_close_container(reply);
        }
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        if (r < 0)
                return r;
        return sd_bus_send(NULL, reply, NULL);
}

static int method_list_images(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;
        int r;

        if (streq_ptr(sd_bus_message_get_member(message), "ListImagesEx")) {
                EngineOptions o = ENGINE_OPTIONS_INIT;

                /* Only the class is meaningful for a listing; the rest is checked all the same. */
                r = parse_options(message, m->engine->root, _ENGINE_VERB_MAX, &o, error);
                if (r < 0)
                        return r;
        }
        r = m->ops->list_images(m, message);
        return r < 0 ? r : 1;
}

static int status_error(Manager *m, sd_bus_error *error) {
        _cleanup_free_ char *buf = NULL;
        return sd_bus_error_setf(error, SYSEXTD_ERROR_FAILED, "%s",
                                 string_safe(m->engine->result.message ?: "Failed to read the status.", &buf));
}

/* What a call that reads the status starts with: a caller keeps the daemon from its idle exit,
 * and a status that cannot be read is the call's error. */
static int read_status(Manager *m, EngineStatus *s, sd_bus_error *error) {
        m->ops->update_idle(m);
        if (engine_status(m->engine, NULL, s) < 0)
                return status_error(m, error);
        return 0;
}

static int append_delay_namespaces(sd_bus_message *reply, const DelayNamespace *ns, size_t n) {
        int r = sd_bus_message_open_container(reply, 'a', SYSEXTD_DELAY_NS_STRUCT);

        for (size_t i = 0; r >= 0 && i < n; i++) {
                r = sd_bus_message_open_container(reply, 'r', "tis");
                if (r >= 0)
                        r = sd_bus_message_append(reply, "ti", ns[i].ns, (int32_t) ns[i].pid);
                if (r >= 0)
                        r = append_string(reply, ns[i].unit);
                if (r >= 0)
                        r = sd_bus_message_close_container(reply);
        }
        return r < 0 ? r : sd_bus_message_close_container(reply);
}

/* GetDelay(): the delayed transition, as status shows it: its generation, since and deadline
 * (CLOCK_REALTIME µs; all 0 when none is delayed), and the namespaces on the old and on the
 * new trees.  Read in the bus process, also while a job runs. */
static int method_get_delay(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;
        _cleanup_(engine_status_done) EngineStatus s = {};
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        int r;

        r = read_status(m, &s, error);
        if (r < 0)
                return r;
        r = sd_bus_message_new_method_return(message, &reply);
        if (r >= 0)
                r = sd_bus_message_append(reply, "ttt", s.delayed_generation, s.delayed_since, s.delay_deadline);
        if (r >= 0)
                r = append_delay_namespaces(reply, s.delayed.old, s.delayed.n_old);
        if (r >= 0)
                r = append_delay_namespaces(reply, s.delayed.new, s.delayed.n_new);
        if (r < 0)
                return r;
        return sd_bus_send(NULL, reply, NULL);
}

/* GetRollback(): the journal's history, pins and deadline (bus-api.h). */
static int method_get_rollback(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_journal_ Journal j = {};
        int r;

        m->ops->update_idle(m); /* a caller keeps the daemon from its idle exit */
        r = engine_history(m->engine, true, &j);
        if (r < 0)
                return sd_bus_error_setf(error, SYSEXTD_ERROR_FAILED, "Failed to read the journal: %s", strerror(-r));
        r = sd_bus_message_new_method_return(message, &reply);
        if (r >= 0)
                r = sd_bus_message_append(reply, SYSEXTD_CONFIRM_STRUCT, j.confirm_generation, j.confirm_since, j.confirm_deadline,
                                          j.confirm_target);
        if (r >= 0)
                r = sd_bus_message_open_container(reply, 'r', "tttss");
        if (r >= 0)
                r = sd_bus_message_append(reply, "ttt", j.rollback_when, j.rollback_from, j.rollback_to);
        if (r >= 0)
                r = append_string(reply, strempty(j.rollback_reason));
        if (r >= 0)
                r = append_string(reply, strempty(j.rollback_error));
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        if (r >= 0)
                r = sd_bus_message_open_container(reply, 'a', SYSEXTD_PIN_STRUCT);
        for (size_t i = 0; r >= 0 && i < j.pins.n; i++) {
                const Pin *p = &j.pins.pins[i];

                r = sd_bus_message_open_container(reply, 'r', "sssst");
                if (r >= 0)
                        r = append_string(reply, image_class_to_string(p->klass));
                if (r >= 0)
                        r = append_string(reply, p->name);
                if (r >= 0)
                        r = append_string(reply, strempty(p->version));
                if (r >= 0)
                        r = append_string(reply, strempty(p->from_version));
                if (r >= 0)
                        r = sd_bus_message_append(reply, "t", p->generation);
                if (r >= 0)
                        r = sd_bus_message_close_container(reply);
        }
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        if (r >= 0)
                r = sd_bus_message_open_container(reply, 'a', SYSEXTD_GENERATION_STRUCT);
        for (size_t i = 0; r >= 0 && i < j.n_generations; i++) {
                const Generation *g = &j.generations[i];

                r = sd_bus_message_open_container(reply, 'r', "ttba(ssss)");
                if (r >= 0)
                        r = sd_bus_message_append(reply, "ttb", g->generation, g->when, g->forced);
                if (r >= 0)
                        r = sd_bus_message_open_container(reply, 'a', "(ssss)");
                for (size_t k = 0; r >= 0 && k < g->images.n; k++) {
                        const Image *img = &g->images.images[k];

                        r = sd_bus_message_open_container(reply, 'r', "ssss");
                        if (r >= 0)
                                r = append_string(reply, image_class_to_string(img->klass));
                        if (r >= 0)
                                r = append_string(reply, img->name);
                        if (r >= 0)
                                r = append_string(reply, strempty(img->version));
                        if (r >= 0)
                                r = append_string(reply, img->path);
                        if (r >= 0)
                                r = sd_bus_message_close_container(reply);
                }
                if (r >= 0)
                        r = sd_bus_message_close_container(reply);
                if (r >= 0)
                        r = sd_bus_message_close_container(reply);
        }
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        return r < 0 ? r : sd_bus_send(NULL, reply, NULL);
}

/* ListChangedImages(): the live layers that changed under the live tree, as status shows them
 * (engine_status(): what the daemon saw and what a stat() finds now). */
static int method_list_changed_images(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;
        _cleanup_(engine_status_done) EngineStatus s = {};
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        int r;

        m->ops->update_idle(m);
        r = engine_status(m->engine, NULL, &s);
        if (r < 0)
                return status_error(m, error);
        r = sd_bus_message_new_method_return(message, &reply);
        if (r >= 0)
                r = sd_bus_message_open_container(reply, 'a', SYSEXTD_CHANGED_IMAGE_STRUCT);
        for (size_t i = 0; r >= 0 && i < s.changed.n; i++) {
                const WatchChange *c = &s.changed.changes[i];

                r = sd_bus_message_open_container(reply, 'r', "sssstt");
                if (r >= 0)
                        r = append_string(reply, c->name);
                if (r >= 0)
                        r = append_string(reply, c->path);
                if (r >= 0)
                        r = append_string(reply, watch_how_to_string(c->how));
                if (r >= 0)
                        r = append_string(reply, c->description);
                if (r >= 0)
                        r = sd_bus_message_append(reply, "tt", c->generation, c->since);
                if (r >= 0)
                        r = sd_bus_message_close_container(reply);
        }
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        if (r < 0)
                return r;
        return sd_bus_send(NULL, reply, NULL);
}

static int method_get_status(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;
        _cleanup_(engine_status_done) EngineStatus s = {};
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        int r;

        r = read_status(m, &s, error);
        if (r < 0)
                return r;

        r = sd_bus_message_new_method_return(message, &reply);
        if (r >= 0)
                r = sd_bus_message_append(reply, "st", s.mode, s.generation);
        if (r >= 0)
                r = sd_bus_message_open_container(reply, 'a', SYSEXTD_HIERARCHY_STRUCT);
        for (size_t i = 0; r >= 0 && i < s.n_hierarchies; i++) {
                HierarchyStatus *h = &s.hierarchies[i];

                r = sd_bus_message_open_container(reply, 'r', "sbastb");
                if (r >= 0)
                        r = append_string(reply, h->path);
                if (r >= 0)
                        r = sd_bus_message_append(reply, "b", h->merged);
                if (r >= 0)
                        r = append_strv(reply, h->extensions);
                if (r >= 0)
                        r = sd_bus_message_append(reply, "tb", h->since, h->foreign_top);
                if (r >= 0)
                        r = sd_bus_message_close_container(reply);
        }
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        if (r >= 0)
                r = sd_bus_message_open_container(reply, 'a', SYSEXTD_SKIPPED_STRUCT);
        for (size_t i = 0; r >= 0 && i < s.journal.images.n; i++) {
                const Image *img = &s.journal.images.images[i];

                if (img->verdict == IMAGE_COMPATIBLE)
                        continue;
                r = sd_bus_message_open_container(reply, 'r', "ssss");
                if (r >= 0)
                        r = append_string(reply, img->name);
                if (r >= 0)
                        r = append_string(reply, img->path);
                if (r >= 0)
                        r = append_string(reply, image_verdict_to_string(img->verdict));
                if (r >= 0)
                        r = append_string(reply, img->reason);
                if (r >= 0)
                        r = sd_bus_message_close_container(reply);
        }
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        if (r >= 0)
                r = sd_bus_message_append(reply, "s", s.policy);
        if (r >= 0)
                r = sd_bus_message_open_container(reply, 'a', SYSEXTD_MERGED_IMAGE_STRUCT);
        for (size_t i = 0; r >= 0 && i < s.journal.images.n; i++) {
                const Image *img = &s.journal.images.images[i];

                if (img->verdict != IMAGE_COMPATIBLE)
                        continue;
                r = sd_bus_message_open_container(reply, 'r', "sssb");
                if (r >= 0)
                        r = append_string(reply, img->name);
                if (r >= 0)
                        r = append_string(reply, img->path);
                if (r >= 0)
                        r = append_string(reply, verity_mode_to_string(img->verity));
                if (r >= 0)
                        r = sd_bus_message_append(reply, "b", img->signed_valid);
                if (r >= 0)
                        r = sd_bus_message_close_container(reply);
        }
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        if (r >= 0)
                r = sd_bus_message_open_container(reply, 'a', SYSEXTD_CLASS_STRUCT);
        for (size_t i = 0; r >= 0 && i < s.n_hierarchies; i++) {
                r = sd_bus_message_open_container(reply, 'r', "ssb");
                if (r >= 0)
                        r = append_string(reply, s.hierarchies[i].path);
                if (r >= 0)
                        r = append_string(reply, image_class_to_string(s.hierarchies[i].klass));
                if (r >= 0)
                        r = sd_bus_message_append(reply, "b", s.hierarchies[i].writable);
                if (r >= 0)
                        r = sd_bus_message_close_container(reply);
        }
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        if (r < 0)
                return r;
        return sd_bus_send(NULL, reply, NULL);
}

void manager_drop_status_snapshot(Manager *m) {
        if (m->status_snapshot) {
                engine_status_done(m->status_snapshot);
                free(m->status_snapshot);
                m->status_snapshot = NULL;
        }
        if (m->status_snapshot_drop)
                (void) sd_event_source_set_enabled(m->status_snapshot_drop, SD_EVENT_OFF);
}

static int on_status_snapshot_drop(sd_event_source *s, void *userdata) {
        manager_drop_status_snapshot(userdata);
        return 0;
}

/* The status for the property getters, read at most once per dispatch (Manager.status_borrowed,
 * .status_snapshot). */
static int property_status(Manager *m, const EngineStatus **ret, sd_bus_error *error) {
        _cleanup_free_ EngineStatus *s = NULL;
        int r;

        if (m->status_borrowed || m->status_snapshot) {
                m->ops->update_idle(m);
                *ret = m->status_borrowed ?: m->status_snapshot;
                return 0;
        }
        if (!m->status_snapshot_drop) {
                r = sd_event_add_defer(m->event, &m->status_snapshot_drop, on_status_snapshot_drop, m);
                if (r < 0)
                        return r;
                (void) sd_event_source_set_priority(m->status_snapshot_drop, SD_EVENT_PRIORITY_IMPORTANT);
        }
        s = calloc(1, sizeof(EngineStatus));
        if (!s)
                return -ENOMEM;
        r = read_status(m, s, error);
        if (r >= 0)
                r = sd_event_source_set_enabled(m->status_snapshot_drop, SD_EVENT_ONESHOT);
        if (r < 0) {
                engine_status_done(s);
                return r;
        }
        *ret = m->status_snapshot = TAKE_PTR(s);
        return 0;
}

static int property_get(sd_bus *bus, const char *path, const char *interface, const char *property,
                        sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;
        const EngineStatus *s;
        _cleanup_strv_free_ char **list = NULL;
        int r = 0;

        m->ops->update_idle(m);
        if (streq(property, "Root"))
                return append_string(reply, m->engine->root);
        if (streq(property, "KernelFeatures")) {
                _cleanup_strv_free_ char **features = NULL;
                for (int f = 0; f < _KERNEL_FEATURE_MAX; f++)
                        if (kernel_has(f) && strv_extend(&features, kernel_feature_to_string(f)) < 0)
                                return -ENOMEM;
                return append_strv(reply, features);
        }

        r = property_status(m, &s, error);
        if (r < 0)
                return r;

        if (streq(property, "Generation"))
                return sd_bus_message_append(reply, "t", s->generation);
        if (streq(property, "Mode"))
                return sd_bus_message_append(reply, "s", s->mode);
        if (streq(property, "ImagePolicy"))
                return sd_bus_message_append(reply, "s", s->policy);
        if (streq(property, "OwnershipProof"))
                return sd_bus_message_append(reply, "s", s->proof);

        list = calloc(1, sizeof(char *));
        if (!list)
                return -ENOMEM;
        for (size_t i = 0; i < s->n_hierarchies; i++) {
                if (!s->hierarchies[i].merged)
                        continue;
                if (streq(property, "Hierarchies"))
                        r = strv_extend(&list, s->hierarchies[i].path);
                else
                        STRV_FOREACH(x, s->hierarchies[i].extensions)
                                if (!strv_contains(list, *x) && (r = strv_extend(&list, *x)) < 0)
                                        break;
                if (r < 0)
                        return r;
        }
        if (streq(property, "Merged"))
                return sd_bus_message_append(reply, "b", strv_length(list) > 0);
        return append_strv(reply, list);
}

/* Per hierarchy: how many trees of ours are stacked there, and how many of them are buried
 * below the live one. */
static int property_get_stacks(sd_bus *bus, const char *path, const char *interface, const char *property,
                               sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;
        const EngineStatus *s;
        int r;

        r = property_status(m, &s, error);
        if (r < 0)
                return r;
        r = sd_bus_message_open_container(reply, 'a', "(suu)");
        for (size_t i = 0; r >= 0 && i < s->n_hierarchies; i++) {
                r = sd_bus_message_open_container(reply, 'r', "suu");
                if (r >= 0)
                        r = append_string(reply, s->hierarchies[i].path);
                if (r >= 0)
                        r = sd_bus_message_append(reply, "uu", s->hierarchies[i].n_ours, s->hierarchies[i].n_buried);
                if (r >= 0)
                        r = sd_bus_message_close_container(reply);
        }
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        return r;
}

/* Per merged image, what its mount is made from: "file" (erofs from its file), "loop" or
 * "directory".  Newer than GetStatus, whose signature stays. */
static int property_get_image_backings(sd_bus *bus, const char *path, const char *interface, const char *property,
                                       sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;
        const EngineStatus *s;
        int r;

        r = property_status(m, &s, error);
        if (r < 0)
                return r;
        r = sd_bus_message_open_container(reply, 'a', "(ss)");
        for (size_t i = 0; r >= 0 && i < s->journal.images.n; i++) {
                const Image *img = &s->journal.images.images[i];

                if (img->verdict != IMAGE_COMPATIBLE)
                        continue;
                r = sd_bus_message_open_container(reply, 'r', "ss");
                if (r >= 0)
                        r = append_string(reply, img->name);
                if (r >= 0)
                        r = append_string(reply, image_backing_to_string(img->backing));
                if (r >= 0)
                        r = sd_bus_message_close_container(reply);
        }
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        return r;
}

static int property_get_unit_jobs(sd_bus *bus, const char *path, const char *interface, const char *property,
                                  sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        return bus_append_unit_jobs(reply, userdata);
}

static sd_bus_vtable manager_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_PROPERTY("Root", "s", property_get, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("Generation", "t", property_get, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("Merged", "b", property_get, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("Hierarchies", "as", property_get, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("Extensions", "as", property_get, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("KernelFeatures", "as", property_get, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("Mode", "s", property_get, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("ImagePolicy", "s", property_get, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("OwnershipProof", "s", property_get, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("Stacks", "a(suu)", property_get_stacks, 0, 0),
        SD_BUS_PROPERTY("ImageBackings", "a(ss)", property_get_image_backings, 0, 0),
        SD_BUS_PROPERTY("UnitJobs", "a" SYSEXTD_UNIT_JOB_STRUCT, property_get_unit_jobs, 0,
                        SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_METHOD_WITH_ARGS("Merge", SD_BUS_ARGS("a{sv}", options),
                                SD_BUS_RESULT("t", generation, "b", changed, "a(us)", messages), method_merge,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Refresh", SD_BUS_ARGS("a{sv}", options),
                                SD_BUS_RESULT("t", generation, "b", changed, "a(us)", messages), method_refresh,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Unmerge", SD_BUS_ARGS("a{sv}", options),
                                SD_BUS_RESULT("t", generation, "b", changed, "a(us)", messages), method_unmerge,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Rollback", SD_BUS_ARGS("t", generation, "a{sv}", options),
                                SD_BUS_RESULT("t", generation, "b", changed, "a(us)", messages), method_rollback,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Confirm", SD_BUS_ARGS("a{sv}", options),
                                SD_BUS_RESULT("t", generation, "b", changed, "a(us)", messages), method_confirm,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("GetRollback", SD_BUS_NO_ARGS,
                                SD_BUS_RESULT(SYSEXTD_CONFIRM_STRUCT, confirm, SYSEXTD_LAST_ROLLBACK_STRUCT, last_rollback,
                                              "a" SYSEXTD_PIN_STRUCT, pins, "a" SYSEXTD_GENERATION_STRUCT, generations),
                                method_get_rollback, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Follow", SD_BUS_ARGS("h", pidfd), SD_BUS_NO_RESULT, method_follow, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Unfollow", SD_BUS_ARGS("h", pidfd), SD_BUS_NO_RESULT, method_follow,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Commit", SD_BUS_ARGS("a{sv}", options),
                                SD_BUS_RESULT("t", generation, "b", changed, "a(us)", messages), method_commit,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("GetDelay", SD_BUS_NO_ARGS,
                                SD_BUS_RESULT("t", generation, "t", since, "t", deadline, "a" SYSEXTD_DELAY_NS_STRUCT, old,
                                              "a" SYSEXTD_DELAY_NS_STRUCT, new),
                                method_get_delay, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("ListFollowed", SD_BUS_NO_ARGS, SD_BUS_RESULT("a" SYSEXTD_FOLLOWER_STRUCT, followed),
                                method_list_followed, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("ListNamespaces", SD_BUS_NO_ARGS, SD_BUS_RESULT("a" SYSEXTD_NAMESPACE_STRUCT, namespaces),
                                method_list_namespaces, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("ListImages", SD_BUS_NO_ARGS, SD_BUS_RESULT("a(ssssssb)", images), method_list_images,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("ListImagesEx", SD_BUS_ARGS("a{sv}", options), SD_BUS_RESULT("a(ssssssbs)", images),
                                method_list_images, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("GetStatus", SD_BUS_NO_ARGS,
                                SD_BUS_RESULT("s", mode, "t", generation, "a(sbastb)", hierarchies, "a(ssss)", skipped,
                                              "s", policy, "a(sssb)", images, "a(ssb)", classes),
                                method_get_status, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("ListChangedImages", SD_BUS_NO_ARGS,
                                SD_BUS_RESULT("a" SYSEXTD_CHANGED_IMAGE_STRUCT, images), method_list_changed_images,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_SIGNAL_WITH_ARGS("TreeChanged", SD_BUS_ARGS("t", generation, "as", extensions), 0),
        SD_BUS_SIGNAL_WITH_ARGS("ImageChanged",
                                SD_BUS_ARGS("s", name, "s", path, "s", how, "s", description, "t", generation), 0),
        SD_BUS_SIGNAL_WITH_ARGS("FollowFailed", SD_BUS_ARGS("t", namespace, "i", pid, "s", message), 0),
        SD_BUS_SIGNAL_WITH_ARGS("UnitJobsFinished", SD_BUS_ARGS("t", generation, "a" SYSEXTD_UNIT_JOB_STRUCT, jobs), 0),
        SD_BUS_VTABLE_END,
};

int bus_service_register(Manager *m) {
        return sd_bus_add_object_vtable(m->bus, &m->vtable_slot, SYSEXTD_BUS_PATH, SYSEXTD_BUS_INTERFACE, bus_vtable_start(manager_vtable), m);
}
