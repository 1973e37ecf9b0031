/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The daemon: org.sysextd1 on the system bus.
 *
 * The bus loop never does mount work.  Merge, Refresh and Unmerge become jobs that run the
 * engine in a forked worker process; jobs are queued and run one at a time in arrival order
 * (the engine's lock also serialises them against `sysextd --no-bus` and the boot unit).
 * ListImages, which attaches and mounts images to read them, runs in a worker of its own
 * beside the queue.  GetStatus and the properties read the journal and the mount table in
 * the bus process: they answer while a transition runs.
 *
 * A worker reports through a socket: one JSON document with its result and the messages the
 * engine logged, then, after a transition, the fds of the image mounts that went into the
 * new tree.  The daemon keeps those as its image cache: the next transition reuses the mount
 * of every image that did not change, so a refresh costs in proportion to what changed.
 * An sd-event io source reads, an sd-event child source reaps.  The job
 * finishes when both have fired.  A worker that dies without a result fails its job with a
 * message that says so; the engine's journal takes care of the tree at the next job.
 */
#include <assert.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-event.h>

#include "bus-api.h"
#include "daemon.h"
#include "fd-util.h"
#include "overlay.h"
#include "verity.h"
#include "log.h"
#include "mounts.h"
#include "swap.h"
#include "util.h"

#define WORKER_FDS_PER_MESSAGE 64

typedef enum JobType {
        JOB_TRANSITION,
        JOB_LIST,
} JobType;

typedef struct Manager Manager;

typedef struct Job {
        Manager *manager;
        JobType type;
        EngineVerb verb;
        EngineOptions options;
        sd_bus_message *request;

        pid_t pid;
        int fd;
        sd_event_source *io_source, *child_source;
        char *output;
        bool eof, exited;
        ImageList received; /* the next cache, as the worker reports it */
        size_t received_fds;
        int status;

        struct Job *next;
} Job;

struct Manager {
        sd_event *event;
        sd_bus *bus;
        sd_bus_slot *vtable_slot;
        Engine *engine; /* read-only use in the bus process: status and properties */
        DaemonConfig dconfig;

        Job *queue; /* transitions; the head runs */
        Job *lists; /* running ListImages workers */
        sd_event_source *idle_timer;
        uint64_t generation;

        /* Image mounts kept between transitions (see Engine.cache): the images merged now.
         * Replaced after every successful transition, from what its worker sends back. */
        ImageList cache;
};

static const char *verb_name(EngineVerb v) {
        return v == ENGINE_MERGE ? "merge" : v == ENGINE_REFRESH ? "refresh" : "unmerge";
}

static const char *error_name(EngineError kind) {
        switch (kind) {
        case ENGINE_ERROR_NO_IMAGES:
                return SYSEXTD_ERROR_NO_IMAGES;
        case ENGINE_ERROR_ALREADY_MERGED:
                return SYSEXTD_ERROR_ALREADY_MERGED;
        case ENGINE_ERROR_IMAGE_REFUSED:
                return SYSEXTD_ERROR_IMAGE_REFUSED;
        case ENGINE_ERROR_KERNEL_REFUSED:
                return SYSEXTD_ERROR_KERNEL_REFUSED;
        case ENGINE_ERROR_FOREIGN_MOUNT:
                return SYSEXTD_ERROR_FOREIGN_MOUNT;
        case ENGINE_ERROR_BUSY:
                return SYSEXTD_ERROR_BUSY;
        default:
                return SYSEXTD_ERROR_FAILED;
        }
}

static void job_free(Job *j) {
        if (!j)
                return;
        sd_event_source_disable_unref(j->io_source);
        sd_event_source_disable_unref(j->child_source);
        if (j->pid > 0 && !j->exited) {
                (void) kill(j->pid, SIGKILL);
                (void) waitpid(j->pid, NULL, 0);
        }
        safe_close(j->fd);
        sd_bus_message_unref(j->request);
        free(j->output);
        image_list_free(&j->received);
        free(j);
}

static void manager_update_idle(Manager *m);
static int manager_start_next(Manager *m);

/* ---- worker side (runs in the forked child) ---------------------------------------- */

typedef struct Collected {
        json_object *messages;
} Collected;

static void collect(int level, const char *message, void *userdata) {
        Collected *c = userdata;
        json_object *e = json_object_new_array();

        json_object_array_add(e, json_object_new_int(level));
        json_object_array_add(e, json_object_new_string(message));
        json_object_array_add(c->messages, e);
}

static _noreturn_ void worker_main(Manager *m, Job *j, int fd) {
        Collected c = { .messages = json_object_new_array() };
        json_object *o = json_object_new_object();
        int fds[OVERLAY_LAYERS_MAX];
        size_t n_fds = 0;
        int sndbuf = 16 * 1024 * 1024;
        const char *s;
        sigset_t ss;
        int r;

        sigemptyset(&ss);
        (void) sigprocmask(SIG_SETMASK, &ss, NULL);
        log_set_sink(collect, &c);
        m->engine->cache = &m->cache;
        /* One message carries the whole result document: make room for a large one. */
        (void) setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sndbuf, sizeof(sndbuf));

        if (j->type == JOB_TRANSITION) {
                _cleanup_journal_ Journal journal = {};

                r = engine_transition(m->engine, j->verb, &j->options);
                json_object_object_add(o, "changed", json_object_new_boolean(r > 0));
                if (journal_load(m->engine->root_fd, &journal) >= 0)
                        json_object_object_add(o, "generation", json_object_new_uint64(journal.generation));
        } else {
                _cleanup_image_list_ ImageList l = {};
                json_object *a = json_object_new_array();

                r = engine_list(m->engine, &l);
                for (size_t i = 0; r >= 0 && i < l.n; i++) {
                        json_object *e = json_object_new_array();
                        json_object_array_add(e, json_object_new_string(l.images[i].name));
                        json_object_array_add(e, json_object_new_string(image_kind_to_string(l.images[i].kind)));
                        json_object_array_add(e, json_object_new_string(l.images[i].path));
                        json_object_array_add(e, json_object_new_string(image_verdict_to_string(l.images[i].verdict)));
                        json_object_array_add(e, json_object_new_string(l.images[i].reason ?: ""));
                        json_object_array_add(e, json_object_new_string(verity_mode_to_string(l.images[i].verity)));
                        json_object_array_add(e, json_object_new_boolean(l.images[i].signed_valid));
                        json_object_array_add(a, e);
                }
                json_object_object_add(o, "images", a);
        }
        json_object_object_add(o, "r", json_object_new_int(r));
        json_object_object_add(o, "kind", json_object_new_int(m->engine->error_kind));
        json_object_object_add(o, "error", json_object_new_string(m->engine->error ?: ""));
        json_object_object_add(o, "messages", c.messages);

        /* The images that went into the new tree, with their mounts, become the daemon's
         * cache: describe them in the document, send their fds after it. */
        if (j->type == JOB_TRANSITION && r >= 0 && m->engine->probed_valid) {
                json_object *a = json_object_new_array();

                for (size_t i = 0; i < m->engine->probed.n; i++) {
                        const Image *img = &m->engine->probed.images[i];
                        json_object *e;

                        if (img->root_fd < 0 || n_fds >= ELEMENTSOF(fds))
                                continue;
                        e = json_object_new_object();
                        json_object_object_add(e, "name", json_object_new_string(img->name));
                        json_object_object_add(e, "path", json_object_new_string(img->path));
                        json_object_object_add(e, "kind", json_object_new_int(img->kind));
                        json_object_object_add(e, "hierarchies", json_object_new_int64(img->hierarchies));
                        json_object_object_add(e, "dev", json_object_new_uint64(img->st.st_dev));
                        json_object_object_add(e, "ino", json_object_new_uint64(img->st.st_ino));
                        json_object_object_add(e, "size", json_object_new_int64(img->st.st_size));
                        json_object_object_add(e, "mtime_sec", json_object_new_int64(img->st.st_mtim.tv_sec));
                        json_object_object_add(e, "mtime_nsec", json_object_new_int64(img->st.st_mtim.tv_nsec));
                        json_object_object_add(e, "stamp", json_object_new_uint64(img->stamp));
                        json_object_object_add(e, "judged_by", json_object_new_uint64(img->judged_by));
                        json_object_object_add(e, "verity", json_object_new_int(img->verity));
                        json_object_object_add(e, "signed", json_object_new_boolean(img->signed_valid));
                        json_object_object_add(e, "usr_partition", json_object_new_boolean(img->usr_partition));
                        json_object_array_add(a, e);
                        fds[n_fds++] = img->root_fd;
                }
                json_object_object_add(o, "cache", a);
        }

        s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
        if (send_with_fds(fd, s, strlen(s), NULL, 0) < 0)
                _exit(2);
        for (size_t i = 0; i < n_fds; i += WORKER_FDS_PER_MESSAGE)
                if (send_with_fds(fd, "fds", 3, fds + i, MIN(WORKER_FDS_PER_MESSAGE, n_fds - i)) < 0)
                        _exit(2);
        _exit(0);
}

/* ---- bus side ------------------------------------------------------------------------ */

/* A failed job: the engine's classification and message become the named error. */
static int reply_failure(Job *j, json_object *o, const char *fallback) {
        json_object *v;
        const char *text = json_object_object_get_ex(o, "error", &v) ? json_object_get_string(v) : "";
        int kind = json_object_object_get_ex(o, "kind", &v) ? json_object_get_int(v) : ENGINE_ERROR_FAILED;

        return sd_bus_reply_method_errorf(j->request, error_name(kind), "%s", isempty(text) ? fallback : text);
}

/* Element k of a JSON array the worker wrote, as a string. */
static const char *item_string(json_object *a, size_t k) {
        return json_object_get_string(json_object_array_get_idx(a, k));
}

static bool job_succeeded(json_object *o) {
        json_object *v;
        return json_object_object_get_ex(o, "r", &v) && json_object_get_int(v) >= 0;
}

static int reply_transition(Job *j, json_object *o) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        json_object *v, *msgs;
        int r;

        if (!job_succeeded(o))
                return reply_failure(j, o, "The transition failed.");

        r = sd_bus_message_new_method_return(j->request, &reply);
        if (r >= 0)
                r = sd_bus_message_append(reply, "tb",
                                          (uint64_t) (json_object_object_get_ex(o, "generation", &v) ? json_object_get_uint64(v) : 0),
                                          json_object_object_get_ex(o, "changed", &v) && json_object_get_boolean(v));
        if (r >= 0)
                r = sd_bus_message_open_container(reply, 'a', "(us)");
        if (r >= 0 && json_object_object_get_ex(o, "messages", &msgs))
                for (size_t i = 0; r >= 0 && i < json_object_array_length(msgs); i++) {
                        json_object *e = json_object_array_get_idx(msgs, i);
                        r = sd_bus_message_append(reply, "(us)",
                                                  (uint32_t) json_object_get_int(json_object_array_get_idx(e, 0)),
                                                  item_string(e, 1));
                }
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        return r < 0 ? r : sd_bus_send(NULL, reply, NULL);
}

static int reply_list(Job *j, json_object *o) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        json_object *images;
        int r;

        if (!job_succeeded(o))
                return reply_failure(j, o, "Listing images failed.");

        r = sd_bus_message_new_method_return(j->request, &reply);
        if (r >= 0)
                r = sd_bus_message_open_container(reply, 'a', SYSEXTD_IMAGE_STRUCT);
        if (r >= 0 && json_object_object_get_ex(o, "images", &images))
                for (size_t i = 0; r >= 0 && i < json_object_array_length(images); i++) {
                        json_object *e = json_object_array_get_idx(images, i);
                        r = sd_bus_message_append(reply, SYSEXTD_IMAGE_STRUCT, item_string(e, 0), item_string(e, 1),
                                                  item_string(e, 2), item_string(e, 3), item_string(e, 4),
                                                  item_string(e, 5), json_object_get_boolean(json_object_array_get_idx(e, 6)));
                }
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        return r < 0 ? r : sd_bus_send(NULL, reply, NULL);
}

static void manager_emit_changes(Manager *m) {
        __attribute__((cleanup(engine_status_done))) EngineStatus s = {};
        _cleanup_strv_free_ char **all = NULL;

        if (engine_status(m->engine, &s) < 0 || s.generation == m->generation)
                return;
        m->generation = s.generation;
        for (size_t i = 0; i < s.n_hierarchies; i++)
                STRV_FOREACH(x, s.hierarchies[i].extensions)
                        if (!strv_contains(all, *x))
                                (void) strv_extend(&all, *x);

        (void) sd_bus_emit_properties_changed(m->bus, SYSEXTD_BUS_PATH, SYSEXTD_BUS_INTERFACE, "Generation", "Merged",
                                              "Hierarchies", "Extensions", NULL);
        {
                _cleanup_(sd_bus_message_unrefp) sd_bus_message *signal = NULL;

                if (sd_bus_message_new_signal(m->bus, &signal, SYSEXTD_BUS_PATH, SYSEXTD_BUS_INTERFACE, "TreeChanged") >= 0 &&
                    sd_bus_message_append(signal, "t", m->generation) >= 0 &&
                    sd_bus_message_append_strv(signal, all ?: (char *[]) { NULL }) >= 0)
                        (void) sd_bus_send(m->bus, signal, NULL);
        }
}

static void job_finish(Job *j) {
        Manager *m = j->manager;
        json_object *o = NULL;
        int r;

        if (!j->eof || !j->exited)
                return;

        if (j->output)
                o = json_tokener_parse(j->output);
        if (!o) {
                r = sd_bus_reply_method_errorf(j->request, SYSEXTD_ERROR_FAILED,
                                               "The sysextd worker died before reporting (%s%s); the tree is as the journal in run/sysextd says.",
                                               WIFSIGNALED(j->status) ? "signal " : "exit status ",
                                               WIFSIGNALED(j->status) ? strsignal(WTERMSIG(j->status))
                                                                      : (WEXITSTATUS(j->status) ? "non-zero" : "0"));
        } else if (j->type == JOB_TRANSITION) {
                json_object *v;

                /* A successful transition that probed images hands over the next cache (maybe
                 * empty, after unmerge); otherwise the tree did not change and neither does
                 * the cache. */
                if (json_object_object_get_ex(o, "cache", &v) && job_succeeded(o)) {
                        image_list_free(&m->cache);
                        m->cache = j->received;
                        j->received = (ImageList) {};
                }
                r = reply_transition(j, o);
        }
        else
                r = reply_list(j, o);
        if (r < 0)
                log_warning_errno(r, "Failed to send a reply: %m");
        json_object_put(o);

        if (j->type == JOB_TRANSITION) {
                assert(m->queue == j);
                m->queue = j->next;
                job_free(j);
                manager_emit_changes(m);
                (void) manager_start_next(m);
        } else {
                for (Job **p = &m->lists; *p; p = &(*p)->next)
                        if (*p == j) {
                                *p = j->next;
                                break;
                        }
                job_free(j);
        }
        manager_update_idle(m);
}

/* Turns the worker's cache description plus the fds that followed into j->received. */
static int received_add(Job *j, const int *fds, size_t n_fds) {
        json_object *o = j->output ? json_tokener_parse(j->output) : NULL, *a;
        size_t n;

        if (!o || !json_object_object_get_ex(o, "cache", &a)) {
                json_object_put(o);
                for (size_t i = 0; i < n_fds; i++)
                        safe_close(fds[i]);
                return 0;
        }
        n = json_object_array_length(a);
        if (!j->received.images) {
                j->received.images = calloc(n ?: 1, sizeof(Image));
                if (!j->received.images) {
                        json_object_put(o);
                        return -ENOMEM;
                }
        }
        for (size_t i = 0; i < n_fds; i++) {
                json_object *e = j->received_fds < n ? json_object_array_get_idx(a, j->received_fds) : NULL, *v;
                Image *img;

                if (!e) {
                        safe_close(fds[i]);
                        continue;
                }
                img = &j->received.images[j->received.n++];
                j->received_fds++;
                *img = (Image) { .root_fd = fds[i], .verdict = IMAGE_COMPATIBLE };
#define GET(key) (json_object_object_get_ex(e, key, &v) ? v : NULL)
                img->name = strdup(json_object_get_string(GET("name")) ?: "");
                img->path = strdup(json_object_get_string(GET("path")) ?: "");
                img->kind = json_object_get_int(GET("kind"));
                img->hierarchies = (unsigned) json_object_get_int64(GET("hierarchies"));
                img->st.st_dev = json_object_get_uint64(GET("dev"));
                img->st.st_ino = json_object_get_uint64(GET("ino"));
                img->st.st_size = json_object_get_int64(GET("size"));
                img->st.st_mtim.tv_sec = json_object_get_int64(GET("mtime_sec"));
                img->st.st_mtim.tv_nsec = json_object_get_int64(GET("mtime_nsec"));
                img->stamp = json_object_get_uint64(GET("stamp"));
                img->judged_by = json_object_get_uint64(GET("judged_by"));
                img->verity = json_object_get_int(GET("verity"));
                img->signed_valid = json_object_get_boolean(GET("signed"));
                img->usr_partition = json_object_get_boolean(GET("usr_partition"));
#undef GET
        }
        json_object_put(o);
        return 0;
}

static int on_worker_output(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Job *j = userdata;

        /* First message: the result document; then messages that only carry fds. */
        for (;;) {
                int fds[WORKER_FDS_PER_MESSAGE];
                size_t n_fds = 0;
                char *data = NULL;
                int r;

                r = recv_with_fds(fd, &data, fds, ELEMENTSOF(fds), &n_fds);
                if (r == -EAGAIN)
                        return 0;
                if (r == -EINTR)
                        continue;
                if (r < 0)
                        break; /* EOF (ECONNRESET) or error: the worker is done */
                if (!j->output) {
                        j->output = data;
                        for (size_t i = 0; i < n_fds; i++)
                                safe_close(fds[i]);
                } else {
                        free(data);
                        if (received_add(j, fds, n_fds) < 0)
                                break;
                }
        }
        j->eof = true;
        j->io_source = sd_event_source_disable_unref(j->io_source);
        job_finish(j);
        return 0;
}

static int on_worker_exit(sd_event_source *s, const siginfo_t *si, void *userdata) {
        Job *j = userdata;
        int status = 0;

        /* sd-event reaps the child; rebuild a wait status for the message. */
        if (si->si_code == CLD_EXITED)
                status = W_EXITCODE(si->si_status, 0);
        else
                status = si->si_status & 0x7f;
        j->status = status;
        j->exited = true;
        j->child_source = sd_event_source_disable_unref(j->child_source);
        job_finish(j);
        return 0;
}

static int job_start(Job *j) {
        Manager *m = j->manager;
        int pipefd[2], r;
        pid_t pid;

        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pipefd) < 0)
                return negative_errno();
        pid = fork();
        if (pid < 0) {
                r = negative_errno();
                safe_close(pipefd[0]);
                safe_close(pipefd[1]);
                return r;
        }
        if (pid == 0) {
                safe_close(pipefd[0]);
                worker_main(m, j, pipefd[1]);
        }
        safe_close(pipefd[1]);
        j->pid = pid;
        j->fd = pipefd[0];
        (void) fcntl(j->fd, F_SETFL, O_NONBLOCK);

        r = sd_event_add_io(m->event, &j->io_source, j->fd, EPOLLIN, on_worker_output, j);
        if (r < 0)
                return r;
        r = sd_event_add_child(m->event, &j->child_source, pid, WEXITED, on_worker_exit, j);
        if (r < 0)
                return r;
        if (j->type == JOB_TRANSITION)
                (void) sd_notifyf(false, "STATUS=Running %s (generation %" PRIu64 ").", verb_name(j->verb), m->generation);
        return 0;
}

static int manager_start_next(Manager *m) {
        while (m->queue && m->queue->pid == 0) {
                Job *j = m->queue;
                int r = job_start(j);

                if (r >= 0)
                        return 0;
                (void) sd_bus_reply_method_errorf(j->request, SYSEXTD_ERROR_FAILED, "Failed to start a worker: %s",
                                                  strerror(-r));
                m->queue = j->next;
                job_free(j);
        }
        if (!m->queue)
                (void) sd_notify(false, "STATUS=Idle.");
        return 0;
}

static int on_idle(sd_event_source *s, uint64_t usec, void *userdata) {
        Manager *m = userdata;

        if (m->queue || m->lists)
                return 0;
        log_info("Idle for %" PRIu64 " s, exiting.", m->dconfig.idle_timeout_usec / 1000000);
        (void) sd_notify(false, "STOPPING=1\nSTATUS=Exiting on idle.");
        /* Give the name back first, so that a call arriving now activates a new instance
         * instead of being lost; then answer what is already queued. */
        (void) sd_bus_release_name(m->bus, SYSEXTD_BUS_NAME);
        return sd_event_exit(m->event, 0);
}

static void manager_update_idle(Manager *m) {
        if (m->dconfig.idle_timeout_usec == 0)
                return;
        if (m->queue || m->lists) {
                (void) sd_event_source_set_enabled(m->idle_timer, SD_EVENT_OFF);
                return;
        }
        if (!m->idle_timer) {
                if (sd_event_add_time_relative(m->event, &m->idle_timer, CLOCK_MONOTONIC, m->dconfig.idle_timeout_usec,
                                               0, on_idle, m) < 0)
                        return;
        } else {
                (void) sd_event_source_set_time_relative(m->idle_timer, m->dconfig.idle_timeout_usec);
        }
        (void) sd_event_source_set_enabled(m->idle_timer, SD_EVENT_ONESHOT);
}

static int check_root_caller(sd_bus_message *message, sd_bus_error *error) {
        _cleanup_(sd_bus_creds_unrefp) sd_bus_creds *creds = NULL;
        uid_t uid;
        int r;

        r = sd_bus_query_sender_creds(message, SD_BUS_CREDS_EUID | SD_BUS_CREDS_UID | SD_BUS_CREDS_AUGMENT, &creds);
        if (r < 0)
                return sd_bus_error_set_errnof(error, r, "Failed to read the caller's credentials: %m");
        r = sd_bus_creds_get_euid(creds, &uid);
        if (r < 0)
                r = sd_bus_creds_get_uid(creds, &uid);
        if (r < 0)
                return sd_bus_error_set(error, SYSEXTD_ERROR_ACCESS_DENIED, "Cannot tell who is calling; refusing.");
        if (uid != 0)
                return sd_bus_error_setf(error, SYSEXTD_ERROR_ACCESS_DENIED,
                                         "Only root may change the merged tree (caller has uid %u).", (unsigned) uid);
        return 0;
}

static int parse_options(sd_bus_message *message, EngineOptions *o, sd_bus_error *error) {
        int r;

        r = sd_bus_message_enter_container(message, 'a', "{sv}");
        if (r < 0)
                return r;
        while ((r = sd_bus_message_enter_container(message, 'e', "sv")) > 0) {
                const char *key, *contents;
                bool *target;
                int b;

                r = sd_bus_message_read(message, "s", &key);
                if (r < 0)
                        return r;
                if (streq(key, "force"))
                        target = &o->force;
                else if (streq(key, "noexec"))
                        target = &o->noexec;
                else if (streq(key, "strict"))
                        target = &o->strict;
                else
                        return sd_bus_error_setf(error, SYSEXTD_ERROR_INVALID_OPTION,
                                                 "Unknown option '%s' (known: force, noexec, strict).", key);
                r = sd_bus_message_peek_type(message, NULL, &contents);
                if (r < 0)
                        return r;
                if (!streq(contents, "b"))
                        return sd_bus_error_setf(error, SYSEXTD_ERROR_INVALID_OPTION,
                                                 "Option '%s' takes a boolean (b), not '%s'.", key, contents);
                r = sd_bus_message_read(message, "v", "b", &b);
                if (r < 0)
                        return r;
                *target = b;
                r = sd_bus_message_exit_container(message);
                if (r < 0)
                        return r;
        }
        if (r < 0)
                return r;
        return sd_bus_message_exit_container(message);
}

static int method_transition(sd_bus_message *message, void *userdata, sd_bus_error *error, EngineVerb verb) {
        Manager *m = userdata;
        EngineOptions o = {};
        Job *j, **tail;
        int r;

        r = parse_options(message, &o, error);
        if (r < 0)
                return r;
        r = check_root_caller(message, error);
        if (r < 0)
                return r;

        j = calloc(1, sizeof(*j));
        if (!j)
                return -ENOMEM;
        *j = (Job) { .manager = m, .type = JOB_TRANSITION, .verb = verb, .options = o,
                     .request = sd_bus_message_ref(message), .fd = -EBADF };
        /* Queue in arrival order; the head is the running job. */
        for (tail = &m->queue; *tail; tail = &(*tail)->next)
                ;
        *tail = j;
        manager_update_idle(m);
        (void) manager_start_next(m);
        return 1;
}

static int method_merge(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        return method_transition(message, userdata, error, ENGINE_MERGE);
}

static int method_refresh(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        return method_transition(message, userdata, error, ENGINE_REFRESH);
}

static int method_unmerge(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        return method_transition(message, userdata, error, ENGINE_UNMERGE);
}

static int method_list_images(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;
        Job *j;
        int r;

        j = calloc(1, sizeof(*j));
        if (!j)
                return -ENOMEM;
        *j = (Job) { .manager = m, .type = JOB_LIST, .request = sd_bus_message_ref(message), .fd = -EBADF };
        r = job_start(j);
        if (r < 0) {
                job_free(j);
                return sd_bus_error_setf(error, SYSEXTD_ERROR_FAILED, "Failed to start a worker: %s", strerror(-r));
        }
        j->next = m->lists;
        m->lists = j;
        manager_update_idle(m);
        return 1;
}

static int method_get_status(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;
        __attribute__((cleanup(engine_status_done))) EngineStatus s = {};
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        int r;

        manager_update_idle(m);
        r = engine_status(m->engine, &s);
        if (r < 0)
                return sd_bus_error_setf(error, SYSEXTD_ERROR_FAILED, "%s", m->engine->error ?: "Failed to read the status.");

        r = sd_bus_message_new_method_return(message, &reply);
        if (r < 0)
                return r;
        r = sd_bus_message_append(reply, "st", s.mode, s.generation);
        if (r < 0)
                return r;
        r = sd_bus_message_open_container(reply, 'a', SYSEXTD_HIERARCHY_STRUCT);
        if (r < 0)
                return r;
        for (size_t i = 0; i < s.n_hierarchies; i++) {
                HierarchyStatus *h = &s.hierarchies[i];

                r = sd_bus_message_open_container(reply, 'r', "sbastb");
                if (r >= 0)
                        r = sd_bus_message_append(reply, "sb", h->path, h->merged);
                if (r >= 0)
                        r = sd_bus_message_append_strv(reply, h->extensions ?: (char *[]) { NULL });
                if (r >= 0)
                        r = sd_bus_message_append(reply, "tb", h->since, h->foreign_top);
                if (r >= 0)
                        r = sd_bus_message_close_container(reply);
                if (r < 0)
                        return r;
        }
        r = sd_bus_message_close_container(reply);
        if (r < 0)
                return r;
        r = sd_bus_message_open_container(reply, 'a', SYSEXTD_SKIPPED_STRUCT);
        if (r < 0)
                return r;
        for (size_t i = 0; i < s.journal.n_images; i++) {
                JournalImage *img = &s.journal.images[i];
                if (streq_ptr(img->verdict, "compatible"))
                        continue;
                r = sd_bus_message_append(reply, SYSEXTD_SKIPPED_STRUCT, img->name, img->path, strna(img->verdict),
                                          img->reason ?: "");
                if (r < 0)
                        return r;
        }
        r = sd_bus_message_close_container(reply);
        if (r < 0)
                return r;
        r = sd_bus_message_append(reply, "s", s.policy);
        if (r < 0)
                return r;
        r = sd_bus_message_open_container(reply, 'a', SYSEXTD_MERGED_IMAGE_STRUCT);
        if (r < 0)
                return r;
        for (size_t i = 0; i < s.journal.n_images; i++) {
                JournalImage *img = &s.journal.images[i];
                if (!streq_ptr(img->verdict, "compatible"))
                        continue;
                r = sd_bus_message_append(reply, SYSEXTD_MERGED_IMAGE_STRUCT, img->name, img->path,
                                          img->verity ?: "none", img->signed_valid);
                if (r < 0)
                        return r;
        }
        r = sd_bus_message_close_container(reply);
        if (r < 0)
                return r;
        return sd_bus_send(NULL, reply, NULL);
}

static int property_get(sd_bus *bus, const char *path, const char *interface, const char *property,
                        sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;
        __attribute__((cleanup(engine_status_done))) EngineStatus s = {};
        _cleanup_strv_free_ char **list = NULL;
        int r;

        manager_update_idle(m);
        if (streq(property, "Root"))
                return sd_bus_message_append(reply, "s", m->engine->root);
        if (streq(property, "KernelFeatures")) {
                char *features[] = { kernel_has_mount_beneath() ? (char *) "mount-beneath" : NULL, NULL };
                return sd_bus_message_append_strv(reply, features);
        }

        r = engine_status(m->engine, &s);
        if (r < 0)
                return sd_bus_error_setf(error, SYSEXTD_ERROR_FAILED, "%s", m->engine->error ?: "Failed to read the status.");

        if (streq(property, "Generation"))
                return sd_bus_message_append(reply, "t", s.generation);
        if (streq(property, "Mode"))
                return sd_bus_message_append(reply, "s", s.mode);
        if (streq(property, "ImagePolicy"))
                return sd_bus_message_append(reply, "s", s.policy);

        list = calloc(1, sizeof(char *));
        if (!list)
                return -ENOMEM;
        for (size_t i = 0; i < s.n_hierarchies; i++) {
                if (!s.hierarchies[i].merged)
                        continue;
                if (streq(property, "Hierarchies"))
                        r = strv_extend(&list, s.hierarchies[i].path);
                else
                        STRV_FOREACH(x, s.hierarchies[i].extensions)
                                if (!strv_contains(list, *x) && (r = strv_extend(&list, *x)) < 0)
                                        break;
                if (r < 0)
                        return r;
        }
        if (streq(property, "Merged"))
                return sd_bus_message_append(reply, "b", strv_length(list) > 0);
        return sd_bus_message_append_strv(reply, list);
}

static const sd_bus_vtable manager_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_PROPERTY("Root", "s", property_get, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("Generation", "t", property_get, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("Merged", "b", property_get, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("Hierarchies", "as", property_get, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("Extensions", "as", property_get, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("KernelFeatures", "as", property_get, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("Mode", "s", property_get, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("ImagePolicy", "s", property_get, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_METHOD_WITH_ARGS("Merge", SD_BUS_ARGS("a{sv}", options),
                                SD_BUS_RESULT("t", generation, "b", changed, "a(us)", messages), method_merge,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Refresh", SD_BUS_ARGS("a{sv}", options),
                                SD_BUS_RESULT("t", generation, "b", changed, "a(us)", messages), method_refresh,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Unmerge", SD_BUS_ARGS("a{sv}", options),
                                SD_BUS_RESULT("t", generation, "b", changed, "a(us)", messages), method_unmerge,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("ListImages", SD_BUS_NO_ARGS, SD_BUS_RESULT("a(ssssssb)", images), method_list_images,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("GetStatus", SD_BUS_NO_ARGS,
                                SD_BUS_RESULT("s", mode, "t", generation, "a(sbastb)", hierarchies, "a(ssss)", skipped,
                                              "s", policy, "a(sssb)", images),
                                method_get_status, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_SIGNAL_WITH_ARGS("TreeChanged", SD_BUS_ARGS("t", generation, "as", extensions), 0),
        SD_BUS_VTABLE_END,
};

static int on_sigterm(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        Manager *m = userdata;

        /* Let a running transition finish: its worker holds the lock and the journal
         * protects the tree, but an answered caller is nicer than a dropped one. */
        if (m->queue) {
                log_info("Received %s, exiting after the running transition.", strsignal(si->ssi_signo));
                for (Job *j = m->queue->next; j; j = j->next)
                        (void) sd_bus_reply_method_errorf(j->request, SYSEXTD_ERROR_BUSY,
                                                          "sysextd is shutting down; the request was not run.");
                if (m->queue->next) {
                        Job *rest = m->queue->next;
                        m->queue->next = NULL;
                        while (rest) {
                                Job *n = rest->next;
                                job_free(rest);
                                rest = n;
                        }
                }
        }
        (void) sd_notify(false, "STOPPING=1");
        return sd_event_exit(m->event, 0);
}

int daemon_run(const char *root, EngineConfig *config, const DaemonConfig *dconfig) {
        Manager m = { .dconfig = *dconfig };
        sigset_t ss;
        int r;

        log_set_prefix(NULL);
        r = engine_new(root, config, &m.engine);
        if (r < 0)
                return log_error_errno(r, "Failed to open the root %s: %m", root ?: "/");

        /* Finish or discard a transition a crash interrupted, before serving anyone. */
        (void) engine_recover(m.engine);

        /* Probe the kernel once here: every worker is forked from this process and inherits
         * the answers instead of probing again. */
        (void) kernel_has_mount_beneath();
        (void) overlay_detached_layers_supported();
        (void) verity_dm_available();

        sigemptyset(&ss);
        sigaddset(&ss, SIGCHLD);
        sigaddset(&ss, SIGTERM);
        sigaddset(&ss, SIGINT);
        if (sigprocmask(SIG_BLOCK, &ss, NULL) < 0) {
                r = log_error_errno(errno, "Failed to block signals: %m");
                goto finish;
        }

        r = sd_event_default(&m.event);
        if (r < 0) {
                log_error_errno(r, "Failed to allocate the event loop: %m");
                goto finish;
        }
        (void) sd_event_add_signal(m.event, NULL, SIGTERM, on_sigterm, &m);
        (void) sd_event_add_signal(m.event, NULL, SIGINT, on_sigterm, &m);
        (void) sd_event_set_watchdog(m.event, true);

        r = sd_bus_open_system(&m.bus);
        if (r < 0) {
                log_error_errno(r, "Failed to connect to the system bus: %m");
                goto finish;
        }
        /* Serving nobody makes no sense: go when the bus does. */
        (void) sd_bus_set_exit_on_disconnect(m.bus, true);
        r = sd_bus_add_object_vtable(m.bus, &m.vtable_slot, SYSEXTD_BUS_PATH, SYSEXTD_BUS_INTERFACE, manager_vtable, &m);
        if (r < 0) {
                log_error_errno(r, "Failed to register the object: %m");
                goto finish;
        }
        r = sd_bus_request_name(m.bus, SYSEXTD_BUS_NAME, 0);
        if (r < 0) {
                log_error_errno(r, "Failed to acquire the name %s: %m", SYSEXTD_BUS_NAME);
                goto finish;
        }
        r = sd_bus_attach_event(m.bus, m.event, SD_EVENT_PRIORITY_NORMAL);
        if (r < 0) {
                log_error_errno(r, "Failed to attach the bus to the event loop: %m");
                goto finish;
        }

        {
                __attribute__((cleanup(engine_status_done))) EngineStatus s = {};
                if (engine_status(m.engine, &s) >= 0)
                        m.generation = s.generation;
        }
        manager_update_idle(&m);
        log_info("Serving %s for %s (generation %" PRIu64 ", %s mode).", SYSEXTD_BUS_NAME, m.engine->root, m.generation,
                 kernel_has_mount_beneath() ? "mount-beneath" : m.engine->config.allow_degraded ? "degraded" : "no-refresh");
        (void) sd_notify(false, "READY=1\nSTATUS=Idle.");

        r = sd_event_loop(m.event);
        if (r < 0)
                log_error_errno(r, "Event loop failed: %m");

        /* Answer what arrived before the name was released, then go. */
        (void) sd_bus_flush(m.bus);

finish:
        while (m.queue) {
                Job *n = m.queue->next;
                /* A running worker is waited for: it holds the lock and must not be killed
                 * in the middle of a swap. */
                if (m.queue->pid > 0 && !m.queue->exited) {
                        int status;
                        (void) waitpid(m.queue->pid, &status, 0);
                        m.queue->exited = true;
                }
                job_free(m.queue);
                m.queue = n;
        }
        while (m.lists) {
                Job *n = m.lists->next;
                job_free(m.lists);
                m.lists = n;
        }
        image_list_free(&m.cache);
        sd_event_source_disable_unref(m.idle_timer);
        sd_bus_slot_unref(m.vtable_slot);
        sd_bus_flush_close_unref(m.bus);
        sd_event_unref(m.event);
        engine_free(m.engine);
        return r < 0 ? r : 0;
}
