/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Host facts come from the base.
 *
 * What sysextd believes about the host — its os-release (which images are compatible), its
 * configuration (sysextd.conf, systemd's sysext.conf and confext.conf: the image policy,
 * the mutable mode), the certificates it trusts — must not be something an image supplied:
 * a confext shipping etc/os-release would otherwise choose which sysexts are compatible, and
 * one shipping etc/sysextd/sysextd.conf or a certificate would loosen the policy for every
 * later image.  So these are read from the root as it is below sysextd's trees, never
 * through a merged tree.
 *
 * The base is reached as the staging worker reaches it: a helper (a thread, base_work()) in a
 * mount namespace of its own (private: nothing it does propagates) takes every overlay of ours
 * (source "sysextd") off the top of each path below the root where one is mounted, then
 * clones the root's mount tree (open_tree CLONE|RECURSIVE) and hands the fd back.  Paths
 * resolve inside that detached copy, whose mounts live as long as the fd, and the helper's
 * namespace goes with it.  A foreign mount on top of one of our trees stays (it is what the
 * host shows there), and so does everything else.  With none of our overlays mounted, the
 * root itself is the base.
 *
 * A transition starts the helper when it begins (base_root_open_start()) and takes its
 * answer when it first needs a fact (base_root_open_finish()): the helper strips and clones
 * while the transition reads the journal and the mount table.
 */
#include <fcntl.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <unistd.h>

#include "base.h"
#include "fd-util.h"
#include "kernel.h"
#include "missing.h"
#include "mounts.h"
#include "overlay.h"
#include "util.h"

/* In the helper: our overlays off every path where one is on top, until none is. */
static int strip_ours(const char *root) {
        for (unsigned round = 0; round < 1024; round++) {
                _cleanup_strv_free_ char **targets = NULL;
                bool any = false;
                int r;

                r = mount_targets_of("overlay", OVERLAY_SOURCE, root, &targets);
                if (r < 0)
                        return r;
                STRV_FOREACH(t, targets) {
                        _cleanup_close_ int fd = openat_resolve(AT_FDCWD, *t, O_PATH | O_NOFOLLOW,
                                                                RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
                        MountEntry e = {};
                        bool ours;

                        if (fd == -ENOENT)
                                continue; /* gone meanwhile */
                        if (fd < 0)
                                return fd;
                        /* One that cannot be checked fails the whole: facts read through one
                         * of our trees are what this is for not to happen. */
                        r = mount_top_entry(fd, &e);
                        if (r < 0)
                                return r;
                        ours = streq(e.fstype, "overlay") && streq(e.source, OVERLAY_SOURCE);
                        mount_entry_done(&e);
                        if (!ours)
                                continue;
                        if (umount2(FORMAT_PROC_FD_PATH(fd), MNT_DETACH) < 0)
                                return negative_errno();
                        any = true;
                }
                if (!any)
                        return 0;
        }
        return -ELOOP;
}

/* The helper: a thread of ours, so that no process is copied for it (a fork costs the copy of
 * our page tables and, after it, a copy of every page either side writes).  Its mount namespace
 * is its own (unshare(CLONE_NEWNS) unshares the thread's file system context with it): the
 * mounts it takes off are gone there only, and its mount table is /proc/thread-self/mountinfo
 * (mounts.c reads that one, and keeps its cache per thread).  The namespace goes when the thread
 * ends; the clone it made is a detached tree of its own, which lives as long as its fd. */
struct BaseJob {
        pthread_t thread;
        char *root;
        int r;     /* the answer: >= 0 with tree, or a negative errno */
        int tree;
};

static void *base_work(void *userdata) {
        BaseJob *j = userdata;
        int k;

        if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
                j->r = -errno;
                return NULL;
        }
        k = strip_ours(j->root);
        if (k >= 0) {
                j->tree = open_tree(AT_FDCWD, j->root, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
                if (j->tree < 0)
                        k = -errno;
        }
        /* EPERM tells the caller "no mount namespace for this process" (unshare() above):
         * another step denied is another error. */
        j->r = k == -EPERM ? -EACCES : k;
        return NULL;
}

/* Waits for the helper and frees it; its answer (the tree, or the error) is returned. */
static int base_job_join(BaseOpen *b, int *ret_tree) {
        BaseJob *j = TAKE_PTR(b->job);
        int r;

        if (!j)
                return -EBADF;
        thread_join_here(j->thread);
        r = j->r;
        if (r >= 0 && ret_tree)
                *ret_tree = TAKE_FD(j->tree);
        safe_close(j->tree);
        free(j->root);
        free(j);
        return r;
}

void base_open_cancel(BaseOpen *b) {
        b->fd = safe_close(b->fd);
        /* A thread cannot be stopped from outside: it ends on its own (strip_ours() is bounded),
         * and its answer is not wanted. */
        (void) base_job_join(b, NULL);
}

bool base_open_pending(const BaseOpen *b) {
        return b->job || b->fd >= 0;
}

int base_root_open_start(int root_fd, const char *root, BaseOpen *ret) {
        _cleanup_strv_free_ char **targets = NULL;
        cpu_set_t elsewhere;
        BaseJob *j;
        int fd, r;

        *ret = (BaseOpen) { .fd = -EBADF };
        r = mount_targets_of("overlay", OVERLAY_SOURCE, root, &targets);
        if (r < 0)
                return r;
        if (!targets[0]) {
                fd = fcntl(root_fd, F_DUPFD_CLOEXEC, 3);
                if (fd < 0)
                        return negative_errno();
                ret->fd = fd;
                return 0;
        }

        j = calloc(1, sizeof(*j));
        if (!j)
                return -ENOMEM;
        *j = (BaseJob) { .tree = -EBADF, .root = strdup(root) };
        if (!j->root) {
                free(j);
                return -ENOMEM;
        }
        /* Probed here, not raced for by the helper (kernel.c caches what it learns). */
        (void) kernel_has(KERNEL_UNIQUE_MOUNT_ID);
        /* It is to strip and clone while the caller reads the journal and the mount table. */
        /* Off this CPU, where it would mostly wait until the caller blocks (util.h,
         * cpu_nudge_away()). */
        if (!thread_start_masked_on(&j->thread, base_work, j, cpu_mask_elsewhere(&elsewhere) ? &elsewhere : NULL)) {
                free(j->root);
                free(j);
                return -EAGAIN;
        }
        ret->job = j;
        return 0;
}

int base_root_open_finish(BaseOpen *b, int *ret_fd) {
        int tree = -EBADF, r;

        if (!b->job) {
                if (b->fd < 0)
                        return -EBADF;
                *ret_fd = TAKE_FD(b->fd);
                return 0;
        }
        r = base_job_join(b, &tree);
        if (r < 0)
                return r;
        *ret_fd = tree;
        return 0;
}

int base_root_open(int root_fd, const char *root, int *ret_fd) {
        BaseOpen b;
        int r;

        r = base_root_open_start(root_fd, root, &b);
        if (r >= 0)
                r = base_root_open_finish(&b, ret_fd);
        base_open_cancel(&b);
        return r;
}
