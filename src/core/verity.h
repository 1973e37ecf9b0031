/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* dm-verity through libcryptsetup, root hash signatures through OpenSSL. */

typedef enum VerityMode {
        VERITY_NONE,
        VERITY_USERSPACE, /* the whole image was checked against the root hash before mounting */
        VERITY_DM,        /* mounted from a dm-verity device: every read is checked */
} VerityMode;

const char *verity_mode_to_string(VerityMode m);
int verity_mode_from_string(const char *s);

typedef struct VeritySource {
        char *roothash;       /* lowercase hex */
        uint8_t *signature;   /* DER PKCS#7 over the hex root hash, or NULL */
        size_t signature_size;
        char *hash_path;      /* file holding the hash tree with its superblock, for messages */
        int hash_fd;          /* that file, open */
        uint64_t hash_offset; /* byte offset of the verity superblock in it */
        const char *origin;   /* "sidecar files" or "partitions", for messages */
} VeritySource;

void verity_source_done(VeritySource *v);
#define _cleanup_verity_source_ _cleanup_(verity_source_done)

/* Checks and lowercases a hex root hash (whitespace around it is dropped). */
int verity_normalize_roothash(const char *in, char **ret);

/* Looks for NAME.roothash, NAME.verity and NAME.roothash.p7s next to the image, in the
 * directory 'dir' below root_fd (each resolved inside the root; dir_display names it in
 * messages).  Returns 0 with roothash NULL when there are none, -EBADMSG with *ret_reason
 * when the set is incomplete or unreadable. */
int verity_find_sidecars(int root_fd, const char *dir, const char *dir_display, const char *name, VeritySource *ret,
                         char **ret_reason);

/* The root hash the sidecars of a file system image give, read as verity_find_sidecars()
 * reads it (NAME.roothash resolved inside the root, a regular file of at most 4 KiB, hex of
 * 32 to 128 digits), without opening the hash tree or the signature: for a refresh, before
 * any image is opened.  *ret_roothash is NULL when NAME.roothash or NAME.verity is not there
 * or NAME.roothash holds no root hash (the probe says why); *ret_signature_sidecar says
 * whether NAME.roothash.p7s is there.  Fails only with -ENOMEM. */
int verity_peek_sidecars(int root_fd, const char *dir, const char *name, char **ret_roothash,
                         bool *ret_signature_sidecar);

/* Parses the JSON of a verity signature partition ({"rootHash": ..., "signature": base64}). */
int verity_parse_signature_json(const char *json, char **ret_roothash, uint8_t **ret_sig, size_t *ret_sig_size,
                                char **ret_reason);

/* Checks a PKCS#7 signature of the root hash against the certificates (PEM, *.crt or *.pem)
 * in the directory cert_dir below root_fd (cert_display names it in messages).  1: signed by
 * one of them; 0: not (*ret_reason says why); < 0: error. */
int verity_check_signature(const VeritySource *v, int root_fd, const char *cert_dir, const char *cert_display,
                           char **ret_reason);

typedef struct VerityDevice {
        int fd;          /* the dm device (VERITY_DM), else -EBADF */
        dev_t devnum;
        uint64_t diskseq;
        char *name;      /* dm name, removed (deferred) once mounted */
} VerityDevice;

void verity_device_done(VerityDevice *d);

/* Verifies the data on data_fd (our loop device) against v.  In userspace mode reads and
 * hashes everything now; in dm mode opens a dm-verity device over it, with the signature
 * checked by the kernel keyring when the kernel has the certificate (signature_verified
 * says it was already checked in user space, which then suffices).  On a mismatch returns
 * -EBADMSG with *ret_reason. */
int verity_setup(const VeritySource *v, int data_fd, VerityMode mode, const char *name_hint, VerityDevice *ret,
                 char **ret_reason);

/* Removes a dm device once its last user goes (requested right after it is opened). */
void verity_device_release(VerityDevice *d);

/* Removes dm devices named sysextd-* that nothing holds (left by a process killed before its
 * deferred removal was requested).  Returns how many went. */
int verity_remove_stale_devices(void);
