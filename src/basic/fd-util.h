/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "macro.h"

/* Where the proc file system is: "/proc/", or "" in a process that entered another mount
 * namespace and made the host's /proc its working directory (follow.c): that namespace's own
 * /proc may be of another PID namespace, missing, or forged by whoever owns it. */
const char *proc_prefix(void);
/* From now on this process reaches /proc through its working directory, which is the host's
 * /proc (paths under /proc become relative). */
void proc_prefix_use_cwd(void);

#define PROC_FD_PATH_MAX (sizeof("/proc/self/fd/") + 12)
#define FORMAT_PROC_FD_PATH(fd) format_proc_fd_path((char[PROC_FD_PATH_MAX]){}, (fd))
char *format_proc_fd_path(char buf[static PROC_FD_PATH_MAX], int fd);

/* Send and receive a message plus up to 'n_fds' file descriptors over a SOCK_SEQPACKET socket. */
int send_with_fds(int sock, const void *data, size_t size, const int *fds, size_t n_fds);
/* Receives into a freshly allocated, NUL-terminated buffer; fds received get O_CLOEXEC. */
int recv_with_fds(int sock, char **ret_data, int *fds, size_t max_fds, size_t *ret_n_fds);

/* openat2() with the given RESOLVE_* flags.  Where openat2() is not allowed (seccomp filters
 * that cannot inspect its arguments answer ENOSYS or EPERM), falls back to a walk of the path
 * one component at a time with O_NOFOLLOW that refuses "..", absolute paths and every
 * symlink: never less strict than the flags asked for. */
int openat_resolve(int dir_fd, const char *path, int flags, uint64_t resolve);
/* The fallback itself. */
int openat_walk(int dir_fd, const char *path, int flags);

/* Opens what an O_PATH fd refers to anew, with flags (through /proc/self/fd). */
int fd_reopen(int fd, int flags);

/* The path of what fd refers to, as /proc/self/fd shows it (allocated), or NULL. */
char *path_of_fd(int fd);

/* The PID of the process a pidfd refers to (pidfd_open(2)), as this process's PID namespace
 * sees it, from the "Pid:" line of /proc/self/fdinfo/FD.  -EBADF: fd is not a pidfd; -ESRCH:
 * the process has exited (Pid: -1); -EREMOTE: it is in a PID namespace this one does not see
 * (Pid: 0).  While the process lives, its PID is not reused: a caller that checks again after
 * using the PID knows it still meant that process. */
int pidfd_get_pid(int fd, pid_t *ret);

/* Closes fds on a thread of its own, for the last reference of something whose end waits (a
 * mount tree's: its file systems' ends, RCU grace periods) that the caller need not wait for.
 * Takes the fds (negative entries are skipped); without a thread (or the memory to list them)
 * they are closed at once.  fd_release_finish() waits for the thread (a no-op when none was
 * started): before the process forks a child that could get copies of those fds, and before
 * the process ends.  A second start waits for the first (layers_release_start() instead leaves
 * a second list with its images). */
/* Starts fn(arg) on a new thread with every signal blocked (signals stay the caller's);
 * false when no thread could be made.  _on(): allowed on cpus only (NULL: the caller's CPUs),
 * set before it runs. */
bool thread_start_masked(pthread_t *ret, void *(*fn)(void *), void *arg);
bool thread_start_masked_on(pthread_t *ret, void *(*fn)(void *), void *arg, const cpu_set_t *cpus);
/* Joins a thread started elsewhere (_on()), letting what is left of its work use the caller's
 * CPUs meanwhile. */
void thread_join_here(pthread_t thread);

typedef struct FdRelease {
        int *fds;
        size_t n;
        bool started;
        pthread_t thread;
} FdRelease;
void fd_release_start(FdRelease *rel, const int *fds, size_t n);
void fd_release_finish(FdRelease *rel);

