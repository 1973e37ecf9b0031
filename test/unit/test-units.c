/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What the service manager is asked after a transition (units.h), from the images before and
 * after it and what each image ships; and the scan of an image's unit directories. */
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fd-util.h"
#include "fileio.h"
#include "tests.h"
#include "units.h"
#include "util.h"

/* shipped: entries as Image.shipped_units spells them ("a.service b.service.d/"). */
static Image img(const char *name, ImageClass k, uint64_t stamp, bool reload, const char *restart, const char *rr,
                 const char *shipped) {
        Image i = { .klass = k, .name = (char *) name, .path = (char *) name, .verdict = IMAGE_COMPATIBLE, .stamp = stamp,
                    .reload_manager = reload, .root_fd = -1 };
        if (restart)
                (void) strv_split(restart, " ", &i.restart_units);
        if (rr)
                (void) strv_split(rr, " ", &i.reload_or_restart_units);
        if (shipped)
                (void) strv_split(shipped, " ", &i.shipped_units);
        return i;
}

/* links: as Image.wanted_units spells them ("multi-user.target.wants/a.service ..."). */
static Image wants(Image i, const char *links) {
        (void) strv_split(links, " ", &i.wanted_units);
        return i;
}

static void drop(Image *l, size_t n) {
        for (size_t i = 0; i < n; i++) {
                strv_free(l[i].restart_units);
                strv_free(l[i].reload_or_restart_units);
                strv_free(l[i].shipped_units);
                strv_free(l[i].wanted_units);
        }
}

static UnitActions plan(Image *b, size_t nb, Image *a, size_t na, unsigned classes) {
        ImageList before = { .images = b, .n = nb }, after = { .images = a, .n = na };
        UnitActions u = {};

        CHECK(unit_actions_plan(&before, &after, classes, &u) == 0);
        return u;
}

/* "restart", "stop", ... for the unit, NULL when the plan has no job for it. */
static const char *job(const UnitActions *u, const char *unit) {
        for (size_t i = 0; i < u->n; i++)
                if (streq(u->actions[i].unit, unit))
                        return unit_job_kind_to_string(u->actions[i].kind);
        return NULL;
}

/* The units a planned start is enabled for, space-separated ("" when none, NULL: no action). */
static char *job_wanted_by(const UnitActions *u, const char *unit) {
        for (size_t i = 0; i < u->n; i++)
                if (streq(u->actions[i].unit, unit))
                        return u->actions[i].wanted_by ? strv_join(u->actions[i].wanted_by, " ") : strdup("");
        return NULL;
}

static bool wanted_by_is(const UnitActions *u, const char *unit, const char *expected) {
        _cleanup_free_ char *s = job_wanted_by(u, unit);
        return streq_ptr(s, expected);
}

static const char *job_image(const UnitActions *u, const char *unit) {
        for (size_t i = 0; i < u->n; i++)
                if (streq(u->actions[i].unit, unit))
                        return u->actions[i].image;
        return NULL;
}

/* Whether some warning holds both strings. */
static bool warned(const UnitActions *u, const char *a, const char *b) {
        STRV_FOREACH(w, u->warnings)
                if (strstr(*w, a) && (!b || strstr(*w, b)))
                        return true;
        return false;
}

static void test_names(void) {
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
        CHECK(!unit_name_valid("a@b@c.service"));

        CHECK_STREQ(unit_type_refused("reboot.target"), "targets");
        CHECK_STREQ(unit_type_refused("tmp.mount"), "mounts");
        CHECK_STREQ(unit_type_refused("proc-sys.automount"), "automounts");
        CHECK_STREQ(unit_type_refused("dev-sda2.swap"), "swaps");
        CHECK_STREQ(unit_type_refused("user.slice"), "slices");
        CHECK_STREQ(unit_type_refused("session-1.scope"), "scopes");
        CHECK_STREQ(unit_type_refused("dev-sda.device"), "devices");
        CHECK(!unit_type_refused("foo.service"));
        CHECK(!unit_type_refused("foo.socket"));
        CHECK(!unit_type_refused("foo.timer"));
        CHECK(!unit_type_refused("foo.path"));

        CHECK_STREQ(unit_job_kind_to_string(UNIT_JOB_RELOAD_OR_RESTART), "reload-or-restart");
        CHECK(unit_job_kind_from_string("stop") == UNIT_JOB_STOP);
        CHECK(unit_job_kind_from_string("bogus") < 0);
        CHECK_STREQ(unit_job_kind_method(UNIT_JOB_STOP), "StopUnit");
        CHECK_STREQ(unit_job_kind_method(UNIT_JOB_RESTART), "RestartUnit");
        CHECK_STREQ(unit_job_kind_method(UNIT_JOB_RELOAD_OR_RESTART), "ReloadOrRestartUnit");
        CHECK_STREQ(unit_job_kind_to_string(UNIT_JOB_START), "start");
        CHECK(unit_job_kind_from_string("start") == UNIT_JOB_START);
        CHECK_STREQ(unit_job_kind_method(UNIT_JOB_START), "StartUnit");
}

static void test_candidates(void) {
        char **c = NULL;
        char *ship_file[] = { (char *) "foo.service", NULL };
        char *ship_dropin[] = { (char *) "foo.service.d/", NULL };
        char *ship_template[] = { (char *) "getty@.service", NULL };
        char *ship_template_dropin[] = { (char *) "getty@.service.d/", NULL };
        char *ship_both[] = { (char *) "foo.service.d/", (char *) "foo.service", NULL };
        char *ship_other[] = { (char *) "foo.socket", (char *) "foo.service.d", (char *) "bar.service", NULL };

        CHECK(unit_candidates("foo.service", &c) == 0);
        CHECK(strv_length(c) == 2 && streq(c[0], "foo.service") && streq(c[1], "foo.service.d/"));
        strv_free(c);
        CHECK(unit_candidates("getty@tty1.service", &c) == 0);
        CHECK(strv_length(c) == 4 && streq(c[2], "getty@.service") && streq(c[3], "getty@.service.d/"));
        strv_free(c);

        CHECK(unit_shipped("foo.service", ship_file) == UNIT_SHIPPED_FILE);
        CHECK(unit_shipped("foo.service", ship_dropin) == UNIT_SHIPPED_DROPIN);
        CHECK(unit_shipped("foo.service", ship_both) == UNIT_SHIPPED_FILE);
        CHECK(unit_shipped("foo.service", NULL) == UNIT_NOT_SHIPPED);
        /* Another type, a drop-in without its slash, another unit: not this one. */
        CHECK(unit_shipped("foo.service", ship_other) == UNIT_NOT_SHIPPED);
        CHECK(unit_shipped("getty@tty1.service", ship_template) == UNIT_SHIPPED_FILE);
        CHECK(unit_shipped("getty@tty1.service", ship_template_dropin) == UNIT_SHIPPED_DROPIN);
        /* A template does not ship another template's instance, nor a plain unit. */
        CHECK(unit_shipped("gettx@tty1.service", ship_template) == UNIT_NOT_SHIPPED);
        CHECK(unit_shipped("getty.service", ship_template) == UNIT_NOT_SHIPPED);
        CHECK(unit_shipped("getty@tty1.socket", ship_template) == UNIT_NOT_SHIPPED);
        /* An invalid name is never shipped, even if an entry is spelled like it. */
        char *ship_bad[] = { (char *) "../x.service", NULL };
        CHECK(unit_shipped("../x.service", ship_bad) == UNIT_NOT_SHIPPED);

        CHECK(strv_contains(unit_dirs(IMAGE_CLASS_SYSEXT, false), "usr/lib/systemd/system"));
        CHECK(strv_contains(unit_dirs(IMAGE_CLASS_SYSEXT, false), "usr/local/lib/systemd/system"));
        CHECK(strv_contains(unit_dirs(IMAGE_CLASS_SYSEXT, true), "lib/systemd/system"));
        CHECK(strv_length(unit_dirs(IMAGE_CLASS_CONFEXT, false)) == 1 &&
              streq(unit_dirs(IMAGE_CLASS_CONFEXT, false)[0], "etc/systemd/system"));
}

static void test_reload_only(void) {
        UnitActions u;

        /* Added with EXTENSION_RELOAD_MANAGER=1: a reload, nothing restarted. */
        Image a[] = { img("x", IMAGE_CLASS_SYSEXT, 1, true, NULL, NULL, NULL) };
        u = plan(NULL, 0, a, 1, IMAGE_CLASS_ALL);
        CHECK(u.reload && u.n == 0 && !u.warnings);
        unit_actions_done(&u);
        /* The same image again: nothing at all. */
        Image b[] = { img("x", IMAGE_CLASS_SYSEXT, 1, true, NULL, NULL, NULL) };
        u = plan(b, 1, a, 1, IMAGE_CLASS_ALL);
        CHECK(!u.reload && u.n == 0);
        unit_actions_done(&u);
        /* Removed: the reload again. */
        u = plan(b, 1, NULL, 0, IMAGE_CLASS_ALL);
        CHECK(u.reload && u.n == 0);
        unit_actions_done(&u);
        /* An image without units (an empty list, as read back from the journal, too): never a
         * reload. */
        Image c[] = { img("y", IMAGE_CLASS_SYSEXT, 1, false, NULL, NULL, NULL) };
        c[0].restart_units = calloc(1, sizeof(char *));
        u = plan(NULL, 0, c, 1, IMAGE_CLASS_ALL);
        CHECK(!u.reload && u.n == 0 && !u.warnings);
        unit_actions_done(&u);
        drop(a, 1), drop(b, 1), drop(c, 1);
}

static void test_any_image_any_unit(void) {
        UnitActions u;

        /* The image: ships no unit and names the system's. */
        Image a[] = { img("evil", IMAGE_CLASS_SYSEXT, 1, false, "reboot.target dbus.service tmp.mount",
                          "systemd-logind.service", NULL) };
        u = plan(NULL, 0, a, 1, IMAGE_CLASS_ALL);
        CHECK(u.n == 0);
        CHECK(!u.reload); /* nothing it ships: no reload either */
        CHECK(strv_length(u.warnings) == 4);
        CHECK(warned(&u, "evil ships no unit file or drop-in for dbus.service, not restarting it", NULL));
        CHECK(warned(&u, "evil ships no unit file or drop-in for systemd-logind.service", NULL));
        CHECK(warned(&u, "reboot.target", "targets are never restarted by an image"));
        CHECK(warned(&u, "tmp.mount", "mounts are never restarted by an image"));
        CHECK(warned(&u, "reboot.target", "EXTENSION_RESTART_UNITS="));
        unit_actions_done(&u);
        /* Removed again: nothing either, and no second round of warnings. */
        u = plan(a, 1, NULL, 0, IMAGE_CLASS_ALL);
        CHECK(u.n == 0 && !u.reload && !u.warnings);
        unit_actions_done(&u);
        /* The same as a confext. */
        Image c[] = { img("evil", IMAGE_CLASS_CONFEXT, 1, false, "dbus.service", NULL, NULL) };
        u = plan(NULL, 0, c, 1, IMAGE_CLASS_ALL);
        CHECK(u.n == 0 && warned(&u, "ships no unit file or drop-in for dbus.service", NULL));
        unit_actions_done(&u);
        drop(a, 1), drop(c, 1);
}

static void test_shipped(void) {
        UnitActions u;

        /* Its own unit file: restarted, and that implies the reload. */
        Image a[] = { img("app", IMAGE_CLASS_SYSEXT, 1, false, "app.service", "app-web.service",
                          "app.service app-web.service") };
        u = plan(NULL, 0, a, 1, IMAGE_CLASS_ALL);
        CHECK(u.reload && u.n == 2 && !u.warnings);
        CHECK_STREQ(job(&u, "app.service"), "restart");
        CHECK_STREQ(job(&u, "app-web.service"), "reload-or-restart");
        CHECK_STREQ(job_image(&u, "app.service"), "app");
        /* Restarts before reloads-or-restarts. */
        CHECK(u.n == 2 && u.actions[0].kind == UNIT_JOB_RESTART && u.actions[1].kind == UNIT_JOB_RELOAD_OR_RESTART);
        unit_actions_done(&u);
        drop(a, 1);

        /* A drop-in only, for a host unit: restarted all the same (it changed the unit). */
        Image b[] = { img("tune", IMAGE_CLASS_SYSEXT, 1, false, "sshd.service", NULL, "sshd.service.d/") };
        u = plan(NULL, 0, b, 1, IMAGE_CLASS_ALL);
        CHECK(u.reload && u.n == 1 && streq_ptr(job(&u, "sshd.service"), "restart") && !u.warnings);
        unit_actions_done(&u);
        drop(b, 1);

        /* An instance of a template the image ships, or of a template's drop-in. */
        Image c[] = { img("t", IMAGE_CLASS_SYSEXT, 1, false, "worker@1.service worker@2.service", "agent@x.service",
                          "worker@.service agent@.service.d/") };
        u = plan(NULL, 0, c, 1, IMAGE_CLASS_ALL);
        CHECK(u.n == 3 && !u.warnings);
        CHECK_STREQ(job(&u, "worker@1.service"), "restart");
        CHECK_STREQ(job(&u, "worker@2.service"), "restart");
        CHECK_STREQ(job(&u, "agent@x.service"), "reload-or-restart");
        unit_actions_done(&u);
        drop(c, 1);

        /* A socket, a timer and a path unit it ships: allowed. */
        Image d[] = { img("s", IMAGE_CLASS_SYSEXT, 1, false, "s.socket s.timer s.path", NULL, "s.socket s.timer s.path") };
        u = plan(NULL, 0, d, 1, IMAGE_CLASS_ALL);
        CHECK(u.n == 3 && !u.warnings);
        unit_actions_done(&u);
        drop(d, 1);
}

static void test_refused_types_even_if_shipped(void) {
        UnitActions u;
        Image a[] = { img("t", IMAGE_CLASS_SYSEXT, 1, false,
                          "my.target my.mount my.automount my.swap my.slice my.scope dev-x.device",
                          "other.target",
                          "my.target my.mount my.automount my.swap my.slice my.scope dev-x.device other.target.d/") };

        u = plan(NULL, 0, a, 1, IMAGE_CLASS_ALL);
        CHECK(u.n == 0);
        CHECK(strv_length(u.warnings) == 8);
        CHECK(warned(&u, "my.target", "targets are never restarted by an image"));
        CHECK(warned(&u, "my.mount", "mounts are never"));
        CHECK(warned(&u, "my.automount", "automounts are never"));
        CHECK(warned(&u, "my.swap", "swaps are never"));
        CHECK(warned(&u, "my.slice", "slices are never"));
        CHECK(warned(&u, "my.scope", "scopes are never"));
        CHECK(warned(&u, "dev-x.device", "devices are never"));
        CHECK(warned(&u, "other.target", "EXTENSION_RELOAD_OR_RESTART_UNITS="));
        unit_actions_done(&u);
        /* Removed: a refused unit is never stopped either. */
        u = plan(a, 1, NULL, 0, IMAGE_CLASS_ALL);
        CHECK(u.n == 0 && !u.warnings);
        unit_actions_done(&u);
        drop(a, 1);
}

static void test_confext_vs_sysext(void) {
        UnitActions u;

        /* The plan takes what the probe found in each class's own directories: a confext's
         * etc/systemd/system entries and a sysext's usr/lib/systemd/system entries are both
         * spelled by unit name; a sysext and a confext of one name are two images. */
        Image a[] = { img("x", IMAGE_CLASS_SYSEXT, 1, false, "sys.service", NULL, "sys.service"),
                      img("x", IMAGE_CLASS_CONFEXT, 1, false, "conf.service", "conf2.service", "conf.service.d/") };
        u = plan(NULL, 0, a, 2, IMAGE_CLASS_ALL);
        CHECK(u.n == 2 && job(&u, "sys.service") && job(&u, "conf.service"));
        CHECK(warned(&u, "ships no unit file or drop-in for conf2.service", NULL));
        unit_actions_done(&u);

        /* A transition of one class: the other class's images are neither added nor removed. */
        Image b[] = { img("x", IMAGE_CLASS_CONFEXT, 1, false, "conf.service", NULL, "conf.service") };
        Image c[] = { img("x", IMAGE_CLASS_SYSEXT, 1, false, "sys.service", NULL, "sys.service") };
        u = plan(b, 1, c, 1, 1u << IMAGE_CLASS_SYSEXT);
        CHECK(u.n == 1 && streq_ptr(job(&u, "sys.service"), "restart"));
        unit_actions_done(&u);
        u = plan(b, 1, c, 1, IMAGE_CLASS_ALL);
        CHECK(u.n == 2 && streq_ptr(job(&u, "conf.service"), "stop") && streq_ptr(job(&u, "sys.service"), "restart"));
        unit_actions_done(&u);
        drop(a, 2), drop(b, 1), drop(c, 1);
}

static void test_vanished(void) {
        UnitActions u;

        /* Unmerge of an image that shipped the unit file: stopped. */
        Image b[] = { img("app", IMAGE_CLASS_SYSEXT, 1, false, "app.service", "web.service", "app.service web.service") };
        u = plan(b, 1, NULL, 0, IMAGE_CLASS_ALL);
        CHECK(u.reload && u.n == 2);
        CHECK_STREQ(job(&u, "app.service"), "stop");
        CHECK_STREQ(job(&u, "web.service"), "stop");
        CHECK_STREQ(job_image(&u, "web.service"), "app");
        unit_actions_done(&u);
        drop(b, 1);

        /* Unmerge of an image that shipped only a drop-in: the unit stays, restarted. */
        Image d[] = { img("tune", IMAGE_CLASS_SYSEXT, 1, false, NULL, "sshd.service", "sshd.service.d/") };
        u = plan(d, 1, NULL, 0, IMAGE_CLASS_ALL);
        CHECK(u.reload && u.n == 1 && streq_ptr(job(&u, "sshd.service"), "reload-or-restart"));
        unit_actions_done(&u);
        drop(d, 1);

        /* Refresh: the new version no longer ships (nor lists) a unit: stopped; one it still
         * ships: restarted as it asks. */
        Image old[] = { img("app", IMAGE_CLASS_SYSEXT, 1, false, "app.service gone.service", NULL,
                            "app.service gone.service") };
        Image now[] = { img("app", IMAGE_CLASS_SYSEXT, 2, false, NULL, "app.service", "app.service") };
        u = plan(old, 1, now, 1, IMAGE_CLASS_ALL);
        CHECK(u.n == 2);
        CHECK_STREQ(job(&u, "gone.service"), "stop");
        CHECK_STREQ(job(&u, "app.service"), "reload-or-restart");
        CHECK(u.actions[0].kind == UNIT_JOB_STOP); /* stops first */
        unit_actions_done(&u);

        /* The new version still lists it but no longer ships it: stopped, and a warning. */
        Image now2[] = { img("app", IMAGE_CLASS_SYSEXT, 2, false, "app.service gone.service", NULL, "app.service") };
        u = plan(old, 1, now2, 1, IMAGE_CLASS_ALL);
        CHECK_STREQ(job(&u, "gone.service"), "stop");
        CHECK_STREQ(job(&u, "app.service"), "restart");
        CHECK(warned(&u, "app ships no unit file or drop-in for gone.service", NULL));
        unit_actions_done(&u);

        /* The new version still ships it but no longer lists it: the old version asked for it,
         * the unit changed: restarted. */
        Image now3[] = { img("app", IMAGE_CLASS_SYSEXT, 2, false, NULL, NULL, "app.service gone.service") };
        u = plan(old, 1, now3, 1, IMAGE_CLASS_ALL);
        CHECK_STREQ(job(&u, "gone.service"), "restart");
        CHECK_STREQ(job(&u, "app.service"), "restart");
        unit_actions_done(&u);
        drop(old, 1), drop(now, 1), drop(now2, 1), drop(now3, 1);

        /* Removed while another merged image (unchanged) still ships the unit file: not stopped
         * but restarted (its definition changed). */
        Image b2[] = { img("a", IMAGE_CLASS_SYSEXT, 1, false, "shared.service", NULL, "shared.service"),
                       img("b", IMAGE_CLASS_SYSEXT, 1, false, NULL, NULL, "shared.service") };
        Image a2[] = { img("b", IMAGE_CLASS_SYSEXT, 1, false, NULL, NULL, "shared.service") };
        u = plan(b2, 2, a2, 1, IMAGE_CLASS_ALL);
        CHECK(u.n == 1 && streq_ptr(job(&u, "shared.service"), "restart"));
        unit_actions_done(&u);
        /* ... or a confext the transition did not cover. */
        Image b3[] = { img("a", IMAGE_CLASS_SYSEXT, 1, false, "shared.service", NULL, "shared.service"),
                       img("c", IMAGE_CLASS_CONFEXT, 1, false, NULL, NULL, "shared.service") };
        u = plan(b3, 2, NULL, 0, 1u << IMAGE_CLASS_SYSEXT);
        CHECK(u.n == 1 && streq_ptr(job(&u, "shared.service"), "restart"));
        unit_actions_done(&u);
        /* ... but a drop-in elsewhere does not keep a unit file: stopped. */
        Image a4[] = { img("b", IMAGE_CLASS_SYSEXT, 1, false, NULL, NULL, "shared.service.d/") };
        u = plan(b2, 1, a4, 1, IMAGE_CLASS_ALL);
        CHECK(u.n == 1 && streq_ptr(job(&u, "shared.service"), "stop"));
        unit_actions_done(&u);
        drop(b2, 2), drop(a2, 1), drop(b3, 2), drop(a4, 1);

        /* One image removed, another added shipping the same unit: not stopped; restarted,
         * as the one that went asked (a restart wins over a reload-or-restart). */
        Image b5[] = { img("old", IMAGE_CLASS_SYSEXT, 1, false, "svc.service", NULL, "svc.service") };
        Image a5[] = { img("new", IMAGE_CLASS_SYSEXT, 1, false, NULL, "svc.service", "svc.service") };
        u = plan(b5, 1, a5, 1, IMAGE_CLASS_ALL);
        CHECK(u.n == 1 && streq_ptr(job(&u, "svc.service"), "restart"));
        unit_actions_done(&u);
        /* The same with reload-or-restart on both sides: reload-or-restart, of the new one. */
        Image b7[] = { img("old", IMAGE_CLASS_SYSEXT, 1, false, NULL, "svc.service", "svc.service") };
        u = plan(b7, 1, a5, 1, IMAGE_CLASS_ALL);
        CHECK(u.n == 1 && streq_ptr(job(&u, "svc.service"), "reload-or-restart") &&
              streq_ptr(job_image(&u, "svc.service"), "new"));
        unit_actions_done(&u);
        drop(b7, 1);
        drop(b5, 1), drop(a5, 1);

        /* Recorded by an older sysextd (no shipped units in the journal): nothing is stopped
         * for it; its reload still happens. */
        Image b6[] = { img("legacy", IMAGE_CLASS_SYSEXT, 1, true, "legacy.service", NULL, NULL) };
        u = plan(b6, 1, NULL, 0, IMAGE_CLASS_ALL);
        CHECK(u.reload && u.n == 0 && !u.warnings);
        unit_actions_done(&u);
        drop(b6, 1);
}

static void test_changed_both_versions(void) {
        UnitActions u;

        /* Changed (another stamp): the units of both versions; a unit in both lists is
         * restarted. */
        Image b[] = { img("x", IMAGE_CLASS_SYSEXT, 1, false, "old.service", NULL, "old.service.d/") };
        Image a[] = { img("x", IMAGE_CLASS_SYSEXT, 2, false, "new.service", "new.service web.service",
                          "new.service web.service"),
                      img("z", IMAGE_CLASS_SYSEXT, 5, false, NULL, NULL, NULL) };
        u = plan(b, 1, a, 2, IMAGE_CLASS_ALL);
        CHECK(u.reload && u.n == 3);
        CHECK_STREQ(job(&u, "new.service"), "restart");
        CHECK_STREQ(job(&u, "old.service"), "restart"); /* its drop-in went: the unit stays */
        CHECK_STREQ(job(&u, "web.service"), "reload-or-restart");
        unit_actions_done(&u);
        drop(a, 2), drop(b, 1);
}

static void test_invalid_and_duplicates(void) {
        UnitActions u;

        /* Invalid names: warnings, escaped; the valid shipped one restarted. */
        Image a[] = { img("x", IMAGE_CLASS_SYSEXT, 1, false, "ok.service bad@.service ../evil.service", NULL,
                          "ok.service") };
        u = plan(NULL, 0, a, 1, IMAGE_CLASS_ALL);
        CHECK(u.reload && u.n == 1 && strv_length(u.warnings) == 2);
        CHECK(warned(&u, "bad@.service", "EXTENSION_RESTART_UNITS"));
        CHECK(warned(&u, "Invalid unit name '../evil.service'", NULL));
        unit_actions_done(&u);
        drop(a, 1);

        Image e[] = { img("x", IMAGE_CLASS_SYSEXT, 1, false, "a\x01.service", NULL, NULL) };
        u = plan(NULL, 0, e, 1, IMAGE_CLASS_ALL);
        CHECK(u.n == 0 && strv_length(u.warnings) == 1 && !strchr(u.warnings[0], '\x01'));
        unit_actions_done(&u);
        drop(e, 1);

        /* Duplicates across images and within one: once; restart wins over reload-or-restart. */
        Image d[] = { img("x", IMAGE_CLASS_SYSEXT, 1, false, "s.service s.service", "s.service", "s.service"),
                      img("y", IMAGE_CLASS_CONFEXT, 1, false, NULL, "s.service", "s.service.d/") };
        u = plan(NULL, 0, d, 2, IMAGE_CLASS_ALL);
        CHECK(u.n == 1 && streq_ptr(job(&u, "s.service"), "restart"));
        unit_actions_done(&u);
        Image f[] = { img("y", IMAGE_CLASS_CONFEXT, 1, false, NULL, "s.service", "s.service.d/"),
                      img("x", IMAGE_CLASS_SYSEXT, 1, false, "s.service", NULL, "s.service") };
        u = plan(NULL, 0, f, 2, IMAGE_CLASS_ALL);
        CHECK(u.n == 1 && streq_ptr(job(&u, "s.service"), "restart") && streq_ptr(job_image(&u, "s.service"), "x"));
        unit_actions_done(&u);
        drop(d, 2), drop(f, 2);

        /* Incompatible images count for nothing. */
        Image g[] = { img("x", IMAGE_CLASS_SYSEXT, 1, true, "s.service", NULL, "s.service") };
        g[0].verdict = IMAGE_INCOMPATIBLE;
        u = plan(NULL, 0, g, 1, IMAGE_CLASS_ALL);
        CHECK(!u.reload && u.n == 0);
        unit_actions_done(&u);
        u = plan(g, 1, NULL, 0, IMAGE_CLASS_ALL);
        CHECK(!u.reload && u.n == 0);
        unit_actions_done(&u);
        drop(g, 1);
}

/* ---- the scan, on a directory tree made here ---- */

static int mkfile(int dfd, const char *path) {
        int fd = openat(dfd, path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0)
                return -1;
        close(fd);
        return 0;
}

/* rm_rf_at() takes a name below a directory fd, not a path. */
static void remove_tmp_dir(const char *dir) {
        int tmp = open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

        if (tmp >= 0) {
                (void) rm_rf_at(tmp, dir + strlen("/tmp/"));
                close(tmp);
        }
}

static void test_scan(void) {
        char tmpl[] = "/tmp/test-units-XXXXXX";
        char *dir = mkdtemp(tmpl);
        char **found = NULL, **names = NULL;
        int root;

        CHECK(dir != NULL);
        if (!dir)
                return;
        root = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        CHECK(root >= 0);
        CHECK(mkdir_p_at(root, "usr/lib/systemd/system/drop.service.d", 0755) == 0);
        CHECK(mkdir_p_at(root, "usr/lib/systemd/system/empty.service.d", 0755) == 0);
        CHECK(mkdir_p_at(root, "usr/lib/systemd/system/notconf.service.d", 0755) == 0);
        CHECK(mkdir_p_at(root, "usr/lib/systemd/system/linkconf.service.d", 0755) == 0);
        CHECK(mkdir_p_at(root, "usr/lib/systemd/system/tpl@.service.d", 0755) == 0);
        CHECK(mkdir_p_at(root, "usr/local/lib/systemd/system", 0755) == 0);
        CHECK(mkdir_p_at(root, "etc/systemd/system", 0755) == 0);
        CHECK(mkdir_p_at(root, "elsewhere", 0755) == 0);
        CHECK(mkfile(root, "usr/lib/systemd/system/app.service") == 0);
        CHECK(mkfile(root, "usr/lib/systemd/system/drop.service.d/10-x.conf") == 0);
        CHECK(mkfile(root, "usr/lib/systemd/system/notconf.service.d/readme") == 0);
        CHECK(mkfile(root, "usr/lib/systemd/system/tpl@.service.d/a.conf") == 0);
        CHECK(mkfile(root, "usr/lib/systemd/system/worker@.service") == 0);
        CHECK(mkfile(root, "usr/local/lib/systemd/system/local.service") == 0);
        CHECK(mkfile(root, "etc/systemd/system/conf.service") == 0);
        CHECK(mkfile(root, "elsewhere/target.conf") == 0);
        CHECK(mkfile(root, "elsewhere/real.service") == 0);
        /* Symlinks are never the image's own unit, nor followed. */
        CHECK(symlinkat("/dev/null", root, "usr/lib/systemd/system/masked.service") == 0);
        CHECK(symlinkat("../../../../elsewhere/real.service", root, "usr/lib/systemd/system/alias.service") == 0);
        CHECK(symlinkat("../../../../../elsewhere/target.conf", root, "usr/lib/systemd/system/linkconf.service.d/x.conf") == 0);
        CHECK(symlinkat("../../../elsewhere", root, "usr/lib/systemd/system/linkdir.service.d") == 0);

        CHECK(strv_split("app.service drop.service empty.service notconf.service linkconf.service tpl@1.service "
                         "worker@7.service local.service conf.service masked.service alias.service linkdir.service "
                         "none.service ../x.service",
                         " ", &names) == 0);
        CHECK(unit_files_scan(root, unit_dirs(IMAGE_CLASS_SYSEXT, false), names, &found) == 0);
        CHECK(unit_shipped("app.service", found) == UNIT_SHIPPED_FILE);
        CHECK(unit_shipped("drop.service", found) == UNIT_SHIPPED_DROPIN);
        CHECK(unit_shipped("empty.service", found) == UNIT_NOT_SHIPPED);
        CHECK(unit_shipped("notconf.service", found) == UNIT_NOT_SHIPPED);
        CHECK(unit_shipped("linkconf.service", found) == UNIT_NOT_SHIPPED);
        CHECK(unit_shipped("tpl@1.service", found) == UNIT_SHIPPED_DROPIN);
        CHECK(unit_shipped("worker@7.service", found) == UNIT_SHIPPED_FILE);
        CHECK(unit_shipped("local.service", found) == UNIT_SHIPPED_FILE);
        CHECK(unit_shipped("conf.service", found) == UNIT_NOT_SHIPPED); /* etc/ is a confext's */
        CHECK(unit_shipped("masked.service", found) == UNIT_NOT_SHIPPED);
        CHECK(unit_shipped("alias.service", found) == UNIT_NOT_SHIPPED);
        CHECK(unit_shipped("linkdir.service", found) == UNIT_NOT_SHIPPED);
        CHECK(unit_shipped("none.service", found) == UNIT_NOT_SHIPPED);
        CHECK(!strv_contains(found, "../x.service"));
        strv_free(found);
        found = NULL;

        /* Without names: every unit file and drop-in the image ships, and nothing else. */
        CHECK(unit_files_scan(root, unit_dirs(IMAGE_CLASS_SYSEXT, false), NULL, &found) == 0);
        CHECK(strv_length(found) == 5);
        CHECK(strv_contains(found, "app.service") && strv_contains(found, "drop.service.d/") &&
              strv_contains(found, "tpl@.service.d/") && strv_contains(found, "worker@.service") &&
              strv_contains(found, "local.service"));
        CHECK(unit_shipped("app.service", found) == UNIT_SHIPPED_FILE);
        CHECK(unit_shipped("tpl@2.service", found) == UNIT_SHIPPED_DROPIN);
        CHECK(unit_shipped("unlisted.service", found) == UNIT_NOT_SHIPPED);
        CHECK(unit_shipped("masked.service", found) == UNIT_NOT_SHIPPED);
        CHECK(unit_shipped("linkconf.service", found) == UNIT_NOT_SHIPPED);
        strv_free(found);
        found = NULL;

        /* A confext looks in etc/systemd/system only. */
        CHECK(unit_files_scan(root, unit_dirs(IMAGE_CLASS_CONFEXT, false), names, &found) == 0);
        CHECK(strv_length(found) == 1 && unit_shipped("conf.service", found) == UNIT_SHIPPED_FILE);
        strv_free(found);
        found = NULL;

        /* A unit directory that is a symlink is not followed. */
        CHECK(rm_rf_at(root, "etc") == 0);
        CHECK(mkdir_p_at(root, "etc", 0755) == 0);
        CHECK(symlinkat("../usr/lib/systemd", root, "etc/systemd") == 0);
        CHECK(unit_files_scan(root, unit_dirs(IMAGE_CLASS_CONFEXT, false), names, &found) == 0);
        CHECK(found == NULL);

        /* No names, no directories: nothing. */
        CHECK(unit_files_scan(root, unit_dirs(IMAGE_CLASS_SYSEXT, true), names, &found) == 0);
        CHECK(found == NULL);

        strv_free(names);
        remove_tmp_dir(dir);
        close(root);
}

static void test_enabled(void) {
        UnitActions u;

        /* The image (merged at boot, EXTENSION_RELOAD_MANAGER=1): the unit it ships and
         * enables through .wants/ is a start candidate for multi-user.target; the one through
         * .upholds/ is systemd's; a link to a unit it does not ship, or ships only a drop-in
         * for, is nothing of ours. */
        Image a[] = { wants(img("units", IMAGE_CLASS_SYSEXT, 1, true, NULL, NULL,
                                "vmtest-wants.service vmtest-upholds.service web.socket db.service host.service.d/ "
                                "worker@.service"),
                            "multi-user.target.wants/vmtest-wants.service multi-user.target.upholds/vmtest-upholds.service "
                            "sockets.target.wants/web.socket vmtest-wants.service.requires/db.service "
                            "multi-user.target.wants/sshd.service multi-user.target.wants/host.service "
                            "multi-user.target.wants/worker@1.service") };
        u = plan(NULL, 0, a, 1, IMAGE_CLASS_ALL);
        CHECK(u.reload && !u.warnings);
        CHECK(u.n == 4);
        CHECK_STREQ(job(&u, "vmtest-wants.service"), "start");
        CHECK(wanted_by_is(&u, "vmtest-wants.service", "multi-user.target"));
        CHECK_STREQ(job_image(&u, "vmtest-wants.service"), "units");
        CHECK_STREQ(job(&u, "web.socket"), "start");
        CHECK(wanted_by_is(&u, "web.socket", "sockets.target"));
        CHECK_STREQ(job(&u, "db.service"), "start"); /* .requires/ as .wants/ */
        CHECK(wanted_by_is(&u, "db.service", "vmtest-wants.service"));
        CHECK_STREQ(job(&u, "worker@1.service"), "start"); /* an instance of its template */
        CHECK(!job(&u, "vmtest-upholds.service"));
        CHECK(!job(&u, "sshd.service"));
        CHECK(!job(&u, "host.service"));
        unit_actions_done(&u);

        /* The same image again (merged in the same version): no candidate. */
        Image b[] = { wants(img("units", IMAGE_CLASS_SYSEXT, 1, true, NULL, NULL, "vmtest-wants.service"),
                            "multi-user.target.wants/vmtest-wants.service") };
        u = plan(b, 1, a, 1, IMAGE_CLASS_ALL);
        CHECK(u.n == 0 && !u.reload);
        unit_actions_done(&u);

        /* Removed: nothing is started (nor stopped: it listed nothing). */
        u = plan(a, 1, NULL, 0, IMAGE_CLASS_ALL);
        CHECK(u.n == 0 && u.reload);
        unit_actions_done(&u);
        drop(a, 1), drop(b, 1);

        /* Without EXTENSION_RELOAD_MANAGER=1: no reload, no start. */
        Image c[] = { wants(img("quiet", IMAGE_CLASS_SYSEXT, 1, false, NULL, NULL, "q.service"),
                            "multi-user.target.wants/q.service") };
        u = plan(NULL, 0, c, 1, IMAGE_CLASS_ALL);
        CHECK(u.n == 0 && !u.reload && !u.warnings);
        unit_actions_done(&u);
        /* ... even when a restart it lists brings the reload: that unit is restarted, the one
         * it enables is not started. */
        Image c2[] = { wants(img("quiet", IMAGE_CLASS_SYSEXT, 1, false, "r.service", NULL, "q.service r.service"),
                             "multi-user.target.wants/q.service") };
        u = plan(NULL, 0, c2, 1, IMAGE_CLASS_ALL);
        CHECK(u.reload && u.n == 1 && streq_ptr(job(&u, "r.service"), "restart") && !job(&u, "q.service"));
        unit_actions_done(&u);
        drop(c, 1), drop(c2, 1);

        /* A confext enables units through etc/systemd/system as well. */
        Image d[] = { wants(img("conf", IMAGE_CLASS_CONFEXT, 1, true, NULL, NULL, "c.service"),
                            "multi-user.target.wants/c.service") };
        u = plan(NULL, 0, d, 1, IMAGE_CLASS_ALL);
        CHECK(u.n == 1 && streq_ptr(job(&u, "c.service"), "start"));
        unit_actions_done(&u);
        /* A transition of the other class does not touch it. */
        u = plan(NULL, 0, d, 1, 1u << IMAGE_CLASS_SYSEXT);
        CHECK(u.n == 0);
        unit_actions_done(&u);
        drop(d, 1);
}

static void test_enabled_changed(void) {
        UnitActions u;

        /* A new version: only what it newly enables is a candidate; a link the old version had to
         * a unit it shipped was one when that version came. */
        Image old[] = { wants(img("app", IMAGE_CLASS_SYSEXT, 1, true, NULL, NULL, "app.service late.service"),
                              "multi-user.target.wants/app.service multi-user.target.wants/late.service") };
        Image now[] = { wants(img("app", IMAGE_CLASS_SYSEXT, 2, true, NULL, NULL, "app.service late.service new.service"),
                              "multi-user.target.wants/app.service graphical.target.wants/late.service "
                              "multi-user.target.wants/new.service") };
        u = plan(old, 1, now, 1, IMAGE_CLASS_ALL);
        CHECK(u.reload && u.n == 2);
        CHECK(!job(&u, "app.service"));
        CHECK_STREQ(job(&u, "late.service"), "start"); /* enabled for another target now */
        CHECK(wanted_by_is(&u, "late.service", "graphical.target"));
        CHECK_STREQ(job(&u, "new.service"), "start");
        unit_actions_done(&u);

        /* The old version linked it but did not ship it (the host's then): a candidate now. */
        Image old2[] = { wants(img("app", IMAGE_CLASS_SYSEXT, 1, true, NULL, NULL, "late.service"),
                               "multi-user.target.wants/app.service") };
        u = plan(old2, 1, now, 1, IMAGE_CLASS_ALL);
        CHECK_STREQ(job(&u, "app.service"), "start");
        unit_actions_done(&u);

        /* Recorded by an older sysextd (no links in the journal): what the new version enables
         * is a candidate. */
        Image legacy[] = { img("app", IMAGE_CLASS_SYSEXT, 1, true, NULL, NULL, "app.service late.service") };
        u = plan(legacy, 1, now, 1, IMAGE_CLASS_ALL);
        CHECK(u.n == 3 && streq_ptr(job(&u, "app.service"), "start"));
        unit_actions_done(&u);
        drop(old, 1), drop(now, 1), drop(old2, 1), drop(legacy, 1);
}

static void test_enabled_and_listed(void) {
        UnitActions u;

        /* Enabled for two targets, by two images: one start, for either target. */
        Image a[] = { wants(img("a", IMAGE_CLASS_SYSEXT, 1, true, NULL, NULL, "s.service"),
                            "multi-user.target.wants/s.service graphical.target.wants/s.service"),
                      wants(img("b", IMAGE_CLASS_SYSEXT, 1, true, NULL, NULL, "s.service"),
                            "default.target.wants/s.service multi-user.target.wants/s.service") };
        u = plan(NULL, 0, a, 2, IMAGE_CLASS_ALL);
        CHECK(u.n == 1 && streq_ptr(job(&u, "s.service"), "start"));
        CHECK(wanted_by_is(&u, "s.service", "multi-user.target graphical.target default.target"));
        unit_actions_done(&u);
        drop(a, 2);

        /* Listed for a restart (or reload-or-restart) and enabled: restarted, whatever the
         * targets do; restarts before starts. */
        Image b[] = { wants(img("x", IMAGE_CLASS_SYSEXT, 1, true, NULL, "r.service", "r.service z.service"),
                            "multi-user.target.wants/z.service multi-user.target.wants/r.service") };
        u = plan(NULL, 0, b, 1, IMAGE_CLASS_ALL);
        CHECK(u.n == 2 && streq_ptr(job(&u, "r.service"), "reload-or-restart") && wanted_by_is(&u, "r.service", ""));
        CHECK(u.actions[0].kind == UNIT_JOB_RELOAD_OR_RESTART && u.actions[1].kind == UNIT_JOB_START);
        unit_actions_done(&u);
        /* The same with the restart asked by another image considered after the start. */
        Image c[] = { wants(img("x", IMAGE_CLASS_SYSEXT, 1, true, NULL, NULL, "r.service"),
                            "multi-user.target.wants/r.service"),
                      img("y", IMAGE_CLASS_CONFEXT, 1, false, "r.service", NULL, "r.service.d/") };
        u = plan(NULL, 0, c, 2, IMAGE_CLASS_ALL);
        CHECK(u.n == 1 && streq_ptr(job(&u, "r.service"), "restart") && streq_ptr(job_image(&u, "r.service"), "y") &&
              wanted_by_is(&u, "r.service", ""));
        unit_actions_done(&u);
        drop(b, 1), drop(c, 2);

        /* A unit of a type an image never restarts is never started either, shipped or not;
         * no warning (enabling is no request to sysextd). */
        Image d[] = { wants(img("t", IMAGE_CLASS_SYSEXT, 1, true, NULL, NULL,
                                "my.target data.mount data.automount s.swap my.slice my.scope dev-x.device"),
                            "multi-user.target.wants/my.target local-fs.target.wants/data.mount "
                            "local-fs.target.wants/data.automount swap.target.wants/s.swap "
                            "multi-user.target.wants/my.slice multi-user.target.wants/my.scope "
                            "multi-user.target.wants/dev-x.device") };
        u = plan(NULL, 0, d, 1, IMAGE_CLASS_ALL);
        CHECK(u.reload && u.n == 0 && !u.warnings);
        unit_actions_done(&u);
        drop(d, 1);

        /* Links the probe would not record, as a journal might hold them: nothing. */
        Image e[] = { wants(img("e", IMAGE_CLASS_SYSEXT, 1, true, NULL, NULL, "e.service"),
                            "multi-user.target.upholds/e.service e.service multi-user.target.wants/../e.service "
                            "multi-user.target.after/e.service") };
        u = plan(NULL, 0, e, 1, IMAGE_CLASS_ALL);
        CHECK(u.n == 0 && !u.warnings);
        unit_actions_done(&u);
        drop(e, 1);
}

static void test_wanted_split(void) {
        char *t = NULL, *u = NULL;

        CHECK(unit_wanted_link_split("multi-user.target.wants/app.service", &t, &u) == 0);
        CHECK_STREQ(t, "multi-user.target");
        CHECK_STREQ(u, "app.service");
        free(t), free(u);
        t = u = NULL;
        CHECK(unit_wanted_link_split("app.service.requires/db@main.socket", &t, &u) == 0);
        CHECK_STREQ(t, "app.service");
        CHECK_STREQ(u, "db@main.socket");
        free(t), free(u);
        t = u = NULL;
        CHECK(unit_wanted_link_split("graphical.target.wants/x.timer", NULL, NULL) == 0);
        /* Upholds= is systemd's to enforce after the reload: not ours. */
        CHECK(unit_wanted_link_split("multi-user.target.upholds/app.service", &t, &u) == -EINVAL);
        CHECK(t == NULL && u == NULL);
        /* Drop-ins, other directories, templates, paths, no names. */
        CHECK(unit_wanted_link_split("app.service.d/10-x.conf", NULL, NULL) == -EINVAL);
        CHECK(unit_wanted_link_split("multi-user.target.after/app.service", NULL, NULL) == -EINVAL);
        CHECK(unit_wanted_link_split("multi-user.target.wants/app@.service", NULL, NULL) == -EINVAL);
        CHECK(unit_wanted_link_split("getty@.service.wants/app.service", NULL, NULL) == -EINVAL);
        CHECK(unit_wanted_link_split("multi-user.target.wants/../app.service", NULL, NULL) == -EINVAL);
        CHECK(unit_wanted_link_split("a/multi-user.target.wants/app.service", NULL, NULL) == -EINVAL);
        CHECK(unit_wanted_link_split("multi-user.target.wants/", NULL, NULL) == -EINVAL);
        CHECK(unit_wanted_link_split(".wants/app.service", NULL, NULL) == -EINVAL);
        CHECK(unit_wanted_link_split("multi-user.target.wants", NULL, NULL) == -EINVAL);
        CHECK(unit_wanted_link_split("multi-user.wants/app.service", NULL, NULL) == -EINVAL);
        CHECK(unit_wanted_link_split(NULL, NULL, NULL) == -EINVAL);
}

static void test_wanted_scan(void) {
        char tmpl[] = "/tmp/test-units-wanted-XXXXXX";
        char *dir = mkdtemp(tmpl);
        char **found = NULL;
        int root;

        CHECK(dir != NULL);
        if (!dir)
                return;
        root = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        CHECK(root >= 0);
        CHECK(mkdir_p_at(root, "usr/lib/systemd/system/multi-user.target.wants", 0755) == 0);
        CHECK(mkdir_p_at(root, "usr/lib/systemd/system/multi-user.target.upholds", 0755) == 0);
        CHECK(mkdir_p_at(root, "usr/lib/systemd/system/app.service.requires", 0755) == 0);
        CHECK(mkdir_p_at(root, "usr/lib/systemd/system/app@.service.wants", 0755) == 0);
        CHECK(mkdir_p_at(root, "usr/local/lib/systemd/system/timers.target.wants", 0755) == 0);
        CHECK(mkdir_p_at(root, "etc/systemd/system/multi-user.target.wants", 0755) == 0);
        CHECK(mkdir_p_at(root, "elsewhere/linked.target.wants", 0755) == 0);
        CHECK(mkfile(root, "usr/lib/systemd/system/app.service") == 0);
        CHECK(symlinkat("../app.service", root, "usr/lib/systemd/system/multi-user.target.wants/app.service") == 0);
        CHECK(symlinkat("/usr/lib/systemd/system/host.service", root,
                        "usr/lib/systemd/system/multi-user.target.wants/host.service") == 0);
        /* A link is named, never followed: one out of the image counts by its name (the plan
         * then asks whether the image ships that unit). */
        CHECK(symlinkat("../../../../../../etc/passwd", root, "usr/lib/systemd/system/multi-user.target.wants/out.service") == 0);
        CHECK(symlinkat("/dev/null", root, "usr/lib/systemd/system/multi-user.target.wants/masked.service") == 0);
        CHECK(mkfile(root, "usr/lib/systemd/system/multi-user.target.wants/regular.service") == 0);
        CHECK(symlinkat("../app.service", root, "usr/lib/systemd/system/multi-user.target.wants/bad name.service") == 0);
        CHECK(symlinkat("../app.service", root, "usr/lib/systemd/system/multi-user.target.wants/notaunit") == 0);
        CHECK(symlinkat("../app.service", root, "usr/lib/systemd/system/multi-user.target.upholds/app.service") == 0);
        CHECK(symlinkat("../db.socket", root, "usr/lib/systemd/system/app.service.requires/db.socket") == 0);
        CHECK(symlinkat("../x.service", root, "usr/lib/systemd/system/app@.service.wants/x.service") == 0);
        CHECK(symlinkat("/usr/local/lib/systemd/system/t.timer", root,
                        "usr/local/lib/systemd/system/timers.target.wants/t.timer") == 0);
        CHECK(symlinkat("../c.service", root, "etc/systemd/system/multi-user.target.wants/c.service") == 0);
        CHECK(symlinkat("../../../../elsewhere/linked.target.wants", root, "usr/lib/systemd/system/linked.target.wants") == 0);
        CHECK(symlinkat("../x.service", root, "elsewhere/linked.target.wants/x.service") == 0);

        CHECK(unit_wanted_scan(root, unit_dirs(IMAGE_CLASS_SYSEXT, false), &found) == 0);
        CHECK(strv_length(found) == 5);
        CHECK(strv_contains(found, "multi-user.target.wants/app.service"));
        CHECK(strv_contains(found, "multi-user.target.wants/host.service"));
        CHECK(strv_contains(found, "multi-user.target.wants/out.service"));
        CHECK(strv_contains(found, "app.service.requires/db.socket"));
        CHECK(strv_contains(found, "timers.target.wants/t.timer"));
        /* Not: a mask, a regular file, invalid names, .upholds/, a template's directory, a
         * directory that is a symlink. */
        CHECK(!strv_contains(found, "multi-user.target.wants/masked.service"));
        CHECK(!strv_contains(found, "multi-user.target.wants/regular.service"));
        CHECK(!strv_contains(found, "multi-user.target.upholds/app.service"));
        CHECK(!strv_contains(found, "linked.target.wants/x.service"));
        strv_free(found);
        found = NULL;

        /* A confext: etc/systemd/system only. */
        CHECK(unit_wanted_scan(root, unit_dirs(IMAGE_CLASS_CONFEXT, false), &found) == 0);
        CHECK(strv_length(found) == 1 && streq(found[0], "multi-user.target.wants/c.service"));
        strv_free(found);
        found = NULL;

        /* None there: nothing. */
        CHECK(unit_wanted_scan(root, unit_dirs(IMAGE_CLASS_SYSEXT, true), &found) == 0);
        CHECK(found == NULL);

        remove_tmp_dir(dir);
        close(root);
}

int main(void) {
        test_names();
        test_candidates();
        test_reload_only();
        test_any_image_any_unit();
        test_shipped();
        test_refused_types_even_if_shipped();
        test_confext_vs_sysext();
        test_vanished();
        test_changed_both_versions();
        test_invalid_and_duplicates();
        test_scan();
        test_enabled();
        test_enabled_changed();
        test_enabled_and_listed();
        test_wanted_split();
        test_wanted_scan();
        return tap_finish();
}
