/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What the service manager is asked after a transition (units.h), from the images before and
 * after it. */
#include "tests.h"
#include "units.h"
#include "util.h"

static Image img(const char *name, ImageClass k, uint64_t stamp, bool reload, const char *restart, const char *rr) {
        Image i = { .klass = k, .name = (char *) name, .path = (char *) name, .verdict = IMAGE_COMPATIBLE, .stamp = stamp,
                    .reload_manager = reload, .root_fd = -1 };
        if (restart)
                (void) strv_split(restart, " ", &i.restart_units);
        if (rr)
                (void) strv_split(rr, " ", &i.reload_or_restart_units);
        return i;
}

static void drop(Image *l, size_t n) {
        for (size_t i = 0; i < n; i++) {
                strv_free(l[i].restart_units);
                strv_free(l[i].reload_or_restart_units);
        }
}

static UnitActions plan(Image *b, size_t nb, Image *a, size_t na, unsigned classes) {
        ImageList before = { .images = b, .n = nb }, after = { .images = a, .n = na };
        UnitActions u = {};

        CHECK(unit_actions_plan(&before, &after, classes, &u) == 0);
        return u;
}

int main(void) {
        UnitActions u;

        /* Names. */
        CHECK(unit_name_valid("foo.service"));
        CHECK(unit_name_valid("getty@tty1.service"));
        CHECK(unit_name_valid("a-b_c:d.socket"));
        CHECK(!unit_name_valid("foo@.service"));
        CHECK(!unit_name_valid("foo"));
        CHECK(!unit_name_valid(".service"));
        CHECK(!unit_name_valid("../x.service"));
        CHECK(!unit_name_valid("a/b.service"));
        CHECK(!unit_name_valid("a b.service"));
        CHECK(!unit_name_valid(""));
        CHECK(!unit_name_valid("foo.servic"));

        {
                /* Added with EXTENSION_RELOAD_MANAGER=1: a reload, nothing restarted. */
                Image a[] = { img("x", IMAGE_CLASS_SYSEXT, 1, true, NULL, NULL) };
                u = plan(NULL, 0, a, 1, IMAGE_CLASS_ALL);
                CHECK(u.reload && !u.restart && !u.reload_or_restart);
                unit_actions_done(&u);
                /* The same image again: nothing at all. */
                Image b[] = { img("x", IMAGE_CLASS_SYSEXT, 1, true, NULL, NULL) };
                u = plan(b, 1, a, 1, IMAGE_CLASS_ALL);
                CHECK(!u.reload && !u.restart);
                unit_actions_done(&u);
                /* Removed: the reload again. */
                u = plan(b, 1, NULL, 0, IMAGE_CLASS_ALL);
                CHECK(u.reload);
                unit_actions_done(&u);
                /* An image without units (an empty list, as read back from the journal, too):
                 * never a reload. */
                Image c[] = { img("y", IMAGE_CLASS_SYSEXT, 1, false, NULL, NULL) };
                c[0].restart_units = calloc(1, sizeof(char *));
                u = plan(NULL, 0, c, 1, IMAGE_CLASS_ALL);
                CHECK(!u.reload && !u.restart && !u.warnings);
                unit_actions_done(&u);
                drop(a, 1), drop(b, 1), drop(c, 1);
        }
        {
                /* Changed (another stamp): its units restarted, listing units implies the
                 * reload; the units of both versions; a unit in both lists is restarted. */
                Image b[] = { img("x", IMAGE_CLASS_SYSEXT, 1, false, "old.service", NULL) };
                Image a[] = { img("x", IMAGE_CLASS_SYSEXT, 2, false, "new.service", "new.service web.service"),
                              img("z", IMAGE_CLASS_SYSEXT, 5, false, NULL, NULL) };
                u = plan(b, 1, a, 2, IMAGE_CLASS_ALL);
                CHECK(u.reload);
                CHECK(strv_length(u.restart) == 2 && strv_contains(u.restart, "new.service") && strv_contains(u.restart, "old.service"));
                CHECK(strv_length(u.reload_or_restart) == 1 && streq(u.reload_or_restart[0], "web.service"));
                unit_actions_done(&u);
                drop(a, 2), drop(b, 1);
        }
        {
                /* Invalid names: warnings, and the reload all the same (something was listed). */
                Image a[] = { img("x", IMAGE_CLASS_SYSEXT, 1, false, "ok.service bad@.service ../evil.service", NULL) };
                u = plan(NULL, 0, a, 1, IMAGE_CLASS_ALL);
                CHECK(u.reload && strv_length(u.restart) == 1 && strv_length(u.warnings) == 2);
                CHECK(u.warnings && strstr(u.warnings[0], "bad@.service") && strstr(u.warnings[0], "EXTENSION_RESTART_UNITS"));
                unit_actions_done(&u);
                drop(a, 1);
        }
        {
                /* Duplicates across images: once. */
                Image a[] = { img("x", IMAGE_CLASS_SYSEXT, 1, false, "s.service", NULL),
                              img("y", IMAGE_CLASS_CONFEXT, 1, false, "s.service", NULL) };
                u = plan(NULL, 0, a, 2, IMAGE_CLASS_ALL);
                CHECK(strv_length(u.restart) == 1);
                unit_actions_done(&u);
                drop(a, 2);
        }
        {
                /* A transition of one class: the other class's images are neither added nor
                 * removed, and a sysext and a confext of the same name are two images. */
                Image b[] = { img("x", IMAGE_CLASS_CONFEXT, 1, false, "conf.service", NULL) };
                Image a[] = { img("x", IMAGE_CLASS_SYSEXT, 1, false, "sys.service", NULL) };
                u = plan(b, 1, a, 1, 1u << IMAGE_CLASS_SYSEXT);
                CHECK(strv_length(u.restart) == 1 && streq(u.restart[0], "sys.service"));
                unit_actions_done(&u);
                u = plan(b, 1, a, 1, IMAGE_CLASS_ALL);
                CHECK(strv_length(u.restart) == 2);
                unit_actions_done(&u);
                drop(a, 1), drop(b, 1);
        }
        {
                /* Incompatible images count for nothing. */
                Image a[] = { img("x", IMAGE_CLASS_SYSEXT, 1, true, "s.service", NULL) };
                a[0].verdict = IMAGE_INCOMPATIBLE;
                u = plan(NULL, 0, a, 1, IMAGE_CLASS_ALL);
                CHECK(!u.reload && !u.restart);
                unit_actions_done(&u);
                drop(a, 1);
        }
        return tap_finish();
}
