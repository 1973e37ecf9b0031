/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "image.h"
#include "journal.h"

/* Layers watched while merged (sysextd(8), WATCHED LAYERS): whether what a live layer is made
 * of is still what was verified when it was merged.
 *
 * The journal records, for every merged image, its identity (device, inode, size and
 * modification time of the file) and the loop device it was attached to with that device's
 * disk sequence number.  Anything that happens to the file or the device afterwards is judged
 * against that record by watch_judge(), a pure function: the facts come from a stat() of the
 * image's path, the loop device's diskseq in sysfs, and what the daemon saw (an inotify
 * IN_MODIFY on the file, a DISK_MEDIA_CHANGE uevent on the device).  The facts that a stat()
 * can find again are found again by anyone (`sysextd status --no-bus`, a daemon that starts);
 * what only an event saw (a write whose modification time was then set back) is kept by the
 * daemon in run/sysextd/changed.json, for the generation it was seen under.
 *
 * Directory images are judged only as replaced or deleted: edits inside a lower layer of a
 * mounted overlay are undefined behaviour in overlayfs, and watching a whole tree is not what
 * an inotify watch per layer can do. */

typedef enum WatchHow {
        WATCH_UNCHANGED,
        WATCH_MEDIA_CHANGED, /* the loop device under the layer reads another file, or is gone */
        WATCH_MODIFIED,      /* written in place: the live tree reads the modified bytes */
        WATCH_DELETED,       /* the path is gone: the live tree still reads the old file */
        WATCH_REPLACED,      /* another file is at the path: the live tree still reads the old one */
        _WATCH_HOW_MAX,
} WatchHow;

const char *watch_how_to_string(WatchHow h); /* "media-changed", "modified", "deleted", "replaced" */
int watch_how_from_string(const char *s);

typedef struct WatchFacts {
        int stat_error;         /* 0: st is what the image's path is now; -ENOENT: nothing is there;
                                 * any other: unknown (not judged) */
        struct stat st;
        bool modify_seen;       /* a write to the merged file was seen (IN_MODIFY) */
        bool media_change_seen; /* its loop device announced a media change (DISK_MEDIA_CHANGE=1) */
        int diskseq_error;      /* 0: diskseq is the loop device's now; -ENOENT: the device is gone;
                                 * any other: unknown */
        uint64_t diskseq;
} WatchFacts;

/* The judgement: given what the journal recorded of a merged image and the facts, whether the
 * live layer is still that image, and if not the most serious way in which it is not (the live
 * tree reading other bytes comes before the path no longer leading to it). */
WatchHow watch_judge(const Image *recorded, const WatchFacts *f);
/* For people and the status: "the backing file of loop device 7:3 was swapped or resized
 * (disk sequence number 12 at merge, 13 now)". */
int watch_describe(const Image *recorded, WatchHow how, const WatchFacts *f, char **ret);

/* Whether a journal image is a live layer, and so watched. */
static inline bool watch_image_live(const Image *img) {
        return img->verdict == IMAGE_COMPATIBLE && img->hierarchies != 0;
}

/* The image's path below the root ("var/lib/extensions/a.raw"), from its path as shown and the
 * root's ("/" or "/R"); NULL when path is not below root. */
const char *watch_image_rel(const char *root, const char *path);

/* The directory of the last image observed, kept open for the next images in it: most images
 * share one, and one fstatat() in it is a third of the system calls of resolving each path. */
typedef struct WatchDirCache {
        char *dir; /* below the root */
        int fd;    /* O_PATH, resolved inside the root; -EBADF: none */
} WatchDirCache;
#define WATCH_DIR_CACHE_INIT { .fd = -EBADF }
void watch_dir_cache_done(WatchDirCache *c);

/* Gathers the facts a stat() and sysfs give now (the seen flags are left false).  cache: NULL,
 * or kept across calls for images that share a directory. */
void watch_observe(int root_fd, const char *root, const Image *img, WatchDirCache *cache, WatchFacts *ret);

/* The loop device's disk sequence number now, from /sys/dev/block/MAJ:MIN/diskseq. */
int watch_read_diskseq(uint64_t devnum, uint64_t *ret);

/* A change under the live tree, as status reports it. */
typedef struct WatchChange {
        char *name;
        char *path;        /* as shown: the journal image's path */
        WatchHow how;
        char *description;
        uint64_t generation; /* the generation it changed under */
        uint64_t since;      /* CLOCK_REALTIME µs when it was noticed */
} WatchChange;

typedef struct WatchChangeList {
        WatchChange *changes;
        size_t n;
} WatchChangeList;

void watch_change_list_done(WatchChangeList *l);
WatchChange *watch_change_find(const WatchChangeList *l, const char *path);
int watch_change_add(WatchChangeList *l, const char *name, const char *path, WatchHow how, const char *description,
                     uint64_t generation, uint64_t since);

#define WATCH_CHANGED_FILE "changed.json"
#define WATCH_CHANGES_MAX 1024
#define WATCH_DESCRIPTION_MAX 1024

int watch_changes_to_json(const WatchChangeList *l, uint64_t generation, char **ret);
/* Validated as the journal is: the generation must be j's and every path a live image of j
 * (others are dropped); a document that fails is -EBADMSG. */
int watch_changes_from_json(const char *text, const Journal *j, WatchChangeList *ret);
/* run/sysextd/changed.json (dir_fd: the journal directory); missing or stale: empty.  A file
 * that fails validation is ignored (and replaced at the next save). */
int watch_changes_load(int dir_fd, const Journal *j, WatchChangeList *ret);
int watch_changes_save(int dir_fd, const WatchChangeList *l, uint64_t generation);

/* Every live image of j that changed under the live tree: what changed.json says, and what a
 * stat() and sysfs find now (the restart-proof check). */
int watch_scan(int root_fd, const char *root, int dir_fd, const Journal *j, WatchChangeList *ret);
