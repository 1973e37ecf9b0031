/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <linux/openat2.h>
#include <signal.h>
#include <sys/syscall.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "fd-util.h"
#include "missing.h"

static bool proc_in_cwd = false;

const char *proc_prefix(void) {
        return proc_in_cwd ? "" : "/proc/";
}

void proc_prefix_use_cwd(void) {
        proc_in_cwd = true;
}

char *format_proc_fd_path(char buf[static PROC_FD_PATH_MAX], int fd) {
        snprintf(buf, PROC_FD_PATH_MAX, "%sself/fd/%i", proc_prefix(), fd);
        return buf;
}

#define MAX_FDS 64

int send_with_fds(int sock, const void *data, size_t size, const int *fds, size_t n_fds) {
        union {
                struct cmsghdr cmsghdr;
                uint8_t buf[CMSG_SPACE(sizeof(int) * MAX_FDS)];
        } control = {};
        struct iovec iov = { .iov_base = (void *) data, .iov_len = size };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

        if (n_fds > MAX_FDS)
                return -E2BIG;
        if (n_fds > 0) {
                struct cmsghdr *c;

                mh.msg_control = &control;
                mh.msg_controllen = CMSG_SPACE(sizeof(int) * n_fds);
                c = CMSG_FIRSTHDR(&mh);
                c->cmsg_level = SOL_SOCKET;
                c->cmsg_type = SCM_RIGHTS;
                c->cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
                memcpy(CMSG_DATA(c), fds, sizeof(int) * n_fds);
        }
        if (sendmsg(sock, &mh, MSG_NOSIGNAL) < 0)
                return negative_errno();
        return 0;
}

int recv_with_fds(int sock, char **ret_data, int *fds, size_t max_fds, size_t *ret_n_fds) {
        union {
                struct cmsghdr cmsghdr;
                uint8_t buf[CMSG_SPACE(sizeof(int) * MAX_FDS)];
        } control = {};
        _cleanup_free_ char *buf = NULL;
        struct iovec iov;
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = &control,
                             .msg_controllen = sizeof(control) };
        size_t n = 0;
        ssize_t k;

        /* SOCK_SEQPACKET keeps message boundaries; peek for the size first. */
        k = recv(sock, NULL, 0, MSG_PEEK | MSG_TRUNC);
        if (k < 0)
                return negative_errno();
        buf = malloc(k + 1);
        if (!buf)
                return -ENOMEM;
        iov = (struct iovec) { .iov_base = buf, .iov_len = k };
        k = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
        if (k < 0)
                return negative_errno();
        buf[k] = 0;

        for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
                size_t m;

                if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
                        continue;
                m = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                for (size_t i = 0; i < m; i++) {
                        int fd;
                        memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
                        if (n < max_fds)
                                fds[n++] = fd;
                        else
                                safe_close(fd);
                }
        }
        if (k == 0 && n == 0)
                return -ECONNRESET;
        *ret_n_fds = n;
        *ret_data = TAKE_PTR(buf);
        return 0;
}

int fd_reopen(int fd, int flags) {
        int r = open(FORMAT_PROC_FD_PATH(fd), flags | O_CLOEXEC);
        return r < 0 ? negative_errno() : r;
}

int openat_walk(int dir_fd, const char *path, int flags) {
        _cleanup_free_ char *copy = strdup(path);
        _cleanup_close_ int cur = -EBADF;
        char *saveptr = NULL, *comp, *next;
        int fd;

        if (!copy)
                return -ENOMEM;
        if (path[0] == '/')
                return -EXDEV;
        comp = strtok_r(copy, "/", &saveptr);
        if (!comp)
                return -EINVAL;
        for (;;) {
                if (streq(comp, ".."))
                        return -EXDEV;
                next = strtok_r(NULL, "/", &saveptr);
                if (!next)
                        break;
                fd = openat(cur >= 0 ? cur : dir_fd, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0)
                        return errno == ENOTDIR ? -ELOOP : negative_errno();
                safe_close(cur);
                cur = fd;
                comp = next;
        }
        fd = openat(cur >= 0 ? cur : dir_fd, comp, flags | O_NOFOLLOW | O_CLOEXEC);
        return fd < 0 ? negative_errno() : fd;
}

int openat_resolve(int dir_fd, const char *path, int flags, uint64_t resolve) {
        struct open_how how = { .flags = (uint64_t) (flags | O_CLOEXEC), .resolve = resolve };
        int fd;

        fd = syscall(SYS_openat2, dir_fd, path, &how, sizeof(how));
        if (fd >= 0)
                return fd;
        if (errno != ENOSYS && errno != EPERM)
                return negative_errno();
        return openat_walk(dir_fd, path, flags);
}

char *path_of_fd(int fd) {
        char target[PATH_MAX];
        ssize_t n = readlink(FORMAT_PROC_FD_PATH(fd), target, sizeof(target) - 1);

        if (n < 0 || n >= (ssize_t) sizeof(target) - 1)
                return NULL;
        target[n] = 0;
        return strdup(target);
}

int pidfd_get_pid(int fd, pid_t *ret) {
        _cleanup_free_ char *what = NULL;
        _cleanup_close_ int info = -EBADF;
        char path[sizeof("/proc/self/fdinfo/") + 12], buf[4096];
        const char *line;
        ssize_t n;
        long pid;
        char *end;

        if (fd < 0)
                return -EBADF;
        /* A pidfd shows as this on every kernel that has them, pidfs (6.9) included; an fd
         * of /proc/PID, which some pidfd calls also take, does not. */
        what = path_of_fd(fd);
        if (!what)
                return errno == ENOENT ? -EBADF : -errno;
        if (!streq(what, "anon_inode:[pidfd]"))
                return -EBADF;

        snprintf(path, sizeof(path), "%sself/fdinfo/%i", proc_prefix(), fd);
        info = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (info < 0)
                return negative_errno();
        do
                n = read(info, buf, sizeof(buf) - 1);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return negative_errno();
        buf[n] = 0;
        for (line = buf; line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL)
                if (strncmp(line, "Pid:", strlen("Pid:")) == 0)
                        break;
        if (!line)
                return -EBADF;
        errno = 0;
        pid = strtol(line + strlen("Pid:"), &end, 10);
        if (errno != 0 || end == line + strlen("Pid:") || (*end != '\n' && *end != 0) || pid < -1 || pid > INT32_MAX)
                return -EBADMSG;
        if (pid == -1)
                return -ESRCH;
        if (pid == 0)
                return -EREMOTE;
        *ret = (pid_t) pid;
        return 0;
}

bool thread_start_masked_on(pthread_t *ret, void *(*fn)(void *), void *arg, const cpu_set_t *cpus) {
        pthread_attr_t attr;
        sigset_t all, saved;
        bool started = false;

        if (pthread_attr_init(&attr) != 0)
                return false;
        /* Set before the thread runs: pthread_setaffinity_np() on a thread that already ended
         * would set the caller's own (glibc passes the thread's kernel id, 0 once it exited). */
        if (cpus)
                (void) pthread_attr_setaffinity_np(&attr, sizeof(*cpus), cpus);
        if (sigfillset(&all) == 0 && pthread_sigmask(SIG_BLOCK, &all, &saved) == 0) {
                started = pthread_create(ret, &attr, fn, arg) == 0;
                (void) pthread_sigmask(SIG_SETMASK, &saved, NULL);
        }
        (void) pthread_attr_destroy(&attr);
        return started;
}

bool thread_start_masked(pthread_t *ret, void *(*fn)(void *), void *arg) {
        return thread_start_masked_on(ret, fn, arg, NULL);
}

void thread_join_here(pthread_t thread) {
        cpu_set_t mask;

        /* Once it ended, the call sets this thread's own mask, to what it is. */
        if (sched_getaffinity(0, sizeof(mask), &mask) >= 0)
                (void) pthread_setaffinity_np(thread, sizeof(mask), &mask);
        (void) pthread_join(thread, NULL);
}

static void *release_work(void *userdata) {
        FdRelease *rel = userdata;

        for (size_t i = 0; i < rel->n; i++)
                rel->fds[i] = safe_close(rel->fds[i]);
        return NULL;
}

void fd_release_start(FdRelease *rel, const int *fds, size_t n) {
        size_t m = 0;

        fd_release_finish(rel);
        for (size_t i = 0; i < n; i++)
                m += fds[i] >= 0;
        if (m == 0)
                return;
        rel->fds = malloc(sizeof(int) * m);
        if (!rel->fds) {
                for (size_t i = 0; i < n; i++)
                        safe_close(fds[i]);
                return;
        }
        for (size_t i = 0; i < n; i++)
                if (fds[i] >= 0)
                        rel->fds[rel->n++] = fds[i];
        rel->started = thread_start_masked(&rel->thread, release_work, rel);
        if (!rel->started)
                (void) release_work(rel);
}

void fd_release_finish(FdRelease *rel) {
        if (rel->started)
                (void) pthread_join(rel->thread, NULL);
        free(rel->fds);
        *rel = (FdRelease) {};
}
