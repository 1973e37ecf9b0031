/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The daemon's varlink interfaces (varlink-service.h): systemd's io.systemd.sysext and
 * io.systemd.SysUpdate.Notify, and org.sysextd1.Manager, which root's command line calls
 * instead of the D-Bus methods (answered as they are: WrongRoot for a call that means another
 * root, Failed with the D-Bus error otherwise); over the varlink server (varlink.h), the calls
 * parsed and the replies made by varlink-sysext.c, the jobs run by the daemon's queue (manager.h's ops), the
 * authorization as the bus methods have it: root goes through; anyone else is asked about
 * through polkit (polkit.c) as the process at the other end of the socket, with the same action
 * and details as the D-Bus method with the same options, interactively only when the call says
 * allowInteractiveAuthentication.  List is anyone's, as ListImages is.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "authorize.h"
#include "bus-api.h"
#include "dlopen-systemd.h"
#include "fd-util.h"
#include "fileio.h"
#include "json-util.h"
#include "log.h"
#include "polkit.h"
#include "util.h"
#include "varlink-service.h"
#include "varlink-sysext.h"
#include "varlink.h"

static const VarlinkInterface interfaces[] = {
        { SYSEXT_VARLINK_INTERFACE, sysext_varlink_description, sysext_varlink_methods, SYSEXT_VARLINK_IDL },
        { SYSUPDATE_NOTIFY_INTERFACE, sysupdate_notify_description, sysupdate_notify_methods, SYSUPDATE_NOTIFY_IDL },
        { SYSEXTD_VARLINK_INTERFACE, sysextd_varlink_description, sysextd_varlink_methods, SYSEXTD_VARLINK_IDL },
        {},
};

/* org.sysextd1.Manager's error, as the D-Bus methods would have failed. */
static void reply_manager_failed(VarlinkCall *call, const char *name, const char *message) {
        _cleanup_free_ char *buf = NULL;
        json_object *p = json_object_new_object();

        if (!p || json_object_object_add(p, "name", json_object_new_string(name)) < 0 ||
            json_object_object_add(p, "message", json_object_new_string(string_safe(message, &buf))) < 0) {
                json_object_put(p);
                (void) varlink_call_error_errno(call, -ENOMEM);
                return;
        }
        (void) varlink_call_error(call, SYSEXTD_VARLINK_ERROR_FAILED, p);
}

void varlink_service_fail(const VarlinkRequest *req, int error) {
        _cleanup_free_ char *text = NULL;

        if (!req->manager) {
                (void) varlink_call_error_errno(req->call, error);
                return;
        }
        if (error == -ESHUTDOWN) {
                reply_manager_failed(req->call, SYSEXTD_ERROR_BUSY, "sysextd is shutting down; the request was not run.");
                return;
        }
        /* As the bus says it: its only other caller is a job whose worker could not start. */
        if (asprintf(&text, "Failed to start a worker: %s", strerror(-error)) < 0)
                text = NULL;
        reply_manager_failed(req->call, SYSEXTD_ERROR_FAILED, text ?: "Failed to start a worker.");
}

/* The first hierarchy sysextd's tree is merged into, for AlreadyMerged. */
static char *merged_hierarchy(Manager *m) {
        _cleanup_(engine_status_done) EngineStatus s = {};

        if (engine_status(m->engine, NULL, &s) < 0)
                return NULL;
        for (size_t i = 0; i < s.n_hierarchies; i++)
                if (s.hierarchies[i].merged || s.hierarchies[i].foreign_top)
                        return strdup(s.hierarchies[i].path);
        return NULL;
}

static void reply_list(const VarlinkRequest *req, json_object *doc) {
        _cleanup_json_ json_object *items = NULL;
        size_t n;
        int e = 0;

        items = sysext_list_items(doc, req->classes, &e);
        if (!items) {
                (void) varlink_call_error_errno(req->call, e);
                return;
        }
        n = json_object_array_length(items);
        if (n == 0) {
                (void) varlink_call_error(req->call, SYSEXT_ERROR_NO_IMAGES_FOUND, NULL);
                return;
        }
        for (size_t i = 0; i < n; i++)
                if (varlink_call_reply(req->call, json_object_get(json_object_array_get_idx(items, i)), i + 1 < n) < 0)
                        break;
}

void varlink_service_reply(Manager *m, const VarlinkRequest *req, JobType type, json_object *doc) {
        _cleanup_free_ char *hierarchy = NULL;
        json_object *p = NULL, *v;
        const char *error = NULL;

        if (type == JOB_LIST) {
                reply_list(req, doc);
                return;
        }
        if (req->manager) {
                if (sysextd_transition_reply(doc, &error, &p) < 0)
                        (void) varlink_call_error_errno(req->call, -ENOMEM);
                else if (error)
                        (void) varlink_call_error(req->call, error, p);
                else
                        (void) varlink_call_reply(req->call, p, false);
                return;
        }
        if (doc && json_object_object_get_ex(doc, "kind", &v) && json_object_is_type(v, json_type_int) &&
            json_object_get_int(v) == ENGINE_ERROR_ALREADY_MERGED)
                hierarchy = merged_hierarchy(m);
        if (doc && json_object_object_get_ex(doc, "error", &v) && json_object_is_type(v, json_type_string) &&
            !isempty(json_object_get_string(v)) && json_object_object_get_ex(doc, "r", &v) && json_object_get_int(v) < 0)
                log_info("A varlink call failed: %s", json_object_get_string(json_object_object_get(doc, "error")));
        if (sysext_transition_reply(doc, hierarchy, &error, &p) < 0) {
                (void) varlink_call_error_errno(req->call, -ENOMEM);
                return;
        }
        if (error)
                (void) varlink_call_error(req->call, error, p);
        else
                (void) varlink_call_reply(req->call, p, false);
}

/* ---- authorization --------------------------------------------------------------------- */

typedef struct VarlinkAuthorization {
        Manager *manager;
        VarlinkCall *call;
        SysextCall request;
        unsigned unsafe;
        uint64_t timeout_usec, started_usec;
        char *cancellation_id;
        sd_bus_slot *slot;
} VarlinkAuthorization;

static void authorization_free(VarlinkAuthorization *a) {
        Manager *m = a->manager;

        sd_bus_slot_unref(a->slot);
        varlink_call_unref(a->call);
        free(a->cancellation_id);
        free(a);
        m->n_authorizing--;
        m->ops->update_idle(m);
        m->ops->exit_if_done(m);
}

static int queue(Manager *m, VarlinkCall *call, const SysextCall *c) {
        return m->ops->queue_transition_varlink(m, call, c->verb, &c->options, c->manager);
}

static int on_authorization(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        VarlinkAuthorization *a = userdata;
        const sd_bus_error *e = sd_bus_message_get_error(reply);
        bool authorized = false, challenge = false;
        int r = 0;

        if (e) {
                if (polkit_error_unavailable(e))
                        log_info("A varlink caller is not root and polkit, which could allow it, is not available; refused.");
                else if (sd_bus_error_has_names(e, SD_BUS_ERROR_NO_REPLY, SD_BUS_ERROR_TIMEOUT)) {
                        log_warning("polkit did not answer within %" PRIu64 " s whether a varlink caller may change the merged tree; refusing.",
                                    a->timeout_usec / 1000000);
                        if (a->request.interactive)
                                polkit_cancel(a->manager->bus, a->cancellation_id);
                } else
                        log_warning("Cannot ask polkit whether a varlink caller may change the merged tree: %s", strna(e->message));
                (void) varlink_call_error(a->call, VARLINK_ERROR_PERMISSION_DENIED, NULL);
        } else if (polkit_check_result(reply, &authorized, &challenge) < 0 || !authorized) {
                if (challenge && !a->request.interactive)
                        log_info("A varlink caller needs to authenticate (%s) and did not allow interactive authentication.",
                                 authorize_action(a->unsafe));
                (void) varlink_call_error(a->call, VARLINK_ERROR_PERMISSION_DENIED, NULL);
        } else {
                r = queue(a->manager, a->call, &a->request);
                if (r < 0 && a->request.manager)
                        reply_manager_failed(a->call, SYSEXTD_ERROR_FAILED, "Failed to queue the request: out of memory.");
                else if (r < 0)
                        (void) varlink_call_error_errno(a->call, r);
        }
        authorization_free(a);
        return 0;
}

/* Runs the call now for root; asks polkit about anyone else. */
static int authorize_and_queue(Manager *m, VarlinkCall *call, const SysextCall *c) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *q = NULL;
        _cleanup_strv_free_ char **details = NULL;
        _cleanup_close_ int pidfd = -EBADF;
        PolkitSubject subject = {};
        VarlinkAuthorization *a;
        static uint64_t counter = 0;
        pid_t pid = 0, now_pid = 0;
        uid_t uid = 0;
        int r;

        r = varlink_call_peer(call, &uid, &pid, &pidfd);
        if (r < 0)
                return varlink_call_error(call, VARLINK_ERROR_PERMISSION_DENIED, NULL);
        if (uid == 0)
                return queue(m, call, c);

        /* polkit tells processes apart by PID and start time; the pidfd (where the kernel gives
         * one) proves that the PID still is the caller's after the start time was read. */
        subject = (PolkitSubject) { .pid = pid, .uid = uid };
        r = process_start_time(pid, &subject.start_time);
        if (r >= 0 && pidfd >= 0 && (pidfd_get_pid(pidfd, &now_pid) < 0 || now_pid != pid))
                r = -ESRCH;
        if (r < 0)
                return varlink_call_error(call, VARLINK_ERROR_PERMISSION_DENIED, NULL);

        r = authorize_details(&m->engine->config, c->verb, &c->options, &details);
        if (r < 0)
                return r;
        a = calloc(1, sizeof(*a));
        if (!a)
                return -ENOMEM;
        *a = (VarlinkAuthorization) { .manager = m, .call = varlink_call_ref(call), .request = *c,
                                      .unsafe = authorize_unsafe(&m->engine->config, &c->options),
                                      .timeout_usec = polkit_timeout_usec(c->interactive) };
        m->n_authorizing++;
        m->ops->update_idle(m);
        if (asprintf(&a->cancellation_id, "sysextd-varlink-%i-%" PRIu64, (int) pid, ++counter) < 0) {
                a->cancellation_id = NULL;
                authorization_free(a);
                return -ENOMEM;
        }
        r = polkit_check_new(m->bus, &subject, authorize_action(a->unsafe), details, c->interactive, a->cancellation_id, &q);
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

/* ---- the calls ------------------------------------------------------------------------- */

static int on_call(VarlinkServer *s, VarlinkCall *call, const char *method, json_object *parameters, unsigned flags,
                   void *userdata) {
        Manager *m = userdata;
        const char *bad = NULL;
        SysextCall c;
        int r;

        m->ops->update_idle(m);
        r = sysext_call_parse(method, parameters, flags, &c, &bad);
        if (r == -EOPNOTSUPP) {
                json_object *p = json_object_new_object();
                if (p)
                        json_object_object_add(p, "method", json_object_new_string(method));
                return varlink_call_error(call, VARLINK_ERROR_METHOD_NOT_FOUND, p);
        }
        if (r == -EPROTO)
                return varlink_call_error(call, VARLINK_ERROR_EXPECTED_MORE, NULL);
        if (r == -EINVAL)
                return varlink_call_error_invalid_parameter(call, bad);
        if (r < 0)
                return r;
        if (c.method == SYSEXT_METHOD_LIST)
                return m->ops->list_images_varlink(m, call, c.options.classes);
        if (c.method == SYSEXT_METHOD_COMPLETED_UPDATE)
                log_info("systemd-sysupdate reports a completed update; refreshing.");
        if (c.manager && !streq(c.root, m->engine->root)) {
                _cleanup_free_ char *text = NULL, *buf = NULL;
                const char *wanted = string_safe(c.root, &buf);

                if (asprintf(&text, "The sysextd daemon serves %s, not %s; use --no-bus to work on %s.", m->engine->root,
                             wanted, wanted) < 0)
                        return -ENOMEM;
                reply_manager_failed(call, SYSEXTD_ERROR_WRONG_ROOT, text);
                return 0;
        }
        return authorize_and_queue(m, call, &c);
}

static void on_change(void *userdata) {
        Manager *m = userdata;
        m->ops->update_idle(m);
}

static int listen_below_root(Manager *m, const char *rel) {
        _cleanup_free_ char *dir = NULL, *path = NULL;
        _cleanup_close_ int fd = -EBADF;
        const char *slash = strrchr(rel, '/');

        dir = strndup(rel, (size_t) (slash - rel));
        if (!dir || asprintf(&path, "%s/%s", m->engine->root, rel) < 0)
                return -ENOMEM;
        fd = mkdir_p_in_root(m->engine->root_fd, dir, 0755);
        if (fd < 0)
                return fd;
        return varlink_server_listen_path(m->varlink, path);
}

int varlink_service_start(Manager *m) {
        _cleanup_strv_free_ char **names = NULL;
        int n, r;

        r = varlink_server_new(m->event, interfaces, on_call, m, &m->varlink);
        if (r < 0)
                return r;
        varlink_server_set_change_callback(m->varlink, on_change);

        /* sysextd-varlink.socket: whatever it passes that is a listening AF_UNIX stream socket.
         * The environment goes: the workers must not see it. */
        n = sd_listen_fds_with_names(true, &names);
        if (n < 0)
                log_warning_errno(n, "Failed to read the sockets systemd passed: %m");
        for (int i = 0; i < n; i++) {
                int fd = SD_LISTEN_FDS_START + i;

                if (sd_is_socket_unix(fd, SOCK_STREAM, 1, NULL, 0) <= 0) {
                        log_warning("Ignoring the file descriptor %s systemd passed: not a listening AF_UNIX stream socket.",
                                    names && names[i] ? names[i] : "?");
                        safe_close(fd);
                        continue;
                }
                (void) fcntl(fd, F_SETFD, FD_CLOEXEC);
                r = varlink_server_listen_fd(m->varlink, fd);
                if (r < 0)
                        log_warning_errno(r, "Failed to serve varlink on a socket systemd passed: %m");
        }
        if (n > 0)
                return 0;
        /* Not socket-activated: only on another root (a test's), sockets of our own there.  On
         * the host, sysextd-varlink.socket is the way (it does not take systemd-sysext's socket
         * unless the administrator enables it). */
        if (streq(m->engine->root, "/"))
                return 0;
        for (size_t i = 0; i < 2; i++) {
                const char *rel = i == 0 ? SYSEXT_VARLINK_SOCKET : SYSUPDATE_NOTIFY_SOCKET;

                r = listen_below_root(m, rel);
                if (r < 0)
                        return log_error_errno(r, "Failed to listen on %s/%s: %m", m->engine->root, rel);
        }
        log_info("Serving varlink on %s/%s and %s/%s.", m->engine->root, SYSEXT_VARLINK_SOCKET, m->engine->root,
                 SYSUPDATE_NOTIFY_SOCKET);
        return 0;
}

void varlink_service_stop(Manager *m) {
        if (!m->varlink)
                return;
        /* Nobody is told about the connections closed now. */
        varlink_server_set_change_callback(m->varlink, NULL);
        m->varlink = varlink_server_free(m->varlink);
}
