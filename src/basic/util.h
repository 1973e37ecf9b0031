/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "macro.h"

/* String lists: NULL-terminated arrays of malloc'ed strings. */
typedef char **strv_t;
void strv_free(char **l);
static inline void strv_freep(char ***l) {
        strv_free(*l);
}
#define _cleanup_strv_free_ _cleanup_(strv_freep)
size_t strv_length(char *const *l);
int strv_push(char ***l, char *value);         /* takes ownership of value, also on failure */
int strv_extend(char ***l, const char *value); /* copies value */
/* systemd's booleans: 1 for "1", "yes", "y", "true", "t", "on", 0 for their opposites,
 * -EINVAL otherwise (NULL included). */
int parse_boolean(const char *v);
int strv_copy(char *const *l, char ***ret);      /* NULL for an empty or NULL list */
bool strv_contains(char *const *l, const char *value);
/* The index of s in a table of n names (NULL entries skipped), -EINVAL if it is none. */
int string_table_find(const char *const *table, size_t n, const char *s);
char *strv_join(char *const *l, const char *separator);
int strv_split(const char *s, const char *separators, char ***ret);
#define STRV_FOREACH(s, l) for (char *const *s = (l); s && *s; s++)

char *path_join(const char *a, const char *b);
char *strjoin3(const char *a, const char *b, const char *c);
bool endswith(const char *s, const char *suffix);
const char *startswith(const char *s, const char *prefix);
char *strstrip(char *s);

/* Write a file atomically: temporary file in the same directory, fsync, rename. */
int write_file_atomic_at(int dir_fd, const char *path, const char *content, mode_t mode);
/* The same, calling before_rename with the written and synced temporary file (its name in
 * dir_fd) right before it is renamed over path: what must exist once path says so. */
int write_file_atomic_hook_at(int dir_fd, const char *path, const char *content, mode_t mode,
                              void (*before_rename)(int dir_fd, const char *tmp, void *userdata), void *userdata);
int mkdir_p_at(int dir_fd, const char *path, mode_t mode);

/* Version comparison in the spirit of strverscmp_improved(): digits compare as numbers,
 * '~' sorts before everything (pre-releases), '-' and '^' separate segments, letters compare
 * as text and sort after digits. */
int version_compare(const char *a, const char *b);

uint64_t now_realtime_usec(void);
/* A whole number of seconds ("300"), in µs, at most max_usec: -EINVAL otherwise (no sign, no
 * unit, no spaces). */
int parse_seconds(const char *s, uint64_t max_usec, uint64_t *ret_usec);
uint64_t now_monotonic_usec(void);
char *format_timestamp(uint64_t usec); /* "Thu 2026-12-03 08:30:00 UTC" */

int random_hex(size_t n_bytes, char **ret);

/* Content stamps: FNV-1a over what identifies a file's content (inode, size, times) and names,
 * to notice changes without reading content.  Start from STAMP_INIT. */
#define STAMP_INIT UINT64_C(0xcbf29ce484222325)
void stamp_add_u64(uint64_t *stamp, uint64_t v);
void stamp_add_string(uint64_t *stamp, const char *s);
void stamp_add_stat(uint64_t *stamp, const struct stat *st);

/* The one way a function hands a message for people to its caller: replaces *ret (which may
 * be NULL, then nothing is kept) with the formatted text, %m being 'error', and returns
 * -abs(error), or 0 for error 0.  "return set_message(ret_message, r, "...: %m", path);" */
int set_message(char **ret, int error, const char *fmt, ...) _printf_(3, 4);

/* Strings that leave the process (terminal, bus, journal) must be valid UTF-8 without control
 * characters.  string_escape() turns every byte that is not (and every backslash) into \xNN
 * (\\ for a backslash); string_safe() returns s itself when it is already safe, else an
 * escaped copy kept in *buf (freed by the caller). */
bool utf8_is_valid(const char *s);
bool string_has_control(const char *s);
char *string_escape(const char *s);
const char *string_safe(const char *s, char **buf);

/* A helper process meant to run beside its parent.  On the machines measured (two CPUs, Linux
 * 6.18 under a hypervisor) a forked child mostly starts on its parent's CPU and waits there,
 * 0.5-1.1 ms, until the parent blocks or a load balance moves it: work meant to overlap does
 * not.  cpu_nudge_away() moves the child off the caller's CPU right after the fork (its mask
 * less that CPU; nothing with one CPU allowed); cpu_nudge_back() gives it the caller's mask
 * again, to be called before the caller waits for it (a helper the caller waits for may use
 * the caller's CPU then).  Both are hints: failures are ignored. */
void cpu_nudge_away(pid_t pid);
void cpu_nudge_back(pid_t pid);
/* The caller's mask less the CPU it runs on, for a thread to be moved so (pthread_setaffinity_np);
 * false when there is no other CPU to go to. */
bool cpu_mask_elsewhere(cpu_set_t *ret);
