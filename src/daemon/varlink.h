/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <sys/types.h>

#include "dlopen-systemd.h"
#include "varlink-message.h"

/* A varlink server in the daemon's sd-event loop: the listening sockets, the connections, and
 * the calls waiting for their replies.  Two implementations behind this one interface, chosen
 * by meson: varlink-jsonc.c (a small protocol layer on json-c: libsystemd before 257 has no
 * public varlink API) and varlink-sd.c (libsystemd's sd-varlink, 257 and later).
 *
 * The server answers org.varlink.service (GetInfo, GetInterfaceDescription) itself from the
 * interfaces it is given, refuses calls of an interface it does not serve (InterfaceNotFound),
 * and hands every other call to the handler, with its parameters (an object).  The handler
 * answers at once or later, through the call it may keep a reference to; it returns < 0 only
 * when it could not answer (the call is then answered with io.systemd.System).
 *
 * Limits: VARLINK_CONNECTIONS_MAX connections (more are closed at once), per connection
 * VARLINK_MESSAGE_MAX bytes of one message and VARLINK_PENDING_MAX calls not yet answered (a
 * client that sends more before reading is disconnected), VARLINK_OUTPUT_MAX bytes of replies
 * it has not read (then it is disconnected: it cannot make the daemon hold memory). */

#define VARLINK_CONNECTIONS_MAX 64
#define VARLINK_PENDING_MAX 16
#define VARLINK_OUTPUT_MAX (16U * 1024U * 1024U)

typedef struct VarlinkServer VarlinkServer;
typedef struct VarlinkCall VarlinkCall;

typedef struct VarlinkInterface {
        const char *name;        /* "io.systemd.sysext" */
        const char *description; /* its interface definition, as GetInterfaceDescription gives it */
        const char *const *methods; /* its methods' full names, NULL-terminated (sd-varlink binds each) */
        const void *sd_idl;      /* with sd-varlink: its const sd_varlink_interface *, else NULL */
} VarlinkInterface;

typedef int (*VarlinkHandler)(VarlinkServer *s, VarlinkCall *call, const char *method, json_object *parameters,
                              unsigned flags, void *userdata);

/* interfaces: NULL-name terminated, not copied (static). */
int varlink_server_new(sd_event *event, const VarlinkInterface *interfaces, VarlinkHandler handler, void *userdata,
                       VarlinkServer **ret);
VarlinkServer *varlink_server_free(VarlinkServer *s);
/* Serves a listening socket (taken, closed in every case). */
int varlink_server_listen_fd(VarlinkServer *s, int fd);
/* Binds and serves a socket at path (mode 0666: who may do what is decided per call); a stale
 * socket there is replaced.  The socket file is removed again when the server is freed. */
int varlink_server_listen_path(VarlinkServer *s, const char *path);
/* Connections open, and calls not yet answered: the daemon does not exit on idle while any are. */
unsigned varlink_server_n_connections(VarlinkServer *s);
unsigned varlink_server_n_pending(VarlinkServer *s);
/* Called when the number of connections or pending calls changes. */
void varlink_server_set_change_callback(VarlinkServer *s, void (*cb)(void *userdata));

VarlinkCall *varlink_call_ref(VarlinkCall *c);
VarlinkCall *varlink_call_unref(VarlinkCall *c);
static inline void varlink_call_unrefp(VarlinkCall **c) {
        if (*c)
                varlink_call_unref(*c);
}

unsigned varlink_call_flags(VarlinkCall *c);
/* The caller, from the socket (SO_PEERCRED, SO_PEERPIDFD where the kernel has it): fixed when
 * it connected.  *ret_pidfd is a new fd (the caller closes it), -EBADF when none. */
int varlink_call_peer(VarlinkCall *c, uid_t *ret_uid, pid_t *ret_pid, int *ret_pidfd);
/* Whether the connection is still there (a reply would reach someone). */
bool varlink_call_connected(VarlinkCall *c);

/* Answers (parameters taken; NULL: {}).  A reply with continues=true may be followed by more
 * (only for a call with VARLINK_CALL_MORE); the last has continues=false.  After the last reply
 * or an error the call is done: further answers are refused (-EALREADY).  A oneway call's
 * answers are dropped.  Errors of sending (a connection gone) are not the caller's concern:
 * 0 is returned and the connection is closed. */
int varlink_call_reply(VarlinkCall *c, json_object *parameters, bool continues);
int varlink_call_error(VarlinkCall *c, const char *error, json_object *parameters);
int varlink_call_error_errno(VarlinkCall *c, int error);
int varlink_call_error_invalid_parameter(VarlinkCall *c, const char *parameter);
