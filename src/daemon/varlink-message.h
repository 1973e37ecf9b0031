/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>

/* The varlink wire format (https://varlink.org), pure functions: no fds, no event loop.
 *
 * A message is one JSON object followed by a NUL byte, over an AF_UNIX SOCK_STREAM socket.
 * A call is {"method": "iface.Method", "parameters": {...}, "oneway": b, "more": b,
 * "upgrade": b}; a reply is {"parameters": {...}}, with "continues": true while more replies to
 * a "more" call follow, or {"error": "iface.Error", "parameters": {...}}.
 *
 * What comes in is hostile: a message is at most VARLINK_MESSAGE_MAX bytes, nested at most
 * VARLINK_DEPTH_MAX deep, strict JSON in valid UTF-8 with nothing after the object, a method
 * name as the varlink grammar has it, "parameters" an object, the flags booleans.  Anything
 * else is a protocol violation: the connection is closed (there is nobody to reply to). */

#define VARLINK_MESSAGE_MAX (128U * 1024U)
#define VARLINK_DEPTH_MAX 16
#define VARLINK_METHOD_MAX 255

#define VARLINK_ERROR_INTERFACE_NOT_FOUND "org.varlink.service.InterfaceNotFound"
#define VARLINK_ERROR_METHOD_NOT_FOUND "org.varlink.service.MethodNotFound"
#define VARLINK_ERROR_METHOD_NOT_IMPLEMENTED "org.varlink.service.MethodNotImplemented"
#define VARLINK_ERROR_INVALID_PARAMETER "org.varlink.service.InvalidParameter"
#define VARLINK_ERROR_PERMISSION_DENIED "org.varlink.service.PermissionDenied"
#define VARLINK_ERROR_EXPECTED_MORE "org.varlink.service.ExpectedMore"
#define VARLINK_ERROR_SYSTEM "io.systemd.System"

typedef enum VarlinkCallFlags {
        VARLINK_CALL_ONEWAY = 1u << 0,
        VARLINK_CALL_MORE = 1u << 1,
} VarlinkCallFlags;

typedef struct VarlinkMessage {
        char *method;           /* "interface.Method" */
        json_object *parameters; /* always an object (empty when the call had none) */
        unsigned flags;          /* VARLINK_CALL_* */
} VarlinkMessage;

void varlink_message_done(VarlinkMessage *m);

/* Parses one message of len bytes (without its NUL; a NUL inside is refused).  Returns 0, or
 * -EBADMSG for anything that is not a valid call (upgrade is refused: -EPROTONOSUPPORT), -ENOMEM. */
int varlink_message_parse(const char *text, size_t len, VarlinkMessage *ret);

/* "a.b.C": dot-separated interface name words of [A-Za-z0-9-], each beginning with a letter,
 * at least two of them, then a method name [A-Z][A-Za-z0-9]*. */
bool varlink_method_name_valid(const char *s);
/* An error name has the same shape. */
#define varlink_error_name_valid varlink_method_name_valid

/* The interface part of "a.b.C", copied; NULL on ENOMEM. */
char *varlink_method_interface(const char *method);

/* A reply, serialized with its NUL terminator; parameters is taken (NULL: {}).  Returns the
 * text (malloc'd) and its length including the NUL in *ret_len, NULL on ENOMEM. */
char *varlink_format_reply(json_object *parameters, bool continues, size_t *ret_len);
char *varlink_format_error(const char *error, json_object *parameters, size_t *ret_len);

/* io.systemd.System's parameters for -errno: {"errno": N, "errnoName": "EBUSY"}. */
json_object *varlink_errno_parameters(int error);
