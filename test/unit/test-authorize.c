/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Which options of a transition need org.sysextd1.manage-unsafe, and the polkit details of a
 * call (authorize.h). */
#include "authorize.h"
#include "tests.h"
#include "util.h"

/* The value of 'key' in a details list, NULL when absent. */
static const char *detail(char **d, const char *key) {
        for (; d && d[0] && d[1]; d += 2)
                if (strcmp(d[0], key) == 0)
                        return d[1];
        return NULL;
}

/* authorize_unsafe_to_string() is 'want'. */
static void check_unsafe_string(const EngineConfig *c, const EngineOptions *o, const char *want) {
        char *s = authorize_unsafe_to_string(c, o);
        CHECK_STREQ(s, want);
        free(s);
}

int main(void) {
        EngineConfig c = {};
        EngineOptions o;
        char **d = NULL;

        CHECK(engine_config_default(&c) >= 0);
        c.policy = IMAGE_POLICY_SIGNED;

        /* Nothing given, or only harmless options: the plain action. */
        o = (EngineOptions) ENGINE_OPTIONS_INIT;
        CHECK(authorize_unsafe(&c, &o) == 0);
        CHECK_STREQ(authorize_action(authorize_unsafe(&c, &o)), "org.sysextd1.manage");
        o.always_refresh = o.strict = o.no_reload = true;
        o.classes = 1u << IMAGE_CLASS_CONFEXT;
        o.noexec = 1;
        CHECK(authorize_unsafe(&c, &o) == 0);
        check_unsafe_string(&c, &o, "");

        /* force: always. */
        o = (EngineOptions) ENGINE_OPTIONS_INIT;
        o.force = true;
        CHECK(authorize_unsafe(&c, &o) == AUTHORIZE_UNSAFE_FORCE);
        CHECK_STREQ(authorize_action(authorize_unsafe(&c, &o)), "org.sysextd1.manage-unsafe");
        check_unsafe_string(&c, &o, "force=true");

        /* image-policy: weaker than configured is unsafe, the same or stricter is not. */
        o = (EngineOptions) ENGINE_OPTIONS_INIT;
        o.policy = IMAGE_POLICY_OPEN;
        CHECK(authorize_unsafe(&c, &o) == AUTHORIZE_UNSAFE_IMAGE_POLICY);
        check_unsafe_string(&c, &o, "image-policy=open (configured: signed)");
        o.policy = IMAGE_POLICY_VERITY;
        CHECK(authorize_unsafe(&c, &o) == AUTHORIZE_UNSAFE_IMAGE_POLICY);
        o.policy = IMAGE_POLICY_SIGNED;
        CHECK(authorize_unsafe(&c, &o) == 0);
        o.policy = IMAGE_POLICY_DENY;
        CHECK(authorize_unsafe(&c, &o) == 0);
        c.policy = IMAGE_POLICY_OPEN;
        o.policy = IMAGE_POLICY_OPEN;
        CHECK(authorize_unsafe(&c, &o) == 0);
        c.policy = IMAGE_POLICY_DENY;
        o.policy = IMAGE_POLICY_SIGNED;
        CHECK(authorize_unsafe(&c, &o) == AUTHORIZE_UNSAFE_IMAGE_POLICY);
        c.policy = IMAGE_POLICY_SIGNED;

        /* noexec=false: unsafe where a covered class is configured noexec (confext by default). */
        o = (EngineOptions) ENGINE_OPTIONS_INIT;
        o.noexec = 0;
        CHECK(authorize_unsafe(&c, &o) == AUTHORIZE_UNSAFE_NOEXEC);
        check_unsafe_string(&c, &o, "noexec=false (configured: noexec for confext)");
        o.classes = 1u << IMAGE_CLASS_SYSEXT;
        CHECK(authorize_unsafe(&c, &o) == 0);
        c.classes[IMAGE_CLASS_SYSEXT].noexec = true;
        CHECK(authorize_unsafe(&c, &o) == AUTHORIZE_UNSAFE_NOEXEC);
        c.classes[IMAGE_CLASS_SYSEXT].noexec = false;

        /* Mutable modes: another one than configured, but "no", is unsafe, for covered classes. */
        o = (EngineOptions) ENGINE_OPTIONS_INIT;
        o.mutable[IMAGE_CLASS_SYSEXT] = MUTABLE_NO;
        CHECK(authorize_unsafe(&c, &o) == 0);
        for (int m = MUTABLE_YES; m < _MUTABLE_MAX; m++) {
                o.mutable[IMAGE_CLASS_SYSEXT] = m;
                CHECK(authorize_unsafe(&c, &o) == AUTHORIZE_UNSAFE_MUTABLE);
        }
        o.mutable[IMAGE_CLASS_SYSEXT] = MUTABLE_YES;
        check_unsafe_string(&c, &o, "sysext-mutable=yes (configured: no)");
        c.classes[IMAGE_CLASS_SYSEXT].mutable = MUTABLE_YES;
        CHECK(authorize_unsafe(&c, &o) == 0);
        o.mutable[IMAGE_CLASS_SYSEXT] = MUTABLE_NO;
        CHECK(authorize_unsafe(&c, &o) == 0);
        c.classes[IMAGE_CLASS_SYSEXT].mutable = MUTABLE_NO;
        o.mutable[IMAGE_CLASS_SYSEXT] = -1;
        o.mutable[IMAGE_CLASS_CONFEXT] = MUTABLE_EPHEMERAL;
        o.classes = 1u << IMAGE_CLASS_SYSEXT;
        CHECK(authorize_unsafe(&c, &o) == 0); /* confext is not touched by this call */
        o.classes = 0;
        CHECK(authorize_unsafe(&c, &o) == AUTHORIZE_UNSAFE_MUTABLE);

        /* Several at once, in a fixed order. */
        o = (EngineOptions) ENGINE_OPTIONS_INIT;
        o.force = true;
        o.policy = IMAGE_POLICY_OPEN;
        o.noexec = 0;
        o.mutable[IMAGE_CLASS_CONFEXT] = MUTABLE_YES;
        CHECK(authorize_unsafe(&c, &o) == (AUTHORIZE_UNSAFE_FORCE | AUTHORIZE_UNSAFE_IMAGE_POLICY |
                                           AUTHORIZE_UNSAFE_NOEXEC | AUTHORIZE_UNSAFE_MUTABLE));
        check_unsafe_string(&c, &o,
                            "force=true, image-policy=open (configured: signed), "
                            "noexec=false (configured: noexec for confext), confext-mutable=yes (configured: no)");

        /* Details. */
        CHECK(authorize_details(&c, ENGINE_REFRESH, &o, &d) == 0);
        CHECK_STREQ(detail(d, "verb"), "refresh");
        CHECK_STREQ(detail(d, "class"), "sysext confext");
        CHECK_STREQ(detail(d, "force"), "true");
        CHECK_STREQ(detail(d, "always-refresh"), "false");
        CHECK_STREQ(detail(d, "image-policy"), "open");
        CHECK_STREQ(detail(d, "noexec"), "false");
        CHECK_STREQ(detail(d, "confext-noexec"), "false");
        CHECK_STREQ(detail(d, "sysext-mutable"), "no");
        CHECK_STREQ(detail(d, "confext-mutable"), "yes");
        CHECK_STREQ(detail(d, "unsafe"), "force image-policy noexec mutable");
        strv_free(d);
        d = NULL;

        o = (EngineOptions) ENGINE_OPTIONS_INIT;
        o.classes = 1u << IMAGE_CLASS_SYSEXT;
        o.always_refresh = true;
        CHECK(authorize_details(&c, ENGINE_MERGE, &o, &d) == 0);
        CHECK_STREQ(detail(d, "verb"), "merge");
        CHECK_STREQ(detail(d, "class"), "sysext");
        CHECK_STREQ(detail(d, "force"), "false");
        CHECK_STREQ(detail(d, "always-refresh"), "true");
        CHECK_STREQ(detail(d, "image-policy"), "signed");
        CHECK_STREQ(detail(d, "noexec"), "");
        CHECK_STREQ(detail(d, "sysext-noexec"), "false");
        CHECK(detail(d, "confext-noexec") == NULL);
        CHECK(detail(d, "confext-mutable") == NULL);
        CHECK_STREQ(detail(d, "unsafe"), "");
        strv_free(d);

        engine_config_done(&c);
        return tap_finish();
}
