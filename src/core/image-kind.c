/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Image kinds (image-kind.h): their names, for the journal, the command line and the bus, and
 * their file system types, for libblkid's answer and for mount.  Pure.
 */
#include "image-kind.h"
#include "util.h"

static const char *const kind_table[_IMAGE_KIND_MAX] = {
        [IMAGE_DIRECTORY] = "directory",
        [IMAGE_EROFS] = "erofs",
        [IMAGE_SQUASHFS] = "squashfs",
        [IMAGE_EXT4] = "ext4",
        [IMAGE_BTRFS] = "btrfs",
        [IMAGE_XFS] = "xfs",
        [IMAGE_DDI] = "ddi",
        [IMAGE_UNKNOWN] = "unknown",
};

const char *image_kind_to_string(ImageKind k) {
        return k >= 0 && k < _IMAGE_KIND_MAX ? kind_table[k] : "unknown";
}

int image_kind_from_string(const char *s) {
        return string_table_find(kind_table, _IMAGE_KIND_MAX, s);
}

ImageKind image_kind_from_fstype(const char *type) {
        if (!type)
                return IMAGE_UNKNOWN;
        if (streq(type, "erofs"))
                return IMAGE_EROFS;
        if (streq(type, "squashfs"))
                return IMAGE_SQUASHFS;
        if (STR_IN_SET(type, "ext4", "ext3", "ext2"))
                return IMAGE_EXT4;
        if (streq(type, "btrfs"))
                return IMAGE_BTRFS;
        if (streq(type, "xfs"))
                return IMAGE_XFS;
        return IMAGE_UNKNOWN;
}

const char *image_kind_fstype(ImageKind kind) {
        switch (kind) {
        case IMAGE_EROFS:
                return "erofs";
        case IMAGE_SQUASHFS:
                return "squashfs";
        case IMAGE_EXT4:
                return "ext4"; /* mounts ext2 and ext3 too */
        case IMAGE_BTRFS:
                return "btrfs";
        case IMAGE_XFS:
                return "xfs";
        default:
                return NULL;
        }
}
