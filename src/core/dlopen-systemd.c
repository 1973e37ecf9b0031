/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define DLOPEN_SYSTEMD_NO_REDIRECT 1
#include "dlopen-systemd.h"
#include "dlopen-util.h"
#include "util.h"

#define DLSYM_DEFINE_SYSTEMD(f) typeof(f) *sym_##f = NULL;
LIBSYSTEMD_FUNCTIONS(DLSYM_DEFINE_SYSTEMD)
LIBSYSTEMD_VARLINK_FUNCTIONS(DLSYM_DEFINE_SYSTEMD)
const unsigned *sym_sd_bus_object_vtable_format = NULL;

#define DLOPEN_SYMBOL_SYSTEMD(f) DLOPEN_SYMBOL(f),

int dlopen_libsystemd(char **ret_message) {
        static const char *const sonames[] = { "libsystemd.so.0", NULL };
        static const DlopenSymbol symbols[] = {
                LIBSYSTEMD_FUNCTIONS(DLOPEN_SYMBOL_SYSTEMD)
                LIBSYSTEMD_VARLINK_FUNCTIONS(DLOPEN_SYMBOL_SYSTEMD)
                DLOPEN_SYMBOL(sd_bus_object_vtable_format),
        };
        static int state = 0;

        return dlopen_load(sonames, symbols, ELEMENTSOF(symbols), &state, ret_message);
}
