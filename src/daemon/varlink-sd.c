/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The varlink server on libsystemd's sd-varlink (varlink.h), for libsystemd 257 and later;
 * meson picks this file or varlink-jsonc.c.  sd-varlink does the protocol, the limits, the
 * parameter checks against the IDL (varlink-sysext-idl.c) and org.varlink.service; this file
 * only translates: a VarlinkCall is a referenced sd_varlink with the call's flags, json-c
 * parameters go to sd-json as text and back.
 *
 * NOT BUILT on Debian 12 (libsystemd 252): this file has never been compiled here.  It uses
 * only sd-varlink calls public in 257 (no sd_varlink_get_peer_pidfd, no
 * sd_varlink_get_current_method: a method is told apart by the trampoline it was bound to).
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "dlopen-systemd.h"
#include "json-util.h"
#include "log.h"
#include "util.h"
#include "varlink.h"

#define METHODS_MAX 8

struct VarlinkServer {
        sd_varlink_server *server;
        const VarlinkInterface *interfaces;
        VarlinkHandler handler;
        void *userdata;
        void (*change)(void *userdata);
        const char *methods[METHODS_MAX];
        unsigned n_connections, n_pending;
        sd_varlink **links; /* the connections, for the flush before the end */
        size_t n_links;
};

struct VarlinkCall {
        unsigned n_ref;
        VarlinkServer *server;
        sd_varlink *link;
        unsigned flags;
        bool done;
};

static void changed(VarlinkServer *s) {
        if (s->change)
                s->change(s->userdata);
}

VarlinkCall *varlink_call_ref(VarlinkCall *c) {
        if (c)
                c->n_ref++;
        return c;
}

static void call_finish(VarlinkCall *c) {
        if (c->done)
                return;
        c->done = true;
        if (c->server) {
                c->server->n_pending--;
                changed(c->server);
        }
}

VarlinkCall *varlink_call_unref(VarlinkCall *c) {
        if (!c || --c->n_ref > 0)
                return NULL;
        /* Never answered: sd-varlink would wait for it forever. */
        if (!c->done && c->link)
                (void) sd_varlink_error_errno(c->link, -ECANCELED);
        call_finish(c);
        sd_varlink_unref(c->link);
        free(c);
        return NULL;
}

unsigned varlink_call_flags(VarlinkCall *c) {
        return c->flags;
}

bool varlink_call_connected(VarlinkCall *c) {
        /* sd-varlink has no "is connected": a link that hung up was closed, its fd gone. */
        return c->link && sd_varlink_get_fd(c->link) >= 0;
}

int varlink_call_peer(VarlinkCall *c, uid_t *ret_uid, pid_t *ret_pid, int *ret_pidfd) {
        int r;

        r = sd_varlink_get_peer_uid(c->link, ret_uid);
        if (r >= 0)
                r = sd_varlink_get_peer_pid(c->link, ret_pid);
        if (r < 0)
                return r;
        *ret_pidfd = -EBADF;
        return 0;
}

/* json-c to sd-json, through text (small documents: replies of a handful of fields). */
static int to_sd_json(json_object *o, sd_json_variant **ret) {
        _cleanup_json_ json_object *owned = o;
        const char *text;

        if (!o) {
                *ret = NULL;
                return 0;
        }
        text = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
        if (!text)
                return -ENOMEM;
        return sd_json_parse(text, 0, ret, NULL, NULL);
}

int varlink_call_reply(VarlinkCall *c, json_object *parameters, bool continues) {
        sd_json_variant *v = NULL;
        int r;

        if (c->done) {
                json_object_put(parameters);
                return -EALREADY;
        }
        r = to_sd_json(parameters, &v);
        if (r < 0)
                return r;
        r = continues ? sd_varlink_notify(c->link, v) : sd_varlink_reply(c->link, v);
        sd_json_variant_unref(v);
        if (!continues)
                call_finish(c);
        return r < 0 && r != -ENOTCONN ? r : 0;
}

int varlink_call_error(VarlinkCall *c, const char *error, json_object *parameters) {
        sd_json_variant *v = NULL;
        int r;

        if (c->done) {
                json_object_put(parameters);
                return -EALREADY;
        }
        r = to_sd_json(parameters, &v);
        if (r < 0)
                return r;
        r = sd_varlink_error(c->link, error, v);
        sd_json_variant_unref(v);
        call_finish(c);
        /* sd_varlink_error() returns a negative errno even on success (callers return it). */
        return 0;
}

int varlink_call_error_errno(VarlinkCall *c, int error) {
        if (c->done)
                return -EALREADY;
        (void) sd_varlink_error_errno(c->link, error);
        call_finish(c);
        return 0;
}

int varlink_call_error_invalid_parameter(VarlinkCall *c, const char *parameter) {
        if (c->done)
                return -EALREADY;
        (void) sd_varlink_error_invalid_parameter_name(c->link, parameter);
        call_finish(c);
        return 0;
}

/* sd-varlink hands a method's callback no name: one trampoline per bound method. */
static int dispatch(sd_varlink *link, sd_json_variant *parameters, sd_varlink_method_flags_t flags, void *userdata,
                    unsigned index) {
        VarlinkServer *s = userdata;
        _cleanup_json_ json_object *params = NULL;
        _cleanup_free_ char *text = NULL;
        VarlinkCall *call;
        int r;

        if (index >= METHODS_MAX || !s->methods[index])
                return sd_varlink_error(link, VARLINK_ERROR_METHOD_NOT_FOUND, NULL);
        if (parameters) {
                r = sd_json_variant_format(parameters, 0, &text);
                if (r < 0)
                        return r;
                params = json_parse_object(text);
        } else
                params = json_object_new_object();
        if (!params)
                return sd_varlink_error_invalid_parameter_name(link, "parameters");

        call = calloc(1, sizeof(VarlinkCall));
        if (!call)
                return -ENOMEM;
        *call = (VarlinkCall) { .n_ref = 1, .server = s, .link = sd_varlink_ref(link),
                                .flags = ((flags & SD_VARLINK_METHOD_ONEWAY) ? VARLINK_CALL_ONEWAY : 0) |
                                         ((flags & SD_VARLINK_METHOD_MORE) ? VARLINK_CALL_MORE : 0) };
        s->n_pending++;
        changed(s);
        r = s->handler(s, call, s->methods[index], params, call->flags, s->userdata);
        if (r < 0 && !call->done)
                (void) varlink_call_error_errno(call, r);
        varlink_call_unref(call);
        return 0;
}

#define TRAMPOLINE(i)                                                                                          \
        static int method_##i(sd_varlink *link, sd_json_variant *parameters, sd_varlink_method_flags_t flags, \
                              void *userdata) {                                                                 \
                return dispatch(link, parameters, flags, userdata, i);                                          \
        }
TRAMPOLINE(0)
TRAMPOLINE(1)
TRAMPOLINE(2)
TRAMPOLINE(3)
TRAMPOLINE(4)
TRAMPOLINE(5)
TRAMPOLINE(6)
TRAMPOLINE(7)

static const sd_varlink_method_t trampolines[METHODS_MAX] = {
        method_0, method_1, method_2, method_3, method_4, method_5, method_6, method_7,
};

static int on_connect(sd_varlink_server *server, sd_varlink *link, void *userdata) {
        VarlinkServer *s = sd_varlink_server_get_userdata(server);

        sd_varlink **n = realloc(s->links, (s->n_links + 1) * sizeof(sd_varlink *));

        if (!n)
                return -ENOMEM; /* sd-varlink closes the connection */
        s->links = n;
        s->links[s->n_links++] = sd_varlink_ref(link);
        s->n_connections++;
        changed(s);
        return 0;
}

static void on_disconnect(sd_varlink_server *server, sd_varlink *link, void *userdata) {
        VarlinkServer *s = sd_varlink_server_get_userdata(server);

        for (size_t i = 0; i < s->n_links; i++)
                if (s->links[i] == link) {
                        sd_varlink_unref(link);
                        s->links[i] = s->links[--s->n_links];
                        break;
                }
        if (s->n_connections > 0)
                s->n_connections--;
        changed(s);
}

int varlink_server_new(sd_event *event, const VarlinkInterface *interfaces, VarlinkHandler handler, void *userdata,
                       VarlinkServer **ret) {
        VarlinkServer *s;
        size_t n = 0;
        int r;

        s = calloc(1, sizeof(VarlinkServer));
        if (!s)
                return -ENOMEM;
        *s = (VarlinkServer) { .interfaces = interfaces, .handler = handler, .userdata = userdata };
        r = sd_varlink_server_new(&s->server, SD_VARLINK_SERVER_INHERIT_USERDATA);
        if (r < 0)
                goto fail;
        sd_varlink_server_set_userdata(s->server, s);
        r = sd_varlink_server_set_info(s->server, "sysextd", "sysextd", PACKAGE_VERSION, "man:sysextd(8)");
        if (r >= 0)
                r = sd_varlink_server_bind_connect(s->server, on_connect);
        if (r >= 0)
                r = sd_varlink_server_bind_disconnect(s->server, on_disconnect);
        for (const VarlinkInterface *i = interfaces; r >= 0 && i && i->name; i++) {
                if (i->sd_idl)
                        r = sd_varlink_server_add_interface(s->server, i->sd_idl);
                for (const char *const *m = i->methods; r >= 0 && m && *m; m++) {
                        if (n >= METHODS_MAX) {
                                r = -E2BIG;
                                break;
                        }
                        s->methods[n] = *m;
                        r = sd_varlink_server_bind_method(s->server, *m, trampolines[n]);
                        n++;
                }
        }
        if (r >= 0)
                r = sd_varlink_server_attach_event(s->server, event, SD_EVENT_PRIORITY_NORMAL);
        if (r < 0)
                goto fail;
        *ret = s;
        return 0;
fail:
        sd_varlink_server_unref(s->server);
        free(s);
        return r;
}

VarlinkServer *varlink_server_free(VarlinkServer *s) {
        if (!s)
                return NULL;
        s->change = NULL;
        /* The replies a connection was given and has not read yet go out before it is closed
         * (a transition's caller learns its outcome when the daemon exits right after it): a
         * second in all for clients that do not read. */
        uint64_t end = now_monotonic_usec() + 1000000ULL;
        for (size_t i = 0; i < s->n_links; i++) {
                int fd = sd_varlink_get_fd(s->links[i]);
                uint64_t t = now_monotonic_usec();
                struct pollfd p = { .fd = fd, .events = POLLOUT };

                if (fd >= 0 && t < end && poll(&p, 1, (int) ((end - t + 999) / 1000)) > 0)
                        (void) sd_varlink_flush(s->links[i]);
                sd_varlink_unref(s->links[i]);
        }
        free(s->links);
        sd_varlink_server_unref(s->server);
        free(s);
        return NULL;
}

int varlink_server_listen_fd(VarlinkServer *s, int fd) {
        int r = sd_varlink_server_listen_fd(s->server, fd);

        if (r < 0)
                (void) close(fd);
        return r;
}

int varlink_server_listen_path(VarlinkServer *s, const char *path) {
        return sd_varlink_server_listen_address(s->server, path, 0666);
}

unsigned varlink_server_n_connections(VarlinkServer *s) {
        return s ? s->n_connections : 0;
}

unsigned varlink_server_n_pending(VarlinkServer *s) {
        return s ? s->n_pending : 0;
}

void varlink_server_set_change_callback(VarlinkServer *s, void (*cb)(void *userdata)) {
        s->change = cb;
}
