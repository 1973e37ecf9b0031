/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* libcryptsetup and libcrypto, loaded when an image first needs them (verity, a root hash
 * signature, a stale dm device to remove) rather than by the dynamic linker at every start:
 * with their own dependencies (libdevmapper, libudev, libgcrypt, libargon2, ...) they were
 * most of the cost of starting sysextd, which every client command and every boot pays.
 * libblkid likewise, when an image is not erofs (disk.c recognises erofs itself): the daemon's
 * bus process never probes an image, and the library was 128 KiB of its resident memory.
 * The calls go through sym_NAME pointers of the same types as the libraries' own functions. */
#include <blkid.h>
#include <libcryptsetup.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/pkcs7.h>
#include <openssl/safestack.h>
#include <openssl/x509.h>

#define DLSYM_DECLARE(f) extern typeof(f) *sym_##f

DLSYM_DECLARE(crypt_init_data_device);
DLSYM_DECLARE(crypt_set_log_callback);
DLSYM_DECLARE(crypt_load);
DLSYM_DECLARE(crypt_activate_by_volume_key);
DLSYM_DECLARE(crypt_activate_by_signed_key);
DLSYM_DECLARE(crypt_deactivate_by_name);
DLSYM_DECLARE(crypt_free);

DLSYM_DECLARE(EVP_DecodeBlock);
DLSYM_DECLARE(BIO_new_mem_buf);
DLSYM_DECLARE(BIO_free);
DLSYM_DECLARE(PEM_read_bio_X509);
DLSYM_DECLARE(X509_free);
DLSYM_DECLARE(X509_STORE_new);
DLSYM_DECLARE(X509_STORE_free);
DLSYM_DECLARE(d2i_PKCS7);
DLSYM_DECLARE(PKCS7_free);
DLSYM_DECLARE(PKCS7_verify);
DLSYM_DECLARE(PKCS7_get0_signers);
DLSYM_DECLARE(ERR_clear_error);
DLSYM_DECLARE(OPENSSL_sk_new_null);
DLSYM_DECLARE(OPENSSL_sk_push);
DLSYM_DECLARE(OPENSSL_sk_num);
DLSYM_DECLARE(OPENSSL_sk_free);
DLSYM_DECLARE(OPENSSL_sk_pop_free);

DLSYM_DECLARE(blkid_new_probe);
DLSYM_DECLARE(blkid_free_probe);
DLSYM_DECLARE(blkid_probe_set_device);
DLSYM_DECLARE(blkid_probe_enable_superblocks);
DLSYM_DECLARE(blkid_probe_set_superblocks_flags);
DLSYM_DECLARE(blkid_probe_enable_partitions);
DLSYM_DECLARE(blkid_probe_set_partitions_flags);
DLSYM_DECLARE(blkid_do_safeprobe);
DLSYM_DECLARE(blkid_do_fullprobe);
DLSYM_DECLARE(blkid_probe_lookup_value);
DLSYM_DECLARE(blkid_probe_get_partitions);
DLSYM_DECLARE(blkid_partlist_numof_partitions);
DLSYM_DECLARE(blkid_partlist_get_partition);
DLSYM_DECLARE(blkid_partition_get_type_string);
DLSYM_DECLARE(blkid_partition_get_uuid);
DLSYM_DECLARE(blkid_partition_get_start);
DLSYM_DECLARE(blkid_partition_get_size);

/* Load the library and every symbol above from it, once: 0 when they are there, else
 * -EOPNOTSUPP with *ret_message (may be NULL) saying which library or symbol is missing. */
int dlopen_cryptsetup(char **ret_message);
int dlopen_libcrypto(char **ret_message);
int dlopen_blkid(char **ret_message);
