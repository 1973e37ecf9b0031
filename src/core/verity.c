/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Verity for extension images.
 *
 * Where the root hash comes from: NAME.roothash beside the image with the hash tree in
 * NAME.verity, or, for a disk image, the verity signature partition's JSON, a NAME.roothash
 * sidecar, or the two partition UUIDs (first and last 128 bits of a SHA-256 root hash, as the
 * Discoverable Partitions Specification lays down).  A signature (NAME.roothash.p7s, or the
 * signature partition) is a detached PKCS#7 over the hex root hash, checked with OpenSSL
 * against the certificates in the trusted directory; with dm-verity the kernel keyring is
 * tried first.  Discovery reads NAME.roothash alone (verity_peek_sidecars()), so that a
 * refresh tells a copy of a merged image from another image without opening either.
 *
 * Two modes: with device-mapper, a dm-verity device over our loop devices (data and hash
 * tree) is what gets mounted, so every read is checked for as long as it is mounted, and it
 * is read once in full before the merge so that a tampered image is refused up front;
 * without it, libcryptsetup checks the whole image against the root hash in user space
 * before it is mounted (CRYPT_VERITY_CHECK_HASH), and status says so ("verity=userspace").
 */
#include <ctype.h>
#include <limits.h>
#include <dirent.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "dlopen-crypto.h"
#include "fd-util.h"
#include "json-util.h"
#include "fileio.h"
#include "loopdev.h"
#include "util.h"
#include "verity.h"

/* The most a NAME.roothash sidecar may hold. */
#define ROOTHASH_FILE_MAX 4096

const char *verity_mode_to_string(VerityMode m) {
        return m == VERITY_DM ? "dm" : m == VERITY_USERSPACE ? "userspace" : "none";
}

int verity_mode_from_string(const char *s) {
        for (VerityMode m = VERITY_NONE; m <= VERITY_DM; m++)
                if (streq(s, verity_mode_to_string(m)))
                        return m;
        return -EINVAL;
}

void verity_source_done(VeritySource *v) {
        free(v->roothash);
        free(v->signature);
        free(v->hash_path);
        safe_close(v->hash_fd);
        *v = (VeritySource) { .hash_fd = -EBADF };
}

void verity_device_done(VerityDevice *d) {
        safe_close(d->fd);
        d->fd = -EBADF;
        if (d->name)
                verity_device_release(d);
        free(d->name);
        d->name = NULL;
}

int verity_normalize_roothash(const char *in, char **ret) {
        _cleanup_free_ char *s = strdup(in);
        char *t;
        size_t n;

        if (!s)
                return -ENOMEM;
        t = strstrip(s);
        n = strlen(t);
        if (n < 32 || n > 128 || n % 2 != 0)
                return -EINVAL;
        for (char *c = t; *c; c++) {
                if (!isxdigit((unsigned char) *c))
                        return -EINVAL;
                *c = tolower((unsigned char) *c);
        }
        *ret = strdup(t);
        return *ret ? 0 : -ENOMEM;
}

/* Whether NAME exists below root_fd (resolved inside the root), without opening it. */
static bool exists_in_root(int root_fd, const char *path) {
        _cleanup_close_ int fd = openat_resolve(root_fd, path, O_PATH, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
        return fd >= 0;
}

int verity_peek_sidecars(int root_fd, const char *dir, const char *name, char **ret_roothash,
                         bool *ret_signature_sidecar) {
        _cleanup_free_ char *p_hash = NULL, *p_tree = NULL, *p_sig = NULL, *text = NULL, *hash = NULL;
        int r;

        if (asprintf(&p_hash, "%s/%s.roothash", dir, name) < 0 || asprintf(&p_tree, "%s/%s.verity", dir, name) < 0 ||
            asprintf(&p_sig, "%s/%s.roothash.p7s", dir, name) < 0)
                return -ENOMEM;
        if (exists_in_root(root_fd, p_tree)) {
                r = read_file_at(root_fd, p_hash, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS, ROOTHASH_FILE_MAX, &text,
                                 NULL, NULL);
                if (r == -ENOMEM)
                        return r;
                if (r >= 0) {
                        r = verity_normalize_roothash(text, &hash);
                        if (r == -ENOMEM)
                                return r;
                }
        }
        *ret_signature_sidecar = exists_in_root(root_fd, p_sig);
        *ret_roothash = TAKE_PTR(hash);
        return 0;
}

int verity_find_sidecars(int root_fd, const char *dir, const char *dir_display, const char *name, VeritySource *ret,
                         char **ret_reason) {
        _cleanup_verity_source_ VeritySource v = { .origin = "sidecar files", .hash_fd = -EBADF };
        _cleanup_free_ char *p_hash = NULL, *p_tree = NULL, *p_sig = NULL, *text = NULL;
        bool have_hash, have_tree, have_sig;
        mode_t mode = 0;
        int r;

        if (asprintf(&p_hash, "%s/%s.roothash", dir, name) < 0 || asprintf(&p_tree, "%s/%s.verity", dir, name) < 0 ||
            asprintf(&p_sig, "%s/%s.roothash.p7s", dir, name) < 0)
                return -ENOMEM;
        have_hash = exists_in_root(root_fd, p_hash);
        have_tree = exists_in_root(root_fd, p_tree);
        have_sig = exists_in_root(root_fd, p_sig);

        if (!have_hash && !have_tree && !have_sig) {
                *ret = (VeritySource) { .hash_fd = -EBADF };
                return 0;
        }
        if (!have_tree)
                return set_message(ret_reason, EBADMSG, "%s.%s exists but the hash tree %s.verity is missing", name,
                                   have_hash ? "roothash" : "roothash.p7s", name);
        if (!have_hash)
                return set_message(ret_reason, EBADMSG, "%s.verity exists but the root hash %s.roothash is missing", name,
                                   name);

        r = read_file_at(root_fd, p_hash, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS, ROOTHASH_FILE_MAX, &text, NULL, &mode);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return set_message(ret_reason, EBADMSG, "%s.roothash %s", name,
                                   READ_ERROR_STRING(r, mode, ROOTHASH_FILE_MAX));
        r = verity_normalize_roothash(text, &v.roothash);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return set_message(ret_reason, EBADMSG, "%s.roothash does not hold a hex root hash", name);

        if (have_sig) {
                _cleanup_free_ char *sig = NULL;
                size_t size;

                r = read_file_at(root_fd, p_sig, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS, 1024 * 1024, &sig, &size, &mode);
                if (r == -ENOMEM)
                        return r;
                if (r < 0)
                        return set_message(ret_reason, EBADMSG, "%s.roothash.p7s %s", name,
                                           READ_ERROR_STRING(r, mode, 1024 * 1024));
                v.signature = (uint8_t *) TAKE_PTR(sig);
                v.signature_size = size;
        }

        r = open_regular_at(root_fd, p_tree, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS, &v.hash_fd, NULL);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return set_message(ret_reason, EBADMSG, "%s.verity %s", name, READ_ERROR_STRING(r, 0, 0));
        if (asprintf(&v.hash_path, "%s/%s.verity", dir_display, name) < 0)
                return -ENOMEM;
        *ret = v;
        v = (VeritySource) { .hash_fd = -EBADF };
        return 0;
}

int verity_parse_signature_json(const char *json, char **ret_roothash, uint8_t **ret_sig, size_t *ret_sig_size,
                                char **ret_reason) {
        _cleanup_json_ json_object *o = json_parse_object(json);
        json_object *h, *s;
        _cleanup_free_ uint8_t *sig = NULL;
        _cleanup_free_ char *hash = NULL;
        const char *b64;
        size_t len;
        int n, r;

        _cleanup_free_ char *why = NULL;

        if (dlopen_libcrypto(&why) < 0)
                return set_message(ret_reason, -EBADMSG, "cannot read the signature partition: %s", strna(why));
        if (!o || !json_object_object_get_ex(o, "rootHash", &h) || !json_object_object_get_ex(o, "signature", &s) ||
            !json_object_is_type(h, json_type_string) || !json_object_is_type(s, json_type_string))
                return set_message(ret_reason, -EBADMSG,
                                   "signature partition is not JSON with \"rootHash\" and \"signature\" strings");
        r = verity_normalize_roothash(json_object_get_string(h), &hash);
        b64 = json_object_get_string(s);
        len = strlen(b64);
        sig = malloc(len / 4 * 3 + 3);
        n = sig && len % 4 == 0 && len < INT_MAX ? sym_EVP_DecodeBlock(sig, (const unsigned char *) b64, (int) len) : -1;
        if (r == -ENOMEM || !sig)
                return -ENOMEM;
        if (r < 0)
                return set_message(ret_reason, -EBADMSG, "signature partition has an invalid rootHash");
        if (n <= 0)
                return set_message(ret_reason, -EBADMSG, "signature partition has an invalid base64 signature");
        /* EVP_DecodeBlock counts the padding as data. */
        if (len >= 1 && b64[len - 1] == '=')
                n--;
        if (len >= 2 && b64[len - 2] == '=')
                n--;
        *ret_roothash = TAKE_PTR(hash);
        *ret_sig = TAKE_PTR(sig);
        *ret_sig_size = n;
        return 0;
}

static void x509_stack_free(STACK_OF(X509) **s) {
        if (*s)
                sym_OPENSSL_sk_pop_free((OPENSSL_STACK *) *s, (OPENSSL_sk_freefunc) sym_X509_free);
}

static void bio_freep(BIO **b) {
        if (*b)
                sym_BIO_free(*b);
}

static void pkcs7_freep(PKCS7 **p) {
        if (*p)
                sym_PKCS7_free(*p);
}

static void x509_store_freep(X509_STORE **s) {
        if (*s)
                sym_X509_STORE_free(*s);
}

/* Reads every PEM certificate of the *.crt and *.pem files in dir (below root_fd). */
static int load_certificates(int root_fd, const char *dir, STACK_OF(X509) *certs) {
        _cleanup_closedir_ DIR *d = NULL;
        struct dirent *de;
        int fd;

        fd = open_directory_at(root_fd, dir, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
        if (fd < 0)
                return fd;
        d = fdopendir(fd);
        if (!d) {
                safe_close(fd);
                return negative_errno();
        }
        while ((de = readdir(d))) {
                _cleanup_free_ char *path = NULL, *pem = NULL;
                __attribute__((cleanup(bio_freep))) BIO *bio = NULL;
                size_t size;
                X509 *x;

                if (de->d_name[0] == '.' || (!endswith(de->d_name, ".crt") && !endswith(de->d_name, ".pem")))
                        continue;
                path = path_join(dir, de->d_name);
                if (!path)
                        return -ENOMEM;
                if (read_file_at(root_fd, path, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS, 1024 * 1024, &pem, &size, NULL) < 0)
                        continue; /* not a readable regular file: not a certificate */
                bio = sym_BIO_new_mem_buf(pem, (int) size);
                if (!bio)
                        return -ENOMEM;
                while ((x = sym_PEM_read_bio_X509(bio, NULL, NULL, NULL)))
                        if (sym_OPENSSL_sk_push((OPENSSL_STACK *) certs, x) <= 0)
                                sym_X509_free(x);
        }
        return 0;
}

int verity_check_signature(const VeritySource *v, int root_fd, const char *cert_dir, const char *cert_display,
                           char **ret_reason) {
        __attribute__((cleanup(x509_stack_free))) STACK_OF(X509) *certs = NULL;
        __attribute__((cleanup(x509_store_freep))) X509_STORE *store = NULL;
        __attribute__((cleanup(pkcs7_freep))) PKCS7 *p7 = NULL;
        __attribute__((cleanup(bio_freep))) BIO *data_bio = NULL;
        const unsigned char *p;
        int r;

        _cleanup_free_ char *why = NULL;

        if (dlopen_libcrypto(&why) < 0)
                return set_message(ret_reason, 0, "cannot check the root hash signature: %s", strna(why));
        certs = (STACK_OF(X509) *) sym_OPENSSL_sk_new_null();
        if (!certs)
                return -ENOMEM;
        r = load_certificates(root_fd, cert_dir, certs);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return set_message(ret_reason, 0, "no trusted certificates: cannot open %s: %s", cert_display,
                                   strerror(-r));
        if (sym_OPENSSL_sk_num((const OPENSSL_STACK *) certs) <= 0)
                return set_message(ret_reason, 0, "no trusted certificates (*.crt, *.pem) in %s", cert_display);

        p = v->signature;
        p7 = sym_d2i_PKCS7(NULL, &p, (long) v->signature_size);
        if (!p7)
                return set_message(ret_reason, 0, "the signature is not a DER PKCS#7 structure");

        store = sym_X509_STORE_new();
        data_bio = sym_BIO_new_mem_buf(v->roothash, (int) strlen(v->roothash));
        if (!store || !data_bio)
                return -ENOMEM;
        /* NOINTERN: the signer must be one of our certificates, not one the signature brings;
         * NOVERIFY: they are trusted as they are (no chain to a CA). */
        if (sym_PKCS7_verify(p7, certs, store, data_bio, NULL, PKCS7_NOINTERN | PKCS7_NOVERIFY | PKCS7_BINARY) == 1)
                return 1;

        /* Tell "signed by a stranger" from "signed by us, but not this root hash". */
        {
                STACK_OF(X509) *signers = sym_PKCS7_get0_signers(p7, certs, PKCS7_NOINTERN);
                if (signers && sym_OPENSSL_sk_num((const OPENSSL_STACK *) signers) > 0)
                        set_message(ret_reason, 0,
                                    "the signature is by a trusted certificate in %s but does not match the root hash %s",
                                    cert_display, v->roothash);
                else
                        set_message(ret_reason, 0, "the root hash signature was not made by a certificate in %s",
                                    cert_display);
                sym_OPENSSL_sk_free((OPENSSL_STACK *) signers);
        }
        sym_ERR_clear_error();
        return 0;
}

static int hex_to_bytes(const char *hex, char **ret, size_t *ret_size) {
        size_t n = strlen(hex) / 2;
        char *b = malloc(n);

        if (!b)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                unsigned v;
                if (sscanf(hex + 2 * i, "%2x", &v) != 1) {
                        free(b);
                        return -EINVAL;
                }
                b[i] = (char) v;
        }
        *ret = b;
        *ret_size = n;
        return 0;
}

/* libcryptsetup's own words about a failure ("Verification failed at position ...") go into
 * the reason instead of to stderr. */
static void collect_crypt_log(int level, const char *msg, void *userdata) {
        char **collected = userdata, *joined;
        size_t n;

        if (level != CRYPT_LOG_ERROR)
                return;
        joined = strjoin3(*collected ?: "", *collected ? "; " : "", msg);
        if (!joined)
                return;
        n = strlen(joined);
        while (n > 0 && (joined[n - 1] == '\n' || joined[n - 1] == '.'))
                joined[--n] = 0;
        free(*collected);
        *collected = joined;
}

static void crypt_freep(struct crypt_device **cd) {
        if (*cd)
                sym_crypt_free(*cd);
}

static int read_all(int fd) {
        const size_t chunk = 1024 * 1024;
        _cleanup_free_ char *buf = malloc(chunk);
        off_t offset = 0;

        if (!buf)
                return -ENOMEM;
        for (;;) {
                ssize_t k = pread(fd, buf, chunk, offset);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return negative_errno();
                }
                if (k == 0)
                        break;
                offset += k;
        }
        /* The pages were only read to be checked; the mount reads what it needs. */
        (void) posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        return 0;
}

void verity_device_release(VerityDevice *d) {
        /* Deferred: the device goes away when the last mount of it does. */
        if (d->name && dlopen_cryptsetup(NULL) >= 0)
                (void) sym_crypt_deactivate_by_name(NULL, d->name, CRYPT_DEACTIVATE_DEFERRED);
}

int verity_setup(const VeritySource *v, int data_fd, VerityMode mode, const char *name_hint, VerityDevice *ret,
                 char **ret_reason) {
        __attribute__((cleanup(crypt_freep))) struct crypt_device *cd = NULL;
        struct crypt_params_verity params = {
                .hash_area_offset = v->hash_offset,
                /* Asks for the user space check of every block at activation (name NULL). */
                .flags = mode == VERITY_USERSPACE ? CRYPT_VERITY_CHECK_HASH : 0,
        };
        _cleanup_free_ char *key = NULL, *name = NULL, *node = NULL, *said = NULL;
        __attribute__((cleanup(loopdev_freep))) LoopDevice *hash_loop = NULL;
        char data_path[PROC_FD_PATH_MAX], hash_path[PROC_FD_PATH_MAX + 32];
        const char *hash = format_proc_fd_path(hash_path, v->hash_fd);
        size_t key_size;
        int r;

        *ret = (VerityDevice) { .fd = -EBADF };
        if (dlopen_cryptsetup(&said) < 0)
                return set_message(ret_reason, -EBADMSG, "cannot check verity data: %s", strna(said));
        r = hex_to_bytes(v->roothash, &key, &key_size);
        if (r < 0)
                return r == -ENOMEM ? r : set_message(ret_reason, -EBADMSG, "invalid root hash");

        if (mode == VERITY_DM) {
                /* dm-verity needs the hash tree on a block device.  Attach it ourselves,
                 * read-only and autoclear like the data, rather than have libcryptsetup attach
                 * one read-write: the dm table holds it for as long as the device lives. */
                r = loopdev_attach(v->hash_fd, v->hash_offset, 0, &hash_loop);
                if (r < 0)
                        return set_message(ret_reason, -EBADMSG, "cannot attach the hash tree %s to a loop device: %s",
                                          v->hash_path, strerror(-r));
                /* libdevmapper resolves the hash device by name, not through /proc/self/fd:
                 * name the node of the device we hold open (it cannot change under us). */
                snprintf(hash_path, sizeof(hash_path), "/dev/loop%i", hash_loop->nr);
                hash = hash_path;
                params.hash_area_offset = 0;
        }

        r = sym_crypt_init_data_device(&cd, hash, format_proc_fd_path(data_path, data_fd));
        if (r < 0)
                return set_message(ret_reason, -EBADMSG, "cannot open the hash tree %s: %s", v->hash_path, strerror(-r));
        sym_crypt_set_log_callback(cd, collect_crypt_log, &said);
        r = sym_crypt_load(cd, CRYPT_VERITY, &params);
        if (r < 0)
                return set_message(ret_reason, -EBADMSG, "no valid verity superblock in %s (from %s): %s", v->hash_path,
                                  v->origin, said ?: strerror(-r));

        if (mode == VERITY_USERSPACE) {
                /* Reads every data block and every hash block and checks them up to the root. */
                r = sym_crypt_activate_by_volume_key(cd, NULL, key, key_size, 0);
                if (r < 0)
                        return set_message(ret_reason, -EBADMSG,
                                          "verity check failed: the data or the hash tree does not match the root hash (%s)",
                                          said ?: strerror(-r));
                return 0;
        }

        r = random_hex(4, &name);
        if (r < 0)
                return r;
        {
                char *full;
                if (asprintf(&full, "sysextd-%s-%s", name_hint, name) < 0)
                        return -ENOMEM;
                free(name);
                name = full;
        }
        /* The kernel keyring checks the signature where it has the certificate; the caller
         * has checked it in user space already, so a keyring without it is no failure. */
        r = -ENOKEY;
        if (v->signature)
                r = sym_crypt_activate_by_signed_key(cd, name, key, key_size, (const char *) v->signature,
                                                 v->signature_size, CRYPT_ACTIVATE_READONLY);
        if (r < 0)
                r = sym_crypt_activate_by_volume_key(cd, name, key, key_size, CRYPT_ACTIVATE_READONLY);
        if (r < 0)
                return set_message(ret_reason, -EBADMSG, "cannot open a dm-verity device: %s", said ?: strerror(-r));

        ret->name = TAKE_PTR(name);
        if (asprintf(&node, "/dev/mapper/%s", ret->name) < 0) {
                verity_device_done(ret);
                return -ENOMEM;
        }
        ret->fd = open(node, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        /* From here on the device goes away with its last user, whatever happens to this
         * process: our fd, and later the mount. */
        verity_device_release(ret);
        if (ret->fd < 0) {
                r = negative_errno();
                verity_device_done(ret);
                return set_message(ret_reason, -EBADMSG, "cannot open %s: %s", node, strerror(-r));
        }
        {
                struct stat st;
                if (fstat(ret->fd, &st) < 0 || loopdev_read_diskseq(ret->fd, &ret->diskseq) < 0) {
                        r = negative_errno();
                        verity_device_done(ret);
                        return r;
                }
                ret->devnum = st.st_rdev;
        }

        /* dm-verity checks each block when it is read, so a tampered block would only show
         * as an I/O error later, in some reader.  Read the whole device once now: the kernel
         * checks every block against the root hash, and a tampered image is refused here. */
        r = read_all(ret->fd);
        if (r < 0) {
                verity_device_done(ret);
                if (r == -EIO)
                        return set_message(ret_reason, -EBADMSG,
                                          "verity check failed: dm-verity found data that does not match the root hash");
                return set_message(ret_reason, -EBADMSG, "cannot read the dm-verity device: %s", strerror(-r));
        }
        return 0;
}

int verity_remove_stale_devices(void) {
        _cleanup_closedir_ DIR *d = opendir("/dev/mapper");
        struct dirent *de;
        int n = 0;

        if (!d)
                return errno == ENOENT ? 0 : negative_errno();
        while ((de = readdir(d))) {
                if (!startswith(de->d_name, "sysextd-"))
                        continue;
                if (dlopen_cryptsetup(NULL) < 0)
                        break;
                /* Deferred: a device in use (a merged image, or one a running transition is
                 * checking) only gets marked and goes with its last user; an unused one goes
                 * now. */
                if (sym_crypt_deactivate_by_name(NULL, de->d_name, CRYPT_DEACTIVATE_DEFERRED) >= 0)
                        n++;
        }
        return n;
}
