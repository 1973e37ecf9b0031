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
#include <dirent.h>
#include <ftw.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>

#include "image.h"
#include "missing.h"
#include "util.h"

static const char *const kind_table[_IMAGE_KIND_MAX] = {
        [IMAGE_DIRECTORY] = "directory",
        [IMAGE_EROFS] = "erofs",
        [IMAGE_SQUASHFS] = "squashfs",
        [IMAGE_EXT4] = "ext4",
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

static void image_done(Image *i) {
        free(i->name);
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

static uint64_t stamp_value;

static void stamp_mix(uint64_t v) {
        /* FNV-1a over the 8 bytes of v. */
        for (int i = 0; i < 8; i++) {
                stamp_value ^= (v >> (8 * i)) & 0xff;
                stamp_value *= 0x100000001b3ULL;
        }
}

static int stamp_entry(const char *fpath, const struct stat *st, int typeflag, struct FTW *ftw) {
        stamp_mix(st->st_ino);
        stamp_mix(st->st_size);
        stamp_mix((uint64_t) st->st_ctim.tv_sec * 1000000000ULL + st->st_ctim.tv_nsec);
        stamp_mix((uint64_t) st->st_mtim.tv_sec * 1000000000ULL + st->st_mtim.tv_nsec);
        for (const char *c = fpath; *c; c++)
                stamp_mix((unsigned char) *c);
        return 0;
}

int image_directory_stamp(const char *path, uint64_t *ret) {
        /* nftw() has no user data pointer; this runs under the transition lock only. */
        stamp_value = 0xcbf29ce484222325ULL;
        if (nftw(path, stamp_entry, 16, FTW_PHYS | FTW_MOUNT) < 0)
                return negative_errno();
        *ret = stamp_value;
        return 0;
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
                        if (n->kind == IMAGE_DIRECTORY && image_directory_stamp(n->path, &n->stamp) < 0)
                                n->stamp = 0; /* unreadable: the probe says why */
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

static int detect_kind(int fd, ImageKind *ret, char **ret_type) {
        blkid_probe pr;
        const char *type = NULL;
        int r;

        pr = blkid_new_probe();
        if (!pr)
                return -ENOMEM;
        if (blkid_probe_set_device(pr, fd, 0, 0) < 0) {
                blkid_free_probe(pr);
                return -EIO;
        }
        blkid_probe_enable_superblocks(pr, 1);
        blkid_probe_set_superblocks_flags(pr, BLKID_SUBLKS_TYPE);
        blkid_probe_enable_partitions(pr, 1);
        r = blkid_do_safeprobe(pr);
        if (r == 0 && blkid_probe_lookup_value(pr, "TYPE", &type, NULL) < 0)
                /* A partition table (a disk image) is reported by its type. */
                (void) blkid_probe_lookup_value(pr, "PTTYPE", &type, NULL);
        *ret = IMAGE_UNKNOWN;
        if (type) {
                if (streq(type, "erofs"))
                        *ret = IMAGE_EROFS;
                else if (streq(type, "squashfs"))
                        *ret = IMAGE_SQUASHFS;
                else if (streq(type, "ext4") || streq(type, "ext3") || streq(type, "ext2"))
                        *ret = IMAGE_EXT4;
                *ret_type = strdup(type);
        } else
                *ret_type = NULL;
        blkid_free_probe(pr);
        return r < 0 ? -EIO : 0;
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
static int check_size(int fd, ImageKind kind, uint64_t file_size, char **ret_message) {
        uint8_t sb[2048];
        uint64_t need = 0;
        ssize_t n;

        n = pread(fd, sb, sizeof(sb), 0);
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
        struct open_how how = {
                .flags = flags | O_CLOEXEC,
                .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
        };
        int fd = syscall(SYS_openat2, dir_fd, path, &how, sizeof(how));
        return fd < 0 ? negative_errno() : fd;
}

int image_probe(Image *img, const Release *host, char *const *hierarchies, unsigned mount_attrs) {
        _cleanup_free_ char *release_path = NULL, *text = NULL, *mismatch = NULL;
        _cleanup_release_ Release rel = {};
        _cleanup_close_ int release_fd = -EBADF;
        struct stat st;
        int r;

        img->verdict = IMAGE_UNPROBED;

        if (img->kind == IMAGE_DIRECTORY) {
                /* A detached bind of the directory, made here in the caller's namespace: the
                 * staging worker attaches it like an image mount (a mount of another namespace
                 * cannot be cloned from inside the worker's). */
                img->root_fd = open_tree(AT_FDCWD, img->path, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
                if (img->root_fd < 0)
                        return refuse(img, IMAGE_REFUSED, "cannot open directory: %m");
        } else {
                _cleanup_close_ int fd = -EBADF;
                _cleanup_free_ char *type = NULL, *msg = NULL;
                const char *fstype;

                fd = open(img->path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
                if (fd < 0)
                        return refuse(img, IMAGE_REFUSED, "cannot open image: %m");
                if (fstat(fd, &img->st) < 0)
                        return refuse(img, IMAGE_REFUSED, "cannot stat image: %m");
                r = detect_kind(fd, &img->kind, &type);
                if (r == -ENOMEM)
                        return r;
                if (img->kind == IMAGE_UNKNOWN) {
                        if (type)
                                return refuse(img, IMAGE_REFUSED,
                                              "unsupported content '%s' (expected an erofs, squashfs or ext4 file system)", type);
                        return refuse(img, IMAGE_REFUSED,
                                      "no file system recognised (expected erofs, squashfs or ext4; the image may be truncated or corrupt)");
                }
                fstype = img->kind == IMAGE_EXT4 ? "ext4" : image_kind_to_string(img->kind);

                r = check_size(fd, img->kind, img->st.st_size, &msg);
                if (r == -ENOMEM)
                        return r;
                if (r < 0)
                        return refuse(img, IMAGE_REFUSED, "%s", msg);

                r = loopdev_attach(fd, &img->loop);
                if (r < 0) {
                        errno = -r;
                        return refuse(img, IMAGE_REFUSED, "cannot attach a loop device: %m");
                }
                r = loopdev_mount(img->loop, fstype, mount_attrs, &img->root_fd, &msg);
                if (r < 0) {
                        errno = -r;
                        if (r == -ESTALE || r == -EXDEV)
                                return refuse(img, IMAGE_REFUSED, "wrong media on /dev/loop%i: %s", img->loop->nr, strna(msg));
                        return refuse(img, IMAGE_REFUSED, "cannot mount %s file system: %m%s%s", fstype,
                                      msg ? ": " : "", msg ?: "");
                }
        }

        /* The release file must carry this image's own name (as systemd-sysext requires). */
        if (asprintf(&release_path, "usr/lib/extension-release.d/extension-release.%s", img->name) < 0)
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

        if (fstatat(img->root_fd, "usr/lib/os-release", &st, AT_SYMLINK_NOFOLLOW) == 0)
                return refuse(img, IMAGE_REFUSED,
                              "ships usr/lib/os-release, which an extension must not replace");

        r = release_match(host, &rel, &mismatch);
        if (r < 0)
                return r;
        if (r == 0)
                return refuse(img, IMAGE_INCOMPATIBLE, "%s", mismatch);

        img->hierarchies = 0;
        for (size_t i = 0; hierarchies && hierarchies[i] && i < HIERARCHIES_MAX; i++)
                if (fstatat(img->root_fd, hierarchies[i], &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode))
                        img->hierarchies |= 1u << i;

        img->verdict = IMAGE_COMPATIBLE;
        return 0;
}
