/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* One entry for the system journal, sent over journald's native protocol
 * (https://systemd.io/JOURNAL_NATIVE_PROTOCOL/) to its datagram socket: each field is
 * "KEY=value"; a value with a newline goes as KEY\n<le64 size><value>\n; an entry larger than a
 * datagram goes in a sealed memfd passed along instead.  This is what sd_journal_sendv() does
 * (without the CODE_FILE, CODE_LINE and CODE_FUNC fields its macro adds: the entry has only the
 * fields it is given); written here so that a process writing one entry per transition does not load libsystemd and,
 * with it, libgcrypt, liblzma, libzstd, liblz4 and libcap (half a millisecond of every start).
 *
 * The keys are sysextd's own (history.c): they are checked for the journal's rules (A-Z, 0-9,
 * '_', not first, at most 64 characters) and an entry with a bad one is not sent (-EINVAL). */

#define JOURNAL_SOCKET "/run/systemd/journal/socket"

/* 0 when sent; -EINVAL for a field that is no KEY=value; else the error of socket(),
 * sendmsg() or the memfd's making (-ENOENT, -ECONNREFUSED: no journal there). */
int journal_send_to(const char *socket_path, const char *const *fields);
