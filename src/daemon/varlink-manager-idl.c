/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * org.sysextd1.Manager in sd-varlink's IDL (libsystemd 257 and later only; meson builds this
 * file with varlink-sd.c).  Must say what sysextd_varlink_description (varlink-sysext.c) says.
 * A file of its own: the IDL names a method after its C symbol, and io.systemd.sysext's Merge,
 * Refresh and Unmerge are in varlink-sysext-idl.c.
 */
#include <systemd/sd-varlink-idl.h>

#include "varlink-sysext.h"

static SD_VARLINK_DEFINE_ENUM_TYPE(ImageClass, SD_VARLINK_DEFINE_ENUM_VALUE(sysext), SD_VARLINK_DEFINE_ENUM_VALUE(confext));

static SD_VARLINK_DEFINE_STRUCT_TYPE(Message, SD_VARLINK_DEFINE_FIELD(level, SD_VARLINK_INT, 0),
                                     SD_VARLINK_DEFINE_FIELD(text, SD_VARLINK_STRING, 0));

/* The three transitions take the same parameters and answer the same. */
#define TRANSITION(name)                                                                                              \
        static SD_VARLINK_DEFINE_METHOD(name, SD_VARLINK_DEFINE_INPUT(root, SD_VARLINK_STRING, 0),                    \
                                        SD_VARLINK_DEFINE_INPUT_BY_TYPE(classes, ImageClass,                          \
                                                                        SD_VARLINK_NULLABLE | SD_VARLINK_ARRAY),      \
                                        SD_VARLINK_DEFINE_INPUT(force, SD_VARLINK_BOOL, SD_VARLINK_NULLABLE),         \
                                        SD_VARLINK_DEFINE_INPUT(alwaysRefresh, SD_VARLINK_BOOL, SD_VARLINK_NULLABLE), \
                                        SD_VARLINK_DEFINE_INPUT(strict, SD_VARLINK_BOOL, SD_VARLINK_NULLABLE),        \
                                        SD_VARLINK_DEFINE_INPUT(noReload, SD_VARLINK_BOOL, SD_VARLINK_NULLABLE),      \
                                        SD_VARLINK_DEFINE_INPUT(noexec, SD_VARLINK_BOOL, SD_VARLINK_NULLABLE),        \
                                        SD_VARLINK_DEFINE_INPUT(allowInteractiveAuthentication, SD_VARLINK_BOOL,      \
                                                                SD_VARLINK_NULLABLE),                                 \
                                        SD_VARLINK_DEFINE_OUTPUT(generation, SD_VARLINK_INT, 0),                      \
                                        SD_VARLINK_DEFINE_OUTPUT(changed, SD_VARLINK_BOOL, 0),                        \
                                        SD_VARLINK_DEFINE_OUTPUT_BY_TYPE(messages, Message, SD_VARLINK_ARRAY))

TRANSITION(Merge);
TRANSITION(Refresh);
TRANSITION(Unmerge);

static SD_VARLINK_DEFINE_ERROR(Failed, SD_VARLINK_DEFINE_FIELD(name, SD_VARLINK_STRING, 0),
                               SD_VARLINK_DEFINE_FIELD(message, SD_VARLINK_STRING, 0));

SD_VARLINK_DEFINE_INTERFACE(org_sysextd1_Manager, "org.sysextd1.Manager", &vl_type_ImageClass, &vl_type_Message,
                            &vl_method_Merge, &vl_method_Refresh, &vl_method_Unmerge, &vl_error_Failed);
