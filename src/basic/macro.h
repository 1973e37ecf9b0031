/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _unused_ __attribute__((unused))
#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define _noreturn_ __attribute__((noreturn))
#define _pure_ __attribute__((pure))

#define ELEMENTSOF(x) (sizeof(x) / sizeof((x)[0]))
#define MAX(a, b) ((a) > (b) ? (a) : (b))
#define MIN(a, b) ((a) < (b) ? (a) : (b))

/* Move ownership out of a variable that has a cleanup attribute. */
#define TAKE_GENERIC(var, type, nullvalue)                   \
        ({                                                   \
                type *_pvar_ = &(var);                       \
                type _var_ = *_pvar_;                        \
                *_pvar_ = (nullvalue);                       \
                _var_;                                       \
        })
#define TAKE_PTR(p) TAKE_GENERIC(p, typeof(p), NULL)
#define TAKE_FD(fd) TAKE_GENERIC(fd, int, -EBADF)

#define DEFINE_TRIVIAL_CLEANUP_FUNC(type, func)              \
        static inline void func##p(type *p) {                \
                if (*p)                                      \
                        func(*p);                            \
        }

static inline void freep(void *p) {
        free(*(void **) p);
}
#define _cleanup_free_ _cleanup_(freep)

static inline int safe_close(int fd) {
        if (fd >= 0) {
                int saved = errno;
                (void) close(fd);
                errno = saved;
        }
        return -EBADF;
}

static inline void closep(int *fd) {
        *fd = safe_close(*fd);
}
#define _cleanup_close_ _cleanup_(closep)

static inline void fclosep(FILE **f) {
        if (*f)
                fclose(*f);
}
#define _cleanup_fclose_ _cleanup_(fclosep)

static inline void closedirp(DIR **d) {
        if (*d)
                closedir(*d);
}
#define _cleanup_closedir_ _cleanup_(closedirp)

/* Return -errno of the last failing call, never 0 (guards against callers that forgot to set errno). */
static inline int negative_errno(void) {
        return errno > 0 ? -errno : -EIO;
}

#define RET_NERRNO(expr)                                     \
        ({                                                   \
                int _r_ = (expr);                            \
                _r_ < 0 ? negative_errno() : _r_;            \
        })

#define streq(a, b) (strcmp((a), (b)) == 0)
static inline int streq_ptr(const char *a, const char *b) {
        return a && b ? strcmp(a, b) == 0 : a == b;
}
static inline int str_in_set_internal(const char *s, const char *const *set) {
        for (; *set; set++)
                if (strcmp(s, *set) == 0)
                        return 1;
        return 0;
}
#define STR_IN_SET(s, ...) str_in_set_internal((s), (const char *const[]) { __VA_ARGS__, NULL })
/* Whether x is one of the values given (all of x's type). */
#define IN_SET(x, first, ...)                                                          \
        ({                                                                             \
                const typeof(first) _x_ = (x), _set_[] = { first, __VA_ARGS__ };       \
                bool _found_ = false;                                                  \
                for (size_t _i_ = 0; _i_ < ELEMENTSOF(_set_); _i_++)                   \
                        if (_set_[_i_] == _x_) {                                       \
                                _found_ = true;                                        \
                                break;                                                 \
                        }                                                              \
                _found_;                                                               \
        })

#define isempty(s) (!(s) || !*(s))

static inline const char *strempty(const char *s) {
        return s ?: "";
}

static inline const char *strna(const char *s) {
        return s ?: "n/a";
}
