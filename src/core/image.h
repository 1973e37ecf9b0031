/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "loopdev.h"
#include "release.h"

/* Extension images: discovery in the search directories, recognition by content, and the
 * probe that opens an image and decides whether it may be merged. */

typedef enum ImageKind {
        IMAGE_DIRECTORY,
        IMAGE_EROFS,
        IMAGE_SQUASHFS,
        IMAGE_EXT4,
        IMAGE_UNKNOWN,
        _IMAGE_KIND_MAX,
} ImageKind;

typedef enum ImageVerdict {
        IMAGE_UNPROBED,
        IMAGE_COMPATIBLE,   /* may be merged */
        IMAGE_INCOMPATIBLE, /* built for another OS, version or architecture: skipped quietly */
        IMAGE_REFUSED,      /* broken, unreadable or not allowed: skipped with a warning */
} ImageVerdict;

/* Hierarchies an image can extend; bit i stands for hierarchy i of the context's list. */
#define HIERARCHIES_MAX 8

typedef struct Image {
        char *name;     /* "foo" for foo.raw or the directory foo */
        char *path;     /* absolute path as seen by this process (including --root) */
        ImageKind kind;
        struct stat st; /* identity: st_dev, st_ino, size and mtime */
        uint64_t stamp; /* directories: a hash over every entry's inode, size and ctime */

        ImageVerdict verdict;
        char *reason; /* why not compatible, for people */

        int root_fd;        /* directory fd, or fd of the root of the detached image mount */
        LoopDevice *loop;   /* for raw images */
        unsigned hierarchies; /* bit mask of hierarchies the image has content for */
} Image;

typedef struct ImageList {
        Image *images; /* ordered by name as versions, lowest first (= lowest layer) */
        size_t n;
} ImageList;

const char *image_kind_to_string(ImageKind k);
const char *image_verdict_to_string(ImageVerdict v);

void image_list_free(ImageList *l);
#define _cleanup_image_list_ _cleanup_(image_list_free)

/* Lists images in the search directories under root_fd (relative paths such as
 * "etc/extensions"); the first directory that has a name wins. root_prefix is prepended to
 * paths for display and for the kernel. Nothing is opened beyond stat(). */
int image_discover(int root_fd, const char *root_prefix, char *const *search_dirs, ImageList *ret);

/* Opens every image, attaches and mounts raw ones (detached), verifies the device and
 * matches the release file against host; fills verdict/reason/hierarchies. Per-image
 * failures become IMAGE_REFUSED with a reason; only a failure to run at all is returned. */
int image_probe(Image *img, const Release *host, char *const *hierarchies, unsigned mount_attrs);

/* A hash over the identity (inode, size, ctime) of every entry below a directory: any edit
 * inside the tree changes it, so a refresh notices edited directory images. */
int image_directory_stamp(const char *path, uint64_t *ret);
