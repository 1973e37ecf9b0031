/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>

#include "engine.h"

/* systemd's varlink interfaces as sysextd serves them (sysextd(8), VARLINK): io.systemd.sysext,
 * as systemd-sysext has it, and io.systemd.SysUpdate.Notify, which systemd-sysupdate calls on
 * every socket in /run/systemd/sysupdate/notify/ after an update.  Pure functions: a call's
 * name and parameters become an engine request, a worker's result document becomes a reply.
 *
 *   Merge(class?, force?, noReload?, noexec?, allowInteractiveAuthentication?) -> ()
 *   Unmerge(class?, noReload?, allowInteractiveAuthentication?) -> ()
 *   Refresh(class?, force?, noReload?, noexec?, alwaysRefresh?, allowInteractiveAuthentication?) -> ()
 *   List(class?) -> one reply per image, with "more" (ExpectedMore without)
 *   OnCompletedUpdate(component?, version?, resources?) -> (): a refresh of both classes
 *
 * As in systemd-sysext, a call without "class" covers system extensions only; every parameter
 * may be null (as absent); an unknown parameter, or one of the wrong type or value, is refused
 * with org.varlink.service.InvalidParameter naming it (OnCompletedUpdate ignores what it does
 * not know, as systemd's receivers do: sysupdate may add more). */

/* sysextd's own interface on the same socket, org.sysextd1.Manager: what its client calls as root
 * (client.c) instead of the D-Bus methods, one hop and no bus between them.  The transitions with
 * the options of the D-Bus methods that a client sends most, and the same answer:
 *
 *   Merge/Refresh/Unmerge(root, classes?, force?, alwaysRefresh?, strict?, noReload?, noexec?,
 *                         allowInteractiveAuthentication?) -> (generation, changed, messages)
 *   error Failed(name, message): name the D-Bus error's (org.sysextd1.Error.*), message its text
 *
 * root is required: a daemon serving another root answers Failed with WrongRoot, as on the bus.
 * A client that needs another option (an image policy, a delay, ...) uses the bus. */
#define SYSEXTD_VARLINK_INTERFACE "org.sysextd1.Manager"
#define SYSEXTD_VARLINK_ERROR_FAILED "org.sysextd1.Manager.Failed"

#define SYSEXT_VARLINK_INTERFACE "io.systemd.sysext"
#define SYSUPDATE_NOTIFY_INTERFACE "io.systemd.SysUpdate.Notify"
#define SYSEXT_ERROR_NO_IMAGES_FOUND "io.systemd.sysext.NoImagesFound"
#define SYSEXT_ERROR_ALREADY_MERGED "io.systemd.sysext.AlreadyMerged"

/* Where systemd-sysext listens, and where systemd-sysupdate looks for receivers, below the root. */
#define SYSEXT_VARLINK_SOCKET "run/systemd/io.systemd.sysext"
#define SYSUPDATE_NOTIFY_SOCKET "run/systemd/sysupdate/notify/io.systemd.sysext"

extern const char sysext_varlink_description[];
extern const char sysextd_varlink_description[];
extern const char *const sysextd_varlink_methods[];
extern const char sysupdate_notify_description[];
extern const char *const sysext_varlink_methods[];
extern const char *const sysupdate_notify_methods[];

/* With sd-varlink (SYSEXTD_SD_VARLINK, libsystemd 257 and later) the same interfaces in its IDL
 * (varlink-sysext-idl.c), for its introspection and parameter checks. */
#if SYSEXTD_SD_VARLINK
#include <systemd/sd-varlink-idl.h>
extern const sd_varlink_interface vl_interface_io_systemd_sysext;
extern const sd_varlink_interface vl_interface_io_systemd_SysUpdate_Notify;
extern const sd_varlink_interface vl_interface_org_sysextd1_Manager;
#define SYSEXTD_VARLINK_IDL ((const void *) &vl_interface_org_sysextd1_Manager)
#define SYSEXT_VARLINK_IDL ((const void *) &vl_interface_io_systemd_sysext)
#define SYSUPDATE_NOTIFY_IDL ((const void *) &vl_interface_io_systemd_SysUpdate_Notify)
#else
#define SYSEXT_VARLINK_IDL NULL
#define SYSUPDATE_NOTIFY_IDL NULL
#define SYSEXTD_VARLINK_IDL NULL
#endif

typedef enum SysextMethod {
        SYSEXT_METHOD_MERGE,
        SYSEXT_METHOD_UNMERGE,
        SYSEXT_METHOD_REFRESH,
        SYSEXT_METHOD_LIST,
        SYSEXT_METHOD_COMPLETED_UPDATE,
        SYSEXT_METHOD_MANAGER_MERGE,
        SYSEXT_METHOD_MANAGER_REFRESH,
        SYSEXT_METHOD_MANAGER_UNMERGE,
        _SYSEXT_METHOD_MAX,
} SysextMethod;

typedef struct SysextCall {
        SysextMethod method;
        EngineVerb verb;       /* the transition (OnCompletedUpdate: refresh) */
        EngineOptions options; /* List: only .classes */
        bool interactive;      /* allowInteractiveAuthentication */
        bool manager;          /* org.sysextd1.Manager's: answered as the D-Bus methods are */
        const char *root;      /* org.sysextd1.Manager's: the root the caller means (in the parameters) */
} SysextCall;

/* Parses a call.  Returns 0; -EOPNOTSUPP for a method neither interface has (MethodNotFound);
 * -EINVAL for a bad parameter, *ret_parameter then naming it (a string of the call's
 * parameters, or static); -EPROTO for List without "more" (ExpectedMore). */
int sysext_call_parse(const char *method, json_object *parameters, unsigned flags, SysextCall *ret,
                      const char **ret_parameter);

/* The reply to a transition from the worker's result document (doc NULL: the worker died):
 * success is {} (also when there was nothing to merge, as with systemd-sysext); a merge into a
 * merged hierarchy is AlreadyMerged {"hierarchy": merged_hierarchy, else "/usr"}; every other
 * failure is io.systemd.System {"errno", "errnoName"}.  *ret_error is NULL for success;
 * *ret_parameters is new.  Returns 0 or -ENOMEM. */
int sysext_transition_reply(json_object *doc, const char *merged_hierarchy, const char **ret_error,
                            json_object **ret_parameters);

/* org.sysextd1.Manager's reply to a transition from the worker's result document (NULL: the
 * worker died): {generation, changed, messages: [{level, text}]}, or the error Failed {name,
 * message} as the D-Bus methods fail (NoImages and NoSuitableImages too, which the client reports
 * as no failure).  Returns 0 or -ENOMEM. */
int sysextd_transition_reply(json_object *doc, const char **ret_error, json_object **ret_parameters);

/* The List replies from a listing document: an array of systemd-sysext's image objects
 * (Class, Type, Name, Path, ReadOnly) for the images of the classes asked for (0: all), in the
 * listing's order.  NULL when the listing failed (*ret_errno: why) or on ENOMEM. */
json_object *sysext_list_items(json_object *doc, unsigned classes, int *ret_errno);

/* systemd's image type of one of sysextd's image kinds: directory, or raw for an image file. */
const char *sysext_image_type(const char *kind);
