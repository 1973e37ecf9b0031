/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Version directories (systemd.v(7)): which entry is picked (by name alone), why a picked
 * entry cannot be an image, and what discovery lists for each, on a tree made here (nothing
 * is mounted: discovery only reads directories). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "disk.h"
#include "fd-util.h"
#include "fileio.h"
#include "image-json.h"
#include "image.h"
#include "json-util.h"
#include "tests.h"
#include "util.h"

static char *pick(const char *list, const char *name, const char *suffix, const char *native) {
        _cleanup_strv_free_ char **l = NULL;
        char *picked = NULL;

        if (strv_split(list, " ", &l) < 0 || image_version_pick(l, name, suffix, native, &picked) <= 0)
                return NULL;
        return picked;
}

static void check_pick(const char *list, const char *name, const char *suffix, const char *native, const char *want) {
        _cleanup_free_ char *got = pick(list, name, suffix, native);

        if (want)
                CHECK_STREQ(got, want);
        else
                CHECK(got == NULL);
}

static void test_pick(void) {
        /* The newest version, compared as versions. */
        check_pick("app_1.2.raw app_1.10.raw app_1.9.raw", "app", ".raw", "x86-64", "app_1.10.raw");
        /* This machine's architecture before none, and before the secondary one; another's
         * never; tries used up last. */
        check_pick("app_1.10.raw app_1.10_x86-64.raw app_9_arm64.raw app_8+0-3.raw", "app", ".raw", "x86-64",
                   "app_1.10_x86-64.raw");
        check_pick("app_2_x86.raw app_1_x86-64.raw", "app", ".raw", "x86-64", "app_2_x86.raw");
        check_pick("app_2_x86.raw app_2_x86-64.raw", "app", ".raw", "x86-64", "app_2_x86-64.raw");
        check_pick("app_2_x86.raw", "app", ".raw", "arm64", NULL);
        check_pick("app_3+0.raw app_2.raw", "app", ".raw", "x86-64", "app_2.raw");
        check_pick("app_3+0.raw", "app", ".raw", "x86-64", "app_3+0.raw");
        /* Other images, hidden entries, sidecars and other suffixes are no versions. */
        check_pick("application_2.raw app.raw .app_9.raw app_9.roothash app_9.raw.tmp app_5.img", "app", ".raw",
                   "x86-64", NULL);
        check_pick("dirext_1 dirext_2 dirext_3.roothash dirext_4.verity .dirext_5", "dirext", "", "x86-64", "dirext_2");
        check_pick("app_1.raw app_2.sysext.raw", "app", ".sysext.raw", "x86-64", "app_2.sysext.raw");
        check_pick("", "app", ".raw", "x86-64", NULL);
}

static void check_problem(const char *vdir, const char *entry, const char *target, int error, mode_t mode, bool want_dir,
                          const char *want) {
        _cleanup_free_ char *got = NULL;

        CHECK(image_version_entry_problem(vdir, entry, target, error, mode, want_dir, &got) == 0);
        if (want)
                CHECK_STREQ(got, want);
        else
                CHECK(got == NULL);
}

static void test_problem(void) {
        /* Usable: a file in NAME.raw.v, a directory in NAME.v, through a link or not. */
        check_problem("app.raw.v", "app_2.raw", NULL, 0, S_IFREG, false, NULL);
        check_problem("app.raw.v", "app_2.raw", "/srv/app.raw", 0, S_IFREG, false, NULL);
        check_problem("dirext.v", "dirext_2", "../../../../srv/dirext", 0, S_IFDIR, true, NULL);

        /* A link out of the root, or dangling inside it: the words of the top level. */
        check_problem("app.raw.v", "app_2.raw", "/tmp/x", -ENOENT, 0, false,
                      "cannot open app.raw.v/app_2.raw: it is a symbolic link to /tmp/x, which does not exist under the "
                      "root (links are resolved inside it)");
        check_problem("app.raw.v", "app_2.raw", "../../../../../../tmp/x.raw", -ENOENT, 0, false,
                      "cannot open app.raw.v/app_2.raw: it is a symbolic link to ../../../../../../tmp/x.raw, which does "
                      "not exist inside the root");
        check_problem("app.raw.v", "app_2.raw", "app_gone.raw", -ENOENT, 0, false,
                      "cannot open app.raw.v/app_2.raw: it is a symbolic link to app_gone.raw, which does not exist "
                      "inside the root");
        check_problem("app.raw.v", "app_2.raw", "app_2.raw", -ELOOP, 0, false,
                      "cannot open app.raw.v/app_2.raw: Too many levels of symbolic links");

        /* A link to something that is no image of the kind the directory holds. */
        check_problem("app.raw.v", "app_2.raw", "/srv/notimage", 0, S_IFDIR, false,
                      "app.raw.v/app_2.raw is a symbolic link to /srv/notimage, which is a directory, not an image "
                      "file (the versions in app.raw.v are image files)");
        check_problem("dirext.v", "dirext_2", "/srv/file", 0, S_IFREG, true,
                      "dirext.v/dirext_2 is a symbolic link to /srv/file, which is a regular file, not a directory "
                      "(the versions in dirext.v are directories)");
        check_problem("app.raw.v", "app_2.raw", "/dev/null", 0, S_IFCHR, false,
                      "app.raw.v/app_2.raw is a symbolic link to /dev/null, which is a character device, not an "
                      "image file (the versions in app.raw.v are image files)");
        /* Where openat2() is not allowed, the walk that stands in opens the link itself. */
        check_problem("app.raw.v", "app_2.raw", "/srv/app.raw", 0, S_IFLNK, false,
                      "app.raw.v/app_2.raw is a symbolic link to /srv/app.raw, not followed: openat2() is not allowed "
                      "here, and without it no symbolic link is");
        /* The same without a link. */
        check_problem("app.raw.v", "app_2.raw", NULL, 0, S_IFIFO, false,
                      "app.raw.v/app_2.raw is a FIFO, not an image file (the versions in app.raw.v are image files)");
}

/* ---- discovery, on a tree made here ---- */

static int mkfile(int dfd, const char *path) {
        int fd = openat(dfd, path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0)
                return -1;
        close(fd);
        return 0;
}

static const Image *find(const ImageList *l, const char *name) {
        for (size_t i = 0; i < l->n; i++)
                if (streq(l->images[i].name, name))
                        return &l->images[i];
        return NULL;
}

static void check_listed(const ImageList *l, const char *name, const char *rel, ImageVerdict verdict, const char *reason) {
        const Image *img = find(l, name);

        CHECK(img != NULL);
        if (!img)
                return;
        CHECK_STREQ(img->rel, rel);
        CHECK(img->verdict == verdict);
        if (reason)
                CHECK_STREQ(img->reason, reason);
        else
                CHECK(img->reason == NULL);
}

static void test_discover(void) {
        char tmpl[] = "/tmp/test-image-XXXXXX";
        char *dir = mkdtemp(tmpl);
        _cleanup_free_ char *outside = NULL, *escape = NULL, *root_path = NULL, *want = NULL;
        char *const search[] = { (char *) "var/lib/extensions", NULL }, *const search_top[] = { (char *) "etc/extensions", NULL };
        _cleanup_image_list_ ImageList l = {};
        int root;

        CHECK(dir != NULL);
        if (!dir)
                return;
        /* The root is DIR/root; DIR/outside.raw is a file on the host but out of the root. */
        root_path = path_join(dir, "root");
        outside = path_join(dir, "outside.raw");
        CHECK(root_path && outside);
        CHECK(asprintf(&escape, "../../../../../../../../..%s", outside) > 0);
        CHECK(mkfile(AT_FDCWD, outside) == 0);
        CHECK(mkdir(root_path, 0755) == 0);
        root = open(root_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        CHECK(root >= 0);
        CHECK(mkdir_p_at(root, "srv/notimage", 0755) == 0);
        CHECK(mkdir_p_at(root, "srv/dirext", 0755) == 0);
        CHECK(mkfile(root, "srv/good.raw") == 0);
        CHECK(mkdir_p_at(root, "var/lib/extensions", 0755) == 0);

        /* Each newest entry a link; an older, usable version beside most. */
        CHECK(mkdir_p_at(root, "var/lib/extensions/abs.raw.v", 0755) == 0);
        CHECK(mkfile(root, "var/lib/extensions/abs.raw.v/abs_1.raw") == 0);
        CHECK(symlinkat(outside, root, "var/lib/extensions/abs.raw.v/abs_2.raw") == 0);
        CHECK(mkdir_p_at(root, "var/lib/extensions/rel.raw.v", 0755) == 0);
        CHECK(mkfile(root, "var/lib/extensions/rel.raw.v/rel_1.raw") == 0);
        CHECK(symlinkat(escape, root, "var/lib/extensions/rel.raw.v/rel_2.raw") == 0);
        CHECK(mkdir_p_at(root, "var/lib/extensions/dang.raw.v", 0755) == 0);
        CHECK(mkfile(root, "var/lib/extensions/dang.raw.v/dang_1.raw") == 0);
        CHECK(symlinkat("dang_gone.raw", root, "var/lib/extensions/dang.raw.v/dang_2.raw") == 0);
        CHECK(mkdir_p_at(root, "var/lib/extensions/todir.raw.v", 0755) == 0);
        CHECK(mkfile(root, "var/lib/extensions/todir.raw.v/todir_1.raw") == 0);
        CHECK(symlinkat("/srv/notimage", root, "var/lib/extensions/todir.raw.v/todir_2.raw") == 0);
        CHECK(mkdir_p_at(root, "var/lib/extensions/good.raw.v", 0755) == 0);
        CHECK(mkfile(root, "var/lib/extensions/good.raw.v/good_1.raw") == 0);
        CHECK(symlinkat("/srv/good.raw", root, "var/lib/extensions/good.raw.v/good_2.raw") == 0);
        CHECK(mkdir_p_at(root, "var/lib/extensions/gooddir.v/gooddir_1", 0755) == 0);
        CHECK(symlinkat("../../../../srv/dirext", root, "var/lib/extensions/gooddir.v/gooddir_2") == 0);
        CHECK(mkdir_p_at(root, "var/lib/extensions/tofile.v/tofile_1", 0755) == 0);
        CHECK(symlinkat("/srv/good.raw", root, "var/lib/extensions/tofile.v/tofile_2") == 0);
        /* Not a link, still no image: refused too, the older one not used. */
        CHECK(mkdir_p_at(root, "var/lib/extensions/plain.raw.v/plain_3.raw", 0755) == 0);
        CHECK(mkfile(root, "var/lib/extensions/plain.raw.v/plain_1.raw") == 0);
        /* The version directory itself a link inside the root; the picked entry's link read
         * through it. */
        CHECK(mkdir_p_at(root, "srv/versions", 0755) == 0);
        CHECK(symlinkat("/srv/missing.raw", root, "srv/versions/via_2.raw") == 0);
        CHECK(symlinkat("/srv/versions", root, "var/lib/extensions/via.raw.v") == 0);
        /* Nothing for this machine: not listed. */
        CHECK(mkdir_p_at(root, "var/lib/extensions/none.raw.v", 0755) == 0);
        CHECK(mkfile(root, "var/lib/extensions/none.raw.v/other_1.raw") == 0);

        CHECK(image_discover(root, "/R", search, IMAGE_CLASS_SYSEXT, &l) == 0);
        CHECK(l.n == 9);
        CHECK(asprintf(&want,
                       "cannot open abs.raw.v/abs_2.raw: it is a symbolic link to %s, which does not exist under the "
                       "root (links are resolved inside it)",
                       outside) > 0);
        check_listed(&l, "abs", "var/lib/extensions/abs.raw.v/abs_2.raw", IMAGE_REFUSED, want);
        free(want);
        CHECK(asprintf(&want,
                       "cannot open rel.raw.v/rel_2.raw: it is a symbolic link to %s, which does not exist inside the "
                       "root",
                       escape) > 0);
        check_listed(&l, "rel", "var/lib/extensions/rel.raw.v/rel_2.raw", IMAGE_REFUSED, want);
        check_listed(&l, "dang", "var/lib/extensions/dang.raw.v/dang_2.raw", IMAGE_REFUSED,
                     "cannot open dang.raw.v/dang_2.raw: it is a symbolic link to dang_gone.raw, which does not exist "
                     "inside the root");
        check_listed(&l, "todir", "var/lib/extensions/todir.raw.v/todir_2.raw", IMAGE_REFUSED,
                     "todir.raw.v/todir_2.raw is a symbolic link to /srv/notimage, which is a directory, not an image "
                     "file (the versions in todir.raw.v are image files)");
        check_listed(&l, "tofile", "var/lib/extensions/tofile.v/tofile_2", IMAGE_REFUSED,
                     "tofile.v/tofile_2 is a symbolic link to /srv/good.raw, which is a regular file, not a directory "
                     "(the versions in tofile.v are directories)");
        check_listed(&l, "plain", "var/lib/extensions/plain.raw.v/plain_3.raw", IMAGE_REFUSED,
                     "plain.raw.v/plain_3.raw is a directory, not an image file (the versions in plain.raw.v are image "
                     "files)");
        check_listed(&l, "via", "var/lib/extensions/via.raw.v/via_2.raw", IMAGE_REFUSED,
                     "cannot open via.raw.v/via_2.raw: it is a symbolic link to /srv/missing.raw, which does not exist "
                     "under the root (links are resolved inside it)");
        /* Links to images inside the root are those images. */
        check_listed(&l, "good", "var/lib/extensions/good.raw.v/good_2.raw", IMAGE_UNPROBED, NULL);
        check_listed(&l, "gooddir", "var/lib/extensions/gooddir.v/gooddir_2", IMAGE_UNPROBED, NULL);
        {
                const Image *g = find(&l, "good"), *gd = find(&l, "gooddir");
                CHECK(g && S_ISREG(g->st.st_mode) && g->kind == IMAGE_UNKNOWN);
                CHECK(gd && S_ISDIR(gd->st.st_mode) && gd->kind == IMAGE_DIRECTORY);
                CHECK_STREQ(g ? g->path : NULL, "/R/var/lib/extensions/good.raw.v/good_2.raw");
        }
        CHECK(find(&l, "none") == NULL);

        /* The target of a picked link appearing changes the fingerprint (the daemon's cached
         * listing is not reused): the version directory itself does not change. */
        {
                uint64_t before = 0, after = 0;
                CHECK(image_discovery_fingerprint(root, search, "etc/verity.d", &before) == 0);
                CHECK(mkfile(root, "srv/missing.raw") == 0);
                CHECK(image_discovery_fingerprint(root, search, "etc/verity.d", &after) == 0);
                CHECK(before != after);
        }

        /* A top-level link out of the root keeps its words. */
        image_list_free(&l);
        l = (ImageList) {};
        CHECK(mkdir_p_at(root, "etc/extensions", 0755) == 0);
        CHECK(symlinkat(outside, root, "etc/extensions/top.raw") == 0);
        CHECK(image_discover(root, "/R", search_top, IMAGE_CLASS_SYSEXT, &l) == 0);
        CHECK(l.n == 1);
        free(want);
        CHECK(asprintf(&want,
                       "cannot open top.raw: it is a symbolic link to %s, which does not exist under the root (links "
                       "are resolved inside it)",
                       outside) > 0);
        check_listed(&l, "top", "etc/extensions/top.raw", IMAGE_REFUSED, want);

        close(root);
        {
                _cleanup_close_ int tmp = open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                CHECK(tmp >= 0 && rm_rf_at(tmp, dir + strlen("/tmp/")) == 0);
        }
}

/* disk_fast_type(): an erofs superblock alone is erofs; anything that could make the bytes
 * something else as well leaves the decision to libblkid. */
static void test_fast_type(void) {
        static const struct {
                size_t at;
                const char *magic;
                size_t n;
        } others[] = {
                { 510, "\x55\xaa", 2 }, { 512, "EFI PART", 8 }, { 0, "hsqs", 4 },        { 0, "XFSB", 4 },
                { 1080, "\x53\xef", 2 }, { 32769, "CD001", 5 }, { 65600, "_BHRfS_M", 8 },
        };
        uint8_t *buf = calloc(1, DISK_FAST_PROBE_SIZE);

        CHECK(buf);
        if (!buf)
                return;
        CHECK(!disk_fast_type(buf, DISK_FAST_PROBE_SIZE)); /* zeros */
        memcpy(buf + 1024, "\xe2\xe1\xf5\xe0", 4);       /* EROFS_SUPER_MAGIC_V1, little endian */
        buf[1024 + 12] = 12;                                /* blkszbits: 4096 */
        CHECK_STREQ(disk_fast_type(buf, DISK_FAST_PROBE_SIZE), "erofs");
        CHECK(!disk_fast_type(buf, DISK_FAST_PROBE_SIZE - 1)); /* too short to rule the others out */
        CHECK(!disk_fast_type(buf, 2048));
        buf[1024 + 12] = 8; /* a block size erofs does not have */
        CHECK(!disk_fast_type(buf, DISK_FAST_PROBE_SIZE));
        buf[1024 + 12] = 17;
        CHECK(!disk_fast_type(buf, DISK_FAST_PROBE_SIZE));
        buf[1024 + 12] = 9;
        CHECK_STREQ(disk_fast_type(buf, DISK_FAST_PROBE_SIZE), "erofs");
        CHECK_STREQ(disk_fast_type_parts(buf, DISK_FAST_HEAD_SIZE, buf + 32769, buf + 65600), "erofs");
        CHECK(!disk_fast_type_parts(buf, DISK_FAST_HEAD_SIZE - 1, buf + 32769, buf + 65600)); /* a short first page */
        for (size_t i = 0; i < ELEMENTSOF(others); i++) {
                uint8_t saved[8];

                memcpy(saved, buf + others[i].at, others[i].n);
                memcpy(buf + others[i].at, others[i].magic, others[i].n);
                CHECK(!disk_fast_type(buf, DISK_FAST_PROBE_SIZE));
                /* The same from the parts disk_probe_type() reads. */
                CHECK(!disk_fast_type_parts(buf, DISK_FAST_HEAD_SIZE, buf + 32769, buf + 65600));
                memcpy(buf + others[i].at, saved, others[i].n);
        }
        CHECK_STREQ(disk_fast_type(buf, DISK_FAST_PROBE_SIZE), "erofs");
        buf[1024] ^= 1; /* one bit of the magic */
        CHECK(!disk_fast_type(buf, DISK_FAST_PROBE_SIZE));
        free(buf);
}

static unsigned stamp_failures;

/* Not a CHECK of its own: it is called inside them.  *ret_none: discovery saw no sidecar
 * beside it (the probe will not look). */
static uint64_t stamp_none_of(int root, char *const *search, const char *name, bool *ret_none) {
        _cleanup_image_list_ ImageList l = {};

        if (image_discover(root, "/R", search, IMAGE_CLASS_SYSEXT, &l) < 0) {
                stamp_failures++;
                return 0;
        }
        for (size_t i = 0; i < l.n; i++)
                if (streq(l.images[i].name, name)) {
                        *ret_none = l.images[i].no_sidecars;
                        return l.images[i].stamp;
                }
        stamp_failures++;
        return 0;
}

static uint64_t stamp_of(int root, char *const *search, const char *name) {
        bool none;
        return stamp_none_of(root, search, name, &none);
}

static bool no_sidecars(int root, char *const *search, const char *name) {
        bool none = false;
        (void) stamp_none_of(root, search, name, &none);
        return none;
}

/* The verity sidecars are part of a raw image's identity (its stamp): one appearing, going,
 * changing or being a symbolic link changes it, beside a file in a search directory (looked up
 * only when its name is listed there), beside a link to an image elsewhere, and in a version
 * directory; another image's sidecar does not. */
static void test_sidecar_stamp(void) {
        char tmpl[] = "/tmp/test-image-XXXXXX";
        char *dir = mkdtemp(tmpl);
        char *const search[] = { (char *) "var/lib/extensions", NULL };
        _cleanup_close_ int root = -EBADF;
        uint64_t a0, b0, a1, a2, a3, l0, v0;

        CHECK(dir != NULL);
        if (!dir)
                return;
        root = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        CHECK(root >= 0);
        CHECK(mkdir_p_at(root, "var/lib/extensions", 0755) == 0);
        CHECK(mkdir_p_at(root, "srv", 0755) == 0);
        CHECK(mkfile(root, "var/lib/extensions/a.raw") == 0);
        CHECK(mkfile(root, "var/lib/extensions/b.raw") == 0);
        CHECK(mkfile(root, "srv/l.raw") == 0);
        CHECK(symlinkat("/srv/l.raw", root, "var/lib/extensions/l.raw") == 0);
        CHECK(mkdir_p_at(root, "var/lib/extensions/v.raw.v", 0755) == 0);
        CHECK(mkfile(root, "var/lib/extensions/v.raw.v/v_1.raw") == 0);

        a0 = stamp_of(root, search, "a");
        b0 = stamp_of(root, search, "b");
        l0 = stamp_of(root, search, "l");
        v0 = stamp_of(root, search, "v");
        CHECK(a0 != 0 && b0 != 0 && l0 != 0 && v0 != 0);
        CHECK(stamp_of(root, search, "a") == a0); /* nothing changed: the same */
        CHECK(no_sidecars(root, search, "a") && no_sidecars(root, search, "l"));
        CHECK(!no_sidecars(root, search, "v")); /* a version directory's entry: looked up */

        CHECK(mkfile(root, "var/lib/extensions/a.roothash") == 0);
        a1 = stamp_of(root, search, "a");
        CHECK(a1 != a0);
        CHECK(!no_sidecars(root, search, "a") && no_sidecars(root, search, "b"));
        CHECK(stamp_of(root, search, "b") == b0);
        CHECK(mkfile(root, "var/lib/extensions/a.roothash.p7s") == 0);
        a2 = stamp_of(root, search, "a");
        CHECK(a2 != a1 && a2 != a0);
        CHECK(unlinkat(root, "var/lib/extensions/a.roothash", 0) == 0);
        CHECK(unlinkat(root, "var/lib/extensions/a.roothash.p7s", 0) == 0);
        CHECK(stamp_of(root, search, "a") == a0);
        /* A sidecar that is a link, resolved inside the root. */
        CHECK(mkfile(root, "srv/a.verity") == 0);
        CHECK(symlinkat("/srv/a.verity", root, "var/lib/extensions/a.verity") == 0);
        a3 = stamp_of(root, search, "a");
        CHECK(a3 != a0 && a3 != a1 && a3 != a2);
        CHECK(!no_sidecars(root, search, "a"));
        CHECK(unlinkat(root, "var/lib/extensions/a.verity", 0) == 0);
        CHECK(symlinkat("/srv/gone.verity", root, "var/lib/extensions/a.verity") == 0);
        CHECK(stamp_of(root, search, "a") == a0); /* leads nowhere: none */
        /* Beside the link to an image elsewhere: where the link is. */
        CHECK(mkfile(root, "srv/l.roothash") == 0);
        CHECK(stamp_of(root, search, "l") == l0);
        CHECK(mkfile(root, "var/lib/extensions/l.roothash") == 0);
        CHECK(stamp_of(root, search, "l") != l0);
        /* In a version directory: beside the picked entry. */
        CHECK(mkfile(root, "var/lib/extensions/v.roothash") == 0);
        CHECK(stamp_of(root, search, "v") == v0);
        CHECK(mkfile(root, "var/lib/extensions/v.raw.v/v_1.roothash") == 0);
        CHECK(stamp_of(root, search, "v") != v0);
        /* Another image's sidecar of a similar name does not count. */
        CHECK(mkfile(root, "var/lib/extensions/bb.roothash") == 0);
        CHECK(mkfile(root, "var/lib/extensions/b.raw.roothash") == 0);
        CHECK(stamp_of(root, search, "b") == b0);
        CHECK(stamp_failures == 0);

        root = safe_close(root);
        {
                _cleanup_close_ int tmp = open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                CHECK(tmp >= 0 && rm_rf_at(tmp, dir + strlen("/tmp/")) == 0);
        }
}

/* A record of the worker form, for image "name". */
static char *worker_record(const char *name) {
        _cleanup_json_ json_object *o = NULL;
        Image img = { .name = (char *) name, .path = (char *) "/var/lib/extensions/x.raw", .kind = IMAGE_EROFS,
                      .verdict = IMAGE_COMPATIBLE, .hierarchies = 1, .root_fd = -EBADF };

        o = image_to_json(&img, IMAGE_JSON_WORKER);
        return o ? strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN)) : NULL;
}

/* A cache of three entries, ids 5, 6 and 7, each on an fd of its own. */
static void old_cache(ImageList *l) {
        static const char *const names[] = { "a", "b", "c" };

        l->images = calloc(3, sizeof(Image));
        CHECK(l->images != NULL);
        for (size_t i = 0; i < 3; i++)
                l->images[i] = (Image) { .name = strdup(names[i]), .root_fd = open("/dev/null", O_RDONLY | O_CLOEXEC),
                                         .cache_id = 5 + i, .verdict = IMAGE_COMPATIBLE };
        l->n = 3;
}

static int handover(const char *text, ImageList *old, int *fds, size_t n_fds, uint64_t *next, ImageList *ret) {
        _cleanup_json_ json_object *a = json_tokener_parse(text);

        /* (No CHECK() here: it is called inside one.) */
        return a ? image_cache_from_handover(a, old, fds, n_fds, next, ret) : -EINVAL;
}

/* image_cache_from_handover(): the next daemon cache is the entries the worker names, moved,
 * and its records with their fds, in the worker's order; what is malformed moves and takes
 * nothing. */
static void test_cache_handover(void) {
        _cleanup_free_ char *rec = worker_record("d"), *text = NULL;
        _cleanup_image_list_ ImageList old = {}, l = {};
        int fds[2], fd_b, fd_c;
        uint64_t next = 8;

        CHECK(rec != NULL);
        old_cache(&old);
        fd_b = old.images[1].root_fd;
        fd_c = old.images[2].root_fd;
        fds[0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
        CHECK(fds[0] >= 0);

        /* c kept, a record for d, b kept; a (5) not named: it stays in old for the caller. */
        CHECK(asprintf(&text, "[{\"cached\":7},%s,{\"cached\":6}]", rec) > 0);
        CHECK(handover(text, &old, fds, 1, &next, &l) == 0);
        CHECK(l.n == 3);
        CHECK_STREQ(l.images[0].name, "c");
        CHECK(l.images[0].root_fd == fd_c && l.images[0].cache_id == 7);
        CHECK_STREQ(l.images[1].name, "d");
        CHECK(l.images[1].root_fd >= 0 && fds[0] == -EBADF && l.images[1].cache_id == 8);
        CHECK(l.images[1].verdict == IMAGE_COMPATIBLE);
        CHECK_STREQ(l.images[2].name, "b");
        CHECK(l.images[2].root_fd == fd_b && l.images[2].cache_id == 6);
        CHECK(next == 9);
        CHECK(old.images[0].root_fd >= 0 && old.images[1].root_fd < 0 && old.images[2].root_fd < 0);
        image_list_free(&l);
        image_list_free(&old);

        /* An id the daemon dropped meanwhile is left out; an empty handover is an empty cache. */
        old_cache(&old);
        CHECK(handover("[{\"cached\":9},{\"cached\":5}]", &old, fds, 0, &next, &l) == 0);
        CHECK(l.n == 1 && l.images[0].cache_id == 5);
        image_list_free(&l);
        CHECK(handover("[]", &old, fds, 0, &next, &l) == 0);
        CHECK(l.n == 0);
        image_list_free(&l);
        image_list_free(&old);

        /* Malformed: nothing moved, no fd taken. */
        old_cache(&old);
        fds[0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
        fds[1] = open("/dev/null", O_RDONLY | O_CLOEXEC);
        CHECK(fds[0] >= 0 && fds[1] >= 0);
        free(text);
        text = NULL;
        CHECK(asprintf(&text, "[%s]", rec) > 0);
        CHECK(handover(text, &old, fds, 2, &next, &l) == -EBADMSG);      /* more fds than records */
        CHECK(handover(text, &old, fds, 0, &next, &l) == -EBADMSG);      /* fewer */
        CHECK(handover("[{\"cached\":6},{\"cached\":6}]", &old, fds, 0, &next, &l) == -EBADMSG); /* twice */
        CHECK(handover("[{\"cached\":0}]", &old, fds, 0, &next, &l) == -EBADMSG);
        CHECK(handover("[{\"cached\":\"6\"}]", &old, fds, 0, &next, &l) == -EBADMSG);
        CHECK(handover("[{\"cached\":6,\"name\":\"b\"}]", &old, fds, 0, &next, &l) == -EBADMSG);
        CHECK(handover("[6]", &old, fds, 0, &next, &l) == -EBADMSG);
        CHECK(handover("[{\"name\":\"broken\"}]", &old, fds, 1, &next, &l) == -EBADMSG);
        CHECK(handover("{}", &old, fds, 0, &next, &l) == -EBADMSG);
        CHECK(fds[0] >= 0 && fds[1] >= 0);
        for (size_t i = 0; i < 3; i++)
                CHECK(old.images[i].root_fd >= 0 && old.images[i].cache_id == 5 + i);
        CHECK(next == 9);
        safe_close(fds[0]);
        safe_close(fds[1]);
}

int main(void) {
        test_cache_handover();
        test_fast_type();
        test_sidecar_stamp();
        test_pick();
        test_problem();
        test_discover();
        return tap_finish();
}
