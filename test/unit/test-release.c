/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "release.h"
#include "tests.h"
#include "util.h"

static int match(const char *host_text, const char *ext_text, char **reason) {
        _cleanup_release_ Release host = {}, ext = {};

        *reason = NULL;
        if (release_parse(host_text, &host) < 0 || release_parse(ext_text, &ext) < 0)
                return -1;
        return release_match(&host, &ext, IMAGE_CLASS_SYSEXT, reason);
}

static void test_parse(void) {
        _cleanup_release_ Release r = {};

        CHECK(release_parse("# comment\n"
                            "ID=fedora\n"
                            "ID_LIKE=\"rhel centos\"\n"
                            "VERSION_ID='40'\n"
                            "  SYSEXT_LEVEL = \"1.2\"  \n"
                            "ARCHITECTURE=x86-64\n"
                            "SYSEXT_SCOPE=\"system portable\"\n"
                            "NAME=\"Fedora \\\"Linux\\\"\"\n"
                            "garbage line\n",
                            &r) == 0);
        CHECK_STREQ(r.id, "fedora");
        CHECK_STREQ(r.version_id, "40");
        CHECK_STREQ(r.level[IMAGE_CLASS_SYSEXT], "1.2");
        CHECK_STREQ(r.architecture, "x86-64");
        CHECK(strv_length(r.id_like) == 2);
        CHECK(strv_contains(r.scope[IMAGE_CLASS_SYSEXT], "portable"));
        CHECK(release_parse("ID=\"unterminated\n", &r) < 0);
}

static void test_match(void) {
        _cleanup_free_ char *reason = NULL;
        char arch[128];

        CHECK(match("ID=debian\nVERSION_ID=12\n", "ID=debian\nVERSION_ID=12\n", &reason) == 1);
        CHECK(match("ID=debian\nVERSION_ID=12\n", "ID=_any\n", &reason) == 1);

        CHECK(match("ID=debian\nVERSION_ID=12\n", "ID=fedora\nVERSION_ID=12\n", &reason) == 0);
        CHECK(reason && strstr(reason, "fedora") && strstr(reason, "debian"));
        free(reason);

        CHECK(match("ID=debian\nVERSION_ID=12\n", "ID=debian\nVERSION_ID=11\n", &reason) == 0);
        CHECK(reason && strstr(reason, "VERSION_ID=11"));
        free(reason);

        /* SYSEXT_LEVEL wins over VERSION_ID when both sides have it. */
        CHECK(match("ID=debian\nVERSION_ID=12\nSYSEXT_LEVEL=2\n", "ID=debian\nVERSION_ID=11\nSYSEXT_LEVEL=2\n", &reason) == 1);
        CHECK(match("ID=debian\nVERSION_ID=12\nSYSEXT_LEVEL=2\n", "ID=debian\nSYSEXT_LEVEL=3\n", &reason) == 0);
        CHECK(reason && strstr(reason, "SYSEXT_LEVEL=3"));
        free(reason);

        /* Rolling host without versions: ID decides. */
        CHECK(match("ID=arch\n", "ID=arch\nVERSION_ID=5\n", &reason) == 1);
        /* Extension without any version on a versioned host. */
        CHECK(match("ID=debian\nVERSION_ID=12\n", "ID=debian\n", &reason) == 0);
        free(reason);
        /* ID_LIKE, both ways: the host is like the extension's ID, or the extension says it is
         * like the host's ID. */
        CHECK(match("ID=ubuntu\nID_LIKE=debian\nVERSION_ID=24.04\n", "ID=debian\nVERSION_ID=24.04\n", &reason) == 1);
        CHECK(match("ID=ubuntu\nID_LIKE=\"debian other\"\nVERSION_ID=24.04\n", "ID=other\nVERSION_ID=24.04\n", &reason) == 1);
        CHECK(match("ID=debian\nVERSION_ID=12\n", "ID=ubuntu\nID_LIKE=debian\nVERSION_ID=12\n", &reason) == 1);
        CHECK(match("ID=debian\nVERSION_ID=12\n", "ID=mint\nID_LIKE=\"ubuntu debian\"\nVERSION_ID=12\n", &reason) == 1);
        CHECK(match("ID=debian\nVERSION_ID=12\n", "ID=ubuntu\nID_LIKE=fedora\nVERSION_ID=12\n", &reason) == 0);
        free(reason);
        reason = NULL;
        /* ID_LIKE does not lift the version check. */
        CHECK(match("ID=debian\nVERSION_ID=12\n", "ID=ubuntu\nID_LIKE=debian\nVERSION_ID=24.04\n", &reason) == 0);
        free(reason);
        reason = NULL;
        CHECK(match("ID=ubuntu\nID_LIKE=debian\nVERSION_ID=24.04\n", "ID=debian\nVERSION_ID=12\n", &reason) == 0);
        free(reason);
        reason = NULL;
        /* An exact string: 40 is not 40.0. */
        CHECK(match("ID=fedora\nVERSION_ID=40\n", "ID=fedora\nVERSION_ID=40.0\n", &reason) == 0);
        free(reason);
        reason = NULL;
        /* Host with a level but no VERSION_ID, extension without a level. */
        CHECK(match("ID=flatcar\nSYSEXT_LEVEL=1.0\n", "ID=flatcar\n", &reason) == 1);
        /* _any passes the ID but not the scope or the architecture. */
        CHECK(match("ID=debian\nVERSION_ID=12\n", "ID=_any\nSYSEXT_SCOPE=portable\n", &reason) == 0);
        free(reason);
        reason = NULL;
        CHECK(match("ID=debian\nVERSION_ID=12\n", "ID=_any\nARCHITECTURE=m68k\n", &reason) == 0);
        free(reason);
        reason = NULL;

        /* Scope. */
        CHECK(match("ID=debian\nVERSION_ID=12\n", "ID=debian\nVERSION_ID=12\nSYSEXT_SCOPE=portable\n", &reason) == 0);
        CHECK(reason && strstr(reason, "system"));
        free(reason);
        CHECK(match("ID=debian\nVERSION_ID=12\n", "ID=debian\nVERSION_ID=12\nSYSEXT_SCOPE=\"initrd system\"\n", &reason) == 1);

        /* Architecture. */
        snprintf(arch, sizeof(arch), "ID=debian\nVERSION_ID=12\nARCHITECTURE=%s\n", release_native_architecture());
        CHECK(match("ID=debian\nVERSION_ID=12\n", arch, &reason) == 1);
        CHECK(match("ID=debian\nVERSION_ID=12\n", "ID=debian\nVERSION_ID=12\nARCHITECTURE=_any\n", &reason) == 1);
        CHECK(match("ID=debian\nVERSION_ID=12\n", "ID=debian\nVERSION_ID=12\nARCHITECTURE=m68k\n", &reason) == 0);
        CHECK(reason && strstr(reason, "m68k"));
        free(reason);
        reason = NULL;

        CHECK(match("ID=debian\nVERSION_ID=12\n", "VERSION_ID=12\n", &reason) == 0);
        free(reason);
        reason = NULL;
}

/* Configuration extensions: CONFEXT_LEVEL and CONFEXT_SCOPE, never the SYSEXT_ keys. */
static void test_confext(void) {
        _cleanup_release_ Release host = {}, a = {}, b = {}, c = {}, d = {};
        char *reason = NULL;

        CHECK(release_parse("ID=debian\nVERSION_ID=12\nCONFEXT_LEVEL=7\nSYSEXT_LEVEL=1\n", &host) == 0);
        CHECK(release_parse("ID=debian\nCONFEXT_LEVEL=7\n", &a) == 0);
        CHECK(release_match(&host, &a, IMAGE_CLASS_CONFEXT, &reason) == 1);
        /* As a sysext it has no SYSEXT_LEVEL and no VERSION_ID. */
        CHECK(release_match(&host, &a, IMAGE_CLASS_SYSEXT, &reason) == 0);
        free(reason), reason = NULL;
        CHECK(release_parse("ID=debian\nCONFEXT_LEVEL=8\nVERSION_ID=12\n", &b) == 0);
        CHECK(release_match(&host, &b, IMAGE_CLASS_CONFEXT, &reason) == 0);
        CHECK(reason && strstr(reason, "CONFEXT_LEVEL=8"));
        free(reason), reason = NULL;
        CHECK(release_parse("ID=debian\nVERSION_ID=12\nCONFEXT_SCOPE=portable\nSYSEXT_SCOPE=system\n", &c) == 0);
        CHECK(release_match(&host, &c, IMAGE_CLASS_CONFEXT, &reason) == 0);
        CHECK(reason && strstr(reason, "CONFEXT_SCOPE"));
        free(reason), reason = NULL;
        CHECK(release_match(&host, &c, IMAGE_CLASS_SYSEXT, &reason) == 1);
        /* In an initrd only extensions with the initrd scope. */
        host.initrd = true;
        CHECK(release_parse("ID=debian\nVERSION_ID=12\nCONFEXT_SCOPE=\"initrd system\"\n", &d) == 0);
        CHECK(release_match(&host, &d, IMAGE_CLASS_CONFEXT, &reason) == 1);
        CHECK(release_match(&host, &d, IMAGE_CLASS_SYSEXT, &reason) == 0);
        CHECK(reason && strstr(reason, "initrd"));
        free(reason), reason = NULL;
        CHECK(release_match(&host, &a, IMAGE_CLASS_CONFEXT, &reason) == 0);
        free(reason), reason = NULL;
}

static void test_units(void) {
        _cleanup_release_ Release r = {};

        CHECK(release_parse("ID=_any\nEXTENSION_RELOAD_MANAGER=1\nEXTENSION_RESTART_UNITS=\"a.service b.service\"\n"
                            "EXTENSION_RELOAD_OR_RESTART_UNITS=c.service\n", &r) == 0);
        CHECK_STREQ(r.reload_manager, "1");
        CHECK(strv_length(r.restart_units) == 2 && streq(r.restart_units[1], "b.service"));
        CHECK(strv_length(r.reload_or_restart_units) == 1);
}

static void test_version_compare(void) {
        CHECK(version_compare("ext-9", "ext-10") < 0);
        CHECK(version_compare("ext-10", "ext-9") > 0);
        CHECK(version_compare("a", "b") < 0);
        CHECK(version_compare("1.0", "1.0") == 0);
        CHECK(version_compare("1.0~rc1", "1.0") < 0);
        CHECK(version_compare("1.0", "1.0.1") < 0);
        CHECK(version_compare("1.0-1", "1.0.1") < 0);
        CHECK(version_compare("foo-001", "foo-1") == 0);
        CHECK(version_compare("v2a", "v2") > 0);
        CHECK(version_compare("1a", "1.1") < 0);
}

int main(void) {
        test_parse();
        test_match();
        test_confext();
        test_units();
        test_version_compare();
        return tap_finish();
}
