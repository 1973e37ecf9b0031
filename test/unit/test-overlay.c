/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "missing.h"
#include "overlay.h"
#include "tests.h"
#include "util.h"

static const char *param(const OverlayPlan *p, const char *key, size_t nth) {
        for (size_t i = 0; i < p->n; i++)
                if (streq(p->params[i].key, key) && nth-- == 0)
                        return p->params[i].value ?: "";
        return NULL;
}

static size_t count(const OverlayPlan *p, const char *key) {
        size_t n = 0;
        for (size_t i = 0; i < p->n; i++)
                n += streq(p->params[i].key, key);
        return n;
}

static int build(char **layers, bool plus, OverlayPlan *p) {
        return overlay_plan_build(&(OverlaySpec) { .layers = layers, .attrs = MOUNT_ATTR_NODEV }, plus, p);
}

int main(void) {
        _cleanup_strv_free_ char **many = NULL, **layers = NULL, **odd = NULL, **one = NULL;
        OverlayPlan p = {};

        if (strv_split("i2/usr i1/usr b-usr m-usr", " ", &layers) < 0 ||
            strv_split("dir:with:colons back\\slash", " ", &odd) < 0 || strv_split("b-usr", " ", &one) < 0)
                return 1;

        /* lowerdir+: one parameter per layer, top first, untrusted-layer options, ro. */
        CHECK(build(layers, true, &p) == 0);
        CHECK(count(&p, "lowerdir+") == 4);
        CHECK_STREQ(param(&p, "lowerdir+", 0), "i2/usr");
        CHECK_STREQ(param(&p, "lowerdir+", 3), "m-usr");
        CHECK_STREQ(param(&p, "source", 0), "sysextd");
        CHECK_STREQ(param(&p, "redirect_dir", 0), "nofollow");
        CHECK_STREQ(param(&p, "metacopy", 0), "off");
        CHECK(param(&p, "ro", 0) != NULL);
        CHECK(param(&p, "upperdir", 0) == NULL);
        /* No fds given: every layer goes by its path. */
        for (size_t i = 0; i < p.n; i++)
                CHECK(p.params[i].fd < 0);
        overlay_plan_done(&p);

        /* Layers given with fds: each lowerdir+ carries its own (its path too, for the
         * kernels that take none), the others none. */
        {
                static const int fds[] = { 7, -1, 9, -1 };
                size_t seen = 0;

                CHECK(overlay_plan_build(&(OverlaySpec) { .layers = layers, .layer_fds = fds }, true, &p) == 0);
                for (size_t i = 0; i < p.n; i++) {
                        if (!streq(p.params[i].key, "lowerdir+")) {
                                CHECK(p.params[i].fd < 0);
                                continue;
                        }
                        CHECK(seen < 4);
                        CHECK(p.params[i].fd == fds[seen]);
                        CHECK_STREQ(p.params[i].value, layers[seen]);
                        seen++;
                }
                CHECK(seen == 4);
                overlay_plan_done(&p);
                /* The legacy string has no room for fds: paths only. */
                CHECK(overlay_plan_build(&(OverlaySpec) { .layers = layers, .layer_fds = fds }, false, &p) == 0);
                for (size_t i = 0; i < p.n; i++)
                        CHECK(p.params[i].fd < 0);
                overlay_plan_done(&p);
        }

        /* Legacy: one string, top first, ':' and '\' escaped. */
        CHECK(build(layers, false, &p) == 0);
        CHECK(count(&p, "lowerdir+") == 0);
        CHECK_STREQ(param(&p, "lowerdir", 0), "i2/usr:i1/usr:b-usr:m-usr");
        overlay_plan_done(&p);
        CHECK(build(odd, false, &p) == 0);
        CHECK_STREQ(param(&p, "lowerdir", 0), "dir\\:with\\:colons:back\\\\slash");
        overlay_plan_done(&p);
        /* With lowerdir+ no escaping is needed. */
        CHECK(build(odd, true, &p) == 0);
        CHECK_STREQ(param(&p, "lowerdir+", 0), "dir:with:colons");
        overlay_plan_done(&p);

        /* Limits: at least two layers, at most 500; the legacy string fits 256 bytes. */
        CHECK(build(one, true, &p) == -EINVAL);
        for (int i = 0; i < 501; i++) {
                char *s;
                if (asprintf(&s, "i%d/usr", i) < 0 || strv_push(&many, s) < 0)
                        return 1;
        }
        CHECK(build(many, true, &p) == -EINVAL);
        free(many[500]);
        many[500] = NULL;
        CHECK(build(many, true, &p) == 0);
        CHECK(count(&p, "lowerdir+") == 500);
        overlay_plan_done(&p);
        CHECK(build(many, false, &p) == -E2BIG);

        /* Writable: upper and work directory, systemd-sysext's options, no ro; index=off
         * even when the options replace the defaults. */
        CHECK(overlay_plan_build(&(OverlaySpec) { .layers = one, .upper = "up", .work = "wk" }, true, &p) == 0);
        CHECK_STREQ(param(&p, "upperdir", 0), "up");
        CHECK_STREQ(param(&p, "workdir", 0), "wk");
        CHECK_STREQ(param(&p, "redirect_dir", 0), "on");
        CHECK_STREQ(param(&p, "index", 0), "off");
        CHECK_STREQ(param(&p, "metacopy", 0), "off");
        CHECK(param(&p, "ro", 0) == NULL);
        CHECK(param(&p, "noatime", 0) == NULL);
        CHECK((p.attrs & MOUNT_ATTR__ATIME) == MOUNT_ATTR_NOATIME);
        CHECK(!(p.attrs & MOUNT_ATTR_RDONLY));
        overlay_plan_done(&p);
        CHECK(overlay_plan_build(&(OverlaySpec) { .layers = one, .upper = "up", .work = "wk", .options = "relatime,metacopy=on" },
                                 true, &p) == 0);
        CHECK_STREQ(param(&p, "metacopy", 0), "on");
        CHECK_STREQ(param(&p, "index", 0), "off");
        CHECK(param(&p, "redirect_dir", 0) == NULL);
        CHECK((p.attrs & MOUNT_ATTR__ATIME) == MOUNT_ATTR_RELATIME);
        overlay_plan_done(&p);
        CHECK(overlay_plan_build(&(OverlaySpec) { .layers = one, .upper = "up", .work = "wk", .options = "index=on" }, true, &p) == 0);
        CHECK_STREQ(param(&p, "index", 0), "on");
        CHECK(count(&p, "index") == 1);
        overlay_plan_done(&p);
        /* Read-only: extra options appended, per-mount flags turned into attributes. */
        CHECK(overlay_plan_build(&(OverlaySpec) { .layers = layers, .options = "noexec,xino=off" }, true, &p) == 0);
        CHECK_STREQ(param(&p, "redirect_dir", 0), "nofollow");
        CHECK_STREQ(param(&p, "xino", 0), "off");
        CHECK(param(&p, "noexec", 0) == NULL);
        CHECK(p.attrs & MOUNT_ATTR_NOEXEC);
        CHECK(p.attrs & MOUNT_ATTR_RDONLY);
        overlay_plan_done(&p);
        /* Read-only: a given option replaces the default of its key, once; metacopy=on also
         * drops redirect_dir=nofollow (the kernel refuses the two together). */
        CHECK(overlay_plan_build(&(OverlaySpec) { .layers = layers, .options = "metacopy=on" }, true, &p) == 0);
        CHECK_STREQ(param(&p, "metacopy", 0), "on");
        CHECK(count(&p, "metacopy") == 1);
        CHECK(count(&p, "redirect_dir") == 0);
        overlay_plan_done(&p);
        CHECK(overlay_plan_build(&(OverlaySpec) { .layers = layers, .options = "redirect_dir=follow,metacopy=on" }, true, &p) == 0);
        CHECK_STREQ(param(&p, "redirect_dir", 0), "follow");
        CHECK(count(&p, "redirect_dir") == 1 && count(&p, "metacopy") == 1);
        overlay_plan_done(&p);
        CHECK(overlay_plan_build(&(OverlaySpec) { .layers = layers, .options = "metacopy=off,redirect_dir=off" }, true, &p) == 0);
        CHECK_STREQ(param(&p, "redirect_dir", 0), "off");
        CHECK(count(&p, "redirect_dir") == 1 && count(&p, "metacopy") == 1);
        overlay_plan_done(&p);
        {
                _cleanup_free_ char *m = NULL, *bad = NULL;
                CHECK(overlay_options_merge("a=1,b=2,c", "b=3,d", &m) == 0);
                CHECK_STREQ(m, "a=1,c,b=3,d");
                free(m);
                m = NULL;
                CHECK(overlay_options_merge("a=1", NULL, &m) == 0);
                CHECK_STREQ(m, "a=1");
                CHECK(overlay_options_check("metacopy=on,xino=off,noexec", &bad) == 0 && !bad);
                CHECK(overlay_options_check(NULL, NULL) == 0);
                CHECK(overlay_options_check("xino=off,lowerdir=/", &bad) == -EINVAL);
                CHECK_STREQ(bad, "lowerdir=/");
                free(bad);
                bad = NULL;
                CHECK(overlay_options_check("upperdir=/x", &bad) == -EINVAL);
                CHECK_STREQ(bad, "upperdir=/x");
                free(bad);
                bad = NULL;
                CHECK(overlay_options_check("workdir=/x", NULL) == -EINVAL);
                CHECK(overlay_options_check("datadir+=/x", NULL) == -EINVAL);
                CHECK(overlay_options_check("lowerdir+=/x", NULL) == -EINVAL);
                CHECK(overlay_options_check("source=x", NULL) == -EINVAL);
                CHECK(overlay_options_check("=x", NULL) == -EINVAL);
        }
        /* Options cannot name layers; upper without work is refused. */
        CHECK(overlay_plan_build(&(OverlaySpec) { .layers = layers, .options = "upperdir=/x" }, true, &p) == -EINVAL);
        CHECK(overlay_plan_build(&(OverlaySpec) { .layers = layers, .options = "lowerdir=/x" }, true, &p) == -EINVAL);
        CHECK(overlay_plan_build(&(OverlaySpec) { .layers = layers, .upper = "up" }, true, &p) == -EINVAL);
        CHECK(overlay_plan_build(&(OverlaySpec) { .layers = NULL, .upper = "up", .work = "wk" }, true, &p) == -EINVAL);

        return tap_finish();
}
