/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* What an image is made of: a directory, a file system image of one of the file systems
 * sysextd mounts, or a disk image.  Below both the image module (image.h), which records an
 * image's kind, and the disk module (disk.h), which recognises it. */
typedef enum ImageKind {
        IMAGE_DIRECTORY,
        IMAGE_EROFS,
        IMAGE_SQUASHFS,
        IMAGE_EXT4,     /* also ext2 and ext3 */
        IMAGE_BTRFS,
        IMAGE_XFS,
        IMAGE_DDI,     /* GPT disk image per the Discoverable Partitions Specification */
        IMAGE_UNKNOWN,
        _IMAGE_KIND_MAX,
} ImageKind;

/* "directory", "erofs", ..., "ddi", "unknown" (also for a value out of range) */
const char *image_kind_to_string(ImageKind k);
int image_kind_from_string(const char *s);

/* The image kind for a libblkid type name ("erofs", "ext2", ...). */
ImageKind image_kind_from_fstype(const char *type);
/* The file system type to mount for a kind. */
const char *image_kind_fstype(ImageKind kind);
