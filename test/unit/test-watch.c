/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Layers watched while merged (watch.h): the judgement of recorded identity against observed
 * facts, the descriptions, the image's path below the root, and changed.json validated on
 * read. */
#include <errno.h>
#include <stdio.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "fd-util.h"
#include "image-json.h"
#include "journal.h"
#include "tests.h"
#include "util.h"
#include "watch.h"

static Image recorded_raw(void) {
        Image img = { .kind = IMAGE_EROFS, .verdict = IMAGE_COMPATIBLE, .hierarchies = 1, .root_fd = -EBADF };

        img.st.st_dev = 2049;
        img.st.st_ino = 12;
        img.st.st_size = 4096;
        img.st.st_mtim.tv_sec = 100;
        img.st.st_mtim.tv_nsec = 5;
        img.loop_devnum = makedev(7, 3);
        img.loop_diskseq = 40;
        return img;
}

/* The facts of an image that did not change: the same stat, the same diskseq. */
static WatchFacts same_facts(const Image *img) {
        WatchFacts f = { .stat_error = 0, .st = img->st, .diskseq_error = 0, .diskseq = img->loop_diskseq };
        return f;
}

static void test_judge(void) {
        Image img = recorded_raw(), dir = recorded_raw(), fileback = recorded_raw();
        WatchFacts f;

        dir.kind = IMAGE_DIRECTORY;
        dir.loop_devnum = dir.loop_diskseq = 0;
        fileback.loop_devnum = fileback.loop_diskseq = 0; /* erofs mounted from its file */

        f = same_facts(&img);
        CHECK(watch_judge(&img, &f) == WATCH_UNCHANGED);

        /* LOOP_CHANGE_FD: the file is untouched, the device's diskseq moved on. */
        f = same_facts(&img);
        f.diskseq = 41;
        CHECK(watch_judge(&img, &f) == WATCH_MEDIA_CHANGED);
        /* A media change uevent, whatever the diskseq read says. */
        f = same_facts(&img);
        f.media_change_seen = true;
        CHECK(watch_judge(&img, &f) == WATCH_MEDIA_CHANGED);
        /* The device gone from under the layer. */
        f = same_facts(&img);
        f.diskseq_error = -ENOENT;
        CHECK(watch_judge(&img, &f) == WATCH_MEDIA_CHANGED);
        /* A diskseq that cannot be read is no evidence. */
        f = same_facts(&img);
        f.diskseq_error = -EACCES;
        f.diskseq = 0;
        CHECK(watch_judge(&img, &f) == WATCH_UNCHANGED);
        /* A media change outranks the file being deleted as well. */
        f = same_facts(&img);
        f.diskseq = 41;
        f.stat_error = -ENOENT;
        CHECK(watch_judge(&img, &f) == WATCH_MEDIA_CHANGED);

        /* Renamed over: another inode at the path. */
        f = same_facts(&img);
        f.st.st_ino = 13;
        CHECK(watch_judge(&img, &f) == WATCH_REPLACED);
        f.st.st_ino = 12;
        f.st.st_dev = 2050;
        CHECK(watch_judge(&img, &f) == WATCH_REPLACED);

        /* Deleted. */
        f = same_facts(&img);
        f.stat_error = -ENOENT;
        CHECK(watch_judge(&img, &f) == WATCH_DELETED);
        /* Cannot tell (EACCES): not judged. */
        f = same_facts(&img);
        f.stat_error = -EACCES;
        CHECK(watch_judge(&img, &f) == WATCH_UNCHANGED);

        /* Written in place: size or mtime differ, or the write was seen though the time was
         * set back. */
        f = same_facts(&img);
        f.st.st_mtim.tv_nsec = 6;
        CHECK(watch_judge(&img, &f) == WATCH_MODIFIED);
        f = same_facts(&img);
        f.st.st_size = 8192;
        CHECK(watch_judge(&img, &f) == WATCH_MODIFIED);
        f = same_facts(&img);
        f.modify_seen = true;
        CHECK(watch_judge(&img, &f) == WATCH_MODIFIED);
        /* A write seen, then the file deleted: the kernel read the written bytes. */
        f.stat_error = -ENOENT;
        CHECK(watch_judge(&img, &f) == WATCH_MODIFIED);
        /* A chmod or chown changes neither. */
        f = same_facts(&img);
        f.st.st_mode = 0600;
        f.st.st_ctim.tv_sec = 999;
        CHECK(watch_judge(&img, &f) == WATCH_UNCHANGED);

        /* File-backed erofs: no device to look at, the file is all. */
        f = same_facts(&fileback);
        f.diskseq_error = -EINVAL;
        CHECK(watch_judge(&fileback, &f) == WATCH_UNCHANGED);
        f.st.st_size = 1;
        CHECK(watch_judge(&fileback, &f) == WATCH_MODIFIED);

        /* Directories: replaced or deleted only; entries changing change its mtime. */
        f = same_facts(&dir);
        f.st.st_mtim.tv_sec = 200;
        f.st.st_size = 8192;
        f.modify_seen = true;
        CHECK(watch_judge(&dir, &f) == WATCH_UNCHANGED);
        f.st.st_ino = 99;
        CHECK(watch_judge(&dir, &f) == WATCH_REPLACED);
        f.stat_error = -ENOENT;
        CHECK(watch_judge(&dir, &f) == WATCH_DELETED);
}

static void test_describe(void) {
        Image img = recorded_raw();
        WatchFacts f = same_facts(&img);
        _cleanup_free_ char *a = NULL, *b = NULL, *c = NULL, *d = NULL;

        f.diskseq = 41;
        CHECK(watch_describe(&img, WATCH_MEDIA_CHANGED, &f, &a) == 0);
        CHECK(a && strstr(a, "loop device 7:3") && strstr(a, "40 at merge, 41 now"));
        f.diskseq_error = -ENOENT;
        CHECK(watch_describe(&img, WATCH_MEDIA_CHANGED, &f, &b) == 0);
        CHECK(b && strstr(b, "is gone"));
        CHECK(watch_describe(&img, WATCH_REPLACED, &f, &c) == 0);
        CHECK(c && strstr(c, "replaced"));
        CHECK(watch_describe(&img, WATCH_DELETED, &f, &d) == 0);
        CHECK(d && strstr(d, "deleted"));

        CHECK_STREQ(watch_how_to_string(WATCH_MEDIA_CHANGED), "media-changed");
        CHECK(watch_how_from_string("replaced") == WATCH_REPLACED);
        CHECK(watch_how_from_string("bogus") < 0);
}

static void test_rel(void) {
        CHECK_STREQ(watch_image_rel("/", "/var/lib/extensions/a.raw"), "var/lib/extensions/a.raw");
        CHECK_STREQ(watch_image_rel("/tmp/r", "/tmp/r/var/lib/extensions/a.raw"), "var/lib/extensions/a.raw");
        CHECK(watch_image_rel("/tmp/r", "/tmp/rx/var/a.raw") == NULL);
        CHECK(watch_image_rel("/tmp/r", "/tmp/r") == NULL);
        CHECK(watch_image_rel("/tmp/r", "/elsewhere/a.raw") == NULL);
}

static void journal_with(Journal *j, uint64_t generation) {
        Image *img = calloc(2, sizeof(Image));

        img[0] = recorded_raw();
        img[0].name = strdup("a");
        img[0].path = strdup("/var/lib/extensions/a.raw");
        img[1] = recorded_raw();
        img[1].verdict = IMAGE_INCOMPATIBLE;
        img[1].name = strdup("b");
        img[1].path = strdup("/var/lib/extensions/b.raw");
        *j = (Journal) { .generation = generation, .images = { .images = img, .n = 2 } };
}

static int parse(const char *text, const Journal *j, WatchChangeList *l) {
        watch_change_list_done(l);
        return watch_changes_from_json(text, j, l);
}

static void test_changed_file(void) {
        _cleanup_journal_ Journal j = {};
        _cleanup_(watch_change_list_done) WatchChangeList l = {}, back = {};
        _cleanup_free_ char *text = NULL;

        journal_with(&j, 5);
        CHECK(watch_change_add(&l, "a", "/var/lib/extensions/a.raw", WATCH_MODIFIED, "modified in place", 5, 1234) == 0);
        CHECK(watch_changes_to_json(&l, 5, &text) == 0);
        CHECK(parse(text, &j, &back) == 0 && back.n == 1);
        CHECK(back.n == 1 && back.changes[0].how == WATCH_MODIFIED && back.changes[0].generation == 5 &&
              back.changes[0].since == 1234 && streq(back.changes[0].description, "modified in place"));

        /* Of another generation: nothing changed under this one. */
        j.generation = 6;
        CHECK(parse(text, &j, &back) == 0 && back.n == 0);
        j.generation = 5;

        /* An image that is not live now (not merged, or unknown) is dropped. */
        CHECK(parse("{\"generation\":5,\"changes\":[{\"name\":\"b\",\"path\":\"/var/lib/extensions/b.raw\",\"how\":\"deleted\","
                    "\"description\":\"x\",\"since\":1}]}",
                    &j, &back) == 0 &&
              back.n == 0);
        CHECK(parse("{\"generation\":5,\"changes\":[{\"name\":\"z\",\"path\":\"/etc/passwd\",\"how\":\"deleted\","
                    "\"description\":\"x\",\"since\":1}]}",
                    &j, &back) == 0 &&
              back.n == 0);
        /* Once per image. */
        CHECK(parse("{\"generation\":5,\"changes\":[{\"name\":\"a\",\"path\":\"/var/lib/extensions/a.raw\",\"how\":\"deleted\","
                    "\"description\":\"x\",\"since\":1},{\"name\":\"a\",\"path\":\"/var/lib/extensions/a.raw\",\"how\":\"replaced\","
                    "\"description\":\"y\",\"since\":2}]}",
                    &j, &back) == 0 &&
              back.n == 1 && back.changes[0].how == WATCH_DELETED);

        /* Invalid documents. */
        CHECK(parse("", &j, &back) == -EBADMSG);
        CHECK(parse("[]", &j, &back) == -EBADMSG);
        CHECK(parse("{\"changes\":[]}", &j, &back) == -EBADMSG);
        CHECK(parse("{\"generation\":\"5\",\"changes\":[]}", &j, &back) == -EBADMSG);
        CHECK(parse("{\"generation\":5,\"changes\":{}}", &j, &back) == -EBADMSG);
        CHECK(parse("{\"generation\":5,\"changes\":[1]}", &j, &back) == -EBADMSG);
        CHECK(parse("{\"generation\":5,\"changes\":[{\"name\":\"a\",\"path\":\"/var/lib/extensions/a.raw\",\"how\":\"unchanged\","
                    "\"description\":\"x\",\"since\":1}]}",
                    &j, &back) == -EBADMSG);
        CHECK(parse("{\"generation\":5,\"changes\":[{\"name\":\"a\",\"path\":\"/var/lib/extensions/a.raw\",\"how\":\"eaten\","
                    "\"description\":\"x\",\"since\":1}]}",
                    &j, &back) == -EBADMSG);
        CHECK(parse("{\"generation\":5,\"changes\":[{\"name\":\"a\",\"path\":\"/var/lib/extensions/a.raw\",\"how\":\"deleted\","
                    "\"since\":1}]}",
                    &j, &back) == -EBADMSG);
        CHECK(parse("{\"generation\":5,\"changes\":[{\"name\":\"a\",\"path\":\"/var/lib/extensions/a.raw\",\"how\":\"deleted\","
                    "\"description\":\"x\",\"since\":-1}]}",
                    &j, &back) == -EBADMSG);
}

static void test_journal_fields(void) {
        Image img = recorded_raw();
        _cleanup_image_list_ ImageList l = {};
        json_object *o, *a;

        img.name = (char *) "a";
        img.path = (char *) "/var/lib/extensions/a.raw";
        img.fstype = (char *) "erofs";
        o = image_to_json(&img, IMAGE_JSON_JOURNAL);
        a = json_object_new_array();
        json_object_array_add(a, o);
        CHECK(image_list_from_json(a, IMAGE_JSON_JOURNAL, &l) == 0 && l.n == 1);
        CHECK(l.n == 1 && l.images[0].loop_devnum == makedev(7, 3) && l.images[0].loop_diskseq == 40);
        json_object_put(a);
}

/* watch_observe() with the directory kept open for the next image finds what it finds without:
 * the file in the root, a symbolic link resolved inside the root (an absolute one to a file of
 * the root, not of the host), a missing file, a missing directory, a file under a symbolic link to
 * a directory, and images in turn in different directories. */
static void test_observe_cache(void) {
        char tmpl[] = "/tmp/test-watch.XXXXXX";
        char *root = mkdtemp(tmpl);
        char path[PATH_MAX];
        int root_fd;
        static const char *const rels[] = {
                "ext/a.raw", "ext/b.raw", "ext/abs.raw", "ext/rel.raw", "ext/gone.raw", "none/x.raw",
                "ext2/c.raw", "ext/a.raw", "dirlink/b.raw", "ext/dangling.raw", "ext/sub", "ext2/c.raw",
        };
        WatchDirCache cache = WATCH_DIR_CACHE_INIT;

        CHECK(root);
        snprintf(path, sizeof(path), "%s/ext", root);
        CHECK(mkdir(path, 0755) == 0);
        snprintf(path, sizeof(path), "%s/ext/sub", root);
        CHECK(mkdir(path, 0755) == 0);
        snprintf(path, sizeof(path), "%s/ext2", root);
        CHECK(mkdir(path, 0755) == 0);
        snprintf(path, sizeof(path), "%s/target", root);
        CHECK(mkdir(path, 0755) == 0);
        const char *files[] = { "ext/a.raw", "ext/b.raw", "ext2/c.raw", "target/t.raw" };
        for (size_t i = 0; i < ELEMENTSOF(files); i++) {
                snprintf(path, sizeof(path), "%s/%s", root, files[i]);
                int fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
                CHECK(fd >= 0);
                CHECK(write(fd, files[i], i + 1) == (ssize_t) (i + 1));
                close(fd);
        }
        snprintf(path, sizeof(path), "%s/ext/abs.raw", root);
        CHECK(symlink("/target/t.raw", path) == 0); /* inside the root: its target/t.raw */
        snprintf(path, sizeof(path), "%s/ext/rel.raw", root);
        CHECK(symlink("../ext2/c.raw", path) == 0);
        snprintf(path, sizeof(path), "%s/ext/dangling.raw", root);
        CHECK(symlink("/nonexistent", path) == 0);
        snprintf(path, sizeof(path), "%s/dirlink", root);
        CHECK(symlink("/ext", path) == 0);
        root_fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
        CHECK(root_fd >= 0);

        for (size_t i = 0; i < ELEMENTSOF(rels); i++) {
                Image img = { .kind = IMAGE_EROFS, .verdict = IMAGE_COMPATIBLE, .hierarchies = 1, .root_fd = -EBADF };
                WatchFacts a, b;

                snprintf(path, sizeof(path), "%s/%s", root, rels[i]);
                img.path = path;
                watch_observe(root_fd, root, &img, NULL, &a);
                watch_observe(root_fd, root, &img, &cache, &b);
                CHECK(a.stat_error == b.stat_error);
                if (a.stat_error == 0) {
                        CHECK(a.st.st_dev == b.st.st_dev);
                        CHECK(a.st.st_ino == b.st.st_ino);
                        CHECK(a.st.st_size == b.st.st_size);
                        CHECK((a.st.st_mode & S_IFMT) == (b.st.st_mode & S_IFMT));
                }
                if (streq(rels[i], "ext/abs.raw"))
                        CHECK(a.stat_error == 0 && a.st.st_size == 4); /* target/t.raw of the root */
                if (streq(rels[i], "ext/gone.raw") || streq(rels[i], "none/x.raw") || streq(rels[i], "ext/dangling.raw"))
                        CHECK(a.stat_error == -ENOENT);
        }
        watch_dir_cache_done(&cache);
        CHECK(cache.fd < 0 && !cache.dir);
        close(root_fd);
        char cmd[PATH_MAX + 16];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
        CHECK(system(cmd) == 0);
}

int main(void) {
        test_judge();
        test_describe();
        test_rel();
        test_changed_file();
        test_journal_fields();
        test_observe_cache();
        return tap_finish();
}
