/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Layers watched while merged: the judgement (pure), the facts a stat() and sysfs give, and
 * run/sysextd/changed.json.  See watch.h.  Nothing here watches: the daemon does
 * (src/daemon/layer-watch.c) and calls these to decide what an event means.  Reading only,
 * except watch_changes_save(), which replaces changed.json atomically.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "fd-util.h"
#include "fileio.h"
#include "json-util.h"
#include "util.h"
#include "watch.h"

#define CHANGED_FILE_MAX (4 * 1024 * 1024)

static const char *const how_names[_WATCH_HOW_MAX] = {
        [WATCH_UNCHANGED] = "unchanged",
        [WATCH_MEDIA_CHANGED] = "media-changed",
        [WATCH_MODIFIED] = "modified",
        [WATCH_DELETED] = "deleted",
        [WATCH_REPLACED] = "replaced",
};

const char *watch_how_to_string(WatchHow h) {
        return h >= 0 && h < _WATCH_HOW_MAX ? how_names[h] : NULL;
}

int watch_how_from_string(const char *s) {
        return string_table_find(how_names, _WATCH_HOW_MAX, s);
}

static bool same_inode(const struct stat *a, const struct stat *b) {
        return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

static bool same_content_stamp(const struct stat *a, const struct stat *b) {
        return a->st_size == b->st_size && a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

WatchHow watch_judge(const Image *recorded, const WatchFacts *f) {
        bool directory = recorded->kind == IMAGE_DIRECTORY;

        /* The loop device first: whatever the path says, the live tree reads what the device
         * reads.  The device is held by the mounted file system while the tree is live, so it
         * is never detached or reused under it; a diskseq that moved on means its backing
         * file was swapped (LOOP_CHANGE_FD) or the device reconfigured. */
        if (!directory && recorded->loop_devnum != 0) {
                if (f->media_change_seen)
                        return WATCH_MEDIA_CHANGED;
                if (f->diskseq_error == -ENOENT)
                        return WATCH_MEDIA_CHANGED;
                if (f->diskseq_error == 0 && recorded->loop_diskseq != 0 && f->diskseq != recorded->loop_diskseq)
                        return WATCH_MEDIA_CHANGED;
        }

        /* A write to the merged file: the kernel reads those bytes (through the loop device,
         * or the file itself for a file-backed erofs), though the file kept its inode and
         * maybe, set back, its modification time. */
        if (!directory && f->modify_seen)
                return WATCH_MODIFIED;

        if (f->stat_error == -ENOENT)
                return WATCH_DELETED;
        if (f->stat_error != 0)
                return WATCH_UNCHANGED; /* cannot tell: not judged */
        if (!same_inode(&recorded->st, &f->st))
                return WATCH_REPLACED; /* renamed over, or deleted and made anew */
        if (!directory && !same_content_stamp(&recorded->st, &f->st))
                return WATCH_MODIFIED;
        return WATCH_UNCHANGED;
}

int watch_describe(const Image *recorded, WatchHow how, const WatchFacts *f, char **ret) {
        char dev[64] = "";
        int r = -1;

        if (recorded->loop_devnum != 0)
                (void) snprintf(dev, sizeof(dev), "loop device %u:%u", major((dev_t) recorded->loop_devnum),
                                minor((dev_t) recorded->loop_devnum));
        switch (how) {
        case WATCH_UNCHANGED:
                r = asprintf(ret, "unchanged");
                break;
        case WATCH_MEDIA_CHANGED:
                if (f->diskseq_error == -ENOENT)
                        r = asprintf(ret, "its %s is gone", dev);
                else if (f->diskseq_error == 0 && f->diskseq != recorded->loop_diskseq)
                        r = asprintf(ret,
                                     "the backing file of its %s was swapped or the device reconfigured (disk sequence number %" PRIu64
                                     " at merge, %" PRIu64 " now): the live tree reads other bytes",
                                     dev, recorded->loop_diskseq, f->diskseq);
                else
                        r = asprintf(ret, "its %s announced a media change: the live tree may read other bytes", dev);
                break;
        case WATCH_MODIFIED:
                r = asprintf(ret, "modified in place: the live tree reads the modified bytes, not the image that was verified");
                break;
        case WATCH_DELETED:
                r = asprintf(ret, "deleted: the live tree still reads the file that was merged");
                break;
        case WATCH_REPLACED:
                r = asprintf(ret, "replaced by another file: the live tree still reads the one that was merged");
                break;
        default:
                return -EINVAL;
        }
        return r < 0 ? -ENOMEM : 0;
}

const char *watch_image_rel(const char *root, const char *path) {
        const char *p;

        if (!root || !path)
                return NULL;
        if (streq(root, "/"))
                p = path;
        else {
                p = startswith(path, root);
                if (!p || *p != '/')
                        return NULL;
        }
        while (*p == '/')
                p++;
        return *p ? p : NULL;
}

int watch_read_diskseq(uint64_t devnum, uint64_t *ret) {
        _cleanup_close_ int fd = -EBADF;
        char path[96], text[32];
        char *end;
        unsigned long long v;
        ssize_t n;

        /* A sysfs attribute claims the size of a page whatever it holds (read_file_at() would
         * take that for too big): one short read is the whole value. */
        (void) snprintf(path, sizeof(path), "/sys/dev/block/%u:%u/diskseq", major((dev_t) devnum), minor((dev_t) devnum));
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return errno == ENOENT || errno == ENODEV || errno == ENXIO ? -ENOENT : negative_errno();
        n = read(fd, text, sizeof(text) - 1);
        if (n < 0)
                return errno == ENODEV || errno == ENXIO ? -ENOENT : negative_errno();
        text[n] = 0;
        errno = 0;
        v = strtoull(text, &end, 10);
        if (errno || end == text || (*end && *end != '\n'))
                return -EBADMSG;
        *ret = v;
        return 0;
}

void watch_dir_cache_done(WatchDirCache *c) {
        free(c->dir);
        c->dir = NULL;
        c->fd = safe_close(c->fd);
}

/* The image's file in its directory, when the directory resolves inside the root and the last
 * component is no symbolic link (one is resolved inside the root by the caller instead): 0 with
 * *st, -EAGAIN when the caller should resolve the whole path, or the error. */
static int observe_in_dir(int root_fd, const char *rel, WatchDirCache *c, struct stat *st) {
        const char *slash = strrchr(rel, '/');
        const char *base = slash ? slash + 1 : rel;
        size_t len = slash ? (size_t) (slash - rel) : 0;

        if (!slash || isempty(base) || streq(base, "..") || streq(base, "."))
                return -EAGAIN;
        if (!c->dir || strlen(c->dir) != len || strncmp(c->dir, rel, len) != 0) {
                watch_dir_cache_done(c);
                c->dir = strndup(rel, len);
                if (!c->dir)
                        return -ENOMEM;
                c->fd = openat_resolve(root_fd, c->dir, O_PATH | O_DIRECTORY, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
        }
        if (c->fd < 0)
                return c->fd;
        if (fstatat(c->fd, base, st, AT_SYMLINK_NOFOLLOW) < 0)
                return negative_errno();
        return S_ISLNK(st->st_mode) ? -EAGAIN : 0;
}

void watch_observe(int root_fd, const char *root, const Image *img, WatchDirCache *cache, WatchFacts *ret) {
        const char *rel = watch_image_rel(root, img->path);
        WatchFacts f = { .stat_error = -EINVAL, .diskseq_error = -EINVAL };

        if (rel) {
                int r = cache ? observe_in_dir(root_fd, rel, cache, &f.st) : -EAGAIN;

                if (r == -EAGAIN) {
                        /* O_PATH: never opens a FIFO or device for reading; resolved inside the
                         * root as discovery resolved it. */
                        int fd = openat_resolve(root_fd, rel, O_PATH, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);

                        if (fd >= 0) {
                                r = fstat(fd, &f.st) < 0 ? negative_errno() : 0;
                                safe_close(fd);
                        } else
                                r = fd;
                }
                f.stat_error = r == -ENOENT || r == -ENOTDIR ? -ENOENT : r;
        }
        if (img->loop_devnum != 0)
                f.diskseq_error = watch_read_diskseq(img->loop_devnum, &f.diskseq);
        *ret = f;
}

void watch_change_list_done(WatchChangeList *l) {
        for (size_t i = 0; i < l->n; i++) {
                free(l->changes[i].name);
                free(l->changes[i].path);
                free(l->changes[i].description);
        }
        free(l->changes);
        *l = (WatchChangeList) {};
}

WatchChange *watch_change_find(const WatchChangeList *l, const char *path) {
        for (size_t i = 0; i < l->n; i++)
                if (streq(l->changes[i].path, path))
                        return &l->changes[i];
        return NULL;
}

int watch_change_add(WatchChangeList *l, const char *name, const char *path, WatchHow how, const char *description,
                     uint64_t generation, uint64_t since) {
        WatchChange *n, *c;

        if (l->n >= WATCH_CHANGES_MAX)
                return -E2BIG;
        n = reallocarray(l->changes, l->n + 1, sizeof(WatchChange));
        if (!n)
                return -ENOMEM;
        l->changes = n;
        c = &n[l->n];
        *c = (WatchChange) { .how = how, .generation = generation, .since = since };
        c->name = strdup(name);
        c->path = strdup(path);
        c->description = strdup(description ?: "");
        if (!c->name || !c->path || !c->description) {
                free(c->name);
                free(c->path);
                free(c->description);
                return -ENOMEM;
        }
        l->n++;
        return 0;
}

int watch_changes_to_json(const WatchChangeList *l, uint64_t generation, char **ret) {
        _cleanup_json_ json_object *o = json_object_new_object();
        json_object *a = json_object_new_array();
        const char *text;

        if (!o || !a) {
                json_object_put(a);
                return -ENOMEM;
        }
        json_object_object_add(o, "generation", json_object_new_uint64(generation));
        json_object_object_add(o, "changes", a);
        for (size_t i = 0; i < l->n; i++) {
                const WatchChange *c = &l->changes[i];
                json_object *e = json_object_new_object();

                if (!e)
                        return -ENOMEM;
                json_object_object_add(e, "name", json_object_new_string(c->name));
                json_object_object_add(e, "path", json_object_new_string(c->path));
                json_object_object_add(e, "how", json_object_new_string(watch_how_to_string(c->how)));
                json_object_object_add(e, "description", json_object_new_string(c->description));
                json_object_object_add(e, "since", json_object_new_uint64(c->since));
                json_object_array_add(a, e);
        }
        text = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY);
        if (!text)
                return -ENOMEM;
        *ret = strdup(text);
        return *ret ? 0 : -ENOMEM;
}

static const Image *live_image(const Journal *j, const char *path) {
        for (size_t i = 0; i < j->images.n; i++)
                if (watch_image_live(&j->images.images[i]) && streq(j->images.images[i].path, path))
                        return &j->images.images[i];
        return NULL;
}

int watch_changes_from_json(const char *text, const Journal *j, WatchChangeList *ret) {
        _cleanup_(watch_change_list_done) WatchChangeList l = {};
        _cleanup_json_ json_object *o = json_parse_object(text);
        json_object *a;
        uint64_t generation;
        int r;

        if (!o)
                return -EBADMSG;
        r = json_get_u64(o, "generation", &generation);
        if (r < 0)
                return -EBADMSG;
        a = json_get_array(o, "changes");
        if (!a || json_object_array_length(a) > WATCH_CHANGES_MAX)
                return -EBADMSG;
        if (generation != j->generation) {
                *ret = (WatchChangeList) {}; /* of another generation: nothing changed under this one */
                return 0;
        }
        for (size_t i = 0; i < json_object_array_length(a); i++) {
                json_object *e = json_object_array_get_idx(a, i);
                _cleanup_free_ char *name = NULL, *path = NULL, *how = NULL, *description = NULL;
                uint64_t since;
                int h;

                if (!json_object_is_type(e, json_type_object))
                        return -EBADMSG;
                if (json_get_string(e, "name", IMAGE_NAME_MAX, &name) < 0 || json_get_string(e, "path", 4096, &path) < 0 ||
                    json_get_string(e, "how", 32, &how) < 0 ||
                    json_get_string(e, "description", WATCH_DESCRIPTION_MAX, &description) < 0 ||
                    json_get_u64(e, "since", &since) < 0)
                        return -EBADMSG;
                h = watch_how_from_string(how);
                if (h <= WATCH_UNCHANGED || !utf8_is_valid(description))
                        return -EBADMSG;
                /* Only what is live now; once per image. */
                if (!live_image(j, path) || watch_change_find(&l, path))
                        continue;
                r = watch_change_add(&l, name, path, h, description, generation, since);
                if (r < 0)
                        return r;
        }
        *ret = l;
        l = (WatchChangeList) {};
        return 0;
}

int watch_changes_load(int dir_fd, const Journal *j, WatchChangeList *ret) {
        _cleanup_free_ char *text = NULL;
        int r;

        *ret = (WatchChangeList) {};
        r = read_file_at(dir_fd, WATCH_CHANGED_FILE, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS, CHANGED_FILE_MAX, &text, NULL, NULL);
        if (r == -ENOENT)
                return 0;
        if (r >= 0)
                r = watch_changes_from_json(text, j, ret);
        if (r == -ENOMEM)
                return r;
        /* Unreadable or invalid: what it said is found again where a stat() can find it. */
        return 0;
}

int watch_changes_save(int dir_fd, const WatchChangeList *l, uint64_t generation) {
        _cleanup_free_ char *text = NULL;
        int r;

        r = watch_changes_to_json(l, generation, &text);
        if (r < 0)
                return r;
        return write_file_atomic_at(dir_fd, WATCH_CHANGED_FILE, text, 0644);
}

int watch_scan(int root_fd, const char *root, int dir_fd, const Journal *j, WatchChangeList *ret) {
        _cleanup_(watch_change_list_done) WatchChangeList l = {};
        _cleanup_(watch_dir_cache_done) WatchDirCache cache = WATCH_DIR_CACHE_INIT;
        int r;

        if (dir_fd >= 0) {
                r = watch_changes_load(dir_fd, j, &l);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; i < j->images.n; i++) {
                const Image *img = &j->images.images[i];
                _cleanup_free_ char *description = NULL;
                WatchFacts f;
                WatchHow how;

                if (!watch_image_live(img) || watch_change_find(&l, img->path))
                        continue;
                watch_observe(root_fd, root, img, &cache, &f);
                how = watch_judge(img, &f);
                if (how == WATCH_UNCHANGED)
                        continue;
                r = watch_describe(img, how, &f, &description);
                if (r >= 0)
                        r = watch_change_add(&l, img->name, img->path, how, description, j->generation, now_realtime_usec());
                if (r < 0)
                        return r;
        }
        *ret = l;
        l = (WatchChangeList) {};
        return 0;
}
