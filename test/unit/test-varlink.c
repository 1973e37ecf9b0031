/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The varlink wire format (varlink-message.h) and io.systemd.sysext's mapping (varlink-sysext.h). */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "image-class.h"
#include "json-util.h"
#include "polkit.h"
#include "tests.h"
#include "util.h"
#include "varlink-message.h"
#include "varlink-sysext.h"

static int parse(const char *text, VarlinkMessage *m) {
        return varlink_message_parse(text, strlen(text), m);
}

static void test_method_names(void) {
        CHECK(varlink_method_name_valid("io.systemd.sysext.Merge"));
        CHECK(varlink_method_name_valid("org.varlink.service.GetInfo"));
        CHECK(varlink_method_name_valid("io.systemd.SysUpdate.Notify.OnCompletedUpdate"));
        CHECK(varlink_method_name_valid("a-b.c.D1"));
        CHECK(!varlink_method_name_valid("Merge"));
        CHECK(!varlink_method_name_valid("sysext.Merge"));
        CHECK(!varlink_method_name_valid("io.systemd.sysext.merge"));
        CHECK(!varlink_method_name_valid("io..sysext.Merge"));
        CHECK(!varlink_method_name_valid(".io.sysext.Merge"));
        CHECK(!varlink_method_name_valid("io.systemd-.x.Merge"));
        CHECK(!varlink_method_name_valid("io.1systemd.Merge"));
        CHECK(!varlink_method_name_valid("io.systemd.Mer ge"));
        CHECK(!varlink_method_name_valid("io.systemd.Merge."));
        CHECK(!varlink_method_name_valid(""));
        CHECK(!varlink_method_name_valid(NULL));
}

static void test_parse(void) {
        _cleanup_(varlink_message_done) VarlinkMessage m = {};
        char big[VARLINK_MESSAGE_MAX + 2];

        CHECK(parse("{\"method\":\"io.systemd.sysext.Merge\",\"parameters\":{\"force\":true}}", &m) == 0);
        CHECK_STREQ(m.method, "io.systemd.sysext.Merge");
        CHECK(json_object_is_type(m.parameters, json_type_object) && json_object_object_length(m.parameters) == 1);
        CHECK(m.flags == 0);
        varlink_message_done(&m);

        CHECK(parse("{\"method\":\"io.systemd.sysext.List\",\"more\":true}", &m) == 0);
        CHECK(m.flags == VARLINK_CALL_MORE);
        CHECK(json_object_object_length(m.parameters) == 0);
        varlink_message_done(&m);

        CHECK(parse(" {\"method\":\"a.b.C\",\"oneway\":true,\"parameters\":null} \n", &m) == 0);
        CHECK(m.flags == VARLINK_CALL_ONEWAY);
        varlink_message_done(&m);

        /* Not calls. */
        CHECK(parse("", &m) == -EBADMSG);
        CHECK(parse("[]", &m) == -EBADMSG);
        CHECK(parse("\"x\"", &m) == -EBADMSG);
        CHECK(parse("{}", &m) == -EBADMSG);
        CHECK(parse("{\"method\":1}", &m) == -EBADMSG);
        CHECK(parse("{\"method\":\"Merge\"}", &m) == -EBADMSG);
        CHECK(parse("{\"method\":\"a.b.C\",\"parameters\":[]}", &m) == -EBADMSG);
        CHECK(parse("{\"method\":\"a.b.C\",\"parameters\":\"x\"}", &m) == -EBADMSG);
        CHECK(parse("{\"method\":\"a.b.C\",\"more\":1}", &m) == -EBADMSG);
        CHECK(parse("{\"method\":\"a.b.C\",\"oneway\":\"yes\"}", &m) == -EBADMSG);
        CHECK(parse("{\"method\":\"a.b.C\",\"oneway\":true,\"more\":true}", &m) == -EBADMSG);
        CHECK(parse("{\"method\":\"a.b.C\",\"upgrade\":true}", &m) == -EPROTONOSUPPORT);
        /* Bad JSON, trailing garbage, lax JSON json-c would take, invalid UTF-8. */
        CHECK(parse("{\"method\":\"a.b.C\"", &m) == -EBADMSG);
        CHECK(parse("{\"method\":\"a.b.C\"}x", &m) == -EBADMSG);
        CHECK(parse("{\"method\":\"a.b.C\"}{}", &m) == -EBADMSG);
        CHECK(parse("{'method':'a.b.C'}", &m) == -EBADMSG);
        CHECK(parse("{\"method\":\"a.b.C\",}", &m) == -EBADMSG);
        CHECK(parse("{\"method\":\"a.b.C\",\"parameters\":{\"x\":\"\xff\xfe\"}}", &m) == -EBADMSG);
        CHECK(varlink_message_parse("{\"method\":\"a.b.C\"}\0", 20, &m) == -EBADMSG);
        /* Too deep, too long. */
        {
                char deep[256] = "{\"method\":\"a.b.C\",\"parameters\":{\"x\":";
                size_t n = strlen(deep);
                for (int i = 0; i < 40; i++)
                        deep[n++] = '[';
                for (int i = 0; i < 40; i++)
                        deep[n++] = ']';
                strcpy(deep + n, "}}");
                CHECK(parse(deep, &m) == -EBADMSG);
        }
        memset(big, ' ', sizeof(big) - 1);
        big[sizeof(big) - 1] = 0;
        memcpy(big, "{\"method\":\"a.b.C\"}", 18);
        CHECK(varlink_message_parse(big, sizeof(big) - 1, &m) == -EBADMSG);
}

static void test_format(void) {
        _cleanup_free_ char *a = NULL, *b = NULL, *c = NULL, *d = NULL;
        size_t n = 0;
        json_object *p = json_object_new_object();

        json_object_object_add(p, "Name", json_object_new_string("a/b"));
        a = varlink_format_reply(p, true, &n);
        CHECK_STREQ(a, "{\"parameters\":{\"Name\":\"a/b\"},\"continues\":true}");
        CHECK(n == strlen(a) + 1);
        b = varlink_format_reply(NULL, false, &n);
        CHECK_STREQ(b, "{\"parameters\":{}}");
        c = varlink_format_error(VARLINK_ERROR_SYSTEM, varlink_errno_parameters(-EBUSY), &n);
        CHECK_STREQ(c, "{\"error\":\"io.systemd.System\",\"parameters\":{\"errno\":16,\"errnoName\":\"EBUSY\"}}");
        d = varlink_format_error("not an error name", NULL, &n);
        CHECK(d == NULL);
}

static json_object *obj(const char *text) {
        return json_parse_object(text);
}

static void test_call_parse(void) {
        _cleanup_json_ json_object *p = NULL;
        const char *bad = NULL;
        SysextCall c;

        p = obj("{}");
        CHECK(sysext_call_parse("io.systemd.sysext.Merge", p, 0, &c, &bad) == 0);
        CHECK(c.method == SYSEXT_METHOD_MERGE && c.verb == ENGINE_MERGE);
        CHECK(c.options.classes == 1u << IMAGE_CLASS_SYSEXT);
        CHECK(!c.options.force && c.options.noexec < 0 && !c.interactive);
        json_object_putp(&p);

        p = obj("{\"class\":\"confext\",\"force\":true,\"noReload\":true,\"noexec\":false,\"allowInteractiveAuthentication\":true}");
        CHECK(sysext_call_parse("io.systemd.sysext.Merge", p, 0, &c, &bad) == 0);
        CHECK(c.options.classes == 1u << IMAGE_CLASS_CONFEXT);
        CHECK(c.options.force && c.options.no_reload && c.options.noexec == 0 && c.interactive);
        json_object_putp(&p);

        p = obj("{\"class\":null,\"force\":null,\"alwaysRefresh\":true}");
        CHECK(sysext_call_parse("io.systemd.sysext.Refresh", p, 0, &c, &bad) == 0);
        CHECK(c.verb == ENGINE_REFRESH && c.options.always_refresh && !c.options.force);
        CHECK(c.options.classes == 1u << IMAGE_CLASS_SYSEXT);
        /* alwaysRefresh is Refresh's only */
        CHECK(sysext_call_parse("io.systemd.sysext.Merge", p, 0, &c, &bad) == -EINVAL);
        CHECK_STREQ(bad, "alwaysRefresh");
        json_object_putp(&p);

        p = obj("{\"force\":true}");
        CHECK(sysext_call_parse("io.systemd.sysext.Unmerge", p, 0, &c, &bad) == -EINVAL);
        CHECK_STREQ(bad, "force");
        json_object_putp(&p);

        p = obj("{\"force\":\"yes\"}");
        CHECK(sysext_call_parse("io.systemd.sysext.Refresh", p, 0, &c, &bad) == -EINVAL);
        CHECK_STREQ(bad, "force");
        json_object_putp(&p);

        p = obj("{\"class\":\"portable\"}");
        CHECK(sysext_call_parse("io.systemd.sysext.Refresh", p, 0, &c, &bad) == -EINVAL);
        CHECK_STREQ(bad, "class");
        json_object_putp(&p);

        p = obj("{\"class\":1}");
        CHECK(sysext_call_parse("io.systemd.sysext.List", p, VARLINK_CALL_MORE, &c, &bad) == -EINVAL);
        json_object_putp(&p);

        p = obj("{\"bogus\":1}");
        CHECK(sysext_call_parse("io.systemd.sysext.Unmerge", p, 0, &c, &bad) == -EINVAL);
        CHECK_STREQ(bad, "bogus");
        json_object_putp(&p);

        p = obj("{}");
        CHECK(sysext_call_parse("io.systemd.sysext.List", p, 0, &c, &bad) == -EPROTO);
        CHECK(sysext_call_parse("io.systemd.sysext.List", p, VARLINK_CALL_MORE, &c, &bad) == 0);
        CHECK(c.method == SYSEXT_METHOD_LIST && c.options.classes == 1u << IMAGE_CLASS_SYSEXT);
        CHECK(sysext_call_parse("io.systemd.sysext.Status", p, 0, &c, &bad) == -EOPNOTSUPP);
        CHECK(sysext_call_parse("io.systemd.sysext.merge", p, 0, &c, &bad) == -EOPNOTSUPP);
        CHECK(sysext_call_parse(NULL, p, 0, &c, &bad) == -EOPNOTSUPP);
        json_object_putp(&p);

        /* What systemd-sysupdate sends; both classes; unknown keys ignored. */
        p = obj("{\"component\":null,\"version\":\"v2\",\"resources\":[{\"transfer\":\"app\"}],\"future\":1}");
        CHECK(sysext_call_parse("io.systemd.SysUpdate.Notify.OnCompletedUpdate", p, 0, &c, &bad) == 0);
        CHECK(c.method == SYSEXT_METHOD_COMPLETED_UPDATE && c.verb == ENGINE_REFRESH && c.options.classes == 0);
        json_object_putp(&p);
        p = obj("{\"version\":2}");
        CHECK(sysext_call_parse("io.systemd.SysUpdate.Notify.OnCompletedUpdate", p, 0, &c, &bad) == -EINVAL);
        CHECK_STREQ(bad, "version");
        json_object_putp(&p);
        p = obj("{\"resources\":{}}");
        CHECK(sysext_call_parse("io.systemd.SysUpdate.Notify.OnCompletedUpdate", p, 0, &c, &bad) == -EINVAL);
}

static void test_transition_reply(void) {
        _cleanup_json_ json_object *ok = obj("{\"r\":1,\"kind\":0}"), *nothing = obj("{\"r\":0,\"kind\":1}"),
                                   *merged = NULL, *busy = obj("{\"r\":-16,\"kind\":0}"), *weird = obj("{\"r\":-100000}");
        json_object *p = NULL;
        const char *error = "x";
        char text[128];

        snprintf(text, sizeof(text), "{\"r\":-16,\"kind\":%d}", ENGINE_ERROR_ALREADY_MERGED);
        merged = obj(text);

        CHECK(sysext_transition_reply(ok, NULL, &error, &p) == 0);
        CHECK(error == NULL && json_object_object_length(p) == 0);
        json_object_putp(&p);
        CHECK(sysext_transition_reply(nothing, NULL, &error, &p) == 0);
        CHECK(error == NULL);
        json_object_putp(&p);
        CHECK(sysext_transition_reply(merged, "/usr", &error, &p) == 0);
        CHECK_STREQ(error, SYSEXT_ERROR_ALREADY_MERGED);
        CHECK_STREQ(json_object_get_string(json_object_object_get(p, "hierarchy")), "/usr");
        json_object_putp(&p);
        CHECK(sysext_transition_reply(busy, NULL, &error, &p) == 0);
        CHECK_STREQ(error, VARLINK_ERROR_SYSTEM);
        CHECK(json_object_get_int(json_object_object_get(p, "errno")) == EBUSY);
        CHECK_STREQ(json_object_get_string(json_object_object_get(p, "errnoName")), "EBUSY");
        json_object_putp(&p);
        CHECK(sysext_transition_reply(weird, NULL, &error, &p) == 0);
        CHECK(json_object_get_int(json_object_object_get(p, "errno")) == EIO);
        json_object_putp(&p);
        CHECK(sysext_transition_reply(NULL, NULL, &error, &p) == 0);
        CHECK(json_object_get_int(json_object_object_get(p, "errno")) == EIO);
        json_object_putp(&p);
}

/* org.sysextd1.Manager: root required and kept, classes as a set, the D-Bus options, the D-Bus
 * defaults for what is not said (the configuration's classes), nothing of io.systemd.sysext's. */
static void test_manager_call_parse(void) {
        static const struct {
                const char *params, *bad;
        } refused[] = {
                { "{}", "root" },
                { "{\"root\":null}", "root" },
                { "{\"root\":\"relative\"}", "root" },
                { "{\"root\":7}", "root" },
                { "{\"root\":\"/r\",\"classes\":[]}", "classes" },
                { "{\"root\":\"/r\",\"classes\":\"sysext\"}", "classes" },
                { "{\"root\":\"/r\",\"classes\":[\"portable\"]}", "classes" },
                { "{\"root\":\"/r\",\"classes\":[\"sysext\",\"sysext\"]}", "classes" },
                { "{\"root\":\"/r\",\"classes\":[1]}", "classes" },
                { "{\"root\":\"/r\",\"force\":\"yes\"}", "force" },
                { "{\"root\":\"/r\",\"strict\":1}", "strict" },
                { "{\"root\":\"/r\",\"class\":\"sysext\"}", "class" },
                { "{\"root\":\"/r\",\"delay\":5}", "delay" },
                { "{\"root\":\"/r\",\"image-policy\":\"open\"}", "image-policy" },
        };
        _cleanup_json_ json_object *p = NULL;
        const char *bad = NULL;
        SysextCall c;

        p = obj("{\"root\":\"/r\"}");
        CHECK(sysext_call_parse("org.sysextd1.Manager.Refresh", p, 0, &c, &bad) == 0);
        CHECK(c.manager && c.verb == ENGINE_REFRESH && c.method == SYSEXT_METHOD_MANAGER_REFRESH);
        CHECK_STREQ(c.root, "/r");
        CHECK(c.options.classes == 0 && !c.options.force && !c.options.strict && c.options.noexec < 0 && !c.interactive);
        CHECK(sysext_call_parse("org.sysextd1.Manager.Merge", p, 0, &c, &bad) == 0 && c.verb == ENGINE_MERGE && c.manager);
        CHECK(sysext_call_parse("org.sysextd1.Manager.Unmerge", p, 0, &c, &bad) == 0 && c.verb == ENGINE_UNMERGE);
        CHECK(sysext_call_parse("org.sysextd1.Manager.List", p, VARLINK_CALL_MORE, &c, &bad) == -EOPNOTSUPP);
        json_object_putp(&p);
        p = obj("{}");
        CHECK(sysext_call_parse("io.systemd.sysext.Refresh", p, 0, &c, &bad) == 0 && !c.manager);
        json_object_putp(&p);

        p = obj("{\"root\":\"/r\",\"classes\":[\"confext\",\"sysext\"],\"force\":true,\"alwaysRefresh\":true,"
                "\"strict\":true,\"noReload\":true,\"noexec\":false,\"allowInteractiveAuthentication\":true}");
        CHECK(sysext_call_parse("org.sysextd1.Manager.Refresh", p, 0, &c, &bad) == 0);
        CHECK(c.options.classes == ((1u << IMAGE_CLASS_SYSEXT) | (1u << IMAGE_CLASS_CONFEXT)));
        CHECK(c.options.force && c.options.always_refresh && c.options.strict && c.options.no_reload);
        CHECK(c.options.noexec == 0 && c.interactive);
        json_object_putp(&p);

        p = obj("{\"root\":\"/r\",\"classes\":null,\"force\":null,\"noexec\":null}");
        CHECK(sysext_call_parse("org.sysextd1.Manager.Merge", p, 0, &c, &bad) == 0);
        CHECK(c.options.classes == 0 && !c.options.force && c.options.noexec < 0);
        json_object_putp(&p);

        for (size_t i = 0; i < ELEMENTSOF(refused); i++) {
                p = obj(refused[i].params);
                bad = NULL;
                CHECK(sysext_call_parse("org.sysextd1.Manager.Refresh", p, 0, &c, &bad) == -EINVAL);
                CHECK_STREQ(bad, refused[i].bad);
                json_object_putp(&p);
        }
}

/* org.sysextd1.Manager's answers: what the D-Bus methods answer (kinds: transition.h's EngineError,
 * 2 NO_IMAGES, 4 ALREADY_MERGED). */
static void test_manager_reply(void) {
        _cleanup_json_ json_object *ok = obj("{\"r\":1,\"kind\":0,\"generation\":7,\"changed\":true,\"messages\":"
                                             "[[6,\"Merged extensions into '/usr'.\"],[7,\"bad\\u0001text\"],\"junk\",[3]]}"),
                                   *nothing = obj("{\"r\":0,\"kind\":2,\"error\":\"No extensions found.\"}"), 
                                   *merged = obj("{\"r\":-17,\"kind\":4,\"error\":\"Extensions are already merged.\"}"),
                                   *silent = obj("{\"r\":-5}"), *unchanged = obj("{\"r\":0,\"generation\":3}");
        json_object *p = NULL, *m;
        const char *error = NULL;

        CHECK(sysextd_transition_reply(ok, &error, &p) == 0);
        CHECK(error == NULL);
        CHECK(json_object_get_int64(json_object_object_get(p, "generation")) == 7);
        CHECK(json_object_get_boolean(json_object_object_get(p, "changed")));
        m = json_object_object_get(p, "messages");
        CHECK(json_object_array_length(m) == 2);
        CHECK(json_object_get_int(json_object_object_get(json_object_array_get_idx(m, 0), "level")) == 6);
        CHECK_STREQ(json_object_get_string(json_object_object_get(json_object_array_get_idx(m, 0), "text")),
                    "Merged extensions into '/usr'.");
        CHECK_STREQ(json_object_get_string(json_object_object_get(json_object_array_get_idx(m, 1), "text")), "bad\\x01text");
        json_object_putp(&p);

        CHECK(sysextd_transition_reply(unchanged, &error, &p) == 0);
        CHECK(error == NULL && !json_object_get_boolean(json_object_object_get(p, "changed")));
        CHECK(json_object_array_length(json_object_object_get(p, "messages")) == 0);
        json_object_putp(&p);

        CHECK(sysextd_transition_reply(nothing, &error, &p) == 0);
        CHECK_STREQ(error, SYSEXTD_VARLINK_ERROR_FAILED);
        CHECK_STREQ(json_object_get_string(json_object_object_get(p, "name")), "org.sysextd1.Error.NoImages");
        CHECK_STREQ(json_object_get_string(json_object_object_get(p, "message")), "No extensions found.");
        json_object_putp(&p);

        CHECK(sysextd_transition_reply(merged, &error, &p) == 0);
        CHECK_STREQ(json_object_get_string(json_object_object_get(p, "name")), "org.sysextd1.Error.AlreadyMerged");
        CHECK_STREQ(json_object_get_string(json_object_object_get(p, "message")), "Extensions are already merged.");
        json_object_putp(&p);

        CHECK(sysextd_transition_reply(silent, &error, &p) == 0);
        CHECK_STREQ(json_object_get_string(json_object_object_get(p, "name")), "org.sysextd1.Error.Failed");
        CHECK_STREQ(json_object_get_string(json_object_object_get(p, "message")), "The transition failed.");
        json_object_putp(&p);

        CHECK(sysextd_transition_reply(NULL, &error, &p) == 0);
        CHECK_STREQ(error, SYSEXTD_VARLINK_ERROR_FAILED);
        json_object_putp(&p);
}

static void test_list_items(void) {
        _cleanup_json_ json_object *doc = obj(
                "{\"r\":0,\"images\":["
                "{\"class\":\"sysext\",\"name\":\"ext1\",\"kind\":\"erofs\",\"path\":\"/var/lib/extensions/ext1.raw\"},"
                "{\"class\":\"confext\",\"name\":\"c1\",\"kind\":\"directory\",\"path\":\"/run/confexts/c1\"},"
                "{\"class\":\"sysext\",\"name\":\"bad\\u0001name\",\"kind\":\"directory\",\"path\":\"/x\"},"
                "{\"class\":\"portable\",\"name\":\"p\"},7]}");
        _cleanup_json_ json_object *failed = obj("{\"r\":-5}");
        json_object *a;
        int e = 0;

        a = sysext_list_items(doc, 1u << IMAGE_CLASS_SYSEXT, &e);
        CHECK(a && json_object_array_length(a) == 2);
        if (a && json_object_array_length(a) == 2) {
                json_object *x = json_object_array_get_idx(a, 0), *y = json_object_array_get_idx(a, 1);
                CHECK_STREQ(json_object_get_string(json_object_object_get(x, "Name")), "ext1");
                CHECK_STREQ(json_object_get_string(json_object_object_get(x, "Type")), "raw");
                CHECK_STREQ(json_object_get_string(json_object_object_get(x, "Class")), "sysext");
                CHECK(json_object_get_boolean(json_object_object_get(x, "ReadOnly")));
                /* No control characters leave the daemon. */
                CHECK(!strchr(json_object_get_string(json_object_object_get(y, "Name")), '\1'));
        }
        json_object_put(a);
        a = sysext_list_items(doc, 1u << IMAGE_CLASS_CONFEXT, &e);
        CHECK(a && json_object_array_length(a) == 1);
        CHECK_STREQ(json_object_get_string(json_object_object_get(json_object_array_get_idx(a, 0), "Type")), "directory");
        json_object_put(a);
        a = sysext_list_items(failed, 0, &e);
        CHECK(!a && e == -EIO);
        a = sysext_list_items(NULL, 0, &e);
        CHECK(!a && e == -EIO);
}

/* polkit's unix-process subject: the start time from /proc/PID/stat, field 22. */
static void test_start_time(void) {
        uint64_t a = 0, b = 0;

        CHECK(process_start_time(getpid(), &a) == 0);
        CHECK(process_start_time(getpid(), &b) == 0);
        CHECK(a > 0 && a == b);
        CHECK(process_start_time(1, &b) == 0 && b <= a);
        CHECK(process_start_time(-1, &b) < 0);
}

int main(void) {
        test_start_time();
        test_method_names();
        test_parse();
        test_format();
        test_call_parse();
        test_transition_reply();
        test_manager_call_parse();
        test_manager_reply();
        test_list_items();
        return tap_finish();
}
