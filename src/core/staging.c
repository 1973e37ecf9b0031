/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The staging worker.
 *
 * Why a worker: until Linux 6.15 overlayfs cannot take detached mounts as layers and a
 * detached mount cannot be attached to another detached mount.  So the new tree is built in
 * the private mount namespace of a child process, where nothing propagates out (its mounts
 * are made MS_SLAVE first), and is passed back as an open_tree(OPEN_TREE_CLONE) fd.  The
 * worker can also take our current overlay off the hierarchy, in its own namespace only, to
 * reach the base below it without disturbing anyone.
 *
 * Steps in the worker, per hierarchy (all inside the private namespace):
 *   1. clone every mount below the live hierarchy (open_tree CLONE|RECURSIVE);
 *   2. detach our overlays from the hierarchy while the top is ours -> the base is visible;
 *   3. bind the base to "b-H", write the marker layer "m-H"; images are used through their
 *      detached mount fds ("/proc/self/fd/N", Linux 6.15) or, before, attached at "iN";
 *   4. fsmount the overlay (layers "iN/H"..., "b-H", "m-H") and attach it at "t-H";
 *   5. attach the clones from 1 at their paths on "t-H" (a missing mount point fails here);
 *   6. open_tree(CLONE|RECURSIVE) "t-H" and send that fd to the parent.
 * When the worker exits, its namespace and everything mounted in it go away; the overlay's
 * layers are private clones held by the overlay itself, so the tree sent back stays whole.
 * On any failure the worker sends the message and exits: nothing outside it changed.
 */
#include <fcntl.h>
#include <json-c/json.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "fd-util.h"
#include "missing.h"
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

static int write_marker(const char *dir, const StagingRequest *req) {
        _cleanup_free_ char *names = NULL, *p = NULL;
        _cleanup_close_ int dfd = -EBADF;
        int r;

        p = path_join(dir, OVERLAY_MARKER_DIR);
        if (!p)
                return -ENOMEM;
        r = mkdir_p_at(AT_FDCWD, p, 0755);
        if (r < 0)
                return r;
        dfd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return negative_errno();
        r = write_file_atomic_at(dfd, "id", req->id, 0444);
        if (r < 0)
                return r;
        names = strv_join(req->names, "\n");
        if (!names)
                return -ENOMEM;
        return write_file_atomic_at(dfd, "extensions", names, 0444);
}

/* Step 1: clones of the mounts below the live hierarchy.  A mount point that resolves to no
 * mount root in the visible tree belongs to a mount hidden under our overlay: skip it. */
static int clone_children(Worker *w, StagingRequest *req, int *fds) {
        size_t i = 0;

        STRV_FOREACH(c, req->children) {
                _cleanup_close_ int fd = -EBADF;
                bool is_root = false;

                fd = open_tree(AT_FDCWD, *c, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE | AT_SYMLINK_NOFOLLOW);
                if (fd < 0) {
                        if (errno == ENOENT || errno == ENOTDIR)
                                goto skip;
                        return worker_fail(w, errno, "Failed to clone the mount at %s: %m", *c);
                }
                if (fd_mount_id(fd, NULL, NULL, &is_root) < 0 || !is_root)
                        goto skip;
                fds[i] = TAKE_FD(fd);
        skip:
                i++;
        }
        return 0;
}

static int build_one(Worker *w, Image *images, StagingRequest *req, bool noexec, char *const *image_dirs) {
        _cleanup_free_ char *base = NULL, *meta = NULL, *top = NULL, *msg = NULL;
        _cleanup_strv_free_ char **layers = NULL;
        size_t n_children = strv_length(req->children);
        _cleanup_free_ int *child_fds = NULL;
        _cleanup_close_ int base_fd = -EBADF, ovl_fd = -EBADF;
        int r;

        child_fds = malloc(sizeof(int) * (n_children ?: 1));
        if (!child_fds)
                return worker_fail(w, ENOMEM, "Out of memory");
        for (size_t i = 0; i < n_children; i++)
                child_fds[i] = -EBADF;

        r = clone_children(w, req, child_fds);
        if (r < 0)
                goto finish;

        /* Step 2: reach the base.  This only changes our private namespace. */
        for (unsigned n = 0;; n++) {
                _cleanup_close_ int top_fd = open(req->target, O_PATH | O_DIRECTORY | O_CLOEXEC);
                if (top_fd < 0) {
                        r = worker_fail(w, errno, "Failed to open %s: %m", req->target);
                        goto finish;
                }
                if (!overlay_fd_is_ours(top_fd, NULL))
                        break;
                if (n >= 16 || umount2(req->target, MNT_DETACH) < 0) {
                        r = worker_fail(w, n >= 16 ? ELOOP : errno, "Failed to reach the base of %s: %m", req->target);
                        goto finish;
                }
        }

        if (asprintf(&base, "b-%s", req->hierarchy) < 0 || asprintf(&meta, "m-%s", req->hierarchy) < 0 ||
            asprintf(&top, "t-%s", req->hierarchy) < 0) {
                r = worker_fail(w, ENOMEM, "Out of memory");
                goto finish;
        }
        base_fd = open_tree(AT_FDCWD, req->target, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
        if (base_fd < 0) {
                r = worker_fail(w, errno, "Failed to bind the base %s: %m", req->target);
                goto finish;
        }
        r = attach_fd_at(base_fd, base);
        if (r < 0) {
                r = worker_fail(w, r, "Failed to attach the base of %s in the staging area: %m", req->target);
                goto finish;
        }
        r = write_marker(meta, req);
        if (r < 0) {
                r = worker_fail(w, r, "Failed to write the marker layer for %s: %m", req->target);
                goto finish;
        }

        for (size_t i = 0; i < req->n_layers; i++) {
                char *l;
                if (!image_dirs[req->layers[i]]) {
                        r = worker_fail(w, EINVAL, "Internal error: image %s not staged", images[req->layers[i]].name);
                        goto finish;
                }
                /* A disk image's usr partition is the layer for usr itself. */
                if ((images[req->layers[i]].usr_partition && streq(req->hierarchy, "usr")
                             ? (l = strdup(image_dirs[req->layers[i]])) == NULL
                             : asprintf(&l, "%s/%s", image_dirs[req->layers[i]], req->hierarchy) < 0) ||
                    strv_push(&layers, l) < 0) {
                        r = worker_fail(w, ENOMEM, "Out of memory");
                        goto finish;
                }
        }
        if (strv_extend(&layers, base) < 0 || strv_extend(&layers, meta) < 0) {
                r = worker_fail(w, ENOMEM, "Out of memory");
                goto finish;
        }

        /* Step 4. */
        r = overlay_mount(layers, noexec, &ovl_fd, &msg);
        if (r < 0) {
                if (r == -ELOOP)
                        r = worker_fail(w, r, "Failed to build the overlay for %s: layers overlap (an image lies inside the hierarchy it extends?)%s%s",
                                        req->target, msg ? ": " : "", msg ?: "");
                else if (r == -E2BIG)
                        r = worker_fail(w, r, "Failed to build the overlay for %s: too many layers for this kernel (needs Linux 6.8 for more than a few dozen)",
                                        req->target);
                else
                        r = worker_fail(w, r, "Failed to build the overlay for %s: %m%s%s", req->target,
                                        msg ? ": " : "", msg ?: "");
                goto finish;
        }
        r = attach_fd_at(ovl_fd, top);
        if (r < 0) {
                r = worker_fail(w, r, "Failed to attach the new overlay for %s in the staging area: %m", req->target);
                goto finish;
        }

        /* Step 5: children at the same paths on the new overlay. */
        for (size_t i = 0; i < n_children; i++) {
                _cleanup_free_ char *where = NULL;
                const char *rel;

                if (child_fds[i] < 0)
                        continue;
                rel = startswith(req->children[i], req->target);
                where = path_join(top, rel ?: "");
                if (!where) {
                        r = worker_fail(w, ENOMEM, "Out of memory");
                        goto finish;
                }
                if (move_mount(child_fds[i], "", AT_FDCWD, where, MOVE_MOUNT_F_EMPTY_PATH) < 0) {
                        if (errno == ENOENT || errno == ENOTDIR)
                                r = worker_fail(w, errno,
                                                "Mount point %s of the mount below %s is missing in the new tree; an extension that provided it is gone. Unmount it first, or keep an image that has it",
                                                req->children[i], req->target);
                        else
                                r = worker_fail(w, errno, "Failed to re-create the mount %s on the new tree: %m", req->children[i]);
                        goto finish;
                }
        }

        /* Step 6. */
        req->tree_fd = open_tree(AT_FDCWD, top, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
        if (req->tree_fd < 0) {
                r = worker_fail(w, errno, "Failed to take the new tree for %s: %m", req->target);
                goto finish;
        }
        r = 0;
finish:
        for (size_t i = 0; i < n_children; i++)
                safe_close(child_fds[i]);
        return r;
}

static int worker_run(Worker *w, const char *staging_dir, Image *images, size_t n_images, StagingRequest *reqs,
                      size_t n_reqs, bool noexec) {
        _cleanup_strv_free_ char **image_dirs = NULL;
        bool detached;
        int r;

        if (unshare(CLONE_NEWNS) < 0)
                return worker_fail(w, errno, "Failed to create a private mount namespace: %m");
        if (mount(NULL, "/", NULL, MS_SLAVE | MS_REC, NULL) < 0)
                return worker_fail(w, errno, "Failed to make the staging namespace a slave: %m");
        if (mount("sysextd-staging", staging_dir, "tmpfs", MS_NODEV | MS_NOSUID | MS_NOEXEC, "mode=0755") < 0)
                return worker_fail(w, errno, "Failed to mount the staging area on %s: %m", staging_dir);
        if (chdir(staging_dir) < 0)
                return worker_fail(w, errno, "Failed to enter %s: %m", staging_dir);

        /* Step 3, images: every image used by any hierarchy is staged once, as its mount fd
         * where the kernel takes detached layers, else attached at "iN". */
        detached = overlay_detached_layers_supported();
        image_dirs = calloc(n_images + 1, sizeof(char *));
        if (!image_dirs)
                return worker_fail(w, ENOMEM, "Out of memory");
        for (size_t k = 0; k < n_reqs; k++)
                for (size_t i = 0; i < reqs[k].n_layers; i++) {
                        size_t idx = reqs[k].layers[i];
                        Image *img = &images[idx];
                        char *where;

                        if (image_dirs[idx])
                                continue;
                        if (detached) {
                                if (asprintf(&where, "/proc/self/fd/%i", img->root_fd) < 0)
                                        return worker_fail(w, ENOMEM, "Out of memory");
                                image_dirs[idx] = where;
                                continue;
                        }
                        /* Raw images come as detached mounts of their file system, directories
                         * as detached binds made in the caller's namespace. */
                        if (asprintf(&where, "i%zu", idx) < 0)
                                return worker_fail(w, ENOMEM, "Out of memory");
                        image_dirs[idx] = where;
                        r = attach_fd_at(img->root_fd, where);
                        if (r < 0)
                                return worker_fail(w, r, "Failed to stage %s: %m", img->path);
                }

#ifdef SYSEXTD_TEST_HOOKS
        testhook_point("staging-images-attached", 0);
#endif

        for (size_t k = 0; k < n_reqs; k++) {
                r = build_one(w, images, &reqs[k], noexec, image_dirs);
                if (r < 0)
                        return r;
        }
        return 0;
}

static _noreturn_ void worker_main(int sock, const char *staging_dir, Image *images, size_t n_images,
                                   StagingRequest *reqs, size_t n_reqs, bool noexec) {
        Worker w = {};
        int fds[HIERARCHIES_MAX];
        json_object *o = json_object_new_object();
        const char *s;
        int r;

        r = worker_run(&w, staging_dir, images, n_images, reqs, n_reqs, noexec);
        json_object_object_add(o, "error", json_object_new_int(r < 0 ? w.error : 0));
        if (r < 0)
                json_object_object_add(o, "message", json_object_new_string(w.message ?: "Staging failed"));
        s = json_object_to_json_string(o);
        for (size_t k = 0; r >= 0 && k < n_reqs; k++)
                fds[k] = reqs[k].tree_fd;
        r = send_with_fds(sock, s, strlen(s), fds, r < 0 ? 0 : n_reqs);
        _exit(r < 0 ? 1 : 0);
}

int staging_build(const char *staging_dir, Image *images, size_t n_images, StagingRequest *reqs, size_t n_reqs,
                  bool noexec, char **ret_message) {
        _cleanup_close_ int sock_parent = -EBADF, sock_child = -EBADF;
        _cleanup_free_ char *reply = NULL;
        json_object *o, *v;
        int pair[2], fds[HIERARCHIES_MAX], status, r, error = 0;
        size_t n_fds = 0;
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
                worker_main(sock_child, staging_dir, images, n_images, reqs, n_reqs, noexec);
        }
        sock_child = safe_close(sock_child);

        r = recv_with_fds(sock_parent, &reply, fds, HIERARCHIES_MAX, &n_fds);
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
        if (r < 0) {
                if (asprintf(ret_message, "The staging worker died before answering (%s)",
                             WIFSIGNALED(status) ? strsignal(WTERMSIG(status)) : "no reply") < 0)
                        *ret_message = NULL;
                return -EIO;
        }

        o = json_tokener_parse(reply);
        if (o && json_object_object_get_ex(o, "error", &v))
                error = json_object_get_int(v);
        if (!o || error != 0) {
                if (o && json_object_object_get_ex(o, "message", &v))
                        *ret_message = strdup(json_object_get_string(v));
                json_object_put(o);
                for (size_t i = 0; i < n_fds; i++)
                        safe_close(fds[i]);
                return error > 0 ? -error : -EIO;
        }
        json_object_put(o);
        if (n_fds != n_reqs) {
                for (size_t i = 0; i < n_fds; i++)
                        safe_close(fds[i]);
                *ret_message = strdup("The staging worker returned the wrong number of trees");
                return -EIO;
        }
        for (size_t i = 0; i < n_reqs; i++)
                reqs[i].tree_fd = fds[i];
        return 0;
}
