/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Image discovery and probing.
 *
 * Everything below the root is someone else's: every path is resolved from the root's fd
 * with openat2(RESOLVE_IN_ROOT), so an absolute or ../ symlink stays inside the root, and
 * fds are passed on rather than paths re-opened.
 *
 * Discovery reads directories and looks at the type of entries (O_PATH); of a raw image it
 * reads only the root hash in its NAME.roothash sidecar (size-limited, a regular file only),
 * which tells a refresh whether a new file is a copy of the image merged.  A version
 * directory (NAME.v, systemd.v(7)) gives one entry, picked by its name alone; that entry is
 * then judged as an entry of a search directory is (a symlink that leads nowhere inside the
 * root, or to no image, makes the image refused, naming NAME.v/ENTRY) and never replaced by
 * an older version.  With every version asked for (image_discover_ex(), for a rollback or a pin,
 * generation.h), the other entries for this machine that open as images of the right type are
 * listed too, each with its version, marked as not picked.  Probing then, per image:
 *   directory: a detached bind of it (open_tree on the resolved fd), its extension-release;
 *   raw file:  reopened for reading only once it is known to be a regular file; the file
 *              system recognised by content, never by suffix (an erofs superblock with no
 *              other signature from its first page and the two places past it that could
 *              hold one, disk_fast_type_parts(); anything else by libblkid),
 *              its size checked against the file's; a plain erofs image (no verity) mounted
 *              detached straight from the open file where the kernel can (file-backed
 *              erofs), otherwise a loop device attached and the file system mounted
 *              detached from it and verified (loopdev.c); then the release file read
 *              through the mount fd.
 * Many images at once (image_probe_begin(), image_probe_mounted_all()): each up to its mount
 * on the caller's thread, then the file-backed mounts of the plain erofs images, and all that
 * is read through them, on up to four threads (CPUs allowing); what the kernel cannot mount
 * from its file gets its loop device after that, on the caller's thread, in order.  The
 * threads touch only their images and the files they were given, and block every signal.
 * A probed raw image holds a detached mount (and its loop device, if it needed one); they go
 * away when the image is released unless the mount was cloned into a tree first (then the
 * tree keeps them).
 */
#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>

#include "disk.h"
#include "fd-util.h"
#include "fileio.h"
#include "image.h"
#include "missing.h"
#include "mutable.h"
#include "overlay.h"
#include "testhook.h"
#include "transition.h"
#include "unit-files.h"
#include "util.h"

#define RELEASE_FILE_MAX (64 * 1024)
#define STAMP_DEPTH_MAX 64

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
        return string_table_find(verdict_table, _IMAGE_VERDICT_MAX, s);
}

static const char *const backing_table[_IMAGE_BACKING_MAX] = {
        [IMAGE_BACKING_NONE] = "none",
        [IMAGE_BACKING_DIRECTORY] = "directory",
        [IMAGE_BACKING_LOOP] = "loop",
        [IMAGE_BACKING_FILE] = "file",
};

const char *image_backing_to_string(ImageBacking b) {
        return b >= 0 && b < _IMAGE_BACKING_MAX ? backing_table[b] : "none";
}

int image_backing_from_string(const char *s) {
        return string_table_find(backing_table, _IMAGE_BACKING_MAX, s);
}

static const char *const policy_table[_IMAGE_POLICY_MAX] = {
        [IMAGE_POLICY_OPEN] = "open",
        [IMAGE_POLICY_VERITY] = "verity",
        [IMAGE_POLICY_SIGNED] = "signed",
        [IMAGE_POLICY_DENY] = "deny",
};

const char *image_policy_to_string(ImagePolicy p) {
        return p >= 0 && p < _IMAGE_POLICY_MAX ? policy_table[p] : NULL;
}

int image_policy_from_string(const char *s) {
        return string_table_find(policy_table, _IMAGE_POLICY_MAX, s);
}

/* The most an image partition may be under a set of systemd partition policy flags. */
static int policy_of_flags(const char *flags) {
        _cleanup_strv_free_ char **l = NULL;
        int level = IMAGE_POLICY_DENY;

        if (strv_split(flags, "+", &l) < 0)
                return -ENOMEM;
        STRV_FOREACH(f, l) {
                int v;
                if (STR_IN_SET(*f, "open", "unprotected"))
                        v = IMAGE_POLICY_OPEN;
                else if (streq(*f, "verity"))
                        v = IMAGE_POLICY_VERITY;
                else if (streq(*f, "signed"))
                        v = IMAGE_POLICY_SIGNED;
                else if (STR_IN_SET(*f, "encrypted", "unused", "absent", "ignore", "read-only-on", "read-only-off", "growfs-on",
                                    "growfs-off"))
                        continue;
                else
                        return -EINVAL;
                /* Lower is more permissive. */
                if (v < level)
                        level = v;
        }
        return level;
}

int image_policy_parse(const char *s) {
        _cleanup_strv_free_ char **parts = NULL;
        int root = -1, usr = -1, dflt = IMAGE_POLICY_DENY, r;

        if (!s || !utf8_is_valid(s) || string_has_control(s))
                return -EINVAL;
        r = image_policy_from_string(s);
        if (r >= 0)
                return r;
        if (streq(s, "*"))
                return IMAGE_POLICY_OPEN;
        if (STR_IN_SET(s, "-", "~"))
                return IMAGE_POLICY_DENY;
        if (strv_split(s, ":", &parts) < 0)
                return -ENOMEM;
        if (strv_length(parts) == 0)
                return -EINVAL;
        STRV_FOREACH(p, parts) {
                const char *eq = strchr(*p, '=');
                _cleanup_free_ char *designator = NULL;
                int level;

                if (!eq)
                        return -EINVAL;
                designator = strndup(*p, eq - *p);
                if (!designator)
                        return -ENOMEM;
                level = policy_of_flags(eq + 1);
                if (level < 0)
                        return level;
                if (isempty(designator))
                        dflt = level;
                else if (streq(designator, "root"))
                        root = level;
                else if (streq(designator, "usr"))
                        usr = level;
                /* Other partitions do not occur in extension images. */
        }
        if (root < 0)
                root = dflt;
        if (usr < 0)
                usr = dflt;
        /* A partition that may only be absent does not make the other stricter. */
        if (root == IMAGE_POLICY_DENY)
                return usr;
        if (usr == IMAGE_POLICY_DENY)
                return root;
        return root > usr ? root : usr;
}

void image_release(Image *img) {
        img->root_fd = safe_close(img->root_fd);
        img->loop = loopdev_free(img->loop);
}

void image_done(Image *img) {
        strv_free(img->restart_units);
        strv_free(img->reload_or_restart_units);
        strv_free(img->shipped_units);
        strv_free(img->wanted_units);
        free(img->name);
        free(img->fstype);
        free(img->path);
        free(img->rel);
        free(img->version);
        free(img->reason);
        free(img->roothash);
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
 * hash tree or a replaced root hash change the verdict.  *ret_found: which of them are there,
 * as bits 1 << SIDECAR_*. */
enum { SIDECAR_ROOTHASH, SIDECAR_VERITY, SIDECAR_SIGNATURE };

/* The entries of a search directory as one readdir() pass saw them: discovery walks them in
 * that order, and a sidecar whose name is not among them is not looked up (the common image
 * has none: three path lookups per image saved). */
typedef struct DirListing {
        char **names;  /* in readdir() order */
        char **sorted; /* the same strings, sorted */
        size_t n;
} DirListing;

static void dir_listing_done(DirListing *l) {
        strv_free(l->names);
        free(l->sorted);
        *l = (DirListing) {};
}

static int compare_name(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

static int dir_listing_read(DIR *d, DirListing *ret) {
        _cleanup_(dir_listing_done) DirListing l = {};
        struct dirent *de;

        for (;;) {
                errno = 0;
                de = readdir(d);
                if (!de)
                        break;
                if (strv_extend(&l.names, de->d_name) < 0)
                        return -ENOMEM;
                l.n++;
        }
        if (errno != 0)
                return negative_errno();
        l.sorted = calloc(l.n + 1, sizeof(char *));
        if (!l.sorted)
                return -ENOMEM;
        if (l.n > 0) {
                memcpy(l.sorted, l.names, l.n * sizeof(char *));
                qsort(l.sorted, l.n, sizeof(char *), compare_name);
        }
        *ret = l;
        l = (DirListing) {};
        return 0;
}

/* A directory that ignores case (casefold): a sidecar may be listed in other case than its
 * lookup asks for, so the listing cannot say it is not there. */
static bool dir_casefold(int fd) {
        int flags = 0;

        return ioctl(fd, FS_IOC_GETFLAGS, &flags) >= 0 && (flags & FS_CASEFOLD_FL);
}

static bool dir_listing_has(const DirListing *l, const char *name) {
        return l->n > 0 && bsearch(&name, l->sorted, l->n, sizeof(char *), compare_name);
}

/* listing: the entries of dir, or NULL: look each sidecar up. */
static uint64_t sidecar_stamp(int root_fd, const char *dir, const char *name, const DirListing *listing, unsigned *ret_found) {
        static const char *const suffixes[] = {
                [SIDECAR_ROOTHASH] = ".roothash",
                [SIDECAR_VERITY] = ".verity",
                [SIDECAR_SIGNATURE] = ".roothash.p7s",
        };
        uint64_t stamp = STAMP_INIT;

        *ret_found = 0;

        for (size_t i = 0; i < ELEMENTSOF(suffixes); i++) {
                _cleanup_free_ char *p = NULL;
                _cleanup_close_ int fd = -EBADF;
                struct stat st;

                if (listing) {
                        _cleanup_free_ char *file = strjoin3(name, suffixes[i], "");

                        if (file && !dir_listing_has(listing, file)) {
                                stamp_add_u64(&stamp, 0);
                                continue;
                        }
                }
                if (asprintf(&p, "%s/%s%s", dir, name, suffixes[i]) < 0)
                        p = NULL;
                fd = p ? openat_resolve(root_fd, p, O_PATH, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS) : -ENOMEM;
                if (fd >= 0 && fstat(fd, &st) == 0) {
                        stamp_add_stat(&stamp, &st);
                        *ret_found |= 1u << i;
                } else
                        stamp_add_u64(&stamp, 0);
        }
        return stamp;
}

/* "var/lib/extensions/foo.sysext.raw" -> "var/lib/extensions", "foo.sysext": the directory
 * and the base name of the verity sidecars (foo.sysext.roothash, ...). */
static int sidecar_base(const char *rel, char **ret_dir, char **ret_base) {
        const char *slash = strrchr(rel, '/'), *file = slash ? slash + 1 : rel;

        *ret_dir = slash ? strndup(rel, slash - rel) : strdup(".");
        *ret_base = endswith(file, ".raw") ? strndup(file, strlen(file) - strlen(".raw")) : strdup(file);
        return *ret_dir && *ret_base ? 0 : -ENOMEM;
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
        int c;

        if (x->klass != y->klass)
                return x->klass < y->klass ? -1 : 1;
        c = version_compare(x->name, y->name);
        return c != 0 ? c : strcmp(x->name, y->name);
}

int image_list_append(ImageList *a, ImageList *b) {
        Image *n;

        if (b->n == 0)
                return 0;
        n = realloc(a->images, sizeof(Image) * (a->n + b->n));
        if (!n)
                return -ENOMEM;
        memcpy(n + a->n, b->images, sizeof(Image) * b->n);
        a->images = n;
        a->n += b->n;
        free(b->images);
        *b = (ImageList) {};
        return 0;
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

/* "cannot open ENTRY: it is a symbolic link to TARGET, which does not exist ...": the same
 * words for an entry of a search directory and one of a version directory. */
static int dangling_reason(const char *shown, const char *target, char **ret) {
        if (asprintf(ret, "cannot open %s: it is a symbolic link to %s, which does not exist %s", shown, target,
                     target[0] == '/' ? "under the root (links are resolved inside it)" : "inside the root") < 0) {
                *ret = NULL;
                return -ENOMEM;
        }
        return 0;
}

/* An entry that is a symlink leading nowhere inside the root: name where it points (resolved
 * inside the root, so an absolute target names a path under the root, not on the host).  Kept
 * raw, as every reason is: whatever shows it (log, terminal, bus) escapes it. */
static int refuse_dangling(Image *img, int dir_fd, const char *entry) {
        _cleanup_free_ char *reason = NULL;
        char target[PATH_MAX];
        ssize_t n = readlinkat(dir_fd, entry, target, sizeof(target) - 1);

        if (n < 0)
                return refuse(img, IMAGE_REFUSED, "cannot open %s: it is a symbolic link to nothing", entry);
        target[n] = '\0';
        if (dangling_reason(entry, target, &reason) < 0)
                return -ENOMEM;
        return refuse(img, IMAGE_REFUSED, "%s", reason);
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

static const char *class_suffix(ImageClass klass) {
        return klass == IMAGE_CLASS_CONFEXT ? ".confext" : ".sysext";
}

/* "foo.raw" and "foo.sysext.raw" -> "foo" (sysext; for confext ".confext.raw"). */
static char *raw_name(const char *entry, ImageClass klass) {
        size_t n = strlen(entry) - strlen(".raw"), k = strlen(class_suffix(klass));

        if (n > k && !strncmp(entry + n - k, class_suffix(klass), k))
                n -= k;
        return strndup(entry, n);
}

/* "foo" and "foo.sysext" -> "foo". */
static char *dir_name(const char *entry, ImageClass klass) {
        size_t n = strlen(entry), k = strlen(class_suffix(klass));

        if (n > k && endswith(entry, class_suffix(klass)))
                n -= k;
        return strndup(entry, n);
}

/* Architecture names of systemd (the _ARCH of NAME_VERSION_ARCH in a .v directory). */
static bool architecture_known(const char *a) {
        static const char *const archs[] = {
                "alpha", "arc", "arc-be", "arm", "arm-be", "arm64", "arm64-be", "cris", "ia64", "loongarch64",
                "m68k", "mips", "mips-le", "mips64", "mips64-le", "nios2", "parisc", "parisc64", "ppc", "ppc-le",
                "ppc64", "ppc64-le", "riscv32", "riscv64", "s390", "s390x", "sh", "sh64", "sparc", "sparc64",
                "tilegx", "x86", "x86-64",
        };
        for (size_t i = 0; i < ELEMENTSOF(archs); i++)
                if (streq(a, archs[i]))
                        return true;
        return false;
}

static const char *architecture_secondary(const char *native) {
        return streq(native, "x86-64") ? "x86" : streq(native, "arm64") ? "arm" : NULL;
}

typedef struct Candidate {
        char *entry;
        char *version;
        int arch_rank;  /* 2 native, 1 secondary, 0 none */
        long left, done; /* tries counter, -1: none */
} Candidate;

/* NAME_VERSION[_ARCH][+LEFT[-DONE]]SUFFIX, as systemd.v(7) has it.  0: not an entry of
 * this image or for another architecture than native (or its secondary one). */
static int parse_candidate(const char *entry, const char *name, const char *suffix, const char *native, Candidate *ret) {
        _cleanup_free_ char *mid = NULL;
        const char *rest = startswith(entry, name);
        char *plus, *us;
        long left = -1, done = -1;
        int rank = 0;
        size_t n;

        if (!rest || *rest != '_' || !endswith(rest, suffix))
                return 0;
        rest++;
        n = strlen(rest) - strlen(suffix);
        mid = strndup(rest, n);
        if (!mid)
                return -ENOMEM;
        plus = strrchr(mid, '+');
        if (plus) {
                char *end;
                errno = 0;
                left = strtol(plus + 1, &end, 10);
                if (errno || end == plus + 1 || left < 0)
                        return 0;
                if (*end == '-') {
                        const char *d = end + 1;
                        done = strtol(d, &end, 10);
                        if (errno || end == d || done < 0)
                                return 0;
                }
                if (*end)
                        return 0;
                *plus = 0;
        }
        us = strrchr(mid, '_');
        if (us && architecture_known(us + 1)) {
                if (streq(us + 1, native))
                        rank = 2;
                else if (streq_ptr(us + 1, architecture_secondary(native)))
                        rank = 1;
                else
                        return 0; /* another architecture's */
                *us = 0;
        }
        if (isempty(mid))
                return 0;
        for (const char *c = mid; *c; c++)
                if (!isalnum((unsigned char) *c) && !strchr(".~^-_", *c))
                        return 0;
        *ret = (Candidate) { .entry = strdup(entry), .version = TAKE_PTR(mid), .arch_rank = rank, .left = left, .done = done };
        return ret->entry ? 1 : -ENOMEM;
}

/* Whether a is a better pick than b. */
static bool candidate_better(const Candidate *a, const Candidate *b) {
        int c;

        if ((a->left != 0) != (b->left != 0))
                return a->left != 0;
        c = version_compare(a->version, b->version);
        if (c != 0)
                return c > 0;
        if (a->arch_rank != b->arch_rank)
                return a->arch_rank > b->arch_rank;
        if (a->left != b->left)
                return a->left > b->left;
        if (a->done != b->done)
                return a->done < b->done;
        return strcmp(a->entry, b->entry) > 0;
}

int image_version_pick(char *const *entries, const char *name, const char *suffix, const char *native_arch, char **ret) {
        Candidate best = {};

        STRV_FOREACH(e, entries) {
                Candidate c = {};
                int r;

                if ((*e)[0] == '.' || is_sidecar(*e))
                        continue;
                r = parse_candidate(*e, name, suffix, native_arch, &c);
                if (r < 0) {
                        free(best.entry);
                        free(best.version);
                        return r;
                }
                if (r == 0)
                        continue;
                if (best.entry && !candidate_better(&c, &best)) {
                        free(c.entry);
                        free(c.version);
                        continue;
                }
                free(best.entry);
                free(best.version);
                best = c;
        }
        free(best.version);
        if (!best.entry)
                return 0;
        *ret = best.entry;
        return 1;
}

int image_version_of(const char *entry, const char *name, const char *suffix, const char *native_arch, char **ret) {
        Candidate c = {};
        int r;

        if (entry[0] == '.' || is_sidecar(entry))
                return 0;
        r = parse_candidate(entry, name, suffix, native_arch, &c);
        if (r <= 0)
                return r;
        free(c.entry);
        *ret = c.version;
        return 1;
}

int image_version_entry_problem(const char *vdir, const char *entry, const char *target, int error, mode_t mode,
                                bool want_dir, char **ret) {
        _cleanup_free_ char *shown = path_join(vdir, entry);
        const char *expected = want_dir ? "a directory" : "an image file";
        int r;

        if (!shown)
                return -ENOMEM;
        if (error == -ENOENT && target)
                return dangling_reason(shown, target, ret);
        if (error < 0)
                r = asprintf(ret, "cannot open %s: %s", shown, strerror(-error));
        else if (want_dir ? S_ISDIR(mode) : S_ISREG(mode)) {
                *ret = NULL;
                return 0;
        } else if (S_ISLNK(mode))
                /* Opened without following it: the walk that stands in for openat2(). */
                r = asprintf(ret,
                             "%s is a symbolic link to %s, not followed: openat2() is not allowed here, and without "
                             "it no symbolic link is",
                             shown, strna(target));
        else if (target)
                r = asprintf(ret, "%s is a symbolic link to %s, which is %s, not %s (the versions in %s are %s)", shown,
                             target, inode_type_name(mode), expected, vdir, want_dir ? "directories" : "image files");
        else
                r = asprintf(ret, "%s is %s, not %s (the versions in %s are %s)", shown, inode_type_name(mode), expected,
                             vdir, want_dir ? "directories" : "image files");
        if (r < 0) {
                *ret = NULL;
                return -ENOMEM;
        }
        return 0;
}

/* The names in a version directory (vfd, read through a copy of the fd). */
static int version_entries(int vfd, char ***ret) {
        _cleanup_strv_free_ char **l = NULL;
        _cleanup_closedir_ DIR *d = NULL;
        struct dirent *de;
        int dfd;

        dfd = openat(vfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return negative_errno();
        d = fdopendir(dfd);
        if (!d) {
                safe_close(dfd);
                return negative_errno();
        }
        errno = 0;
        while ((de = readdir(d))) {
                if (strv_extend(&l, de->d_name) < 0)
                        return -ENOMEM;
                errno = 0;
        }
        if (errno != 0)
                return negative_errno();
        *ret = TAKE_PTR(l);
        return 0;
}

/* The entry of a version directory to use and, when it cannot be an image, why (see
 * image_version_pick() and image_version_entry_problem()).  fd and st: the entry opened
 * (O_PATH) inside the root, or a negative errno and zeros.  0: no entry for this machine. */
static int pick_version(int root_fd, const char *sd, const char *vdir, const char *name, const char *suffix, bool want_dir,
                        char **ret_entry, int *ret_fd, struct stat *ret_st, char **ret_problem) {
        _cleanup_free_ char *vrel = path_join(sd, vdir), *picked = NULL, *rel = NULL;
        _cleanup_strv_free_ char **entries = NULL;
        _cleanup_close_ int vfd = -EBADF, fd = -EBADF;
        char target[PATH_MAX];
        const char *link = NULL;
        struct stat st = {};
        ssize_t n;
        int r;

        if (!vrel)
                return -ENOMEM;
        vfd = open_directory_at(root_fd, vrel, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
        if (vfd < 0)
                return vfd;
        r = version_entries(vfd, &entries);
        if (r < 0)
                return r;
        r = image_version_pick(entries, name, suffix, release_native_architecture(), &picked);
        if (r <= 0)
                return r;

        /* What the picked entry is, resolved inside the root; what it links to is read
         * through the version directory's fd (its path may hold symlinks of the root's). */
        rel = path_join(vrel, picked);
        if (!rel)
                return -ENOMEM;
        fd = openat_resolve(root_fd, rel, O_PATH, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
        if (fd >= 0 && fstat(fd, &st) < 0) {
                r = negative_errno();
                safe_close(fd);
                fd = r;
                st = (struct stat) {};
        }
        n = readlinkat(vfd, picked, target, sizeof(target) - 1);
        if (n >= 0) {
                target[n] = '\0';
                link = target;
        }
        r = image_version_entry_problem(vdir, picked, link, fd < 0 ? fd : 0, st.st_mode, want_dir, ret_problem);
        if (r < 0)
                return r;
        *ret_entry = TAKE_PTR(picked);
        *ret_fd = TAKE_FD(fd);
        *ret_st = st;
        return 1;
}

/* A NAME.v, NAME.raw.v or NAME.sysext.raw.v directory: the image name, the suffix of its
 * entries and whether they are directories. */
static int versioned_name(const char *entry, ImageClass klass, char **ret_name, char **ret_suffix, bool *ret_dir) {
        _cleanup_free_ char *base = strndup(entry, strlen(entry) - strlen(".v"));
        const char *cs = class_suffix(klass);

        if (!base)
                return -ENOMEM;
        if (endswith(base, ".raw")) {
                size_t n = strlen(base) - strlen(".raw");
                bool with_class = n > strlen(cs) && !strncmp(base + n - strlen(cs), cs, strlen(cs));

                *ret_name = strndup(base, with_class ? n - strlen(cs) : n);
                *ret_dir = false;
        } else {
                *ret_name = dir_name(base, klass);
                *ret_dir = true;
        }
        if (!*ret_name)
                return -ENOMEM;
        /* "", ".raw" or ".sysext.raw": what follows the name in the directory's name. */
        *ret_suffix = strdup(base + strlen(*ret_name));
        return *ret_suffix ? 0 : -ENOMEM;
}

/* What discovery records of a raw image beside its identity: the stamp over its sidecars and
 * the root hash NAME.roothash gives; of a directory, the stamp over its entries.  listing: the
 * entries of the directory the sidecars would be in, or NULL. */
static int discover_fill(int root_fd, int fd, Image *img, const DirListing *listing) {
        _cleanup_free_ char *sdir = NULL, *base = NULL;
        unsigned found;
        int r;

        if (img->kind == IMAGE_DIRECTORY) {
                if (image_directory_stamp(fd, &img->stamp) < 0)
                        img->stamp = 0; /* unreadable: the probe says why */
                return 0;
        }

        /* Sidecars sit beside the file (in the .v directory for a picked one), named after it. */
        r = sidecar_base(img->rel, &sdir, &base);
        if (r < 0)
                return r;
        img->stamp = sidecar_stamp(root_fd, sdir, base, listing, &found);
        img->no_sidecars = listing && found == 0;
        /* What a refresh compares before anything is opened (plan_image_same()); the probe
         * reads it again.  Without a hash tree or a signature beside it there is nothing to
         * peek at (the common image: no more lookups). */
        if (!(found & (1u << SIDECAR_VERITY | 1u << SIDECAR_SIGNATURE)))
                return 0;
        return verity_peek_sidecars(root_fd, sdir, base, &img->roothash, &img->signature_sidecar);
}

/* image_discover_ex() with all_versions: the entries of version directory sd/vdir other than
 * the picked one that are for this machine and open as images of the right type. */
static int add_other_versions(ImageList *l, int root_fd, const char *root_prefix, const char *sd, const char *vdir,
                              const char *name, const char *suffix, bool want_dir, const char *picked, ImageClass klass) {
        _cleanup_free_ char *vrel = path_join(sd, vdir);
        _cleanup_strv_free_ char **entries = NULL;
        _cleanup_close_ int vfd = -EBADF;
        int r;

        if (!vrel)
                return -ENOMEM;
        vfd = open_directory_at(root_fd, vrel, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
        if (vfd < 0)
                return vfd == -ENOMEM ? vfd : 0;
        r = version_entries(vfd, &entries);
        if (r < 0)
                return r;
        STRV_FOREACH(e, entries) {
                _cleanup_free_ char *version = NULL, *rel = NULL, *entry = NULL;
                _cleanup_close_ int fd = -EBADF;
                struct stat st;
                Image *img;

                if (streq(*e, picked))
                        continue;
                r = image_version_of(*e, name, suffix, release_native_architecture(), &version);
                if (r < 0)
                        return r;
                if (r == 0)
                        continue;
                rel = path_join(vrel, *e);
                entry = path_join(vdir, *e);
                if (!rel || !entry)
                        return -ENOMEM;
                fd = openat_resolve(root_fd, rel, O_PATH, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
                if (fd < 0 || fstat(fd, &st) < 0 || !(want_dir ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode)))
                        continue;
                r = list_add(l, name, root_prefix, sd, entry, &st, &img);
                if (r < 0)
                        return r;
                img->klass = klass;
                img->version = TAKE_PTR(version);
                r = discover_fill(root_fd, fd, img, NULL);
                if (r < 0)
                        return r;
        }
        return 0;
}

int image_discover(int root_fd, const char *root_prefix, char *const *search_dirs, ImageClass klass, ImageList *ret) {
        return image_discover_ex(root_fd, root_prefix, search_dirs, klass, false, ret);
}

int image_discover_ex(int root_fd, const char *root_prefix, char *const *search_dirs, ImageClass klass, bool all_versions,
                      ImageList *ret) {
        _cleanup_image_list_ ImageList l = {};

        STRV_FOREACH(sd, search_dirs) {
                _cleanup_closedir_ DIR *d = NULL;
                _cleanup_(dir_listing_done) DirListing listing = {};
                bool by_listing;
                int dfd, r;

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
                r = dir_listing_read(d, &listing);
                if (r < 0)
                        return r;
                by_listing = !dir_casefold(dirfd(d));

                for (size_t k = 0; k < listing.n; k++) {
                        _cleanup_free_ char *name = NULL, *rel = NULL, *picked = NULL, *entry_path = NULL, *problem = NULL,
                                            *suffix = NULL;
                        _cleanup_close_ int fd = -EBADF;
                        struct stat st = {};
                        const char *dname = listing.names[k], *invalid, *entry = dname;
                        bool seen = false, raw, want_dir = false;
                        Image *img;
                        int opened; /* 0: st is the entry's (fd may be closed), else why not */

                        if (dname[0] == '.' || is_sidecar(dname))
                                continue;
                        rel = path_join(*sd, dname);
                        if (!rel)
                                return -ENOMEM;
                        raw = endswith(dname, ".raw");
                        /* A NAME.raw that is a file, not a symlink: its status from the search
                         * directory (resolved inside the root already), one call; nothing
                         * below wants an fd of a file.  Anything else is resolved inside the
                         * root: a symlink to an image elsewhere in the root is that image, one
                         * pointing out of it ends inside it too (RESOLVE_IN_ROOT). */
                        if (raw && fstatat(dirfd(d), dname, &st, AT_SYMLINK_NOFOLLOW) >= 0 && S_ISREG(st.st_mode))
                                opened = 0;
                        else {
                                st = (struct stat) {};
                                fd = openat_resolve(root_fd, rel, O_PATH, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
                                if (fd >= 0 && fstat(fd, &st) < 0)
                                        fd = safe_close(fd);
                                opened = fd >= 0 ? 0 : fd;
                        }

                        if (opened >= 0 && S_ISDIR(st.st_mode) && endswith(dname, ".v")) {
                                r = versioned_name(dname, klass, &name, &suffix, &want_dir);
                                if (r < 0)
                                        return r;
                                /* The newest entry for this machine, by name; what it is
                                 * (a symlink out of the root or to no image, say) makes
                                 * the image refused below, with the reason in problem. */
                                fd = safe_close(fd);
                                st = (struct stat) {};
                                r = pick_version(root_fd, *sd, dname, name, suffix, want_dir, &picked, &fd, &st,
                                                 &problem);
                                if (r == -ENOMEM)
                                        return r;
                                if (r <= 0)
                                        continue; /* no entry for this machine */
                                opened = fd >= 0 ? 0 : fd;
                                entry_path = path_join(dname, picked);
                                if (!entry_path)
                                        return -ENOMEM;
                                entry = entry_path;
                        } else if (opened >= 0 && S_ISDIR(st.st_mode))
                                name = dir_name(dname, klass);
                        else if (raw)
                                name = raw_name(dname, klass);
                        else if (opened < 0 && is_symlink_at(dirfd(d), dname))
                                /* A symlink that leads nowhere inside the root: it may have
                                 * meant a directory image; say why it is not one. */
                                name = strdup(dname);
                        else
                                continue; /* neither NAME.raw nor a directory: not an image */
                        if (!name)
                                return -ENOMEM;

                        for (size_t i = 0; i < l.n; i++)
                                if (streq(l.images[i].name, name))
                                        seen = true;
                        if (seen)
                                continue; /* an earlier search directory has it */

                        r = list_add(&l, name, root_prefix, *sd, entry, &st, &img);
                        if (r < 0)
                                return r;
                        img->klass = klass;
                        img->picked = true;
                        if (picked && image_version_of(picked, name, suffix, release_native_architecture(), &img->version) < 0)
                                return -ENOMEM;

                        invalid = image_name_invalid_reason(name);
                        if (invalid)
                                refuse(img, IMAGE_REFUSED, "%s", invalid);
                        else if (problem)
                                refuse(img, IMAGE_REFUSED, "%s", problem);
                        else if (opened == -ENOENT) {
                                r = refuse_dangling(img, dirfd(d), entry);
                                if (r < 0)
                                        return r;
                        } else if (opened < 0)
                                refuse(img, IMAGE_REFUSED, "cannot open %s: %s", entry, strerror(-opened));
                        else if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
                                refuse(img, IMAGE_REFUSED, "%s is %s, not an image file or directory", entry,
                                       inode_type_name(st.st_mode));
                        else {
                                /* A picked version's sidecars are in its version directory. */
                                r = discover_fill(root_fd, fd, img, picked || !by_listing ? NULL : &listing);
                                if (r < 0)
                                        return r;
                        }
                        /* img is not used below: adding images moves the list. */
                        if (all_versions && picked) {
                                r = add_other_versions(&l, root_fd, root_prefix, *sd, dname, name, suffix, want_dir,
                                                       picked, klass);
                                if (r < 0)
                                        return r;
                        }
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

static int mount_file(Image *img, const ProbeContext *ctx, int fd);
static int probe_mounted(Image *img, const ProbeContext *ctx);
static int attach_and_mount(Image *img, const ProbeContext *ctx, int fd, uint64_t offset, uint64_t size, VeritySource *v);

/* Opens a raw image: recognises it, finds its verity data, applies the policy, attaches it,
 * verifies it and mounts it (detached) into img->root_fd.  A plain erofs image's mount is
 * left to the caller when ret_pending_fd is given: 1, with the open file there
 * (image_probe_mounted_all() makes the mount). */
static int probe_raw(Image *img, const ProbeContext *ctx, int *ret_pending_fd) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *type = NULL, *msg = NULL, *dir = NULL, *dir_display = NULL, *why = NULL, *base = NULL;
        _cleanup_verity_source_ VeritySource v = { .hash_fd = -EBADF };
        uint64_t offset = 0, size = 0;
        ImageKind fs_kind;
        DiskLayout layout = {};
        struct stat st;
        int r;

        /* The root hash that discovery read goes: only the one verified below is kept. */
        free(img->roothash);
        img->roothash = NULL;
        r = open_regular_at(ctx->root_fd, img->rel, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS, &fd, &st);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return refuse(img, IMAGE_REFUSED, "cannot open image: %s", READ_ERROR_STRING(r, st.st_mode, 0));
        img->st = st;
        r = sidecar_base(img->rel, &dir, &base);
        if (r < 0)
                return r;
        r = dir_of(img->path, &dir_display);
        if (r < 0)
                return r;

        r = disk_probe_type(fd, 0, 0, true, &type);
        if (r == -ENOMEM)
                return r;
        if (r == -ELIBACC)
                return refuse(img, IMAGE_REFUSED, "not recognised: libblkid.so.1, which recognises every kind but erofs, cannot be loaded");
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
                if (r == -ELIBACC)
                        return refuse(img, IMAGE_REFUSED, "libblkid.so.1, which recognises what a partition holds, cannot be loaded");
                fs_kind = image_kind_from_fstype(type);
                if (fs_kind == IMAGE_UNKNOWN)
                        return refuse(img, IMAGE_REFUSED,
                                      "the %s partition holds %s%s%s, not erofs, squashfs, ext4, btrfs or xfs",
                                      layout.usr ? "usr" : "root", type ? "'" : "no file system", strempty(type),
                                      type ? "'" : "");
                r = disk_verity(fd, img->path, ctx->root_fd, dir, base, &layout, &v, &why);
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
                /* None was beside it when discovery listed its directory: as if it had
                 * looked a moment earlier (a sidecar that comes later changes the stamp, and
                 * the next refresh judges the image again). */
                r = img->no_sidecars ? 0 : verity_find_sidecars(ctx->root_fd, dir, dir_display, base, &v, &why);
        }
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return refuse(img, IMAGE_REFUSED, "%s", strna(why));
        img->fstype = strdup(image_kind_fstype(fs_kind));
        if (!img->fstype)
                return -ENOMEM;

        /* The policy, before anything is attached. */
        if (ctx->policy[img->klass] == IMAGE_POLICY_DENY)
                return refuse_by_policy(img, "the image policy allows no image");
        if (ctx->policy[img->klass] >= IMAGE_POLICY_VERITY && !v.roothash)
                return refuse_by_policy(img, "ImagePolicy=%s requires verity data, the image has none",
                              image_policy_to_string(ctx->policy[img->klass]));
        if (v.signature) {
                r = verity_check_signature(&v, ctx->cert_root_fd, ctx->cert_dir, ctx->cert_display, &why);
                if (r < 0)
                        return r;
                if (r == 0)
                        return refuse_by_policy(img, "signature check failed: %s", strna(why));
                img->signed_valid = true;
        } else if (ctx->policy[img->klass] == IMAGE_POLICY_SIGNED)
                return refuse_by_policy(img, "ImagePolicy=signed requires a root hash signature, the image has none (%s)",
                              v.roothash ? "verity without signature" : "no verity data");

        r = disk_check_size(fd, offset, fs_kind, size ?: (uint64_t) img->st.st_size, &msg);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return refuse(img, IMAGE_REFUSED, "%s", msg ?: "cannot read the superblock");

        /* A plain erofs image without verity is mounted from its file where the kernel can:
         * no loop device to attach, find and verify.  -ENOTBLK is the kernel saying it cannot
         * (no file-backed erofs, or a file on tmpfs or overlayfs): a loop device then. */
        if (img->kind == IMAGE_EROFS && !v.roothash) {
                if (ret_pending_fd) {
                        *ret_pending_fd = TAKE_FD(fd);
                        return 1;
                }
                r = mount_file(img, ctx, fd);
                if (r != -ENOTBLK)
                        return r;
        }
        return attach_and_mount(img, ctx, fd, offset, size, &v);
}

/* The file-backed erofs mount of a plain erofs image; -ENOTBLK when the kernel cannot (a loop
 * device then). */
static int mount_file(Image *img, const ProbeContext *ctx, int fd) {
        _cleanup_free_ char *msg = NULL;
        int r;

        r = file_mount(fd, img->fstype, ctx->mount_attrs[img->klass], &img->root_fd, &msg);
        if (r >= 0) {
                img->backing = IMAGE_BACKING_FILE;
                return 0;
        }
        if (r == -ENOTBLK)
                return r;
        return refuse(img, IMAGE_REFUSED, "cannot mount %s file system: %s%s%s", img->fstype, strerror(-r), msg ? ": " : "",
                      msg ?: "");
}

/* A loop device for the file (offset and size: a partition's), dm-verity or the user-space
 * check when v has a root hash, and the file system mounted from the device and verified. */
static int attach_and_mount(Image *img, const ProbeContext *ctx, int fd, uint64_t offset, uint64_t size, VeritySource *v) {
        _cleanup_free_ char *msg = NULL, *why = NULL;
        __attribute__((cleanup(verity_device_done))) VerityDevice vd = { .fd = -EBADF };
        int r;

        r = loopdev_attach(fd, offset, size, &img->loop);
        if (r < 0)
                return refuse(img, IMAGE_REFUSED, "cannot attach a loop device: %s", strerror(-r));
        img->backing = IMAGE_BACKING_LOOP;
        img->loop_devnum = img->loop->devnum;
        img->loop_diskseq = img->loop->diskseq;

        if (v->roothash) {
                img->verity = ctx->use_dm ? VERITY_DM : VERITY_USERSPACE;
                r = verity_setup(v, img->loop->fd, img->verity, img->name, &vd, &why);
                if (r == -ENOMEM)
                        return r;
                if (r < 0)
                        return refuse(img, IMAGE_REFUSED, "%s", strna(why));
                /* Verified: what the journal keeps to tell a copy of this image from another
                 * image (plan_image_same()). */
                img->roothash = strdup(v->roothash);
                if (!img->roothash)
                        return -ENOMEM;
        }

        if (vd.fd >= 0)
                r = device_mount(vd.fd, vd.devnum, vd.diskseq, img->loop->nr, img->fstype, ctx->mount_attrs[img->klass],
                                 &img->root_fd, &msg);
        else
                r = loopdev_mount(img->loop, img->fstype, ctx->mount_attrs[img->klass], &img->root_fd, &msg);
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

        if (ctx->policy[img->klass] != IMAGE_POLICY_OPEN)
                return refuse_by_policy(img, "directories are only allowed with ImagePolicy=open (policy is %s)",
                              image_policy_to_string(ctx->policy[img->klass]));
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
        img->backing = IMAGE_BACKING_DIRECTORY;
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

/* Whether a release file may stand for an image of another name: its xattr
 * user.extension-release.strict says "0" (os-release(5)). */
static bool release_not_strict(int dir_fd, const char *name) {
        _cleanup_close_ int fd = -EBADF;
        char v[16] = {};
        ssize_t n;
        struct stat st;

        if (open_regular_at(dir_fd, name, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS, &fd, &st) < 0)
                return false;
        n = fgetxattr(fd, "user.extension-release.strict", v, sizeof(v) - 1);
        if (n <= 0)
                return false;
        v[n] = 0;
        return STR_IN_SET(v, "0", "no", "n", "false", "f", "off");
}

/* The release file of an image, in dir inside the image: extension-release.NAME, else the
 * one file there that is meant for it (NAME cut at its first '_' or '+', as for versioned
 * names, or one not marked strict).  *ret_name is the file found, below dir. */
static int find_release(Image *img, const char *dir, char **ret_name) {
        _cleanup_free_ char *exact = NULL, *base = NULL, *found = NULL;
        _cleanup_closedir_ DIR *d = NULL;
        _cleanup_close_ int probe = -EBADF;
        struct dirent *de;
        int dfd;

        if (asprintf(&exact, "extension-release.%s", img->name) < 0)
                return -ENOMEM;
        dfd = open_directory_at(img->root_fd, dir, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
        if (dfd < 0)
                return dfd;
        probe = openat_resolve(dfd, exact, O_PATH | O_NOFOLLOW, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS);
        if (probe >= 0 || probe != -ENOENT) {
                safe_close(dfd);
                *ret_name = TAKE_PTR(exact);
                return 0;
        }
        base = strndup(img->name, strcspn(img->name, "_+"));
        if (!base)
                return -ENOMEM;
        d = fdopendir(dfd);
        if (!d) {
                safe_close(dfd);
                return negative_errno();
        }
        while ((de = readdir(d))) {
                const char *x = startswith(de->d_name, "extension-release.");

                if (!x || isempty(x) || image_name_invalid_reason(x) || (de->d_type != DT_REG && de->d_type != DT_UNKNOWN))
                        continue;
                if (!streq(x, base) && !release_not_strict(dirfd(d), de->d_name))
                        continue;
                if (found)
                        return -ENOTUNIQ;
                found = strdup(de->d_name);
                if (!found)
                        return -ENOMEM;
        }
        if (!found)
                return -ENOENT;
        *ret_name = TAKE_PTR(found);
        return 0;
}

int image_probe_begin(Image *img, const ProbeContext *ctx, int *ret_file_fd) {
        int r;

        if (img->verdict == IMAGE_REFUSED)
                return 0; /* refused at discovery (name, type) */
        img->verdict = IMAGE_UNPROBED;
        img->refused_by_policy = false;

        if (img->kind == IMAGE_DIRECTORY)
                r = probe_directory(img, ctx);
        else
                r = probe_raw(img, ctx, ret_file_fd);
        if (r != 0 || img->verdict == IMAGE_REFUSED)
                return r;
        return probe_mounted(img, ctx);
}

int image_probe(Image *img, const ProbeContext *ctx) {
        return image_probe_begin(img, ctx, NULL);
}

/* The rest of a probe that image_probe_begin() left at the mount: the file-backed mount and
 * what is read through it; 1 (nothing done) where the kernel cannot mount the file.  Touches
 * nothing but img and the file, and reads ctx: several run at once, on several threads. */
static int probe_pending(Image *img, const ProbeContext *ctx, int file_fd) {
        int r;

        r = mount_file(img, ctx, file_fd);
        if (r == -ENOTBLK)
                return 1;
        if (r < 0 || img->verdict == IMAGE_REFUSED)
                return r;
        return probe_mounted(img, ctx);
}

/* ... and where the kernel could not: a loop device (a plain erofs image has no verity data). */
static int probe_pending_loop(Image *img, const ProbeContext *ctx, int file_fd) {
        VeritySource none = { .hash_fd = -EBADF };
        int r;

        r = attach_and_mount(img, ctx, file_fd, 0, 0, &none);
        if (r < 0 || img->verdict == IMAGE_REFUSED)
                return r;
        return probe_mounted(img, ctx);
}

/* At most this many threads besides the caller's, each for at least this many images: the
 * kernel makes the mounts of file-backed erofs (a superblock, its backing device in sysfs)
 * partly in parallel, and two threads already take most of what there is to gain. */
#define PROBE_THREADS_MAX 3
#define PROBE_IMAGES_PER_THREAD 4

typedef struct ProbeWork {
        Image **images;
        int *fds;
        int *results;
        size_t n;
        const ProbeContext *ctx;
        atomic_size_t next;
} ProbeWork;

static void *probe_work(void *userdata) {
        ProbeWork *w = userdata;

        for (size_t i; (i = atomic_fetch_add(&w->next, 1)) < w->n;) {
                /* Ctrl-C, SIGTERM, SIGHUP: no further mount (the caller's transition stops
                 * with nothing changed). */
                if (engine_stop_requested()) {
                        w->results[i] = -EINTR;
                        continue;
                }
                w->results[i] = probe_pending(w->images[i], w->ctx, w->fds[i]);
                /* Mounted (or refused): the file is not needed any more; a file stays open
                 * only for a loop device.  So no more fds are open at once than before. */
                if (w->results[i] != 1)
                        w->fds[i] = safe_close(w->fds[i]);
        }
        return NULL;
}

static size_t probe_threads(size_t n) {
        cpu_set_t cpus;
        size_t want = n / PROBE_IMAGES_PER_THREAD, cpu_count;

        /* The CPUs this process may run on (a unit's CPUAffinity=), less the caller's own. */
        if (sched_getaffinity(0, sizeof(cpus), &cpus) < 0)
                return 0;
        cpu_count = (size_t) CPU_COUNT(&cpus);
        want = MIN(want, cpu_count);
        want = MIN(want, (size_t) PROBE_THREADS_MAX + 1);
        return want > 0 ? want - 1 : 0;
}

int image_probe_mounted_all(Image **images, int *fds, size_t n, const ProbeContext *ctx, size_t *ret_failed) {
        _cleanup_free_ int *results = NULL;
        pthread_t threads[PROBE_THREADS_MAX];
        size_t n_threads = 0, want = probe_threads(n);
        ProbeWork w;

        if (n == 0)
                return 0;
        results = calloc(n, sizeof(int));
        if (!results) {
                *ret_failed = n; /* no image's */
                return -ENOMEM;
        }
        w = (ProbeWork) { .images = images, .fds = fds, .results = results, .n = n, .ctx = ctx };
        /* Signals stay the caller's: the threads block them all.  A thread that cannot be
         * started leaves its share to the others. */
        if (want > 0) {
                cpu_set_t elsewhere;
                bool nudge = cpu_mask_elsewhere(&elsewhere);

                /* Off this CPU, which this thread works on too (util.h, cpu_nudge_away()). */
                for (; n_threads < want; n_threads++)
                        if (!thread_start_masked_on(&threads[n_threads], probe_work, &w, nudge ? &elsewhere : NULL))
                                break;
        }
        probe_work(&w);
        for (size_t t = 0; t < n_threads; t++)
                thread_join_here(threads[t]); /* its last image may use this CPU now */
#ifdef SYSEXTD_TEST_HOOKS
        testhook_point("probe-threads", (long) n_threads);
#endif

        /* What the kernel could not mount from its file gets a loop device, here, one at a
         * time, in the order of the images. */
        for (size_t i = 0; i < n; i++) {
                int r = results[i];

                if (r == 1)
                        r = engine_stop_requested() ? -EINTR : probe_pending_loop(images[i], ctx, fds[i]);
                if (r < 0) {
                        *ret_failed = i;
                        return r;
                }
        }
        return 0;
}

/* Everything read from the mounted image: its release file, what it ships. */
static int probe_mounted(Image *img, const ProbeContext *ctx) {
        _cleanup_free_ char *release_path = NULL, *text = NULL, *mismatch = NULL, *file = NULL;
        _cleanup_release_ Release rel = {};
        const char *dir;
        mode_t mode = 0;
        int r;

        /* The release file carries this image's own name (as systemd requires), resolved
         * inside the image, never through a symlink out of it.  A usr partition is mounted as
         * the image's usr/. */
        dir = img->klass == IMAGE_CLASS_CONFEXT ? "etc/extension-release.d"
              : img->usr_partition             ? "lib/extension-release.d"
                                               : "usr/lib/extension-release.d";
        /* The common case first: the exact name, read straight away (a read that finds
         * nothing there, or a symlink that leads nowhere, is told apart below). */
        if (asprintf(&release_path, "%s/extension-release.%s", dir, img->name) < 0)
                return -ENOMEM;
        r = read_file_at(img->root_fd, release_path, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS, RELEASE_FILE_MAX, &text,
                         NULL, &mode);
        if (r == -ENOMEM)
                return r;
        if (r != -ENOENT)
                goto read;
        free(release_path);
        release_path = NULL;
        r = find_release(img, dir, &file);
        if (r == -ENOMEM)
                return r;
        if (r == -ENOTUNIQ)
                return refuse(img, IMAGE_REFUSED, "%s has more than one extension-release file that could be this image's", dir);
        if (r >= 0) {
                release_path = path_join(dir, file);
                if (!release_path)
                        return -ENOMEM;
                r = read_file_at(img->root_fd, release_path, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS, RELEASE_FILE_MAX,
                                 &text, NULL, &mode);
                if (r == -ENOMEM)
                        return r;
                if (r == -ENOENT)
                        /* There, but a symlink that leads nowhere inside the image. */
                        return refuse(img, IMAGE_REFUSED, "%s is a symbolic link to nothing inside the image", release_path);
        }
read:
        if (r == -ENOENT && !ctx->force)
                /* No release data: not meant for this system (an empty directory of that name
                 * masks an image of a lower search directory, as with systemd). */
                return refuse(img, IMAGE_INCOMPATIBLE, "no extension-release file: %s/extension-release.%s is missing", dir,
                              img->name);
        if (r < 0 && r != -ENOENT)
                return refuse(img, IMAGE_REFUSED, "%s %s", release_path ?: dir, READ_ERROR_STRING(r, mode, RELEASE_FILE_MAX));
        if (text) {
                r = release_parse(text, &rel);
                if (r == -ENOMEM)
                        return r;
                if (r < 0)
                        return refuse(img, IMAGE_REFUSED, "cannot parse %s: %s", release_path, strerror(-r));
        }

        if (image_has_entry(img->root_fd, img->usr_partition ? "lib/os-release" : "usr/lib/os-release"))
                return refuse(img, IMAGE_REFUSED, "ships usr/lib/os-release, which an extension must not replace");

        if (!ctx->force) {
                r = release_match(ctx->host, &rel, img->klass, &mismatch);
                if (r < 0)
                        return r;
                if (r == 0)
                        return refuse(img, IMAGE_INCOMPATIBLE, "%s", mismatch);
        }

        img->hierarchies = 0;
        for (size_t i = 0; ctx->hierarchies && ctx->hierarchies[i] && i < HIERARCHIES_MAX; i++) {
                const char *h = ctx->hierarchies[i], *in_image = h;
                _cleanup_free_ char *marker = NULL;

                if (ctx->hierarchy_class && ctx->hierarchy_class[i] != img->klass)
                        continue;
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

        /* What the service manager is asked to do once the image is merged or gone. */
        int reload = rel.reload_manager ? parse_boolean(rel.reload_manager) : 0;
        img->reload_manager = reload > 0;
        img->reload_manager_invalid = reload < 0;
        strv_free(img->restart_units);
        strv_free(img->reload_or_restart_units);
        img->restart_units = TAKE_PTR(rel.restart_units);
        img->reload_or_restart_units = TAKE_PTR(rel.reload_or_restart_units);
        /* Every unit the image ships, read now from its own layer: what it may restart, and
         * whether a unit another image ships stays when that one goes. */
        strv_free(img->shipped_units);
        strv_free(img->wanted_units);
        img->shipped_units = img->wanted_units = NULL;
        /* Most images ship no unit directory: looked for once, scanned only where there. */
        _cleanup_strv_free_ char **present = NULL;
        STRV_FOREACH(d, unit_dirs(img->klass, img->usr_partition))
                if (image_has_dir(img->root_fd, *d) && strv_extend(&present, *d) < 0)
                        return -ENOMEM;
        if (present) {
                r = unit_files_scan(img->root_fd, present, NULL, &img->shipped_units);
                if (r < 0)
                        return r;
                /* And the units it enables (T.wants/U): started when T is, at boot. */
                r = unit_wanted_scan(img->root_fd, present, &img->wanted_units);
                if (r < 0)
                        return r;
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

/* Every entry of a version directory, resolved inside the root: the picked one may be a link
 * whose target comes or goes, which changes nothing in the directory itself. */
static int fingerprint_version_dir(int root_fd, const char *path, uint64_t *fp) {
        _cleanup_closedir_ DIR *d = NULL;
        struct dirent *de;
        int dfd;

        dfd = open_directory_at(root_fd, path, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
        if (dfd < 0)
                return 0;
        d = fdopendir(dfd);
        if (!d) {
                safe_close(dfd);
                return 0;
        }
        while ((de = readdir(d))) {
                _cleanup_free_ char *p = NULL;

                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                p = path_join(path, de->d_name);
                if (!p)
                        return -ENOMEM;
                fingerprint_path(root_fd, p, fp);
        }
        return 0;
}

int image_discovery_fingerprint(int root_fd, char *const *search_dirs, const char *trusted_dir, uint64_t *ret) {
        uint64_t fp = STAMP_INIT;
        char *const dirs[] = { (char *) trusted_dir, NULL };

        /* What a listing depends on, without reading any content: every entry of the search
         * directories and of the version directories there, the trusted certificates, and the
         * host's release files.  For a directory image, its own inode and its release file (not
         * everything in it). */
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
                                if (pass == 0 && endswith(de->d_name, ".v") && fingerprint_version_dir(root_fd, p, &fp) < 0)
                                        return -ENOMEM;
                                if (pass == 0 && asprintf(&rel, "%s/usr/lib/extension-release.d/extension-release.%s", p,
                                                          de->d_name) >= 0)
                                        fingerprint_path(root_fd, rel, &fp);
                                free(rel);
                                rel = NULL;
                                if (pass == 0 && asprintf(&rel, "%s/etc/extension-release.d/extension-release.%s", p,
                                                          de->d_name) >= 0)
                                        fingerprint_path(root_fd, rel, &fp);
                        }
                }
        *ret = fp == 0 ? 1 : fp;
        return 0;
}
