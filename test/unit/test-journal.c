/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The journal and the tree records: round trips, and every field validated on read, so no
 * content of state.json or of a tree record can crash sysextd or be taken for something it
 * is not. */
#include <stdio.h>

#include "image-json.h"
#include "journal.h"
#include "tests.h"
#include "tree.h"
#include "units.h"
#include "util.h"

#define T1 "0123456789abcdef0123456789abcdef"
#define T2 "fedcba9876543210fedcba9876543210"

static const char *valid_state(void) {
        return "{\"version\":2,\"generation\":7,\"config_stamp\":5,\"mount_namespace\":4026531841,\"incomplete\":false,"
               "\"hierarchies\":[{\"hierarchy\":\"usr\",\"tree\":\"" T1 "\"},{\"hierarchy\":\"opt\",\"tree\":null}],"
               "\"images\":[{\"name\":\"a\",\"kind\":\"erofs\",\"path\":\"/var/lib/extensions/a.raw\",\"status\":\"compatible\","
               "\"reason\":null,\"refused_by_policy\":false,\"verity\":\"none\",\"signed\":false,\"fstype\":\"erofs\","
               "\"hierarchies\":1,\"usr_partition\":false,\"dev\":2049,\"ino\":12,\"size\":4096,\"mtime_sec\":1,"
               "\"mtime_nsec\":99,\"stamp\":3,\"judged_by\":4}],"
               "\"pending\":{\"generation\":8,\"transitions\":[{\"hierarchy\":\"usr\",\"old_tree\":\"" T1 "\",\"new_tree\":\"" T2
               "\"}]}}";
}

/* Replaces the first occurrence of 'what' in the valid document by 'with' and parses it. */
static int parse_mutated(const char *what, const char *with) {
        _cleanup_journal_ Journal j = {};
        const char *base = valid_state(), *at = strstr(base, what);
        _cleanup_free_ char *text = NULL;

        if (!at)
                return 99;
        if (asprintf(&text, "%.*s%s%s", (int) (at - base), base, with, at + strlen(what)) < 0)
                return 98;
        return journal_from_json(text, &j);
}

static const char *valid_tree(void) {
        return "{\"id\":\"" T1 "\",\"hierarchy\":\"usr\",\"generation\":3,\"unique_mount_id\":2147483700,"
               "\"mount_id\":77,\"dev_major\":0,\"dev_minor\":45,\"base_only\":false,\"extensions\":[\"a\",\"b\"],"
               "\"since\":123}";
}

static int parse_tree_mutated(const char *what, const char *with) {
        _cleanup_(tree_done) Tree t = {};
        const char *base = valid_tree(), *at = strstr(base, what);
        _cleanup_free_ char *text = NULL;

        if (!at)
                return 99;
        if (asprintf(&text, "%.*s%s%s", (int) (at - base), base, with, at + strlen(what)) < 0)
                return 98;
        return tree_from_json_string(text, &t);
}

/* The JSON writer: what json-c parses back is what was written, for every string a name or a
 * path may hold (quotes, backslashes, every control character, UTF-8), numbers at their
 * limits, nesting, and nothing written (empty object, array, list). */
static void test_writer(void) {
        _cleanup_json_ json_object *o = NULL;
        _cleanup_free_ char *text = NULL;
        char ctl[33];
        const char *nasty[] = { "", "plain", "a\"b", "back\\slash", "slash/ok", "caf\xc3\xa9 \xe2\x82\xac", "tab\tnew\nline\r", "\x7f", NULL };
        char *const list[] = { (char *) "x", (char *) "y\"", NULL };
        JsonWriter w = {};
        json_object *v, *a;

        for (int c = 1; c < 32; c++)
                ctl[c - 1] = (char) c;
        ctl[31] = 0;
        json_writer_begin_object(&w);
        json_writer_key(&w, "ctl");
        json_writer_string(&w, ctl);
        json_writer_key(&w, "nasty");
        json_writer_begin_array(&w);
        for (size_t i = 0; nasty[i]; i++)
                json_writer_string(&w, nasty[i]);
        json_writer_end_array(&w);
        json_writer_key(&w, "k\"ey");
        json_writer_null(&w);
        json_writer_key(&w, "max");
        json_writer_u64(&w, UINT64_MAX);
        json_writer_key(&w, "neg");
        json_writer_i64(&w, INT64_MIN);
        json_writer_key(&w, "t");
        json_writer_bool(&w, true);
        json_writer_key(&w, "nested");
        json_writer_begin_object(&w);
        json_writer_key(&w, "empty_object");
        json_writer_begin_object(&w);
        json_writer_end_object(&w);
        json_writer_key(&w, "empty_array");
        json_writer_begin_array(&w);
        json_writer_end_array(&w);
        json_writer_key(&w, "none");
        json_writer_strv(&w, NULL);
        json_writer_key(&w, "list");
        json_writer_strv(&w, list);
        json_writer_end_object(&w);
        json_writer_end_object(&w);
        CHECK(json_writer_finish(&w, &text) == 0 && text);
        o = text ? json_parse_object(text) : NULL;
        CHECK(o);
        if (!o)
                return;
        CHECK(json_object_object_get_ex(o, "ctl", &v) && streq(json_object_get_string(v), ctl));
        CHECK((a = json_get_array(o, "nasty")) && json_object_array_length(a) == 8);
        for (size_t i = 0; a && nasty[i]; i++)
                CHECK(streq_ptr(json_object_get_string(json_object_array_get_idx(a, i)), nasty[i]));
        CHECK(json_object_object_get_ex(o, "k\"ey", &v) && !v);
        CHECK(json_object_object_get_ex(o, "max", &v) && json_object_get_uint64(v) == UINT64_MAX);
        CHECK(json_object_object_get_ex(o, "neg", &v) && json_object_get_int64(v) == INT64_MIN);
        CHECK(json_object_object_get_ex(o, "t", &v) && json_object_get_boolean(v));
        CHECK(json_object_object_get_ex(o, "nested", &v) && json_object_object_length(v) == 4);
        {
                json_object *n = v, *x;
                _cleanup_strv_free_ char **l = NULL;

                CHECK(json_object_object_get_ex(n, "empty_object", &x) && json_object_is_type(x, json_type_object) &&
                      json_object_object_length(x) == 0);
                CHECK((x = json_get_array(n, "empty_array")) && json_object_array_length(x) == 0);
                CHECK((x = json_get_array(n, "none")) && json_object_array_length(x) == 0);
                CHECK(json_get_strv(n, "list", 10, 10, &l) == 0 && strv_length(l) == 2 && streq(l[1], "y\""));
        }
}

int main(void) {
        _cleanup_journal_ Journal j = {}, k = {};
        _cleanup_free_ char *text = NULL, *text2 = NULL;

        CHECK(journal_from_json(valid_state(), &j) == 0);
        CHECK(j.generation == 7 && j.config_stamp == 5 && j.mount_ns == 4026531841ULL && !j.incomplete);
        CHECK(j.n_hierarchies == 2);
        CHECK_STREQ(journal_find_hierarchy(&j, "usr")->tree, T1);
        CHECK(journal_find_hierarchy(&j, "opt")->tree == NULL);
        CHECK(j.images.n == 1 && j.images.images[0].st.st_size == 4096 && j.images.images[0].st.st_mtim.tv_nsec == 99);
        CHECK(j.images.images[0].kind == IMAGE_EROFS && j.images.images[0].verdict == IMAGE_COMPATIBLE);
        CHECK(j.pending && j.pending_generation == 8 && j.n_transitions == 1);
        CHECK_STREQ(j.transitions[0].new_tree, T2);

        /* Round trip is stable. */
        CHECK(journal_to_json(&j, &text) == 0);
        CHECK(journal_from_json(text, &k) == 0);
        CHECK(journal_to_json(&k, &text2) == 0);
        CHECK_STREQ(text2, text);

        journal_drop_transition(&k, 0);
        CHECK(!k.pending && k.n_transitions == 0);
        CHECK(journal_set_tree(&k, "srv/app", T2) == 0 && k.n_hierarchies == 3);

        /* Not a journal at all. */
        CHECK(journal_from_json("not json", &k) == -EBADMSG);
        CHECK(journal_from_json("[]", &k) == -EBADMSG);
        CHECK(journal_from_json("null", &k) == -EBADMSG);
        CHECK(journal_from_json("{}", &k) == -EBADMSG);
        CHECK(journal_from_json("", &k) == -EBADMSG);
        /* The first version's format is not taken for this one. */
        CHECK(parse_mutated("\"version\":2", "\"version\":1") == -EBADMSG);
        CHECK(parse_mutated("\"version\":2", "\"version\":\"2\"") == -EBADMSG);

        /* Nulls where strings or numbers must be: the crash of issue 11 and its relatives. */
        CHECK(parse_mutated("\"name\":\"a\"", "\"name\":null") == -EBADMSG);
        CHECK(parse_mutated("\"path\":\"/var/lib/extensions/a.raw\"", "\"path\":null") == -EBADMSG);
        CHECK(parse_mutated("\"kind\":\"erofs\"", "\"kind\":null") == -EBADMSG);
        CHECK(parse_mutated("\"generation\":7", "\"generation\":null") == -EBADMSG);
        CHECK(parse_mutated("\"hierarchy\":\"usr\"", "\"hierarchy\":null") == -EBADMSG);
        CHECK(parse_mutated("\"images\":[", "\"images\":[null,") == -EBADMSG);
        CHECK(parse_mutated("\"hierarchies\":[", "\"hierarchies\":[null,") == -EBADMSG);
        CHECK(parse_mutated("\"transitions\":[", "\"transitions\":[null,") == -EBADMSG);
        /* Wrong types. */
        CHECK(parse_mutated("\"generation\":7", "\"generation\":\"7\"") == -EBADMSG);
        CHECK(parse_mutated("\"generation\":7", "\"generation\":-7") == -EBADMSG);
        CHECK(parse_mutated("\"generation\":7", "\"generation\":7.5") == -EBADMSG);
        CHECK(parse_mutated("\"incomplete\":false", "\"incomplete\":0") == -EBADMSG);
        CHECK(parse_mutated("\"signed\":false", "\"signed\":\"no\"") == -EBADMSG);
        CHECK(parse_mutated("\"size\":4096", "\"size\":-1") == -EBADMSG);
        CHECK(parse_mutated("\"hierarchies\":1", "\"hierarchies\":4294967296") == -EBADMSG);
        CHECK(parse_mutated("\"images\":[", "\"images\":{\"x\":[") == -EBADMSG);
        CHECK(parse_mutated("\"pending\":{", "\"pending\":[{") == -EBADMSG);
        CHECK(parse_mutated("\"kind\":\"erofs\"", "\"kind\":\"ntfs\"") == -EBADMSG);
        CHECK(parse_mutated("\"status\":\"compatible\"", "\"status\":\"maybe\"") == -EBADMSG);
        CHECK(parse_mutated("\"verity\":\"none\"", "\"verity\":\"some\"") == -EBADMSG);
        /* Missing fields. */
        CHECK(parse_mutated("\"config_stamp\":5,", "") == -EBADMSG);
        CHECK(parse_mutated("\"ino\":12,", "") == -EBADMSG);
        CHECK(parse_mutated(",\"transitions\":[{\"hierarchy\":\"usr\",\"old_tree\":\"" T1 "\",\"new_tree\":\"" T2 "\"}]", "") == -EBADMSG);
        /* Hierarchies and tree references that could lead anywhere. */
        CHECK(parse_mutated("\"hierarchy\":\"usr\"", "\"hierarchy\":\"../etc\"") == -EBADMSG);
        CHECK(parse_mutated("\"hierarchy\":\"usr\"", "\"hierarchy\":\"/usr\"") == -EBADMSG);
        CHECK(parse_mutated("\"hierarchy\":\"usr\"", "\"hierarchy\":\"\"") == -EBADMSG);
        CHECK(parse_mutated("\"hierarchy\":\"usr\"", "\"hierarchy\":\"usr/./x\"") == -EBADMSG);
        CHECK(parse_mutated("\"hierarchy\":\"usr\"", "\"hierarchy\":\"u\\u0001sr\"") == -EBADMSG);
        CHECK(parse_mutated("\"hierarchy\":\"opt\"", "\"hierarchy\":\"usr\"") == -EBADMSG); /* twice */
        CHECK(parse_mutated("\"tree\":\"" T1 "\"", "\"tree\":\"../../etc/passwd\"") == -EBADMSG);
        CHECK(parse_mutated("\"tree\":\"" T1 "\"", "\"tree\":\"0123\"") == -EBADMSG);
        CHECK(parse_mutated("\"new_tree\":\"" T2 "\"", "\"new_tree\":\"" T1 "x\"") == -EBADMSG);
        CHECK(parse_mutated("\"new_tree\":\"" T2 "\"", "\"new_tree\":\"0123456789ABCDEF0123456789ABCDEF\"") == -EBADMSG);
        CHECK(parse_mutated("\"name\":\"a\"", "\"name\":\"a\\u0000b\"") == -EBADMSG);
        /* Fine variations. */
        CHECK(parse_mutated("\"reason\":null", "\"reason\":\"broken\"") == 0);
        CHECK(parse_mutated("\"new_tree\":\"" T2 "\"", "\"new_tree\":null") == 0);
        CHECK(parse_mutated("\"hierarchy\":\"opt\"", "\"hierarchy\":\"srv/app\"") == 0);
        CHECK(parse_mutated(",\"pending\":{", ",\"ignored\":{") == 0);
        /* A delayed transition: both times or neither, validated; absent (valid_state(), as
         * written before delays existed): not delayed. */
        CHECK(!journal_delayed(&j) && j.delayed_since == 0 && j.delay_deadline == 0);
        {
                _cleanup_journal_ Journal d = {}, e = {};
                _cleanup_free_ char *s1 = NULL, *s2 = NULL;
                const char *at = strstr(valid_state(), "\"generation\":8");
                _cleanup_free_ char *delayed = NULL;

                CHECK(at && asprintf(&delayed, "%.*s\"delayed_since\":1000,\"delay_deadline\":301000,%s",
                                     (int) (at - valid_state()), valid_state(), at) > 0);
                CHECK(journal_from_json(delayed, &d) == 0);
                CHECK(journal_delayed(&d) && d.delayed_since == 1000 && d.delay_deadline == 301000);
                CHECK(journal_to_json(&d, &s1) == 0 && strstr(s1, "\"delay_deadline\":301000"));
                CHECK(journal_from_json(s1, &e) == 0 && journal_delayed(&e) && e.delayed_since == 1000);
                CHECK(journal_to_json(&e, &s2) == 0);
                CHECK_STREQ(s2, s1);
                /* Cleared with the pending record. */
                journal_drop_transition(&e, 0);
                CHECK(!journal_delayed(&e) && e.delay_deadline == 0 && e.delayed_since == 0);
        }
        CHECK(parse_mutated("\"generation\":8", "\"delayed_since\":1,\"delay_deadline\":2,\"generation\":8") == 0);
        CHECK(parse_mutated("\"generation\":8", "\"delayed_since\":5,\"delay_deadline\":5,\"generation\":8") == 0);
        CHECK(parse_mutated("\"generation\":8", "\"delayed_since\":1,\"generation\":8") == -EBADMSG);
        CHECK(parse_mutated("\"generation\":8", "\"delay_deadline\":2,\"generation\":8") == -EBADMSG);
        CHECK(parse_mutated("\"generation\":8", "\"delayed_since\":0,\"delay_deadline\":2,\"generation\":8") == -EBADMSG);
        CHECK(parse_mutated("\"generation\":8", "\"delayed_since\":3,\"delay_deadline\":2,\"generation\":8") == -EBADMSG);
        CHECK(parse_mutated("\"generation\":8", "\"delayed_since\":-3,\"delay_deadline\":2,\"generation\":8") == -EBADMSG);
        CHECK(parse_mutated("\"generation\":8", "\"delayed_since\":null,\"delay_deadline\":null,\"generation\":8") == -EBADMSG);
        CHECK(parse_mutated("\"generation\":8", "\"delayed_since\":\"1\",\"delay_deadline\":2,\"generation\":8") == -EBADMSG);
        CHECK(parse_mutated("\"generation\":8", "\"delayed_since\":1,\"delay_deadline\":1.5,\"generation\":8") == -EBADMSG);
        CHECK(parse_mutated("\"generation\":8", "\"delayed_since\":1,\"delay_deadline\":99999999999999999,\"generation\":8") == -EBADMSG);
        /* The root hash: absent in a state.json of before it was recorded (valid_state()), null,
         * or hex as discovery reads it; never anything that could not be one. */
        CHECK(j.images.images[0].roothash == NULL);
        CHECK(parse_mutated("\"signed\":false", "\"signed\":false,\"roothash\":null") == 0);
        CHECK(parse_mutated("\"signed\":false", "\"signed\":false,\"roothash\":\"" T1 T2 "\"") == 0);
        CHECK(parse_mutated("\"signed\":false", "\"signed\":false,\"roothash\":\"" T1 "\"") == 0);
        CHECK(parse_mutated("\"signed\":false", "\"signed\":false,\"roothash\":\"0123\"") == -EBADMSG);
        CHECK(parse_mutated("\"signed\":false", "\"signed\":false,\"roothash\":\"" T1 "xy\"") == -EBADMSG);
        CHECK(parse_mutated("\"signed\":false", "\"signed\":false,\"roothash\":\"0123456789ABCDEF0123456789ABCDEF\"") ==
              -EBADMSG);
        CHECK(parse_mutated("\"signed\":false", "\"signed\":false,\"roothash\":\" " T1 "\"") == -EBADMSG);
        CHECK(parse_mutated("\"signed\":false", "\"signed\":false,\"roothash\":12") == -EBADMSG);

        /* The links that enable units (optional: the valid document, of an older sysextd, has
         * none and loaded above with none); an item may be as long as a link can be. */
        CHECK(j.images.images[0].wanted_units == NULL);
        CHECK(parse_mutated("\"judged_by\":4", "\"judged_by\":4,\"wanted_units\":[\"multi-user.target.wants/a.service\"]") == 0);
        CHECK(parse_mutated("\"judged_by\":4", "\"judged_by\":4,\"wanted_units\":[]") == 0);
        CHECK(parse_mutated("\"judged_by\":4", "\"judged_by\":4,\"wanted_units\":null") == 0);
        CHECK(parse_mutated("\"judged_by\":4", "\"judged_by\":4,\"wanted_units\":[1]") == -EBADMSG);
        {
                _cleanup_free_ char *longest = NULL, *with = NULL;

                CHECK(asprintf(&longest, "%0*d", UNIT_WANTED_LINK_MAX, 0) > 0);
                CHECK(asprintf(&with, "\"judged_by\":4,\"wanted_units\":[\"%s\"]", longest) > 0);
                CHECK(parse_mutated("\"judged_by\":4", with) == 0);
                free(with);
                CHECK(asprintf(&with, "\"judged_by\":4,\"wanted_units\":[\"%s0\"]", longest) > 0);
                CHECK(parse_mutated("\"judged_by\":4", with) == -EBADMSG);
                /* The other lists keep their limit. */
                free(with);
                CHECK(asprintf(&with, "\"judged_by\":4,\"shipped_units\":[\"%s\"]", longest) > 0);
                CHECK(parse_mutated("\"judged_by\":4", with) == -EBADMSG);
        }

        /* Tree records. */
        {
                _cleanup_(tree_done) Tree t = {}, u = {};
                _cleanup_free_ char *s = NULL;

                CHECK(tree_from_json_string(valid_tree(), &t) == 0);
                CHECK(t.generation == 3 && t.unique_id == 2147483700ULL && t.mount_id == 77);
                CHECK(strv_length(t.extensions) == 2);
                CHECK(tree_to_json_string(&t, &s) == 0);
                CHECK(tree_from_json_string(s, &u) == 0);
                CHECK(u.dev == t.dev && streq(u.id, t.id) && streq(u.hierarchy, "usr"));
        }
        CHECK(parse_tree_mutated("\"id\":\"" T1 "\"", "\"id\":null") == -EBADMSG);
        CHECK(parse_tree_mutated("\"id\":\"" T1 "\"", "\"id\":\"../x\"") == -EBADMSG);
        CHECK(parse_tree_mutated("\"mount_id\":77", "\"mount_id\":0") == -EBADMSG);
        CHECK(parse_tree_mutated("\"mount_id\":77", "\"mount_id\":4294967296") == -EBADMSG);
        CHECK(parse_tree_mutated("\"mount_id\":77", "\"mount_id\":null") == -EBADMSG);
        CHECK(parse_tree_mutated("\"dev_major\":0", "\"dev_major\":99999") == -EBADMSG);
        CHECK(parse_tree_mutated("\"extensions\":[\"a\",", "\"extensions\":[null,") == -EBADMSG);
        CHECK(parse_tree_mutated("\"extensions\":[\"a\",", "\"extensions\":[1,") == -EBADMSG);
        CHECK(parse_tree_mutated("\"hierarchy\":\"usr\"", "\"hierarchy\":\"\"") == -EBADMSG);
        CHECK(parse_tree_mutated("\"base_only\":false", "\"base_only\":null") == -EBADMSG);
        CHECK(parse_tree_mutated("\"extensions\":[\"a\",\"b\"]", "\"extensions\":null") == 0);
        CHECK(tree_from_json_string("[1]", &(Tree) {}) == -EBADMSG);

        /* The image codec: every field of each set, both ways. */
        {
                Image img = { .name = (char *) "x", .path = (char *) "/p", .kind = IMAGE_SQUASHFS,
                              .verdict = IMAGE_REFUSED, .reason = (char *) "bad", .root_fd = -EBADF,
                              .hierarchies = 3, .stamp = 42 };
                Image back = {};
                json_object *o;

                img.st.st_size = 12345;
                img.st.st_mtim.tv_nsec = 7;
                o = image_to_json(&img, IMAGE_JSON_JOURNAL);
                CHECK(o && image_from_json(o, IMAGE_JSON_JOURNAL, &back) == 0);
                CHECK(back.kind == IMAGE_SQUASHFS && back.verdict == IMAGE_REFUSED && back.hierarchies == 3);
                CHECK(back.st.st_size == 12345 && back.st.st_mtim.tv_nsec == 7 && back.stamp == 42);
                CHECK_STREQ(back.reason, "bad");
                CHECK(back.root_fd < 0);
                CHECK(back.roothash == NULL);
                image_done(&back);
                /* A worker document lacks the journal's "status": not a journal image. */
                json_object_put(o);
                o = image_to_json(&img, IMAGE_JSON_WORKER);
                CHECK(image_from_json(o, IMAGE_JSON_JOURNAL, &back) == -EBADMSG);
                CHECK(image_from_json(o, IMAGE_JSON_WORKER, &back) == 0);
                image_done(&back);
                json_object_put(o);
                /* The root hash goes to the journal and to the daemon's cache, not to users. */
                img.roothash = (char *) T1 T2;
                o = image_to_json(&img, IMAGE_JSON_JOURNAL);
                CHECK(o && image_from_json(o, IMAGE_JSON_JOURNAL, &back) == 0);
                CHECK_STREQ(back.roothash, T1 T2);
                image_done(&back);
                json_object_put(o);
                o = image_to_json(&img, IMAGE_JSON_WORKER);
                CHECK(o && image_from_json(o, IMAGE_JSON_WORKER, &back) == 0);
                CHECK_STREQ(back.roothash, T1 T2);
                image_done(&back);
                json_object_put(o);
                o = image_to_json(&img, IMAGE_JSON_PUBLIC);
                CHECK(o && !json_object_object_get_ex(o, "roothash", NULL));
                json_object_put(o);
                /* The links that enable units: the journal's and the cache's, not users'. */
                char *wanted[] = { (char *) "multi-user.target.wants/a.service", (char *) "b.service.requires/c.socket", NULL };
                img.wanted_units = wanted;
                for (int s = 0; s < 2; s++) {
                        ImageJsonSet set = s == 0 ? IMAGE_JSON_JOURNAL : IMAGE_JSON_WORKER;

                        o = image_to_json(&img, set);
                        CHECK(o && image_from_json(o, set, &back) == 0);
                        CHECK(strv_length(back.wanted_units) == 2 && streq(back.wanted_units[1], "b.service.requires/c.socket"));
                        image_done(&back);
                        json_object_put(o);
                }
                o = image_to_json(&img, IMAGE_JSON_PUBLIC);
                CHECK(o && !json_object_object_get_ex(o, "wanted_units", NULL));
                json_object_put(o);

                /* Optional fields at their default are left out of the journal's and the
                 * worker's form (their absence reads as the default), never out of the public
                 * one; class always stays; set, they are written and read back. */
                img.wanted_units = NULL;
                img.roothash = NULL;
                for (int s = 0; s < 2; s++) {
                        ImageJsonSet set = s == 0 ? IMAGE_JSON_JOURNAL : IMAGE_JSON_WORKER;
                        static const char *const omitted[] = { "roothash", "version", "backing", "loop_devnum", "loop_diskseq",
                                                               "reload_manager", "restart_units", "reload_or_restart_units",
                                                               "shipped_units", "wanted_units" };

                        o = image_to_json(&img, set);
                        for (size_t f = 0; f < ELEMENTSOF(omitted); f++)
                                CHECK(o && !json_object_object_get_ex(o, omitted[f], NULL));
                        CHECK(o && json_object_object_get_ex(o, "class", NULL) && json_object_object_get_ex(o, "stamp", NULL));
                        CHECK(o && image_from_json(o, set, &back) == 0 && !back.version && back.backing == IMAGE_BACKING_NONE &&
                              back.loop_devnum == 0 && !back.reload_manager && !back.restart_units);
                        image_done(&back);
                        json_object_put(o);
                }
                o = image_to_json(&img, IMAGE_JSON_PUBLIC);
                CHECK(o && json_object_object_get_ex(o, "version", NULL));
                json_object_put(o);
                {
                        char *units[] = { (char *) "a.service", NULL };

                        img.version = (char *) "2";
                        img.backing = IMAGE_BACKING_LOOP;
                        img.loop_devnum = 7;
                        img.loop_diskseq = 9;
                        img.reload_manager = true;
                        img.restart_units = units;
                        o = image_to_json(&img, IMAGE_JSON_JOURNAL);
                        CHECK(o && image_from_json(o, IMAGE_JSON_JOURNAL, &back) == 0 && streq_ptr(back.version, "2") &&
                              back.backing == IMAGE_BACKING_LOOP && back.loop_devnum == 7 && back.loop_diskseq == 9 &&
                              back.reload_manager && strv_length(back.restart_units) == 1);
                        image_done(&back);
                        json_object_put(o);
                }
        }
        test_writer();
        return tap_finish();
}
