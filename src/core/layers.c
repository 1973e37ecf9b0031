/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Kept layers: the image mounts of the live trees, kept between runs of the command line.
 *
 * The daemon keeps the image mounts that went into the live trees (detached, held by its fds)
 * and reuses one when the next transition finds the same file (engine.c, cache_lookup()).  A
 * `sysextd --no-bus` run ends with its process and its mounts would go with it: every refresh
 * would mount every image again (most of a merge's time) and its swap would destroy the old
 * tree's superblocks when the last reference goes.  So a run in process keeps them where no
 * process is needed to hold them: a mount namespace of their own, which nothing runs in.
 *
 *   run/sysextd/layers     the holder: a small tmpfs of ours, with the namespace bound on its
 *                          file "ns" (as `ip netns` pins a network namespace); the two mounts
 *                          this adds to the host's table.  A bind of an nsfs file is refused on
 *                          a mount that propagates (/run is shared on a systemd host, with a
 *                          copy in every service's namespace), and copies of a tree leave nsfs
 *                          mounts out: so the holder, made detached with the namespace in it,
 *                          is what is attached, and what the services' namespaces get a copy
 *                          of (an empty tmpfs, gone with the holder);
 *   run/sysextd/layers.id  the holder's unique mount id, the namespace's inode number and the
 *                          generation whose trees the mounts were taken from, written before
 *                          the holder is attached; ours is a holder with that identity (a
 *                          unique mount id is never reused) whose namespace has a root like
 *                          the one the staging worker gives it (a tmpfs of root's, mode 0700:
 *                          a check against a mistake, not against root, who could build one
 *                          and write the record too);
 *   in the namespace       that tmpfs as its root, nothing of the host's tree (so it pins none
 *                          of the host's mounts), and each kept image mount at l/DEV-INO, its
 *                          file's device and inode numbers.
 *
 * The namespace is the staging worker's, emptied once the new tree was sent (staging.h): no
 * namespace is copied for it.  What a kept mount is (its verdict, hierarchies, units, verity,
 * the policy, certificates, host os-release and hierarchies it was judged by) is the journal's
 * record of the live tree (state.json), of the generation the record names: a kept mount is
 * reused only for an image whose file discovery found with that record's identity, and only as
 * the daemon reuses its own (the same cache_lookup(), which also checks that a loop device
 * still reads the file it was attached to).  The name cannot lead to another file's mount while
 * the kept mount holds its file open, as it does (directly, or through its loop device until a
 * LOOP_CHANGE_FD, which that check sees).
 *
 * Kept: compatible raw images with content for a hierarchy, mounted without attributes (a
 * directory's bind mount costs nothing to make again; a class mounted noexec, as confexts are
 * by default, is mounted anew), where detached mounts serve as overlay layers (Linux 6.15).  A
 * run that builds trees keeps the mounts of the images in them and drops the others; an
 * unmerge, a transition of the daemon that changes the trees (the daemon keeps its own), a
 * recovery that finishes an interrupted transition (a new generation) and a run that keeps
 * nothing drop the holder, so a kept mount never outlives the trees it was taken from by more than one
 * transition.  A failure to keep is no failure of the transition: nothing is kept and the next
 * run mounts its images.
 *
 * A reused mount comes as a detached clone (an anonymous namespace of its own: an overlay takes a
 * layer of another namespace only as such a root), let go on a thread once the new trees hold
 * their layers (layers_release_start()): the end of each waits for an RCU grace period.  The
 * kept mounts of files that discovery no longer found are detached on a thread too, which
 * enters the namespace while the staging worker builds the new trees (layers_sweep_start());
 * the old trees still hold those file systems, which end with them after the swap (for a
 * replaced image an erofs superblock and its backing device, 0.5 ms), on the thread that lets
 * the old trees go.
 *
 * Entering the namespace is setns(): this process steps in and out (mounts.h,
 * mount_ns_visit_begin()), its root and working directory put back as they were; a process
 * that could not come back aborts rather than go on in the wrong namespace.
 */
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/magic.h>
#include <linux/nsfs.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "fd-util.h"
#include "fileio.h"
#include "journal.h"
#include "layers.h"
#include "log.h"
#include "mounts.h"
#include "util.h"

#define LAYERS_PIN "layers"
#define LAYERS_NS "ns"
#define LAYERS_RECORD "layers.id"
#define LAYERS_DIR "l"

bool layers_image_eligible(const Image *img) {
        return img->verdict == IMAGE_COMPATIBLE && img->hierarchies != 0 && img->kind != IMAGE_DIRECTORY;
}

const char *layers_name(const struct stat *st, char buf[static LAYERS_NAME_MAX]) {
        snprintf(buf, LAYERS_NAME_MAX, LAYERS_DIR "/%" PRIu64 "-%" PRIu64, (uint64_t) st->st_dev, (uint64_t) st->st_ino);
        return buf;
}

/* What layers.id says: the holder's unique mount id, the namespace's inode number, and the
 * generation whose trees the kept mounts were taken from. */
typedef struct Record {
        uint64_t holder, ns, generation;
} Record;

static int record_read(int journal_fd, Record *ret) {
        _cleanup_free_ char *text = NULL;
        unsigned long long h, ns, g;
        int r;

        r = read_file_at(journal_fd, LAYERS_RECORD, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS, 128, &text, NULL, NULL);
        if (r < 0)
                return r;
        if (sscanf(text, "%llu %llu %llu", &h, &ns, &g) != 3 || h == 0)
                return -EBADMSG;
        *ret = (Record) { h, ns, g };
        return 0;
}

static int record_write(int journal_fd, const Record *rec) {
        char text[128];

        snprintf(text, sizeof(text), "%" PRIu64 " %" PRIu64 " %" PRIu64 "\n", rec->holder, rec->ns, rec->generation);
        return write_file_atomic_at(journal_fd, LAYERS_RECORD, text, 0600);
}

/* The holder at run/sysextd/layers when it is the one recorded: an O_PATH fd, or < 0. */
static int holder_open(int journal_fd, const Record *rec) {
        _cleanup_close_ int fd = -EBADF;
        MountIdentity id;

        fd = openat(journal_fd, LAYERS_PIN, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        if (mount_identity_of_fd(fd, &id) < 0 || !id.is_root || id.unique_id != rec->holder)
                return -EBUSY;
        return TAKE_FD(fd);
}

/* The pinned namespace in the holder, checked against the record: O_RDONLY, or < 0. */
static int pinned_open(int holder, const Record *rec) {
        _cleanup_close_ int path_fd = -EBADF, fd = -EBADF;
        struct statfs sfs;
        struct stat st;

        path_fd = openat(holder, LAYERS_NS, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (path_fd < 0)
                return negative_errno();
        /* The nsfs file, before anything opens it for reading. */
        if (fstatfs(path_fd, &sfs) < 0 || (unsigned long) sfs.f_type != NSFS_MAGIC)
                return -EBADF;
        fd = fd_reopen(path_fd, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return fd;
        if (ioctl(fd, NS_GET_NSTYPE) != CLONE_NEWNS || fstat(fd, &st) < 0 || st.st_ino != rec->ns)
                return -EBADF;
        return TAKE_FD(fd);
}

/* In a namespace: whether its root is one the staging worker made, a tmpfs of root's, mode
 * 0700. */
static bool root_is_staging(void) {
        struct statfs sfs;
        struct stat st;

        return statfs("/", &sfs) >= 0 && (unsigned long) sfs.f_type == TMPFS_MAGIC && stat("/", &st) >= 0 && st.st_uid == 0 &&
               (st.st_mode & 07777) == 0700;
}

/* Into the namespace, remembering the way back (v). */
static int ns_enter(int ns, MountNsVisit *v) {
        int r = mount_ns_visit_begin(v);

        if (r >= 0 && setns(ns, CLONE_NEWNS) < 0) {
                r = negative_errno();
                mount_ns_visit_done(v);
                return r;
        }
        if (r >= 0 && !root_is_staging()) {
                if (mount_ns_visit_end(v) < 0)
                        abort();
                return -EBADF;
        }
        return r;
}

/* Whether ns is one the staging worker made (ns_enter()'s check), from a visit. */
static bool ns_is_ours(int ns) {
        MountNsVisit v;

        if (ns_enter(ns, &v) < 0)
                return false;
        if (mount_ns_visit_end(&v) < 0)
                abort(); /* in that namespace: nothing may go on from here */
        return true;
}

/* What is at run/sysextd/layers, against the record. */
typedef enum HolderState {
        HOLDER_NONE,    /* no holder, or not the one recorded (a mount there is left alone) */
        HOLDER_FOREIGN, /* the holder recorded, with a namespace in it that is not one of ours
                      * (someone with a record of their own making): left alone */
        HOLDER_EMPTY,   /* the holder recorded, its namespace unmounted from it: pins nothing */
        HOLDER_OURS,
        HOLDER_UNKNOWN, /* out of fds or memory: the next run looks again */
} HolderState;

/* *ret_holder (O_PATH) for HOLDER_EMPTY and HOLDER_OURS, *ret_ns (O_RDONLY) for HOLDER_OURS. */
static HolderState holder_find(int journal_fd, const Record *rec, int *ret_holder, int *ret_ns) {
        _cleanup_close_ int holder = -EBADF, ns = -EBADF;

        holder = holder_open(journal_fd, rec);
        if (IN_SET(holder, -ENOENT, -EBUSY))
                return HOLDER_NONE;
        if (holder < 0)
                return HOLDER_UNKNOWN;
        ns = pinned_open(holder, rec);
        if (IN_SET(ns, -EMFILE, -ENFILE, -ENOMEM))
                return HOLDER_UNKNOWN;
        if (ns >= 0 && !ns_is_ours(ns))
                return HOLDER_FOREIGN;
        *ret_holder = TAKE_FD(holder);
        if (ns < 0)
                return HOLDER_EMPTY;
        *ret_ns = TAKE_FD(ns);
        return HOLDER_OURS;
}

/* The record, or < 0; an unreadable one proves nothing and goes. */
static int record_load(int journal_fd, Record *ret) {
        int r = record_read(journal_fd, ret);

        if (r == -EBADMSG)
                (void) unlinkat(journal_fd, LAYERS_RECORD, 0);
        return r;
}

int layers_open(int journal_fd, uint64_t generation, int *ret_ns) {
        _cleanup_close_ int holder = -EBADF, ns = -EBADF;
        Record rec;

        if (record_load(journal_fd, &rec) < 0)
                return 0;
        /* Taken from other trees than the live ones (a transition of the daemon, one that was
         * killed before it kept its mounts), or pinning nothing: dropped, and made anew. */
        if (rec.generation != generation) {
                log_debug("The kept layers are of generation %" PRIu64 ", the live trees of %" PRIu64 "; dropping them.",
                          rec.generation, generation);
                (void) layers_drop(journal_fd);
                return 0;
        }
        switch (holder_find(journal_fd, &rec, &holder, &ns)) {
        case HOLDER_OURS:
                *ret_ns = TAKE_FD(ns);
                return 1;
        case HOLDER_EMPTY:
                (void) layers_drop(journal_fd);
                return 0;
        case HOLDER_NONE:
        case HOLDER_FOREIGN:
                log_debug("The mount at %s is not the kept layers recorded; not using it.", LAYERS_PIN);
                (void) unlinkat(journal_fd, LAYERS_RECORD, 0);
                return 0;
        default:
                return 0;
        }
}

/* Whether path below dir_fd ("": dir_fd itself) is the root of a mount; its superblock's
 * device in *ret_dev. */
static bool mount_root_at(int dir_fd, const char *path, dev_t *ret_dev) {
        struct statx sx = {};

        if (statx(dir_fd, path, (isempty(path) ? AT_EMPTY_PATH : 0) | AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT, STATX_TYPE, &sx) < 0 ||
            !S_ISDIR(sx.stx_mode) || !(sx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) ||
            !(sx.stx_attributes & STATX_ATTR_MOUNT_ROOT))
                return false;
        if (ret_dev)
                *ret_dev = makedev(sx.stx_dev_major, sx.stx_dev_minor);
        return true;
}

/* In the namespace: whether name is a kept mount. */
static bool kept_mount(const char *name, dev_t *ret_dev) {
        return mount_root_at(AT_FDCWD, name, ret_dev);
}

/* In the namespace: detaches whatever is mounted at name (one mount, in practice). */
static int kept_detach(const char *name) {
        for (unsigned i = 0; i < 16 && kept_mount(name, NULL); i++)
                if (umount2(name, MNT_DETACH | UMOUNT_NOFOLLOW) < 0)
                        return negative_errno();
        return kept_mount(name, NULL) ? -EBUSY : 0;
}

static bool same_file(const Image *a, const Image *b) {
        return a->st.st_dev == b->st.st_dev && a->st.st_ino == b->st.st_ino && a->st.st_size == b->st.st_size &&
               a->st.st_mtim.tv_sec == b->st.st_mtim.tv_sec && a->st.st_mtim.tv_nsec == b->st.st_mtim.tv_nsec &&
               streq(a->path, b->path);
}

void layers_fetched_free(ImageList *l) {
        for (size_t i = 0; i < l->n; i++)
                safe_close(l->images[i].root_fd);
        free(l->images);
        *l = (ImageList) {};
}

int layers_fetch(int ns, const ImageList *records, const ImageList *found, ImageList *ret) {
        ImageList l = {};
        MountNsVisit v;
        int r;

        l.images = calloc(records->n ?: 1, sizeof(Image));
        if (!l.images)
                return -ENOMEM;
        r = ns_enter(ns, &v);
        if (r < 0) {
                /* Still at home: the images are mounted anew. */
                log_debug("Could not enter the kept layers' mount namespace: %s", strerror(-r));
                mount_ns_visit_done(&v);
                *ret = l;
                return 0;
        }
        for (size_t i = 0; i < records->n; i++) {
                const Image *rec = &records->images[i];
                char name[LAYERS_NAME_MAX];
                bool wanted = false;
                int fd;

                if (!layers_image_eligible(rec))
                        continue;
                for (size_t k = 0; !wanted && k < found->n; k++)
                        wanted = same_file(rec, &found->images[k]);
                if (!wanted || !kept_mount(layers_name(&rec->st, name), NULL))
                        continue;
                fd = open_tree(AT_FDCWD, name, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT);
                if (fd < 0) {
                        log_debug("Could not clone the kept mount of %s: %m", rec->path);
                        continue;
                }
                l.images[l.n] = *rec;
                l.images[l.n++].root_fd = fd;
        }
        if (mount_ns_visit_end(&v) < 0)
                abort(); /* in the kept layers' namespace: nothing may go on from here */
        *ret = l;
        return 0;
}

void layers_release_start(FdRelease *rel, Image *images, size_t n) {
        _cleanup_free_ int *fds = NULL;
        size_t m = 0;

        if (rel->started || rel->fds || !(fds = calloc(n ?: 1, sizeof(int))))
                return;
        for (size_t i = 0; i < n; i++) {
                Image *img = &images[i];

                /* (Not a mount root, which it always is: kept as it is.) */
                if (!img->kept_clone || img->root_fd < 0 || !mount_root_at(img->root_fd, "", &img->kept_dev))
                        continue;
                fds[m++] = TAKE_FD(img->root_fd);
        }
        fd_release_start(rel, fds, m);
}

static bool sweep_keeps(const LayersSweep *s, const char *entry) {
        for (size_t i = 0; i < s->n_keep; i++)
                if (streq(s->keep[i] + strlen(LAYERS_DIR "/"), entry))
                        return true;
        return false;
}

/* On its own thread, which enters the namespace for good (it ends there). */
static void *sweep_work(void *userdata) {
        LayersSweep *s = userdata;
        _cleanup_closedir_ DIR *d = NULL;
        struct dirent *de;

        /* setns() wants this thread's root and working directory to be its own. */
        if (unshare(CLONE_FS) < 0 || setns(s->ns, CLONE_NEWNS) < 0 || !root_is_staging())
                return NULL;
        d = opendir(LAYERS_DIR);
        if (!d)
                return NULL;
        while ((de = readdir(d))) {
                char name[LAYERS_NAME_MAX + 256];

                if (de->d_name[0] == '.' || sweep_keeps(s, de->d_name))
                        continue;
                snprintf(name, sizeof(name), LAYERS_DIR "/%s", de->d_name);
                if (kept_detach(name) >= 0)
                        (void) rmdir(name);
        }
        return NULL;
}

void layers_sweep_start(LayersSweep *s, int ns, const Image *images, size_t n) {
        if (s->started || ns < 0 || !(s->keep = calloc(n ?: 1, LAYERS_NAME_MAX)))
                return;
        for (size_t i = 0; i < n; i++)
                layers_name(&images[i].st, s->keep[i]);
        s->n_keep = n;
        s->ns = fcntl(ns, F_DUPFD_CLOEXEC, 3);
        /* Without a thread, layers_keep() drops what is left. */
        s->started = s->ns >= 0 && thread_start_masked(&s->thread, sweep_work, s);
        if (!s->started)
                layers_sweep_finish(s);
}

void layers_sweep_finish(LayersSweep *s) {
        if (s->started) {
                (void) pthread_join(s->thread, NULL);
                safe_close(s->ns);
        } else if (s->keep && s->ns >= 0)
                safe_close(s->ns); /* duplicated, no thread started */
        free(s->keep);
        *s = (LayersSweep) {};
}

/* In the namespace: the mounts of images at their names, and nothing else under l/. */
static int keep_here(Image *const *images, size_t n) {
        _cleanup_closedir_ DIR *d = NULL;
        _cleanup_free_ char (*kept)[LAYERS_NAME_MAX] = NULL;
        size_t n_kept = 0;
        struct dirent *de;
        int r = 0;

        kept = calloc(n ?: 1, LAYERS_NAME_MAX);
        if (!kept)
                return -ENOMEM;
        if (mkdir(LAYERS_DIR, 0700) < 0 && errno != EEXIST)
                return negative_errno();
        for (size_t i = 0; i < n; i++) {
                char name[LAYERS_NAME_MAX];
                dev_t dev, image_dev;

                layers_name(&images[i]->st, name);
                /* A clone let go (layers_release_start()): kept when the kept mount is still
                 * the one it was cloned from, else nothing to keep it with. */
                if (images[i]->root_fd < 0) {
                        if (images[i]->kept_dev != 0 && kept_mount(name, &dev) && dev == images[i]->kept_dev)
                                memcpy(kept[n_kept++], name, LAYERS_NAME_MAX);
                        continue;
                }
                /* (A mount root, as every image's root is; not kept otherwise.) */
                if (!mount_root_at(images[i]->root_fd, "", &image_dev))
                        continue;
                if (kept_mount(name, &dev)) {
                        if (dev == image_dev) {
                                memcpy(kept[n_kept++], name, LAYERS_NAME_MAX); /* reused: it is this mount's clone */
                                continue;
                        }
                        /* The same file, mounted anew (probed again: its record changed). */
                        r = kept_detach(name);
                        if (r < 0)
                                return r;
                } else if (mkdir(name, 0700) < 0 && errno != EEXIST)
                        return negative_errno();
                if (move_mount(images[i]->root_fd, "", AT_FDCWD, name, MOVE_MOUNT_F_EMPTY_PATH) < 0)
                        return negative_errno();
                memcpy(kept[n_kept++], name, LAYERS_NAME_MAX);
        }

        /* Every other kept mount goes: its image left the trees, or was mounted anew. */
        d = opendir(LAYERS_DIR);
        if (!d)
                return negative_errno();
        while ((de = readdir(d))) {
                char name[LAYERS_NAME_MAX + 256];
                bool keep = false;

                if (de->d_name[0] == '.')
                        continue;
                for (size_t i = 0; !keep && i < n_kept; i++)
                        keep = streq(kept[i] + strlen(LAYERS_DIR "/"), de->d_name);
                if (keep)
                        continue;
                snprintf(name, sizeof(name), LAYERS_DIR "/%s", de->d_name);
                r = kept_detach(name);
                if (r < 0)
                        return r;
                (void) rmdir(name);
        }
        return 0;
}

/* Pins ns: a small tmpfs of our own (the holder) is made, detached, with the namespace bound on
 * its file "ns"; the record is written; then the holder is attached at run/sysextd/layers.  A
 * bind of an nsfs file is refused on a mount that propagates (the copies for its peers and
 * slaves cannot take it: /run is shared on a systemd host); the holder is what propagates,
 * and a copy of a tree leaves the nsfs mounts in it out.  Recorded before it is attached: no
 * crash leaves a holder that nobody can prove ours. */
static int pin(int journal_fd, const char *root, int ns, uint64_t generation) {
        _cleanup_close_ int dir = -EBADF, fs = -EBADF, holder = -EBADF, file = -EBADF, clone = -EBADF;
        MountIdentity id = {};
        struct stat st;
        Record rec;
        int r;

        if (mkdirat(journal_fd, LAYERS_PIN, 0700) < 0 && errno != EEXIST)
                return negative_errno();
        dir = openat(journal_fd, LAYERS_PIN, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dir < 0)
                return negative_errno();
        /* Something mounted there that the record does not name is not ours to cover. */
        if (mount_identity_of_fd(dir, &id) < 0 || id.is_root) {
                log_notice("Not keeping the image mounts: what is mounted on %s/%s/%s is not sysextd's (umount -R it to let "
                           "sysextd keep them).", streq(root, "/") ? "" : root, JOURNAL_DIR, LAYERS_PIN);
                return -EBUSY;
        }
        fs = fsopen("tmpfs", FSOPEN_CLOEXEC);
        if (fs < 0 || fsconfig(fs, FSCONFIG_SET_STRING, "source", "sysextd-layers", 0) < 0 ||
            fsconfig(fs, FSCONFIG_SET_STRING, "mode", "0700", 0) < 0 || fsconfig(fs, FSCONFIG_SET_STRING, "size", "64k", 0) < 0 ||
            fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
                return negative_errno();
        holder = fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NODEV | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC);
        if (holder < 0)
                return negative_errno();
        file = openat(holder, LAYERS_NS, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (file < 0)
                return negative_errno();
        file = safe_close(file);
        file = openat(holder, LAYERS_NS, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        clone = open_tree(ns, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
        if (file < 0 || clone < 0 || move_mount(clone, "", file, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
                return negative_errno();
        r = mount_identity_of_fd(holder, &id);
        if (r < 0)
                return r;
        if (id.unique_id == 0 || fstat(ns, &st) < 0)
                return -EOPNOTSUPP;
        rec = (Record) { id.unique_id, st.st_ino, generation };
        r = record_write(journal_fd, &rec);
        if (r < 0)
                return r;
        if (move_mount(holder, "", dir, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0) {
                r = negative_errno();
                (void) unlinkat(journal_fd, LAYERS_RECORD, 0);
                return r;
        }
        return 0;
}

int layers_keep(int journal_fd, const char *root, int ns, bool fresh, uint64_t generation, Image *const *images, size_t n) {
        MountNsVisit v;
        int r;

        r = ns_enter(ns, &v);
        if (r < 0)
                goto fail;
        r = keep_here(images, n);
        if (mount_ns_visit_end(&v) < 0)
                abort(); /* in the kept layers' namespace: nothing may go on from here */
        if (r < 0)
                goto fail;
        if (fresh)
                r = pin(journal_fd, root, ns, generation);
        else {
                Record rec;

                /* The same namespace, now of this generation's trees. */
                r = record_read(journal_fd, &rec);
                if (r >= 0) {
                        rec.generation = generation;
                        r = record_write(journal_fd, &rec);
                }
        }
        if (r >= 0)
                return 0;
fail:
        log_debug("Could not keep the image mounts for the next run (%s); they are dropped.", strerror(-r));
        if (!fresh)
                (void) layers_drop(journal_fd);
        return r;
}

int layers_drop(int journal_fd) {
        _cleanup_close_ int holder = -EBADF, ns = -EBADF;
        Record rec;

        if (record_load(journal_fd, &rec) < 0)
                return 0;
        switch (holder_find(journal_fd, &rec, &holder, &ns)) {
        case HOLDER_OURS:
        case HOLDER_EMPTY:
                /* The holder and the namespace bound in it; the copies of the holder in other
                 * namespaces (propagation) go with it. */
                if (umount2(FORMAT_PROC_FD_PATH(holder), MNT_DETACH) < 0)
                        return log_debug_errno(errno, "Could not detach the kept layers: %m");
                break;
        case HOLDER_NONE:
        case HOLDER_FOREIGN:
                log_debug("The mount at %s is not the kept layers recorded; left alone.", LAYERS_PIN);
                break;
        default:
                return 0;
        }
        (void) unlinkat(journal_fd, LAYERS_RECORD, 0);
        (void) unlinkat(journal_fd, LAYERS_PIN, AT_REMOVEDIR);
        return holder >= 0;
}
