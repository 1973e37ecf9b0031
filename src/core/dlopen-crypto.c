/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlopen-crypto.h"
#include "dlopen-util.h"
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

int dlopen_cryptsetup(char **ret_message) {
        static const char *const sonames[] = { "libcryptsetup.so.12", NULL };
        static const DlopenSymbol symbols[] = {
                DLOPEN_SYMBOL(crypt_init_data_device), DLOPEN_SYMBOL(crypt_set_log_callback),       DLOPEN_SYMBOL(crypt_load),
                DLOPEN_SYMBOL(crypt_activate_by_volume_key), DLOPEN_SYMBOL(crypt_activate_by_signed_key), DLOPEN_SYMBOL(crypt_deactivate_by_name),
                DLOPEN_SYMBOL(crypt_free),
        };
        static int state = 0;

        return dlopen_load(sonames, symbols, ELEMENTSOF(symbols), &state, ret_message);
}

int dlopen_libcrypto(char **ret_message) {
        static const char *const sonames[] = { "libcrypto.so.3", "libcrypto.so.1.1", NULL };
        static const DlopenSymbol symbols[] = {
                DLOPEN_SYMBOL(EVP_DecodeBlock),    DLOPEN_SYMBOL(BIO_new_mem_buf),    DLOPEN_SYMBOL(BIO_free),        DLOPEN_SYMBOL(PEM_read_bio_X509),
                DLOPEN_SYMBOL(X509_free),          DLOPEN_SYMBOL(X509_STORE_new),     DLOPEN_SYMBOL(X509_STORE_free), DLOPEN_SYMBOL(d2i_PKCS7),
                DLOPEN_SYMBOL(PKCS7_free),         DLOPEN_SYMBOL(PKCS7_verify),       DLOPEN_SYMBOL(PKCS7_get0_signers), DLOPEN_SYMBOL(ERR_clear_error),
                DLOPEN_SYMBOL(OPENSSL_sk_new_null), DLOPEN_SYMBOL(OPENSSL_sk_push),   DLOPEN_SYMBOL(OPENSSL_sk_num),  DLOPEN_SYMBOL(OPENSSL_sk_free),
                DLOPEN_SYMBOL(OPENSSL_sk_pop_free),
        };
        static int state = 0;

        return dlopen_load(sonames, symbols, ELEMENTSOF(symbols), &state, ret_message);
}

int dlopen_blkid(char **ret_message) {
        static const char *const sonames[] = { "libblkid.so.1", NULL };
        static const DlopenSymbol symbols[] = {
                DLOPEN_SYMBOL(blkid_new_probe),                 DLOPEN_SYMBOL(blkid_free_probe),
                DLOPEN_SYMBOL(blkid_probe_set_device),          DLOPEN_SYMBOL(blkid_probe_enable_superblocks),
                DLOPEN_SYMBOL(blkid_probe_set_superblocks_flags), DLOPEN_SYMBOL(blkid_probe_enable_partitions),
                DLOPEN_SYMBOL(blkid_probe_set_partitions_flags), DLOPEN_SYMBOL(blkid_do_safeprobe),
                DLOPEN_SYMBOL(blkid_do_fullprobe),              DLOPEN_SYMBOL(blkid_probe_lookup_value),
                DLOPEN_SYMBOL(blkid_probe_get_partitions),      DLOPEN_SYMBOL(blkid_partlist_numof_partitions),
                DLOPEN_SYMBOL(blkid_partlist_get_partition),    DLOPEN_SYMBOL(blkid_partition_get_type_string),
                DLOPEN_SYMBOL(blkid_partition_get_uuid),        DLOPEN_SYMBOL(blkid_partition_get_start),
                DLOPEN_SYMBOL(blkid_partition_get_size),
        };
        static int state = 0;

        return dlopen_load(sonames, symbols, ELEMENTSOF(symbols), &state, ret_message);
}
