/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <ctype.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "disk.h"
#include "dlopen-crypto.h"
#include "fd-util.h"
#include "fileio.h"
#include "log.h"
#include "release.h"
#include "util.h"

static void blkid_probe_freep(blkid_probe *p) {
        if (*p)
                sym_blkid_free_probe(*p);
}
#define _cleanup_blkid_probe_ _cleanup_(blkid_probe_freep)

/* libblkid, loaded the first time an image needs it (dlopen-crypto.h); -ELIBACC, said once,
 * when it cannot be. */
static int blkid_loaded(void) {
        static bool warned = false;
        _cleanup_free_ char *msg = NULL;

        if (dlopen_blkid(&msg) >= 0)
                return 0;
        if (!warned)
                log_warning("%s; only erofs images can be recognised.", msg ?: "libblkid.so.1 cannot be loaded");
        warned = true;
        return -ELIBACC;
}

static uint16_t le16(const uint8_t *p) {
        return (uint16_t) (p[0] | p[1] << 8);
}

static uint32_t le32(const uint8_t *p) {
        return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t) p[3] << 24;
}

static uint64_t le64(const uint8_t *p) {
        return le32(p) | (uint64_t) le32(p + 4) << 32;
}

static bool has_bytes(const uint8_t *buf, size_t len, size_t at, const char *magic, size_t n) {
        return len >= at + n && memcmp(buf + at, magic, n) == 0;
}

/* An erofs superblock at 1 KiB of buf (at least 1024 + 13 bytes): its magic, and a block size
 * erofs has (blkszbits 9-16). */
static bool erofs_super(const uint8_t *buf) {
        return le32(buf + 1024) == EROFS_SUPER_MAGIC_V1 && buf[1024 + 12] >= 9 && buf[1024 + 12] <= 16;
}

const char *disk_fast_type_parts(const uint8_t *head, size_t head_len, const uint8_t iso[static 5], const uint8_t btrfs[static 8]) {
        /* Every place a signature could make the content mean something else: a partition
         * table (MBR boot signature at 510, GPT header at 512), squashfs and xfs at 0, ext2/3/4
         * at 1080, ISO 9660 at 32769, btrfs at 65600.  With any of them, libblkid decides. */
        if (head_len < DISK_FAST_HEAD_SIZE)
                return NULL;
        if (!erofs_super(head))
                return NULL;
        if (has_bytes(head, head_len, 510, "\x55\xaa", 2) || has_bytes(head, head_len, 512, "EFI PART", 8) ||
            has_bytes(head, head_len, 0, "hsqs", 4) || has_bytes(head, head_len, 0, "XFSB", 4) ||
            has_bytes(head, head_len, 1080, "\x53\xef", 2) || memcmp(iso, "CD001", 5) == 0 || memcmp(btrfs, "_BHRfS_M", 8) == 0)
                return NULL;
        return "erofs";
}

const char *disk_fast_type(const uint8_t *buf, size_t len) {
        if (len < DISK_FAST_PROBE_SIZE)
                return NULL;
        return disk_fast_type_parts(buf, DISK_FAST_HEAD_SIZE, buf + 32769, buf + 65600);
}

int disk_probe_type(int fd, uint64_t offset, uint64_t size, bool partitions, char **ret_type) {
        _cleanup_blkid_probe_ blkid_probe pr = NULL;
        const char *type = NULL;
        int r;

        *ret_type = NULL;

        /* The common case, an erofs image, from three small reads (its first page, and the
         * two places past it where another signature could be) instead of libblkid's few
         * dozen. */
        if (size == 0 || size >= DISK_FAST_PROBE_SIZE) {
                uint8_t head[DISK_FAST_HEAD_SIZE], iso[5], btrfs[8];

                if (pread(fd, head, sizeof(head), (off_t) offset) == (ssize_t) sizeof(head) && erofs_super(head) &&
                    pread(fd, iso, sizeof(iso), (off_t) (offset + 32769)) == (ssize_t) sizeof(iso) &&
                    pread(fd, btrfs, sizeof(btrfs), (off_t) (offset + 65600)) == (ssize_t) sizeof(btrfs))
                        type = disk_fast_type_parts(head, sizeof(head), iso, btrfs);
                if (type) {
                        *ret_type = strdup(type);
                        return *ret_type ? 0 : -ENOMEM;
                }
        }

        r = blkid_loaded();
        if (r < 0)
                return r;
        pr = sym_blkid_new_probe();
        if (!pr)
                return -ENOMEM;
        if (sym_blkid_probe_set_device(pr, fd, (blkid_loff_t) offset, (blkid_loff_t) size) < 0)
                return -EIO;
        sym_blkid_probe_enable_superblocks(pr, 1);
        sym_blkid_probe_set_superblocks_flags(pr, BLKID_SUBLKS_TYPE);
        sym_blkid_probe_enable_partitions(pr, partitions);
        r = sym_blkid_do_safeprobe(pr);
        if (r == 0 && sym_blkid_probe_lookup_value(pr, "TYPE", &type, NULL) < 0)
                /* A partition table (a disk image) is reported by its type. */
                (void) sym_blkid_probe_lookup_value(pr, "PTTYPE", &type, NULL);
        if (type) {
                *ret_type = strdup(type);
                if (!*ret_type)
                        return -ENOMEM;
        }
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

static bool partition_set(Partition *p, blkid_partition part, uint64_t file_size) {
        const char *uuid = sym_blkid_partition_get_uuid(part);
        blkid_loff_t start = sym_blkid_partition_get_start(part), size = sym_blkid_partition_get_size(part);

        /* A partition table is input like any other: a partition must lie within the file. */
        if (start < 0 || size <= 0 || (uint64_t) start > UINT64_MAX / 512 || (uint64_t) size > UINT64_MAX / 512)
                return false;
        p->offset = (uint64_t) start * 512;
        p->size = (uint64_t) size * 512;
        if (p->offset > file_size || p->size > file_size - p->offset)
                return false;
        p->found = true;
        snprintf(p->uuid, sizeof(p->uuid), "%s", uuid ?: "");
        return true;
}

int disk_layout(int fd, uint64_t file_size, DiskLayout *ret, char **ret_reason) {
        _cleanup_blkid_probe_ blkid_probe pr = NULL;
        const DpsTypes *t = NULL;
        DiskLayout usr = { .usr = true }, root = {};
        blkid_partlist pl;
        int n;

        for (size_t i = 0; i < ELEMENTSOF(dps_table); i++)
                if (streq(dps_table[i].arch, release_native_architecture()))
                        t = &dps_table[i];
        if (!t)
                return set_message(ret_reason, EOPNOTSUPP, "disk images are not supported on %s",
                                   release_native_architecture());

        if (blkid_loaded() < 0)
                return set_message(ret_reason, ELIBACC, "disk images cannot be read without libblkid.so.1");
        pr = sym_blkid_new_probe();
        if (!pr)
                return -ENOMEM;
        if (sym_blkid_probe_set_device(pr, fd, 0, 0) < 0 || sym_blkid_probe_enable_partitions(pr, 1) < 0 ||
            sym_blkid_probe_set_partitions_flags(pr, BLKID_PARTS_ENTRY_DETAILS) < 0 || sym_blkid_do_fullprobe(pr) < 0 ||
            !(pl = sym_blkid_probe_get_partitions(pr)))
                return set_message(ret_reason, EBADMSG, "cannot read the partition table");
        n = sym_blkid_partlist_numof_partitions(pl);
        for (int i = 0; i < n; i++) {
                blkid_partition part = sym_blkid_partlist_get_partition(pl, i);
                const char *type = sym_blkid_partition_get_type_string(part);
                Partition *p = NULL;

                if (!type)
                        continue;
                if (strcasecmp(type, t->usr) == 0)
                        p = &usr.data;
                else if (strcasecmp(type, t->usr_verity) == 0)
                        p = &usr.verity;
                else if (strcasecmp(type, t->usr_sig) == 0)
                        p = &usr.sig;
                else if (strcasecmp(type, t->root) == 0)
                        p = &root.data;
                else if (strcasecmp(type, t->root_verity) == 0)
                        p = &root.verity;
                else if (strcasecmp(type, t->root_sig) == 0)
                        p = &root.sig;
                if (!p || p->found)
                        continue;
                if (!partition_set(p, part, file_size))
                        return set_message(ret_reason, EBADMSG, "partition %d lies outside the image file", i + 1);
        }

        if (usr.data.found)
                *ret = usr;
        else if (root.data.found)
                *ret = root;
        else
                return set_message(ret_reason, EBADMSG, "disk image has no usr or root partition for %s",
                                   release_native_architecture());
        return 0;
}

int disk_verity(int fd, const char *image_display, int root_fd, const char *dir, const char *name, const DiskLayout *l,
                VeritySource *ret, char **ret_reason) {
        _cleanup_verity_source_ VeritySource v = { .origin = "partitions", .hash_fd = -EBADF };
        int r;

        if (!l->verity.found) {
                if (l->sig.found)
                        return set_message(ret_reason, EBADMSG,
                                           "disk image has a verity signature partition but no verity partition");
                *ret = (VeritySource) { .hash_fd = -EBADF };
                return 0;
        }

        if (l->sig.found) {
                _cleanup_free_ char *json = NULL;
                ssize_t k;

                if (l->sig.size > 1024 * 1024)
                        return set_message(ret_reason, EBADMSG, "verity signature partition is too large");
                json = calloc(1, l->sig.size + 1);
                if (!json)
                        return -ENOMEM;
                k = pread(fd, json, l->sig.size, (off_t) l->sig.offset);
                if (k < 0)
                        return set_message(ret_reason, EBADMSG, "cannot read the verity signature partition: %m");
                r = verity_parse_signature_json(json, &v.roothash, &v.signature, &v.signature_size, ret_reason);
                if (r < 0)
                        return r;
        } else {
                _cleanup_free_ char *p = NULL, *text = NULL;

                if (asprintf(&p, "%s/%s.roothash", dir, name) < 0)
                        return -ENOMEM;
                r = read_file_at(root_fd, p, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS, 4096, &text, NULL, NULL);
                if (r >= 0) {
                        r = verity_normalize_roothash(text, &v.roothash);
                        if (r == -ENOMEM)
                                return r;
                        if (r < 0)
                                return set_message(ret_reason, EBADMSG, "%s.roothash does not hold a hex root hash", name);
                } else if (strlen(l->data.uuid) == 36 && strlen(l->verity.uuid) == 36) {
                        /* The data partition's UUID is the first half of the root hash, the
                         * verity partition's the second. */
                        char hex[65], *o = hex;
                        for (const char *c = l->data.uuid; *c; c++)
                                if (isxdigit((unsigned char) *c))
                                        *o++ = tolower((unsigned char) *c);
                        for (const char *c = l->verity.uuid; *c; c++)
                                if (isxdigit((unsigned char) *c))
                                        *o++ = tolower((unsigned char) *c);
                        *o = 0;
                        if (strlen(hex) != 64)
                                return set_message(ret_reason, EBADMSG, "disk image partition UUIDs do not form a root hash");
                        v.roothash = strdup(hex);
                        if (!v.roothash)
                                return -ENOMEM;
                } else
                        return set_message(ret_reason, EBADMSG, "disk image has a verity partition but no root hash");
        }
        v.hash_path = strdup(image_display);
        v.hash_fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        if (!v.hash_path || v.hash_fd < 0)
                return -ENOMEM;
        v.hash_offset = l->verity.offset;
        *ret = v;
        v = (VeritySource) { .hash_fd = -EBADF };
        return 0;
}


static uint32_t be32(const uint8_t *p) {
        return (uint32_t) p[0] << 24 | p[1] << 16 | p[2] << 8 | p[3];
}

static uint64_t be64(const uint8_t *p) {
        return (uint64_t) be32(p) << 32 | be32(p + 4);
}

/* The number of devices a btrfs file system spans (num_devices, le64 @0x88 of the superblock
 * at 64 KiB); 0 where the buffer holds no btrfs superblock. */
static uint64_t btrfs_devices(const uint8_t *buf, size_t len) {
        if (len < 0x10000 + 0x100 || memcmp(buf + 0x10000 + 0x40, "_BHRfS_M", 8) != 0)
                return 0;
        return le64(buf + 0x10000 + 0x88);
}

int superblock_needed_size(ImageKind kind, const uint8_t *buf, size_t len, uint64_t *ret) {
        uint64_t need = 0;

        switch (kind) {
        case IMAGE_EROFS: /* superblock at 1024: magic le32 @0, blkszbits u8 @12, blocks le32 @36 */
                if (len < 1024 + 40)
                        return -EBADMSG;
                if (erofs_super(buf))
                        need = (uint64_t) le32(buf + 1024 + 36) << buf[1024 + 12];
                break;
        case IMAGE_SQUASHFS: /* magic le32 @0 "hsqs", bytes_used le64 @40 */
                if (len < 48)
                        return -EBADMSG;
                if (le32(buf) == 0x73717368)
                        need = le64(buf + 40);
                break;
        case IMAGE_EXT4: { /* superblock at 1024: blocks_count_lo @4, log_block_size @24, magic le16
                            * @56, feature_incompat @96 (0x80: 64bit), blocks_count_hi @0x150 */
                uint32_t log;
                uint64_t blocks;

                if (len < 1024 + 0x154)
                        return -EBADMSG;
                if ((buf[1024 + 56] | buf[1024 + 57] << 8) != 0xef53)
                        break;
                log = le32(buf + 1024 + 24);
                blocks = le32(buf + 1024 + 4);
                if (log > 6)
                        break;
                if (le32(buf + 1024 + 96) & 0x80)
                        blocks |= (uint64_t) le32(buf + 1024 + 0x150) << 32;
                if (blocks > UINT64_MAX >> (10 + log))
                        need = UINT64_MAX;
                else
                        need = blocks << (10 + log);
                break;
        }
        case IMAGE_BTRFS: /* superblock at 64 KiB: magic "_BHRfS_M" @0x40, total_bytes le64 @0x70 */
                if (len < 0x10000 + 0x78)
                        return -EBADMSG;
                /* total_bytes @0x70 counts every device; this device's own size is its
                 * dev_item's total_bytes @0xd1 (dev_item @0xc9: devid le64, total_bytes le64). */
                if (memcmp(buf + 0x10000 + 0x40, "_BHRfS_M", 8) == 0)
                        need = le64(buf + 0x10000 + (btrfs_devices(buf, len) > 1 ? 0xd1 : 0x70));
                break;
        case IMAGE_XFS: { /* superblock at 0, big endian: magic "XFSB", blocksize @4, dblocks @8 */
                uint32_t bs;
                uint64_t blocks;

                if (len < 16)
                        return -EBADMSG;
                if (memcmp(buf, "XFSB", 4) != 0)
                        break;
                bs = be32(buf + 4);
                blocks = be64(buf + 8);
                if (bs == 0 || (bs & (bs - 1)) != 0 || bs > 65536)
                        break;
                need = blocks > UINT64_MAX / bs ? UINT64_MAX : blocks * bs;
                break;
        }
        default:
                break;
        }
        *ret = need;
        return 0;
}

int disk_check_size(int fd, uint64_t offset, ImageKind kind, uint64_t available, char **ret_message) {
        _cleanup_free_ uint8_t *buf = NULL;
        uint64_t need, devices;
        /* erofs says all it needs in its superblock at 1 KiB: one page, not the 128 KiB the
         * others' superblocks may need (btrfs's is at 64 KiB). */
        size_t want = MIN((uint64_t) (kind == IMAGE_EROFS ? 4096 : SUPERBLOCK_PROBE_SIZE), available);
        ssize_t n;
        int r;

        buf = calloc(1, MAX(want, (size_t) 1));
        if (!buf)
                return -ENOMEM;
        n = pread(fd, buf, want, (off_t) offset);
        if (n < 0)
                return negative_errno();
        if (n < 2048)
                return set_message(ret_message, EBADMSG, "image is truncated: only %zd bytes", n);
        /* erofs (superblock at 1 KiB): extra_devices, le16 @0x56, counts blob devices that
         * hold data; this image alone could not supply it and every read of it fails. */
        if (kind == IMAGE_EROFS && n >= 1024 + 0x58 && le32(buf + 1024) == EROFS_SUPER_MAGIC_V1 && le16(buf + 1024 + 0x56) > 0)
                return set_message(ret_message, EXDEV,
                                   "the erofs file system keeps data on %u extra device(s) (blobs) that an extension image cannot bring; build it without --blobdev or chunk de-duplication across devices",
                                   (unsigned) le16(buf + 1024 + 0x56));
        devices = kind == IMAGE_BTRFS ? btrfs_devices(buf, (size_t) n) : 0;
        if (devices > 1)
                return set_message(ret_message, EXDEV,
                                   "the btrfs file system spans %" PRIu64 " devices and this image holds only one of them; an extension image must hold its whole file system",
                                   devices);
        r = superblock_needed_size(kind, buf, (size_t) n, &need);
        if (r < 0)
                return set_message(ret_message, EBADMSG, "image is truncated: only %zd bytes, too few for its %s superblock",
                                   n, image_kind_to_string(kind));
        if (need > available)
                return set_message(ret_message, EBADMSG,
                                   "image is truncated: its %s file system needs %" PRIu64 " bytes, the file has %" PRIu64,
                                   image_kind_to_string(kind), need, available);
        return 0;
}
