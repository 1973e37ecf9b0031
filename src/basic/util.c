/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <ctype.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sched.h>
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

int parse_boolean(const char *v) {
        if (STR_IN_SET(v, "1", "yes", "y", "true", "t", "on"))
                return 1;
        if (STR_IN_SET(v, "0", "no", "n", "false", "f", "off"))
                return 0;
        return -EINVAL;
}

int strv_copy(char *const *l, char ***ret) {
        char **c = NULL;

        STRV_FOREACH(x, l)
                if (strv_extend(&c, *x) < 0) {
                        strv_free(c);
                        return -ENOMEM;
                }
        *ret = c;
        return 0;
}

bool strv_contains(char *const *l, const char *value) {
        STRV_FOREACH(s, l)
                if (streq(*s, value))
                        return true;
        return false;
}

int string_table_find(const char *const *table, size_t n, const char *s) {
        for (size_t i = 0; s && i < n; i++)
                if (table[i] && streq(table[i], s))
                        return (int) i;
        return -EINVAL;
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

int write_file_atomic_at(int dir_fd, const char *path, const char *content, mode_t mode) {
        return write_file_atomic_hook_at(dir_fd, path, content, mode, NULL, NULL);
}

int write_file_atomic_hook_at(int dir_fd, const char *path, const char *content, mode_t mode,
                              void (*before_rename)(int dir_fd, const char *tmp, void *userdata), void *userdata) {
        _cleanup_free_ char *tmp = NULL;
        _cleanup_close_ int fd = -EBADF;
        size_t len = strlen(content);
        int r;

        if (asprintf(&tmp, "%s.tmp%d", path, (int) getpid()) < 0)
                return -ENOMEM;
        /* Whatever sits at the temporary name (a leftover, or a FIFO someone put there) goes
         * first; O_EXCL then guarantees a new regular file. */
        (void) unlinkat(dir_fd, tmp, 0);
        fd = openat(dir_fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, mode);
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
        if (fsync(fd) < 0) {
                r = negative_errno();
                goto fail;
        }
        if (before_rename)
                before_rename(dir_fd, tmp, userdata);
        if (renameat(dir_fd, tmp, dir_fd, path) < 0) {
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

int parse_seconds(const char *s, uint64_t max_usec, uint64_t *ret_usec) {
        unsigned long long v;
        char *end;

        if (!s || !(*s >= '0' && *s <= '9'))
                return -EINVAL;
        errno = 0;
        v = strtoull(s, &end, 10);
        if (errno || *end || v > max_usec / 1000000ULL)
                return -EINVAL;
        *ret_usec = (uint64_t) v * 1000000ULL;
        return 0;
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

int set_message(char **ret, int error, const char *fmt, ...) {
        va_list ap;
        char *m;

        if (!ret)
                return error ? -abs(error) : 0;
        errno = abs(error);
        va_start(ap, fmt);
        if (vasprintf(&m, fmt, ap) < 0)
                m = NULL;
        va_end(ap);
        free(*ret);
        *ret = m;
        return error ? -abs(error) : 0;
}

/* Length of the UTF-8 sequence starting at s (1-4), or 0 when it is not a valid one
 * (overlong forms, surrogates and code points above U+10FFFF are invalid). */
static size_t utf8_sequence_length(const unsigned char *s) {
        uint32_t cp;
        size_t len;

        if (s[0] < 0x80)
                return 1;
        if (s[0] >= 0xc2 && s[0] <= 0xdf) {
                len = 2;
                cp = s[0] & 0x1f;
        } else if (s[0] >= 0xe0 && s[0] <= 0xef) {
                len = 3;
                cp = s[0] & 0x0f;
        } else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
                len = 4;
                cp = s[0] & 0x07;
        } else
                return 0;
        for (size_t i = 1; i < len; i++) {
                if ((s[i] & 0xc0) != 0x80)
                        return 0;
                cp = (cp << 6) | (s[i] & 0x3f);
        }
        if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
            (cp >= 0xd800 && cp <= 0xdfff))
                return 0;
        return len;
}

bool utf8_is_valid(const char *s) {
        for (const unsigned char *p = (const unsigned char *) s; *p;) {
                size_t n = utf8_sequence_length(p);
                if (n == 0)
                        return false;
                p += n;
        }
        return true;
}

bool string_has_control(const char *s) {
        for (const unsigned char *p = (const unsigned char *) s; *p; p++) {
                if (*p < 0x20 || *p == 0x7f)
                        return true;
                /* C1 controls, U+0080..U+009F, encoded as C2 80..C2 9F. */
                if (p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f)
                        return true;
        }
        return false;
}

char *string_escape(const char *s) {
        size_t n = strlen(s);
        char *r = malloc(n * 4 + 1), *o = r;

        if (!r)
                return NULL;
        for (const unsigned char *p = (const unsigned char *) s; *p;) {
                size_t len = utf8_sequence_length(p);

                if (len == 1 && *p == '\\') {
                        *o++ = '\\';
                        *o++ = '\\';
                        p++;
                } else if (len == 1 && (*p < 0x20 || *p == 0x7f)) {
                        o += sprintf(o, "\\x%02x", *p);
                        p++;
                } else if (len == 2 && p[0] == 0xc2 && p[1] <= 0x9f) {
                        o += sprintf(o, "\\x%02x\\x%02x", p[0], p[1]);
                        p += 2;
                } else if (len == 0) {
                        o += sprintf(o, "\\x%02x", *p);
                        p++;
                } else {
                        memcpy(o, p, len);
                        o += len;
                        p += len;
                }
        }
        *o = 0;
        return r;
}

const char *string_safe(const char *s, char **buf) {
        if (!s)
                return NULL;
        if (utf8_is_valid(s) && !string_has_control(s) && !strchr(s, '\\'))
                return s;
        free(*buf);
        *buf = string_escape(s);
        return *buf ?: "(out of memory)";
}

bool cpu_mask_elsewhere(cpu_set_t *ret) {
        int cpu = sched_getcpu();

        if (cpu < 0 || cpu >= CPU_SETSIZE || sched_getaffinity(0, sizeof(*ret), ret) < 0 || CPU_COUNT(ret) < 2 ||
            !CPU_ISSET(cpu, ret))
                return false;
        CPU_CLR(cpu, ret);
        return true;
}

void cpu_nudge_away(pid_t pid) {
        cpu_set_t mask;

        if (pid > 0 && cpu_mask_elsewhere(&mask))
                (void) sched_setaffinity(pid, sizeof(mask), &mask);
}

void cpu_nudge_back(pid_t pid) {
        cpu_set_t mask;

        if (pid > 0 && sched_getaffinity(0, sizeof(mask), &mask) >= 0)
                (void) sched_setaffinity(pid, sizeof(mask), &mask);
}
