/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Mutable modes: the decision (pure, mutable_decide(), the table in mutable.h) and the I/O
 * around it: the facts it needs, the mutable directory that yes creates, and the work
 * directories.  Everything is resolved from the root's fd inside the root, so a symlink in
 * var/lib/extensions.mutable leads somewhere in the root and never out of it.
 */
#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "fd-util.h"
#include "fileio.h"
#include "mounts.h"
#include "mutable.h"
#include "util.h"

static const char *const mode_names[_MUTABLE_MAX] = {
        [MUTABLE_NO] = "no",
        [MUTABLE_YES] = "yes",
        [MUTABLE_AUTO] = "auto",
        [MUTABLE_IMPORT] = "import",
        [MUTABLE_EPHEMERAL] = "ephemeral",
        [MUTABLE_EPHEMERAL_IMPORT] = "ephemeral-import",
};

const char *mutable_mode_to_string(MutableMode m) {
        return m >= 0 && m < _MUTABLE_MAX ? mode_names[m] : NULL;
}

int mutable_mode_from_string(const char *s) {
        int i = string_table_find(mode_names, _MUTABLE_MAX, s);

        if (i >= 0 || !s)
                return i;
        i = parse_boolean(s);
        return i < 0 ? i : i > 0 ? MUTABLE_YES : MUTABLE_NO;
}

int mutable_decide(MutableMode mode, const MutableFacts *f, const char *hierarchy, const char *dir,
                   MutableDecision *ret, char **ret_message) {
        MutableDecision d = { .base_layer = f->hierarchy_exists, .always = mode != MUTABLE_NO };

        switch (mode) {
        case MUTABLE_NO:
                break;
        case MUTABLE_YES:
        case MUTABLE_AUTO:
                if (!f->dir_exists) {
                        if (mode == MUTABLE_YES)
                                d.create_dir = true, d.upper = MUTABLE_UPPER_DIR;
                        break;
                }
                if (f->dir_is_hierarchy) {
                        d.upper = MUTABLE_UPPER_HIERARCHY;
                        d.base_layer = false;
                        break;
                }
                if (f->dir_mode != f->hierarchy_mode)
                        return set_message(ret_message, EINVAL, "Mutable directory '%s' has mode %04o, ought to have mode %04o (that of %s).",
                                           dir, (unsigned) f->dir_mode, (unsigned) f->hierarchy_mode, hierarchy);
                if (f->dir_read_only)
                        return set_message(ret_message, EROFS, "Can't use '%s' as an upperdir as it is read-only.", dir);
                if (!f->dir_parent_same_mount)
                        return set_message(ret_message, EXDEV,
                                           "Unable to find a suitable workdir location for upperdir '%s' for host hierarchy '%s' - parent directory of the upperdir is in a different filesystem.",
                                           dir, hierarchy);
                d.upper = MUTABLE_UPPER_DIR;
                break;
        case MUTABLE_IMPORT:
        case MUTABLE_EPHEMERAL_IMPORT:
                if (f->dir_exists) {
                        if (f->dir_is_hierarchy)
                                return set_message(ret_message, ELOOP,
                                                   "Not importing mutable directory for hierarchy %s as a lower dir, because it points to the hierarchy itself.",
                                                   hierarchy);
                        d.import_dir = true;
                }
                if (mode == MUTABLE_EPHEMERAL_IMPORT)
                        d.upper = MUTABLE_UPPER_TMPFS;
                break;
        case MUTABLE_EPHEMERAL:
                d.upper = MUTABLE_UPPER_TMPFS;
                break;
        default:
                return -EINVAL;
        }
        *ret = d;
        return 0;
}

void mutable_setup_done(MutableSetup *s) {
        free(s->component);
        free(s->dir_path);
        free(s->parent_rel);
        free(s->unsafe_path);
        safe_close(s->dir_fd);
        safe_close(s->parent_fd);
        *s = (MutableSetup) { .dir_fd = -EBADF, .parent_fd = -EBADF };
}

/* "usr" -> "usr", "foo/bar" -> "foo.bar". */
static char *component_of(const char *name) {
        char *c = strdup(name);

        for (char *p = c; p && *p; p++)
                if (*p == '/')
                        *p = '.';
        return c;
}

/* The path of an fd below the root, "" for the root itself; NULL when it is not below it. */
static char *rel_of_fd(const char *root, int fd) {
        char target[PATH_MAX];
        ssize_t n = readlink(FORMAT_PROC_FD_PATH(fd), target, sizeof(target) - 1);
        const char *rest;

        if (n < 0 || n >= (ssize_t) sizeof(target) - 1)
                return NULL;
        target[n] = 0;
        if (streq(root, "/"))
                return strdup(target + 1);
        rest = startswith(target, root);
        if (!rest || (*rest != '/' && *rest != 0))
                return NULL;
        return strdup(*rest == '/' ? rest + 1 : rest);
}

bool mutable_owner_safe(uid_t uid, mode_t mode) {
        return uid == 0 && (mode & 0022) == 0;
}

/* The directory fd and its ancestors up to the root (root_fd): the first one that is not
 * mutable_owner_safe(), as a path (display: fd's path), or NULL. */
static int find_unsafe(int root_fd, int fd, const char *display, char **ret) {
        _cleanup_close_ int cur = -EBADF;
        struct stat rst, st;

        *ret = NULL;
        if (fstat(root_fd, &rst) < 0)
                return -errno;
        cur = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        if (cur < 0)
                return -errno;
        for (unsigned depth = 0; depth < 256; depth++) {
                int up;

                if (fstat(cur, &st) < 0)
                        return -errno;
                if (st.st_dev == rst.st_dev && st.st_ino == rst.st_ino)
                        return 0;
                if (!mutable_owner_safe(st.st_uid, st.st_mode)) {
                        char *p = path_of_fd(cur);
                        *ret = p ?: strdup(display);
                        return *ret ? 0 : -ENOMEM;
                }
                up = openat(cur, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
                if (up < 0)
                        return -errno;
                safe_close(cur);
                cur = up;
        }
        return -ELOOP;
}

/* The facts of the mutable directory of s (s->component set), with its fd and parent, and
 * whether root alone can write to it and above it (unsafe_path). */
static int gather(int root_fd, const char *root, const char *path, const struct stat *st, MutableSetup *s,
                  MutableFacts *f, char **ret_message) {
        _cleanup_free_ char *rel = NULL, *display = NULL;
        _cleanup_close_ int fd = -EBADF, parent = -EBADF;
        struct stat dst;
        struct statvfs sv;
        int r;
        MountIdentity a, b;

        s->dir_fd = safe_close(s->dir_fd);
        s->parent_fd = safe_close(s->parent_fd);
        free(s->dir_path);
        free(s->parent_rel);
        free(s->unsafe_path);
        s->dir_path = s->parent_rel = s->unsafe_path = NULL;
        s->dir_dev = 0;
        s->dir_ino = 0;

        *f = (MutableFacts) {
                .hierarchy_exists = st != NULL,
                .hierarchy_mode = st ? (st->st_mode & 0777) : 0755,
        };
        rel = path_join(MUTABLE_BASE_DIR, s->component);
        display = path_join(root, rel);
        if (!rel || !display)
                return -ENOMEM;

        fd = openat_resolve(root_fd, rel, O_PATH | O_DIRECTORY, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
        if (fd == -ENOENT) {
                /* Missing, or a dangling symlink: no mutable directory. */
                s->dir_path = TAKE_PTR(display);
                return 0;
        }
        if (fd == -ENOTDIR)
                return set_message(ret_message, ENOTDIR, "Mutable directory '%s' is not a directory.", display);
        if (fd < 0)
                return set_message(ret_message, fd, "Failed to open the mutable directory '%s': %s", display, strerror(-fd));
        if (fstat(fd, &dst) < 0)
                return set_message(ret_message, errno, "Failed to stat '%s': %m", display);

        f->dir_exists = true;
        f->dir_mode = dst.st_mode & 0777;
        s->dir_path = path_of_fd(fd) ?: TAKE_PTR(display);
        s->dir_dev = dst.st_dev;
        s->dir_ino = dst.st_ino;
        r = find_unsafe(root_fd, fd, s->dir_path, &s->unsafe_path);
        if (r < 0)
                return set_message(ret_message, r, "Failed to check the owners of '%s': %s", s->dir_path, strerror(-r));
        f->dir_is_hierarchy = (st && st->st_dev == dst.st_dev && st->st_ino == dst.st_ino) ||
                              streq_ptr(s->dir_path, path);
        f->dir_read_only = fstatvfs(fd, &sv) >= 0 && (sv.f_flag & ST_RDONLY);

        if (!f->dir_is_hierarchy) {
                parent = openat(fd, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
                if (parent < 0)
                        return set_message(ret_message, errno, "Failed to open the parent of '%s': %m", s->dir_path);
                f->dir_parent_same_mount = mount_identity_of_fd(fd, &a) >= 0 && mount_identity_of_fd(parent, &b) >= 0 &&
                                           !a.is_root && a.id == b.id;
                s->parent_rel = rel_of_fd(root, parent);
                if (!s->parent_rel)
                        return set_message(ret_message, EXDEV, "The mutable directory '%s' is not below the root %s.",
                                           s->dir_path, root);
                s->parent_fd = TAKE_FD(parent);
        }
        s->dir_fd = TAKE_FD(fd);
        return 0;
}

int mutable_prepare(int root_fd, const char *root, const char *name, const char *path, const struct stat *st,
                    MutableMode mode, MutableSetup *ret, char **ret_message) {
        _cleanup_(mutable_setup_done) MutableSetup s = { .mode = mode, .dir_fd = -EBADF, .parent_fd = -EBADF };
        MutableFacts f = { .hierarchy_exists = st != NULL, .hierarchy_mode = st ? (st->st_mode & 0777) : 0755 };
        int r;

        s.component = component_of(name);
        if (!s.component)
                return -ENOMEM;
        if (mode != MUTABLE_NO && mode != MUTABLE_EPHEMERAL) {
                r = gather(root_fd, root, path, st, &s, &f, ret_message);
                if (r < 0)
                        return r;
        }
        r = mutable_decide(mode, &f, path, strna(s.dir_path), &s.d, ret_message);
        if (r < 0)
                return r;

        if (s.d.create_dir) {
                _cleanup_free_ char *rel = path_join(MUTABLE_BASE_DIR, s.component);
                _cleanup_close_ int fd = -EBADF;

                if (!rel)
                        return -ENOMEM;
                fd = mkdir_p_in_root(root_fd, rel, 0755);
                if (fd < 0)
                        return set_message(ret_message, fd, "Failed to create the mutable directory '%s': %s", strna(s.dir_path),
                                           strerror(-fd));
                /* Its root gives the merged hierarchy its permissions. */
                if (fchmod(fd, f.hierarchy_mode) < 0)
                        return set_message(ret_message, errno, "Failed to set the mode of '%s': %m", strna(s.dir_path));
                r = gather(root_fd, root, path, st, &s, &f, ret_message);
                if (r < 0)
                        return r;
                r = mutable_decide(mode, &f, path, strna(s.dir_path), &s.d, ret_message);
                if (r < 0)
                        return r;
                if (s.d.create_dir)
                        return set_message(ret_message, ENOENT, "The mutable directory '%s' could not be created.",
                                           strna(s.dir_path));
        }

        if (s.d.upper == MUTABLE_UPPER_HIERARCHY) {
                /* Work directories go beside the hierarchy itself. */
                const char *slash = strrchr(name, '/');
                _cleanup_free_ char *parent = slash ? strndup(name, slash - name) : strdup("");

                if (!parent)
                        return -ENOMEM;
                s.parent_fd = safe_close(s.parent_fd);
                s.parent_fd = openat_resolve(root_fd, isempty(parent) ? "." : parent, O_PATH | O_DIRECTORY,
                                             RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
                if (s.parent_fd < 0)
                        return set_message(ret_message, s.parent_fd, "Failed to open the parent of %s: %s", path,
                                           strerror(-s.parent_fd));
                free(s.parent_rel);
                s.parent_rel = TAKE_PTR(parent);
        }
        if (s.d.upper != MUTABLE_UPPER_DIR && !s.d.import_dir)
                s.dir_fd = safe_close(s.dir_fd);

        s.stamp = STAMP_INIT;
        stamp_add_u64(&s.stamp, mode);
        stamp_add_u64(&s.stamp, s.d.upper);
        stamp_add_u64(&s.stamp, s.d.import_dir);
        if (s.dir_fd >= 0) {
                struct stat dst;
                if (fstat(s.dir_fd, &dst) >= 0) {
                        stamp_add_u64(&s.stamp, dst.st_dev);
                        stamp_add_u64(&s.stamp, dst.st_ino);
                }
                stamp_add_string(&s.stamp, strempty(s.dir_path));
        }
        *ret = s;
        s = (MutableSetup) { .dir_fd = -EBADF, .parent_fd = -EBADF };
        return 0;
}

/* path is dir itself or lies below it. */
static bool path_within(const char *path, const char *dir) {
        const char *rest = startswith(path, dir);

        if (streq(dir, "/"))
                return true;
        return rest && (*rest == 0 || *rest == '/');
}

int mutable_check_placement(const MutableSetup *setups, char *const *paths, size_t n, char *const *forbidden,
                            char **ret_message) {
        for (size_t i = 0; i < n; i++) {
                const MutableSetup *s = &setups[i];

                if ((s->d.upper != MUTABLE_UPPER_DIR && !s->d.import_dir) || !s->dir_path)
                        continue;
                if (s->unsafe_path)
                        return set_message(ret_message, EPERM,
                                           "The mutable directory '%s' of %s is not safe: '%s' is owned by or writable by a user other than root, who could plant files in the merged tree. Make it root's, writable by root only.",
                                           s->dir_path, paths[i], s->unsafe_path);
                for (size_t k = 0; k < n; k++) {
                        if (!paths[k])
                                continue;
                        if (k != i && streq(s->dir_path, paths[k]))
                                return set_message(ret_message, EINVAL,
                                                   "The mutable directory of %s is the hierarchy %s ('%s'): two hierarchies cannot share one upper directory.",
                                                   paths[i], paths[k], s->dir_path);
                        if (!streq(s->dir_path, paths[k]) && path_within(s->dir_path, paths[k]))
                                return set_message(ret_message, EINVAL,
                                                   "The mutable directory '%s' of %s lies inside the hierarchy %s, which a merged tree covers: writes would land below the tree's own layers. Keep it outside every hierarchy.",
                                                   s->dir_path, paths[i], paths[k]);
                        if (k > i && (setups[k].d.upper == MUTABLE_UPPER_DIR || setups[k].d.import_dir) && setups[k].dir_path &&
                            s->dir_dev == setups[k].dir_dev && s->dir_ino == setups[k].dir_ino)
                                return set_message(ret_message, EINVAL,
                                                   "The mutable directories of %s and %s are one directory ('%s'): two hierarchies cannot share one upper directory.",
                                                   paths[i], paths[k], s->dir_path);
                }
                STRV_FOREACH(f, forbidden)
                        if (path_within(s->dir_path, *f))
                                return set_message(ret_message, EINVAL,
                                                   "The mutable directory '%s' of %s lies inside %s, where extension images are found: it would be a layer of its own tree.",
                                                   s->dir_path, paths[i], *f);
        }
        return 0;
}

int mutable_workdir_name(const MutableSetup *s, const char *tree_id, char **ret_name) {
        char *n;

        if (asprintf(&n, ".sysextd-%s-work.%s", s->component, tree_id) < 0)
                return -ENOMEM;
        *ret_name = n;
        return 0;
}

int mutable_workdir_create(const MutableSetup *s, const char *tree_id, char **ret_rel) {
        _cleanup_free_ char *name = NULL;
        int r;

        if (s->parent_fd < 0 || !s->parent_rel)
                return -EBADF;
        r = mutable_workdir_name(s, tree_id, &name);
        if (r < 0)
                return r;
        if (mkdirat(s->parent_fd, name, 0700) < 0)
                return negative_errno();
        *ret_rel = isempty(s->parent_rel) ? TAKE_PTR(name) : path_join(s->parent_rel, name);
        return *ret_rel ? 0 : -ENOMEM;
}

int mutable_workdir_remove(int root_fd, const char *rel) {
        _cleanup_free_ char *parent = NULL;
        _cleanup_close_ int dfd = -EBADF;
        const char *slash;

        if (!tree_workdir_valid(rel))
                return -EINVAL;
        slash = strrchr(rel, '/');
        parent = slash ? strndup(rel, slash - rel) : strdup(".");
        if (!parent)
                return -ENOMEM;
        dfd = openat_resolve(root_fd, parent, O_RDONLY | O_DIRECTORY, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
        if (dfd == -ENOENT)
                return 0;
        if (dfd < 0)
                return dfd;
        return rm_rf_at(dfd, slash ? slash + 1 : rel);
}

void mutable_gc(const MutableSetup *s, const TreeList *trees) {
        _cleanup_free_ char *prefix = NULL;
        _cleanup_closedir_ DIR *d = NULL;
        struct dirent *de;
        int fd;

        if (s->parent_fd < 0 || asprintf(&prefix, ".sysextd-%s-work.", s->component) < 0)
                return;
        fd = fd_reopen(s->parent_fd, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return;
        d = fdopendir(fd);
        if (!d) {
                safe_close(fd);
                return;
        }
        while ((de = readdir(d))) {
                const char *id = startswith(de->d_name, prefix);
                bool live = false;

                if (!tree_id_valid(id))
                        continue;
                for (size_t i = 0; i < trees->n; i++)
                        if (streq(trees->trees[i]->id, id))
                                live = true;
                if (!live)
                        (void) rm_rf_at(dirfd(d), de->d_name);
        }
}
