/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Generations, rollback and pins (generation.h): discovery with every version of a NAME.v
 * directory, the pure selection of a recorded generation (and the one-line refusal when an
 * image is gone or changed), which generation a rollback goes to, the pins a rollback leaves,
 * when a pin is released, how pins reduce what a refresh discovers, and how the journal keeps
 * all of it (older files without it still load). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fd-util.h"
#include "fileio.h"
#include "generation.h"
#include "image.h"
#include "journal.h"
#include "mutable.h"
#include "tests.h"
#include "util.h"

static int mkfile(int dfd, const char *path) {
        int fd = openat(dfd, path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0)
                return -1;
        close(fd);
        return 0;
}

static size_t count_name(const ImageList *l, const char *name) {
        size_t n = 0;
        for (size_t i = 0; i < l->n; i++)
                if (streq(l->images[i].name, name))
                        n++;
        return n;
}

static const Image *find_version(const ImageList *l, const char *name, const char *version) {
        for (size_t i = 0; i < l->n; i++)
                if (streq(l->images[i].name, name) && streq_ptr(l->images[i].version, version))
                        return &l->images[i];
        return NULL;
}

static void generation_of(const ImageList *all, uint64_t number, const char *app_version, Generation *ret) {
        static const int modes[_IMAGE_CLASS_MAX] = {};
        ImageList l = { .images = calloc(all->n + 1, sizeof(Image)) };

        for (size_t i = 0; i < all->n; i++) {
                const Image *img = &all->images[i];

                if (streq(img->name, "app") && !streq_ptr(img->version, app_version))
                        continue;
                if (image_copy(img, &l.images[l.n]) == 0) {
                        l.images[l.n].verdict = IMAGE_COMPATIBLE;
                        l.n++;
                }
        }
        CHECK(generation_from_images(number, 1000, modes, false, &l, ret) == 0);
        image_list_free(&l);
}

static void test_discover_select(void) {
        char tmpl[] = "/tmp/test-generation-XXXXXX";
        char *dir = mkdtemp(tmpl);
        char *const search[] = { (char *) "var/lib/extensions", NULL };
        _cleanup_image_list_ ImageList plain = {}, all = {}, again = {}, chosen = {};
        _cleanup_(generation_done) Generation g2 = {}, g3 = {};
        _cleanup_free_ char *msg = NULL;
        const Image *missing = NULL;
        int root, tmp;

        CHECK(dir != NULL);
        if (!dir)
                return;
        root = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        CHECK(root >= 0);
        CHECK(mkdir_p_at(root, "var/lib/extensions/app.raw.v", 0755) == 0);
        CHECK(mkfile(root, "var/lib/extensions/app.raw.v/app_1.raw") == 0);
        CHECK(mkfile(root, "var/lib/extensions/app.raw.v/app_2.raw") == 0);
        CHECK(mkfile(root, "var/lib/extensions/app.raw.v/app_3.raw") == 0);
        /* Not a version of app: left out. */
        CHECK(mkfile(root, "var/lib/extensions/app.raw.v/other_9.raw") == 0);
        CHECK(mkfile(root, "var/lib/extensions/base.raw") == 0);

        /* A plain discovery: the newest, with its version; every image picked. */
        CHECK(image_discover(root, "/R", search, IMAGE_CLASS_SYSEXT, &plain) == 0);
        CHECK(plain.n == 2);
        CHECK(find_version(&plain, "app", "3") && find_version(&plain, "app", "3")->picked);
        CHECK(find_version(&plain, "base", NULL) && find_version(&plain, "base", NULL)->picked);

        /* Every version: the others too, not picked. */
        CHECK(image_discover_ex(root, "/R", search, IMAGE_CLASS_SYSEXT, true, &all) == 0);
        CHECK(all.n == 4);
        CHECK(count_name(&all, "app") == 3);
        CHECK(find_version(&all, "app", "1") && !find_version(&all, "app", "1")->picked);
        CHECK(find_version(&all, "app", "2") && !find_version(&all, "app", "2")->picked);
        CHECK(find_version(&all, "app", "3") && find_version(&all, "app", "3")->picked);
        CHECK_STREQ(find_version(&all, "app", "2")->path, "/R/var/lib/extensions/app.raw.v/app_2.raw");

        /* Keeping the picked ones is a plain discovery. */
        CHECK(image_discover_ex(root, "/R", search, IMAGE_CLASS_SYSEXT, true, &again) == 0);
        generation_keep_picked(&again);
        CHECK(again.n == 2 && find_version(&again, "app", "3") && find_version(&again, "base", NULL));
        image_list_free(&again);

        /* Generation 2 had app 2 and base: exactly those are selected. */
        generation_of(&all, 2, "2", &g2);
        generation_of(&all, 3, "3", &g3);
        CHECK(g2.images.n == 2);
        CHECK(image_discover_ex(root, "/R", search, IMAGE_CLASS_SYSEXT, true, &again) == 0);
        CHECK(generation_select(&again, &g2, &chosen, &missing) == 0);
        CHECK(chosen.n == 2 && find_version(&chosen, "app", "2") && find_version(&chosen, "base", NULL));
        CHECK(again.n == 2); /* the rest stays with the candidates */
        image_list_free(&again);
        image_list_free(&chosen);

        /* app 2 replaced by another file of the same name (a new inode): gone or changed. */
        CHECK(unlinkat(root, "var/lib/extensions/app.raw.v/app_2.raw", 0) == 0);
        CHECK(mkfile(root, "var/lib/extensions/app.raw.v/keep-inode-busy") == 0);
        CHECK(mkfile(root, "var/lib/extensions/app.raw.v/app_2.raw") == 0);
        CHECK(image_discover_ex(root, "/R", search, IMAGE_CLASS_SYSEXT, true, &again) == 0);
        missing = NULL;
        CHECK(generation_select(&again, &g2, &chosen, &missing) == -ENOENT);
        CHECK(missing && streq(missing->name, "app") && streq_ptr(missing->version, "2"));
        CHECK(again.n == 4 && chosen.n == 0); /* nothing taken */
        CHECK(missing && generation_missing_message(4, missing, &msg) == 0);
        CHECK(msg && startswith(msg, "Cannot roll back to generation 4: image app version 2 (/R/var/lib/extensions/app.raw.v/app_2.raw, "));
        CHECK(msg && endswith(msg, ") is gone or changed; put it back or roll back to another generation."));
        image_list_free(&again);

        /* Gone entirely: the same. */
        CHECK(unlinkat(root, "var/lib/extensions/app.raw.v/app_2.raw", 0) == 0);
        CHECK(image_discover_ex(root, "/R", search, IMAGE_CLASS_SYSEXT, true, &again) == 0);
        CHECK(generation_select(&again, &g2, &chosen, &missing) == -ENOENT);
        image_list_free(&again);

        /* Generation 3 is still all there. */
        CHECK(image_discover_ex(root, "/R", search, IMAGE_CLASS_SYSEXT, true, &again) == 0);
        CHECK(generation_select(&again, &g3, &chosen, &missing) == 0 && chosen.n == 2);

        tmp = open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        CHECK(tmp >= 0 && rm_rf_at(tmp, dir + strlen("/tmp/")) == 0);
        safe_close(tmp);
        safe_close(root);
}

static void add_image(ImageList *l, const char *name, const char *version, bool picked, unsigned ino) {
        Image *n = realloc(l->images, sizeof(Image) * (l->n + 1));

        l->images = n;
        n[l->n] = (Image) {
                .klass = IMAGE_CLASS_SYSEXT,
                .name = strdup(name),
                .version = version ? strdup(version) : NULL,
                .picked = picked,
                .verdict = IMAGE_COMPATIBLE,
                .root_fd = -EBADF,
        };
        n[l->n].st.st_ino = ino;
        if (asprintf(&n[l->n].path, "/var/lib/extensions/%s%s%s", name, version ? "_" : "", version ?: "") < 0)
                n[l->n].path = NULL;
        l->n++;
}

static void test_pins(void) {
        static const int modes[_IMAGE_CLASS_MAX] = {};
        _cleanup_image_list_ ImageList from_l = {}, to_l = {}, cand = {};
        _cleanup_(generation_done) Generation from = {}, to = {};
        _cleanup_(pin_list_done) PinList pins = {};
        _cleanup_strv_free_ char **notes = NULL;
        const Pin *p;

        /* From: app 3, tool 1 (new in it), base; to: app 2, base. */
        add_image(&from_l, "app", "3", true, 1);
        add_image(&from_l, "base", NULL, true, 2);
        add_image(&from_l, "tool", "1", true, 3);
        add_image(&to_l, "app", "2", false, 4);
        add_image(&to_l, "base", NULL, true, 2);
        CHECK(generation_from_images(5, 0, modes, false, &from_l, &from) == 0);
        CHECK(generation_from_images(4, 0, modes, false, &to_l, &to) == 0);
        CHECK(pins_for_rollback(&from, &to, &pins) == 0);
        CHECK(pins.n == 2);
        p = pin_find(&pins, IMAGE_CLASS_SYSEXT, "app");
        CHECK(p && streq_ptr(p->version, "2") && streq_ptr(p->from_version, "3") && p->generation == 4);
        p = pin_find(&pins, IMAGE_CLASS_SYSEXT, "tool");
        CHECK(p && p->version == NULL && streq_ptr(p->from_version, "1"));
        CHECK(pin_find(&pins, IMAGE_CLASS_SYSEXT, "base") == NULL);

        /* The decision: only a version newer than the one rolled back from releases. */
        p = pin_find(&pins, IMAGE_CLASS_SYSEXT, "app");
        CHECK(pin_decide(p, "3") == PIN_KEEP);
        CHECK(pin_decide(p, "2") == PIN_KEEP);
        CHECK(pin_decide(p, NULL) == PIN_KEEP);
        CHECK(pin_decide(p, "3.1") == PIN_RELEASE);
        CHECK(pin_decide(p, "10") == PIN_RELEASE); /* as versions, not as strings */
        {
                Pin nine = { .name = (char *) "x", .version = (char *) "8", .from_version = (char *) "9" };
                CHECK(pin_decide(&nine, "10") == PIN_RELEASE);
                CHECK(pin_decide(&nine, "9~rc1") == PIN_KEEP);
        }

        /* A refresh: every version found, the pins choose. */
        add_image(&cand, "app", "1", false, 10);
        add_image(&cand, "app", "2", false, 4);
        add_image(&cand, "app", "3", true, 1);
        add_image(&cand, "base", NULL, true, 2);
        add_image(&cand, "tool", "1", true, 3);
        CHECK(pins_apply(&cand, &pins, IMAGE_CLASS_ALL, &notes) == 0);
        CHECK(notes == NULL);
        CHECK(cand.n == 2 && find_version(&cand, "app", "2") && find_version(&cand, "base", NULL));
        CHECK(pins.n == 2);
        image_list_free(&cand);

        /* app 4 appears: app's pin goes, the newest is used; tool stays out. */
        add_image(&cand, "app", "2", false, 4);
        add_image(&cand, "app", "3", false, 1);
        add_image(&cand, "app", "4", true, 11);
        add_image(&cand, "base", NULL, true, 2);
        add_image(&cand, "tool", "1", true, 3);
        CHECK(pins_apply(&cand, &pins, IMAGE_CLASS_ALL, &notes) == 1);
        CHECK(notes && notes[0] && strstr(notes[0], "Unpinned app: version 4 is newer than 3"));
        CHECK(cand.n == 2 && find_version(&cand, "app", "4") && find_version(&cand, "base", NULL));
        CHECK(pins.n == 1 && pin_find(&pins, IMAGE_CLASS_SYSEXT, "tool"));
        image_list_free(&cand);
        strv_free(notes);
        notes = NULL;

        /* tool 2 appears: released too. */
        add_image(&cand, "tool", "1", false, 3);
        add_image(&cand, "tool", "2", true, 12);
        CHECK(pins_apply(&cand, &pins, IMAGE_CLASS_ALL, &notes) == 1);
        CHECK(cand.n == 1 && find_version(&cand, "tool", "2"));
        CHECK(pins.n == 0);
}

static void test_pinned_version_gone(void) {
        _cleanup_image_list_ ImageList cand = {};
        _cleanup_(pin_list_done) PinList pins = { .pins = calloc(1, sizeof(Pin)), .n = 1 };
        _cleanup_strv_free_ char **notes = NULL;

        pins.pins[0] = (Pin) { .klass = IMAGE_CLASS_SYSEXT, .name = strdup("app"), .version = strdup("2"),
                               .from_version = strdup("3"), .generation = 4 };
        add_image(&cand, "app", "1", false, 1);
        add_image(&cand, "app", "3", true, 3);
        CHECK(pins_apply(&cand, &pins, IMAGE_CLASS_ALL, &notes) == 1);
        CHECK(notes && strstr(notes[0], "pinned version 2 is gone"));
        CHECK(cand.n == 1 && find_version(&cand, "app", "3"));
}

static void test_pins_other_class(void) {
        _cleanup_image_list_ ImageList cand = {};
        _cleanup_(pin_list_done) PinList pins = { .pins = calloc(1, sizeof(Pin)), .n = 1 };

        /* A refresh of system extensions only decides nothing about a configuration extension's pin. */
        pins.pins[0] = (Pin) { .klass = IMAGE_CLASS_CONFEXT, .name = strdup("conf"), .version = strdup("1"),
                               .from_version = strdup("2"), .generation = 4 };
        add_image(&cand, "app", "3", true, 3);
        CHECK(pins_apply(&cand, &pins, 1u << IMAGE_CLASS_SYSEXT, NULL) == 0);
        CHECK(pins.n == 1 && cand.n == 1);
        /* Covering both: its version is gone, the pin goes. */
        CHECK(pins_apply(&cand, &pins, IMAGE_CLASS_ALL, NULL) == 1);
        CHECK(pins.n == 0);
}

static void test_find_push(void) {
        static const int modes[_IMAGE_CLASS_MAX] = {};
        Generation *list = NULL;
        size_t n = 0;
        const Generation *g;
        char *msg = NULL;

        for (uint64_t i = 1; i <= 5; i++) {
                ImageList none = {};
                Generation x = {};

                CHECK(generation_from_images(i, i * 10, modes, false, &none, &x) == 0);
                CHECK(generations_push(&list, &n, &x, 3) == 0);
                generation_done(&x);
        }
        CHECK(n == 3 && list[0].generation == 3 && list[2].generation == 5);

        g = generation_find(list, n, 5, 0, &msg);
        CHECK(g && g->generation == 4 && !msg);
        g = generation_find(list, n, 5, 3, &msg);
        CHECK(g && g->generation == 3);
        /* Newer than the live one is fine too (a rollback of a rollback). */
        g = generation_find(list, n, 4, 5, &msg);
        CHECK(g && g->generation == 5);
        g = generation_find(list, n, 5, 5, &msg);
        CHECK(!g && msg && strstr(msg, "is the live one"));
        free(msg);
        msg = NULL;
        g = generation_find(list, n, 5, 1, &msg);
        CHECK(!g && msg && strstr(msg, "Cannot roll back to generation 1: it is not kept (kept: 3, 4, 5"));
        free(msg);
        msg = NULL;
        g = generation_find(list, n, 3, 0, &msg);
        CHECK(!g && msg && strstr(msg, "no generation older than the live one (3)"));
        free(msg);
        generations_free(list, n);
}

static const char *old_state =
        "{\"version\":2,\"generation\":7,\"config_stamp\":5,\"mount_namespace\":4026531841,\"incomplete\":false,"
        "\"hierarchies\":[{\"hierarchy\":\"usr\",\"tree\":null}],\"images\":[]}";

static void test_journal(void) {
        static const int modes[_IMAGE_CLASS_MAX] = { 0, 0 };
        _cleanup_journal_ Journal j = {}, k = {}, old = {};
        _cleanup_image_list_ ImageList l = {};
        _cleanup_free_ char *text = NULL, *gtext = NULL;
        char *bad = NULL;

        /* A journal written before the history loads, with none. */
        CHECK(journal_from_json(old_state, &old) == 0);
        CHECK(old.n_generations == 0 && old.pins.n == 0 && old.confirm_generation == 0 && !old.rollback_reason);
        CHECK(!old.generations_loaded && !old.generations_dirty);

        CHECK(journal_from_json(old_state, &j) == 0);
        add_image(&l, "app", "2", true, 7);
        l.images[0].st.st_dev = 2049;
        CHECK(journal_generations_from_json("{}", &j) == 0 && j.generations_loaded && j.n_generations == 0);
        CHECK(!j.generations_dirty);
        {
                Generation g6 = {}, g7 = {};

                CHECK(generation_from_images(6, 111, modes, false, &l, &g6) == 0);
                CHECK(generations_push(&j.generations, &j.n_generations, &g6, 3) == 0);
                CHECK(generation_from_images(7, 222, modes, true, &l, &g7) == 0);
                CHECK(generations_push(&j.generations, &j.n_generations, &g7, 3) == 0);
        }
        j.pins.pins = calloc(1, sizeof(Pin));
        j.pins.pins[0] = (Pin) { .klass = IMAGE_CLASS_SYSEXT, .name = strdup("app"), .version = strdup("2"),
                                 .from_version = NULL, .generation = 6 };
        j.pins.n = 1;
        j.confirm_generation = 7;
        j.confirm_since = 1000;
        j.confirm_deadline = 61000;
        j.confirm_target = 6;
        CHECK(journal_set_rollback(&j, 900, 5, 4, "deadline", "Cannot roll back to generation 4: ...") == 0);
        CHECK(journal_to_json(&j, &text) == 0);
        /* A copy (what a cached state.json gives every load) writes the same file; with a
         * transition pending and delayed too. */
        {
                _cleanup_journal_ Journal cp = {}, cp2 = {};
                _cleanup_free_ char *again = NULL, *pend = NULL, *pend2 = NULL;

                j.when = 4242;
                j.mutable[IMAGE_CLASS_CONFEXT] = MUTABLE_IMPORT;
                CHECK(journal_to_json(&j, &again) == 0);
                CHECK(journal_copy(&j, &cp) == 0);
                free(again);
                again = NULL;
                CHECK(journal_to_json(&cp, &again) == 0);
                free(text);
                text = NULL;
                CHECK(journal_to_json(&j, &text) == 0);
                CHECK(again && text && streq(again, text));
                CHECK(cp.n_generations == 0 && cp.trees.n == 0 && cp.images.n == j.images.n);
                CHECK(journal_add_transition(&cp, "usr", NULL, "0123456789abcdef0123456789abcdef") == 0);
                cp.pending = true;
                cp.pending_generation = 8;
                cp.delayed_since = 10;
                cp.delay_deadline = 20;
                CHECK(journal_set_tree(&cp, "opt", "0123456789abcdef0123456789abcdef") == 0);
                CHECK(journal_to_json(&cp, &pend) == 0 && journal_copy(&cp, &cp2) == 0 && journal_to_json(&cp2, &pend2) == 0);
                CHECK(pend && pend2 && streq(pend, pend2) && strstr(pend2, "\"delay_deadline\""));
                j.when = 0;
                j.mutable[IMAGE_CLASS_CONFEXT] = MUTABLE_NO;
                free(text);
                text = NULL;
                CHECK(journal_to_json(&j, &text) == 0);
        }
        /* The history has a file of its own: state.json, read by every status, does not carry it. */
        CHECK(!strstr(text, "\"generations\""));
        CHECK(journal_generations_to_json(&j, &gtext) == 0);
        CHECK(journal_from_json(text, &k) == 0);
        CHECK(k.n_generations == 0 && !k.generations_loaded);
        CHECK(journal_generations_from_json(gtext, &k) == 0);
        CHECK(k.n_generations == 2 && k.generations[1].generation == 7 && k.generations[1].forced &&
              k.generations[1].when == 222);
        CHECK(k.generations[0].images.n == 1 && streq_ptr(k.generations[0].images.images[0].version, "2") &&
              k.generations[0].images.images[0].st.st_ino == 7 && k.generations[0].images.images[0].st.st_dev == 2049);
        CHECK(k.pins.n == 1 && streq_ptr(k.pins.pins[0].version, "2") && k.pins.pins[0].from_version == NULL);
        CHECK(k.confirm_generation == 7 && k.confirm_deadline == 61000 && k.confirm_target == 6);
        CHECK(streq_ptr(k.rollback_reason, "deadline") && k.rollback_error && k.rollback_to == 4);

        /* Entries newer than state.json's generation (a state.json started afresh) are not the
         * history of this one. */
        {
                _cleanup_journal_ Journal x = { .generation = 6 }, y = { .generation = 0 }, z = { .generation = 99 };

                CHECK(journal_generations_from_json(gtext, &x) == 0 && x.n_generations == 1 && x.generations[0].generation == 6);
                CHECK(journal_generations_from_json(gtext, &y) == 0 && y.n_generations == 0 && y.generations_loaded);
                CHECK(journal_generations_from_json(gtext, &z) == 0 && z.n_generations == 2);
        }
        /* A state.json written when it still carried the history: loaded from there, and moved to
         * generations.json by the next save (dirty). */
        {
                _cleanup_journal_ Journal m = {};
                _cleanup_free_ char *combined = NULL, *again = NULL;
                const char *open = strchr(gtext, '{'), *close = strrchr(gtext, '}');
                size_t sl = strlen(text);

                CHECK(open && close && sl > 2);
                while (sl > 0 && text[sl - 1] != '}')
                        sl--;
                CHECK(asprintf(&combined, "%.*s,%.*s}", (int) (sl - 1), text, (int) (close - open - 1), open + 1) > 0);
                CHECK(journal_from_json(combined, &m) == 0);
                CHECK(m.n_generations == 2 && m.generations[1].generation == 7 && m.generations_loaded && m.generations_dirty);
                CHECK(journal_to_json(&m, &again) == 0 && !strstr(again, "\"generations\""));
                /* Validated there as in its own file. */
                free(combined);
                CHECK(asprintf(&combined, "%.*s,\"generations\":{}}", (int) (sl - 1), text) > 0);
                CHECK(journal_from_json(combined, &(Journal) {}) == -EBADMSG);
        }
        /* The history's own file, validated: out of order, twice, not a list, not an object. */
        {
                _cleanup_journal_ Journal x = { .generation = 99 };
                char *swapped = NULL;
                const char *g6 = strstr(gtext, "\"generation\":6"), *g7 = strstr(gtext, "\"generation\":7");

                CHECK(g6 && g7);
                if (g6 && g7) {
                        swapped = strdup(gtext);
                        swapped[g6 - gtext + strlen("\"generation\":")] = '7';
                        CHECK(journal_generations_from_json(swapped, &x) == -EBADMSG);
                        swapped[g7 - gtext + strlen("\"generation\":")] = '5';
                        CHECK(journal_generations_from_json(swapped, &x) == -EBADMSG);
                        free(swapped);
                }
                CHECK(journal_generations_from_json("{\"generations\":{}}", &x) == -EBADMSG);
                CHECK(journal_generations_from_json("{\"generations\":[null]}", &x) == -EBADMSG);
                CHECK(journal_generations_from_json("[]", &x) == -EBADMSG);
                CHECK(journal_generations_from_json("", &x) == -EBADMSG);
                CHECK(!x.generations_loaded && x.n_generations == 0);
        }

        /* On disk: generations/N.json, a hard link of the state.json that recorded N; an
         * earlier version's history moved there; files that fail moved aside, one by one. */
        {
                char tmpl[] = "/tmp/test-generation-XXXXXX";
                char *dir = mkdtemp(tmpl);
                _cleanup_close_ int dfd = dir ? open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -EBADF, gfd = -EBADF;
                _cleanup_journal_ Journal a = {}, b = {}, c = {}, d = {};
                _cleanup_free_ char *onfile = NULL;
                struct stat st1, st2;
                int rec = -1;
                static const int yes[_IMAGE_CLASS_MAX] = { MUTABLE_EPHEMERAL, MUTABLE_NO };

                CHECK(dfd >= 0);
                /* generations.json of the last version: read where it is by a reader (no lock,
                 * nothing written), moved to generations/ by the first that holds the lock. */
                CHECK(write_file_atomic_at(dfd, JOURNAL_GENERATIONS_LEGACY, gtext, 0644) == 0);
                j.confirm_generation = 0;
                CHECK(journal_save(dfd, &j) == 0);
                CHECK(journal_load(dfd, &a, NULL) == 0 && a.generation == 7 && !a.generations_loaded && a.n_generations == 0);
                CHECK(journal_load_generations(dfd, &a, false) == 0 && a.n_generations == 2 && a.generations_loaded);
                CHECK(a.generations[0].generation == 6 && a.generations[1].generation == 7 && a.generations[1].when == 222);
                CHECK(faccessat(dfd, JOURNAL_GENERATIONS_LEGACY, F_OK, AT_SYMLINK_NOFOLLOW) == 0);
                CHECK(faccessat(dfd, JOURNAL_GENERATIONS, F_OK, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT);
                a.generations_loaded = false;
                CHECK(journal_load_generations(dfd, &a, true) == 0 && a.n_generations == 2 && a.generations_loaded);
                CHECK(a.generations[0].generation == 6 && a.generations[1].generation == 7 && a.generations[1].forced &&
                      a.generations[1].when == 222 && a.generations[0].images.n == 1);
                CHECK(faccessat(dfd, JOURNAL_GENERATIONS_LEGACY, F_OK, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT);
                CHECK(faccessat(dfd, JOURNAL_GENERATIONS "/6.json", F_OK, AT_SYMLINK_NOFOLLOW) == 0);
                CHECK(faccessat(dfd, JOURNAL_GENERATIONS "/7.json", F_OK, AT_SYMLINK_NOFOLLOW) == 0);
                CHECK(journal_load_generations(dfd, &a, true) == 0 && a.n_generations == 2);

                /* The cache: the same file gives the same journal; a new file (rename) or one
                 * changed in place is read again. */
                {
                        _cleanup_(journal_cache_done) JournalCache cache = {};
                        _cleanup_journal_ Journal x = {}, y = {}, z = {};
                        _cleanup_close_ int wfd = -EBADF;

                        CHECK(journal_load_cached(dfd, &cache, &x, NULL) == 0 && cache.valid && x.generation == 7);
                        CHECK(journal_load_cached(dfd, &cache, &y, NULL) == 0 && y.generation == 7 &&
                              y.images.n == x.images.n && y.pins.n == x.pins.n);
                        x.generation = 77;
                        CHECK(journal_save(dfd, &x) == 0);
                        journal_done(&y);
                        CHECK(journal_load_cached(dfd, &cache, &y, NULL) == 0 && y.generation == 77);
                        /* In place, same size: "77" -> "78". */
                        free(onfile);
                        onfile = NULL;
                        CHECK(read_file_at(dfd, JOURNAL_STATE, 0, 1 << 20, &onfile, NULL, NULL) >= 0);
                        {
                                char *g = onfile ? strstr(onfile, "\"generation\":77") : NULL;
                                CHECK(g);
                                if (g) {
                                        g[strlen("\"generation\":77") - 1] = '8';
                                        wfd = openat(dfd, JOURNAL_STATE, O_WRONLY | O_CLOEXEC);
                                        CHECK(wfd >= 0 && pwrite(wfd, onfile, strlen(onfile), 0) == (ssize_t) strlen(onfile));
                                }
                        }
                        CHECK(journal_load_cached(dfd, &cache, &z, NULL) == 0 && z.generation == 78);
                        x.generation = 7;
                        CHECK(journal_save(dfd, &x) == 0);
                        free(onfile);
                        onfile = NULL;
                }

                /* A record: state.json as saved becomes 8.json (the same inode), with its "when"
                 * and modes, its compatible images only; the oldest beyond keep go. */
                a.generation = 8;
                a.when = 333;
                a.mutable[IMAGE_CLASS_SYSEXT] = MUTABLE_EPHEMERAL;
                add_image(&a.images, "app", "3", true, 9);
                /* Refused for its name (a control character): in state.json with its verdict,
                 * not in the generation, and no reason to call the record damaged. */
                add_image(&a.images, "oth\x01er", "1", false, 10);
                a.images.images[1].verdict = IMAGE_INCOMPATIBLE;
                CHECK(journal_save_recording(dfd, &a, 2, &rec) == 0 && rec == 0 && !a.generations_loaded);
                CHECK(fstatat(dfd, JOURNAL_STATE, &st1, 0) == 0 && fstatat(dfd, JOURNAL_GENERATIONS "/8.json", &st2, 0) == 0);
                CHECK(st1.st_ino == st2.st_ino && st2.st_nlink == 2);
                CHECK(faccessat(dfd, JOURNAL_GENERATIONS "/6.json", F_OK, AT_SYMLINK_NOFOLLOW) < 0);
                CHECK(journal_load_generations(dfd, &a, false) == 0 && a.n_generations == 2 && a.generations[1].generation == 8);
                CHECK(a.generations[1].when == 333 && a.generations[1].mutable[IMAGE_CLASS_SYSEXT] == yes[0] &&
                      !a.generations[1].forced);
                CHECK(a.generations[1].images.n == 1 && streq_ptr(a.generations[1].images.images[0].name, "app") &&
                      a.generations[1].images.images[0].st.st_ino == 9);
                /* A later save of state.json (pins, say) is a new inode: the record stays. */
                CHECK(journal_save(dfd, &a) == 0);
                CHECK(fstatat(dfd, JOURNAL_GENERATIONS "/8.json", &st1, 0) == 0 && st1.st_ino == st2.st_ino &&
                      st1.st_nlink == 1);

                /* A state.json started afresh (generation 2): newer files are not its history,
                 * and its first record removes them. */
                b.generation = 2;
                b.when = 444;
                CHECK(journal_save(dfd, &b) == 0);
                CHECK(journal_load_generations(dfd, &b, false) == 0 && b.n_generations == 0);
                CHECK(journal_save_recording(dfd, &b, 3, &rec) == 0 && rec == 0);
                CHECK(faccessat(dfd, JOURNAL_GENERATIONS "/7.json", F_OK, AT_SYMLINK_NOFOLLOW) < 0);
                CHECK(faccessat(dfd, JOURNAL_GENERATIONS "/8.json", F_OK, AT_SYMLINK_NOFOLLOW) < 0);
                CHECK(journal_load_generations(dfd, &b, false) == 0 && b.n_generations == 1 && b.generations[0].when == 444);

                /* Damaged, a symbolic link, a FIFO, another generation's record: each moved
                 * aside on its own, the rest of the history stays. */
                gfd = open_directory_at(dfd, JOURNAL_GENERATIONS, 0);
                CHECK(gfd >= 0);
                b.generation = 9;
                b.generations_loaded = false; /* read again */
                CHECK(write_file_atomic_at(gfd, "3.json", "{\"generation\":3", 0644) == 0);
                CHECK(symlinkat("/etc/passwd", gfd, "4.json") == 0);
                CHECK(mkfifoat(gfd, "5.json", 0644) == 0);
                CHECK(read_file_at(gfd, "2.json", 0, 1 << 20, &onfile, NULL, NULL) >= 0);
                CHECK(write_file_atomic_at(gfd, "6.json", onfile, 0644) == 0);
                CHECK(write_file_atomic_at(gfd, "07.json", onfile, 0644) == 0); /* not a name of ours */
                /* A reader counts them and leaves them; the lock's holder moves them aside. */
                CHECK(journal_load_generations(dfd, &b, false) == 4 && b.n_generations == 1 && b.generations[0].generation == 2);
                CHECK(faccessat(gfd, "3.json", F_OK, AT_SYMLINK_NOFOLLOW) == 0);
                CHECK(faccessat(gfd, "3.json.corrupt", F_OK, AT_SYMLINK_NOFOLLOW) < 0);
                b.generations_loaded = false;
                CHECK(journal_load_generations(dfd, &b, true) == 4 && b.n_generations == 1 && b.generations[0].generation == 2);
                CHECK(faccessat(gfd, "3.json.corrupt", F_OK, AT_SYMLINK_NOFOLLOW) == 0);
                CHECK(faccessat(gfd, "4.json.corrupt", F_OK, AT_SYMLINK_NOFOLLOW) == 0);
                CHECK(faccessat(gfd, "5.json.corrupt", F_OK, AT_SYMLINK_NOFOLLOW) == 0);
                CHECK(faccessat(gfd, "6.json.corrupt", F_OK, AT_SYMLINK_NOFOLLOW) == 0);
                CHECK(faccessat(gfd, "6.json", F_OK, AT_SYMLINK_NOFOLLOW) < 0);

                /* A damaged generations.json of the last version: moved aside, counted. */
                CHECK(write_file_atomic_at(dfd, JOURNAL_GENERATIONS_LEGACY, "{\"generations\":[1]}", 0644) == 0);
                CHECK(journal_load(dfd, &c, NULL) == 0 && journal_load_generations(dfd, &c, false) == 1);
                CHECK(faccessat(dfd, JOURNAL_GENERATIONS_LEGACY, F_OK, AT_SYMLINK_NOFOLLOW) == 0);
                c.generations_loaded = false;
                CHECK(journal_load_generations(dfd, &c, true) == 1);
                CHECK(faccessat(dfd, JOURNAL_GENERATIONS_LEGACY ".corrupt", F_OK, AT_SYMLINK_NOFOLLOW) == 0);
                CHECK(faccessat(dfd, JOURNAL_GENERATIONS_LEGACY, F_OK, AT_SYMLINK_NOFOLLOW) < 0);
                CHECK(c.n_generations == 1);
                /* generations/ not a directory (a symbolic link here): a reader finds no history
                 * and says so; a record moves it to generations.corrupt and goes on. */
                gfd = safe_close(gfd);
                if (dir) {
                        _cleanup_free_ char *cmd = NULL;

                        CHECK(asprintf(&cmd, "rm -rf '%s/%s'", dir, JOURNAL_GENERATIONS) > 0 && system(cmd) == 0);
                }
                CHECK(symlinkat("/tmp", dfd, JOURNAL_GENERATIONS) == 0);
                c.generation = 10;
                CHECK(journal_save(dfd, &c) == 0);
                CHECK(journal_load(dfd, &d, NULL) == 0 && d.generation == 10);
                CHECK(journal_load_generations(dfd, &d, false) == 1 && d.n_generations == 0);
                CHECK(journal_save_recording(dfd, &c, 3, &rec) == 0 && rec == 0);
                CHECK(fstatat(dfd, JOURNAL_GENERATIONS ".corrupt", &st1, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st1.st_mode));
                d.generations_loaded = false;
                CHECK(journal_load_generations(dfd, &d, false) == 0 && d.n_generations == 1 && d.generations[0].generation == 10);
                if (dir) {
                        _cleanup_free_ char *cmd = NULL;

                        CHECK(asprintf(&cmd, "rm -rf '%s'", dir) > 0 && system(cmd) == 0);
                }
        }

        /* Validated: a pin with a name that is none, a deadline before its start, an unknown reason. */
        {
                _cleanup_journal_ Journal x = {};
                const char *cases[][2] = {
                        { "\"name\":\"app\"", "\"name\":\".app\"" }, /* the last: the pin's */
                        { "\"deadline\":61000", "\"deadline\":10" },
                        { "\"reason\":\"deadline\"", "\"reason\":\"whim\"" },
                        { "\"from_version\":null", "\"from_version\":\"a/b\"" },
                };
                for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                        const char *at = strstr(text, cases[i][0]);

                        /* The last occurrence. */
                        while (at && strstr(at + 1, cases[i][0]))
                                at = strstr(at + 1, cases[i][0]);

                        CHECK(at != NULL);
                        if (!at)
                                continue;
                        CHECK(asprintf(&bad, "%.*s%s%s", (int) (at - text), text, cases[i][1], at + strlen(cases[i][0])) > 0);
                        CHECK(journal_from_json(bad, &x) == -EBADMSG);
                        free(bad);
                }
        }
}

/* The parse made before the lock (journal_cache_prefetch()): used by the load under the lock
 * only while state.json has the bytes it was made from; nothing is written or created, a file
 * that is not state.json's kind (invalid, a symbolic link, missing) leaves the cache empty. */
static void test_prefetch(void) {
        char tmpl[] = "/tmp/sysextd-prefetch.XXXXXX";
        char *dir = mkdtemp(tmpl);
        _cleanup_close_ int root = dir ? open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -EBADF, jfd = -EBADF, tmp = -EBADF;
        _cleanup_journal_ Journal j = {}, a = {}, b = {}, c = {}, d = {};
        JournalCache cache = {};
        struct stat st;

        CHECK(root >= 0);
        /* No journal directory: none is made. */
        journal_cache_prefetch(root, &cache);
        CHECK(!cache.valid && fstatat(root, "run", &st, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT);

        CHECK(journal_dir_open(root, true, &jfd) == 0);
        /* A directory without state.json. */
        journal_cache_prefetch(root, &cache);
        CHECK(!cache.valid);

        j.generation = 41;
        add_image(&j.images, "app", "1", true, 5);
        add_image(&j.images, "tool", "2", true, 6);
        CHECK(journal_save(jfd, &j) == 0);
        journal_cache_prefetch(root, &cache);
        CHECK(cache.valid && cache.journal.generation == 41 && cache.journal.images.n == 2);
        /* The same bytes under the lock: the prefetched journal, as loaded. */
        CHECK(journal_load_cached(jfd, &cache, &a, NULL) == 0 && a.generation == 41 && a.images.n == 2);
        CHECK(cache.valid && cache.journal.generation == 41);

        /* Saved again between the prefetch and the lock (another transition): the new file. */
        journal_cache_prefetch(root, &cache);
        j.generation = 42;
        add_image(&j.images, "third", "3", true, 7);
        CHECK(journal_save(jfd, &j) == 0);
        CHECK(journal_load_cached(jfd, &cache, &b, NULL) == 0 && b.generation == 42 && b.images.n == 3);

        /* Changed in place to other bytes of the same size ("42" -> "49"): read again. */
        {
                _cleanup_journal_ Journal e = {};
                _cleanup_free_ char *text = NULL;
                char *g;

                journal_cache_prefetch(root, &cache);
                CHECK(cache.valid && cache.journal.generation == 42);
                CHECK(read_file_at(jfd, JOURNAL_STATE, 0, 1 << 20, &text, NULL, NULL) >= 0);
                g = text ? strstr(text, "\"generation\":42") : NULL;
                CHECK(g);
                if (g) {
                        _cleanup_close_ int wfd = openat(jfd, JOURNAL_STATE, O_WRONLY | O_CLOEXEC);

                        g[strlen("\"generation\":42") - 1] = '9';
                        CHECK(wfd >= 0 && pwrite(wfd, text, strlen(text), 0) == (ssize_t) strlen(text));
                }
                CHECK(journal_load_cached(jfd, &cache, &e, NULL) == 0 && e.generation == 49 && e.images.n == 3);
                CHECK(journal_save(jfd, &j) == 0); /* back to 42 */
        }

        /* Changed in place to bytes that do not parse: the prefetch has nothing; the load
         * under the lock moves it aside and starts afresh, as without a prefetch. */
        CHECK(write_file_atomic_at(jfd, JOURNAL_STATE, "{\"version\":2,\"generation\":", 0644) == 0);
        journal_cache_prefetch(root, &cache);
        CHECK(!cache.valid);
        CHECK(faccessat(jfd, JOURNAL_STATE, F_OK, AT_SYMLINK_NOFOLLOW) == 0); /* not moved by the prefetch */
        CHECK(journal_load_cached(jfd, &cache, &c, NULL) == 1 && c.generation == 0);
        CHECK(faccessat(jfd, JOURNAL_STATE ".corrupt", F_OK, AT_SYMLINK_NOFOLLOW) == 0);

        /* A symbolic link at state.json (to a valid journal) is not followed. */
        CHECK(journal_save(jfd, &j) == 0);
        CHECK(renameat(jfd, JOURNAL_STATE, jfd, "elsewhere.json") == 0);
        CHECK(symlinkat("elsewhere.json", jfd, JOURNAL_STATE) == 0);
        journal_cache_prefetch(root, &cache);
        CHECK(!cache.valid);
        CHECK(unlinkat(jfd, JOURNAL_STATE, 0) == 0);

        /* A prefetch followed by the same file: the load copies, the cache stays for the next. */
        CHECK(renameat(jfd, "elsewhere.json", jfd, JOURNAL_STATE) == 0);
        journal_cache_prefetch(root, &cache);
        CHECK(journal_load_cached(jfd, &cache, &d, NULL) == 0 && d.generation == 42 && d.images.n == 3 && cache.valid);
        journal_cache_done(&cache);

        tmp = open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        CHECK(dir && tmp >= 0 && rm_rf_at(tmp, dir + strlen("/tmp/")) == 0);
}

int main(void) {
        test_discover_select();
        test_pins();
        test_pinned_version_gone();
        test_pins_other_class();
        test_find_push();
        test_journal();
        test_prefetch();
        return tap_finish();
}
