/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "loopdev.h"
#include "release.h"
#include "verity.h"

/* Extension images: discovery in the search directories, recognition by content, and the
 * probe that opens an image and decides whether it may be merged. */

typedef enum ImageKind {
        IMAGE_DIRECTORY,
        IMAGE_EROFS,
        IMAGE_SQUASHFS,
        IMAGE_EXT4,
        IMAGE_DDI,     /* GPT disk image per the Discoverable Partitions Specification */
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

        char *fstype;       /* file system mounted (for a disk image: of its partition) */
        bool usr_partition; /* disk image with a usr partition: its root is the image's usr/ */
        VerityMode verity;
        bool signed_valid;  /* a root hash signature checked against the trusted certificates */
        uint64_t judged_by; /* stamp of the policy and certificates the verdict was made under */
} Image;

typedef enum ImagePolicy {
        IMAGE_POLICY_OPEN,   /* anything compatible; verity is checked where the image has it */
        IMAGE_POLICY_VERITY, /* only images with verity data (no directories) */
        IMAGE_POLICY_SIGNED, /* only images with a valid root hash signature */
        _IMAGE_POLICY_MAX,
} ImagePolicy;

const char *image_policy_to_string(ImagePolicy p);
int image_policy_from_string(const char *s);

typedef struct ProbeContext {
        const Release *host;
        char *const *hierarchies;
        unsigned mount_attrs;
        ImagePolicy policy;
        const char *cert_dir; /* absolute path of the trusted certificates */
        bool use_dm;          /* device-mapper is there: dm-verity, else user space */
} ProbeContext;

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

/* Opens the image, checks verity and the policy, attaches and mounts a raw one (detached),
 * verifies the device and matches the release file against the host; fills verdict/reason/hierarchies. Per-image
 * failures become IMAGE_REFUSED with a reason; only a failure to run at all is returned. */
int image_probe(Image *img, const ProbeContext *ctx);

/* A hash over the identity (inode, size, ctime) of every entry below a directory: any edit
 * inside the tree changes it, so a refresh notices edited directory images. */
int image_directory_stamp(const char *path, uint64_t *ret);
