/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The mutable modes' table (mutable.h): pure, every row and refusal. */
#include <errno.h>

#include "mutable.h"
#include "tests.h"
#include "util.h"

static MutableFacts facts(bool exists, bool dir, bool self, mode_t dir_mode) {
        return (MutableFacts) { .hierarchy_exists = exists, .hierarchy_mode = 0755, .dir_exists = dir,
                                .dir_is_hierarchy = self, .dir_mode = dir_mode, .dir_parent_same_mount = true };
}

static int decide(MutableMode m, MutableFacts f, MutableDecision *d, char **msg) {
        free(*msg);
        *msg = NULL;
        return mutable_decide(m, &f, "/R/opt", "/R/var/lib/extensions.mutable/opt", d, msg);
}

int main(void) {
        MutableDecision d;
        char *msg = NULL;
        MutableFacts f;

        /* Names, booleans. */
        CHECK(mutable_mode_from_string("ephemeral-import") == MUTABLE_EPHEMERAL_IMPORT);
        CHECK(mutable_mode_from_string("true") == MUTABLE_YES && mutable_mode_from_string("off") == MUTABLE_NO);
        CHECK(mutable_mode_from_string("enabled") == -EINVAL && mutable_mode_from_string("") == -EINVAL);
        CHECK_STREQ(mutable_mode_to_string(MUTABLE_AUTO), "auto");

        /* no: read-only, the directory ignored, no tree without content. */
        CHECK(decide(MUTABLE_NO, facts(true, true, false, 0700), &d, &msg) == 0);
        CHECK(d.upper == MUTABLE_UPPER_NONE && !d.import_dir && d.base_layer && !d.always && !d.create_dir);

        /* auto. */
        CHECK(decide(MUTABLE_AUTO, facts(true, false, false, 0), &d, &msg) == 0);
        CHECK(d.upper == MUTABLE_UPPER_NONE && d.always && !d.create_dir);
        CHECK(decide(MUTABLE_AUTO, facts(true, true, false, 0755), &d, &msg) == 0);
        CHECK(d.upper == MUTABLE_UPPER_DIR && d.base_layer);
        CHECK(decide(MUTABLE_AUTO, facts(true, true, false, 0700), &d, &msg) == -EINVAL);
        CHECK(msg && strstr(msg, "has mode 0700, ought to have mode 0755"));
        CHECK(decide(MUTABLE_AUTO, facts(true, true, true, 0755), &d, &msg) == 0);
        CHECK(d.upper == MUTABLE_UPPER_HIERARCHY && !d.base_layer);
        f = facts(true, true, false, 0755);
        f.dir_read_only = true;
        CHECK(decide(MUTABLE_AUTO, f, &d, &msg) == -EROFS && strstr(msg, "read-only"));
        f = facts(true, true, false, 0755);
        f.dir_parent_same_mount = false;
        CHECK(decide(MUTABLE_AUTO, f, &d, &msg) == -EXDEV && strstr(msg, "different filesystem"));

        /* yes: created when missing; the same checks when there. */
        CHECK(decide(MUTABLE_YES, facts(true, false, false, 0), &d, &msg) == 0);
        CHECK(d.create_dir && d.upper == MUTABLE_UPPER_DIR && d.always);
        CHECK(decide(MUTABLE_YES, facts(true, true, false, 0750), &d, &msg) == -EINVAL);
        CHECK(decide(MUTABLE_YES, facts(false, false, false, 0), &d, &msg) == 0);
        CHECK(d.create_dir && !d.base_layer);

        /* import. */
        CHECK(decide(MUTABLE_IMPORT, facts(true, true, false, 0700), &d, &msg) == 0);
        CHECK(d.import_dir && d.upper == MUTABLE_UPPER_NONE && d.base_layer);
        CHECK(decide(MUTABLE_IMPORT, facts(true, false, false, 0), &d, &msg) == 0);
        CHECK(!d.import_dir && d.always);
        CHECK(decide(MUTABLE_IMPORT, facts(true, true, true, 0755), &d, &msg) == -ELOOP && strstr(msg, "itself"));

        /* ephemeral, ephemeral-import. */
        CHECK(decide(MUTABLE_EPHEMERAL, facts(true, true, true, 0700), &d, &msg) == 0);
        CHECK(d.upper == MUTABLE_UPPER_TMPFS && !d.import_dir && d.base_layer);
        CHECK(decide(MUTABLE_EPHEMERAL_IMPORT, facts(true, true, false, 0700), &d, &msg) == 0);
        CHECK(d.upper == MUTABLE_UPPER_TMPFS && d.import_dir);
        CHECK(decide(MUTABLE_EPHEMERAL_IMPORT, facts(true, true, true, 0755), &d, &msg) == -ELOOP);

        /* Work directory names. */
        CHECK(tree_workdir_valid("var/lib/extensions.mutable/.sysextd-opt-work.0123456789abcdef0123456789abcdef"));
        CHECK(tree_workdir_valid(".sysextd-opt-work.0123456789abcdef0123456789abcdef"));
        CHECK(!tree_workdir_valid("/var/.sysextd-opt-work.0123456789abcdef0123456789abcdef"));
        CHECK(!tree_workdir_valid("var/../.sysextd-opt-work.0123456789abcdef0123456789abcdef"));
        CHECK(!tree_workdir_valid("var/lib/.sysextd-opt-work.0123"));
        CHECK(!tree_workdir_valid("var/lib/opt"));
        CHECK(!tree_workdir_valid(""));
        CHECK(!tree_workdir_valid("var/lib/.sysextd-opt-work.0123456789abcdef0123456789abcdeg"));
        /* Owners and modes that may hold an upper directory. */
        CHECK(mutable_owner_safe(0, 040755));
        CHECK(mutable_owner_safe(0, 040700));
        CHECK(mutable_owner_safe(0, 040555));
        CHECK(!mutable_owner_safe(65534, 040755));
        CHECK(!mutable_owner_safe(1000, 040700));
        CHECK(!mutable_owner_safe(0, 040775));
        CHECK(!mutable_owner_safe(0, 040757));
        CHECK(!mutable_owner_safe(0, 041777));
        CHECK(!mutable_owner_safe(0, 040777));

        /* Placement: outside every hierarchy and search directory, one per hierarchy, safe. */
        {
                char *paths[] = { (char *) "/r/usr", (char *) "/r/opt", (char *) "/r/etc", NULL };
                char *forbidden[] = { (char *) "/r/var/lib/extensions", (char *) "/r/run/extensions", NULL };
                MutableSetup s[3];
                char *p;

#define SETUP(i, up, dir, dev, ino)                                                                      \
        s[i] = (MutableSetup) { .d = { .upper = (up) }, .dir_path = (char *) (dir), .dir_dev = (dev), .dir_ino = (ino) }
                SETUP(0, MUTABLE_UPPER_DIR, "/r/var/lib/extensions.mutable/usr", 1, 10);
                SETUP(1, MUTABLE_UPPER_DIR, "/r/var/lib/extensions.mutable/opt", 1, 11);
                SETUP(2, MUTABLE_UPPER_NONE, NULL, 0, 0);
                free(msg);
                msg = NULL;
                CHECK(mutable_check_placement(s, paths, 3, forbidden, &msg) == 0);
                /* usr -> opt */
                SETUP(0, MUTABLE_UPPER_DIR, "/r/opt", 1, 20);
                CHECK(mutable_check_placement(s, paths, 3, forbidden, &msg) == -EINVAL && strstr(msg, "share one upper"));
                /* etc -> usr, across the classes */
                SETUP(0, MUTABLE_UPPER_NONE, NULL, 0, 0);
                SETUP(2, MUTABLE_UPPER_DIR, "/r/usr", 1, 21);
                CHECK(mutable_check_placement(s, paths, 3, forbidden, &msg) == -EINVAL && strstr(msg, "/r/usr"));
                /* usr and opt -> one directory */
                SETUP(0, MUTABLE_UPPER_DIR, "/r/data/up", 2, 30);
                SETUP(1, MUTABLE_UPPER_DIR, "/r/data/up", 2, 30);
                SETUP(2, MUTABLE_UPPER_NONE, NULL, 0, 0);
                CHECK(mutable_check_placement(s, paths, 3, forbidden, &msg) == -EINVAL && strstr(msg, "are one directory"));
                /* ... also when one imports it */
                SETUP(1, MUTABLE_UPPER_NONE, "/r/data/up", 2, 30);
                s[1].d.import_dir = true;
                CHECK(mutable_check_placement(s, paths, 3, forbidden, &msg) == -EINVAL);
                /* inside a hierarchy, its own or another's */
                SETUP(1, MUTABLE_UPPER_NONE, NULL, 0, 0);
                SETUP(0, MUTABLE_UPPER_DIR, "/r/usr/share", 1, 40);
                CHECK(mutable_check_placement(s, paths, 3, forbidden, &msg) == -EINVAL && strstr(msg, "lies inside the hierarchy /r/usr"));
                SETUP(0, MUTABLE_UPPER_DIR, "/r/etc/x/y", 1, 41);
                CHECK(mutable_check_placement(s, paths, 3, forbidden, &msg) == -EINVAL && strstr(msg, "/r/etc"));
                /* a name that only starts like a hierarchy is not inside it */
                SETUP(0, MUTABLE_UPPER_DIR, "/r/usrdata", 1, 42);
                CHECK(mutable_check_placement(s, paths, 3, forbidden, &msg) == 0);
                /* inside a search directory */
                SETUP(0, MUTABLE_UPPER_DIR, "/r/var/lib/extensions/app", 1, 43);
                CHECK(mutable_check_placement(s, paths, 3, forbidden, &msg) == -EINVAL && strstr(msg, "extension images"));
                SETUP(0, MUTABLE_UPPER_DIR, "/r/run/extensions", 1, 44);
                CHECK(mutable_check_placement(s, paths, 3, forbidden, &msg) == -EINVAL);
                /* unsafe owners */
                p = strdup("/r/var");
                SETUP(0, MUTABLE_UPPER_DIR, "/r/var/lib/extensions.mutable/usr", 1, 10);
                s[0].unsafe_path = p;
                CHECK(mutable_check_placement(s, paths, 3, forbidden, &msg) == -EPERM && strstr(msg, "'/r/var'"));
                /* a read-only tree's directory is not looked at */
                s[0].d.upper = MUTABLE_UPPER_NONE;
                CHECK(mutable_check_placement(s, paths, 3, forbidden, &msg) == 0);
                /* the hierarchy as its own upper directory is no placement question */
                s[0].unsafe_path = NULL;
                SETUP(0, MUTABLE_UPPER_HIERARCHY, "/r/usr", 1, 50);
                CHECK(mutable_check_placement(s, paths, 3, forbidden, &msg) == 0);
                free(p);
#undef SETUP
        }
        free(msg);
        return tap_finish();
}
