/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Layers watched while merged (sysextd(8), WATCHED LAYERS).  In the bus process, never blocking:
 * a stat() per layer and a sysfs read per loop device is all a check costs.
 *
 * What is watched, rebuilt from the journal at start and after every transition (one inotify
 * instance for the daemon's life: closing one stalls the caller for a grace period; the watch
 * of an image file that stays a layer as recorded is kept, not added again; when another
 * transition is already queued, after that one, in the bus process's time between jobs):
 *   - each live image file with inotify: IN_MODIFY (written in place), IN_ATTRIB (its link
 *     count drops when it is deleted or renamed over while the loop device keeps it open, so
 *     IN_DELETE_SELF does not come), IN_DELETE_SELF, IN_MOVE_SELF, and IN_CLOSE_NOWRITE /
 *     IN_CLOSE_WRITE: the loop device lets go of its backing file when LOOP_CHANGE_FD swaps it,
 *     which the kernel announces as a close of the old file even where the device's own uevent
 *     is suppressed during the swap;
 *   - the directory holding it: IN_CREATE, IN_MOVED_TO, IN_MOVED_FROM, IN_DELETE of its name;
 *   - its loop device through the kernel's uevents: a "change" of that MAJOR:MINOR, with
 *     DISK_MEDIA_CHANGE=1 or a DISKSEQ other than the recorded one.  The kernel's own netlink
 *     group, not sd-device's monitor: that one listens to udev's re-broadcast, and sysextd
 *     must not depend on udev (there is none in an initrd without it, nor on the test machines).
 *     A socket filter lets only "change" events through (every mount of an image adds a device).
 * An event only says "look": after a quiet second (a burst is one check) every layer not yet
 * known as changed is judged (watch_judge(): the recorded identity against a stat() and the
 * device's diskseq, plus what the events saw).  Each new change is logged, signalled
 * (ImageChanged), written to run/sysextd/changed.json for status, and its layer dropped from
 * the image cache.  With OnImageChange=refresh a refresh (rebuilding, never reusing the
 * changed layer) is queued, once per generation: a refresh that fails, or leaves a layer
 * changed, is reported and left to the operator, never retried in a loop.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <linux/filter.h>
#include <linux/netlink.h>
#include <linux/openat2.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "bus-service.h"
#include "event-util.h"
#include "fd-util.h"
#include "journal.h"
#include "layer-watch.h"
#include "log.h"
#include "util.h"
#include "watch.h"

#define DEBOUNCE_USEC (1000ULL * 1000ULL)
#define FILE_MASK (IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_CLOSE_NOWRITE | IN_DELETE_SELF | IN_MOVE_SELF)
#define DIRECTORY_IMAGE_MASK (IN_DELETE_SELF | IN_MOVE_SELF)
#define PARENT_MASK (IN_CREATE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR)

typedef struct WatchedLayer {
        Image *img; /* in LayerWatch.images */
        char *base; /* its name in its directory */
        int file_wd, dir_wd;
        bool modify_seen, media_change_seen;
} WatchedLayer;

struct LayerWatch {
        Manager *manager;
        uint64_t generation;
        bool have_generation;
        bool rebuilding; /* check_all() called by layer_watch_rebuild(): no rebuild from it */
        ImageList images; /* the journal's, of that generation */
        WatchedLayer *layers;
        size_t n_layers;
        WatchChangeList changed; /* reported under this generation (changed.json) */

        int inotify_fd;
        bool overflowed; /* events were lost (IN_Q_OVERFLOW): the next rebuild keeps no watch */
        sd_event_source *inotify_source;
        int uevent_fd;
        sd_event_source *uevent_source;
        sd_event_source *debounce;
        bool by_event;     /* the next check follows an event (or the start): it may refresh */
        bool at_start;
        uint64_t refreshed; /* the generation an automatic refresh was queued from; UINT64_MAX: none */
};

static int on_inotify(sd_event_source *s, int fd, uint32_t revents, void *userdata);

static void layers_free(WatchedLayer *layers, size_t n, ImageList *images) {
        for (size_t i = 0; i < n; i++)
                free(layers[i].base);
        free(layers);
        image_list_free(images);
}

static void layers_clear(LayerWatch *w) {
        layers_free(w->layers, w->n_layers, &w->images);
        w->layers = NULL;
        w->n_layers = 0;
}

static void inotify_close(LayerWatch *w) {
        w->inotify_source = sd_event_source_disable_unref(w->inotify_source);
        w->inotify_fd = safe_close(w->inotify_fd);
}

/* The watch descriptors in use, for a rebuild to remove those it no longer needs.  NULL with
 * *ret_n > 0: out of memory. */
static int *layers_wds(const LayerWatch *w, size_t *ret_n) {
        int *l = w->n_layers > 0 ? calloc(w->n_layers * 2, sizeof(int)) : NULL;
        size_t n = 0;

        for (size_t i = 0; l && i < w->n_layers; i++) {
                if (w->layers[i].file_wd >= 0)
                        l[n++] = w->layers[i].file_wd;
                if (w->layers[i].dir_wd >= 0)
                        l[n++] = w->layers[i].dir_wd;
        }
        *ret_n = l ? n : w->n_layers;
        return l;
}

static bool wd_in_use(const LayerWatch *w, int wd) {
        for (size_t i = 0; i < w->n_layers; i++)
                if (w->layers[i].file_wd == wd || w->layers[i].dir_wd == wd)
                        return true;
        return false;
}

/* The inotify instance lives as long as the watch: closing one waits for the kernel to retire
 * its marks (an SRCU grace period, 5-16 ms here), which in the bus process is that long without
 * an answer to anyone.  A rebuild drops what is queued (the transition's own reads of the image
 * files; the check at the end of the rebuild looks at everything anyway), keeps the watch of each
 * image file still live as recorded (prev: the layers before the rebuild; one whose watch the
 * kernel retired meanwhile, IN_IGNORED, is watched anew), adds the others, and removes those no
 * layer uses now. */
static int inotify_prepare(LayerWatch *w, WatchedLayer *prev, size_t n_prev) {
        union {
                struct inotify_event ev;
                char buf[16 * 1024];
        } u;
        ssize_t n;

        if (w->inotify_fd >= 0) {
                while ((n = read(w->inotify_fd, &u, sizeof(u))) > 0)
                        for (char *p = u.buf; p < u.buf + n;) {
                                struct inotify_event *ev = (struct inotify_event *) p;

                                p += sizeof(struct inotify_event) + ev->len;
                                if (ev->mask & IN_Q_OVERFLOW)
                                        w->overflowed = true; /* an IN_IGNORED may be among the lost */
                                if (!(ev->mask & IN_IGNORED))
                                        continue;
                                for (size_t i = 0; i < n_prev; i++)
                                        if (prev[i].file_wd == ev->wd)
                                                prev[i].file_wd = -1;
                        }
                return 0;
        }
        w->inotify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
        if (w->inotify_fd < 0)
                return log_warning_errno(errno, "Failed to set up inotify; changes to image files are found only by status: %m");
        if (sd_event_add_io(w->manager->event, &w->inotify_source, w->inotify_fd, EPOLLIN, on_inotify, w) < 0) {
                w->inotify_fd = safe_close(w->inotify_fd);
                return -ENOMEM;
        }
        return 0;
}

/* The watch an earlier generation's layer has on this image's file, if it is the same file:
 * same path, kind and identity as recorded (the watch follows the inode, which a transition
 * that kept the layer did not change).  -1: none. */
static int reusable_file_wd(const WatchedLayer *prev, size_t n_prev, const Image *img) {
        for (size_t i = 0; i < n_prev; i++) {
                const Image *p = prev[i].img;

                if (prev[i].file_wd >= 0 && p->kind == img->kind && p->st.st_dev == img->st.st_dev &&
                    p->st.st_ino == img->st.st_ino && streq(p->path, img->path))
                        return prev[i].file_wd;
        }
        return -1;
}

static void inotify_forget(LayerWatch *w, const int *old, size_t n_old) {
        for (size_t i = 0; old && w->inotify_fd >= 0 && i < n_old; i++)
                if (!wd_in_use(w, old[i]))
                        (void) inotify_rm_watch(w->inotify_fd, old[i]);
}

static WatchedLayer *layer_of_devnum(LayerWatch *w, uint64_t devnum) {
        for (size_t i = 0; i < w->n_layers; i++)
                if (w->layers[i].img->loop_devnum == devnum)
                        return &w->layers[i];
        return NULL;
}

/* The image cache must not hand a changed layer to the next transition. */
static void cache_drop(Manager *m, const char *path) {
        for (size_t i = 0; i < m->cache.n;)
                if (streq(m->cache.images[i].path, path)) {
                        image_done(&m->cache.images[i]);
                        memmove(&m->cache.images[i], &m->cache.images[i + 1], sizeof(Image) * (m->cache.n - i - 1));
                        m->cache.n--;
                } else
                        i++;
}

static void save_changes(LayerWatch *w) {
        _cleanup_close_ int dfd = -EBADF;
        int r;

        r = journal_dir_open(w->manager->engine->root_fd, true, &dfd);
        if (r >= 0)
                r = watch_changes_save(dfd, &w->changed, w->generation);
        if (r < 0)
                log_warning_errno(r, "Failed to write %s/%s/%s; status finds the changes again where a stat() can: %m",
                                  w->manager->engine->root, JOURNAL_DIR, WATCH_CHANGED_FILE);
}

static void check_all(LayerWatch *w) {
        Manager *m = w->manager;
        bool may_refresh, at_start;
        _cleanup_(watch_dir_cache_done) WatchDirCache cache = WATCH_DIR_CACHE_INIT;
        size_t n_new = 0;

        /* While a transition or commit runs, the old layers are on their way out (detaching a
         * tree clears its loop devices): they are judged when the job's end watches anew. */
        if (m->queue && (m->queue->type == JOB_TRANSITION || m->queue->type == JOB_COMMIT))
                return;
        /* A transition made without the daemon (sysextd --no-bus) moved the generation on:
         * what is live now is watched, not what was. */
        if (w->have_generation && !w->rebuilding) {
                _cleanup_journal_ Journal j = {};

                if (engine_history(m->engine, false, &j) >= 0 && j.generation != w->generation) {
                        layer_watch_rebuild(m, NULL);
                        return;
                }
        }
        may_refresh = w->by_event;
        at_start = w->at_start;
        w->by_event = w->at_start = false;
        for (size_t i = 0; i < w->n_layers; i++) {
                WatchedLayer *l = &w->layers[i];
                _cleanup_free_ char *description = NULL;
                WatchFacts f;
                WatchHow how;

                if (watch_change_find(&w->changed, l->img->path))
                        continue;
                watch_observe(m->engine->root_fd, m->engine->root, l->img, &cache, &f);
                f.modify_seen = l->modify_seen;
                f.media_change_seen = l->media_change_seen;
                how = watch_judge(l->img, &f);
                if (how == WATCH_UNCHANGED)
                        continue;
                if (watch_describe(l->img, how, &f, &description) < 0 ||
                    watch_change_add(&w->changed, l->img->name, l->img->path, how, description, w->generation,
                                     now_realtime_usec()) < 0) {
                        log_oom();
                        continue;
                }
                n_new++;
                log_warning("%s changed under the live tree since generation %" PRIu64 ": %s.", l->img->path, w->generation,
                            description);
                bus_emit_image_changed(m, &w->changed.changes[w->changed.n - 1]);
                cache_drop(m, l->img->path);
        }
        if (n_new > 0)
                save_changes(w);

        if (!m->dconfig.refresh_on_change || w->changed.n == 0 || !(may_refresh && (n_new > 0 || at_start)))
                return;
        if (w->refreshed == w->generation) {
                log_warning("A layer of generation %" PRIu64 " changed again after its automatic refresh was queued; not refreshing again (run 'sysextd refresh').",
                            w->generation);
                return;
        }
        w->refreshed = w->generation;
        log_info("Refreshing by itself (OnImageChange=refresh): %zu layer(s) of generation %" PRIu64 " changed under the live tree.",
                 w->changed.n, w->generation);
        EngineOptions o = ENGINE_OPTIONS_INIT;
        o.always_refresh = true;
        if (m->ops->queue_transition(m, NULL, ENGINE_REFRESH, &o) < 0)
                log_warning("Failed to queue the automatic refresh; run 'sysextd refresh'.");
}

static int on_debounce(sd_event_source *s, uint64_t usec, void *userdata) {
        check_all(userdata);
        return 0;
}

/* Something happened: look after a quiet second. */
static void poke(LayerWatch *w) {
        w->by_event = true;
        if (event_arm_after(w->manager->event, &w->debounce, DEBOUNCE_USEC, on_debounce, w) < 0)
                check_all(w);
}

static int on_inotify(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        LayerWatch *w = userdata;
        union {
                struct inotify_event ev;
                char buf[16 * 1024];
        } u;
        bool any = false;

        for (;;) {
                ssize_t n = read(fd, &u, sizeof(u));

                if (n <= 0)
                        break;
                for (char *p = u.buf; p < u.buf + n;) {
                        struct inotify_event *ev = (struct inotify_event *) p;

                        p += sizeof(struct inotify_event) + ev->len;
                        if (ev->mask & IN_Q_OVERFLOW) {
                                w->overflowed = true;
                                any = true;
                                continue;
                        }
                        for (size_t i = 0; i < w->n_layers; i++) {
                                WatchedLayer *l = &w->layers[i];

                                if (ev->wd == l->file_wd) {
                                        if ((ev->mask & IN_MODIFY) && l->img->kind != IMAGE_DIRECTORY)
                                                l->modify_seen = true;
                                        if (ev->mask & IN_IGNORED)
                                                l->file_wd = -1; /* retired: a rebuild watches anew */
                                        any = true;
                                } else if (ev->wd == l->dir_wd &&
                                           (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED) ||
                                            (ev->len > 0 && streq(ev->name, l->base))))
                                        any = true;
                        }
                }
        }
        if (any)
                poke(w);
        return 0;
}

/* A kernel uevent: "ACTION@DEVPATH\0KEY=VALUE\0...". */
static int on_uevent(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        LayerWatch *w = userdata;
        char buf[8192];

        for (;;) {
                struct sockaddr_nl sa = {};
                struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) - 1 };
                struct msghdr mh = { .msg_name = &sa, .msg_namelen = sizeof(sa), .msg_iov = &iov, .msg_iovlen = 1 };
                const char *action = NULL, *subsystem = NULL, *maj = NULL, *min = NULL, *seq = NULL;
                bool media = false;
                ssize_t n = recvmsg(fd, &mh, MSG_DONTWAIT);
                WatchedLayer *l;

                if (n < 0) {
                        if (errno == ENOBUFS)
                                poke(w); /* events were lost: look at everything */
                        if (errno == ENOBUFS || errno == EINTR)
                                continue;
                        break;
                }
                if (n == 0 || sa.nl_pid != 0 || (mh.msg_flags & MSG_TRUNC))
                        continue; /* only the kernel's own */
                buf[n] = 0;
                for (char *p = buf; p < buf + n; p += strlen(p) + 1) {
                        const char *v;

                        if ((v = startswith(p, "ACTION=")))
                                action = v;
                        else if ((v = startswith(p, "SUBSYSTEM=")))
                                subsystem = v;
                        else if ((v = startswith(p, "MAJOR=")))
                                maj = v;
                        else if ((v = startswith(p, "MINOR=")))
                                min = v;
                        else if ((v = startswith(p, "DISKSEQ=")))
                                seq = v;
                        else if (streq(p, "DISK_MEDIA_CHANGE=1"))
                                media = true;
                }
                if (!action || !streq(action, "change") || !subsystem || !streq(subsystem, "block") || !maj || !min)
                        continue;
                l = layer_of_devnum(w, makedev(strtoul(maj, NULL, 10), strtoul(min, NULL, 10)));
                if (!l)
                        continue;
                if (media)
                        l->media_change_seen = true;
                if (seq && strtoull(seq, NULL, 10) != l->img->loop_diskseq)
                        log_debug("Loop device %s:%s under %s: disk sequence number %s, %" PRIu64 " at merge.", maj, min,
                                  l->img->path, seq, l->img->loop_diskseq);
                poke(w);
        }
        return 0;
}

static int add_watch_at(int ifd, int root_fd, const char *rel, uint32_t mask) {
        _cleanup_close_ int fd = openat_resolve(root_fd, rel, O_PATH, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
        int wd;

        if (fd < 0)
                return fd;
        wd = inotify_add_watch(ifd, FORMAT_PROC_FD_PATH(fd), mask);
        return wd < 0 ? negative_errno() : wd;
}

/* status: what the caller read just now (its images are taken), or NULL: read here. */
void layer_watch_rebuild(Manager *m, EngineStatus *status) {
        LayerWatch *w = m->watch;
        _cleanup_(engine_status_done) EngineStatus own = {};
        EngineStatus *st = status;
        _cleanup_free_ char *prev_dir = NULL;
        _cleanup_free_ int *old_wds = NULL;
        WatchedLayer *prev = NULL;
        ImageList prev_images = {};
        int prev_dir_wd = -1;
        size_t n_live = 0, n_old = 0, n_prev = 0, n_reusable, n_kept = 0;

        if (!w)
                return;
        if (!st) {
                if (engine_status(m->engine, NULL, &own) < 0)
                        return;
                st = &own;
        }
        if (st->pending && !journal_delayed(&st->journal))
                return; /* resolved by the next job, which rebuilds again */

        old_wds = layers_wds(w, &n_old);
        if (!old_wds && n_old > 0) {
                inotify_close(w); /* no list to go by: a new instance */
                layers_clear(w);
        }
        /* The layers watched so far, until the new ones took what they can of them. */
        prev = TAKE_PTR(w->layers);
        n_prev = w->n_layers;
        prev_images = w->images;
        n_reusable = n_prev;
        w->n_layers = 0;
        w->images = (ImageList) {};
        if (!w->have_generation || st->generation != w->generation) {
                _cleanup_close_ int dfd = -EBADF;

                /* What was reported under this generation (by an earlier daemon, too). */
                watch_change_list_done(&w->changed);
                if (journal_dir_open(m->engine->root_fd, false, &dfd) >= 0)
                        (void) watch_changes_load(dfd, &st->journal, &w->changed);
                w->generation = st->generation;
                w->have_generation = true;
        }
        w->images = st->journal.images;
        st->journal.images = (ImageList) {};

        for (size_t i = 0; i < w->images.n; i++)
                n_live += watch_image_live(&w->images.images[i]);
        if (n_live == 0) {
                inotify_forget(w, old_wds, n_old);
                layers_free(prev, n_prev, &prev_images);
                return;
        }
        w->layers = calloc(n_live, sizeof(WatchedLayer));
        if (!w->layers) {
                log_oom();
                inotify_forget(w, old_wds, n_old);
                layers_free(prev, n_prev, &prev_images);
                return;
        }
        (void) inotify_prepare(w, prev, n_prev);
        if (w->overflowed) {
                /* A watch the kernel retired may not have been announced: all are added again
                 * (an inode still watched keeps its descriptor). */
                n_reusable = 0;
                w->overflowed = false;
        }

        for (size_t i = 0; i < w->images.n; i++) {
                Image *img = &w->images.images[i];
                WatchedLayer *l;
                const char *rel, *slash;

                if (!watch_image_live(img))
                        continue;
                l = &w->layers[w->n_layers++];
                *l = (WatchedLayer) { .img = img, .file_wd = -1, .dir_wd = -1 };
                rel = watch_image_rel(m->engine->root, img->path);
                if (!rel || w->inotify_fd < 0)
                        continue;
                slash = strrchr(rel, '/');
                l->base = strdup(slash ? slash + 1 : rel);
                if (!l->base) {
                        log_oom();
                        continue;
                }
                l->file_wd = reusable_file_wd(prev, n_reusable, img);
                if (l->file_wd >= 0)
                        n_kept++;
                else
                        l->file_wd = add_watch_at(w->inotify_fd, m->engine->root_fd, rel,
                                                  img->kind == IMAGE_DIRECTORY ? DIRECTORY_IMAGE_MASK : FILE_MASK);
                if (slash) {
                        _cleanup_free_ char *dir = strndup(rel, slash - rel);

                        /* Images mostly share a directory: it is watched once (inotify gives
                         * one watch per inode anyway), and anew at each rebuild (it may be
                         * another directory by that name now). */
                        if (dir && prev_dir && streq(dir, prev_dir))
                                l->dir_wd = prev_dir_wd;
                        else if (dir) {
                                l->dir_wd = add_watch_at(w->inotify_fd, m->engine->root_fd, dir, PARENT_MASK);
                                free(prev_dir);
                                prev_dir = TAKE_PTR(dir);
                                prev_dir_wd = l->dir_wd;
                        }
                }
                if (l->file_wd < 0 || l->dir_wd < 0)
                        log_debug("Cannot watch all of %s (its file: %d, its directory: %d); status still finds changes a stat() can.",
                                  img->path, l->file_wd, l->dir_wd);
        }
        inotify_forget(w, old_wds, n_old);
        layers_free(prev, n_prev, &prev_images);
        log_debug("Watching %zu live layer(s) of generation %" PRIu64 " (%zu file watch(es) kept).", w->n_layers,
                  w->generation, n_kept);
        /* What changed between the transition (or, at the start, while no daemon watched) and
         * now. */
        w->rebuilding = true;
        check_all(w);
        w->rebuilding = false;
}

/* Only "change" events reach this process: every image a transition mounts adds a device (its
 * backing device info in sysfs) and removes one when it goes, 50 and more events for a
 * refresh of 50 images, each of which would wake the daemon, beside the transition, for
 * nothing.  The kernel's message begins with "ACTION@DEVPATH". */
static int uevent_filter_changes(int fd) {
        static const struct sock_filter code[] = {
                BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 0),
                BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0x6368616eU /* "chan" */, 0, 5),
                BPF_STMT(BPF_LD | BPF_H | BPF_ABS, 4),
                BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0x6765U /* "ge" */, 0, 3),
                BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 6),
                BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, '@', 0, 1),
                BPF_STMT(BPF_RET | BPF_K, 0xffffffffU), /* all of it */
                BPF_STMT(BPF_RET | BPF_K, 0),           /* none */
        };
        const struct sock_fprog prog = { .len = ELEMENTSOF(code), .filter = (struct sock_filter *) code };

        return setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof(prog)) < 0 ? negative_errno() : 0;
}

int layer_watch_start(Manager *m) {
        LayerWatch *w = calloc(1, sizeof(LayerWatch));
        struct sockaddr_nl sa = { .nl_family = AF_NETLINK, .nl_groups = 1 /* the kernel's uevents */ };
        int r;

        if (!w)
                return -ENOMEM;
        *w = (LayerWatch) { .manager = m, .inotify_fd = -EBADF, .uevent_fd = -EBADF, .refreshed = UINT64_MAX };
        m->watch = w;

        w->uevent_fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_KOBJECT_UEVENT);
        /* (Filtered before it is bound: nothing unfiltered is queued.) */
        if (w->uevent_fd >= 0 && (r = uevent_filter_changes(w->uevent_fd)) < 0)
                log_debug_errno(r, "Could not filter the kernel's device events, all of them wake the daemon: %m");
        if (w->uevent_fd < 0 || bind(w->uevent_fd, (struct sockaddr *) &sa, sizeof(sa)) < 0 ||
            sd_event_add_io(m->event, &w->uevent_source, w->uevent_fd, EPOLLIN, on_uevent, w) < 0) {
                log_warning_errno(errno, "Failed to listen to the kernel's device events; loop devices are checked only when their image files are touched, and by status: %m");
                w->uevent_fd = safe_close(w->uevent_fd);
        }
        w->by_event = w->at_start = true;
        layer_watch_rebuild(m, NULL);
        w->by_event = w->at_start = false;
        return 0;
}

void layer_watch_done(Manager *m) {
        LayerWatch *w = m->watch;

        if (!w)
                return;
        layers_clear(w);
        inotify_close(w);
        watch_change_list_done(&w->changed);
        sd_event_source_disable_unref(w->uevent_source);
        safe_close(w->uevent_fd);
        sd_event_source_disable_unref(w->debounce);
        free(w);
        m->watch = NULL;
}

bool layer_watch_keeps_alive(Manager *m) {
        return m->watch && m->dconfig.refresh_on_change && m->watch->n_layers > 0;
}
