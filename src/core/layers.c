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
 *   run/sysextd/layers     the namespace, pinned by a bind mount of its nsfs file (as
 *                          `ip netns` pins a network namespace): the one mount this adds to
 *                          the host's table;
 *   run/sysextd/layers.id  that mount's unique id and the namespace's inode number, written
 *                          when it was pinned: it is ours by that identity, checked right
 *                          before it is used or detached;
 *   in the namespace       a tmpfs as its root, nothing of the host's tree (so it pins none
 *                          of the host's mounts), and each kept image mount at l/DEV-INO,
 *                          its file's device and inode numbers.
 *
 * The namespace is the staging worker's, emptied once the new tree was sent (staging.h): no
 * namespace is copied for it.  What a kept mount is (its verdict, hierarchies, units, verity,
 * the policy and certificates it was judged by) is the journal's record of the live tree
 * (state.json): a kept mount is reused only for an image whose file discovery found with that
 * record's identity, and only as the daemon reuses its own (the same cache_lookup()).  The
 * name cannot lead to another file's mount: the kept mount holds its file open, so the inode
 * number is not given to another file meanwhile.
 *
 * Kept: compatible raw images with content for a hierarchy, mounted without attributes (a
 * directory's bind mount costs nothing to make again; a noexec confext is mounted anew), where
 * detached mounts serve as overlay layers (Linux 6.15).  A run that builds trees keeps the
 * mounts of the images in them and drops the others; an unmerge, a transition of the daemon
 * (which keeps its own) and a run that keeps nothing drop the namespace, so a kept mount never
 * outlives the trees it was taken from by more than one transition.  A failure to keep is no
 * failure of the transition: the namespace is dropped and the next run mounts its images.
 *
 * Entering the namespace is setns(): this process steps in and out (mounts.h,
 * mount_ns_visit_begin()), its root and working directory put back as they were.
 */
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/nsfs.h>
#include <linux/openat2.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "fd-util.h"
#include "fileio.h"
#include "layers.h"
#include "log.h"
#include "mounts.h"
#include "util.h"

#define LAYERS_PIN "layers"
#define LAYERS_RECORD "layers.id"
#define LAYERS_DIR "l"

bool layers_image_eligible(const Image *img) {
        return img->verdict == IMAGE_COMPATIBLE && img->hierarchies != 0 && img->kind != IMAGE_DIRECTORY;
}

const char *layers_name(const struct stat *st, char buf[static LAYERS_NAME_MAX]) {
        snprintf(buf, LAYERS_NAME_MAX, LAYERS_DIR "/%" PRIu64 "-%" PRIu64, (uint64_t) st->st_dev, (uint64_t) st->st_ino);
        return buf;
}

/* The record: "MOUNT-ID NS-INODE\n". */
static int record_read(int journal_fd, uint64_t *ret_mount, uint64_t *ret_ns) {
        _cleanup_free_ char *text = NULL;
        unsigned long long m, ns;
        int r;

        r = read_file_at(journal_fd, LAYERS_RECORD, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS, 64, &text, NULL, NULL);
        if (r < 0)
                return r;
        if (sscanf(text, "%llu %llu", &m, &ns) != 2 || m == 0)
                return -EBADMSG;
        *ret_mount = m;
        *ret_ns = ns;
        return 0;
}

static int record_write(int journal_fd, uint64_t mount_id, uint64_t ns) {
        char text[64];
        _cleanup_close_ int fd = -EBADF;
        int n;

        /* No fsync: the record lives as long as the mount it names (run/ is gone at boot), and
         * a record lost only loses what was kept. */
        n = snprintf(text, sizeof(text), "%" PRIu64 " %" PRIu64 "\n", mount_id, ns);
        (void) unlinkat(journal_fd, LAYERS_RECORD ".tmp", 0);
        fd = openat(journal_fd, LAYERS_RECORD ".tmp", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return negative_errno();
        if (write(fd, text, n) != n)
                return errno > 0 ? -errno : -EIO;
        if (renameat(journal_fd, LAYERS_RECORD ".tmp", journal_fd, LAYERS_RECORD) < 0)
                return negative_errno();
        return 0;
}

/* Whether fd (opened on run/sysextd/layers) is the pinned namespace the record names. */
static bool pin_is_ours(int fd, uint64_t mount_id, uint64_t ns) {
        MountIdentity id;
        struct stat st;

        if (mount_identity_of_fd(fd, &id) < 0 || !id.is_root || id.unique_id != mount_id)
                return false;
        return fstat(fd, &st) >= 0 && st.st_ino == ns;
}

int layers_open(int journal_fd, int *ret_ns) {
        uint64_t mount_id, ns;
        _cleanup_close_ int fd = -EBADF;

        if (record_read(journal_fd, &mount_id, &ns) < 0)
                return 0;
        fd = openat(journal_fd, LAYERS_PIN, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        if (fd < 0 || !pin_is_ours(fd, mount_id, ns) || ioctl(fd, NS_GET_NSTYPE) != CLONE_NEWNS) {
                log_debug("The kept layers under %s are not the ones recorded; not using them.", LAYERS_PIN);
                return 0;
        }
        *ret_ns = TAKE_FD(fd);
        return 1;
}

/* Into the namespace, remembering the way back (v). */
static int ns_enter(int ns, MountNsVisit *v) {
        int r = mount_ns_visit_begin(v);

        if (r >= 0 && setns(ns, CLONE_NEWNS) < 0) {
                r = negative_errno();
                mount_ns_visit_done(v);
        }
        return r;
}

/* In the namespace: whether name is a kept mount; its superblock's device in *ret_dev. */
static bool kept_mount(const char *name, dev_t *ret_dev) {
        struct statx sx = {};

        if (statx(AT_FDCWD, name, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT, STATX_TYPE, &sx) < 0 || !S_ISDIR(sx.stx_mode) ||
            !(sx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) || !(sx.stx_attributes & STATX_ATTR_MOUNT_ROOT))
                return false;
        if (ret_dev)
                *ret_dev = makedev(sx.stx_dev_major, sx.stx_dev_minor);
        return true;
}

static bool fd_is_mount_root(int fd) {
        struct statx sx = {};

        return statx(fd, "", AT_EMPTY_PATH | AT_NO_AUTOMOUNT, STATX_TYPE, &sx) >= 0 &&
               (sx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) && (sx.stx_attributes & STATX_ATTR_MOUNT_ROOT);
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
        r = mount_ns_visit_end(&v);
        if (r < 0) {
                layers_fetched_free(&l);
                return r;
        }
        *ret = l;
        return 0;
}

/* In the namespace: the mounts of images at their names, and nothing else under l/. */
static int keep_here(Image *const *images, size_t n) {
        _cleanup_closedir_ DIR *d = NULL;
        struct dirent *de;
        int r = 0;

        if (mkdir(LAYERS_DIR, 0700) < 0 && errno != EEXIST)
                return negative_errno();
        for (size_t i = 0; i < n; i++) {
                char name[LAYERS_NAME_MAX];
                struct stat st;
                dev_t dev;

                if (fstat(images[i]->root_fd, &st) < 0)
                        return negative_errno();
                /* A disk image's usr partition is its root directory's "usr": not kept. */
                if (!fd_is_mount_root(images[i]->root_fd))
                        continue;
                layers_name(&images[i]->st, name);
                if (kept_mount(name, &dev)) {
                        if (dev == st.st_dev)
                                continue; /* reused: it is this mount's clone */
                        /* The same file, mounted anew (probed again: its record changed). */
                        r = kept_detach(name);
                        if (r < 0)
                                return r;
                } else if (mkdir(name, 0700) < 0 && errno != EEXIST)
                        return negative_errno();
                if (move_mount(images[i]->root_fd, "", AT_FDCWD, name, MOVE_MOUNT_F_EMPTY_PATH) < 0) {
                        /* Two paths to one file: kept once. */
                        if (kept_mount(name, &dev) && dev == st.st_dev)
                                continue;
                        return negative_errno();
                }
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
                for (size_t i = 0; !keep && i < n; i++) {
                        char kept[LAYERS_NAME_MAX];
                        keep = streq(layers_name(&images[i]->st, kept) + strlen(LAYERS_DIR "/"), de->d_name);
                }
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

static int pin(int journal_fd, int ns) {
        _cleanup_close_ int clone = -EBADF, target = -EBADF, fd = -EBADF;
        MountIdentity id;
        struct stat st;
        int r;

        /* An earlier pin left behind without its record is not ours to detach: nothing is
         * mounted over it, nothing is kept. */
        target = openat(journal_fd, LAYERS_PIN, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (target >= 0 && mount_identity_of_fd(target, &id) >= 0 && id.is_root)
                return -EBUSY;
        target = safe_close(target);
        fd = openat(journal_fd, LAYERS_PIN, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
        if (fd < 0)
                return negative_errno();
        if (fstat(fd, &st) < 0)
                return negative_errno();
        if (!S_ISREG(st.st_mode))
                return -EEXIST;
        fd = safe_close(fd);
        target = openat(journal_fd, LAYERS_PIN, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (target < 0)
                return negative_errno();
        clone = open_tree(ns, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
        if (clone < 0)
                return negative_errno();
        if (move_mount(clone, "", target, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
                return negative_errno();
        fd = openat(journal_fd, LAYERS_PIN, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        r = mount_identity_of_fd(fd, &id);
        if (r >= 0 && (!id.is_root || id.unique_id == 0))
                r = -EOPNOTSUPP;
        if (r >= 0 && fstat(ns, &st) < 0)
                r = negative_errno();
        if (r >= 0)
                r = record_write(journal_fd, id.unique_id, st.st_ino);
        if (r < 0 && id.is_root && umount2(FORMAT_PROC_FD_PATH(fd), MNT_DETACH) < 0)
                log_debug("Could not detach the kept layers' namespace just pinned: %m");
        return r;
}

int layers_keep(int journal_fd, int ns, bool fresh, Image *const *images, size_t n) {
        MountNsVisit v;
        int r, q;

        r = ns_enter(ns, &v);
        if (r < 0)
                goto fail;
        r = keep_here(images, n);
        q = mount_ns_visit_end(&v);
        if (q < 0)
                return q; /* not where we were: nothing more here */
        if (r >= 0 && fresh)
                r = pin(journal_fd, ns);
        if (r >= 0)
                return 0;
fail:
        log_debug("Could not keep the image mounts for the next run (%s); they are dropped.", strerror(-r));
        if (!fresh)
                (void) layers_drop(journal_fd);
        return r;
}

int layers_drop(int journal_fd) {
        uint64_t mount_id, ns;
        _cleanup_close_ int fd = -EBADF;
        int r = 0;

        if (record_read(journal_fd, &mount_id, &ns) < 0)
                return 0;
        fd = openat(journal_fd, LAYERS_PIN, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (fd >= 0 && pin_is_ours(fd, mount_id, ns)) {
                if (umount2(FORMAT_PROC_FD_PATH(fd), MNT_DETACH) < 0)
                        return log_debug_errno(errno, "Could not detach the kept layers: %m");
                r = 1;
                (void) unlinkat(journal_fd, LAYERS_PIN, 0);
        } else if (fd >= 0) {
                MountIdentity id;
                struct stat st;

                /* The file alone (its mount gone, by someone else's hand): removed; a mount
                 * there that is not ours is left alone. */
                if (mount_identity_of_fd(fd, &id) >= 0 && !id.is_root && fstat(fd, &st) >= 0 && S_ISREG(st.st_mode))
                        (void) unlinkat(journal_fd, LAYERS_PIN, 0);
                else
                        log_debug("The mount at %s is not the kept layers recorded; left alone.", LAYERS_PIN);
        }
        (void) unlinkat(journal_fd, LAYERS_RECORD, 0);
        return r;
}
