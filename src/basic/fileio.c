/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/stat.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>

#include "fd-util.h"
#include "fileio.h"
#include "util.h"

int open_regular_at(int dir_fd, const char *path, uint64_t resolve, int *ret_fd, struct stat *ret_st) {
        _cleanup_close_ int pfd = -EBADF;
        struct stat st;
        int fd;

        pfd = openat_resolve(dir_fd, path, O_PATH, resolve);
        if (pfd < 0)
                return pfd;
        if (fstat(pfd, &st) < 0)
                return negative_errno();
        if (ret_st)
                *ret_st = st;
        if (!S_ISREG(st.st_mode))
                return S_ISDIR(st.st_mode) ? -EISDIR : -EBADFD;
        fd = fd_reopen(pfd, O_RDONLY | O_NONBLOCK | O_NOCTTY);
        if (fd < 0)
                return fd;
        *ret_fd = fd;
        return 0;
}

int read_fd_full(int fd, size_t max_size, char **ret, size_t *ret_size) {
        _cleanup_free_ char *buf = NULL;
        size_t n = 0, allocated;
        struct stat st;

        if (fstat(fd, &st) < 0)
                return negative_errno();
        if (!S_ISREG(st.st_mode))
                return S_ISDIR(st.st_mode) ? -EISDIR : -EBADFD;
        /* The size is only a hint (the file may change while it is read); the cap is enforced
         * on what is actually read: up to max_size + 1 bytes are read to notice more. */
        if ((uint64_t) st.st_size > max_size)
                return -EFBIG;
        /* A file of the proc file system says 0 whatever it holds: start with a few pages, not
         * with a buffer that must double a dozen times. */
        allocated = MIN(MAX((size_t) st.st_size, (size_t) 16 * 1024), max_size) + 2;
        buf = malloc(allocated);
        if (!buf)
                return -ENOMEM;

        for (;;) {
                ssize_t k;

                if (allocated - n < 2) {
                        size_t want = MIN(allocated * 2, max_size + 2);
                        char *b;

                        if (want <= allocated)
                                return -EFBIG;
                        b = realloc(buf, want);
                        if (!b)
                                return -ENOMEM;
                        buf = b;
                        allocated = want;
                }
                k = read(fd, buf + n, allocated - n - 1);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return negative_errno();
                }
                if (k == 0)
                        break;
                n += k;
                if (n > max_size)
                        return -EFBIG;
        }
        buf[n] = 0;
        if (ret_size)
                *ret_size = n;
        *ret = TAKE_PTR(buf);
        return 0;
}

int read_file_at(int dir_fd, const char *path, uint64_t resolve, size_t max_size, char **ret, size_t *ret_size,
                 mode_t *ret_mode) {
        _cleanup_close_ int fd = -EBADF;
        struct stat st = {};
        int r;

        r = open_regular_at(dir_fd, path, resolve, &fd, &st);
        if (ret_mode)
                *ret_mode = st.st_mode;
        if (r < 0)
                return r;
        return read_fd_full(fd, max_size, ret, ret_size);
}

int open_directory_at(int dir_fd, const char *path, uint64_t resolve) {
        /* O_DIRECTORY is checked before the inode is opened: a device node or FIFO fails with
         * ENOTDIR without its driver ever seeing an open. */
        return openat_resolve(dir_fd, path, O_RDONLY | O_DIRECTORY | O_NONBLOCK, resolve);
}

const char *inode_type_name(mode_t mode) {
        switch (mode & S_IFMT) {
        case S_IFREG:
                return "a regular file";
        case S_IFDIR:
                return "a directory";
        case S_IFIFO:
                return "a FIFO";
        case S_IFSOCK:
                return "a socket";
        case S_IFCHR:
                return "a character device";
        case S_IFBLK:
                return "a block device";
        case S_IFLNK:
                return "a symbolic link";
        default:
                return "of unknown type";
        }
}

const char *read_error_string(int error, mode_t mode, size_t max_size, char *buf, size_t buf_size) {
        switch (-abs(error)) {
        case -EISDIR:
        case -EBADFD:
                snprintf(buf, buf_size, "is %s, not a regular file", inode_type_name(mode));
                return buf;
        case -EFBIG:
                if (max_size >= 1024 * 1024)
                        snprintf(buf, buf_size, "is larger than %zu MiB", max_size / (1024 * 1024));
                else if (max_size >= 1024)
                        snprintf(buf, buf_size, "is larger than %zu KiB", max_size / 1024);
                else
                        snprintf(buf, buf_size, "is larger than %zu bytes", max_size);
                return buf;
        case -ELOOP:
                return "is a symbolic link where none is allowed, or has too many levels of them";
        case -EXDEV:
                return "resolves outside of the directory it must stay in";
        default:
                return strerror(abs(error));
        }
}

int mkdir_p_in_root(int root_fd, const char *path, mode_t mode) {
        _cleanup_free_ char *p = strdup(path);
        int fd;

        if (!p)
                return -ENOMEM;
        for (char *s = p;; s++) {
                char c;

                if (*s != '/' && *s != 0)
                        continue;
                if (s == p) {
                        if (*s == 0)
                                return -EINVAL;
                        continue;
                }
                c = *s;
                *s = 0;
                fd = open_directory_at(root_fd, p, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
                if (fd == -ENOENT) {
                        _cleanup_close_ int parent = -EBADF;
                        char *slash = strrchr(p, '/');
                        const char *name = slash ? slash + 1 : p;

                        if (slash) {
                                *slash = 0;
                                parent = open_directory_at(root_fd, p, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
                                *slash = '/';
                        } else {
                                parent = fcntl(root_fd, F_DUPFD_CLOEXEC, 3);
                                if (parent < 0)
                                        parent = negative_errno();
                        }
                        if (parent < 0)
                                return parent;
                        if (mkdirat(parent, name, mode) < 0 && errno != EEXIST)
                                return negative_errno();
                        fd = open_directory_at(root_fd, p, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
                }
                if (fd < 0)
                        return fd;
                if (c == 0)
                        return fd;
                safe_close(fd);
                *s = c;
        }
}

#define RM_RF_DEPTH_MAX 256

static int rm_rf_children(int dir_fd, dev_t dev, unsigned depth);

static int rm_rf_entry(int dir_fd, const char *name, dev_t dev, unsigned depth) {
        struct stat st;
        int fd, r;

        if (fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : negative_errno();
        if (!S_ISDIR(st.st_mode)) {
                r = RET_NERRNO(unlinkat(dir_fd, name, 0));
                return r == -ENOENT ? 0 : r;
        }
        if (st.st_dev != dev)
                return -EXDEV; /* a mount below: never removed through */
        if (depth >= RM_RF_DEPTH_MAX)
                return -ELOOP;
        fd = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
        if (fd < 0)
                return negative_errno();
        r = rm_rf_children(fd, dev, depth + 1);
        safe_close(fd);
        if (r < 0)
                return r;
        if (unlinkat(dir_fd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
                return negative_errno();
        return 0;
}

static int rm_rf_children(int dir_fd, dev_t dev, unsigned depth) {
        _cleanup_closedir_ DIR *d = NULL;
        struct dirent *de;
        int fd, r = 0;

        fd = fcntl(dir_fd, F_DUPFD_CLOEXEC, 3);
        if (fd < 0)
                return negative_errno();
        d = fdopendir(fd);
        if (!d) {
                safe_close(fd);
                return negative_errno();
        }
        while ((de = readdir(d))) {
                int k;

                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                k = rm_rf_entry(dirfd(d), de->d_name, dev, depth);
                if (k < 0 && r == 0)
                        r = k;
        }
        return r;
}

int rm_rf_at(int dir_fd, const char *name) {
        struct stat st;

        if (isempty(name) || strchr(name, '/') || streq(name, ".") || streq(name, ".."))
                return -EINVAL;
        if (fstat(dir_fd, &st) < 0)
                return negative_errno();
        return rm_rf_entry(dir_fd, name, st.st_dev, 0);
}
