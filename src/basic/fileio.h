/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

/* Reading files that someone else may have put there.  Nothing here blocks on a FIFO,
 * opens a device node, or reads more than the caller allows:
 *
 *   1. the path is resolved below dir_fd with openat2() and the caller's RESOLVE_* flags
 *      (RESOLVE_IN_ROOT: absolute symlinks stay inside the tree) into an O_PATH fd, so
 *      nothing is opened for reading yet;
 *   2. its type is checked on that fd: only a regular file goes on (-EBADFD otherwise, with
 *      the type in *ret_mode for the message);
 *   3. it is reopened for reading through /proc/self/fd, O_NONBLOCK, and read up to
 *      max_size bytes (-EFBIG beyond). */

/* Opens a regular file for reading as in steps 1-3.  *ret_st describes it. */
int open_regular_at(int dir_fd, const char *path, uint64_t resolve, int *ret_fd, struct stat *ret_st);

/* Reads a whole regular file (NUL-terminated; *ret_size without the NUL). */
int read_file_at(int dir_fd, const char *path, uint64_t resolve, size_t max_size, char **ret, size_t *ret_size,
                 mode_t *ret_mode);
/* Reads an open regular file from its current offset, at most max_size bytes. */
int read_fd_full(int fd, size_t max_size, char **ret, size_t *ret_size);

/* Opens a directory below dir_fd (O_RDONLY | O_DIRECTORY, never a device or FIFO). */
int open_directory_at(int dir_fd, const char *path, uint64_t resolve);

/* "a FIFO", "a directory", "a character device", ... for messages. */
const char *inode_type_name(mode_t mode);

/* The reason a read_file_at() or open_regular_at() failed, in words: "is a FIFO, not a
 * regular file", "is larger than 64 KiB", or strerror().  Static or into buf. */
const char *read_error_string(int error, mode_t mode, size_t max_size, char *buf, size_t buf_size);
#define READ_ERROR_STRING(error, mode, max) read_error_string((error), (mode), (max), (char[128]){}, 128)

/* Creates the directories of 'path' below root_fd as needed (each one resolved with
 * RESOLVE_IN_ROOT from root_fd, so a symlink on the way stays inside the tree) and returns an
 * O_RDONLY | O_DIRECTORY fd of the last one. */
int mkdir_p_in_root(int root_fd, const char *path, mode_t mode);

/* Removes the entry 'name' of dir_fd and, for a directory, everything below it, without
 * following a symlink anywhere (a symlink is removed, not what it points to) and without
 * crossing into another mount.  Missing is not an error. */
int rm_rf_at(int dir_fd, const char *name);
