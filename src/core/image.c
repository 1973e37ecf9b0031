/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Image discovery and probing.
 *
 * Everything below the root is someone else's: every path is resolved from the root's fd
 * with openat2(RESOLVE_IN_ROOT), so an absolute or ../ symlink stays inside the root, and
 * fds are passed on rather than paths re-opened.
 *
 * Discovery only reads directories and looks at the type of entries (O_PATH).  Probing
 * then, per image:
 *   directory: a detached bind of it (open_tree on the resolved fd), its extension-release;
 *   raw file:  reopened for reading only once it is known to be a regular file; the file
 *              system recognised with libblkid (by content, never by suffix), its size
 *              checked against the file's, a loop device attached, the file system mounted
 *              detached and verified (loopdev.c), then the release file read through the
 *              mount fd.
 * A probed raw image holds a loop device and a detached mount; both go away when the image
 * is released unless the mount was cloned into a tree first (then the tree keeps them).
 */
#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/sysmacros.h>

#include "disk.h"
#include "fd-util.h"
#include "fileio.h"
#include "image.h"
#include "missing.h"
#include "overlay.h"
#include "util.h"

#define RELEASE_FILE_MAX (64 * 1024)
#define STAMP_DEPTH_MAX 64

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
        for (int i = 0; i < _IMAGE_KIND_MAX; i++)
                if (streq(s, kind_table[i]))
                        return i;
        return -EINVAL;
}

static const char *const verdict_table[_IMAGE_VERDICT_MAX] = {
        [IMAGE_UNPROBED] = "unprobed",
        [IMAGE_COMPATIBLE] = "compatible",
        [IMAGE_INCOMPATIBLE] = "incompatible",
        [IMAGE_REFUSED] = "refused",
};

const char *image_verdict_to_string(ImageVerdict v) {
        return v >= 0 && v < _IMAGE_VERDICT_MAX ? verdict_table[v] : "unprobed";
}

int image_verdict_from_string(const char *s) {
        for (int i = 0; i < _IMAGE_VERDICT_MAX; i++)
                if (streq(s, verdict_table[i]))
                        return i;
        return -EINVAL;
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

void image_release(Image *img) {
        img->root_fd = safe_close(img->root_fd);
        img->loop = loopdev_free(img->loop);
}

void image_done(Image *img) {
        free(img->name);
        free(img->fstype);
        free(img->path);
        free(img->rel);
        free(img->reason);
        image_release(img);
        *img = (Image) { .root_fd = -EBADF };
}

void image_list_free(ImageList *l) {
        for (size_t i = 0; i < l->n; i++)
                image_done(&l->images[i]);
        free(l->images);
        *l = (ImageList) {};
}

const char *image_name_invalid_reason(const char *name) {
        if (isempty(name))
                return "the image name is empty";
        if (strlen(name) > IMAGE_NAME_MAX)
                return "the image name is longer than 255 bytes";
        if (name[0] == '.')
                return "the image name starts with a dot";
        if (!utf8_is_valid(name))
                return "the image name is not valid UTF-8";
        if (string_has_control(name))
                return "the image name contains control characters";
        if (strchr(name, '/'))
                return "the image name contains a slash";
        return NULL;
}

static int stamp_dir(int fd, uint64_t *stamp, unsigned depth) {
        _cleanup_closedir_ DIR *d = NULL;
        struct dirent *de;
        struct stat st;

        if (depth > STAMP_DEPTH_MAX) {
                safe_close(fd);
                return -ELOOP;
        }
        if (fstat(fd, &st) < 0) {
                safe_close(fd);
                return negative_errno();
        }
        stamp_add_stat(stamp, &st);
        d = fdopendir(fd);
        if (!d) {
                safe_close(fd);
                return negative_errno();
        }
        while ((de = readdir(d))) {
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue; /* raced removal: the next refresh sees the new state */
                stamp_add_string(stamp, de->d_name);
                stamp_add_stat(stamp, &st);
                if (S_ISDIR(st.st_mode)) {
                        int sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
                        if (sub < 0)
                                continue;
                        if (st.st_dev != 0) {
                                struct stat sst;
                                /* Do not walk into other file systems (a mount below the image). */
                                if (fstat(sub, &sst) < 0 || sst.st_dev != st.st_dev) {
                                        safe_close(sub);
                                        continue;
                                }
                        }
                        (void) stamp_dir(sub, stamp, depth + 1);
                }
        }
        return 0;
}

/* A hash over the identity (inode, size, times) and name of every entry below a directory:
 * any edit inside the tree changes it, so a refresh notices edited directory images.
 * Symlinks are not followed, other file systems not entered. */
static int image_directory_stamp(int dir_fd, uint64_t *ret) {
        uint64_t stamp = STAMP_INIT;
        int fd, r;

        fd = fcntl(dir_fd, F_DUPFD_CLOEXEC, 3);
        if (fd < 0)
                return negative_errno();
        /* dir_fd may be O_PATH: read through a real open of it. */
        {
                int rd = fd_reopen(fd, O_RDONLY | O_DIRECTORY | O_NONBLOCK);
                safe_close(fd);
                if (rd < 0)
                        return rd;
                fd = rd;
        }
        r = stamp_dir(fd, &stamp, 0);
        if (r < 0)
                return r;
        *ret = stamp;
        return 0;
}

/* The verity sidecars of a raw image are part of its identity: a new signature, a removed
 * hash tree or a replaced root hash change the verdict. */
static uint64_t sidecar_stamp(int root_fd, const char *dir, const char *name) {
        static const char *const suffixes[] = { ".roothash", ".verity", ".roothash.p7s" };
        uint64_t stamp = STAMP_INIT;

        for (size_t i = 0; i < ELEMENTSOF(suffixes); i++) {
                _cleanup_free_ char *p = NULL;
                _cleanup_close_ int fd = -EBADF;
                struct stat st;

                if (asprintf(&p, "%s/%s%s", dir, name, suffixes[i]) < 0)
                        p = NULL;
                fd = p ? openat_resolve(root_fd, p, O_PATH, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS) : -ENOMEM;
                if (fd >= 0 && fstat(fd, &st) == 0)
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

static bool is_symlink_at(int dir_fd, const char *name) {
        struct stat st;
        return fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) >= 0 && S_ISLNK(st.st_mode);
}

static int compare_images(const void *a, const void *b) {
        const Image *x = a, *y = b;
        int c = version_compare(x->name, y->name);
        return c != 0 ? c : strcmp(x->name, y->name);
}

static int refuse(Image *img, ImageVerdict v, const char *fmt, ...) _printf_(3, 4);
static int refuse_by_policy(Image *img, const char *fmt, ...) _printf_(2, 3);
static int refuse(Image *img, ImageVerdict v, const char *fmt, ...) {
        va_list ap;

        free(img->reason);
        va_start(ap, fmt);
        if (vasprintf(&img->reason, fmt, ap) < 0)
                img->reason = NULL;
        va_end(ap);
        img->verdict = v;
        image_release(img);
        return 0;
}

static int refuse_by_policy(Image *img, const char *fmt, ...) {
        va_list ap;

        free(img->reason);
        va_start(ap, fmt);
        if (vasprintf(&img->reason, fmt, ap) < 0)
                img->reason = NULL;
        va_end(ap);
        img->verdict = IMAGE_REFUSED;
        img->refused_by_policy = true;
        image_release(img);
        return 0;
}

static int list_add(ImageList *l, const char *name, const char *root_prefix, const char *dir, const char *entry,
                    const struct stat *st, Image **ret) {
        Image *n = realloc(l->images, sizeof(Image) * (l->n + 1));

        if (!n)
                return -ENOMEM;
        l->images = n;
        n = &l->images[l->n++];
        *n = (Image) { .root_fd = -EBADF, .st = *st, .kind = S_ISDIR(st->st_mode) ? IMAGE_DIRECTORY : IMAGE_UNKNOWN };
        n->name = strdup(name);
        n->rel = path_join(dir, entry);
        if (asprintf(&n->path, "%s%s%s/%s", root_prefix, streq(root_prefix, "/") ? "" : "/", dir, entry) < 0)
                n->path = NULL;
        if (!n->name || !n->rel || !n->path)
                return -ENOMEM;
        *ret = n;
        return 0;
}

int image_discover(int root_fd, const char *root_prefix, char *const *search_dirs, ImageList *ret) {
        _cleanup_image_list_ ImageList l = {};

        STRV_FOREACH(sd, search_dirs) {
                _cleanup_closedir_ DIR *d = NULL;
                struct dirent *de;
                int dfd;

                dfd = open_directory_at(root_fd, *sd, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
                if (dfd < 0) {
                        if (dfd == -ENOENT || dfd == -ENOTDIR)
                                continue;
                        return dfd;
                }
                d = fdopendir(dfd);
                if (!d) {
                        safe_close(dfd);
                        return negative_errno();
                }

                while ((de = readdir(d))) {
                        _cleanup_free_ char *name = NULL, *rel = NULL;
                        _cleanup_close_ int fd = -EBADF;
                        struct stat st = {};
                        const char *invalid;
                        bool seen = false, raw;
                        Image *img;
                        int r;

                        if (de->d_name[0] == '.' || is_sidecar(de->d_name))
                                continue;
                        /* What the entry is once resolved inside the root: a symlink to an
                         * image elsewhere in the root is that image, one pointing out of it
                         * ends inside it too (RESOLVE_IN_ROOT). */
                        rel = path_join(*sd, de->d_name);
                        if (!rel)
                                return -ENOMEM;
                        fd = openat_resolve(root_fd, rel, O_PATH, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
                        if (fd >= 0 && fstat(fd, &st) < 0)
                                fd = safe_close(fd);

                        raw = endswith(de->d_name, ".raw");
                        if (fd >= 0 && S_ISDIR(st.st_mode))
                                name = strdup(de->d_name);
                        else if (raw)
                                name = strndup(de->d_name, strlen(de->d_name) - 4);
                        else if (fd < 0 && is_symlink_at(dirfd(d), de->d_name))
                                /* A symlink that leads nowhere inside the root: it may have
                                 * meant a directory image; say why it is not one. */
                                name = strdup(de->d_name);
                        else
                                continue; /* neither NAME.raw nor a directory: not an image */
                        if (!name)
                                return -ENOMEM;

                        for (size_t i = 0; i < l.n; i++)
                                if (streq(l.images[i].name, name))
                                        seen = true;
                        if (seen)
                                continue; /* an earlier search directory has it */

                        r = list_add(&l, name, root_prefix, *sd, de->d_name, &st, &img);
                        if (r < 0)
                                return r;

                        invalid = image_name_invalid_reason(name);
                        if (invalid)
                                refuse(img, IMAGE_REFUSED, "%s", invalid);
                        else if (fd < 0)
                                refuse(img, IMAGE_REFUSED, "cannot open %s: %s", de->d_name,
                                       fd == -ENOENT ? "it is a symbolic link to nothing" : strerror(-fd));
                        else if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
                                refuse(img, IMAGE_REFUSED, "%s is %s, not an image file or directory", de->d_name,
                                       inode_type_name(st.st_mode));
                        else if (img->kind == IMAGE_DIRECTORY) {
                                if (image_directory_stamp(fd, &img->stamp) < 0)
                                        img->stamp = 0; /* unreadable: the probe says why */
                        } else
                                img->stamp = sidecar_stamp(root_fd, *sd, name);
                }
        }

        if (l.n > 0)
                qsort(l.images, l.n, sizeof(Image), compare_images);
        *ret = l;
        l = (ImageList) {};
        return 0;
}

static int dir_of(const char *rel, char **ret) {
        const char *slash = strrchr(rel, '/');

        *ret = slash ? strndup(rel, slash - rel) : strdup(".");
        return *ret ? 0 : -ENOMEM;
}

/* Opens a raw image: recognises it, finds its verity data, applies the policy, attaches it,
 * verifies it and mounts it (detached) into img->root_fd. */
static int probe_raw(Image *img, const ProbeContext *ctx) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *type = NULL, *msg = NULL, *dir = NULL, *dir_display = NULL, *why = NULL;
        _cleanup_verity_source_ VeritySource v = { .hash_fd = -EBADF };
        __attribute__((cleanup(verity_device_done))) VerityDevice vd = { .fd = -EBADF };
        uint64_t offset = 0, size = 0;
        ImageKind fs_kind;
        DiskLayout layout = {};
        struct stat st;
        int r;

        r = open_regular_at(ctx->root_fd, img->rel, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS, &fd, &st);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return refuse(img, IMAGE_REFUSED, "cannot open image: %s", READ_ERROR_STRING(r, st.st_mode, 0));
        img->st = st;
        r = dir_of(img->rel, &dir);
        if (r < 0)
                return r;
        r = dir_of(img->path, &dir_display);
        if (r < 0)
                return r;

        r = disk_probe_type(fd, 0, 0, true, &type);
        if (r == -ENOMEM)
                return r;
        if (streq_ptr(type, "gpt")) {
                img->kind = IMAGE_DDI;
                r = disk_layout(fd, (uint64_t) img->st.st_size, &layout, &why);
                if (r == -ENOMEM)
                        return r;
                if (r < 0)
                        return refuse(img, IMAGE_REFUSED, "%s", why);
                img->usr_partition = layout.usr;
                offset = layout.data.offset;
                size = layout.data.size;
                free(type);
                r = disk_probe_type(fd, offset, size, false, &type);
                if (r == -ENOMEM)
                        return r;
                fs_kind = image_kind_from_fstype(type);
                if (fs_kind == IMAGE_UNKNOWN)
                        return refuse(img, IMAGE_REFUSED,
                                      "the %s partition holds %s%s%s, not erofs, squashfs, ext4, btrfs or xfs",
                                      layout.usr ? "usr" : "root", type ? "'" : "no file system", strempty(type),
                                      type ? "'" : "");
                r = disk_verity(fd, img->path, ctx->root_fd, dir, img->name, &layout, &v, &why);
        } else {
                fs_kind = img->kind = image_kind_from_fstype(type);
                if (img->kind == IMAGE_UNKNOWN) {
                        if (type)
                                return refuse(img, IMAGE_REFUSED,
                                              "unsupported content '%s' (expected an erofs, squashfs, ext4, btrfs or xfs file system or a GPT disk image)",
                                              type);
                        return refuse(img, IMAGE_REFUSED,
                                      "no file system recognised (expected erofs, squashfs, ext4, btrfs or xfs; the image may be truncated or corrupt)");
                }
                r = verity_find_sidecars(ctx->root_fd, dir, dir_display, img->name, &v, &why);
        }
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return refuse(img, IMAGE_REFUSED, "%s", strna(why));
        img->fstype = strdup(image_kind_fstype(fs_kind));
        if (!img->fstype)
                return -ENOMEM;

        /* The policy, before anything is attached. */
        if (ctx->policy >= IMAGE_POLICY_VERITY && !v.roothash)
                return refuse_by_policy(img, "ImagePolicy=%s requires verity data, the image has none",
                              image_policy_to_string(ctx->policy));
        if (v.signature) {
                r = verity_check_signature(&v, ctx->root_fd, ctx->cert_dir, ctx->cert_display, &why);
                if (r < 0)
                        return r;
                if (r == 0)
                        return refuse_by_policy(img, "signature check failed: %s", strna(why));
                img->signed_valid = true;
        } else if (ctx->policy == IMAGE_POLICY_SIGNED)
                return refuse_by_policy(img, "ImagePolicy=signed requires a root hash signature, the image has none (%s)",
                              v.roothash ? "verity without signature" : "no verity data");

        r = disk_check_size(fd, offset, fs_kind, size ?: (uint64_t) img->st.st_size, &msg);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return refuse(img, IMAGE_REFUSED, "%s", msg ?: "cannot read the superblock");

        r = loopdev_attach(fd, offset, size, &img->loop);
        if (r < 0)
                return refuse(img, IMAGE_REFUSED, "cannot attach a loop device: %s", strerror(-r));

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
                if (r == -ESTALE || r == -EXDEV)
                        return refuse(img, IMAGE_REFUSED, "wrong media on /dev/loop%i: %s", img->loop->nr, strna(msg));
                return refuse(img, IMAGE_REFUSED, "cannot mount %s file system: %s%s%s", img->fstype, strerror(-r),
                              msg ? ": " : "", msg ?: "");
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

static int probe_directory(Image *img, const ProbeContext *ctx) {
        _cleanup_close_ int fd = -EBADF;
        struct stat st;

        if (ctx->policy != IMAGE_POLICY_OPEN)
                return refuse_by_policy(img, "directories are only allowed with ImagePolicy=open (policy is %s)",
                              image_policy_to_string(ctx->policy));
        fd = openat_resolve(ctx->root_fd, img->rel, O_PATH | O_DIRECTORY, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
        if (fd < 0)
                return refuse(img, IMAGE_REFUSED, "cannot open directory: %s", strerror(-fd));
        if (fstat(fd, &st) < 0)
                return refuse(img, IMAGE_REFUSED, "cannot stat directory: %m");
        img->st = st;
        /* A detached bind of the directory, made here in the caller's namespace: the staging
         * worker attaches it like an image mount (a mount of another namespace cannot be
         * cloned from inside the worker's). */
        img->root_fd = open_tree(fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
        if (img->root_fd < 0)
                return refuse(img, IMAGE_REFUSED, "cannot open directory: %m");
        return 0;
}

/* Whether 'path' below the image root is a directory, resolved without leaving the image and
 * without following symlinks (a symlink there could lead the overlay out of the image). */
static bool image_has_dir(int root_fd, const char *path) {
        _cleanup_close_ int fd = openat_resolve(root_fd, path, O_PATH | O_DIRECTORY,
                                                RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
        return fd >= 0;
}

static bool image_has_entry(int root_fd, const char *path) {
        _cleanup_close_ int fd = openat_resolve(root_fd, path, O_PATH | O_NOFOLLOW, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS);
        return fd >= 0;
}

int image_probe(Image *img, const ProbeContext *ctx) {
        _cleanup_free_ char *release_path = NULL, *text = NULL, *mismatch = NULL;
        _cleanup_release_ Release rel = {};
        const char *usr_prefix;
        mode_t mode = 0;
        int r;

        if (img->verdict == IMAGE_REFUSED)
                return 0; /* refused at discovery (name, type) */
        img->verdict = IMAGE_UNPROBED;
        img->refused_by_policy = false;

        if (img->kind == IMAGE_DIRECTORY)
                r = probe_directory(img, ctx);
        else
                r = probe_raw(img, ctx);
        if (r < 0 || img->verdict == IMAGE_REFUSED)
                return r;

        /* A usr partition is mounted as the image's usr/. */
        usr_prefix = img->usr_partition ? "" : "usr/";

        /* The release file must carry this image's own name (as systemd-sysext requires).  It
         * is resolved inside the image, never through a symlink out of it. */
        if (asprintf(&release_path, "%slib/extension-release.d/extension-release.%s", usr_prefix, img->name) < 0)
                return -ENOMEM;
        r = read_file_at(img->root_fd, release_path, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS, RELEASE_FILE_MAX, &text,
                         NULL, &mode);
        if (r == -ENOMEM)
                return r;
        if (r == -ENOENT)
                return refuse(img, IMAGE_REFUSED, "no extension-release file: %s is missing", release_path);
        if (r < 0)
                return refuse(img, IMAGE_REFUSED, "%s %s", release_path, READ_ERROR_STRING(r, mode, RELEASE_FILE_MAX));
        r = release_parse(text, &rel);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return refuse(img, IMAGE_REFUSED, "cannot parse %s: %s", release_path, strerror(-r));

        if (image_has_entry(img->root_fd, img->usr_partition ? "lib/os-release" : "usr/lib/os-release"))
                return refuse(img, IMAGE_REFUSED, "ships usr/lib/os-release, which an extension must not replace");

        r = release_match(ctx->host, &rel, &mismatch);
        if (r < 0)
                return r;
        if (r == 0)
                return refuse(img, IMAGE_INCOMPATIBLE, "%s", mismatch);

        img->hierarchies = 0;
        for (size_t i = 0; ctx->hierarchies && ctx->hierarchies[i] && i < HIERARCHIES_MAX; i++) {
                const char *h = ctx->hierarchies[i], *in_image = h;
                _cleanup_free_ char *marker = NULL;

                if (img->usr_partition) {
                        if (!streq(h, "usr"))
                                continue;
                        in_image = ".";
                }
                if (!image_has_dir(img->root_fd, in_image))
                        continue;
                /* The marker path is sysextd's own (the top layer of every tree carries it). */
                marker = path_join(in_image, OVERLAY_MARKER_DIR);
                if (!marker)
                        return -ENOMEM;
                if (image_has_entry(img->root_fd, marker))
                        return refuse(img, IMAGE_REFUSED, "ships %s/%s, which is reserved for sysextd's own marker", h,
                                      OVERLAY_MARKER_DIR);
                img->hierarchies |= 1u << i;
        }

        img->verdict = IMAGE_COMPATIBLE;
        return 0;
}

static void fingerprint_path(int root_fd, const char *path, uint64_t *fp) {
        _cleanup_close_ int fd = openat_resolve(root_fd, path, O_PATH, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
        struct stat st;

        stamp_add_string(fp, path);
        if (fd >= 0 && fstat(fd, &st) >= 0)
                stamp_add_stat(fp, &st);
        else
                stamp_add_u64(fp, 0);
}

int image_discovery_fingerprint(int root_fd, char *const *search_dirs, const char *trusted_dir, uint64_t *ret) {
        uint64_t fp = STAMP_INIT;
        char *const dirs[] = { (char *) trusted_dir, NULL };

        /* What a listing depends on, without reading any content: every entry of the search
         * directories and the trusted certificates, and the host's release files.  For a
         * directory image, its own inode and its release file (not everything in it). */
        fingerprint_path(root_fd, "usr/lib/os-release", &fp);
        fingerprint_path(root_fd, "etc/os-release", &fp);
        for (int pass = 0; pass < 2; pass++)
                STRV_FOREACH(sd, pass == 0 ? search_dirs : dirs) {
                        _cleanup_closedir_ DIR *d = NULL;
                        struct dirent *de;
                        int dfd;

                        stamp_add_string(&fp, *sd);
                        dfd = open_directory_at(root_fd, *sd, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
                        if (dfd < 0)
                                continue;
                        d = fdopendir(dfd);
                        if (!d) {
                                safe_close(dfd);
                                continue;
                        }
                        while ((de = readdir(d))) {
                                _cleanup_free_ char *p = NULL, *rel = NULL;

                                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                                        continue;
                                p = path_join(*sd, de->d_name);
                                if (!p)
                                        return -ENOMEM;
                                fingerprint_path(root_fd, p, &fp);
                                if (pass == 0 && asprintf(&rel, "%s/usr/lib/extension-release.d/extension-release.%s", p,
                                                          de->d_name) >= 0)
                                        fingerprint_path(root_fd, rel, &fp);
                        }
                }
        *ret = fp == 0 ? 1 : fp;
        return 0;
}
