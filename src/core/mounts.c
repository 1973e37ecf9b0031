/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Mount table reading with libmount.  libmount returns positive errno values in some places
 * and negative in others; this file wraps it once and returns -errno like the rest.
 *
 * Two sources are combined: /proc/self/mountinfo describes every mount, covered or not, by
 * its 32-bit id; statx() on a live path says which mount a reader of that path reaches (and
 * its unique id on Linux 6.8).  What is visible is always decided at the live path: a
 * mountinfo path also names mounts hidden under another mount.
 */
#include <fcntl.h>
#include <libmount.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>

#include "fd-util.h"
#include "kernel.h"
#include "missing.h"
#include "mounts.h"
#include "util.h"

static void table_unrefp(struct libmnt_table **t) {
        mnt_unref_table(*t);
}
#define _cleanup_table_ _cleanup_(table_unrefp)

static void iter_freep(struct libmnt_iter **i) {
        mnt_free_iter(*i);
}
#define _cleanup_iter_ _cleanup_(iter_freep)

/* The mount table of process pid's namespace (0: ours). */
static int table_read_of(pid_t pid, struct libmnt_table **ret) {
        struct libmnt_table *t = mnt_new_table();
        int r;

        if (!t)
                return -ENOMEM;
        char path[64];
        FILE *f;

        /* Through a stream of our own: given a relative path (proc_prefix()), libmount would
         * make it absolute, walking up from a working directory outside our root. */
        if (pid > 0)
                snprintf(path, sizeof(path), "%s%i/mountinfo", proc_prefix(), (int) pid);
        else
                snprintf(path, sizeof(path), "%sself/mountinfo", proc_prefix());
        f = fopen(path, "re");
        if (!f) {
                r = negative_errno();
                mnt_unref_table(t);
                return r;
        }
        r = mnt_table_parse_stream(t, f, "/proc/self/mountinfo");
        fclose(f);
        if (r != 0) {
                mnt_unref_table(t);
                return r < 0 ? r : -r;
        }
        *ret = t;
        return 0;
}

static int table_read(struct libmnt_table **ret) {
        return table_read_of(0, ret);
}

int mount_identity_of_fd(int fd, MountIdentity *ret) {
        struct statx sx = {};
        struct statfs sfs;
        MountIdentity m = {};

        if (statx(fd, "", AT_EMPTY_PATH | AT_NO_AUTOMOUNT, STATX_MNT_ID, &sx) < 0)
                return negative_errno();
        if (!(sx.stx_mask & STATX_MNT_ID))
                return -EOPNOTSUPP;
        m.id = sx.stx_mnt_id;
        m.dev = makedev(sx.stx_dev_major, sx.stx_dev_minor);
        m.is_root = (sx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) && (sx.stx_attributes & STATX_ATTR_MOUNT_ROOT);
        if (kernel_has(KERNEL_UNIQUE_MOUNT_ID)) {
                sx = (struct statx) {};
                if (statx(fd, "", AT_EMPTY_PATH | AT_NO_AUTOMOUNT, STATX_MNT_ID_UNIQUE, &sx) < 0)
                        return negative_errno();
                if (sx.stx_mask & STATX_MNT_ID_UNIQUE)
                        m.unique_id = sx.stx_mnt_id;
        }
        if (fstatfs(fd, &sfs) < 0)
                return negative_errno();
        m.overlay = (unsigned long) sfs.f_type == OVERLAYFS_SUPER_MAGIC;
        *ret = m;
        return 0;
}

void mount_entry_done(MountEntry *e) {
        free(e->fstype);
        free(e->source);
        *e = (MountEntry) {};
}

static int entry_from_fs(struct libmnt_fs *fs, MountEntry *ret) {
        const char *opt = mnt_fs_get_optional_fields(fs), *so = mnt_fs_get_fs_options(fs);
        MountEntry e = {
                .id = (uint64_t) mnt_fs_get_id(fs),
                .parent_id = (uint64_t) mnt_fs_get_parent_id(fs),
                .dev = mnt_fs_get_devno(fs),
                .fstype = strdup(mnt_fs_get_fstype(fs) ?: ""),
                .source = strdup(mnt_fs_get_source(fs) ?: ""),
                .shared = opt && strstr(opt, "shared:"),
                .slave = opt && strstr(opt, "master:"),
                .sb_writable = so && strncmp(so, "rw", 2) == 0 && (so[2] == 0 || so[2] == ','),
        };

        if (!e.fstype || !e.source) {
                mount_entry_done(&e);
                return -ENOMEM;
        }
        *ret = e;
        return 0;
}

void mount_stack_done(MountStack *s) {
        for (size_t i = 0; i < s->n; i++)
                mount_entry_done(&s->entries[i]);
        free(s->entries);
        mount_entry_done(&s->parent);
        *s = (MountStack) {};
}

static struct libmnt_fs *find_by_id(struct libmnt_table *t, uint64_t id) {
        _cleanup_iter_ struct libmnt_iter *it = mnt_new_iter(MNT_ITER_FORWARD);
        struct libmnt_fs *fs;

        while (it && mnt_table_next_fs(t, it, &fs) == 0)
                if ((uint64_t) mnt_fs_get_id(fs) == id)
                        return fs;
        return NULL;
}

static int open_live(int root_fd, const char *rel) {
        /* A fresh lookup: it ends on whatever is mounted on top at the path now. */
        return openat_resolve(root_fd, rel, O_PATH | O_DIRECTORY,
                              RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
}

static int stack_read_once(int root_fd, const char *rel, int path_fd, const char *path, MountStack *ret,
                           bool *ret_raced) {
        _cleanup_table_ struct libmnt_table *t = NULL;
        _cleanup_(mount_stack_done) MountStack s = {};
        MountIdentity top;
        struct libmnt_fs *fs, *top_fs;
        size_t n_max = 0;
        int r;

        *ret_raced = false;
        r = mount_identity_of_fd(path_fd, &top);
        if (r < 0)
                return r;
        r = table_read(&t);
        if (r < 0)
                return r;
        top_fs = find_by_id(t, top.id);
        if (!top_fs) {
                *ret_raced = true;
                return 0;
        }

        if (top.is_root && streq_ptr(mnt_fs_get_target(top_fs), path)) {
                /* Walk down from the top along the parent ids while they stay at the path;
                 * what is below the bottom is the parent. */
                _cleanup_free_ struct libmnt_fs **chain = NULL;
                size_t n = 0;

                n_max = mnt_table_get_nents(t);
                chain = calloc(n_max + 1, sizeof(*chain));
                if (!chain)
                        return -ENOMEM;
                for (fs = top_fs; fs && streq_ptr(mnt_fs_get_target(fs), path) && n < n_max;
                     fs = find_by_id(t, (uint64_t) mnt_fs_get_parent_id(fs)))
                        chain[n++] = fs;
                s.entries = calloc(n, sizeof(MountEntry));
                if (!s.entries)
                        return -ENOMEM;
                for (size_t i = 0; i < n; i++) {
                        r = entry_from_fs(chain[n - 1 - i], &s.entries[i]);
                        if (r < 0)
                                return r;
                        s.n++;
                }
                s.top_unique_id = top.unique_id;
                fs = fs && !streq_ptr(mnt_fs_get_target(fs), path) ? fs : NULL;
                if (fs) {
                        r = entry_from_fs(fs, &s.parent);
                        if (r < 0)
                                return r;
                        s.has_parent = true;
                }
        } else {
                /* Nothing mounted at the path: the fd is on the mount that contains it. */
                if (top.is_root) {
                        /* The root of a mount that mountinfo lists at another path: the
                         * table changed under us; read again. */
                        *ret_raced = true;
                        return 0;
                }
                r = entry_from_fs(top_fs, &s.parent);
                if (r < 0)
                        return r;
                s.has_parent = true;
        }

        /* Nothing may have been mounted or unmounted at the path while the table was read. */
        {
                _cleanup_close_ int again_fd = open_live(root_fd, rel);
                MountIdentity again;

                if (again_fd < 0)
                        return again_fd;
                r = mount_identity_of_fd(again_fd, &again);
                if (r < 0)
                        return r;
                if (again.id != top.id) {
                        *ret_raced = true;
                        return 0;
                }
        }
        *ret = s;
        s = (MountStack) {};
        return 0;
}

int mount_stack_read(int root_fd, const char *rel, const char *path, MountStack *ret) {
        _cleanup_close_ int fd = -EBADF;
        bool raced;
        int r;

        for (unsigned attempt = 0; attempt < 8; attempt++) {
                fd = safe_close(fd);
                fd = open_live(root_fd, rel);
                if (fd < 0)
                        return fd;
                r = stack_read_once(root_fd, rel, fd, path, ret, &raced);
                if (r < 0 || !raced)
                        return r;
        }
        return -EAGAIN;
}

void mount_children_done(MountChildren *c) {
        for (size_t i = 0; i < c->n; i++) {
                free(c->children[i].path);
                free(c->children[i].fstype);
        }
        free(c->children);
        *c = (MountChildren) {};
}

static int compare_str(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

int mount_children_read(int path_fd, const char *path, MountChildren *ret) {
        _cleanup_table_ struct libmnt_table *t = NULL;
        _cleanup_iter_ struct libmnt_iter *it = NULL;
        _cleanup_strv_free_ char **all = NULL;
        _cleanup_(mount_children_done) MountChildren c = {};
        _cleanup_free_ char *prefix = NULL;
        struct libmnt_fs *fs;
        size_t n;
        int r;

        r = table_read(&t);
        if (r < 0)
                return r;
        prefix = strjoin3(path, streq(path, "/") ? "" : "/", "");
        it = mnt_new_iter(MNT_ITER_FORWARD);
        if (!prefix || !it)
                return -ENOMEM;
        while (mnt_table_next_fs(t, it, &fs) == 0) {
                const char *target = mnt_fs_get_target(fs);
                if (target && startswith(target, prefix) && target[strlen(prefix)] && !strv_contains(all, target)) {
                        r = strv_extend(&all, target);
                        if (r < 0)
                                return r;
                }
        }

        n = strv_length(all);
        if (n > 0)
                qsort(all, n, sizeof(char *), compare_str);
        c.children = calloc(n ?: 1, sizeof(MountChild));
        if (!c.children)
                return -ENOMEM;

        /* Sorted, so a mount point's ancestors in the list come before it. */
        STRV_FOREACH(a, all) {
                _cleanup_close_ int fd = -EBADF;
                MountIdentity m;
                struct libmnt_fs *seen;
                bool nested = false;

                for (size_t k = 0; k < c.n; k++) {
                        const char *rest = startswith(*a, c.children[k].path);
                        if (rest && *rest == '/')
                                nested = true;
                }
                if (nested)
                        continue;

                /* Resolve the live path the way a reader does, but without following a
                 * symlink (a mountinfo path never has one) or triggering an automount at the
                 * end.  Where it does not end on the root of a mount listed at that path, the
                 * listed mount is covered: it is not part of what readers see. */
                fd = openat_resolve(path_fd, *a + strlen(prefix), O_PATH | O_NOFOLLOW,
                                    RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
                if (fd < 0)
                        continue;
                if (mount_identity_of_fd(fd, &m) < 0 || !m.is_root)
                        continue;
                seen = find_by_id(t, m.id);
                if (!seen || !streq_ptr(mnt_fs_get_target(seen), *a))
                        continue;

                c.children[c.n] = (MountChild) {
                        .path = strdup(*a),
                        .id = m.id,
                        .unique_id = m.unique_id,
                        .fstype = strdup(mnt_fs_get_fstype(seen) ?: ""),
                };
                if (!c.children[c.n].path || !c.children[c.n].fstype) {
                        free(c.children[c.n].path);
                        free(c.children[c.n].fstype);
                        return -ENOMEM;
                }
                c.n++;
        }
        *ret = c;
        c = (MountChildren) {};
        return 0;
}

bool mount_children_equal(const MountChildren *a, const MountChildren *b) {
        if (a->n != b->n)
                return false;
        for (size_t i = 0; i < a->n; i++)
                if (!streq(a->children[i].path, b->children[i].path) || a->children[i].id != b->children[i].id ||
                    a->children[i].unique_id != b->children[i].unique_id)
                        return false;
        return true;
}

int mountinfo_find(uint64_t id, MountEntry *ret) {
        return mountinfo_find_of(0, id, ret);
}

int mountinfo_find_of(pid_t pid, uint64_t id, MountEntry *ret) {
        _cleanup_table_ struct libmnt_table *t = NULL;
        struct libmnt_fs *fs;
        int r;

        r = table_read_of(pid, &t);
        if (r < 0)
                return r;
        fs = find_by_id(t, id);
        if (!fs)
                return -ENOENT;
        return entry_from_fs(fs, ret);
}


/* Whether the mounts on a (id) below 'path' — strictly below it at the first level, 'strict' —
 * match those on b one for one: the same mount point, file system (device), root within it
 * and type, and recursively the same mounts on each. */
static bool subtree_same(struct libmnt_table *t, uint64_t a, uint64_t b, const char *path, bool strict, unsigned depth) {
        _cleanup_iter_ struct libmnt_iter *it = mnt_new_iter(MNT_ITER_FORWARD);
        _cleanup_free_ char *prefix = strjoin3(path, streq(path, "/") ? "" : "/", "");
        struct libmnt_fs *fs;
        size_t n_a = 0, n_b = 0;

        if (!it || !prefix || depth > 64)
                return false;
        while (mnt_table_next_fs(t, it, &fs) == 0) {
                const char *target = mnt_fs_get_target(fs);
                uint64_t parent = (uint64_t) mnt_fs_get_parent_id(fs);
                _cleanup_iter_ struct libmnt_iter *it2 = NULL;
                struct libmnt_fs *other;
                bool found = false;

                if (!target || (parent != a && parent != b) || (uint64_t) mnt_fs_get_id(fs) == parent)
                        continue;
                if (!startswith(target, prefix) && (strict || !streq(target, path)))
                        continue;
                if (parent == b) {
                        n_b++;
                        continue;
                }
                n_a++;
                it2 = mnt_new_iter(MNT_ITER_FORWARD);
                if (!it2)
                        return false;
                while (!found && mnt_table_next_fs(t, it2, &other) == 0)
                        found = (uint64_t) mnt_fs_get_parent_id(other) == b && streq_ptr(mnt_fs_get_target(other), target) &&
                                mnt_fs_get_devno(other) == mnt_fs_get_devno(fs) &&
                                streq_ptr(mnt_fs_get_root(other), mnt_fs_get_root(fs)) &&
                                streq_ptr(mnt_fs_get_fstype(other), mnt_fs_get_fstype(fs)) &&
                                subtree_same(t, (uint64_t) mnt_fs_get_id(fs), (uint64_t) mnt_fs_get_id(other), target, false,
                                             depth + 1);
                if (!found)
                        return false;
        }
        return n_a == n_b;
}

int mount_below_same(uint64_t top_id, uint64_t base_id, const char *path, bool *ret) {
        _cleanup_table_ struct libmnt_table *t = NULL;
        int r;

        r = table_read(&t);
        if (r < 0)
                return r;
        *ret = subtree_same(t, top_id, base_id, path, true, 0);
        return 0;
}

int mount_targets_of(const char *fstype, const char *source, const char *under, char ***ret) {
        _cleanup_table_ struct libmnt_table *t = NULL;
        _cleanup_iter_ struct libmnt_iter *it = NULL;
        _cleanup_strv_free_ char **l = NULL;
        size_t len = strlen(under);
        struct libmnt_fs *fs;
        int r;

        while (len > 1 && under[len - 1] == '/')
                len--;
        r = table_read(&t);
        if (r < 0)
                return r;
        it = mnt_new_iter(MNT_ITER_FORWARD);
        if (!it)
                return -ENOMEM;
        l = calloc(1, sizeof(char *));
        if (!l)
                return -ENOMEM;
        while (mnt_table_next_fs(t, it, &fs) == 0) {
                const char *target = mnt_fs_get_target(fs);

                if (!target || !streq_ptr(mnt_fs_get_fstype(fs), fstype) || !streq_ptr(mnt_fs_get_source(fs), source))
                        continue;
                if (!(len == 1 && under[0] == '/') &&
                    (strncmp(target, under, len) != 0 || (target[len] != 0 && target[len] != '/')))
                        continue;
                if (strv_extend(&l, target) < 0)
                        return -ENOMEM;
        }
        *ret = TAKE_PTR(l);
        return 0;
}

int mount_top_entry(int fd, MountEntry *ret) {
        MountIdentity m;
        int r;

        r = mount_identity_of_fd(fd, &m);
        if (r < 0)
                return r;
        if (!m.is_root)
                return -ENOENT;
        return mountinfo_find(m.id, ret);
}
