/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <linux/openat2.h>
#include <sched.h>
#include <stdlib.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fd-util.h"
#include "missing.h"
#include "tests.h"
#include "util.h"

/* pidfd_get_pid(): the PID of a live process, "exited" once it is reaped, and no PID from an
 * fd that is not a pidfd (a pipe, /proc/PID itself). */
static void test_pidfd_get_pid(void) {
        _cleanup_close_ int self = sys_pidfd_open(getpid(), 0), proc = -EBADF, child_fd = -EBADF;
        int pipe_fds[2];
        pid_t pid = 0, child;

        if (self < 0) {
                printf("# pidfd_open() is not available here (%s): pidfd_get_pid() not tested\n", strerror(errno));
                return;
        }
        CHECK(pidfd_get_pid(self, &pid) == 0);
        CHECK(pid == getpid());

        CHECK(pipe2(pipe_fds, O_CLOEXEC) == 0);
        CHECK(pidfd_get_pid(pipe_fds[0], &pid) == -EBADF);
        safe_close(pipe_fds[0]);
        safe_close(pipe_fds[1]);
        proc = open("/proc/self", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        CHECK(proc >= 0 && pidfd_get_pid(proc, &pid) == -EBADF);
        CHECK(pidfd_get_pid(-EBADF, &pid) == -EBADF);

        fflush(stdout);
        child = fork();
        if (child == 0) {
                pause();
                _exit(0);
        }
        CHECK(child > 0);
        if (child < 0)
                return; /* (nothing to kill: never kill(-1)) */
        child_fd = sys_pidfd_open(child, 0);
        CHECK(child_fd >= 0 && pidfd_get_pid(child_fd, &pid) == 0 && pid == child);
        (void) kill(child, SIGKILL);
        (void) waitpid(child, NULL, 0);
        CHECK(pidfd_get_pid(child_fd, &pid) == -ESRCH);
}

/* cpu_nudge_away() moves a child off the caller's CPU (only when another is allowed),
 * cpu_nudge_back() gives it the caller's mask again; one CPU allowed: nothing changes. */
static void test_cpu_nudge(void) {
        cpu_set_t mine, child_mask, one, both;
        int status, before, after, gone = -1;
        pid_t child;

        CHECK(sched_getaffinity(0, sizeof(mine), &mine) == 0);
        child = fork();
        CHECK(child >= 0);
        if (child < 0)
                return; /* (nothing to kill: never kill(-1)) */
        if (child == 0) {
                pause();
                _exit(0);
        }
        before = sched_getcpu();
        cpu_nudge_away(child);
        after = sched_getcpu();
        CHECK(sched_getaffinity(child, sizeof(child_mask), &child_mask) == 0);
        if (CPU_COUNT(&mine) >= 2) {
                /* Exactly one of this process's CPUs taken away: the one it ran on then (it may
                 * have moved in between: the one before or the one after). */
                CPU_AND(&both, &child_mask, &mine);
                CHECK(CPU_EQUAL(&both, &child_mask) && CPU_COUNT(&child_mask) == CPU_COUNT(&mine) - 1);
                for (int i = 0; i < CPU_SETSIZE; i++)
                        if (CPU_ISSET(i, &mine) && !CPU_ISSET(i, &child_mask))
                                gone = i;
                CHECK(gone >= 0 && (gone == before || gone == after));
                CHECK(cpu_mask_elsewhere(&one));
        } else {
                CHECK(CPU_EQUAL(&child_mask, &mine));
                CHECK(!cpu_mask_elsewhere(&one));
        }
        cpu_nudge_back(child);
        CHECK(sched_getaffinity(child, sizeof(child_mask), &child_mask) == 0);
        CHECK(CPU_EQUAL(&child_mask, &mine));

        /* One CPU allowed: nowhere else to go. */
        CPU_ZERO(&one);
        CPU_SET(sched_getcpu(), &one);
        CHECK(sched_setaffinity(0, sizeof(one), &one) == 0);
        cpu_nudge_away(child);
        CHECK(sched_getaffinity(child, sizeof(child_mask), &child_mask) == 0);
        CHECK(CPU_EQUAL(&child_mask, &mine));
        CHECK(sched_setaffinity(0, sizeof(mine), &mine) == 0);

        (void) kill(child, SIGKILL);
        CHECK(waitpid(child, &status, 0) == child);
}

typedef struct SeenMask {
        cpu_set_t mask;
        sigset_t blocked;
        int r;
} SeenMask;

static void *record_mask(void *userdata) {
        SeenMask *m = userdata;

        m->r = sched_getaffinity(0, sizeof(m->mask), &m->mask);
        (void) pthread_sigmask(SIG_BLOCK, NULL, &m->blocked);
        return NULL;
}

/* thread_start_masked_on(): the thread runs on the CPUs given from its first instruction, with
 * every signal blocked, and the caller's own mask is left alone, also when the thread ended
 * before the caller went on (the earlier pattern, pthread_setaffinity_np() after the start, set
 * the caller's mask then: glibc passes the ended thread's kernel id, 0); NULL: the caller's. */
static void test_thread_start_on(void) {
        cpu_set_t mine, elsewhere, now;
        SeenMask seen;
        pthread_t t;

        CHECK(sched_getaffinity(0, sizeof(mine), &mine) == 0);
        for (int round = 0; round < 50; round++) {
                bool other = cpu_mask_elsewhere(&elsewhere);

                seen = (SeenMask) { .r = -1 };
                CHECK(thread_start_masked_on(&t, record_mask, &seen, other ? &elsewhere : NULL));
                CHECK(pthread_join(t, NULL) == 0);
                CHECK(seen.r == 0);
                CHECK(CPU_EQUAL(&seen.mask, other ? &elsewhere : &mine));
                CHECK(sigismember(&seen.blocked, SIGTERM) == 1 && sigismember(&seen.blocked, SIGCHLD) == 1);
                CHECK(sched_getaffinity(0, sizeof(now), &now) == 0 && CPU_EQUAL(&now, &mine));
        }
        seen = (SeenMask) { .r = -1 };
        CHECK(thread_start_masked(&t, record_mask, &seen));
        CHECK(pthread_join(t, NULL) == 0);
        CHECK(seen.r == 0 && CPU_EQUAL(&seen.mask, &mine));
}

/* fd_release_start(): every fd given is closed by fd_release_finish() (on the thread); negative
 * entries are skipped; nothing to close starts no thread. */
static void test_fd_release(void) {
        FdRelease rel = {};
        int fds[20], p[2];
        bool all_closed = true;

        for (size_t i = 0; i < ELEMENTSOF(fds); i++)
                fds[i] = -EBADF;
        for (size_t i = 0; i < ELEMENTSOF(fds); i += 2) {
                CHECK(pipe2(p, O_CLOEXEC) == 0);
                fds[i] = p[0];
                fds[i + 1] = p[1];
        }
        /* A negative entry among them; its fd is closed here. */
        safe_close(fds[3]);
        fds[3] = -EBADF;
        fd_release_start(&rel, fds, ELEMENTSOF(fds));
        CHECK(rel.n == ELEMENTSOF(fds) - 1);
        fd_release_finish(&rel);
        for (size_t i = 0; i < ELEMENTSOF(fds); i++)
                if (fds[i] >= 0 && fcntl(fds[i], F_GETFD) >= 0)
                        all_closed = false;
        CHECK(all_closed);
        CHECK(!rel.started && rel.n == 0);
        /* Nothing to close: no thread. */
        fd_release_start(&rel, (int[]) { -EBADF, -EBADF }, 2);
        CHECK(!rel.started);
        fd_release_finish(&rel);
        fd_release_finish(&rel);
}

/* openat_walk() is what runs where seccomp refuses openat2(): it must never be less strict
 * than RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS. */
int main(void) {
        test_fd_release();
        char tmpl[] = "/tmp/sysextd-unit.XXXXXX";
        char *dir = mkdtemp(tmpl);
        _cleanup_close_ int dfd = -EBADF;
        int fd;

        if (!dir)
                return 1;
        test_pidfd_get_pid();
        test_cpu_nudge();
        test_thread_start_on();
        dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0 || mkdirat(dfd, "a", 0755) < 0 || mkdirat(dfd, "a/b", 0755) < 0)
                return 1;
        fd = openat(dfd, "a/b/file", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0 || write(fd, "x", 1) != 1)
                return 1;
        close(fd);
        if (symlinkat("b", dfd, "a/link") < 0 || symlinkat("/etc/passwd", dfd, "a/abs") < 0)
                return 1;

        fd = openat_walk(dfd, "a/b/file", O_RDONLY);
        CHECK(fd >= 0);
        safe_close(fd);
        fd = openat_walk(dfd, "a//b/file", O_RDONLY);
        CHECK(fd >= 0);
        safe_close(fd);
        CHECK(openat_walk(dfd, "a/link/file", O_RDONLY) == -ELOOP);
        CHECK(openat_walk(dfd, "a/abs", O_RDONLY) == -ELOOP);
        CHECK(openat_walk(dfd, "a/../a/b/file", O_RDONLY) == -EXDEV);
        CHECK(openat_walk(dfd, "/etc/passwd", O_RDONLY) == -EXDEV);
        CHECK(openat_walk(dfd, "a/missing", O_RDONLY) == -ENOENT);

        /* The openat2() path agrees where both apply. */
        fd = openat_resolve(dfd, "a/b/file", O_RDONLY, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS);
        CHECK(fd >= 0);
        safe_close(fd);
        CHECK(openat_resolve(dfd, "a/link/file", O_RDONLY, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS) == -ELOOP);
        CHECK(openat_resolve(dfd, "a/../../etc/passwd", O_RDONLY, RESOLVE_BENEATH) == -EXDEV);

        (void) unlinkat(dfd, "a/b/file", 0);
        (void) unlinkat(dfd, "a/link", 0);
        (void) unlinkat(dfd, "a/abs", 0);
        (void) unlinkat(dfd, "a/b", AT_REMOVEDIR);
        (void) unlinkat(dfd, "a", AT_REMOVEDIR);
        (void) rmdir(dir);
        return tap_finish();
}
