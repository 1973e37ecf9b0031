/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Worker processes: the daemon forks one per job so that the bus loop never does mount work.
 * Nothing here knows of the bus.
 *
 * Protocol, over a SOCK_SEQPACKET socket pair, child to parent:
 *   1. "doc", carrying one fd: a sealed memfd with the result document (JSON), so the
 *      document's size is bounded by memory, not by the socket buffer;
 *   2. only from a worker with a handover, once the result went out: "handover", a sealed
 *      memfd with the handover document, then "fds" messages carrying fds only,
 *      WORKER_FDS_PER_MESSAGE at a time (the image mounts a transition hands over), in the
 *      order that document lists them;
 *   3. EOF.
 * The result comes first so that the daemon can answer its callers while the worker still
 * describes and sends what it hands over.
 * A worker ignores SIGTERM (the daemon decides when a job may be cut short) and dies with its
 * parent. */

#define WORKER_FDS_PER_MESSAGE 64
#define WORKER_DOCUMENT_MAX (256 * 1024 * 1024)

/* Runs in the child: fills the result document; returns the result. */
typedef int (*WorkerFunction)(void *userdata, json_object *doc);
/* Runs in the child after the result was sent: fills the handover document and the fds to
 * hand over. */
typedef int (*WorkerHandover)(void *userdata, json_object *doc, int **fds, size_t *n_fds);

/* Forks a worker running f, then h unless NULL; *ret_fd is the parent's non-blocking end of
 * the socket. */
int worker_start(WorkerFunction f, WorkerHandover h, void *userdata, pid_t *ret_pid, int *ret_fd);

typedef struct WorkerReport {
        json_object *doc;      /* the result */
        json_object *handover; /* what followed it, if anything */
        int *fds;
        size_t n_fds;
        bool eof;
} WorkerReport;

void worker_report_done(WorkerReport *r);

/* Reads what has arrived; returns 1 once the worker closed its end (the report is complete),
 * 0 when more is to come (the result may be there already: it returns right after reading it,
 * so that its callers can be answered before the handover is read), < 0 on a protocol error. */
int worker_read(int fd, WorkerReport *r);
