/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlopen-crypto.h"
#include "util.h"

#define DLSYM_DEFINE(f) typeof(f) *sym_##f = NULL

DLSYM_DEFINE(crypt_init_data_device);
DLSYM_DEFINE(crypt_set_log_callback);
DLSYM_DEFINE(crypt_load);
DLSYM_DEFINE(crypt_activate_by_volume_key);
DLSYM_DEFINE(crypt_activate_by_signed_key);
DLSYM_DEFINE(crypt_deactivate_by_name);
DLSYM_DEFINE(crypt_free);

DLSYM_DEFINE(EVP_DecodeBlock);
DLSYM_DEFINE(BIO_new_mem_buf);
DLSYM_DEFINE(BIO_free);
DLSYM_DEFINE(PEM_read_bio_X509);
DLSYM_DEFINE(X509_free);
DLSYM_DEFINE(X509_STORE_new);
DLSYM_DEFINE(X509_STORE_free);
DLSYM_DEFINE(d2i_PKCS7);
DLSYM_DEFINE(PKCS7_free);
DLSYM_DEFINE(PKCS7_verify);
DLSYM_DEFINE(PKCS7_get0_signers);
DLSYM_DEFINE(ERR_clear_error);
DLSYM_DEFINE(OPENSSL_sk_new_null);
DLSYM_DEFINE(OPENSSL_sk_push);
DLSYM_DEFINE(OPENSSL_sk_num);
DLSYM_DEFINE(OPENSSL_sk_free);
DLSYM_DEFINE(OPENSSL_sk_pop_free);

DLSYM_DEFINE(blkid_new_probe);
DLSYM_DEFINE(blkid_free_probe);
DLSYM_DEFINE(blkid_probe_set_device);
DLSYM_DEFINE(blkid_probe_enable_superblocks);
DLSYM_DEFINE(blkid_probe_set_superblocks_flags);
DLSYM_DEFINE(blkid_probe_enable_partitions);
DLSYM_DEFINE(blkid_probe_set_partitions_flags);
DLSYM_DEFINE(blkid_do_safeprobe);
DLSYM_DEFINE(blkid_do_fullprobe);
DLSYM_DEFINE(blkid_probe_lookup_value);
DLSYM_DEFINE(blkid_probe_get_partitions);
DLSYM_DEFINE(blkid_partlist_numof_partitions);
DLSYM_DEFINE(blkid_partlist_get_partition);
DLSYM_DEFINE(blkid_partition_get_type_string);
DLSYM_DEFINE(blkid_partition_get_uuid);
DLSYM_DEFINE(blkid_partition_get_start);
DLSYM_DEFINE(blkid_partition_get_size);

typedef struct Symbol {
        const char *name;
        void **ptr;
} Symbol;

#define SYM(f) { #f, (void **) &sym_##f }

/* Opens the first of the sonames that exists and resolves every symbol, or none: a library
 * that lacks one of them is no library of ours (and is closed again). */
static int load(const char *const *sonames, const Symbol *symbols, size_t n, int *state, char **ret_message) {
        void *dl = NULL;
        const char *tried = NULL;

        if (*state != 0)
                goto done;
        for (const char *const *s = sonames; *s && !dl; s++) {
                dl = dlopen(*s, RTLD_NOW | RTLD_NODELETE);
                tried = *s;
        }
        if (!dl) {
                *state = -1;
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
                        *state = -1;
                        return -EOPNOTSUPP;
                }
        }
        *state = 1; /* kept open for the life of the process */
done:
        if (*state < 0 && ret_message && asprintf(ret_message, "%s cannot be loaded", sonames[0]) < 0)
                *ret_message = NULL;
        return *state > 0 ? 0 : -EOPNOTSUPP;
}

int dlopen_cryptsetup(char **ret_message) {
        static const char *const sonames[] = { "libcryptsetup.so.12", NULL };
        static const Symbol symbols[] = {
                SYM(crypt_init_data_device), SYM(crypt_set_log_callback),       SYM(crypt_load),
                SYM(crypt_activate_by_volume_key), SYM(crypt_activate_by_signed_key), SYM(crypt_deactivate_by_name),
                SYM(crypt_free),
        };
        static int state = 0;

        return load(sonames, symbols, ELEMENTSOF(symbols), &state, ret_message);
}

int dlopen_libcrypto(char **ret_message) {
        static const char *const sonames[] = { "libcrypto.so.3", "libcrypto.so.1.1", NULL };
        static const Symbol symbols[] = {
                SYM(EVP_DecodeBlock),    SYM(BIO_new_mem_buf),    SYM(BIO_free),        SYM(PEM_read_bio_X509),
                SYM(X509_free),          SYM(X509_STORE_new),     SYM(X509_STORE_free), SYM(d2i_PKCS7),
                SYM(PKCS7_free),         SYM(PKCS7_verify),       SYM(PKCS7_get0_signers), SYM(ERR_clear_error),
                SYM(OPENSSL_sk_new_null), SYM(OPENSSL_sk_push),   SYM(OPENSSL_sk_num),  SYM(OPENSSL_sk_free),
                SYM(OPENSSL_sk_pop_free),
        };
        static int state = 0;

        return load(sonames, symbols, ELEMENTSOF(symbols), &state, ret_message);
}

int dlopen_blkid(char **ret_message) {
        static const char *const sonames[] = { "libblkid.so.1", NULL };
        static const Symbol symbols[] = {
                SYM(blkid_new_probe),                 SYM(blkid_free_probe),
                SYM(blkid_probe_set_device),          SYM(blkid_probe_enable_superblocks),
                SYM(blkid_probe_set_superblocks_flags), SYM(blkid_probe_enable_partitions),
                SYM(blkid_probe_set_partitions_flags), SYM(blkid_do_safeprobe),
                SYM(blkid_do_fullprobe),              SYM(blkid_probe_lookup_value),
                SYM(blkid_probe_get_partitions),      SYM(blkid_partlist_numof_partitions),
                SYM(blkid_partlist_get_partition),    SYM(blkid_partition_get_type_string),
                SYM(blkid_partition_get_uuid),        SYM(blkid_partition_get_start),
                SYM(blkid_partition_get_size),
        };
        static int state = 0;

        return load(sonames, symbols, ELEMENTSOF(symbols), &state, ret_message);
}
