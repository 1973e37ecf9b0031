/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once
#include <stddef.h>

/* A library loaded when first needed (dlopen-crypto.c, dlopen-systemd.c): its functions are
 * called through sym_NAME pointers of the library's own types, filled here. */
typedef struct DlopenSymbol {
        const char *name;
        void **ptr;
} DlopenSymbol;

#define DLOPEN_SYMBOL(f) { #f, (void **) &sym_##f }

/* Opens the first of the sonames that exists and resolves every symbol, or none: a library
 * that lacks one of them is no library of ours (and is closed again).  *state is the caller's
 * (0 not tried, 1 loaded, -1 failed); the first call decides, the later ones only read it, and
 * calls from several threads are serialized.  0, or -EOPNOTSUPP with *ret_message (may be NULL)
 * saying which library or symbol is missing. */
int dlopen_load(const char *const *sonames, const DlopenSymbol *symbols, size_t n, int *state, char **ret_message);
