/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The mountinfo parser (mounts.c): every field of proc_pid_mountinfo(5) as the kernel writes
 * it, optional fields or none, the kernel's octal escapes, a deleted mount point, an empty
 * source, a last line without a newline; lines that are not mountinfo refused as a whole;
 * this process's own table, where "/" is the mount statx() says it is; and the table kept
 * within one operation (mount_table_cache_begin()), which must show every mount and unmount
 * made since, by this process, by a forked child in the same namespace, or after this process
 * entered another namespace; and a hierarchy inspected while mounts come and go on it, which
 * openat2(RESOLVE_BENEATH) answers with EXDEV when the mount it walked onto is detached
 * meanwhile: read again, never an error. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "inspect.h"
#include "mounts.h"
#include "tests.h"
#include "util.h"

static int parse(const char *text, MountTable *ret) {
        char *copy = strdup(text);
        int r;

        if (!copy)
                return -ENOMEM;
        r = mount_table_parse(copy, ret);
        if (r < 0)
                free(copy);
        return r;
}

static void test_fields(void) {
        _cleanup_(mount_table_done) MountTable t = {};
        const MountRow *m;

        CHECK(parse("36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue\n"
                    "25 1 0:22 / /usr rw,relatime shared:5 master:7 - overlay sysextd ro,lowerdir+=/a\n"
                    "26 25 0:23 / /usr/share\\040with\\011tab\\134x rw - tmpfs  rw,size=10k\n"
                    "27 1 254:3 /sub\\012dir /srv/gone\\040(deleted) ro,nosuid - erofs /dev/loop3 ro\n"
                    "4294967295 27 7:1 / / rw unbindable - btrfs /dev/a\\040b rw,space_cache=v2",
                    &t) == 0);
        CHECK(t.n == 5);
        if (t.n != 5)
                return;
        m = &t.rows[0];
        CHECK(m->id == 36 && m->parent_id == 35 && m->devno == makedev(98, 0));
        CHECK_STREQ(m->root, "/mnt1");
        CHECK_STREQ(m->target, "/mnt2");
        CHECK_STREQ(m->optional, "master:1");
        CHECK_STREQ(m->fstype, "ext3");
        CHECK_STREQ(m->source, "/dev/root");
        CHECK_STREQ(m->super_options, "rw,errors=continue");
        m = &t.rows[1];
        CHECK_STREQ(m->optional, "shared:5 master:7");
        CHECK_STREQ(m->source, "sysextd");
        CHECK_STREQ(m->super_options, "ro,lowerdir+=/a");
        m = &t.rows[2];
        CHECK_STREQ(m->target, "/usr/share with\ttab\\x");
        CHECK_STREQ(m->optional, "");
        CHECK_STREQ(m->source, ""); /* the kernel shows none */
        CHECK_STREQ(m->super_options, "rw,size=10k");
        m = &t.rows[3];
        CHECK_STREQ(m->root, "/sub\ndir");
        CHECK_STREQ(m->target, "/srv/gone");
        CHECK(m->devno == makedev(254, 3));
        m = &t.rows[4];
        CHECK(m->id == 4294967295ULL);
        CHECK_STREQ(m->optional, "unbindable");
        CHECK_STREQ(m->source, "/dev/a b");
        CHECK(mount_table_find(&t, 27) == &t.rows[3]);
        CHECK(mount_table_find(&t, 28) == NULL);
}

/* Every field of every row points into the table's text, which a table kept within an
 * operation relies on (it is copied by moving the pointers, mounts.c): a private mount's
 * empty optional fields too. */
static void test_fields_in_text(void) {
        _cleanup_(mount_table_done) MountTable t = {};
        const char *text = "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue\n"
                           "37 35 0:5 / /private rw - tmpfs t rw\n"
                           "38 35 0:6 / /empty rw - tmpfs  rw\n";
        size_t len = strlen(text);

        CHECK(parse(text, &t) == 0 && t.n == 3);
        for (size_t i = 0; i < t.n; i++) {
                const MountRow *r = &t.rows[i];
                const char *f[] = { r->root, r->target, r->optional, r->fstype, r->source, r->super_options };

                for (size_t k = 0; k < ELEMENTSOF(f); k++)
                        CHECK(f[k] >= t.text && f[k] <= t.text + len);
        }
        CHECK(t.n == 3 && streq(t.rows[1].optional, "") && streq(t.rows[2].source, ""));
}

static void test_refused(void) {
        static const char *const bad[] = {
                "x 1 0:1 / / rw - ext4 /dev/a rw\n",                  /* an id that is no number */
                "1 -1 0:1 / / rw - ext4 /dev/a rw\n",                 /* nor a parent */
                "1 1 0-1 / / rw - ext4 /dev/a rw\n",                  /* a device that is none */
                "1 1 0:1x / / rw - ext4 /dev/a rw\n",
                "1 1 0:1 / / rw shared:1 ext4 /dev/a rw\n",           /* no separator */
                "1 1 0:1 / / rw - ext4 /dev/a\n",                     /* no superblock options */
                "1 1 0:1 / / rw -\n",                                 /* nothing after it */
                "1 1 0:1 /\n",                                        /* cut short */
                "1 1 0:1 / / rw - ext4 /dev/a rw\n\n",                /* an empty line */
                "1 1 0:1 / / rw - ext4 /dev/a rw\n2 1 0:2 / /x rw\n", /* one bad line: all refused */
        };

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                MountTable t = {};
                int r = parse(bad[i], &t);

                CHECK(r == -EBADMSG);
                if (r >= 0)
                        mount_table_done(&t);
        }
        {
                _cleanup_(mount_table_done) MountTable t = {};
                CHECK(parse("", &t) == 0 && t.n == 0);
        }
}

static void test_own_table(void) {
        _cleanup_close_ int fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
        MountIdentity id = {};
        MountEntry e = {};
        int r;

        CHECK(fd >= 0 && mount_identity_of_fd(fd, &id) == 0);
        r = mountinfo_find(id.id, &e);
        /* In a chroot the mount that holds "/" is not listed. */
        if (r == -ENOENT)
                printf("# the mount of / is not in this process's mountinfo\n");
        else {
                /* (The device may differ from statx()'s on a btrfs subvolume: not compared.) */
                CHECK(r == 0 && e.id == id.id);
                mount_entry_done(&e);
        }
        CHECK(mountinfo_find(0, &e) == -ENOENT);
}

static int count_ours(const char *dir) {
        _cleanup_strv_free_ char **l = NULL;

        if (mount_targets_of("tmpfs", "sysextd-cache-test", dir, &l) < 0)
                return -1;
        return (int) strv_length(l);
}

static int mount_ours(const char *dir, const char *sub) {
        _cleanup_free_ char *p = path_join(dir, sub);

        if (!p || (mkdir(p, 0755) < 0 && errno != EEXIST))
                return -1;
        return mount("sysextd-cache-test", p, "tmpfs", 0, NULL);
}

/* Run in a child with a private namespace of its own; returns a bit per step that failed. */
static int cache_steps(const char *dir) {
        int failed = 0, status = 0;
        pid_t pid;

        mount_table_cache_begin();
        if (count_ours(dir) != 0) /* read, and kept */
                failed |= 1 << 0;
        if (mount_ours(dir, "a") < 0 || count_ours(dir) != 1) /* a mount since */
                failed |= 1 << 1;
        if (count_ours(dir) != 1) /* none since */
                failed |= 1 << 2;
        if (mount_ours(dir, "b") < 0 || count_ours(dir) != 2)
                failed |= 1 << 3;
        {
                _cleanup_free_ char *b = path_join(dir, "b");
                if (!b || umount2(b, 0) < 0 || count_ours(dir) != 1) /* an unmount since */
                        failed |= 1 << 4;
        }
        /* A child in this namespace mounts, then reads: it must not take this process's event. */
        pid = fork();
        if (pid == 0)
                _exit(mount_ours(dir, "c") < 0 || count_ours(dir) != 2);
        if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0 ||
            count_ours(dir) != 2)
                failed |= 1 << 5;
        /* Another namespace (a copy): its table, not the one kept. */
        if (unshare(CLONE_NEWNS) < 0 || mount_ours(dir, "d") < 0 || count_ours(dir) != 3)
                failed |= 1 << 6;
        /* A private mount (no optional fields: the parser's "" literal, not the table's
         * text) and a shared one read through the kept table are what a plain read says. */
        {
                _cleanup_free_ char *a = path_join(dir, "a"), *d = path_join(dir, "d");
                _cleanup_close_ int afd = a ? open(a, O_PATH | O_CLOEXEC) : -EBADF, dfd = -EBADF;
                MountIdentity ia = {}, id = {};
                MountEntry c1 = {}, c2 = {}, u1 = {}, u2 = {};
                int k = 0;

                if (d && mount(NULL, d, NULL, MS_SHARED, NULL) < 0)
                        k = -1;
                dfd = d ? open(d, O_PATH | O_CLOEXEC) : -EBADF;
                if (k < 0 || afd < 0 || dfd < 0 || mount_identity_of_fd(afd, &ia) < 0 || mount_identity_of_fd(dfd, &id) < 0)
                        k = -1;
                if (k >= 0) {
                        mount_table_cache_begin();
                        if (mountinfo_find(ia.id, &c1) < 0 || mountinfo_find(id.id, &c2) < 0)
                                k = -1;
                        mount_table_cache_end();
                }
                if (k >= 0 && (mountinfo_find(ia.id, &u1) < 0 || mountinfo_find(id.id, &u2) < 0))
                        k = -1;
                if (k < 0 || c1.shared || c1.slave || c1.shared != u1.shared || !streq_ptr(c1.fstype, u1.fstype) ||
                    !streq_ptr(c1.source, u1.source) || !c2.shared || c2.shared != u2.shared || c2.slave != u2.slave ||
                    !streq_ptr(c2.source, u2.source))
                        failed |= 1 << 8;
                mount_entry_done(&c1);
                mount_entry_done(&c2);
                mount_entry_done(&u1);
                mount_entry_done(&u2);
        }
        mount_table_cache_end();
        if (count_ours(dir) != 3)
                failed |= 1 << 7;
        return failed;
}

/* A new directory for a test that mounts in a namespace of its own (tmpl: "...XXXXXX"). */
static char *test_dir(char *tmpl) {
        char *dir = mkdtemp(tmpl);

        CHECK(dir);
        return dir;
}

/* Runs fn(dir, &aux) in a child with a private mount namespace of its own; its result and aux
 * in ret.  False (after saying so) where this process cannot have one (not root). */
static bool in_private_namespace(const char *dir, int (*fn)(const char *dir, int *aux), int ret[2]) {
        int p[2], status = 0;
        bool ok;
        pid_t pid;

        ret[0] = -1;
        ret[1] = 0;
        if (pipe(p) < 0)
                return false;
        pid = fork();
        if (pid == 0) {
                int res[2] = { -1, 0 };

                if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                        _exit(255);
                res[0] = fn(dir, &res[1]);
                (void) !write(p[1], res, sizeof(res));
                _exit(0);
        }
        close(p[1]);
        ok = pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) != 255;
        if (pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 255)
                printf("# skipped: no mount namespace of our own (not root?)\n");
        else
                CHECK(ok && read(p[0], ret, 2 * sizeof(int)) == 2 * sizeof(int));
        close(p[0]);
        return ok;
}

static int cache_steps_fn(const char *dir, int *aux) {
        return cache_steps(dir);
}

static void test_cache(void) {
        char tmpl[] = "/tmp/test-mountinfo-XXXXXX";
        char *dir = test_dir(tmpl);
        int got[2];

        if (!dir)
                return;
        if (in_private_namespace(dir, cache_steps_fn, got))
                for (int k = 0; k < 9; k++) {
                        printf("# step %d\n", k);
                        CHECK(got[0] >= 0 && !(got[0] & (1 << k)));
                }
        /* The mounts were in the child's namespace only: what is left are directories. */
        for (const char *c = "abcd"; *c; c++) {
                char sub[2] = { *c, 0 };
                _cleanup_free_ char *sd = path_join(dir, sub);

                if (sd)
                        (void) rmdir(sd);
        }
        CHECK(rmdir(dir) == 0);
}

/* In a child with a private namespace: a grandchild mounts a tmpfs on ROOT/usr and detaches it
 * lazily, again and again, while this process inspects usr; returns how many inspections
 * failed, and with what (the last error) in *ret_error. */
static int inspect_race(const char *root, int *ret_error) {
        _cleanup_free_ char *usr = path_join(root, "usr");
        _cleanup_close_ int root_fd = -EBADF;
        int failed = 0;
        pid_t pid;

        if (!usr || mount("sysextd-race-root", root, "tmpfs", 0, NULL) < 0 || mkdir(usr, 0755) < 0)
                return -1;
        root_fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (root_fd < 0)
                return -1;
        pid = fork();
        if (pid == 0)
                for (;;) {
                        (void) mount("sysextd-race", usr, "tmpfs", 0, NULL);
                        (void) umount2(usr, MNT_DETACH);
                }
        if (pid < 0)
                return -1;
        for (unsigned i = 0; i < 20000; i++) {
                HierarchyState h = {};
                int r = hierarchy_inspect(root_fd, root, "usr", NULL, &h);

                if (r < 0 && r != -EAGAIN) { /* EAGAIN: raced eight times in a row, said so */
                        failed++;
                        *ret_error = -r;
                }
                hierarchy_state_done(&h);
        }
        (void) kill(pid, SIGKILL);
        (void) waitpid(pid, NULL, 0);
        return failed;
}

static void test_inspect_race(void) {
        char tmpl[] = "/tmp/test-mountinfo-XXXXXX";
        char *dir = test_dir(tmpl);
        int got[2];

        if (!dir)
                return;
        if (in_private_namespace(dir, inspect_race, got)) {
                printf("# %d of 20000 inspections failed (last: %s)\n", got[0], got[1] ? strerror(got[1]) : "none");
                CHECK(got[0] == 0);
        }
        CHECK(rmdir(dir) == 0);
}

int main(void) {
        test_fields();
        test_refused();
        test_fields_in_text();
        test_own_table();
        test_cache();
        test_inspect_race();
        return tap_finish();
}
