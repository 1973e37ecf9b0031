/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The staging worker.
 *
 * Why a worker: until Linux 6.15 overlayfs cannot take detached mounts as layers and a
 * detached mount cannot be attached to another detached mount.  So the new tree is built in
 * the private mount namespace of a child process, where nothing propagates out (its mounts
 * are made MS_SLAVE first), and is passed back as an open_tree(OPEN_TREE_CLONE) fd.  The
 * worker can also take our current overlays off the hierarchy, in its own namespace only, to
 * reach the base below them without disturbing anyone.
 *
 * Steps in the worker, per hierarchy K (all inside the private namespace, in a tmpfs on
 * run/sysextd/staging):
 *   1. clone every mount below the live hierarchy that the parent found visible
 *      (open_tree CLONE|RECURSIVE, no automount triggered; nested mounts come along); each
 *      must still be a mount root; the copies are made private, so that the unmount of the
 *      old tree's mounts, which propagates to their slaves, cannot reach them; when the old
 *      tree is writable, the directories above each mount point are first copied up through
 *      it (copy_up_ancestors(): the new tree must not cache them as lower-only);
 *   2. take our overlays off the hierarchy, each one checked by its device -> the base;
 *   3. bind the base to "b-K", write the marker layer "m-K" (with the base's owner and mode,
 *      since the top layer's root gives the merged root its attributes); images are used
 *      through their detached mount fds (Linux 6.15) or, before, attached at "iN"; each
 *      image's layer directory is opened without following a symlink, so no layer can lead
 *      out of its image;
 *   4. a writable tree's upper and work directory (mutable.h): the mutable directory and its
 *      fresh work directory as the parent opened them, or the hierarchy's own directory as
 *      reached in 2 with the work directory beside it, or a new tmpfs "e-K" (ephemeral);
 *   5. fsmount the overlay (layers "m-K", an imported mutable directory, the images top first,
 *      "b-K" unless the hierarchy is the upper directory) and attach it at "t-K";
 *   6. attach the clones from 1 at their paths on "t-K", each mount point resolved inside
 *      the overlay without a symlink; a missing one, a symlink, or a file where a directory
 *      is mounted (or the other way round) fails here, naming the path;
 *   7. open_tree(CLONE|RECURSIVE) "t-K" and send that fd to the parent.
 * When the worker exits, its namespace and everything mounted in it go away (unless the parent
 * keeps the namespace, emptied, below); the overlay's layers are private clones held by the
 * overlay itself, so the tree sent back stays whole.
 * On any failure the worker sends the message and exits: nothing outside it changed.
 *
 * Asked for it (a run in process that keeps its layers, layers.h), the worker also sends its
 * namespace (an nsfs fd) with the trees, and then empties it: a fresh tmpfs becomes its root
 * and everything of the host's tree it had copied is detached, so that the namespace, kept by
 * the parent, pins none of the host's mounts.  That costs the worker what its exit would have
 * (the copy is torn down either way), where a namespace made for the purpose would have copied
 * the host's tree first.  The parent takes the namespace only from a worker that exited 0.
 *
 * A worker that answered ends on its own: the caller that asks for its pid (the engine) swaps
 * the trees in meanwhile, and reaps it before it keeps the namespace and before it gives the
 * lock back (the worker holds the lock's fd, inherited, until it exits).  Until then its
 * namespace (a slave of the host's, our trees taken off) lives on: the swap propagates into it
 * too, and a listing of namespaces made meanwhile may show it, with the base below.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <linux/openat2.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>

#include "fd-util.h"
#include "json-util.h"
#include "kernel.h"
#include "missing.h"
#include "mounts.h"
#include "overlay.h"
#include "staging.h"
#include "util.h"

#ifdef SYSEXTD_TEST_HOOKS
#include "testhook.h"
#endif

typedef struct Worker {
        char *message;
        int error;
} Worker;

static int worker_fail(Worker *w, int error, const char *fmt, ...) _printf_(3, 4);
static int worker_fail(Worker *w, int error, const char *fmt, ...) {
        va_list ap;

        error = abs(error);
        errno = error;
        free(w->message);
        va_start(ap, fmt);
        if (vasprintf(&w->message, fmt, ap) < 0)
                w->message = NULL;
        va_end(ap);
        w->error = error;
        return -error;
}

static int attach_fd_at(int fd, const char *path) {
        if (mkdir(path, 0755) < 0 && errno != EEXIST)
                return negative_errno();
        return RET_NERRNO(move_mount(fd, "", AT_FDCWD, path, MOVE_MOUNT_F_EMPTY_PATH));
}

/* The live path, as a reader reaches it, without following a symlink on the way. */
static int open_live(const char *path) {
        return openat_resolve(AT_FDCWD, path, O_PATH | O_NOFOLLOW, RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
}

static int write_marker(const char *dir, const StagingRequest *req, const struct stat *base) {
        _cleanup_free_ char *names = NULL, *p = NULL, *gen = NULL;
        _cleanup_close_ int dfd = -EBADF;
        int r;

        if (mkdir(dir, 0755) < 0 && errno != EEXIST)
                return negative_errno();
        /* The top layer's root directory gives the merged root its owner and mode: the base's. */
        if (chown(dir, base->st_uid, base->st_gid) < 0 || chmod(dir, base->st_mode & 07777) < 0)
                return negative_errno();
        p = path_join(dir, OVERLAY_MARKER_DIR);
        if (!p)
                return -ENOMEM;
        if (mkdir(p, 0755) < 0 && errno != EEXIST)
                return negative_errno();
        dfd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return negative_errno();
        r = write_file_atomic_at(dfd, "id", req->id, 0444);
        if (r < 0)
                return r;
        if (asprintf(&gen, "%" PRIu64, req->generation) < 0)
                return -ENOMEM;
        r = write_file_atomic_at(dfd, "generation", gen, 0444);
        if (r < 0)
                return r;
        names = strv_join(req->names, "\n");
        if (!names)
                return -ENOMEM;
        return write_file_atomic_at(dfd, "extensions", names, 0444);
}

/* Step 1, for a writable old tree O: every directory between O's root and a child's mount
 * point copied up through O (a chown that changes nothing, which overlayfs performs by copying
 * up first).  The new tree N shares O's upper directory and looks these directories up in
 * step 6; a directory that is in a lower layer only when N looks it up stays "lower only" in
 * N's cache for as long as N is mounted, so a file that a writer creates in it through O
 * before the seal (which copies the directory up behind N's back) would be neither listed
 * nor opened in N, and N could not create there (ENOTEMPTY).  Copied up first, it is a
 * merged directory in N from the start: whatever O creates in it later is read from the
 * upper directory when N looks for it.  The mount point itself needs nothing: O cannot
 * change it while it is one.  Only our own top is written through, identified by its
 * device; a mount on the way (a nested child) ends the walk. */
static int copy_up_ancestors(Worker *w, const StagingRequest *req, const char *child) {
        _cleanup_close_ int top = -EBADF;
        _cleanup_free_ char *rel = NULL;
        const char *r0 = startswith(child, req->target);
        struct stat st;
        char *slash;

        if (!req->old_writable || !r0)
                return 0;
        top = open_live(req->target);
        if (top < 0 || fstat(top, &st) < 0)
                return worker_fail(w, top < 0 ? -top : errno, "Failed to open the live tree on %s: %m", req->target);
        if (st.st_dev != req->ours[0])
                return worker_fail(w, EBUSY, "The top of %s changed while the new tree was being built", req->target);
        rel = strdup(r0 + strspn(r0, "/"));
        if (!rel)
                return worker_fail(w, ENOMEM, "Out of memory");
        for (slash = strchr(rel, '/'); slash; slash = strchr(slash + 1, '/')) {
                _cleanup_close_ int dir = -EBADF;

                *slash = 0;
                dir = openat_resolve(top, rel, O_PATH | O_DIRECTORY | O_NOFOLLOW,
                                     RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV);
                *slash = '/';
                if (dir == -EXDEV)
                        break;
                if (dir < 0) {
                        errno = -dir;
                        return worker_fail(w, dir, "Failed to open the directories above the mount point %s in the writable tree: %m", child);
                }
                if (fchownat(dir, "", (uid_t) -1, (gid_t) -1, AT_EMPTY_PATH) < 0)
                        return worker_fail(w, errno, "Failed to copy up the directories above the mount point %s in the writable tree: %m", child);
        }
        return 0;
}

/* Step 1: clones of the mounts below the live hierarchy. */
static int clone_children(Worker *w, StagingRequest *req, int *fds) {
        size_t i = 0;

        STRV_FOREACH(c, req->children) {
                _cleanup_close_ int live = -EBADF;
                MountIdentity m;
                int r;

                r = copy_up_ancestors(w, req, *c);
                if (r < 0)
                        return r;

                live = open_live(*c);
                if (live < 0 || mount_identity_of_fd(live, &m) < 0 || !m.is_root)
                        return worker_fail(w, EBUSY,
                                           "The mounts below %s changed while the new tree was being built (%s is no longer a mount point)",
                                           req->target, *c);
                fds[i] = open_tree(live, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE | AT_EMPTY_PATH | AT_NO_AUTOMOUNT);
                if (fds[i] < 0)
                        return worker_fail(w, errno, "Failed to clone the mount at %s: %m", *c);
                /* A clone keeps its original's propagation: here, where every mount is a slave,
                 * each copy would be a slave of what the live one receives from, and so would
                 * receive the unmount of the old tree's copies below it — a nested mount
                 * (/opt/a/b under /opt/a) would vanish when the old top is detached.  Private
                 * copies receive nothing; attached beneath a shared parent they become peers
                 * of a group of their own, reaching every namespace as the tree does. */
                if (mount_setattr(fds[i], "", AT_EMPTY_PATH | AT_RECURSIVE, &(struct mount_attr) { .propagation = MS_PRIVATE },
                                  sizeof(struct mount_attr)) < 0)
                        return worker_fail(w, errno, "Failed to make the copy of the mount at %s private: %m", *c);
                i++;
        }
        return 0;
}

/* Step 2: our overlays off the top, each one checked by its device.  Only this private
 * namespace changes. */
static int reach_base(Worker *w, const StagingRequest *req) {
        for (size_t k = 0; k < req->n_ours; k++) {
                _cleanup_close_ int top = open_live(req->target);
                MountIdentity m;

                if (top < 0)
                        return worker_fail(w, top, "Failed to open %s: %m", req->target);
                if (mount_identity_of_fd(top, &m) < 0 || !m.is_root || !m.overlay || m.dev != req->ours[k])
                        return worker_fail(w, EBUSY,
                                           "The mounts at %s changed while the new tree was being built (expected sysextd's overlay on %u:%u on top)",
                                           req->target, major(req->ours[k]), minor(req->ours[k]));
                if (umount2(req->target, MNT_DETACH | UMOUNT_NOFOLLOW) < 0)
                        return worker_fail(w, errno, "Failed to reach the base of %s: %m", req->target);
        }
        return 0;
}

/* The directory of an image that is its layer for this hierarchy, as an O_PATH fd inside
 * the image: never through a symlink, never out of the image. */
static int open_layer(Worker *w, const Image *img, int image_root, const char *hierarchy, int *ret_fd) {
        const char *sub = img->usr_partition && streq(hierarchy, "usr") ? "." : hierarchy;

        *ret_fd = openat_resolve(image_root, sub, O_PATH | O_DIRECTORY, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
        if (*ret_fd < 0)
                return worker_fail(w, *ret_fd, "Failed to open %s in %s (a symlink or no directory?): %m", sub, img->path);
        return 0;
}

/* A directory the parent opened, reached again by its path in this namespace: overlayfs
 * takes only layers of the mounter's own namespace.  The same inode or a failure. */
static int reopen_here(Worker *w, int fd, int *ret_fd) {
        char target[PATH_MAX];
        struct stat a, b;
        ssize_t n;
        int here;

        n = readlink(FORMAT_PROC_FD_PATH(fd), target, sizeof(target) - 1);
        if (n < 0 || n >= (ssize_t) sizeof(target) - 1 || fstat(fd, &a) < 0)
                return worker_fail(w, errno ?: ENAMETOOLONG, "Failed to find a mutable directory again: %m");
        target[n] = 0;
        here = openat_resolve(AT_FDCWD, target, O_PATH | O_DIRECTORY, RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
        if (here < 0)
                return worker_fail(w, here, "Failed to open %s: %m", target);
        if (fstat(here, &b) < 0 || a.st_dev != b.st_dev || a.st_ino != b.st_ino) {
                safe_close(here);
                return worker_fail(w, EBUSY, "%s changed while the new tree was being built", target);
        }
        *ret_fd = here;
        return 0;
}

/* The upper and work directory of a writable tree (none for a read-only one), after the base
 * was reached.  An ephemeral tree's are on a tmpfs of its own, with the base's owner and
 * mode on the upper directory, whose root gives the merged root its attributes. */
static int stage_upper(Worker *w, StagingRequest *req, size_t k, const struct stat *base_st, char **ret_upper,
                       char **ret_work) {
        switch (req->upper) {
        case MUTABLE_UPPER_NONE:
                return 0;
        case MUTABLE_UPPER_DIR: {
                int r = reopen_here(w, req->upper_fd, &req->upper_fd_here);
                if (r >= 0)
                        r = reopen_here(w, req->work_fd, &req->work_fd_here);
                if (r < 0)
                        return r;
                *ret_upper = strdup(FORMAT_PROC_FD_PATH(req->upper_fd_here));
                *ret_work = strdup(FORMAT_PROC_FD_PATH(req->work_fd_here));
                break;
        }
        case MUTABLE_UPPER_HIERARCHY: {
                /* The hierarchy's own directory, as the base is reached here; its work
                 * directory beside it, reached the same way, so both are on one mount. */
                _cleanup_close_ int up = -EBADF, wk = -EBADF;
                _cleanup_free_ char *parent = NULL;
                const char *slash = strrchr(req->target, '/');
                MountIdentity a, b;
                struct statvfs sv;

                parent = slash && slash != req->target ? strndup(req->target, slash - req->target) : strdup("/");
                if (!parent)
                        return worker_fail(w, ENOMEM, "Out of memory");
                up = open_live(req->target);
                wk = openat_resolve(AT_FDCWD, parent, O_PATH | O_DIRECTORY, RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
                if (up < 0 || wk < 0)
                        return worker_fail(w, up < 0 ? up : wk, "Failed to open %s: %m", req->target);
                if (fstatvfs(up, &sv) >= 0 && (sv.f_flag & ST_RDONLY))
                        return worker_fail(w, EROFS, "Can't use '%s' as an upperdir as it is read-only", req->target);
                if (mount_identity_of_fd(up, &a) < 0 || mount_identity_of_fd(wk, &b) < 0 || a.is_root || a.id != b.id)
                        return worker_fail(w, EXDEV,
                                           "Unable to find a suitable workdir location for upperdir '%s' for host hierarchy '%s' - parent directory of the upperdir is in a different filesystem",
                                           req->target, req->target);
                *ret_upper = strdup(req->target);
                *ret_work = path_join(parent, req->work_name);
                break;
        }
        case MUTABLE_UPPER_TMPFS: {
                _cleanup_close_ int fs = fsopen("tmpfs", FSOPEN_CLOEXEC), m = -EBADF;
                char where[32];

                snprintf(where, sizeof(where), "e-%zu", k);
                if (fs < 0 || fsconfig(fs, FSCONFIG_SET_STRING, "source", "sysextd-ephemeral", 0) < 0 ||
                    fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
                        return worker_fail(w, errno, "Failed to create the ephemeral upper directory of %s: %m", req->target);
                m = fsmount(fs, FSMOUNT_CLOEXEC, 0);
                if (m < 0 || attach_fd_at(m, where) < 0)
                        return worker_fail(w, errno, "Failed to create the ephemeral upper directory of %s: %m", req->target);
                *ret_upper = path_join(where, "upper");
                *ret_work = path_join(where, "work");
                if (!*ret_upper || !*ret_work)
                        return worker_fail(w, ENOMEM, "Out of memory");
                if (mkdir(*ret_upper, base_st->st_mode & 07777) < 0 || mkdir(*ret_work, 0700) < 0 ||
                    chown(*ret_upper, base_st->st_uid, base_st->st_gid) < 0 || chmod(*ret_upper, base_st->st_mode & 07777) < 0)
                        return worker_fail(w, errno, "Failed to create the ephemeral upper directory of %s: %m", req->target);
                break;
        }
        default:
                return worker_fail(w, EINVAL, "Internal error: unknown upper directory");
        }
        if (!*ret_upper || !*ret_work)
                return worker_fail(w, ENOMEM, "Out of memory");
        return 0;
}

static int build_one(Worker *w, Image *images, StagingRequest *req, size_t k, const int *image_roots) {
        _cleanup_free_ char *base = NULL, *meta = NULL, *top = NULL, *msg = NULL, *upper = NULL, *work = NULL;
        _cleanup_strv_free_ char **layers = NULL;
        size_t n_children = strv_length(req->children);
        _cleanup_free_ int *child_fds = NULL, *layer_fds = NULL, *spec_fds = NULL;
        size_t n_spec = 0;
        _cleanup_close_ int base_fd = -EBADF, ovl_fd = -EBADF, top_fd = -EBADF;
        struct stat base_st;
        OverlaySpec spec;
        int r;

        child_fds = malloc(sizeof(int) * (n_children ?: 1));
        layer_fds = malloc(sizeof(int) * (req->n_layers ?: 1));
        /* The fd of each layer of the spec, in its order (-1: by path). */
        spec_fds = malloc(sizeof(int) * (req->n_layers + 3));
        if (!child_fds || !layer_fds || !spec_fds)
                return worker_fail(w, ENOMEM, "Out of memory");
        for (size_t i = 0; i < n_children; i++)
                child_fds[i] = -EBADF;
        for (size_t i = 0; i < req->n_layers; i++)
                layer_fds[i] = -EBADF;

        r = clone_children(w, req, child_fds);
        if (r < 0)
                goto finish;
        r = reach_base(w, req);
        if (r < 0)
                goto finish;

        if (asprintf(&base, "b-%zu", k) < 0 || asprintf(&meta, "m-%zu", k) < 0 || asprintf(&top, "t-%zu", k) < 0) {
                r = worker_fail(w, ENOMEM, "Out of memory");
                goto finish;
        }
        base_fd = open_tree(AT_FDCWD, req->target, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_NO_AUTOMOUNT | AT_SYMLINK_NOFOLLOW);
        if (base_fd < 0 || fstat(base_fd, &base_st) < 0) {
                r = worker_fail(w, errno, "Failed to bind the base %s: %m", req->target);
                goto finish;
        }
        if (req->base_layer) {
                r = attach_fd_at(base_fd, base);
                if (r < 0) {
                        r = worker_fail(w, r, "Failed to attach the base of %s in the staging area: %m", req->target);
                        goto finish;
                }
        }
        r = write_marker(meta, req, &base_st);
        if (r < 0) {
                r = worker_fail(w, r, "Failed to write the marker layer for %s: %m", req->target);
                goto finish;
        }
        r = stage_upper(w, req, k, &base_st, &upper, &work);
        if (r < 0)
                goto finish;

        /* Top first: the marker above every image, an imported mutable directory, the
         * images, the base at the bottom. */
        if (req->import_fd >= 0) {
                r = reopen_here(w, req->import_fd, &req->import_fd_here);
                if (r < 0)
                        goto finish;
        }
        if (strv_extend(&layers, meta) < 0 ||
            (req->import_fd_here >= 0 && strv_extend(&layers, FORMAT_PROC_FD_PATH(req->import_fd_here)) < 0)) {
                r = worker_fail(w, ENOMEM, "Out of memory");
                goto finish;
        }
        spec_fds[n_spec++] = -EBADF;
        if (req->import_fd_here >= 0)
                spec_fds[n_spec++] = req->import_fd_here;
        for (size_t i = 0; i < req->n_layers; i++) {
                const Image *img = &images[req->layers[i]];

                if (image_roots[req->layers[i]] < 0) {
                        r = worker_fail(w, EINVAL, "Internal error: image %s not staged", img->name);
                        goto finish;
                }
                r = open_layer(w, img, image_roots[req->layers[i]], req->hierarchy, &layer_fds[i]);
                if (r < 0)
                        goto finish;
                if (strv_push(&layers, strdup(FORMAT_PROC_FD_PATH(layer_fds[i]))) < 0) {
                        r = worker_fail(w, ENOMEM, "Out of memory");
                        goto finish;
                }
                spec_fds[n_spec++] = layer_fds[i];
        }
        if (req->base_layer && strv_extend(&layers, base) < 0) {
                r = worker_fail(w, ENOMEM, "Out of memory");
                goto finish;
        }
        spec_fds[n_spec++] = -EBADF;

        /* Step 5. */
        spec = (OverlaySpec) {
                .layers = layers, .layer_fds = spec_fds, .upper = upper, .work = work, .attrs = req->attrs,
                .options = req->options,
        };
        if (kernel_has(KERNEL_LOWERDIR_PLUS)) {
                r = overlay_mount(&spec, &ovl_fd, &msg);
                if (r >= 0)
                        r = attach_fd_at(ovl_fd, top);
        } else
                /* Before Linux 6.8 the layers go into one lowerdir= string, which fsconfig()
                 * limits to 256 bytes: the mount(2) options take a page. */
                r = overlay_mount_legacy(&spec, top, &msg);
        if (r < 0) {
                if (r == -ELOOP)
                        r = worker_fail(w, r, "Failed to build the overlay for %s: layers overlap (an image lies inside the hierarchy it extends?)%s%s",
                                        req->target, msg ? ": " : "", msg ?: "");
                else if (r == -E2BIG)
                        r = worker_fail(w, r, "Failed to build the overlay for %s: too many layers for this kernel (Linux 6.8 takes up to %d)",
                                        req->target, OVERLAY_LAYERS_MAX);
                else
                        r = worker_fail(w, r, "Failed to build the overlay for %s: %m%s%s", req->target,
                                        msg ? ": " : "", msg ?: "");
                goto finish;
        }

        /* Step 6: children at the same paths on the new overlay, each mount point resolved
         * inside the overlay without following a symlink (an image could otherwise point it
         * anywhere, even out of the tree). */
        if (n_children > 0) {
                top_fd = open(top, O_PATH | O_DIRECTORY | O_CLOEXEC);
                if (top_fd < 0) {
                        r = worker_fail(w, errno, "Failed to open the new tree for %s: %m", req->target);
                        goto finish;
                }
        }
        for (size_t i = 0; i < n_children; i++) {
                _cleanup_close_ int at = -EBADF;
                const char *rel = startswith(req->children[i], req->target);
                struct stat child_st, new_st;

                rel = rel ? rel + strspn(rel, "/") : "";
                at = openat_resolve(top_fd, rel, O_PATH | O_NOFOLLOW,
                                    RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV);
                if (at == -ELOOP) {
                        r = worker_fail(w, ELOOP,
                                        "The mount point %s is reached through a symbolic link in the new tree: an extension replaced it (or a directory above it) with one. Unmount it first, or remove that path from the extension",
                                        req->children[i]);
                        goto finish;
                }
                if (at == -ENOENT || at == -ENOTDIR) {
                        r = worker_fail(w, -at,
                                        "Mount point %s of the mount below %s is missing in the new tree: an extension that provided it is gone, or one hides it (a whiteout or an opaque directory). Unmount it first, or keep an image that has it",
                                        req->children[i], req->target);
                        goto finish;
                }
                if (at < 0) {
                        errno = -at;
                        r = worker_fail(w, at, "Failed to find the mount point %s in the new tree: %m", req->children[i]);
                        goto finish;
                }
                if (fstat(at, &new_st) < 0 || fstat(child_fds[i], &child_st) < 0) {
                        r = worker_fail(w, errno, "Failed to inspect the mount point %s: %m", req->children[i]);
                        goto finish;
                }
                if (S_ISLNK(new_st.st_mode)) {
                        r = worker_fail(w, ELOOP,
                                        "The mount point %s is a symbolic link in the new tree: an extension replaced it with one. Unmount it first, or remove that path from the extension",
                                        req->children[i]);
                        goto finish;
                }
                /* A file mounted where the new tree has a directory, or the other way round:
                 * the kernel would say only EINVAL or ENOTDIR. */
                if (S_ISDIR(child_st.st_mode) != S_ISDIR(new_st.st_mode)) {
                        r = worker_fail(w, ENOTDIR,
                                        "%s is a mount of a %s, but in the new tree it is a %s: an extension replaced the mount point. Unmount it first, or remove that path from the extension",
                                        req->children[i], S_ISDIR(child_st.st_mode) ? "directory" : "file",
                                        S_ISDIR(new_st.st_mode) ? "directory" : "file");
                        goto finish;
                }
                if (move_mount(child_fds[i], "", at, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0) {
                        r = worker_fail(w, errno, "Failed to re-create the mount %s on the new tree: %m", req->children[i]);
                        goto finish;
                }
        }

        /* Step 7. */
        req->tree_fd = open_tree(AT_FDCWD, top, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
        if (req->tree_fd < 0) {
                r = worker_fail(w, errno, "Failed to take the new tree for %s: %m", req->target);
                goto finish;
        }
        r = 0;
finish:
        for (size_t i = 0; i < n_children; i++)
                safe_close(child_fds[i]);
        for (size_t i = 0; i < req->n_layers; i++)
                safe_close(layer_fds[i]);
        return r;
}

/* unshare(CLONE_NEWNS), for a namespace the parent can pin (ret_ns: its fd, -EBADF if none
 * came).  Linux refuses to bind the nsfs file of a mount namespace that is not newer than the
 * binder's own (mnt_ns_loop(), by namespace id), and since Linux 6.18 those ids come from
 * per-CPU batches: a namespace made on one CPU can have a lower id than an older one made on
 * another.  So, where the first one's id is not above the parent's, once more on each other
 * CPU this process may run on (the CPU whose batch the parent's namespace came from gives a
 * higher one); each unshare() copies the last, which is still a copy of the host's tree. */
static int unshare_pinnable(int *ret_ns) {
        cpu_set_t allowed, one;
        uint64_t parent_id, id;
        int fd;

        safe_close(mount_ns_open_own(&parent_id));
        *ret_ns = -EBADF;
        if (unshare(CLONE_NEWNS) < 0)
                return negative_errno();
        fd = mount_ns_open_own(&id);
        if (fd < 0 || parent_id == 0 || id == 0 || id > parent_id) {
                *ret_ns = fd;
                return 0;
        }
        fd = safe_close(fd);
        if (sched_getaffinity(0, sizeof(allowed), &allowed) < 0)
                return 0;
        for (int cpu = 0; cpu < CPU_SETSIZE && fd < 0; cpu++) {
                if (!CPU_ISSET(cpu, &allowed) || cpu == sched_getcpu())
                        continue;
                CPU_ZERO(&one);
                CPU_SET(cpu, &one);
                if (sched_setaffinity(0, sizeof(one), &one) < 0)
                        continue;
                if (unshare(CLONE_NEWNS) < 0) {
                        (void) sched_setaffinity(0, sizeof(allowed), &allowed);
                        return negative_errno();
                }
                fd = mount_ns_open_own(&id);
                if (fd >= 0 && id <= parent_id)
                        fd = safe_close(fd);
        }
        (void) sched_setaffinity(0, sizeof(allowed), &allowed);
        *ret_ns = fd;
        return 0;
}

static int worker_run(Worker *w, int staging_dir_fd, Image *images, size_t n_images, StagingRequest *reqs,
                      size_t n_reqs, int *ret_ns) {
        _cleanup_free_ int *image_roots = NULL;
        _cleanup_close_ int fs_fd = -EBADF, area_fd = -EBADF;
        bool detached;
        int r;

        /* unshare() moves the working directory to the new namespace's copy of it: the
         * staging directory the parent resolved inside the root, reached without a path. */
        if (fchdir(staging_dir_fd) < 0)
                return worker_fail(w, errno, "Failed to enter the staging directory: %m");
        /* (Without the namespace's fd for the kept layers, nothing is kept.) */
        r = ret_ns ? unshare_pinnable(ret_ns) : unshare(CLONE_NEWNS) < 0 ? negative_errno() : 0;
        if (r < 0)
                return worker_fail(w, r, "Failed to create a private mount namespace: %m");
        if (mount(NULL, "/", NULL, MS_SLAVE | MS_REC, NULL) < 0)
                return worker_fail(w, errno, "Failed to make the staging namespace a slave: %m");
        /* A tmpfs of our own on the staging directory, entered through its fd. */
        fs_fd = fsopen("tmpfs", FSOPEN_CLOEXEC);
        if (fs_fd < 0 || fsconfig(fs_fd, FSCONFIG_SET_STRING, "source", "sysextd-staging", 0) < 0 ||
            fsconfig(fs_fd, FSCONFIG_SET_STRING, "mode", "0755", 0) < 0 || fsconfig(fs_fd, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
                return worker_fail(w, errno, "Failed to create the staging area: %m");
        area_fd = fsmount(fs_fd, FSMOUNT_CLOEXEC, MOUNT_ATTR_NODEV | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC);
        if (area_fd < 0)
                return worker_fail(w, errno, "Failed to create the staging area: %m");
        if (move_mount(area_fd, "", AT_FDCWD, ".", MOVE_MOUNT_F_EMPTY_PATH) < 0)
                return worker_fail(w, errno, "Failed to attach the staging area: %m");
        if (fchdir(area_fd) < 0)
                return worker_fail(w, errno, "Failed to enter the staging area: %m");

        /* Step 3, images: every image used by any hierarchy is staged once, as its mount fd
         * where the kernel takes detached layers, else attached at "iN". */
        detached = kernel_has(KERNEL_DETACHED_LAYERS);
        image_roots = malloc(sizeof(int) * (n_images ?: 1));
        if (!image_roots)
                return worker_fail(w, ENOMEM, "Out of memory");
        for (size_t i = 0; i < n_images; i++)
                image_roots[i] = -EBADF;
        for (size_t k = 0; k < n_reqs; k++)
                for (size_t i = 0; i < reqs[k].n_layers; i++) {
                        size_t idx = reqs[k].layers[i];
                        Image *img = &images[idx];
                        char where[32];

                        if (image_roots[idx] >= 0)
                                continue;
                        if (detached) {
                                image_roots[idx] = img->root_fd;
                                continue;
                        }
                        /* Raw images come as detached mounts of their file system, directories
                         * as detached binds made in the caller's namespace. */
                        snprintf(where, sizeof(where), "i%zu", idx);
                        r = attach_fd_at(img->root_fd, where);
                        if (r < 0)
                                return worker_fail(w, r, "Failed to stage %s: %m", img->path);
                        image_roots[idx] = open(where, O_PATH | O_DIRECTORY | O_CLOEXEC);
                        if (image_roots[idx] < 0)
                                return worker_fail(w, errno, "Failed to stage %s: %m", img->path);
                }

#ifdef SYSEXTD_TEST_HOOKS
        testhook_point("staging-images-attached", 0);
#endif

        for (size_t k = 0; k < n_reqs; k++) {
                r = build_one(w, images, &reqs[k], k, image_roots);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* The namespace sent to the parent becomes the kept layers' (layers.h): a fresh tmpfs as its
 * root, with an empty "l", and nothing else.  In the staging area, still the working
 * directory. */
static int empty_namespace(void) {
        _cleanup_close_ int fs_fd = -EBADF, root_fd = -EBADF;

        fs_fd = fsopen("tmpfs", FSOPEN_CLOEXEC);
        if (fs_fd < 0 || fsconfig(fs_fd, FSCONFIG_SET_STRING, "source", "sysextd-layers", 0) < 0 ||
            fsconfig(fs_fd, FSCONFIG_SET_STRING, "mode", "0700", 0) < 0 || fsconfig(fs_fd, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
                return negative_errno();
        root_fd = fsmount(fs_fd, FSMOUNT_CLOEXEC, MOUNT_ATTR_NODEV | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC);
        if (root_fd < 0 || mkdir("layers", 0700) < 0 ||
            move_mount(root_fd, "", AT_FDCWD, "layers", MOVE_MOUNT_F_EMPTY_PATH) < 0 || fchdir(root_fd) < 0)
                return negative_errno();
        /* The old root ends up on top of the new one, and goes with everything below it. */
        if (sys_pivot_root(".", ".") < 0 || umount2(".", MNT_DETACH) < 0 || chdir("/") < 0 || mkdir("l", 0700) < 0)
                return negative_errno();
        return 0;
}

static _noreturn_ void worker_main(int sock, int staging_dir_fd, Image *images, size_t n_images, StagingRequest *reqs,
                                   size_t n_reqs, bool want_ns) {
        Worker w = {};
        int fds[HIERARCHIES_MAX + 1], ns = -EBADF;
        size_t n_fds = 0;
        json_object *o = json_object_new_object();
        const char *s;
        int r;

        r = worker_run(&w, staging_dir_fd, images, n_images, reqs, n_reqs, want_ns ? &ns : NULL);
        /* The trees hold their layers: this copy of the images' fds goes before the answer,
         * while the parent still holds them, so that the last close of a clone (a namespace
         * dissolved, an RCU grace period waited for) is the parent's, made beside its swap
         * (layers.h, layers_release_start()), not this exit's, which the parent waits for. */
        for (size_t i = 0; i < n_images; i++)
                images[i].root_fd = safe_close(images[i].root_fd);
        json_object_object_add(o, "error", json_object_new_int(r < 0 ? w.error : 0));
        if (r < 0)
                json_object_object_add(o, "message", json_object_new_string(w.message ?: "Staging failed"));
        if (r >= 0 && ns >= 0)
                json_object_object_add(o, "namespace", json_object_new_boolean(true));
        s = json_object_to_json_string(o);
        for (size_t k = 0; r >= 0 && k < n_reqs; k++)
                fds[n_fds++] = reqs[k].tree_fd;
        if (r >= 0 && ns >= 0)
                fds[n_fds++] = ns;
        r = send_with_fds(sock, s, strlen(s), fds, n_fds);
        if (r < 0)
                _exit(1);
        /* Exit 2: the namespace sent is not empty, and not to be kept. */
        _exit(n_fds > n_reqs && empty_namespace() < 0 ? 2 : 0);
}

/* Waits for the worker: true when it exited 0; its wait status in *ret_status (0 when it
 * could not be waited for). */
static bool worker_wait(pid_t pid, int *ret_status) {
        int status = 0;
        pid_t w;

        while ((w = waitpid(pid, &status, 0)) < 0 && errno == EINTR)
                ;
        if (w < 0)
                status = 0;
        if (ret_status)
                *ret_status = status;
        return w > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

bool staging_reap(pid_t *pid) {
        pid_t p = *pid;

        *pid = 0;
        return p > 0 && worker_wait(p, NULL);
}

int staging_build(int staging_dir_fd, Image *images, size_t n_images, StagingRequest *reqs, size_t n_reqs, int *ret_ns,
                  pid_t *ret_pid, char **ret_message) {
        _cleanup_close_ int sock_parent = -EBADF, sock_child = -EBADF, ns = -EBADF;
        _cleanup_free_ char *reply = NULL;
        _cleanup_json_ json_object *o = NULL;
        int pair[2], fds[HIERARCHIES_MAX + 1], status = 0, r;
        uint64_t error = 0;
        size_t n_fds = 0;
        bool has_ns = false, exited_ok = false;
        pid_t pid;

        if (n_reqs > HIERARCHIES_MAX)
                return -E2BIG;
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) < 0)
                return negative_errno();
        sock_parent = pair[0];
        sock_child = pair[1];

        pid = fork();
        if (pid < 0)
                return negative_errno();
        if (pid == 0) {
                sock_parent = safe_close(sock_parent);
                /* Die with the parent: a worker must never outlive the transition. */
                (void) prctl(PR_SET_PDEATHSIG, SIGKILL);
                if (getppid() == 1)
                        _exit(1);
                (void) signal(SIGPIPE, SIG_IGN);
                worker_main(sock_child, staging_dir_fd, images, n_images, reqs, n_reqs, ret_ns != NULL);
        }
        sock_child = safe_close(sock_child);

        r = recv_with_fds(sock_parent, &reply, fds, HIERARCHIES_MAX + 1, &n_fds);
        /* Answered: the caller that takes the pid lets it end meanwhile. */
        if (r >= 0 && ret_pid)
                *ret_pid = pid;
        else
                exited_ok = worker_wait(pid, &status);
        if (r < 0)
                return set_message(ret_message, EIO, "The staging worker died before answering (%s)",
                                   WIFSIGNALED(status) ? strsignal(WTERMSIG(status)) : "no reply");

        o = json_parse_object(reply);
        if (!o || json_get_u64(o, "error", &error) < 0 || error > 4095) {
                for (size_t i = 0; i < n_fds; i++)
                        safe_close(fds[i]);
                return set_message(ret_message, EIO, "The staging worker sent an unreadable answer");
        }
        if (error != 0) {
                _cleanup_free_ char *m = NULL;
                for (size_t i = 0; i < n_fds; i++)
                        safe_close(fds[i]);
                (void) json_get_string(o, "message", 4096, &m);
                return set_message(ret_message, (int) error, "%s", m ?: "Staging failed");
        }
        if (json_get_bool(o, "namespace", &has_ns) >= 0 && has_ns && n_fds == n_reqs + 1)
                ns = fds[--n_fds];
        if (n_fds != n_reqs) {
                for (size_t i = 0; i < n_fds; i++)
                        safe_close(fds[i]);
                return set_message(ret_message, EIO, "The staging worker returned the wrong number of trees");
        }
        for (size_t i = 0; i < n_reqs; i++)
                reqs[i].tree_fd = fds[i];
        /* Emptied once the worker exited 0 after sending it (checked by the caller that
         * took the pid). */
        if (ret_ns && ns >= 0 && (ret_pid || exited_ok))
                *ret_ns = TAKE_FD(ns);
        return 0;
}
