/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* libsystemd, loaded when a process first needs the bus, the event loop or the service
 * manager's protocols (the daemon at its start, the client before it connects, the engine before
 * it asks systemd for a reload or jobs) rather than by the dynamic linker at every start: with
 * its own dependencies (libgcrypt, liblzma, libzstd, liblz4, libcap) it was half a millisecond of
 * every start of sysextd, and a transition in process (the boot path, scripts) uses none of it:
 * its journal entry goes over journald's native protocol (journal-send.c).
 *
 * Every file that calls libsystemd includes this header instead of <systemd/sd-*.h>: each
 * sd_NAME used is redirected to a pointer sym_sd_NAME of the library's own type, filled by
 * dlopen_libsystemd(), which must have returned 0 in this process before any call.  A call made
 * before that is a NULL call: the places that load it are few (daemon_run(), client_run(),
 * unit_manager_connect()) and every other caller is reached through them.  The linker keeps the
 * rule: sysextd does not link libsystemd (test/unit/lazy-libs.sh), so a call that bypassed the
 * pointers would not link. */
#include <systemd/sd-bus.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-event.h>
#if SYSEXTD_SD_VARLINK
#  include <systemd/sd-json.h>
#  include <systemd/sd-varlink.h>
#endif

/* The functions of libsystemd that sysextd calls. */
#define LIBSYSTEMD_FUNCTIONS(X) \
        X(sd_bus_add_match_async) \
        X(sd_bus_add_object_vtable) \
        X(sd_bus_attach_event) \
        X(sd_bus_call) \
        X(sd_bus_call_async) \
        X(sd_bus_call_method) \
        X(sd_bus_call_method_async) \
        X(sd_bus_creds_get_euid) \
        X(sd_bus_creds_get_pid) \
        X(sd_bus_creds_unref) \
        X(sd_bus_emit_properties_changed) \
        X(sd_bus_error_free) \
        X(sd_bus_error_has_name) \
        X(sd_bus_error_has_names_sentinel) \
        X(sd_bus_error_set) \
        X(sd_bus_error_setf) \
        X(sd_bus_flush) \
        X(sd_bus_flush_close_unref) \
        X(sd_bus_get_property) \
        X(sd_bus_get_property_string) \
        X(sd_bus_match_signal) \
        X(sd_bus_match_signal_async) \
        X(sd_bus_message_append) \
        X(sd_bus_message_append_basic) \
        X(sd_bus_message_at_end) \
        X(sd_bus_message_close_container) \
        X(sd_bus_message_enter_container) \
        X(sd_bus_message_exit_container) \
        X(sd_bus_message_get_allow_interactive_authorization) \
        X(sd_bus_message_get_cookie) \
        X(sd_bus_message_get_error) \
        X(sd_bus_message_get_member) \
        X(sd_bus_message_get_sender) \
        X(sd_bus_message_new_method_call) \
        X(sd_bus_message_new_method_return) \
        X(sd_bus_message_new_signal) \
        X(sd_bus_message_open_container) \
        X(sd_bus_message_peek_type) \
        X(sd_bus_message_read) \
        X(sd_bus_message_read_strv) \
        X(sd_bus_message_ref) \
        X(sd_bus_message_rewind) \
        X(sd_bus_message_set_auto_start) \
        X(sd_bus_message_set_expect_reply) \
        X(sd_bus_message_skip) \
        X(sd_bus_message_unref) \
        X(sd_bus_new) \
        X(sd_bus_object_path_is_valid) \
        X(sd_bus_open_system) \
        X(sd_bus_query_sender_creds) \
        X(sd_bus_release_name_async) \
        X(sd_bus_reply_method_errnof) \
        X(sd_bus_reply_method_errorf) \
        X(sd_bus_reply_method_return) \
        X(sd_bus_request_name) \
        X(sd_bus_send) \
        X(sd_bus_set_address) \
        X(sd_bus_set_allow_interactive_authorization) \
        X(sd_bus_set_exit_on_disconnect) \
        X(sd_bus_slot_unref) \
        X(sd_bus_start) \
        X(sd_event_add_child) \
        X(sd_event_add_defer) \
        X(sd_event_add_io) \
        X(sd_event_add_signal) \
        X(sd_event_add_time) \
        X(sd_event_add_time_relative) \
        X(sd_event_default) \
        X(sd_event_exit) \
        X(sd_event_loop) \
        X(sd_event_ref) \
        X(sd_event_set_watchdog) \
        X(sd_event_source_disable_unref) \
        X(sd_event_source_get_enabled) \
        X(sd_event_source_set_enabled) \
        X(sd_event_source_set_io_events) \
        X(sd_event_source_set_priority) \
        X(sd_event_source_set_time) \
        X(sd_event_source_set_time_relative) \
        X(sd_event_source_unref) \
        X(sd_event_unref) \
        X(sd_is_socket_unix) \
        X(sd_listen_fds_with_names) \
        X(sd_notify) \
        X(sd_notifyf)
#if SYSEXTD_SD_VARLINK
#define LIBSYSTEMD_VARLINK_FUNCTIONS(X) \
        X(sd_json_parse) \
        X(sd_json_variant_format) \
        X(sd_json_variant_unref) \
        X(sd_varlink_error) \
        X(sd_varlink_error_errno) \
        X(sd_varlink_error_invalid_parameter_name) \
        X(sd_varlink_flush) \
        X(sd_varlink_get_fd) \
        X(sd_varlink_get_peer_pid) \
        X(sd_varlink_get_peer_uid) \
        X(sd_varlink_notify) \
        X(sd_varlink_ref) \
        X(sd_varlink_reply) \
        X(sd_varlink_server_add_interface) \
        X(sd_varlink_server_attach_event) \
        X(sd_varlink_server_bind_connect) \
        X(sd_varlink_server_bind_disconnect) \
        X(sd_varlink_server_bind_method) \
        X(sd_varlink_server_get_userdata) \
        X(sd_varlink_server_listen_address) \
        X(sd_varlink_server_listen_fd) \
        X(sd_varlink_server_new) \
        X(sd_varlink_server_set_info) \
        X(sd_varlink_server_set_userdata) \
        X(sd_varlink_server_unref) \
        X(sd_varlink_unref)
#else
#  define LIBSYSTEMD_VARLINK_FUNCTIONS(X)
#endif

#define DLSYM_DECLARE_SYSTEMD(f) extern typeof(f) *sym_##f;
LIBSYSTEMD_FUNCTIONS(DLSYM_DECLARE_SYSTEMD)
LIBSYSTEMD_VARLINK_FUNCTIONS(DLSYM_DECLARE_SYSTEMD)
/* A variable of the library: its address marks an sd_bus_vtable's format (SD_BUS_VTABLE_START). */
extern const unsigned *sym_sd_bus_object_vtable_format;

/* Loads libsystemd.so.0 and every function above, once: 0 when they are there, else -EOPNOTSUPP
 * with *ret_message (may be NULL) saying which library or symbol is missing. */
int dlopen_libsystemd(char **ret_message);

#ifndef DLOPEN_SYSTEMD_NO_REDIRECT
#  define sd_bus_add_match_async sym_sd_bus_add_match_async
#  define sd_bus_add_object_vtable sym_sd_bus_add_object_vtable
#  define sd_bus_attach_event sym_sd_bus_attach_event
#  define sd_bus_call sym_sd_bus_call
#  define sd_bus_call_async sym_sd_bus_call_async
#  define sd_bus_call_method sym_sd_bus_call_method
#  define sd_bus_call_method_async sym_sd_bus_call_method_async
#  define sd_bus_creds_get_euid sym_sd_bus_creds_get_euid
#  define sd_bus_creds_get_pid sym_sd_bus_creds_get_pid
#  define sd_bus_creds_unref sym_sd_bus_creds_unref
#  define sd_bus_emit_properties_changed sym_sd_bus_emit_properties_changed
#  define sd_bus_error_has_name sym_sd_bus_error_has_name
#  define sd_bus_error_has_names_sentinel sym_sd_bus_error_has_names_sentinel
#  define sd_bus_error_set sym_sd_bus_error_set
#  define sd_bus_error_setf sym_sd_bus_error_setf
#  define sd_bus_flush sym_sd_bus_flush
#  define sd_bus_flush_close_unref sym_sd_bus_flush_close_unref
#  define sd_bus_get_property sym_sd_bus_get_property
#  define sd_bus_get_property_string sym_sd_bus_get_property_string
#  define sd_bus_match_signal sym_sd_bus_match_signal
#  define sd_bus_match_signal_async sym_sd_bus_match_signal_async
#  define sd_bus_message_append sym_sd_bus_message_append
#  define sd_bus_message_append_basic sym_sd_bus_message_append_basic
#  define sd_bus_message_at_end sym_sd_bus_message_at_end
#  define sd_bus_message_close_container sym_sd_bus_message_close_container
#  define sd_bus_message_enter_container sym_sd_bus_message_enter_container
#  define sd_bus_message_exit_container sym_sd_bus_message_exit_container
#  define sd_bus_message_get_allow_interactive_authorization sym_sd_bus_message_get_allow_interactive_authorization
#  define sd_bus_message_get_cookie sym_sd_bus_message_get_cookie
#  define sd_bus_message_get_error sym_sd_bus_message_get_error
#  define sd_bus_message_get_member sym_sd_bus_message_get_member
#  define sd_bus_message_get_sender sym_sd_bus_message_get_sender
#  define sd_bus_message_new_method_call sym_sd_bus_message_new_method_call
#  define sd_bus_message_new_method_return sym_sd_bus_message_new_method_return
#  define sd_bus_message_new_signal sym_sd_bus_message_new_signal
#  define sd_bus_message_open_container sym_sd_bus_message_open_container
#  define sd_bus_message_peek_type sym_sd_bus_message_peek_type
#  define sd_bus_message_read sym_sd_bus_message_read
#  define sd_bus_message_read_strv sym_sd_bus_message_read_strv
#  define sd_bus_message_ref sym_sd_bus_message_ref
#  define sd_bus_message_rewind sym_sd_bus_message_rewind
#  define sd_bus_message_set_auto_start sym_sd_bus_message_set_auto_start
#  define sd_bus_message_set_expect_reply sym_sd_bus_message_set_expect_reply
#  define sd_bus_message_skip sym_sd_bus_message_skip
#  define sd_bus_message_unref sym_sd_bus_message_unref
#  define sd_bus_new sym_sd_bus_new
#  define sd_bus_object_path_is_valid sym_sd_bus_object_path_is_valid
#  define sd_bus_open_system sym_sd_bus_open_system
#  define sd_bus_query_sender_creds sym_sd_bus_query_sender_creds
#  define sd_bus_release_name_async sym_sd_bus_release_name_async
#  define sd_bus_reply_method_errnof sym_sd_bus_reply_method_errnof
#  define sd_bus_reply_method_errorf sym_sd_bus_reply_method_errorf
#  define sd_bus_reply_method_return sym_sd_bus_reply_method_return
#  define sd_bus_request_name sym_sd_bus_request_name
#  define sd_bus_send sym_sd_bus_send
#  define sd_bus_set_address sym_sd_bus_set_address
#  define sd_bus_set_allow_interactive_authorization sym_sd_bus_set_allow_interactive_authorization
#  define sd_bus_set_exit_on_disconnect sym_sd_bus_set_exit_on_disconnect
#  define sd_bus_slot_unref sym_sd_bus_slot_unref
#  define sd_bus_start sym_sd_bus_start
#  define sd_event_add_child sym_sd_event_add_child
#  define sd_event_add_defer sym_sd_event_add_defer
#  define sd_event_add_io sym_sd_event_add_io
#  define sd_event_add_signal sym_sd_event_add_signal
#  define sd_event_add_time sym_sd_event_add_time
#  define sd_event_add_time_relative sym_sd_event_add_time_relative
#  define sd_event_default sym_sd_event_default
#  define sd_event_exit sym_sd_event_exit
#  define sd_event_loop sym_sd_event_loop
#  define sd_event_ref sym_sd_event_ref
#  define sd_event_set_watchdog sym_sd_event_set_watchdog
#  define sd_event_source_disable_unref sym_sd_event_source_disable_unref
#  define sd_event_source_get_enabled sym_sd_event_source_get_enabled
#  define sd_event_source_set_enabled sym_sd_event_source_set_enabled
#  define sd_event_source_set_io_events sym_sd_event_source_set_io_events
#  define sd_event_source_set_priority sym_sd_event_source_set_priority
#  define sd_event_source_set_time sym_sd_event_source_set_time
#  define sd_event_source_set_time_relative sym_sd_event_source_set_time_relative
#  define sd_event_source_unref sym_sd_event_source_unref
#  define sd_event_unref sym_sd_event_unref
#  define sd_is_socket_unix sym_sd_is_socket_unix
#  define sd_listen_fds_with_names sym_sd_listen_fds_with_names
#  define sd_notify sym_sd_notify
#  define sd_notifyf sym_sd_notifyf
#  if SYSEXTD_SD_VARLINK
#  define sd_json_parse sym_sd_json_parse
#  define sd_json_variant_format sym_sd_json_variant_format
#  define sd_json_variant_unref sym_sd_json_variant_unref
#  define sd_varlink_error sym_sd_varlink_error
#  define sd_varlink_error_errno sym_sd_varlink_error_errno
#  define sd_varlink_error_invalid_parameter_name sym_sd_varlink_error_invalid_parameter_name
#  define sd_varlink_flush sym_sd_varlink_flush
#  define sd_varlink_get_fd sym_sd_varlink_get_fd
#  define sd_varlink_get_peer_pid sym_sd_varlink_get_peer_pid
#  define sd_varlink_get_peer_uid sym_sd_varlink_get_peer_uid
#  define sd_varlink_notify sym_sd_varlink_notify
#  define sd_varlink_ref sym_sd_varlink_ref
#  define sd_varlink_reply sym_sd_varlink_reply
#  define sd_varlink_server_add_interface sym_sd_varlink_server_add_interface
#  define sd_varlink_server_attach_event sym_sd_varlink_server_attach_event
#  define sd_varlink_server_bind_connect sym_sd_varlink_server_bind_connect
#  define sd_varlink_server_bind_disconnect sym_sd_varlink_server_bind_disconnect
#  define sd_varlink_server_bind_method sym_sd_varlink_server_bind_method
#  define sd_varlink_server_get_userdata sym_sd_varlink_server_get_userdata
#  define sd_varlink_server_listen_address sym_sd_varlink_server_listen_address
#  define sd_varlink_server_listen_fd sym_sd_varlink_server_listen_fd
#  define sd_varlink_server_new sym_sd_varlink_server_new
#  define sd_varlink_server_set_info sym_sd_varlink_server_set_info
#  define sd_varlink_server_set_userdata sym_sd_varlink_server_set_userdata
#  define sd_varlink_server_unref sym_sd_varlink_server_unref
#  define sd_varlink_unref sym_sd_varlink_unref
#  endif

/* The header's cleanup helpers call the library's functions directly: these call the pointers. */
static inline void dlopen_sd_bus_error_free(sd_bus_error *e) {
        if (sym_sd_bus_error_free) /* else the library never set one */
                sym_sd_bus_error_free(e);
}
static inline void dlopen_sd_bus_message_unrefp(sd_bus_message **m) {
        if (*m)
                sym_sd_bus_message_unref(*m);
}
static inline void dlopen_sd_bus_creds_unrefp(sd_bus_creds **c) {
        if (*c)
                sym_sd_bus_creds_unref(*c);
}
static inline void dlopen_sd_bus_flush_close_unrefp(sd_bus **b) {
        if (*b)
                sym_sd_bus_flush_close_unref(*b);
}
#  define sd_bus_error_free dlopen_sd_bus_error_free
#  define sd_bus_message_unrefp dlopen_sd_bus_message_unrefp
#  define sd_bus_creds_unrefp dlopen_sd_bus_creds_unrefp
#  define sd_bus_flush_close_unrefp dlopen_sd_bus_flush_close_unrefp

/* SD_BUS_VTABLE_START takes the address of sd_bus_object_vtable_format, which is not known
 * before the library is loaded: a vtable starts with this instead, and bus_vtable_start() fills
 * the reference in before the vtable is added. */
#  undef SD_BUS_VTABLE_START
#  define SD_BUS_VTABLE_START(_flags)                                                          \
        {                                                                                       \
                .type = _SD_BUS_VTABLE_START, .flags = _flags,                                  \
                .x = { .start = { .element_size = sizeof(sd_bus_vtable),                         \
                                  .features = _SD_BUS_VTABLE_PARAM_NAMES,                       \
                                  .vtable_format_reference = NULL } },                         \
        }
static inline sd_bus_vtable *bus_vtable_start(sd_bus_vtable *vtable) {
        vtable[0].x.start.vtable_format_reference = sym_sd_bus_object_vtable_format;
        return vtable;
}
#endif
