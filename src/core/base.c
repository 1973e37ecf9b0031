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
 * The base is reached as the staging worker reaches it: a helper process in a mount
 * namespace of its own (private: nothing it does propagates) takes every overlay of ours
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
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base.h"
#include "fd-util.h"
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

void base_open_cancel(BaseOpen *b) {
        b->sock = safe_close(b->sock);
        b->fd = safe_close(b->fd);
        if (b->pid > 0) {
                /* Not answered: its answer is not wanted (its namespace and clone go with it). */
                if (!b->answered)
                        (void) kill(b->pid, SIGKILL);
                while (waitpid(b->pid, NULL, 0) < 0 && errno == EINTR)
                        ;
                b->pid = 0;
        }
        b->answered = false;
}

int base_root_open_start(int root_fd, const char *root, BaseOpen *ret) {
        _cleanup_strv_free_ char **targets = NULL;
        _cleanup_close_ int sock_parent = -EBADF, sock_child = -EBADF;
        int pair[2], fd, r;
        pid_t pid;

        *ret = (BaseOpen) { .sock = -EBADF, .fd = -EBADF };
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

        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) < 0)
                return negative_errno();
        sock_parent = pair[0];
        sock_child = pair[1];
        pid = fork();
        if (pid < 0)
                return negative_errno();
        if (pid == 0) {
                _cleanup_close_ int tree = -EBADF;
                int k;

                (void) prctl(PR_SET_PDEATHSIG, SIGKILL);
                sock_parent = safe_close(sock_parent);
                if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
                        k = -errno;
                        (void) send_with_fds(sock_child, &k, sizeof(k), NULL, 0);
                        _exit(1);
                }
                k = strip_ours(root);
                if (k >= 0) {
                        tree = open_tree(AT_FDCWD, root, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
                        if (tree < 0)
                                k = -errno;
                }
                /* EPERM tells the caller "no mount namespace for this process" (unshare()
                 * above): another step denied is another error. */
                if (k == -EPERM)
                        k = -EACCES;
                (void) send_with_fds(sock_child, &k, sizeof(k), k >= 0 ? &tree : NULL, k >= 0 ? 1 : 0);
                _exit(k >= 0 ? 0 : 1);
        }
        /* It is to strip and clone while the caller reads the journal and the mount table. */
        cpu_nudge_away(pid);
        ret->pid = pid;
        ret->sock = TAKE_FD(sock_parent);
        return 0;
}

int base_root_open_finish(BaseOpen *b, int *ret_fd) {
        _cleanup_free_ char *data = NULL;
        int fd = -EBADF, status = 0, r, k = -EIO;
        size_t n_fds = 0;

        if (b->pid == 0) {
                if (b->fd < 0)
                        return -EBADF;
                *ret_fd = TAKE_FD(b->fd);
                return 0;
        }
        cpu_nudge_back(b->pid);
        r = recv_with_fds(b->sock, &data, &fd, 1, &n_fds);
        b->sock = safe_close(b->sock);
        if (r >= 0)
                memcpy(&k, data, sizeof(k)); /* the helper always sends an int */
        if (r >= 0 && k >= 0 && n_fds == 1) {
                /* Its exit is left to _cancel(). */
                b->answered = true;
                *ret_fd = fd;
                return 0;
        }
        while (waitpid(b->pid, &status, 0) < 0)
                if (errno != EINTR)
                        break;
        b->pid = 0;
        if (r < 0)
                return r;
        if (n_fds > 0)
                safe_close(fd);
        return k < 0 ? k : -EIO;
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
