/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <ctype.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>

#include "fd-util.h"
#include "util.h"

void strv_free(char **l) {
        if (!l)
                return;
        for (char **i = l; *i; i++)
                free(*i);
        free(l);
}

size_t strv_length(char *const *l) {
        size_t n = 0;
        while (l && l[n])
                n++;
        return n;
}

int strv_push(char ***l, char *value) {
        size_t n = strv_length(*l);
        char **c;

        if (!value)
                return -ENOMEM;
        c = realloc(*l, sizeof(char *) * (n + 2));
        if (!c) {
                free(value);
                return -ENOMEM;
        }
        c[n] = value;
        c[n + 1] = NULL;
        *l = c;
        return 0;
}

int strv_extend(char ***l, const char *value) {
        return strv_push(l, strdup(value));
}

bool strv_contains(char *const *l, const char *value) {
        STRV_FOREACH(s, l)
                if (streq(*s, value))
                        return true;
        return false;
}

char *strv_join(char *const *l, const char *separator) {
        size_t n = 0, k = strlen(separator);
        char *r, *p;

        STRV_FOREACH(s, l)
                n += strlen(*s) + k;
        r = p = malloc(n + 1);
        if (!r)
                return NULL;
        *p = 0;
        STRV_FOREACH(s, l) {
                if (s != l)
                        p = stpcpy(p, separator);
                p = stpcpy(p, *s);
        }
        return r;
}

int strv_split(const char *s, const char *separators, char ***ret) {
        _cleanup_strv_free_ char **l = NULL;
        int r;

        /* An empty input gives an empty (not NULL) list. */
        l = calloc(1, sizeof(char *));
        if (!l)
                return -ENOMEM;
        while (s && *s) {
                size_t n;

                s += strspn(s, separators);
                n = strcspn(s, separators);
                if (n == 0)
                        break;
                r = strv_push(&l, strndup(s, n));
                if (r < 0)
                        return r;
                s += n;
        }
        *ret = TAKE_PTR(l);
        return 0;
}

char *path_join(const char *a, const char *b) {
        size_t la = strlen(a);
        bool slash = la > 0 && a[la - 1] == '/';

        while (*b == '/')
                b++;
        return strjoin3(a, slash || la == 0 ? "" : "/", b);
}

char *strjoin3(const char *a, const char *b, const char *c) {
        char *r;
        if (asprintf(&r, "%s%s%s", a, b, c) < 0)
                return NULL;
        return r;
}

bool endswith(const char *s, const char *suffix) {
        size_t ls = strlen(s), lx = strlen(suffix);
        return ls >= lx && memcmp(s + ls - lx, suffix, lx) == 0;
}

const char *startswith(const char *s, const char *prefix) {
        size_t l = strlen(prefix);
        return strncmp(s, prefix, l) == 0 ? s + l : NULL;
}

char *strstrip(char *s) {
        char *e;

        while (isspace((unsigned char) *s))
                s++;
        e = s + strlen(s);
        while (e > s && isspace((unsigned char) e[-1]))
                *--e = 0;
        return s;
}

int read_file_at(int dir_fd, const char *path, size_t max_size, char **ret, size_t *ret_size) {
        _cleanup_close_ int fd = -EBADF;

        /* Absolute symlinks (etc/os-release -> /usr/lib/os-release) resolve inside the tree,
         * never outside it. */
        fd = openat_resolve(dir_fd, path, O_RDONLY | O_NOCTTY, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
        if (fd < 0)
                return fd;
        return read_fd_full(fd, max_size, ret, ret_size);
}

int read_fd_full(int fd, size_t max_size, char **ret, size_t *ret_size) {
        _cleanup_free_ char *buf = NULL;
        size_t n = 0, allocated = 0;
        struct stat st;

        if (fstat(fd, &st) < 0)
                return negative_errno();
        if (!S_ISREG(st.st_mode))
                return S_ISDIR(st.st_mode) ? -EISDIR : -EBADFD;

        for (;;) {
                ssize_t k;

                if (n + 1 >= allocated) {
                        char *b;

                        if (allocated > max_size)
                                return -EFBIG;
                        allocated = allocated ? allocated * 2 : 4096;
                        b = realloc(buf, allocated);
                        if (!b)
                                return -ENOMEM;
                        buf = b;
                }
                k = read(fd, buf + n, allocated - n - 1);
                if (k < 0)
                        return negative_errno();
                if (k == 0)
                        break;
                n += k;
        }
        if (n > max_size)
                return -EFBIG;
        buf[n] = 0;
        if (ret_size)
                *ret_size = n;
        *ret = TAKE_PTR(buf);
        return 0;
}

int write_file_atomic_at(int dir_fd, const char *path, const char *content, mode_t mode) {
        _cleanup_free_ char *tmp = NULL;
        _cleanup_close_ int fd = -EBADF;
        size_t len = strlen(content);
        int r;

        if (asprintf(&tmp, "%s.tmp%d", path, (int) getpid()) < 0)
                return -ENOMEM;
        fd = openat(dir_fd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
        if (fd < 0)
                return negative_errno();
        while (len > 0) {
                ssize_t k = write(fd, content, len);
                if (k < 0) {
                        r = negative_errno();
                        goto fail;
                }
                content += k;
                len -= k;
        }
        if (fsync(fd) < 0 || renameat(dir_fd, tmp, dir_fd, path) < 0) {
                r = negative_errno();
                goto fail;
        }
        return 0;
fail:
        (void) unlinkat(dir_fd, tmp, 0);
        return r;
}

int mkdir_p_at(int dir_fd, const char *path, mode_t mode) {
        _cleanup_free_ char *p = strdup(path);

        if (!p)
                return -ENOMEM;
        for (char *s = p + 1;; s++) {
                if (*s != '/' && *s != 0)
                        continue;
                char c = *s;
                *s = 0;
                if (mkdirat(dir_fd, p, mode) < 0 && errno != EEXIST)
                        return negative_errno();
                if (c == 0)
                        break;
                *s = c;
        }
        return 0;
}

static int char_class(char c) {
        /* Order of separators and segment types when two versions differ in kind. */
        if (c == '~')
                return 0;
        if (c == 0)
                return 1;
        if (c == '-')
                return 2;
        if (c == '^')
                return 3;
        if (c == '.')
                return 5; /* "1.1" is newer than "1a" */
        return 4;
}

int version_compare(const char *a, const char *b) {
        for (;;) {
                /* Skip characters that are neither alphanumerics nor one of the separators we
                 * give a meaning to. */
                while (*a && !isalnum((unsigned char) *a) && !strchr("~-^.", *a))
                        a++;
                while (*b && !isalnum((unsigned char) *b) && !strchr("~-^.", *b))
                        b++;

                if (*a == 0 && *b == 0)
                        return 0;

                /* Handle separators: '~' sorts lowest, end of string next, then '-', '^', then
                 * a segment, and '.' highest. */
                if (!isalnum((unsigned char) *a) || !isalnum((unsigned char) *b)) {
                        int ca = char_class(*a), cb = char_class(*b);
                        if (ca != cb)
                                return ca < cb ? -1 : 1;
                        a++;
                        b++;
                        continue;
                }

                if (isdigit((unsigned char) *a) || isdigit((unsigned char) *b)) {
                        const char *sa, *sb;
                        size_t la, lb;
                        int c;

                        /* Numbers sort after letters. */
                        if (!isdigit((unsigned char) *a))
                                return -1;
                        if (!isdigit((unsigned char) *b))
                                return 1;
                        while (*a == '0')
                                a++;
                        while (*b == '0')
                                b++;
                        for (sa = a; isdigit((unsigned char) *a); a++)
                                ;
                        for (sb = b; isdigit((unsigned char) *b); b++)
                                ;
                        la = a - sa;
                        lb = b - sb;
                        if (la != lb)
                                return la < lb ? -1 : 1;
                        c = strncmp(sa, sb, la);
                        if (c != 0)
                                return c < 0 ? -1 : 1;
                } else {
                        const char *sa, *sb;
                        size_t la, lb;
                        int c;

                        for (sa = a; isalpha((unsigned char) *a); a++)
                                ;
                        for (sb = b; isalpha((unsigned char) *b); b++)
                                ;
                        la = a - sa;
                        lb = b - sb;
                        c = strncmp(sa, sb, MIN(la, lb));
                        if (c != 0)
                                return c < 0 ? -1 : 1;
                        if (la != lb)
                                return la < lb ? -1 : 1;
                }
        }
}

uint64_t now_realtime_usec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (uint64_t) ts.tv_sec * 1000000ULL + ts.tv_nsec / 1000;
}

uint64_t now_monotonic_usec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000ULL + ts.tv_nsec / 1000;
}

char *format_timestamp(uint64_t usec) {
        char buf[64];
        time_t t = (time_t) (usec / 1000000ULL);
        struct tm tm;

        if (!localtime_r(&t, &tm) || strftime(buf, sizeof(buf), "%a %Y-%m-%d %H:%M:%S %Z", &tm) == 0)
                return NULL;
        return strdup(buf);
}

int random_hex(size_t n_bytes, char **ret) {
        _cleanup_free_ unsigned char *b = malloc(n_bytes);
        char *s;

        if (!b)
                return -ENOMEM;
        if (getrandom(b, n_bytes, 0) != (ssize_t) n_bytes)
                return negative_errno();
        s = malloc(n_bytes * 2 + 1);
        if (!s)
                return -ENOMEM;
        for (size_t i = 0; i < n_bytes; i++)
                sprintf(s + 2 * i, "%02x", b[i]);
        *ret = s;
        return 0;
}

void stamp_add_u64(uint64_t *stamp, uint64_t v) {
        for (int i = 0; i < 8; i++) {
                *stamp ^= (v >> (8 * i)) & 0xff;
                *stamp *= UINT64_C(0x100000001b3);
        }
}

void stamp_add_string(uint64_t *stamp, const char *s) {
        for (; s && *s; s++) {
                *stamp ^= (unsigned char) *s;
                *stamp *= UINT64_C(0x100000001b3);
        }
        stamp_add_u64(stamp, 0);
}

void stamp_add_stat(uint64_t *stamp, const struct stat *st) {
        stamp_add_u64(stamp, st->st_dev);
        stamp_add_u64(stamp, st->st_ino);
        stamp_add_u64(stamp, st->st_size);
        stamp_add_u64(stamp, (uint64_t) st->st_ctim.tv_sec * 1000000000ULL + st->st_ctim.tv_nsec);
        stamp_add_u64(stamp, (uint64_t) st->st_mtim.tv_sec * 1000000000ULL + st->st_mtim.tv_nsec);
}
