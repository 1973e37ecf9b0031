/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "image-kind.h"
#include "verity.h"

/* What is on a raw image: the file system (libblkid, by content), the partitions of a GPT
 * disk image per the Discoverable Partitions Specification, and the size its file system
 * says it has.  Reading only; the parsers of on-disk structures work on buffers and are
 * fuzzed (test/fuzz). */

/* The file system type of fd (from offset, size bytes; 0: all), or of its partition table
 * ("gpt") when partitions is set.  *ret_type is NULL when nothing is recognised. */
int disk_probe_type(int fd, uint64_t offset, uint64_t size, bool partitions, char **ret_type);

/* "erofs" when buf (the first DISK_FAST_PROBE_SIZE bytes, len of them) holds an erofs
 * superblock and no signature that could make it something else (a partition table,
 * squashfs, xfs, ext2/3/4, ISO 9660, btrfs), else NULL: then libblkid decides.  Lets
 * disk_probe_type() tell the common image from three small reads (below). */
#define DISK_FAST_PROBE_SIZE (65600 + 8)
const char *disk_fast_type(const uint8_t *buf, size_t len);
/* The same from the only bytes it looks at: the first DISK_FAST_HEAD_SIZE (head_len of them),
 * 5 at 32769 and 8 at 65600 (what disk_probe_type() reads, not the 64 KiB between). */
#define DISK_FAST_HEAD_SIZE 4096
const char *disk_fast_type_parts(const uint8_t *head, size_t head_len, const uint8_t iso[static 5], const uint8_t btrfs[static 8]);

typedef struct Partition {
        bool found;
        uint64_t offset, size; /* bytes */
        char uuid[37];
} Partition;

typedef struct DiskLayout {
        Partition data, verity, sig;
        bool usr; /* data is a usr partition (else root) */
} DiskLayout;

/* Finds the usr (preferred) or root partition of this architecture, with its verity and
 * verity signature partitions.  -EBADMSG with *ret_reason for a disk image that has none. */
int disk_layout(int fd, uint64_t file_size, DiskLayout *ret, char **ret_reason);

/* Root hash, hash tree and signature of a disk image: the signature partition first, then a
 * NAME.roothash sidecar (in 'dir' below root_fd), then the partition UUIDs. */
int disk_verity(int fd, const char *image_display, int root_fd, const char *dir, const char *name, const DiskLayout *l,
                VeritySource *ret, char **ret_reason);

/* The number of bytes the file system whose first bytes are buf (len of them, from the start
 * of the file system) says it occupies; 0 when the superblock does not say or is not one
 * of this kind.  -EBADMSG when buf is too short to tell. */
#define SUPERBLOCK_PROBE_SIZE (128 * 1024)
int superblock_needed_size(ImageKind kind, const uint8_t *buf, size_t len, uint64_t *ret);

/* A truncated image may still mount (its superblock is intact) and fail only later, when a
 * reader hits the missing blocks: compares the size the file system needs with what the file
 * (or partition) has, before anything is mounted.  -EBADMSG with *ret_message; -EXDEV for a
 * file system whose data lies partly on other devices (a btrfs of several devices, an erofs
 * with extra blob devices), which one image cannot hold. */
int disk_check_size(int fd, uint64_t offset, ImageKind kind, uint64_t available, char **ret_message);
