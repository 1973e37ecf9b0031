/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The swap: every hierarchy of a transition changes, or none does.
 *
 *   0. check:   at every hierarchy the top is what the plan saw (our tree, by its
 *               identity; or the foreign mount or plain directory that was there) and the
 *               mounts below are the planned ones
 *   1. place:   every new tree beneath its old top, move_mount(MOVE_MOUNT_BENEATH), the top
 *               checked again right before each call; then, where nothing of ours was live,
 *               the new tree on top (move_mount), its planned top checked the same way
 *   2. seal:    every old top that is writable (mutable modes) made read-only, below
 *   3. detach:  every old top, lazily, through a pinned fd, its identity checked immediately
 *               before umount2(); the pinned fd (the old tree's last reference, unless another
 *               namespace keeps a copy or something on it is still open) goes to the caller
 *               who asks (SwapOptions.ret_old_fds)
 * A failure in 0, 1 or 2 takes back what 1 and 2 did, so every hierarchy shows its old tree: a tree
 * attached on top is detached again (it was visible for that moment); a tree placed beneath
 * was never visible and is taken back beneath the old top (below).  Step 3 is the commit:
 * from its first detach on, the transition only goes forward.
 *
 * Outcome if we stop after each step (crash, kill, error), two hierarchies A and B:
 *   after                 | readers see        | the next start (recover.c)
 *   ----------------------+--------------------+--------------------------------------------
 *   0                     | old A, old B       | discards the pending record
 *   1, A placed           | old A, old B       | error: A taken back; crash: A finished
 *                         |                    | forward, B discarded, the journal marked
 *                         |                    | incomplete (the next refresh completes B)
 *   1, A and B placed     | old A, old B       | error: both taken back; crash: both finished
 *   2, A sealed           | old A, read-only   | error (B cannot be sealed): A writable again
 *                         | for that moment    | at once, both taken back; crash: A and B
 *                         |                    | sealed, then finished forward; when B cannot
 *                         |                    | be sealed: A writable again, both kept as they
 *                         |                    | are, the record kept until it can
 *   3, A detached         | new A, old B       | finishes B (detaches its old top)
 *   3, both detached      | new A, new B       | commits the pending record
 *   1-3, a foreign        | the foreign mount  | keeps the record while it covers the tree;
 *   mount on top of A     | at A               | finishes once it is gone
 *   delayed: 1 done,      | old A, old B in    | keeps the record, and the delay, until its
 *   2 and 3 not run       | every namespace    | deadline (recover.c); each namespace
 *                         | until it commits   | switches when its old top is dropped there
 * Readers never see the bare base: before its old top is detached a new tree is covered by it,
 * after that it is the top.  Nothing of ours live (first merge, or a foreign mount such as a
 * /usr partition on top of which we merge): the new tree goes on top, never beneath a foreign
 * mount, and a foreign mount is never detached.
 *
 * Taking back a placed tree N from under the old top O: the kernel has no "unmount this
 * covered mount" call (umount2() on any path or fd at a stack reaches its top), but a
 * propagated unmount of a mount whose root is covered by exactly one other mount replaces it
 * with that one.  So: N's clones of the mounts below are detached (through N's own fd; they
 * propagate like N), N is made private (through its fd), and a helper process in a new mount
 * namespace, a peer of ours, makes its copy of O private and detaches it there (nothing
 * propagates from a private parent), then detaches its copy of N: that unmount propagates to
 * every peer and slave of the parent, where each copy of N goes and O takes its place.  Where
 * the parent does not propagate there is no peer to do this from; N then stays beneath O,
 * invisible (SWAP_BURIED), and status reports it.
 *
 * Writable trees (mutable modes): the new tree N takes over the upper directory of the old one,
 * O.  Two overlays on one upper directory are what overlayfs calls undefined, for a reason:
 * each caches what it looked up, and a name one of them creates, removes or copies up is not
 * seen by the other's cache.  So the two never write at the same time:
 *   - N is mounted with index=off (with the index the kernel refuses the second mount) and a
 *     work directory of its own (mutable.h), while O is still the top everywhere;
 *   - until the seal, N is reachable by nobody: it is beneath O.  The only names looked up in
 *     N are the paths to the re-created child mounts (staging.c, step 6), and every directory
 *     on those paths is copied up through O first (step 1), so N caches each of them as a
 *     merged directory, whose entries it reads from the upper directory when asked; the
 *     mount points themselves O cannot change while they are mount points.  So whatever O
 *     writes until the seal, at any depth, N sees at once;
 *   - seal: O's superblock is made read-only (fspick + FSCONFIG_CMD_RECONFIGURE "ro"), which
 *     reaches every mount of O in every namespace, lazily detached ones and fds included.
 *     The kernel grants it only while no file on O is open for writing (or mapped shared and
 *     writable); a write in flight finishes first (it holds the mount's write count).  All
 *     writable old trees of a transition are sealed, or none (swap_seal_all()): in rounds,
 *     each undone at once when one tree refuses, the one that refused tried first in the
 *     next round, for up to 2 s; then the transition is refused with the process named (in
 *     any mount namespace).  A refused or failed transition thus leaves every tree writable;
 *   - detach O: N is the top, and the only tree that writes.
 * Every write that returned success went to the upper directory, which N shows: the data of a
 * file lives in the upper file itself, shared by both.  A write attempted through O between
 * its seal and its detach fails with EROFS (it is not lost: it never succeeded, and a retry
 * reaches N).  That window is the one pause writers see; it is measured and logged with each
 * handover ("writes to them failed (read-only) for N ms"): about a millisecond here, longer
 * when the upper file system is slow to sync (overlayfs writes the upper file system back
 * before it turns read-only; sysextd syncs it just before, so little is left).  Writers are
 * failed, not blocked: blocking would need a freeze, which overlayfs does not implement, and
 * freezing the upper file system would stop every writer on it, with the host's file system
 * frozen for good if sysextd died meanwhile.
 * Other views of O (a bind of a directory of it made elsewhere, a namespace that does not
 * receive propagation, a process whose working directory is in it) stay read-only after the
 * handover: they are O, and O can never be writable again while N is.
 * Unmerge seals the same way before the detach, so nothing written after it is left in a tree
 * that is gone from the hierarchy.  An ephemeral tree's upper directory is its own tmpfs:
 * what was written to it goes with it, as with systemd-sysext.
 * A crash between the seals and the detach: recovery (recover.c) seals again before it
 * detaches (a crash before the seal left O writable); if it cannot, both trees stay as they
 * are, O writable on top, and transitions are refused until the file is closed.  A writable
 * overlay from source "sysextd" without a record stops writable trees from being built (it
 * may share their upper directory) and work directories from being removed.
 *
 * Delayed (o->delay, sysextd(8) DELAYED UPDATES): steps 0 and 1 only.  Every new tree waits
 * beneath its old top, which stays, in every namespace that receives propagation (one
 * propagation, as always); where nothing of ours was live the new tree goes on top as usual
 * (there is nothing to wait for).  Detaching the old top later, in one namespace (delay.c) or
 * on the host (recovery's FINISH, which propagation takes to every namespace that still has
 * it), is step 3.  Writable old trees are refused before step 1: two writable overlays on one
 * upper directory for the length of a delay is what step 2 exists to prevent.
 *
 * Degraded mode (no MOVE_MOUNT_BENEATH, only when the configuration allows it): per
 * hierarchy, detach old, then attach new: readers see the base in between, as with
 * systemd-sysext, and a failure stops with the hierarchies before it changed.
 */
#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>

#include "fd-util.h"
#include "fileio.h"
#include "inspect.h"
#include "kernel.h"
#include "log.h"
#include "missing.h"
#include "swap.h"
#include "util.h"

#ifdef SYSEXTD_TEST_HOOKS
#include "testhook.h"
#endif

static const char *const state_names[_SWAP_STATE_MAX] = {
        [SWAP_UNTOUCHED] = "untouched",   [SWAP_PLACED] = "placed",         [SWAP_ATTACHED] = "attached",
        [SWAP_REPLACED] = "replaced",     [SWAP_REPLACED_GAP] = "replaced-gap", [SWAP_DETACHED] = "detached",
        [SWAP_ROLLED_BACK] = "rolled-back", [SWAP_BURIED] = "buried",       [SWAP_COVERED] = "covered",
        [SWAP_DELAYED] = "delayed",
};

const char *swap_state_to_string(SwapState s) {
        return s >= 0 && s < _SWAP_STATE_MAX ? state_names[s] : NULL;
}

int swap_explain(int r, const char *path, const char *what, char **ret_message) {
        const char *why;

        switch (-r) {
        case EINVAL:
                why = "mount propagation would overmount it, or it is not a mount the kernel lets us stack beneath";
                break;
        case ENOSPC:
                why = "the mount limit is reached (see /proc/sys/fs/mount-max)";
                break;
        case ELOOP:
                why = "the new tree would contain the place it is mounted on";
                break;
        case EPERM:
                why = "permission denied (CAP_SYS_ADMIN in the initial user namespace is needed)";
                break;
        default:
                why = strerror(-r);
        }
        return set_message(ret_message, r, "Kernel refused to %s %s: %s.", what, path, why);
}

static int open_live(int root_fd, const char *rel) {
        return hierarchy_open(root_fd, rel);
}

/* The mount on top of a path, for messages. */
static char *describe_top(int fd) {
        MountIdentity m;
        MountEntry e = {};
        char *s;

        if (mount_identity_of_fd(fd, &m) < 0 || mountinfo_find(m.id, &e) < 0)
                return strdup("an unknown mount");
        s = mount_entry_describe(&e);
        mount_entry_done(&e);
        return s;
}

int tree_detach_pinned(int root_fd, const char *rel, const char *path, const Tree *t, int *ret_fd, char **ret_message) {
        _cleanup_free_ char *why = NULL, *what = NULL;
        _cleanup_close_ int fd = -EBADF;
        int r;

        fd = open_live(root_fd, rel);
        if (fd < 0)
                return swap_explain(fd, path, "open", ret_message);
        /* The check and the detach are two calls on one pinned fd; umount2() takes what is on
         * top there, which the check has just identified. */
        r = tree_check_fd(t, fd, &why);
        if (r < 0)
                return swap_explain(r, path, "inspect", ret_message);
        if (r == 0) {
                what = describe_top(fd);
                return set_message(ret_message, EBUSY,
                                   "The top of %s is %s (%s), not sysextd's tree; it was not detached.", path,
                                   strna(what), strna(why));
        }
        if (umount2(FORMAT_PROC_FD_PATH(fd), MNT_DETACH) < 0)
                return swap_explain(negative_errno(), path, "detach the old tree from", ret_message);
        if (ret_fd)
                *ret_fd = TAKE_FD(fd);
        return 0;
}

int tree_detach(int root_fd, const char *rel, const char *path, const Tree *t, char **ret_message) {
        return tree_detach_pinned(root_fd, rel, path, t, NULL, ret_message);
}

int tree_seal_fd(int fd, bool ro) {
        _cleanup_close_ int fs = fspick(fd, "", FSPICK_EMPTY_PATH | FSPICK_CLOEXEC | FSPICK_NO_AUTOMOUNT);

        if (fs < 0)
                return negative_errno();
        if (fsconfig(fs, FSCONFIG_SET_FLAG, ro ? "ro" : "rw", NULL, 0) < 0 ||
            fsconfig(fs, FSCONFIG_CMD_RECONFIGURE, NULL, NULL, 0) < 0)
                return negative_errno();
        return 0;
}

static int push_u64(uint64_t **a, size_t *n, uint64_t v) {
        uint64_t *x = reallocarray(*a, *n + 1, sizeof(uint64_t));

        if (!x)
                return -ENOMEM;
        x[(*n)++] = v;
        *a = x;
        return 0;
}

/* Whether process 'pid' is the first met of its mount namespace (recorded in *seen): 1 yes,
 * with its mount table in *ret_table and the namespace's inode in *ret_ns (if not NULL); 0 no
 * (or it is gone); < 0 out of memory. */
static int namespace_first_met(const char *pid, uint64_t **seen, size_t *n_seen, char **ret_table, uint64_t *ret_ns) {
        char path[300];
        struct stat st;

        snprintf(path, sizeof(path), "%s%s/ns/mnt", proc_prefix(), pid);
        if (stat(path, &st) < 0)
                return 0;
        if (ret_ns)
                *ret_ns = st.st_ino;
        for (size_t i = 0; i < *n_seen; i++)
                if ((*seen)[i] == (uint64_t) st.st_ino)
                        return 0;
        if (push_u64(seen, n_seen, st.st_ino) < 0)
                return -ENOMEM;
        snprintf(path, sizeof(path), "%s%s/mountinfo", proc_prefix(), pid);
        return read_file_at(AT_FDCWD, path, 0, 64U << 20, ret_table, NULL, NULL) < 0 ? 0 : 1;
}

/* Every mount of the file system 'dev', in every mount namespace: mount ids are unique
 * system-wide, and each namespace's mount table is read once, from its first process. */
static int mounts_of_fs(dev_t dev, uint64_t **ret, size_t *ret_n) {
        _cleanup_closedir_ DIR *proc = opendir(proc_prefix()[0] ? "/proc" : ".");
        _cleanup_free_ uint64_t *ids = NULL, *seen = NULL;
        size_t n_ids = 0, n_seen = 0;
        struct dirent *p;

        if (!proc)
                return negative_errno();
        while ((p = readdir(proc))) {
                _cleanup_free_ char *table = NULL;
                int r;

                if (p->d_name[0] < '1' || p->d_name[0] > '9')
                        continue;
                r = namespace_first_met(p->d_name, &seen, &n_seen, &table, NULL);
                if (r < 0)
                        return r;
                if (r == 0)
                        continue;
                for (const char *l = table; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
                        unsigned long long id;
                        unsigned maj, min;

                        if (sscanf(l, "%llu %*u %u:%u", &id, &maj, &min) != 3 || makedev(maj, min) != (dev_t) dev)
                                continue;
                        if (push_u64(&ids, &n_ids, id) < 0)
                                return -ENOMEM;
                }
        }
        *ret = TAKE_PTR(ids);
        *ret_n = n_ids;
        return 0;
}

/* "process 123 (comm) VERB TARGET REST" */
static char *describe_process(const char *pid, const char *verb, const char *target, const char *rest) {
        _cleanup_free_ char *comm = NULL, *safe_comm = NULL, *safe_target = NULL, *s = NULL;
        char path[300];

        snprintf(path, sizeof(path), "%s%s/comm", proc_prefix(), pid);
        if (read_file_at(AT_FDCWD, path, 0, 256, &comm, NULL, NULL) >= 0)
                comm[strcspn(comm, "\n")] = 0;
        if (asprintf(&s, "process %s (%s) %s %s%s", pid, string_safe(strna(comm), &safe_comm), verb,
                     string_safe(target, &safe_target), rest) < 0)
                return NULL;
        return TAKE_PTR(s);
}

/* Appends view v (taken) to the list *out, "; "-separated, unless max are there already
 * (counted in *more then). */
static int add_view(char **out, size_t *n, size_t *more, size_t max, char *v) {
        _cleanup_free_ char *view = v;
        char *s;

        if (!view)
                return -ENOMEM;
        if (*n >= max) {
                (*more)++;
                return 0;
        }
        s = strjoin3(*out ?: "", *out ? "; " : "", view);
        if (!s)
                return -ENOMEM;
        free(*out);
        *out = s;
        (*n)++;
        return 0;
}

static char *format(const char *fmt, ...) _printf_(1, 2);
static char *format(const char *fmt, ...) {
        va_list ap;
        char *s;
        int k;

        va_start(ap, fmt);
        k = vasprintf(&s, fmt, ap);
        va_end(ap);
        return k < 0 ? NULL : s;
}

/* Undoes mountinfo's octal escapes ("\\040" for a space) in place. */
static void mountinfo_unescape(char *s) {
        char *w = s;

        for (const char *r = s; *r; r++) {
                if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' && r[2] <= '7' && r[3] >= '0' && r[3] <= '7') {
                        *w++ = (char) (((r[1] - '0') << 6) | ((r[2] - '0') << 3) | (r[3] - '0'));
                        r += 3;
                } else
                        *w++ = *r;
        }
        *w = 0;
}

/* Views of the file system 'dev' (an old writable tree) that its detach does not take
 * away, for the warning before a handover: they keep the old tree, read-only from the seal
 * on.  A mount of a directory inside it (a bind made elsewhere, root not "/"), a copy in a
 * namespace that receives no propagation (neither shared nor a slave), and a process whose
 * working or root directory is in it; in this namespace also a mount of all of it anywhere but
 * at path_here.  At most 'max' of them, "and N more" after. */
static char *other_views(dev_t dev, const char *path_here, size_t max) {
        _cleanup_closedir_ DIR *proc = opendir(proc_prefix()[0] ? "/proc" : ".");
        _cleanup_free_ uint64_t *seen = NULL;
        _cleanup_free_ char *out = NULL;
        size_t n_seen = 0, n = 0, more = 0;
        struct stat own;
        struct dirent *p;

        if (!proc || stat(proc_prefix()[0] ? "/proc/self/ns/mnt" : "self/ns/mnt", &own) < 0)
                return NULL;
        while ((p = readdir(proc))) {
                _cleanup_free_ char *table = NULL;
                char path[300];
                uint64_t ns = 0;
                bool here;
                int r;

                if (p->d_name[0] < '1' || p->d_name[0] > '9')
                        continue;
                for (int root = 0; root <= 1; root++) {
                        char target[PATH_MAX];
                        ssize_t l;

                        struct statx sx;

                        snprintf(path, sizeof(path), "%s%s/%s", proc_prefix(), p->d_name, root ? "root" : "cwd");
                        /* Cached attributes only: a directory on a hung network file system
                         * must not hang the swap. */
                        if (statx(AT_FDCWD, path, AT_STATX_DONT_SYNC, STATX_INO, &sx) < 0 ||
                            makedev(sx.stx_dev_major, sx.stx_dev_minor) != dev)
                                continue;
                        l = readlink(path, target, sizeof(target) - 1);
                        target[l > 0 ? l : 0] = 0;
                        if (add_view(&out, &n, &more, max,
                                     describe_process(p->d_name, root ? "has its root directory in" : "has its working directory in",
                                                      target, "")) < 0)
                                return NULL;
                }
                r = namespace_first_met(p->d_name, &seen, &n_seen, &table, &ns);
                if (r <= 0)
                        continue;
                here = ns == (uint64_t) own.st_ino;
                for (char *l = table, *next; l && *l; l = next) {
                        _cleanup_free_ char *root_buf = NULL, *where_buf = NULL;
                        char *field[5], *save = NULL, *v;
                        const char *root, *where;
                        unsigned maj, min;
                        size_t k;

                        next = strchr(l, '\n');
                        if (next)
                                *next++ = 0;
                        /* "id parent maj:min root mount-point options [optional fields] - ...":
                         * the paths with the kernel's octal escapes undone, then escaped again
                         * for people (they are another process's). */
                        for (k = 0; k < 5; k++) {
                                field[k] = strtok_r(k == 0 ? l : NULL, " ", &save);
                                if (!field[k])
                                        break;
                        }
                        if (k < 5 || sscanf(field[2], "%u:%u", &maj, &min) != 2 || makedev(maj, min) != (dev_t) dev)
                                continue;
                        mountinfo_unescape(field[3]);
                        mountinfo_unescape(field[4]);
                        root = string_safe(field[3], &root_buf);
                        where = string_safe(field[4], &where_buf);
                        if (!root || !where)
                                return NULL;
                        if (!streq(field[3], "/"))
                                v = here ? format("its directory %s is mounted at %s", root, where)
                                         : format("its directory %s is mounted at %s in the mount namespace of process %s", root,
                                                  where, p->d_name);
                        else if (here && !streq(field[4], path_here))
                                v = format("it is mounted at %s too", where);
                        else if (!here && save && !strstr(save, " shared:") && !strstr(save, " master:"))
                                v = format("the mount namespace of process %s has it at %s and receives no changes",
                                           p->d_name, where);
                        else
                                continue;
                        if (add_view(&out, &n, &more, max, v) < 0)
                                return NULL;
                }
        }
        if (more > 0) {
                char *s = format("%s; and %zu more", strempty(out), more);

                if (!s)
                        return NULL;
                free(out);
                out = s;
        }
        return TAKE_PTR(out);
}

/* Who keeps the file system 'dev' (an old writable tree) from being sealed, in any mount
 * namespace, for the refusal: a file open for writing through any of its mounts, or a file
 * of it mapped shared and writable (the mapping holds the write access after the file is
 * closed).  NULL if no process does (a kernel user, such as a loop device backed by one of
 * its files). */
static char *find_writer(dev_t dev) {
        _cleanup_closedir_ DIR *proc = NULL;
        _cleanup_free_ uint64_t *ids = NULL;
        size_t n_ids = 0;
        struct dirent *p;

        if (mounts_of_fs(dev, &ids, &n_ids) < 0)
                return NULL;
        proc = opendir(proc_prefix()[0] ? "/proc" : ".");
        while (proc && (p = readdir(proc))) {
                _cleanup_closedir_ DIR *fds = NULL;
                _cleanup_free_ char *maps = NULL;
                char dir[300];
                struct dirent *f;

                if (p->d_name[0] < '1' || p->d_name[0] > '9')
                        continue;
                snprintf(dir, sizeof(dir), "%s%s/fd", proc_prefix(), p->d_name);
                fds = opendir(dir);
                while (fds && (f = readdir(fds))) {
                        _cleanup_free_ char *info = NULL;
                        unsigned long long flags = 0, mnt = 0;
                        char path[600], target[PATH_MAX];
                        bool ours = false;
                        const char *l;
                        ssize_t n;

                        if (f->d_name[0] == '.')
                                continue;
                        snprintf(path, sizeof(path), "%s%s/fdinfo/%s", proc_prefix(), p->d_name, f->d_name);
                        if (read_file_at(AT_FDCWD, path, 0, 4096, &info, NULL, NULL) < 0)
                                continue;
                        l = strstr(info, "flags:");
                        if (!l || sscanf(l, "flags: %llo", &flags) != 1 || (flags & O_ACCMODE) == O_RDONLY)
                                continue;
                        l = strstr(info, "mnt_id:");
                        if (!l || sscanf(l, "mnt_id: %llu", &mnt) != 1)
                                continue;
                        for (size_t i = 0; i < n_ids && !ours; i++)
                                ours = ids[i] == mnt;
                        if (!ours)
                                continue;
                        snprintf(path, sizeof(path), "%s%s/fd/%s", proc_prefix(), p->d_name, f->d_name);
                        n = readlink(path, target, sizeof(target) - 1);
                        target[n > 0 ? n : 0] = 0;
                        return describe_process(p->d_name, "holds", target, " open for writing");
                }
                snprintf(dir, sizeof(dir), "%s%s/maps", proc_prefix(), p->d_name);
                if (read_file_at(AT_FDCWD, dir, 0, 64U << 20, &maps, NULL, NULL) < 0)
                        continue;
                for (const char *l = maps; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
                        char perms[8], file[PATH_MAX];
                        unsigned maj, min;
                        const char *e;
                        size_t len;
                        int at = 0;

                        if (sscanf(l, "%*s %7s %*s %x:%x %*u %n", perms, &maj, &min, &at) != 3 || at == 0 ||
                            perms[1] != 'w' || perms[3] != 's' || makedev(maj, min) != (dev_t) dev)
                                continue;
                        e = strchrnul(l + at, '\n');
                        len = MIN((size_t) (e - (l + at)), sizeof(file) - 1);
                        memcpy(file, l + at, len);
                        file[len] = 0;
                        return describe_process(p->d_name, "has", file, " mapped shared and writable (closing the file does not end that; unmapping it or ending the process does)");
                }
        }
        return NULL;
}

void swap_unseal_all(SwapTarget *targets, size_t n) {
        for (size_t i = 0; i < n; i++) {
                _cleanup_close_ int fd = -EBADF;

                if (!targets[i].sealed)
                        continue;
                fd = open_live(targets[i].root_fd, targets[i].rel);
                if (fd >= 0 && tree_check_fd(targets[i].old, fd, NULL) > 0 && tree_seal_fd(fd, false) >= 0) {
                        targets[i].sealed = false;
                        targets[i].sealed_at = 0;
                }
        }
}

/* Step 2 for one target, one attempt: the old top, checked by its identity, made
 * read-only.  0: sealed; 1: a file on it is open for writing (the kernel refuses the seal,
 * and no writer notices the attempt); < 0: error, *ret_message says what. */
static int seal_once(SwapTarget *t, char **ret_message) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *why = NULL;
        int r;

        fd = open_live(t->root_fd, t->rel);
        if (fd < 0)
                return swap_explain(fd, t->path, "open", ret_message);
        r = tree_check_fd(t->old, fd, &why);
        if (r < 0)
                return swap_explain(r, t->path, "inspect", ret_message);
        if (r == 0)
                return set_message(ret_message, EBUSY, "The top of %s changed during the swap (%s).", t->path, strna(why));
        t->sealed_at = now_monotonic_usec();
        r = tree_seal_fd(fd, true);
        if (r < 0)
                t->sealed_at = 0;
        if (r == -EBUSY)
                return 1;
        if (r < 0)
                return swap_explain(r, t->path, "make the old tree read-only on", ret_message);
        t->sealed = true;
#ifdef SYSEXTD_TEST_HOOKS
        testhook_point("swap-seal-one", 0);
#endif
        return 0;
}

static char *writer_of(const SwapTarget *t) {
        _cleanup_close_ int fd = open_live(t->root_fd, t->rel);
        struct stat st;

        return fd >= 0 && fstat(fd, &st) >= 0 ? find_writer(st.st_dev) : NULL;
}

/* Step 2: every writable old top sealed, or none.  A seal is granted only while no file on
 * the tree is open for writing; waiting for one tree must not leave another read-only, so
 * the seals are taken in rounds: a round seals the trees one after another and, when one
 * refuses, unseals those it sealed at once and starts again after a millisecond, with the
 * one that refused first — while it stays busy, later rounds fail at their first step and
 * seal nothing.  Trees on which a process (in any mount namespace) holds a file open for
 * writing, or mapped shared and writable, go first from the start.  So a refusal (after wait_usec) leaves no trace, and a tree that is sealed stays so only
 * for the instant until the last seal of the round and the detach. */
int swap_seal_all(SwapTarget *targets, size_t n, uint64_t wait_usec, char **ret_message) {
        _cleanup_free_ size_t *order = NULL;
        uint64_t deadline = now_monotonic_usec() + wait_usec;
        size_t n_order = 0, busy = SIZE_MAX;
        int r;

        order = calloc(n ?: 1, sizeof(size_t));
        if (!order)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++)
                if (targets[i].old && targets[i].old->writable)
                        order[n_order++] = i;
        if (n_order > 1)
                for (size_t k = 0, front = 0; k < n_order; k++) {
                        _cleanup_free_ char *w = writer_of(&targets[order[k]]);

                        if (w) {
                                size_t x = order[k];
                                memmove(order + front + 1, order + front, (k - front) * sizeof(size_t));
                                order[front++] = x;
                        }
                }

        /* A seal writes back what the tree holds (overlayfs syncs the upper file system before
         * it turns read-only); done here first, the seal itself has little left to write while
         * the trees sealed before it wait read-only. */
        for (size_t k = 0; k < n_order; k++) {
                _cleanup_close_ int fd = openat_resolve(targets[order[k]].root_fd, targets[order[k]].rel,
                                                        O_RDONLY | O_DIRECTORY | O_CLOEXEC,
                                                        RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);

                if (fd >= 0)
                        (void) syncfs(fd);
        }

        for (;;) {
                busy = SIZE_MAX;
                for (size_t k = 0; k < n_order; k++) {
                        r = seal_once(&targets[order[k]], ret_message);
                        if (r > 0) {
                                busy = k;
                                break;
                        }
                        if (r < 0) {
                                swap_unseal_all(targets, n);
                                return r;
                        }
                }
                if (busy == SIZE_MAX)
                        return 0;
                swap_unseal_all(targets, n);
                if (busy > 0) {
                        size_t x = order[busy];
                        memmove(order + 1, order, busy * sizeof(size_t));
                        order[0] = x;
                }
                if (now_monotonic_usec() >= deadline)
                        break;
                (void) usleep(1000);
        }

        {
                SwapTarget *t = &targets[order[0]];
                _cleanup_free_ char *writer = writer_of(t);

                return set_message(ret_message, EBUSY,
                                   "The writable tree on %s stays: %s, and the new tree can only take over its upper directory once nothing can write through the old one. Close it and run the command again.",
                                   t->path, writer ?: "something holds a file on it open for writing, but no process does (a kernel user, such as a loop device or a swap file backed by one of its files)");
        }
}

/* Whether the top at the target is what the plan saw.  1 yes, with the fd it checked in
 * *ret_fd (if not NULL), 0 no (*ret_message says what is there instead), < 0 error. */
static int check_top(const SwapTarget *t, int *ret_fd, char **ret_message) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *why = NULL, *what = NULL;
        MountIdentity m;
        int r;

        fd = open_live(t->root_fd, t->rel);
        if (fd < 0)
                return swap_explain(fd, t->path, "open", ret_message);
        if (t->old) {
                r = tree_check_fd(t->old, fd, &why);
                if (r < 0)
                        return swap_explain(r, t->path, "inspect", ret_message);
                if (r == 0) {
                        what = describe_top(fd);
                        set_message(ret_message, 0,
                                    "The top of %s changed while the new tree was being built: it is now %s, no longer sysextd's tree.",
                                    t->path, strna(what));
                        return 0;
                }
                if (ret_fd)
                        *ret_fd = TAKE_FD(fd);
                return 1;
        }
        r = mount_identity_of_fd(fd, &m);
        if (r < 0)
                return swap_explain(r, t->path, "inspect", ret_message);
        if (m.id != t->planned_top_id) {
                what = m.is_root ? describe_top(fd) : strdup("a plain directory");
                set_message(ret_message, 0,
                            "Something was mounted on %s while the new tree was being built (%s).",
                            t->path, strna(what));
                return 0;
        }
        if (ret_fd)
                *ret_fd = TAKE_FD(fd);
        return 1;
}

static int check_children(const SwapTarget *t, char **ret_message) {
        _cleanup_(mount_children_done) MountChildren now = {};
        _cleanup_close_ int fd = -EBADF;
        int r;

        if (!t->children)
                return 1;
        fd = open_live(t->root_fd, t->rel);
        if (fd < 0)
                return swap_explain(fd, t->path, "open", ret_message);
        r = mount_children_read(fd, t->path, &now);
        if (r < 0)
                return swap_explain(r, t->path, "read the mounts below", ret_message);
        if (!mount_children_equal(&now, t->children)) {
                const char *changed = NULL;

                for (size_t i = 0; i < now.n && !changed; i++) {
                        bool seen = false;
                        for (size_t k = 0; k < t->children->n; k++)
                                if (streq(now.children[i].path, t->children->children[k].path) &&
                                    now.children[i].id == t->children->children[k].id)
                                        seen = true;
                        if (!seen)
                                changed = now.children[i].path;
                }
                for (size_t k = 0; k < t->children->n && !changed; k++) {
                        bool seen = false;
                        for (size_t i = 0; i < now.n; i++)
                                if (streq(now.children[i].path, t->children->children[k].path) &&
                                    now.children[i].id == t->children->children[k].id)
                                        seen = true;
                        if (!seen)
                                changed = t->children->children[k].path;
                }
                set_message(ret_message, 0,
                            "The mounts below %s changed while the new tree was being built (%s); run the command again.",
                            t->path, strna(changed));
                return 0;
        }
        return 1;
}

/* See the top of the file: takes a placed tree back from beneath the old top. */
static int take_back(SwapTarget *t, bool parent_propagates) {
        struct mount_attr private = { .propagation = MS_PRIVATE };
        MountIdentity n;
        pid_t pid;
        int status = 0, r;

        if (!parent_propagates || mount_identity_of_fd(t->tree_fd, &n) < 0)
                return -EOPNOTSUPP;

        /* N's clones of the mounts below go first: a covered mount with mounts of its own is
         * not replaced by the one on top of it.  N is still shared, so their copies go too. */
        for (size_t i = 0; t->children && i < t->children->n; i++) {
                const char *rel = startswith(t->children->children[i].path, t->path);
                _cleanup_close_ int fd = -EBADF;
                MountIdentity c;

                if (!rel || *rel != '/')
                        continue;
                fd = openat_resolve(t->tree_fd, rel + 1, O_PATH | O_NOFOLLOW, RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
                if (fd < 0 || mount_identity_of_fd(fd, &c) < 0 || !c.is_root || c.id == n.id)
                        return -ESTALE;
                if (umount2(FORMAT_PROC_FD_PATH(fd), MNT_DETACH) < 0)
                        return negative_errno();
        }
        if (mount_setattr(t->tree_fd, "", AT_EMPTY_PATH, &private, sizeof(private)) < 0)
                return negative_errno();
        mount_table_cache_invalidate(); /* no event reports a change of propagation */

        pid = fork();
        if (pid < 0)
                return negative_errno();
        if (pid == 0) {
                _cleanup_close_ int top = -EBADF, below = -EBADF;
                MountIdentity m;

                (void) prctl(PR_SET_PDEATHSIG, SIGKILL);
                /* A peer of our namespace: the kernel's unshare() keeps shared mounts shared. */
                if (unshare(CLONE_NEWNS) < 0)
                        _exit(1);
                /* Paths now resolve in this namespace: from its root, by the absolute path. */
                top = openat_resolve(AT_FDCWD, t->path, O_PATH | O_DIRECTORY, RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
                if (top < 0)
                        _exit(2);
                /* Our copy of O, and everything mounted on it, private: detaching it here
                 * propagates nowhere. */
                if (mount_setattr(top, "", AT_EMPTY_PATH | AT_RECURSIVE, &private, sizeof(private)) < 0 ||
                    umount2(t->path, MNT_DETACH | UMOUNT_NOFOLLOW) < 0)
                        _exit(3);
                below = openat_resolve(AT_FDCWD, t->path, O_PATH | O_DIRECTORY, RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
                if (below < 0 || mount_identity_of_fd(below, &m) < 0 || !m.is_root || m.dev != n.dev)
                        _exit(4);
                /* Our copy of N: this unmount propagates, and O takes N's place everywhere. */
                if (umount2(t->path, MNT_DETACH | UMOUNT_NOFOLLOW) < 0)
                        _exit(5);
                _exit(0);
        }
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return negative_errno();
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                return -EIO;

        /* Ours again: O on top, N gone from the mount table. */
        {
                MountEntry e = {};
                _cleanup_close_ int fd = open_live(t->root_fd, t->rel);

                if (fd < 0 || tree_check_fd(t->old, fd, NULL) <= 0)
                        return -ESTALE;
                r = mountinfo_find(n.id, &e);
                mount_entry_done(&e);
                if (r != -ENOENT)
                        return -EBUSY;
        }
        return 0;
}

static void roll_back(SwapTarget *targets, size_t n, const bool *propagates) {
        for (size_t i = n; i > 0; i--) {
                SwapTarget *t = &targets[i - 1];

                if (t->state == SWAP_ATTACHED) {
                        /* It was visible: detach it again, after the same check as any detach. */
                        if (tree_detach(t->root_fd, t->rel, t->path, t->new_tree, NULL) >= 0)
                                t->state = SWAP_ROLLED_BACK;
                } else if (t->state == SWAP_PLACED)
                        t->state = take_back(t, propagates[i - 1]) >= 0 ? SWAP_ROLLED_BACK : SWAP_BURIED;
        }
}

static int swap_degraded(SwapTarget *targets, size_t n, uint64_t seal_wait_usec, char **ret_message) {
        int r;

        for (size_t i = 0; i < n; i++) {
                SwapTarget *t = &targets[i];

                if (t->old && t->old->writable) {
                        r = swap_seal_all(t, 1, seal_wait_usec, ret_message);
                        if (r < 0)
                                return r;
                }
                if (t->old) {
                        r = tree_detach(t->root_fd, t->rel, t->path, t->old, ret_message);
                        if (r < 0) {
                                swap_unseal_all(t, 1); /* still the live top: writable again */
                                return r;
                        }
                        t->state = SWAP_DETACHED;
                }
                if (t->tree_fd >= 0) {
                        _cleanup_close_ int target_fd = open_live(t->root_fd, t->rel);

                        if (target_fd < 0)
                                return swap_explain(target_fd, t->path, "open", ret_message);
                        if (move_mount(t->tree_fd, "", target_fd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
                                return swap_explain(negative_errno(), t->path, "attach the new tree on", ret_message);
                        t->state = t->old ? SWAP_REPLACED_GAP : SWAP_ATTACHED;
                }
        }
        return 0;
}

int swap_all(SwapTarget *targets, size_t n, const SwapOptions *o, char **ret_message) {
        _cleanup_free_ bool *propagates = NULL;
        int r;

        propagates = calloc(n ?: 1, sizeof(bool));
        if (!propagates)
                return -ENOMEM;

        /* 0. The plan still holds everywhere. */
        for (size_t i = 0; i < n; i++) {
                SwapTarget *t = &targets[i];
                MountStack s = {};

                t->state = SWAP_UNTOUCHED;
                r = check_top(t, NULL, ret_message);
                if (r > 0)
                        r = check_children(t, ret_message);
                if (r <= 0) {
                        r = r < 0 ? r : -EBUSY;
                        goto fail;
                }
                if (mount_stack_read(t->root_fd, t->rel, t->path, &s) >= 0)
                        propagates[i] = s.has_parent && s.parent.shared;
                mount_stack_done(&s);
        }

        if (o->delay) {
                if (!o->mount_beneath)
                        return set_message(ret_message, EOPNOTSUPP,
                                           "This kernel cannot mount beneath (MOVE_MOUNT_BENEATH needs Linux 6.5): a transition cannot be delayed. Nothing was changed.");
                for (size_t i = 0; i < n; i++)
                        if (targets[i].old && targets[i].old->writable)
                                return set_message(ret_message, EBUSY,
                                                   "The tree of %s is writable (mutable mode): a writable tree cannot be delayed. Nothing was changed.",
                                                   targets[i].path);
        }

        if (!o->mount_beneath) {
                for (size_t i = 0; i < n; i++)
                        if (targets[i].old && targets[i].tree_fd >= 0 && !o->allow_degraded)
                                return set_message(ret_message, EOPNOTSUPP,
                                                   "This kernel cannot mount beneath %s (MOVE_MOUNT_BENEATH needs Linux 6.5); refusing a refresh that would expose the base. Set DegradedMode=unmount-mount in sysextd.conf to accept that.",
                                                   targets[i].path);
                return swap_degraded(targets, n, o->seal_wait_usec, ret_message);
        }

        /* 1. Place: beneath first (invisible), then on top (visible). */
        for (int pass = 0; pass < 2; pass++)
                for (size_t i = 0; i < n; i++) {
                        SwapTarget *t = &targets[i];
                        unsigned flags = MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH;
                        _cleanup_close_ int target_fd = -EBADF;

                        if (t->tree_fd < 0 || (pass == 0) != !!t->old)
                                continue;
                        /* The check right before the call, on the fd the call then uses. */
                        r = check_top(t, &target_fd, ret_message);
                        if (r <= 0) {
                                r = r < 0 ? r : -EBUSY;
                                goto fail;
                        }
                        if (t->old)
                                flags |= MOVE_MOUNT_BENEATH;
                        if (move_mount(t->tree_fd, "", target_fd, "", flags) < 0) {
                                r = swap_explain(negative_errno(), t->path,
                                                 t->old ? "mount the new tree beneath" : "attach the new tree on", ret_message);
                                goto fail;
                        }
                        t->state = t->old ? SWAP_PLACED : SWAP_ATTACHED;
#ifdef SYSEXTD_TEST_HOOKS
                        if (t->old)
                                testhook_point("swap-placed", (long) i);
#endif
                }

#ifdef SYSEXTD_TEST_HOOKS
        /* Every new tree is in place, none of the old tops detached yet. */
        for (size_t i = 0; i < n; i++)
                if (targets[i].state == SWAP_PLACED) {
                        testhook_point("swap-after-beneath", 0);
                        break;
                }
#endif

        /* Delayed: the old tops stay; each namespace drops its own when it commits. */
        if (o->delay) {
                for (size_t i = 0; i < n; i++)
                        if (targets[i].old)
                                targets[i].state = SWAP_DELAYED;
                return 0;
        }

        /* Views of a writable old tree that the handover leaves behind, read-only: said now. */
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *views = NULL;
                _cleanup_close_ int fd = -EBADF;
                struct stat st;

                if (!targets[i].old || !targets[i].old->writable)
                        continue;
                fd = open_live(targets[i].root_fd, targets[i].rel);
                if (fd < 0 || fstat(fd, &st) < 0)
                        continue;
                views = other_views(st.st_dev, targets[i].path, 5);
                if (views)
                        log_warning("The previous writable tree of %s stays in use elsewhere and is read-only there from now on (it leaves only where %s is reached through the hierarchy): %s.",
                                    targets[i].path, targets[i].path, views);
        }

        /* 2. Seal every writable old top, or none. */
        r = swap_seal_all(targets, n, o->seal_wait_usec, ret_message);
        if (r < 0)
                goto fail;
#ifdef SYSEXTD_TEST_HOOKS
        for (size_t i = 0; i < n; i++)
                if (targets[i].sealed) {
                        testhook_point("swap-sealed", 0);
                        break;
                }
#endif

        /* 3. Detach every old top: the commit point. */
        r = 0;
        for (size_t i = 0; i < n; i++) {
                SwapTarget *t = &targets[i];
                _cleanup_free_ char *msg = NULL;
                int k;

                if (!t->old)
                        continue;
                k = tree_detach_pinned(t->root_fd, t->rel, t->path, t->old, o->ret_old_fds ? &o->ret_old_fds[i] : NULL, &msg);
                if (k < 0 && k != -EBUSY && t->sealed) {
                        /* Still the live top: writable again. */
                        swap_unseal_all(t, 1);
                }
                if (k < 0) {
                        /* Placed, and covered now: it is finished once the mount on top goes. */
                        if (t->state == SWAP_PLACED)
                                t->state = SWAP_COVERED;
                        if (r == 0) {
                                r = k;
                                if (k == -EBUSY)
                                        set_message(ret_message, EBUSY,
                                                    "A foreign mount was placed on top of %s during the swap; sysextd's new tree waits below it and is put in place once that mount is gone. %s",
                                                    t->path, strempty(msg));
                                else if (ret_message) {
                                        free(*ret_message);
                                        *ret_message = TAKE_PTR(msg);
                                }
                        }
                        continue;
                }
                t->state = t->tree_fd >= 0 ? SWAP_REPLACED : SWAP_DETACHED;
        }
        if (o->ret_sealed_usec) {
                uint64_t first = 0;

                for (size_t i = 0; i < n; i++)
                        if (targets[i].sealed_at > 0 && (first == 0 || targets[i].sealed_at < first))
                                first = targets[i].sealed_at;
                *o->ret_sealed_usec = first > 0 ? now_monotonic_usec() - first : 0;
        }
        return r;

fail:
        roll_back(targets, n, propagates);
        if (ret_message) {
                _cleanup_free_ char *buried = NULL;
                char *m;

                for (size_t i = 0; i < n; i++)
                        if (targets[i].state == SWAP_BURIED) {
                                m = strjoin3(buried ?: "", buried ? ", " : "", targets[i].path);
                                free(buried);
                                buried = m;
                        }
                if (buried)
                        m = strjoin3(strempty(*ret_message),
                                     " The new tree of ", buried);
                else
                        m = strjoin3(strempty(*ret_message), *ret_message ? " " : "",
                                     "Every hierarchy keeps its previous tree; nothing was changed.");
                if (m && buried) {
                        char *m2 = strjoin3(m, " could not be taken back (its parent mount does not propagate): it stays buried, unused and invisible, beneath the previous tree, which readers still see.", "");
                        free(m);
                        m = m2;
                }
                if (m) {
                        free(*ret_message);
                        *ret_message = m;
                }
        }
        return r;
}
