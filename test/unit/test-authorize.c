/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Which options of a transition need org.sysextd1.manage-unsafe, and the polkit details of a
 * call, a transition's or Follow's and Unfollow's (authorize.h). */
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

/* authorize_details() of the call: each pair of want ("key", "value", ..., NULL) is there
 * with that value, a NULL value meaning the key is absent. */
static void check_details(const EngineConfig *c, EngineVerb verb, const EngineOptions *o, const char *const *want) {
        char **d = NULL;

        CHECK(authorize_details(c, verb, o, &d) == 0);
        for (; want[0]; want += 2)
                if (want[1])
                        CHECK_STREQ(detail(d, want[0]), want[1]);
                else
                        CHECK(detail(d, want[0]) == NULL);
        strv_free(d);
}

int main(void) {
        EngineConfig c = {};
        EngineOptions o;

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
        check_unsafe_string(&c, &o, "image-policy=open (configured: signed for sysext)");
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
                            "force=true, image-policy=open (configured: signed for sysext), "
                            "noexec=false (configured: noexec for confext), confext-mutable=yes (configured: no)");

        /* Details. */
        check_details(&c, ENGINE_REFRESH, &o,
                      (const char *[]) { "verb", "refresh", "class", "sysext confext", "force", "true",
                                         "always-refresh", "false", "image-policy", "open", "sysext-image-policy", "open",
                                         "noexec", "false", "confext-noexec", "false", "sysext-mutable", "no",
                                         "confext-mutable", "yes", "unsafe", "force image-policy noexec mutable", NULL });

        o = (EngineOptions) ENGINE_OPTIONS_INIT;
        o.classes = 1u << IMAGE_CLASS_SYSEXT;
        o.always_refresh = true;
        check_details(&c, ENGINE_MERGE, &o,
                      (const char *[]) { "verb", "merge", "class", "sysext", "force", "false", "always-refresh", "true",
                                         "image-policy", "signed", "noexec", "", "sysext-noexec", "false",
                                         "confext-noexec", NULL, "confext-mutable", NULL, "confext-image-policy", NULL,
                                         "unsafe", "", NULL });

        /* A class's own ImagePolicy= (sysext.conf, confext.conf) counts for that class. */
        c.classes[IMAGE_CLASS_CONFEXT].policy = IMAGE_POLICY_OPEN; /* weaker than sysextd.conf's signed */
        o = (EngineOptions) ENGINE_OPTIONS_INIT;
        o.policy = IMAGE_POLICY_VERITY;
        o.classes = 1u << IMAGE_CLASS_CONFEXT;
        CHECK(authorize_unsafe(&c, &o) == 0); /* stricter than confext's open */
        o.classes = 0;
        CHECK(authorize_unsafe(&c, &o) == AUTHORIZE_UNSAFE_IMAGE_POLICY); /* weaker than sysext's signed */
        check_unsafe_string(&c, &o, "image-policy=verity (configured: signed for sysext)");
        o = (EngineOptions) ENGINE_OPTIONS_INIT;
        o.force = true;
        check_details(&c, ENGINE_REFRESH, &o,
                      (const char *[]) { "image-policy", "open", "sysext-image-policy", "signed",
                                         "confext-image-policy", "open", "unsafe", "force", NULL });
        c.classes[IMAGE_CLASS_CONFEXT].policy = -1;
        c.classes[IMAGE_CLASS_SYSEXT].policy = IMAGE_POLICY_DENY; /* stricter than signed */
        o = (EngineOptions) ENGINE_OPTIONS_INIT;
        o.policy = IMAGE_POLICY_SIGNED;
        o.classes = 1u << IMAGE_CLASS_SYSEXT;
        CHECK(authorize_unsafe(&c, &o) == AUTHORIZE_UNSAFE_IMAGE_POLICY);
        check_unsafe_string(&c, &o, "image-policy=signed (configured: deny for sysext)");
        o.classes = 1u << IMAGE_CLASS_CONFEXT;
        CHECK(authorize_unsafe(&c, &o) == 0);
        c.classes[IMAGE_CLASS_SYSEXT].policy = -1;

        /* Follow and Unfollow: the verb and the process, nothing unsafe. */
        {
                char **d = NULL;

                CHECK(authorize_follow_details(true, 4242, &d) == 0);
                CHECK_STREQ(detail(d, "verb"), "follow");
                CHECK_STREQ(detail(d, "pid"), "4242");
                CHECK_STREQ(detail(d, "unsafe"), "");
                CHECK(detail(d, "force") == NULL);
                strv_free(d);
                d = NULL;
                CHECK(authorize_follow_details(false, 1, &d) == 0);
                CHECK_STREQ(detail(d, "verb"), "unfollow");
                CHECK_STREQ(detail(d, "pid"), "1");
                strv_free(d);
        }

        engine_config_done(&c);
        return tap_finish();
}
