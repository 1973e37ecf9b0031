/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "dlopen-util.h"
#include "util.h"

static int load_locked(const char *const *sonames, const DlopenSymbol *symbols, size_t n, int *state, char **ret_message) {
        void *dl = NULL;
        const char *tried = NULL;

        if (*state != 0)
                goto done;
        for (const char *const *s = sonames; *s && !dl; s++) {
                dl = dlopen(*s, RTLD_NOW | RTLD_NODELETE);
                tried = *s;
        }
        if (!dl) {
                __atomic_store_n(state, -1, __ATOMIC_RELEASE);
                if (ret_message && asprintf(ret_message, "%s cannot be loaded: %s", tried, strna(dlerror())) < 0)
                        *ret_message = NULL;
                return -EOPNOTSUPP;
        }
        for (size_t i = 0; i < n; i++) {
                *symbols[i].ptr = dlsym(dl, symbols[i].name);
                if (!*symbols[i].ptr) {
                        if (ret_message && asprintf(ret_message, "%s has no %s", tried, symbols[i].name) < 0)
                                *ret_message = NULL;
                        for (size_t k = 0; k < n; k++)
                                *symbols[k].ptr = NULL;
                        dlclose(dl);
                        __atomic_store_n(state, -1, __ATOMIC_RELEASE);
                        return -EOPNOTSUPP;
                }
        }
        /* Kept open for the life of the process; the pointers are visible to whoever reads 1. */
        __atomic_store_n(state, 1, __ATOMIC_RELEASE);
done:
        if (*state < 0 && ret_message && asprintf(ret_message, "%s cannot be loaded", sonames[0]) < 0)
                *ret_message = NULL;
        return *state > 0 ? 0 : -EOPNOTSUPP;
}

int dlopen_load(const char *const *sonames, const DlopenSymbol *symbols, size_t n, int *state, char **ret_message) {
        static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
        int r;

        if (__atomic_load_n(state, __ATOMIC_ACQUIRE) > 0)
                return 0;
        pthread_mutex_lock(&lock);
        r = load_locked(sonames, symbols, n, state, ret_message);
        pthread_mutex_unlock(&lock);
        return r;
}
