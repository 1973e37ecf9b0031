/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The varlink server on json-c (varlink.h), for libsystemd without sd-varlink (before 257).
 *
 * Each connection has an input buffer (at most one message of VARLINK_MESSAGE_MAX bytes plus
 * what follows it), an output buffer (at most VARLINK_OUTPUT_MAX bytes the client has not
 * read) and at most one call in flight: the next message is read only once the call before it
 * is answered (a oneway call at once), so replies leave in the order of the calls, as varlink
 * wants, and a client that pipelines calls waits in its socket buffer.  Everything is
 * non-blocking; a protocol violation (bad JSON, not a call, too long) closes the connection,
 * a call that is well formed but wrong gets a varlink error.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "fd-util.h"
#include "json-util.h"
#include "log.h"
#include "util.h"
#include "varlink.h"

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif

typedef struct Connection Connection;

typedef struct Listener {
        int fd;
        sd_event_source *source;
        char *path; /* bound by us: unlinked at the end, if it is still our socket */
        dev_t dev;
        ino_t ino;
} Listener;

struct VarlinkServer {
        sd_event *event;
        const VarlinkInterface *interfaces;
        VarlinkHandler handler;
        void *userdata;
        void (*change)(void *userdata);
        Listener *listeners;
        size_t n_listeners;
        Connection *connections;
        unsigned n_connections, n_pending;
};

struct Connection {
        unsigned n_ref;
        VarlinkServer *server; /* NULL once closed */
        int fd;
        sd_event_source *source;
        char *in;
        size_t in_len;
        char *out;
        size_t out_len, out_off;
        VarlinkCall *current; /* the call in flight, not yet answered */
        bool eof;
        uid_t uid;
        pid_t pid;
        int pidfd;
        Connection *next, *prev;
};

struct VarlinkCall {
        unsigned n_ref;
        Connection *connection;
        unsigned flags;
        bool done;
};

#define INPUT_MAX (VARLINK_MESSAGE_MAX + 1)

static void connection_close(Connection *c);
static int connection_update_events(Connection *c);
static void connection_process(Connection *c);

static void server_changed(VarlinkServer *s) {
        if (s && s->change)
                s->change(s->userdata);
}

static Connection *connection_unref(Connection *c) {
        if (!c || --c->n_ref > 0)
                return NULL;
        connection_close(c);
        safe_close(c->pidfd);
        free(c->in);
        free(c->out);
        free(c);
        return NULL;
}

/* ---- calls --------------------------------------------------------------------------- */

VarlinkCall *varlink_call_ref(VarlinkCall *c) {
        if (c)
                c->n_ref++;
        return c;
}

/* The call is answered (or will never be): the connection may read on. */
static void call_finish(VarlinkCall *c) {
        Connection *conn = c->connection;

        if (c->done)
                return;
        c->done = true;
        if (!conn)
                return;
        if (conn->current == c) {
                conn->current = NULL;
                if (conn->server) {
                        conn->server->n_pending--;
                        server_changed(conn->server);
                }
                /* The next message, if one is waiting (not from within a handler's reply:
                 * deferred to the event loop by the io source, which is re-armed). */
                if (conn->server)
                        (void) connection_update_events(conn);
                varlink_call_unref(c); /* the connection's reference: last, it may hold the last of conn */
        }
}

VarlinkCall *varlink_call_unref(VarlinkCall *c) {
        if (!c || --c->n_ref > 0)
                return NULL;
        /* A call nobody can answer any more: its connection must not wait for it.  (Never
         * reached for the connection's current call: the connection holds a reference.) */
        connection_unref(c->connection);
        free(c);
        return NULL;
}

unsigned varlink_call_flags(VarlinkCall *c) {
        return c->flags;
}

bool varlink_call_connected(VarlinkCall *c) {
        return c->connection && c->connection->server && c->connection->fd >= 0;
}

int varlink_call_peer(VarlinkCall *c, uid_t *ret_uid, pid_t *ret_pid, int *ret_pidfd) {
        Connection *conn = c->connection;

        if (!conn || conn->pid <= 0)
                return -ESRCH;
        *ret_uid = conn->uid;
        *ret_pid = conn->pid;
        *ret_pidfd = conn->pidfd >= 0 ? fcntl(conn->pidfd, F_DUPFD_CLOEXEC, 3) : -EBADF;
        if (conn->pidfd >= 0 && *ret_pidfd < 0)
                return -errno;
        return 0;
}

static int connection_flush(Connection *c) {
        while (c->out_len > c->out_off) {
                ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_DONTWAIT | MSG_NOSIGNAL);
                if (n < 0) {
                        if (errno == EAGAIN || errno == EINTR)
                                return 0;
                        return -errno;
                }
                c->out_off += (size_t) n;
        }
        c->out_len = c->out_off = 0;
        return 0;
}

static int connection_send(Connection *c, char *msg, size_t len) {
        if (!msg)
                return -ENOMEM;
        if (!c->server || c->fd < 0) {
                free(msg);
                return 0;
        }
        if (c->out_len - c->out_off + len > VARLINK_OUTPUT_MAX) {
                free(msg);
                log_warning("A varlink client does not read its replies; disconnecting it.");
                connection_close(c);
                return 0;
        }
        if (c->out_off > 0) {
                memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
                c->out_len -= c->out_off;
                c->out_off = 0;
        }
        {
                char *n = realloc(c->out, c->out_len + len);
                if (!n) {
                        free(msg);
                        return -ENOMEM;
                }
                c->out = n;
        }
        memcpy(c->out + c->out_len, msg, len);
        c->out_len += len;
        free(msg);
        /* Out now, as far as the socket takes it: the answer to a job comes when the worker's
         * report is read, and waiting for EPOLLOUT would put it behind what the loop does next
         * (the worker's handover and exit, the status read after it). */
        if (connection_flush(c) < 0) {
                connection_close(c);
                return 0;
        }
        return connection_update_events(c);
}

static int call_answer(VarlinkCall *c, char *msg, size_t len, bool final) {
        Connection *conn = c->connection;
        int r = 0;

        if (c->done) {
                free(msg);
                return -EALREADY;
        }
        if (!msg)
                return -ENOMEM;
        if (conn && !(c->flags & VARLINK_CALL_ONEWAY))
                r = connection_send(conn, msg, len);
        else
                free(msg);
        if (final)
                call_finish(c);
        return r;
}

int varlink_call_reply(VarlinkCall *c, json_object *parameters, bool continues) {
        size_t len = 0;
        char *msg;

        if (c->done) {
                json_object_put(parameters);
                return -EALREADY;
        }
        if (continues && !(c->flags & VARLINK_CALL_MORE)) {
                json_object_put(parameters);
                return -EINVAL;
        }
        msg = varlink_format_reply(parameters, continues, &len);
        return call_answer(c, msg, len, !continues);
}

int varlink_call_error(VarlinkCall *c, const char *error, json_object *parameters) {
        size_t len = 0;
        char *msg;

        if (c->done) {
                json_object_put(parameters);
                return -EALREADY;
        }
        msg = varlink_format_error(error, parameters, &len);
        return call_answer(c, msg, len, true);
}

int varlink_call_error_errno(VarlinkCall *c, int error) {
        return varlink_call_error(c, VARLINK_ERROR_SYSTEM, varlink_errno_parameters(error));
}

int varlink_call_error_invalid_parameter(VarlinkCall *c, const char *parameter) {
        json_object *p = json_object_new_object();
        _cleanup_free_ char *buf = NULL;

        if (p && parameter)
                json_object_object_add(p, "parameter", json_object_new_string(string_safe(parameter, &buf)));
        return varlink_call_error(c, VARLINK_ERROR_INVALID_PARAMETER, p);
}

/* ---- org.varlink.service -------------------------------------------------------------- */

static const char service_description[] =
        "interface org.varlink.service\n"
        "\n"
        "method GetInfo() -> (\n"
        "  vendor: string,\n"
        "  product: string,\n"
        "  version: string,\n"
        "  url: string,\n"
        "  interfaces: []string\n"
        ")\n"
        "\n"
        "method GetInterfaceDescription(interface: string) -> (description: string)\n"
        "\n"
        "error InterfaceNotFound (interface: string)\n"
        "error MethodNotFound (method: string)\n"
        "error MethodNotImplemented (method: string)\n"
        "error InvalidParameter (parameter: string)\n"
        "error PermissionDenied ()\n"
        "error ExpectedMore ()\n";

static const VarlinkInterface *server_find_interface(VarlinkServer *s, const char *name) {
        for (const VarlinkInterface *i = s->interfaces; i && i->name; i++)
                if (streq(i->name, name))
                        return i;
        return NULL;
}

static int service_call(VarlinkServer *s, VarlinkCall *call, const char *method, json_object *parameters) {
        if (streq(method, "org.varlink.service.GetInfo")) {
                json_object *o = json_object_new_object(), *a = json_object_new_array();

                if (json_object_object_length(parameters) > 0) {
                        json_object_put(o);
                        json_object_put(a);
                        json_object_object_foreach(parameters, key, val) {
                                (void) val;
                                return varlink_call_error_invalid_parameter(call, key);
                        }
                }
                if (!o || !a) {
                        json_object_put(o);
                        json_object_put(a);
                        return -ENOMEM;
                }
                json_object_object_add(o, "vendor", json_object_new_string("sysextd"));
                json_object_object_add(o, "product", json_object_new_string("sysextd"));
                json_object_object_add(o, "version", json_object_new_string(PACKAGE_VERSION));
                json_object_object_add(o, "url", json_object_new_string("man:sysextd(8)"));
                json_object_array_add(a, json_object_new_string("org.varlink.service"));
                for (const VarlinkInterface *i = s->interfaces; i && i->name; i++)
                        json_object_array_add(a, json_object_new_string(i->name));
                json_object_object_add(o, "interfaces", a);
                return varlink_call_reply(call, o, false);
        }
        if (streq(method, "org.varlink.service.GetInterfaceDescription")) {
                const VarlinkInterface *i;
                const char *name;
                json_object *v, *o;

                json_object_object_foreach(parameters, key, val) {
                        (void) val;
                        if (!streq(key, "interface"))
                                return varlink_call_error_invalid_parameter(call, key);
                }
                if (!json_object_object_get_ex(parameters, "interface", &v) || !json_object_is_type(v, json_type_string))
                        return varlink_call_error_invalid_parameter(call, "interface");
                name = json_object_get_string(v);
                i = server_find_interface(s, name);
                if (!i && !streq(name, "org.varlink.service")) {
                        _cleanup_free_ char *buf = NULL;
                        json_object *p = json_object_new_object();

                        if (p)
                                json_object_object_add(p, "interface", json_object_new_string(string_safe(name, &buf)));
                        return varlink_call_error(call, VARLINK_ERROR_INTERFACE_NOT_FOUND, p);
                }
                o = json_object_new_object();
                if (!o)
                        return -ENOMEM;
                json_object_object_add(o, "description", json_object_new_string(i ? i->description : service_description));
                return varlink_call_reply(call, o, false);
        }
        {
                json_object *p = json_object_new_object();
                if (p)
                        json_object_object_add(p, "method", json_object_new_string(method));
                return varlink_call_error(call, VARLINK_ERROR_METHOD_NOT_FOUND, p);
        }
}

/* ---- connections ---------------------------------------------------------------------- */

static void connection_close(Connection *c) {
        VarlinkServer *s = c->server;

        if (!s)
                return;
        c->source = sd_event_source_disable_unref(c->source);
        c->fd = safe_close(c->fd);
        if (c->prev)
                c->prev->next = c->next;
        else
                s->connections = c->next;
        if (c->next)
                c->next->prev = c->prev;
        c->next = c->prev = NULL;
        s->n_connections--;
        c->server = NULL;
        if (c->current) {
                VarlinkCall *call = TAKE_PTR(c->current);
                /* Whoever holds the call may still answer it: into the void. */
                s->n_pending--;
                call->done = true;
                varlink_call_unref(call);
        }
        server_changed(s);
        /* The server's reference. */
        connection_unref(c);
}

static int connection_update_events(Connection *c) {
        uint32_t events = 0;

        if (!c->server || !c->source)
                return 0;
        if (!c->current && !c->eof)
                events |= EPOLLIN;
        if (c->out_len > c->out_off)
                events |= EPOLLOUT;
        /* Nothing more to read, nothing to write, nothing in flight: done. */
        if (c->eof && !c->current && c->out_len == c->out_off) {
                connection_close(c);
                return 0;
        }
        /* A message already in the buffer is handled in the next iteration of the loop. */
        if (!c->current && c->in_len > 0 && memchr(c->in, 0, c->in_len))
                events |= EPOLLOUT;
        return sd_event_source_set_io_events(c->source, events);
}

/* Handles each complete message in the buffer while no call is in flight. */
static void connection_process(Connection *c) {
        while (c->server && !c->current) {
                _cleanup_(varlink_message_done) VarlinkMessage m = {};
                _cleanup_free_ char *iface = NULL;
                char *nul = c->in_len > 0 ? memchr(c->in, 0, c->in_len) : NULL;
                VarlinkServer *s = c->server;
                VarlinkCall *call;
                size_t len;
                int r;

                if (!nul) {
                        if (c->in_len >= INPUT_MAX) {
                                log_warning("A varlink client sent a message of more than %u bytes; disconnecting it.",
                                            VARLINK_MESSAGE_MAX);
                                connection_close(c);
                        }
                        return;
                }
                len = (size_t) (nul - c->in);
                r = varlink_message_parse(c->in, len, &m);
                memmove(c->in, nul + 1, c->in_len - len - 1);
                c->in_len -= len + 1;
                if (r == -ENOMEM) {
                        connection_close(c);
                        return;
                }
                if (r < 0) {
                        log_warning("A varlink client sent %s; disconnecting it.",
                                    r == -EPROTONOSUPPORT ? "a call asking for a protocol upgrade" : "a malformed message");
                        connection_close(c);
                        return;
                }

                call = calloc(1, sizeof(VarlinkCall));
                if (!call) {
                        connection_close(c);
                        return;
                }
                /* Two references: the connection's (while it is in flight) and ours, here. */
                *call = (VarlinkCall) { .n_ref = 2, .connection = c, .flags = m.flags };
                c->n_ref++; /* the call's, whatever its count */
                c->current = call;
                s->n_pending++;
                server_changed(s);

                iface = varlink_method_interface(m.method);
                if (!iface)
                        r = -ENOMEM;
                else if (streq(iface, "org.varlink.service"))
                        r = service_call(s, call, m.method, m.parameters);
                else if (!server_find_interface(s, iface)) {
                        json_object *p = json_object_new_object();
                        if (p)
                                json_object_object_add(p, "interface", json_object_new_string(iface));
                        r = varlink_call_error(call, VARLINK_ERROR_INTERFACE_NOT_FOUND, p);
                } else
                        r = s->handler(s, call, m.method, m.parameters, m.flags, s->userdata);
                if (r < 0 && !call->done)
                        (void) varlink_call_error_errno(call, r);
                /* A oneway call has nobody waiting: the next message may be read now; whoever
                 * keeps the call answers into the void. */
                if ((m.flags & VARLINK_CALL_ONEWAY) && c->current == call) {
                        c->current = NULL;
                        if (c->server) {
                                c->server->n_pending--;
                                server_changed(c->server);
                        }
                        varlink_call_unref(call); /* the connection's */
                }
                varlink_call_unref(call); /* ours */
        }
}

static int on_connection_io(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
        Connection *c = userdata;

        c->n_ref++;
        /* The client has gone while a call is in flight: nobody to answer. */
        if ((revents & (EPOLLHUP | EPOLLERR)) && c->current) {
                connection_close(c);
                goto finish;
        }
        if (revents & EPOLLOUT) {
                if (connection_flush(c) < 0) {
                        connection_close(c);
                        goto finish;
                }
        }
        if ((revents & (EPOLLIN | EPOLLHUP | EPOLLERR)) && !c->current && !c->eof) {
                if (!c->in) {
                        c->in = malloc(INPUT_MAX);
                        if (!c->in) {
                                connection_close(c);
                                goto finish;
                        }
                }
                if (c->in_len < INPUT_MAX) {
                        ssize_t n = recv(c->fd, c->in + c->in_len, INPUT_MAX - c->in_len, MSG_DONTWAIT);
                        if (n < 0 && errno != EAGAIN && errno != EINTR) {
                                connection_close(c);
                                goto finish;
                        }
                        if (n == 0)
                                c->eof = true;
                        if (n > 0)
                                c->in_len += (size_t) n;
                }
        } else if ((revents & (EPOLLHUP | EPOLLERR)) && c->out_len > c->out_off) {
                /* The client went away with replies unread. */
                connection_close(c);
                goto finish;
        }
        connection_process(c);
        if (c->server && connection_flush(c) < 0)
                connection_close(c);
        if (c->server)
                (void) connection_update_events(c);
finish:
        connection_unref(c);
        return 0;
}

static int on_listener_io(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
        VarlinkServer *s = userdata;
        _cleanup_close_ int cfd = -EBADF;
        struct ucred cred = {};
        socklen_t sl = sizeof(cred);
        Connection *c;
        int pidfd = -EBADF;

        cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (cfd < 0)
                return 0;
        if (s->n_connections >= VARLINK_CONNECTIONS_MAX) {
                log_warning("More than %u varlink connections; refusing another.", VARLINK_CONNECTIONS_MAX);
                return 0;
        }
        if (getsockopt(cfd, SOL_SOCKET, SO_PEERCRED, &cred, &sl) < 0 || cred.pid <= 0)
                return 0; /* nobody to authorize */
        sl = sizeof(pidfd);
        if (getsockopt(cfd, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &sl) < 0)
                pidfd = -EBADF;

        c = calloc(1, sizeof(Connection));
        if (!c) {
                safe_close(pidfd);
                return 0;
        }
        *c = (Connection) { .n_ref = 1, .server = s, .fd = TAKE_FD(cfd), .uid = cred.uid, .pid = cred.pid, .pidfd = pidfd };
        if (sd_event_add_io(s->event, &c->source, c->fd, EPOLLIN, on_connection_io, c) < 0) {
                c->server = NULL;
                safe_close(c->fd);
                connection_unref(c);
                return 0;
        }
        c->next = s->connections;
        if (s->connections)
                s->connections->prev = c;
        s->connections = c;
        s->n_connections++;
        server_changed(s);
        return 0;
}

/* ---- the server ----------------------------------------------------------------------- */

int varlink_server_new(sd_event *event, const VarlinkInterface *interfaces, VarlinkHandler handler, void *userdata,
                       VarlinkServer **ret) {
        VarlinkServer *s = calloc(1, sizeof(VarlinkServer));

        if (!s)
                return -ENOMEM;
        *s = (VarlinkServer) { .event = sd_event_ref(event), .interfaces = interfaces, .handler = handler, .userdata = userdata };
        *ret = s;
        return 0;
}

void varlink_server_set_change_callback(VarlinkServer *s, void (*cb)(void *userdata)) {
        s->change = cb;
}

unsigned varlink_server_n_connections(VarlinkServer *s) {
        return s ? s->n_connections : 0;
}

unsigned varlink_server_n_pending(VarlinkServer *s) {
        return s ? s->n_pending : 0;
}

static int server_add_listener(VarlinkServer *s, int fd, const char *path) {
        _cleanup_close_ int owned = fd;
        Listener *n, *l;
        struct stat st;
        int r;

        n = realloc(s->listeners, sizeof(Listener) * (s->n_listeners + 1));
        if (!n)
                return -ENOMEM;
        s->listeners = n;
        l = &s->listeners[s->n_listeners];
        *l = (Listener) { .fd = -EBADF };
        r = fcntl(fd, F_GETFL);
        if (r < 0 || fcntl(fd, F_SETFL, r | O_NONBLOCK) < 0)
                return -errno;
        r = sd_event_add_io(s->event, &l->source, fd, EPOLLIN, on_listener_io, s);
        if (r < 0)
                return r;
        if (path) {
                l->path = strdup(path);
                if (!l->path || stat(path, &st) < 0) {
                        sd_event_source_disable_unref(l->source);
                        free(l->path);
                        return -ENOMEM;
                }
                l->dev = st.st_dev;
                l->ino = st.st_ino;
        }
        l->fd = TAKE_FD(owned);
        s->n_listeners++;
        return 0;
}

int varlink_server_listen_fd(VarlinkServer *s, int fd) {
        return server_add_listener(s, fd, NULL);
}

int varlink_server_listen_path(VarlinkServer *s, const char *path) {
        _cleanup_close_ int fd = -EBADF;
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        struct stat st;
        mode_t old;
        int r;

        if (strlen(path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        strcpy(sa.sun_path, path);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;
        /* A stale socket (a daemon that was killed) is replaced; anything else is not ours. */
        if (lstat(path, &st) >= 0) {
                if (!S_ISSOCK(st.st_mode))
                        return -EEXIST;
                if (unlink(path) < 0)
                        return -errno;
        }
        old = umask(0111);
        r = bind(fd, (struct sockaddr *) &sa, sizeof(sa));
        umask(old);
        if (r < 0)
                return -errno;
        if (listen(fd, SOMAXCONN) < 0)
                return -errno;
        return server_add_listener(s, TAKE_FD(fd), path);
}

/* The replies a connection was given and has not read yet go out before it is closed (a
 * transition's caller learns its outcome when the daemon exits right after it): a second in
 * all for clients that do not read. */
static void flush_all(VarlinkServer *s) {
        uint64_t end = now_monotonic_usec() + 1000000ULL;

        for (Connection *c = s->connections; c; c = c->next)
                while (c->out_len > c->out_off) {
                        struct pollfd p = { .fd = c->fd, .events = POLLOUT };
                        uint64_t t = now_monotonic_usec();

                        if (connection_flush(c) < 0 || c->out_len == c->out_off || t >= end ||
                            poll(&p, 1, (int) ((end - t + 999) / 1000)) <= 0)
                                break;
                }
}

VarlinkServer *varlink_server_free(VarlinkServer *s) {
        if (!s)
                return NULL;
        flush_all(s);
        while (s->connections)
                connection_close(s->connections);
        for (size_t i = 0; i < s->n_listeners; i++) {
                Listener *l = &s->listeners[i];
                struct stat st;

                sd_event_source_disable_unref(l->source);
                /* Our socket file, unless another has taken its place meanwhile. */
                if (l->path && stat(l->path, &st) >= 0 && st.st_dev == l->dev && st.st_ino == l->ino)
                        (void) unlink(l->path);
                free(l->path);
                safe_close(l->fd);
        }
        free(s->listeners);
        sd_event_unref(s->event);
        free(s);
        return NULL;
}
