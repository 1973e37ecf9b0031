/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Image discovery and probing.
 *
 * Discovery only reads directories and stat()s entries.  Probing then, per image:
 *   directory: open it (O_DIRECTORY) and read its extension-release;
 *   raw file:  recognise the file system with libblkid (by content, never by suffix),
 *              attach a loop device, mount it detached and verify it (loopdev.c), then read
 *              the release file through the mount fd.
 * A probed raw image holds a loop device and a detached mount; both go away when the image
 * is freed unless the mount was cloned into a tree first (then the tree keeps them).
 */
#include <blkid.h>
#include <ctype.h>
#include <dirent.h>
#include <ftw.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>

#include "fd-util.h"
#include "image.h"
#include "missing.h"
#include "util.h"

static const char *const kind_table[_IMAGE_KIND_MAX] = {
        [IMAGE_DIRECTORY] = "directory",
        [IMAGE_EROFS] = "erofs",
        [IMAGE_SQUASHFS] = "squashfs",
        [IMAGE_EXT4] = "ext4",
        [IMAGE_DDI] = "ddi",
        [IMAGE_UNKNOWN] = "unknown",
};

const char *image_kind_to_string(ImageKind k) {
        return k >= 0 && k < _IMAGE_KIND_MAX ? kind_table[k] : "unknown";
}

const char *image_verdict_to_string(ImageVerdict v) {
        switch (v) {
        case IMAGE_COMPATIBLE:
                return "compatible";
        case IMAGE_INCOMPATIBLE:
                return "incompatible";
        case IMAGE_REFUSED:
                return "refused";
        default:
                return "unprobed";
        }
}

static const char *const policy_table[_IMAGE_POLICY_MAX] = {
        [IMAGE_POLICY_OPEN] = "open",
        [IMAGE_POLICY_VERITY] = "verity",
        [IMAGE_POLICY_SIGNED] = "signed",
};

const char *image_policy_to_string(ImagePolicy p) {
        return p >= 0 && p < _IMAGE_POLICY_MAX ? policy_table[p] : NULL;
}

int image_policy_from_string(const char *s) {
        for (int i = 0; i < _IMAGE_POLICY_MAX; i++)
                if (streq(s, policy_table[i]))
                        return i;
        return -EINVAL;
}

static void image_done(Image *i) {
        free(i->name);
        free(i->fstype);
        free(i->path);
        free(i->reason);
        safe_close(i->root_fd);
        loopdev_free(i->loop);
}

void image_list_free(ImageList *l) {
        for (size_t i = 0; i < l->n; i++)
                image_done(&l->images[i]);
        free(l->images);
        *l = (ImageList) {};
}

static uint64_t *stamp_target;

static int stamp_entry(const char *fpath, const struct stat *st, int typeflag, struct FTW *ftw) {
        stamp_add_stat(stamp_target, st);
        stamp_add_string(stamp_target, fpath);
        return 0;
}

int image_directory_stamp(const char *path, uint64_t *ret) {
        uint64_t stamp = STAMP_INIT;
        int r;

        /* nftw() has no user data pointer; the engine runs one transition at a time. */
        stamp_target = &stamp;
        r = nftw(path, stamp_entry, 16, FTW_PHYS | FTW_MOUNT);
        stamp_target = NULL;
        if (r < 0)
                return negative_errno();
        *ret = stamp;
        return 0;
}

/* The verity sidecars of a raw image are part of its identity: a new signature, a removed
 * hash tree or a replaced root hash change the verdict. */
static uint64_t sidecar_stamp(int dir_fd, const char *name) {
        static const char *const suffixes[] = { ".roothash", ".verity", ".roothash.p7s" };
        uint64_t stamp = STAMP_INIT;

        for (size_t i = 0; i < ELEMENTSOF(suffixes); i++) {
                _cleanup_free_ char *p = strjoin3(name, suffixes[i], "");
                struct stat st;

                if (p && fstatat(dir_fd, p, &st, 0) == 0)
                        stamp_add_stat(&stamp, &st);
                else
                        stamp_add_u64(&stamp, 0);
        }
        return stamp;
}

static bool is_sidecar(const char *name) {
        static const char *const suffixes[] = { ".verity", ".roothash", ".roothash.p7s", ".usrhash",
                                                ".usrhash.p7s", ".sig", ".tmp" };
        for (size_t i = 0; i < ELEMENTSOF(suffixes); i++)
                if (endswith(name, suffixes[i]))
                        return true;
        return false;
}

static int compare_images(const void *a, const void *b) {
        const Image *x = a, *y = b;
        int c = version_compare(x->name, y->name);
        return c != 0 ? c : strcmp(x->name, y->name);
}

int image_discover(int root_fd, const char *root_prefix, char *const *search_dirs, ImageList *ret) {
        _cleanup_image_list_ ImageList l = {};

        STRV_FOREACH(sd, search_dirs) {
                _cleanup_close_ int dfd = -EBADF;
                DIR *d;
                struct dirent *de;

                dfd = openat(root_fd, *sd, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (dfd < 0) {
                        if (errno == ENOENT || errno == ENOTDIR)
                                continue;
                        return negative_errno();
                }
                d = fdopendir(dfd);
                if (!d)
                        return negative_errno();
                dfd = -EBADF; /* owned by d now */

                while ((de = readdir(d))) {
                        _cleanup_free_ char *name = NULL;
                        struct stat st;
                        bool seen = false;
                        Image *n;

                        if (de->d_name[0] == '.' || is_sidecar(de->d_name))
                                continue;
                        if (fstatat(dirfd(d), de->d_name, &st, 0) < 0)
                                continue; /* dangling symlink or raced removal */
                        if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
                                continue;

                        name = S_ISREG(st.st_mode) && endswith(de->d_name, ".raw")
                                       ? strndup(de->d_name, strlen(de->d_name) - 4)
                                       : strdup(de->d_name);
                        if (!name) {
                                closedir(d);
                                return -ENOMEM;
                        }
                        for (size_t i = 0; i < l.n; i++)
                                if (streq(l.images[i].name, name))
                                        seen = true;
                        if (seen)
                                continue; /* an earlier search directory has it */

                        n = realloc(l.images, sizeof(Image) * (l.n + 1));
                        if (!n) {
                                closedir(d);
                                return -ENOMEM;
                        }
                        l.images = n;
                        n = &l.images[l.n];
                        *n = (Image) { .root_fd = -EBADF, .st = st,
                                       .kind = S_ISDIR(st.st_mode) ? IMAGE_DIRECTORY : IMAGE_UNKNOWN };
                        n->name = TAKE_PTR(name);
                        if (asprintf(&n->path, "%s%s%s/%s", root_prefix, streq(root_prefix, "/") ? "" : "/",
                                     *sd, de->d_name) < 0) {
                                n->path = NULL;
                                l.n++;
                                closedir(d);
                                return -ENOMEM;
                        }
                        l.n++;
                        if (n->kind == IMAGE_DIRECTORY) {
                                if (image_directory_stamp(n->path, &n->stamp) < 0)
                                        n->stamp = 0; /* unreadable: the probe says why */
                        } else
                                n->stamp = sidecar_stamp(dirfd(d), n->name);
                }
                closedir(d);
        }

        if (l.n > 0)
                qsort(l.images, l.n, sizeof(Image), compare_images);
        *ret = l;
        l = (ImageList) {};
        return 0;
}

static int refuse(Image *img, ImageVerdict v, const char *fmt, ...) _printf_(3, 4);
static int refuse(Image *img, ImageVerdict v, const char *fmt, ...) {
        va_list ap;

        free(img->reason);
        va_start(ap, fmt);
        if (vasprintf(&img->reason, fmt, ap) < 0)
                img->reason = NULL;
        va_end(ap);
        img->verdict = v;
        img->root_fd = safe_close(img->root_fd);
        img->loop = loopdev_free(img->loop);
        return 0;
}

static ImageKind kind_from_type(const char *type) {
        if (!type)
                return IMAGE_UNKNOWN;
        if (streq(type, "erofs"))
                return IMAGE_EROFS;
        if (streq(type, "squashfs"))
                return IMAGE_SQUASHFS;
        if (STR_IN_SET(type, "ext4", "ext3", "ext2"))
                return IMAGE_EXT4;
        return IMAGE_UNKNOWN;
}

/* The file system type of fd (from offset, size bytes; 0: all), or of its partition table. */
static int probe_type(int fd, uint64_t offset, uint64_t size, bool partitions, char **ret_type) {
        blkid_probe pr;
        const char *type = NULL;
        int r;

        *ret_type = NULL;
        pr = blkid_new_probe();
        if (!pr)
                return -ENOMEM;
        if (blkid_probe_set_device(pr, fd, offset, size) < 0) {
                blkid_free_probe(pr);
                return -EIO;
        }
        blkid_probe_enable_superblocks(pr, 1);
        blkid_probe_set_superblocks_flags(pr, BLKID_SUBLKS_TYPE);
        blkid_probe_enable_partitions(pr, partitions);
        r = blkid_do_safeprobe(pr);
        if (r == 0 && blkid_probe_lookup_value(pr, "TYPE", &type, NULL) < 0)
                /* A partition table (a disk image) is reported by its type. */
                (void) blkid_probe_lookup_value(pr, "PTTYPE", &type, NULL);
        if (type) {
                *ret_type = strdup(type);
                if (!*ret_type) {
                        blkid_free_probe(pr);
                        return -ENOMEM;
                }
        }
        blkid_free_probe(pr);
        return 0;
}

/* Partition type UUIDs of the Discoverable Partitions Specification for this architecture. */
typedef struct DpsTypes {
        const char *arch;
        const char *root, *root_verity, *root_sig, *usr, *usr_verity, *usr_sig;
} DpsTypes;

static const DpsTypes dps_table[] = {
        { "x86-64", "4f68bce3-e8cd-4db1-96e7-fbcaf984b709", "2c7357ed-ebd2-46d9-aec1-23d437ec2bf5",
          "41092b05-9fc8-4523-994f-2def0408b176", "8484680c-9521-48c6-9c11-b0720656f69e",
          "77ff5f63-e7b6-4633-acf4-1565b864c0e6", "e7bb33fb-06cf-4e81-8273-e543b413e2e2" },
        { "arm64", "b921b045-1df0-41c3-af44-4c6f280d3fae", "df3300ce-d69f-4c92-978c-9bfb0f38d820",
          "6db69de6-29f4-4758-a7a5-962190f00ce3", "b0e01050-ee5f-4390-949a-9101b17104e9",
          "6e11a4e7-fbca-4ded-b9e9-e1a512bb664e", "c23ce4ff-44bd-4b00-b2d4-b41b3419e02a" },
};

typedef struct Partition {
        bool found;
        uint64_t offset, size; /* bytes */
        char uuid[37];
} Partition;

typedef struct DiskLayout {
        Partition data, verity, sig;
        bool usr; /* data is a usr partition (else root) */
} DiskLayout;

static void partition_set(Partition *p, blkid_partition part) {
        const char *uuid = blkid_partition_get_uuid(part);

        p->found = true;
        p->offset = (uint64_t) blkid_partition_get_start(part) * 512;
        p->size = (uint64_t) blkid_partition_get_size(part) * 512;
        snprintf(p->uuid, sizeof(p->uuid), "%s", uuid ?: "");
}

/* Finds the usr (preferred) or root partition of this architecture, with its verity and
 * verity signature partitions. */
static int disk_layout(int fd, DiskLayout *ret, char **ret_reason) {
        const DpsTypes *t = NULL;
        DiskLayout usr = { .usr = true }, root = {};
        blkid_partlist pl;
        blkid_probe pr;
        int n;

        for (size_t i = 0; i < ELEMENTSOF(dps_table); i++)
                if (streq(dps_table[i].arch, release_native_architecture()))
                        t = &dps_table[i];
        if (!t)
                return asprintf(ret_reason, "disk images are not supported on %s", release_native_architecture()) < 0
                               ? -ENOMEM
                               : -EOPNOTSUPP;

        pr = blkid_new_probe();
        if (!pr)
                return -ENOMEM;
        if (blkid_probe_set_device(pr, fd, 0, 0) < 0 || blkid_probe_enable_partitions(pr, 1) < 0 ||
            blkid_probe_set_partitions_flags(pr, BLKID_PARTS_ENTRY_DETAILS) < 0 || blkid_do_fullprobe(pr) < 0 ||
            !(pl = blkid_probe_get_partitions(pr))) {
                blkid_free_probe(pr);
                return asprintf(ret_reason, "cannot read the partition table") < 0 ? -ENOMEM : -EBADMSG;
        }
        n = blkid_partlist_numof_partitions(pl);
        for (int i = 0; i < n; i++) {
                blkid_partition part = blkid_partlist_get_partition(pl, i);
                const char *type = blkid_partition_get_type_string(part);

                if (!type)
                        continue;
                if (strcasecmp(type, t->usr) == 0 && !usr.data.found)
                        partition_set(&usr.data, part);
                else if (strcasecmp(type, t->usr_verity) == 0 && !usr.verity.found)
                        partition_set(&usr.verity, part);
                else if (strcasecmp(type, t->usr_sig) == 0 && !usr.sig.found)
                        partition_set(&usr.sig, part);
                else if (strcasecmp(type, t->root) == 0 && !root.data.found)
                        partition_set(&root.data, part);
                else if (strcasecmp(type, t->root_verity) == 0 && !root.verity.found)
                        partition_set(&root.verity, part);
                else if (strcasecmp(type, t->root_sig) == 0 && !root.sig.found)
                        partition_set(&root.sig, part);
        }
        blkid_free_probe(pr);

        if (usr.data.found)
                *ret = usr;
        else if (root.data.found)
                *ret = root;
        else
                return asprintf(ret_reason, "disk image has no usr or root partition for %s",
                                release_native_architecture()) < 0
                               ? -ENOMEM
                               : -EBADMSG;
        return 0;
}

/* Root hash, hash tree and signature of a disk image: signature partition first, then a
 * NAME.roothash sidecar, then the partition UUIDs. */
static int disk_verity(int fd, const char *image_path, int dir_fd, const char *name, const DiskLayout *l,
                       VeritySource *ret, char **ret_reason) {
        _cleanup_verity_source_ VeritySource v = { .origin = "partitions" };
        int r;

        if (!l->verity.found) {
                if (l->sig.found)
                        return asprintf(ret_reason, "disk image has a verity signature partition but no verity partition") < 0
                                       ? -ENOMEM
                                       : -EBADMSG;
                *ret = (VeritySource) {};
                return 0;
        }

        if (l->sig.found) {
                _cleanup_free_ char *json = NULL;
                ssize_t k;

                if (l->sig.size > 1024 * 1024)
                        return asprintf(ret_reason, "verity signature partition is too large") < 0 ? -ENOMEM : -EBADMSG;
                json = calloc(1, l->sig.size + 1);
                if (!json)
                        return -ENOMEM;
                k = pread(fd, json, l->sig.size, (off_t) l->sig.offset);
                if (k < 0)
                        return asprintf(ret_reason, "cannot read the verity signature partition: %m") < 0 ? -ENOMEM : -EBADMSG;
                r = verity_parse_signature_json(json, &v.roothash, &v.signature, &v.signature_size, ret_reason);
                if (r < 0)
                        return r;
        } else {
                _cleanup_free_ char *p = NULL, *text = NULL;

                if (asprintf(&p, "%s.roothash", name) < 0)
                        return -ENOMEM;
                r = read_file_at(dir_fd, p, 4096, &text, NULL);
                if (r >= 0) {
                        r = verity_normalize_roothash(text, &v.roothash);
                        if (r == -ENOMEM)
                                return r;
                        if (r < 0)
                                return asprintf(ret_reason, "%s does not hold a hex root hash", p) < 0 ? -ENOMEM : -EBADMSG;
                } else if (strlen(l->data.uuid) == 36 && strlen(l->verity.uuid) == 36) {
                        /* The data partition's UUID is the first half of the root hash, the
                         * verity partition's the second. */
                        char hex[65], *o = hex;
                        for (const char *c = l->data.uuid; *c; c++)
                                if (*c != '-')
                                        *o++ = tolower((unsigned char) *c);
                        for (const char *c = l->verity.uuid; *c; c++)
                                if (*c != '-')
                                        *o++ = tolower((unsigned char) *c);
                        *o = 0;
                        v.roothash = strdup(hex);
                        if (!v.roothash)
                                return -ENOMEM;
                } else
                        return asprintf(ret_reason, "disk image has a verity partition but no root hash") < 0 ? -ENOMEM : -EBADMSG;
        }
        v.hash_path = strdup(image_path);
        if (!v.hash_path)
                return -ENOMEM;
        v.hash_offset = l->verity.offset;
        *ret = v;
        v = (VeritySource) {};
        return 0;
}

static uint32_t le32(const uint8_t *p) {
        return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t) p[3] << 24;
}

static uint64_t le64(const uint8_t *p) {
        return le32(p) | (uint64_t) le32(p + 4) << 32;
}

/* A truncated image may still mount (its superblock is intact) and fail only later, when a
 * reader hits the missing blocks.  Compare the size the file system says it has with the
 * size of the file, before anything is mounted. */
static int check_size(int fd, uint64_t offset, ImageKind kind, uint64_t file_size, char **ret_message) {
        uint8_t sb[2048];
        uint64_t need = 0;
        ssize_t n;

        n = pread(fd, sb, sizeof(sb), (off_t) offset);
        if (n < 0)
                return negative_errno();
        if (n < (ssize_t) sizeof(sb)) {
                if (asprintf(ret_message, "image is truncated: only %zd bytes", n) < 0)
                        return -ENOMEM;
                return -EBADMSG;
        }

        switch (kind) {
        case IMAGE_EROFS: /* superblock at 1024: blkszbits u8 @12, blocks le32 @36 */
                if (sb[1024 + 12] < 9 || sb[1024 + 12] > 16)
                        break;
                need = (uint64_t) le32(sb + 1024 + 36) << sb[1024 + 12];
                break;
        case IMAGE_SQUASHFS: /* bytes_used le64 @40 */
                need = le64(sb + 40);
                break;
        case IMAGE_EXT4: { /* superblock at 1024: blocks_count_lo @4, log_block_size @24,
                            * feature_incompat @96 (0x80: 64bit), blocks_count_hi @0x150 */
                uint32_t log = le32(sb + 1024 + 24);
                uint64_t blocks = le32(sb + 1024 + 4);
                if (log > 6)
                        break;
                if (le32(sb + 1024 + 96) & 0x80)
                        blocks |= (uint64_t) le32(sb + 1024 + 0x150) << 32;
                need = blocks << (10 + log);
                break;
        }
        default:
                break;
        }

        if (need > file_size) {
                if (asprintf(ret_message, "image is truncated: its %s file system needs %" PRIu64 " bytes, the file has %" PRIu64,
                             image_kind_to_string(kind), need, file_size) < 0)
                        return -ENOMEM;
                return -EBADMSG;
        }
        return 0;
}

static int open_beneath(int dir_fd, const char *path, int flags) {
        return openat_resolve(dir_fd, path, flags, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
}

/* Opens a raw image: recognises it, finds its verity data, applies the policy, attaches it,
 * verifies it and mounts it (detached) into img->root_fd. */
static int probe_raw(Image *img, const ProbeContext *ctx) {
        _cleanup_close_ int fd = -EBADF, dir_fd = -EBADF;
        _cleanup_free_ char *type = NULL, *msg = NULL, *dir = NULL, *why = NULL;
        _cleanup_verity_source_ VeritySource v = {};
        __attribute__((cleanup(verity_device_done))) VerityDevice vd = { .fd = -EBADF };
        uint64_t offset = 0, size = 0;
        DiskLayout layout = {};
        const char *slash;
        int r;

        fd = open(img->path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return refuse(img, IMAGE_REFUSED, "cannot open image: %m");
        if (fstat(fd, &img->st) < 0)
                return refuse(img, IMAGE_REFUSED, "cannot stat image: %m");
        slash = strrchr(img->path, '/');
        dir = strndup(img->path, slash ? (size_t) (slash - img->path) : 0);
        if (!dir)
                return -ENOMEM;
        dir_fd = open(isempty(dir) ? "/" : dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dir_fd < 0)
                return refuse(img, IMAGE_REFUSED, "cannot open %s: %m", dir);

        r = probe_type(fd, 0, 0, true, &type);
        if (r == -ENOMEM)
                return r;
        if (streq_ptr(type, "gpt")) {
                img->kind = IMAGE_DDI;
                r = disk_layout(fd, &layout, &why);
                if (r == -ENOMEM)
                        return r;
                if (r < 0)
                        return refuse(img, IMAGE_REFUSED, "%s", why);
                img->usr_partition = layout.usr;
                offset = layout.data.offset;
                size = layout.data.size;
                free(type);
                r = probe_type(fd, offset, size, false, &type);
                if (r == -ENOMEM)
                        return r;
                if (kind_from_type(type) == IMAGE_UNKNOWN)
                        return refuse(img, IMAGE_REFUSED, "the %s partition holds %s%s%s, not erofs, squashfs or ext4",
                                      layout.usr ? "usr" : "root", type ? "'" : "no file system", strempty(type),
                                      type ? "'" : "");
                r = disk_verity(fd, img->path, dir_fd, img->name, &layout, &v, &why);
        } else {
                img->kind = kind_from_type(type);
                if (img->kind == IMAGE_UNKNOWN) {
                        if (type)
                                return refuse(img, IMAGE_REFUSED,
                                              "unsupported content '%s' (expected an erofs, squashfs or ext4 file system or a GPT disk image)",
                                              type);
                        return refuse(img, IMAGE_REFUSED,
                                      "no file system recognised (expected erofs, squashfs or ext4; the image may be truncated or corrupt)");
                }
                r = verity_find_sidecars(dir_fd, dir, img->name, &v, &why);
        }
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return refuse(img, IMAGE_REFUSED, "%s", strna(why));
        img->fstype = strdup(kind_from_type(type) == IMAGE_EXT4 ? "ext4" : type);
        if (!img->fstype)
                return -ENOMEM;

        /* The policy, before anything is attached. */
        if (ctx->policy >= IMAGE_POLICY_VERITY && !v.roothash)
                return refuse(img, IMAGE_REFUSED, "ImagePolicy=%s requires verity data, the image has none",
                              image_policy_to_string(ctx->policy));
        if (v.signature) {
                r = verity_check_signature(&v, ctx->cert_dir, &why);
                if (r < 0)
                        return r;
                if (r == 0)
                        return refuse(img, IMAGE_REFUSED, "signature check failed: %s", strna(why));
                img->signed_valid = true;
        } else if (ctx->policy == IMAGE_POLICY_SIGNED)
                return refuse(img, IMAGE_REFUSED, "ImagePolicy=signed requires a root hash signature, the image has none (%s)",
                              v.roothash ? "verity without signature" : "no verity data");

        r = check_size(fd, offset, kind_from_type(type), size ?: (uint64_t) img->st.st_size, &msg);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return refuse(img, IMAGE_REFUSED, "%s", msg);

        r = loopdev_attach(fd, offset, size, &img->loop);
        if (r < 0) {
                errno = -r;
                return refuse(img, IMAGE_REFUSED, "cannot attach a loop device: %m");
        }

        if (v.roothash) {
                img->verity = ctx->use_dm ? VERITY_DM : VERITY_USERSPACE;
                r = verity_setup(&v, img->loop->fd, img->verity, img->name, &vd, &why);
                if (r == -ENOMEM)
                        return r;
                if (r < 0)
                        return refuse(img, IMAGE_REFUSED, "%s", strna(why));
        }

        if (vd.fd >= 0)
                r = device_mount(vd.fd, vd.devnum, vd.diskseq, img->loop->nr, img->fstype, ctx->mount_attrs,
                                 &img->root_fd, &msg);
        else
                r = loopdev_mount(img->loop, img->fstype, ctx->mount_attrs, &img->root_fd, &msg);
        if (r < 0) {
                errno = -r;
                if (r == -ESTALE || r == -EXDEV)
                        return refuse(img, IMAGE_REFUSED, "wrong media on /dev/loop%i: %s", img->loop->nr, strna(msg));
                return refuse(img, IMAGE_REFUSED, "cannot mount %s file system: %m%s%s", img->fstype, msg ? ": " : "",
                              msg ?: "");
        }

        /* A user-space check reads the image once; the mount reads the file again later.  A
         * write in between would go unchecked: the file must be untouched since it was
         * opened.  (Writes after this point are what dm-verity exists for; see sysextd(8).) */
        if (img->verity == VERITY_USERSPACE) {
                struct stat now;

                if (fstat(fd, &now) < 0)
                        return refuse(img, IMAGE_REFUSED, "cannot stat image: %m");
                if (now.st_size != img->st.st_size || now.st_mtim.tv_sec != img->st.st_mtim.tv_sec ||
                    now.st_mtim.tv_nsec != img->st.st_mtim.tv_nsec || now.st_ctim.tv_sec != img->st.st_ctim.tv_sec ||
                    now.st_ctim.tv_nsec != img->st.st_ctim.tv_nsec)
                        return refuse(img, IMAGE_REFUSED,
                                      "the image file was modified while it was being verified; its content is not trusted");
        }
        return 0;
}

int image_probe(Image *img, const ProbeContext *ctx) {
        _cleanup_free_ char *release_path = NULL, *text = NULL, *mismatch = NULL;
        _cleanup_release_ Release rel = {};
        _cleanup_close_ int release_fd = -EBADF;
        const char *usr_prefix;
        struct stat st;
        int r;

        img->verdict = IMAGE_UNPROBED;

        if (img->kind == IMAGE_DIRECTORY) {
                if (ctx->policy != IMAGE_POLICY_OPEN)
                        return refuse(img, IMAGE_REFUSED, "directories are only allowed with ImagePolicy=open (policy is %s)",
                                      image_policy_to_string(ctx->policy));
                /* A detached bind of the directory, made here in the caller's namespace: the
                 * staging worker attaches it like an image mount (a mount of another namespace
                 * cannot be cloned from inside the worker's). */
                img->root_fd = open_tree(AT_FDCWD, img->path, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
                if (img->root_fd < 0)
                        return refuse(img, IMAGE_REFUSED, "cannot open directory: %m");
        } else {
                r = probe_raw(img, ctx);
                if (r < 0 || img->verdict == IMAGE_REFUSED)
                        return r;
        }

        /* A usr partition is mounted as the image's usr/. */
        usr_prefix = img->usr_partition ? "" : "usr/";

        /* The release file must carry this image's own name (as systemd-sysext requires). */
        if (asprintf(&release_path, "%slib/extension-release.d/extension-release.%s", usr_prefix, img->name) < 0)
                return -ENOMEM;
        release_fd = open_beneath(img->root_fd, release_path, O_RDONLY);
        if (release_fd == -ENOENT)
                return refuse(img, IMAGE_REFUSED, "no extension-release file: %s is missing", release_path);
        if (release_fd < 0) {
                errno = -release_fd;
                return refuse(img, IMAGE_REFUSED, "cannot open %s: %m", release_path);
        }
        r = read_fd_full(release_fd, 64 * 1024, &text, NULL);
        if (r < 0) {
                errno = -r;
                return refuse(img, IMAGE_REFUSED, "cannot read %s: %m", release_path);
        }
        r = release_parse(text, &rel);
        if (r < 0) {
                errno = -r;
                return refuse(img, IMAGE_REFUSED, "cannot parse %s: %m", release_path);
        }

        if (fstatat(img->root_fd, img->usr_partition ? "lib/os-release" : "usr/lib/os-release", &st, AT_SYMLINK_NOFOLLOW) == 0)
                return refuse(img, IMAGE_REFUSED, "ships usr/lib/os-release, which an extension must not replace");

        r = release_match(ctx->host, &rel, &mismatch);
        if (r < 0)
                return r;
        if (r == 0)
                return refuse(img, IMAGE_INCOMPATIBLE, "%s", mismatch);

        img->hierarchies = 0;
        for (size_t i = 0; ctx->hierarchies && ctx->hierarchies[i] && i < HIERARCHIES_MAX; i++) {
                if (img->usr_partition) {
                        if (streq(ctx->hierarchies[i], "usr"))
                                img->hierarchies |= 1u << i;
                        continue;
                }
                if (fstatat(img->root_fd, ctx->hierarchies[i], &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode))
                        img->hierarchies |= 1u << i;
        }

        img->verdict = IMAGE_COMPATIBLE;
        return 0;
}
