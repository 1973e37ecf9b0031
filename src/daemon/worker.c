/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "fd-util.h"
#include "fileio.h"
#include "json-util.h"
#ifdef SYSEXTD_TEST_HOOKS
#include "testhook.h"
#endif
#include "util.h"
#include "worker.h"

static int document_to_memfd(json_object *doc) {
        _cleanup_close_ int fd = -EBADF;
        const char *s = json_object_to_json_string_ext(doc, JSON_C_TO_STRING_PLAIN);
        size_t len;

        if (!s)
                return -ENOMEM;
        len = strlen(s);
        fd = memfd_create("sysextd-result", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (fd < 0)
                return negative_errno();
        while (len > 0) {
                ssize_t k = write(fd, s, len);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return negative_errno();
                }
                s += k;
                len -= k;
        }
        if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0 ||
            lseek(fd, 0, SEEK_SET) < 0)
                return negative_errno();
        return TAKE_FD(fd);
}

static int send_document(int sock, const char *kind, json_object *doc) {
        _cleanup_close_ int memfd = document_to_memfd(doc);

        if (memfd < 0)
                return memfd;
        return send_with_fds(sock, kind, strlen(kind), &memfd, 1);
}

static _noreturn_ void worker_child(int sock, WorkerFunction f, WorkerHandover h, void *userdata) {
        json_object *doc = json_object_new_object();
        _cleanup_free_ int *fds = NULL;
        size_t n_fds = 0;
        int r;

        r = f(userdata, doc);
        if (!json_object_object_get_ex(doc, "r", NULL))
                json_object_object_add(doc, "r", json_object_new_int(r));
        if (send_document(sock, "doc", doc) < 0)
                _exit(2);
        if (h) {
                json_object *handover = json_object_new_object();

                /* The daemon, woken by the result, mostly waits on this CPU behind this process
                 * (0.25 ms of the handover here): it answers first. */
                (void) sched_yield();
#ifdef SYSEXTD_TEST_HOOKS
                testhook_point("worker-handover", 0);
#endif
                /* The callers may hear the result meanwhile: a failure here costs the daemon
                 * only what it would have kept. */
                if (h(userdata, handover, &fds, &n_fds) < 0 || send_document(sock, "handover", handover) < 0)
                        _exit(2);
                for (size_t i = 0; i < n_fds; i += WORKER_FDS_PER_MESSAGE)
                        if (send_with_fds(sock, "fds", 3, fds + i, MIN(WORKER_FDS_PER_MESSAGE, n_fds - i)) < 0)
                                _exit(2);
        }
        /* The end of the report now: the daemon finishes the job without waiting for this
         * process to give its memory back (exit closes files only after that). */
        safe_close(sock);
#ifdef SYSEXTD_TEST_HOOKS
        testhook_point("worker-exit", 0);
#endif
        _exit(0);
}

int worker_start(WorkerFunction f, WorkerHandover h, void *userdata, pid_t *ret_pid, int *ret_fd) {
        int pair[2];
        pid_t pid;

        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) < 0)
                return negative_errno();
        pid = fork();
        if (pid < 0) {
                int r = negative_errno();
                safe_close(pair[0]);
                safe_close(pair[1]);
                return r;
        }
        if (pid == 0) {
                sigset_t ss;

                safe_close(pair[0]);
                (void) prctl(PR_SET_PDEATHSIG, SIGKILL);
                /* A transition runs to its end: the daemon, not a signal to the whole control
                 * group (systemctl stop), decides when a job may be cut short. */
                (void) signal(SIGTERM, SIG_IGN);
                (void) signal(SIGINT, SIG_IGN);
                (void) signal(SIGPIPE, SIG_IGN);
                sigemptyset(&ss);
                (void) sigprocmask(SIG_SETMASK, &ss, NULL);
                worker_child(pair[1], f, h, userdata);
        }
        safe_close(pair[1]);
        (void) fcntl(pair[0], F_SETFL, O_NONBLOCK);
        *ret_pid = pid;
        *ret_fd = pair[0];
        return 0;
}

void worker_report_done(WorkerReport *r) {
        if (r->doc)
                json_object_put(r->doc);
        if (r->handover)
                json_object_put(r->handover);
        for (size_t i = 0; i < r->n_fds; i++)
                safe_close(r->fds[i]);
        free(r->fds);
        *r = (WorkerReport) {};
}

static int read_document(int memfd, json_object **ret) {
        _cleanup_free_ char *text = NULL;
        json_object *o;
        int seals, r;

        /* Only a sealed memfd: nobody can change it while it is read. */
        seals = fcntl(memfd, F_GET_SEALS);
        if (seals < 0 || (seals & (F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW)) != (F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW))
                return -EBADMSG;
        r = read_fd_full(memfd, WORKER_DOCUMENT_MAX, &text, NULL);
        if (r < 0)
                return r;
        o = json_parse_object(text);
        if (!o)
                return -EBADMSG;
        *ret = o;
        return 0;
}

int worker_read(int fd, WorkerReport *rep) {
        for (;;) {
                int fds[WORKER_FDS_PER_MESSAGE];
                _cleanup_free_ char *data = NULL;
                size_t n = 0;
                int r;

                r = recv_with_fds(fd, &data, fds, ELEMENTSOF(fds), &n);
                if (r == -EAGAIN)
                        return 0;
                if (r == -EINTR)
                        continue;
                if (r == -ECONNRESET) {
                        rep->eof = true;
                        return 1;
                }
                if (r < 0)
                        return r;
                if (!rep->doc || (!rep->handover && streq(data, "handover"))) {
                        bool result = !rep->doc;

                        if (n != 1 || !streq(data, rep->doc ? "handover" : "doc")) {
                                for (size_t i = 0; i < n; i++)
                                        safe_close(fds[i]);
                                return -EBADMSG;
                        }
                        r = read_document(fds[0], rep->doc ? &rep->handover : &rep->doc);
                        safe_close(fds[0]);
                        if (r < 0)
                                return r;
                        /* The result: back to the caller, who answers with it before the
                         * handover that follows is read (the socket stays readable). */
                        if (result)
                                return 0;
                        continue;
                }
                /* Fds only after the handover's description, which says what they are. */
                if (!rep->handover || !streq(data, "fds")) {
                        for (size_t i = 0; i < n; i++)
                                safe_close(fds[i]);
                        return -EBADMSG;
                }
                {
                        int *m = realloc(rep->fds, sizeof(int) * (rep->n_fds + n));
                        if (!m) {
                                for (size_t i = 0; i < n; i++)
                                        safe_close(fds[i]);
                                return -ENOMEM;
                        }
                        rep->fds = m;
                        memcpy(rep->fds + rep->n_fds, fds, sizeof(int) * n);
                        rep->n_fds += n;
                }
        }
}
