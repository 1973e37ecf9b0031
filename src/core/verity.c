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
 * tried first.
 *
 * Two modes: with device-mapper, a dm-verity device over our loop devices (data and hash
 * tree) is what gets mounted, so every read is checked for as long as it is mounted, and it
 * is read once in full before the merge so that a tampered image is refused up front;
 * without it, libcryptsetup checks the whole image against the root hash in user space
 * before it is mounted (CRYPT_VERITY_CHECK_HASH), and status says so ("verity=userspace").
 */
#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <libcryptsetup.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/pkcs7.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "fd-util.h"
#include "loopdev.h"
#include "util.h"
#include "verity.h"

const char *verity_mode_to_string(VerityMode m) {
        return m == VERITY_DM ? "dm" : m == VERITY_USERSPACE ? "userspace" : "none";
}

void verity_source_done(VeritySource *v) {
        free(v->roothash);
        free(v->signature);
        free(v->hash_path);
        *v = (VeritySource) {};
}

void verity_device_done(VerityDevice *d) {
        safe_close(d->fd);
        d->fd = -EBADF;
        if (d->name)
                verity_device_release(d);
        free(d->name);
        d->name = NULL;
}

static int set_reason(char **ret_reason, int error, const char *fmt, ...) _printf_(3, 4);
static int set_reason(char **ret_reason, int error, const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        if (vasprintf(ret_reason, fmt, ap) < 0)
                *ret_reason = NULL;
        va_end(ap);
        return error;
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

int verity_find_sidecars(int dir_fd, const char *dir_path, const char *name, VeritySource *ret, char **ret_reason) {
        _cleanup_verity_source_ VeritySource v = { .origin = "sidecar files" };
        _cleanup_free_ char *p_hash = NULL, *p_tree = NULL, *p_sig = NULL, *text = NULL;
        bool have_hash, have_tree, have_sig;
        struct stat st;
        int r;

        if (asprintf(&p_hash, "%s.roothash", name) < 0 || asprintf(&p_tree, "%s.verity", name) < 0 ||
            asprintf(&p_sig, "%s.roothash.p7s", name) < 0)
                return -ENOMEM;
        have_hash = fstatat(dir_fd, p_hash, &st, 0) == 0;
        have_tree = fstatat(dir_fd, p_tree, &st, 0) == 0;
        have_sig = fstatat(dir_fd, p_sig, &st, 0) == 0;

        if (!have_hash && !have_tree && !have_sig) {
                *ret = (VeritySource) {};
                return 0;
        }
        if (!have_tree)
                return set_reason(ret_reason, -EBADMSG, "%s exists but the hash tree %s is missing",
                                  have_hash ? p_hash : p_sig, p_tree);
        if (!have_hash)
                return set_reason(ret_reason, -EBADMSG, "%s exists but the root hash %s is missing", p_tree, p_hash);

        r = read_file_at(dir_fd, p_hash, 4096, &text, NULL);
        if (r < 0)
                return set_reason(ret_reason, -EBADMSG, "cannot read %s: %s", p_hash, strerror(-r));
        r = verity_normalize_roothash(text, &v.roothash);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return set_reason(ret_reason, -EBADMSG, "%s does not hold a hex root hash", p_hash);

        if (have_sig) {
                _cleanup_free_ char *sig = NULL;
                size_t size;

                r = read_file_at(dir_fd, p_sig, 1024 * 1024, &sig, &size);
                if (r < 0)
                        return set_reason(ret_reason, -EBADMSG, "cannot read %s: %s", p_sig, strerror(-r));
                v.signature = (uint8_t *) TAKE_PTR(sig);
                v.signature_size = size;
        }
        v.hash_path = path_join(dir_path, p_tree);
        if (!v.hash_path)
                return -ENOMEM;
        *ret = v;
        v = (VeritySource) {};
        return 0;
}

int verity_parse_signature_json(const char *json, char **ret_roothash, uint8_t **ret_sig, size_t *ret_sig_size,
                                char **ret_reason) {
        json_object *o = json_tokener_parse(json), *h, *s;
        _cleanup_free_ uint8_t *sig = NULL;
        _cleanup_free_ char *hash = NULL;
        const char *b64;
        size_t len;
        int n, r;

        if (!o || !json_object_object_get_ex(o, "rootHash", &h) || !json_object_object_get_ex(o, "signature", &s) ||
            !json_object_is_type(h, json_type_string) || !json_object_is_type(s, json_type_string)) {
                json_object_put(o);
                return set_reason(ret_reason, -EBADMSG,
                                  "signature partition is not JSON with \"rootHash\" and \"signature\" strings");
        }
        r = verity_normalize_roothash(json_object_get_string(h), &hash);
        b64 = json_object_get_string(s);
        len = strlen(b64);
        sig = malloc(len / 4 * 3 + 3);
        n = sig && len % 4 == 0 ? EVP_DecodeBlock(sig, (const unsigned char *) b64, (int) len) : -1;
        json_object_put(o);
        if (r == -ENOMEM || !sig)
                return -ENOMEM;
        if (r < 0)
                return set_reason(ret_reason, -EBADMSG, "signature partition has an invalid rootHash");
        if (n <= 0)
                return set_reason(ret_reason, -EBADMSG, "signature partition has an invalid base64 signature");
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
                sk_X509_pop_free(*s, X509_free);
}

int verity_check_signature(const VeritySource *v, const char *cert_dir, char **ret_reason) {
        __attribute__((cleanup(x509_stack_free))) STACK_OF(X509) *certs = sk_X509_new_null();
        X509_STORE *store = NULL;
        PKCS7 *p7 = NULL;
        BIO *sig_bio = NULL, *data_bio = NULL;
        const unsigned char *p;
        DIR *d;
        struct dirent *de;
        int r;

        if (!certs)
                return -ENOMEM;
        d = opendir(cert_dir);
        if (!d)
                return set_reason(ret_reason, 0, "no trusted certificates: cannot open %s: %s", cert_dir,
                                  strerror(errno));
        while ((de = readdir(d))) {
                _cleanup_free_ char *path = NULL;
                FILE *f;
                X509 *x;

                if (!endswith(de->d_name, ".crt") && !endswith(de->d_name, ".pem"))
                        continue;
                path = path_join(cert_dir, de->d_name);
                if (!path)
                        break;
                f = fopen(path, "re");
                if (!f)
                        continue;
                while ((x = PEM_read_X509(f, NULL, NULL, NULL)))
                        if (!sk_X509_push(certs, x))
                                X509_free(x);
                fclose(f);
        }
        closedir(d);
        if (sk_X509_num(certs) == 0)
                return set_reason(ret_reason, 0, "no trusted certificates (*.crt, *.pem) in %s", cert_dir);

        p = v->signature;
        p7 = d2i_PKCS7(NULL, &p, (long) v->signature_size);
        if (!p7)
                return set_reason(ret_reason, 0, "the signature is not a DER PKCS#7 structure");

        store = X509_STORE_new();
        data_bio = BIO_new_mem_buf(v->roothash, (int) strlen(v->roothash));
        if (!store || !data_bio) {
                r = -ENOMEM;
                goto finish;
        }
        /* NOINTERN: the signer must be one of our certificates, not one the signature brings;
         * NOVERIFY: they are trusted as they are (no chain to a CA). */
        if (PKCS7_verify(p7, certs, store, data_bio, NULL, PKCS7_NOINTERN | PKCS7_NOVERIFY | PKCS7_BINARY) == 1)
                r = 1;
        else {
                /* Tell "signed by a stranger" from "signed by us, but not this root hash". */
                STACK_OF(X509) *signers = PKCS7_get0_signers(p7, certs, PKCS7_NOINTERN);
                if (signers && sk_X509_num(signers) > 0)
                        r = set_reason(ret_reason, 0,
                                       "the signature is by a trusted certificate in %s but does not match the root hash %s",
                                       cert_dir, v->roothash);
                else
                        r = set_reason(ret_reason, 0, "the root hash signature was not made by a certificate in %s", cert_dir);
                sk_X509_free(signers);
        }
finish:
        BIO_free(sig_bio);
        BIO_free(data_bio);
        X509_STORE_free(store);
        PKCS7_free(p7);
        return r;
}

bool verity_dm_available(void) {
        static int cached = -1;

        if (cached < 0) {
                int fd = open("/dev/mapper/control", O_RDWR | O_CLOEXEC);
                cached = fd >= 0;
                safe_close(fd);
        }
        return cached;
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
        crypt_free(*cd);
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
        if (d->name)
                (void) crypt_deactivate_by_name(NULL, d->name, CRYPT_DEACTIVATE_DEFERRED);
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
        char data_path[PROC_FD_PATH_MAX], hash_path[32];
        const char *hash = v->hash_path;
        size_t key_size;
        int r;

        *ret = (VerityDevice) { .fd = -EBADF };
        r = hex_to_bytes(v->roothash, &key, &key_size);
        if (r < 0)
                return r == -ENOMEM ? r : set_reason(ret_reason, -EBADMSG, "invalid root hash");

        if (mode == VERITY_DM) {
                /* dm-verity needs the hash tree on a block device.  Attach it ourselves,
                 * read-only and autoclear like the data, rather than have libcryptsetup attach
                 * one read-write: the dm table holds it for as long as the device lives. */
                _cleanup_close_ int hash_fd = open(v->hash_path, O_RDONLY | O_CLOEXEC | O_NOCTTY);

                if (hash_fd < 0)
                        return set_reason(ret_reason, -EBADMSG, "cannot open the hash tree %s: %m", v->hash_path);
                r = loopdev_attach(hash_fd, v->hash_offset, 0, &hash_loop);
                if (r < 0)
                        return set_reason(ret_reason, -EBADMSG, "cannot attach the hash tree %s to a loop device: %s",
                                          v->hash_path, strerror(-r));
                /* libdevmapper resolves the hash device by name, not through /proc/self/fd:
                 * name the node of the device we hold open (it cannot change under us). */
                snprintf(hash_path, sizeof(hash_path), "/dev/loop%i", hash_loop->nr);
                hash = hash_path;
                params.hash_area_offset = 0;
        }

        r = crypt_init_data_device(&cd, hash, format_proc_fd_path(data_path, data_fd));
        if (r < 0)
                return set_reason(ret_reason, -EBADMSG, "cannot open the hash tree %s: %s", v->hash_path, strerror(-r));
        crypt_set_log_callback(cd, collect_crypt_log, &said);
        r = crypt_load(cd, CRYPT_VERITY, &params);
        if (r < 0)
                return set_reason(ret_reason, -EBADMSG, "no valid verity superblock in %s (from %s): %s", v->hash_path,
                                  v->origin, said ?: strerror(-r));

        if (mode == VERITY_USERSPACE) {
                /* Reads every data block and every hash block and checks them up to the root. */
                r = crypt_activate_by_volume_key(cd, NULL, key, key_size, 0);
                if (r < 0)
                        return set_reason(ret_reason, -EBADMSG,
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
                r = crypt_activate_by_signed_key(cd, name, key, key_size, (const char *) v->signature,
                                                 v->signature_size, CRYPT_ACTIVATE_READONLY);
        if (r < 0)
                r = crypt_activate_by_volume_key(cd, name, key, key_size, CRYPT_ACTIVATE_READONLY);
        if (r < 0)
                return set_reason(ret_reason, -EBADMSG, "cannot open a dm-verity device: %s", said ?: strerror(-r));

        ret->name = TAKE_PTR(name);
        if (asprintf(&node, "/dev/mapper/%s", ret->name) < 0) {
                verity_device_done(ret);
                return -ENOMEM;
        }
        ret->fd = open(node, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (ret->fd < 0) {
                r = negative_errno();
                verity_device_done(ret);
                return set_reason(ret_reason, -EBADMSG, "cannot open %s: %s", node, strerror(-r));
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
                        return set_reason(ret_reason, -EBADMSG,
                                          "verity check failed: dm-verity found data that does not match the root hash");
                return set_reason(ret_reason, -EBADMSG, "cannot read the dm-verity device: %s", strerror(-r));
        }
        return 0;
}
