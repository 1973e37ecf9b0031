/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/openat2.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "bus-api.h"
#include "client-varlink.h"
#include "fd-util.h"
#include "json-util.h"
#include "log.h"
#include "util.h"
#include "varlink-message.h"
#include "varlink-sysext.h"

/* An answer is the worker's messages and two numbers: far below this. */
#define REPLY_MAX (16U * 1024U * 1024U)

bool client_varlink_usable(const char *verb, uid_t euid, const EngineOptions *o) {
        if (!verb || !STR_IN_SET(verb, "merge", "refresh", "unmerge") || euid != 0)
                return false;
        if (o->policy >= 0 || o->confirm_within_usec > 0 || o->unpin || o->delay_usec != ENGINE_DELAY_CONFIG)
                return false;
        for (int k = 0; k < _IMAGE_CLASS_MAX; k++)
                if (o->mutable[k] >= 0)
                        return false;
        return true;
}

/* The daemon's socket below the root, connected: only one root made (the socket and the
 * directory it is in are root's, and nobody else may write there), reached without following
 * a symlink.  -ENOENT and the like: nobody of ours listens there. */
static int connect_daemon(const char *root, int *ret) {
        _cleanup_close_ int root_fd = -EBADF, dir_fd = -EBADF, fd = -EBADF;
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        const char *name = strrchr(SYSEXT_VARLINK_SOCKET, '/') + 1;
        _cleanup_free_ char *dir = strndup(SYSEXT_VARLINK_SOCKET, (size_t) (name - 1 - SYSEXT_VARLINK_SOCKET));
        struct stat st;

        if (!dir)
                return -ENOMEM;
        root_fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (root_fd < 0)
                return -errno;
        dir_fd = openat_resolve(root_fd, dir, O_PATH | O_DIRECTORY | O_CLOEXEC,
                                RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
        if (dir_fd < 0)
                return dir_fd;
        if (fstat(dir_fd, &st) < 0)
                return -errno;
        if (st.st_uid != 0 || (st.st_mode & 0022))
                return -EPERM;
        if (fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return -errno;
        if (!S_ISSOCK(st.st_mode) || st.st_uid != 0)
                return -EPERM;
        if ((size_t) snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%s", FORMAT_PROC_FD_PATH(dir_fd), name) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        /* Not blocking: a daemon whose backlog is full (stuck, flooded) answers EAGAIN at once,
         * and the bus is asked instead of waiting here without a limit. */
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;
        if (connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0)
                return -errno;
        if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) < 0)
                return -errno;
        *ret = TAKE_FD(fd);
        return 0;
}

static int send_all(int fd, const char *buf, size_t n) {
        while (n > 0) {
                ssize_t k = send(fd, buf, n, MSG_NOSIGNAL);

                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                buf += k;
                n -= (size_t) k;
        }
        return 0;
}

/* One message up to its NUL, within the call's time limit. */
static int receive(int fd, char **ret, size_t *ret_len) {
        _cleanup_free_ char *buf = NULL;
        size_t n = 0, size = 0;
        uint64_t deadline = now_monotonic_usec() + SYSEXTD_CALL_TIMEOUT_USEC;

        for (;;) {
                struct pollfd p = { .fd = fd, .events = POLLIN };
                uint64_t now = now_monotonic_usec();
                char *nul;
                ssize_t k;
                int r;

                if (now >= deadline)
                        return -ETIMEDOUT;
                r = poll(&p, 1, (int) ((deadline - now + 999) / 1000 > INT32_MAX ? INT32_MAX : (deadline - now + 999) / 1000));
                if (r < 0 && errno == EINTR)
                        continue;
                if (r < 0)
                        return -errno;
                if (r == 0)
                        continue;
                if (size - n < 4096) {
                        char *b;

                        if (size >= REPLY_MAX)
                                return -EMSGSIZE;
                        size = size ? size * 2 : 16384;
                        b = realloc(buf, size);
                        if (!b)
                                return -ENOMEM;
                        buf = b;
                }
                k = recv(fd, buf + n, size - n, 0);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return -errno;
                if (k == 0)
                        return -ENODATA; /* closed after it read the call */
                nul = memchr(buf + n, 0, (size_t) k);
                n += (size_t) k;
                if (nul) {
                        *ret_len = (size_t) (nul - buf);
                        *ret = TAKE_PTR(buf);
                        return 0;
                }
        }
}

static json_object *call_parameters(const char *root, const EngineOptions *o) {
        _cleanup_json_ json_object *p = json_object_new_object();
        json_object *classes;

        if (!p || json_object_object_add(p, "root", json_object_new_string(root)) < 0)
                return NULL;
        if (o->classes) {
                classes = json_object_new_array();
                if (!classes || json_object_object_add(p, "classes", classes) < 0) {
                        json_object_put(classes);
                        return NULL;
                }
                for (int k = 0; k < _IMAGE_CLASS_MAX; k++)
                        if ((o->classes & (1u << k)) &&
                            json_object_array_add(classes, json_object_new_string(image_class_to_string(k))) < 0)
                                return NULL;
        }
        if ((o->force && json_object_object_add(p, "force", json_object_new_boolean(1)) < 0) ||
            (o->always_refresh && json_object_object_add(p, "alwaysRefresh", json_object_new_boolean(1)) < 0) ||
            (o->strict && json_object_object_add(p, "strict", json_object_new_boolean(1)) < 0) ||
            (o->no_reload && json_object_object_add(p, "noReload", json_object_new_boolean(1)) < 0) ||
            (o->noexec >= 0 && json_object_object_add(p, "noexec", json_object_new_boolean(o->noexec > 0)) < 0))
                return NULL;
        return TAKE_PTR(p);
}

/* What the daemon sent to be printed (it made it safe: a backslash stays as it is), escaped
 * only if it is not valid UTF-8 or has control characters anyway. */
static const char *printable(const char *s, char **buf) {
        if (!s || (utf8_is_valid(s) && !string_has_control(s)))
                return s;
        free(*buf);
        *buf = string_escape(s);
        return *buf ?: "(out of memory)";
}

/* An error answer, said as the bus client says it. */
static int print_error(const char *error, json_object *parameters) {
        _cleanup_free_ char *b1 = NULL, *b2 = NULL;
        const char *name = json_peek_string(parameters, "name"), *message = json_peek_string(parameters, "message");
        json_object *v;

        if (streq(error, SYSEXTD_VARLINK_ERROR_FAILED) && name && STR_IN_SET(name, SYSEXTD_ERROR_NO_IMAGES, SYSEXTD_ERROR_NO_SUITABLE_IMAGES)) {
                /* Nothing (suitable) to merge is no failure, as with systemd-sysext. */
                log_info("%s", printable(message ?: "No extensions found.", &b1));
                return 0;
        }
        if (streq(error, SYSEXTD_VARLINK_ERROR_FAILED)) {
                log_error("%s", printable(message ?: "The transition failed.", &b1));
                return -EIO;
        }
        if (streq(error, VARLINK_ERROR_SYSTEM) && json_object_object_get_ex(parameters, "errno", &v) &&
            json_object_is_type(v, json_type_int) && json_object_get_int(v) > 0 && json_object_get_int(v) < 4096)
                return log_error_errno(json_object_get_int(v), "The sysextd daemon could not run the request: %m");
        if (streq(error, VARLINK_ERROR_PERMISSION_DENIED))
                return log_error_errno(EACCES, "The sysextd daemon refused the request: %m");
        log_error("The sysextd daemon answered %s.", string_safe(error, &b2));
        return -EIO;
}

int client_varlink_transition(const char *root, const char *verb, const EngineOptions *o, const OutputOptions *out,
                              bool *ret_answered) {
        _cleanup_json_ json_object *call = NULL, *reply = NULL;
        _cleanup_free_ char *method = NULL, *text = NULL;
        _cleanup_close_ int fd = -EBADF;
        json_object *parameters, *v, *messages;
        const char *s, *error;
        uint64_t generation = 0;
        size_t len = 0;
        int r;

        *ret_answered = false;
        r = connect_daemon(root, &fd);
        if (r < 0) {
                log_debug("No sysextd on %s/%s (%s): asking over the bus.", root, SYSEXT_VARLINK_SOCKET, strerror(-r));
                return 0;
        }
        if (asprintf(&method, SYSEXTD_VARLINK_INTERFACE ".%c%s", verb[0] - 'a' + 'A', verb + 1) < 0)
                return log_oom();
        call = json_object_new_object();
        parameters = call_parameters(root, o);
        if (!call || !parameters || json_object_object_add(call, "method", json_object_new_string(method)) < 0 ||
            json_object_object_add(call, "parameters", parameters) < 0) {
                json_object_put(parameters);
                return log_oom();
        }
        s = json_object_to_json_string_ext(call, JSON_C_TO_STRING_PLAIN);
        if (!s)
                return log_oom();
        /* Until a byte of an answer came, nothing said the call was taken: the bus may have it. */
        r = send_all(fd, s, strlen(s) + 1);
        if (r < 0) {
                log_debug("Cannot send the call to %s/%s (%s): asking over the bus.", root, SYSEXT_VARLINK_SOCKET, strerror(-r));
                return 0;
        }
        r = receive(fd, &text, &len);
        if (r == -ECONNRESET) {
                /* Closed with the call unread (the daemon went before it read it): nothing ran. */
                log_debug("%s/%s closed without reading the call: asking over the bus.", root, SYSEXT_VARLINK_SOCKET);
                return 0;
        }
        /* From here on the call may have run: never asked again over the bus. */
        *ret_answered = true;
        if (r == -ENODATA)
                return log_error_errno(EIO, "The sysextd daemon on %s/%s closed the connection without an answer; the %s may or may not have run (see 'sysextd status').",
                                       root, SYSEXT_VARLINK_SOCKET, verb);
        if (r < 0)
                return log_error_errno(r, "No answer from the sysextd daemon on %s/%s: %m", root, SYSEXT_VARLINK_SOCKET);
        reply = json_parse_object(text);
        if (!reply || !json_object_is_type(reply, json_type_object))
                return log_error_errno(EBADMSG, "The answer of the sysextd daemon on %s/%s cannot be read: %m", root, SYSEXT_VARLINK_SOCKET);
        if (!json_object_object_get_ex(reply, "parameters", &parameters) || !json_object_is_type(parameters, json_type_object))
                parameters = NULL;
        error = json_peek_string(reply, "error");
        if (error && STR_IN_SET(error, VARLINK_ERROR_METHOD_NOT_FOUND, VARLINK_ERROR_INTERFACE_NOT_FOUND)) {
                /* Another server there (systemd-sysext's, an older sysextd): nothing was run. */
                log_debug("%s/%s does not serve %s: asking over the bus.", root, SYSEXT_VARLINK_SOCKET, SYSEXTD_VARLINK_INTERFACE);
                *ret_answered = false;
                return 0;
        }
        if (error)
                return print_error(error, parameters);
        if (!parameters)
                return log_error_errno(EBADMSG, "The answer of the sysextd daemon on %s/%s cannot be read: %m", root, SYSEXT_VARLINK_SOCKET);

        messages = json_get_array(parameters, "messages");
        for (size_t i = 0; messages && i < json_object_array_length(messages); i++) {
                _cleanup_free_ char *buf = NULL;
                json_object *m = json_object_array_get_idx(messages, i);
                const char *t = json_peek_string(m, "text");

                if (t && json_object_object_get_ex(m, "level", &v) && json_object_is_type(v, json_type_int) &&
                    json_object_get_int(v) <= log_get_max_level())
                        fprintf(stderr, "%s\n", printable(t, &buf));
        }
        if (out->format == OUTPUT_JSON) {
                (void) json_get_u64(parameters, "generation", &generation);
                printf("{\"generation\":%" PRIu64 ",\"changed\":%s}\n", generation,
                       json_object_object_get_ex(parameters, "changed", &v) && json_object_get_boolean(v) ? "true" : "false");
        }
        return 0;
}
