/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <linux/openat2.h>
#include <string.h>
#include <sys/stat.h>

#include "fd-util.h"
#include "fileio.h"
#include "image-json.h"
#include "journal.h"
#include "json-util.h"
#include "mutable.h"
#include "util.h"

#define JOURNAL_FILE_MAX (64 * 1024 * 1024)
#define HIERARCHY_MAX_LEN 4096

static void hierarchy_done(JournalHierarchy *h) {
        free(h->hierarchy);
        free(h->tree);
}

static void transition_done(JournalTransition *t) {
        free(t->hierarchy);
        free(t->old_tree);
        free(t->new_tree);
}

void journal_pending_clear(Journal *j) {
        for (size_t i = 0; i < j->n_transitions; i++)
                transition_done(&j->transitions[i]);
        free(j->transitions);
        j->transitions = NULL;
        j->n_transitions = 0;
        j->pending = false;
        j->pending_generation = 0;
        j->delayed_since = j->delay_deadline = 0;
}

void journal_done(Journal *j) {
        for (size_t i = 0; i < j->n_hierarchies; i++)
                hierarchy_done(&j->hierarchies[i]);
        free(j->hierarchies);
        image_list_free(&j->images);
        journal_pending_clear(j);
        tree_list_done(&j->trees);
        generations_free(j->generations, j->n_generations);
        pin_list_done(&j->pins);
        free(j->rollback_reason);
        free(j->rollback_error);
        *j = (Journal) {};
}

void journal_confirm_clear(Journal *j) {
        j->confirm_generation = j->confirm_since = j->confirm_deadline = j->confirm_target = 0;
}

int journal_set_rollback(Journal *j, uint64_t when, uint64_t from, uint64_t to, const char *reason, const char *error) {
        char *r = strdup(reason), *e = error ? strdup(error) : NULL;

        if (!r || (error && !e)) {
                free(r);
                free(e);
                return -ENOMEM;
        }
        free(j->rollback_reason);
        free(j->rollback_error);
        j->rollback_reason = r;
        j->rollback_error = e;
        j->rollback_when = when;
        j->rollback_from = from;
        j->rollback_to = to;
        return 0;
}

JournalHierarchy *journal_find_hierarchy(Journal *j, const char *hierarchy) {
        for (size_t i = 0; i < j->n_hierarchies; i++)
                if (streq(j->hierarchies[i].hierarchy, hierarchy))
                        return &j->hierarchies[i];
        return NULL;
}

int journal_set_tree(Journal *j, const char *hierarchy, const char *tree) {
        JournalHierarchy *h = journal_find_hierarchy(j, hierarchy), *n;
        char *copy = NULL;

        if (tree) {
                copy = strdup(tree);
                if (!copy)
                        return -ENOMEM;
        }
        if (!h) {
                n = realloc(j->hierarchies, sizeof(JournalHierarchy) * (j->n_hierarchies + 1));
                if (!n) {
                        free(copy);
                        return -ENOMEM;
                }
                j->hierarchies = n;
                h = &n[j->n_hierarchies];
                *h = (JournalHierarchy) { .hierarchy = strdup(hierarchy) };
                if (!h->hierarchy) {
                        free(copy);
                        return -ENOMEM;
                }
                j->n_hierarchies++;
        }
        free(h->tree);
        h->tree = copy;
        return 0;
}

int journal_add_transition(Journal *j, const char *hierarchy, const char *old_tree, const char *new_tree) {
        JournalTransition *n = realloc(j->transitions, sizeof(JournalTransition) * (j->n_transitions + 1)), *t;

        if (!n)
                return -ENOMEM;
        j->transitions = n;
        t = &n[j->n_transitions];
        *t = (JournalTransition) {
                .hierarchy = strdup(hierarchy),
                .old_tree = old_tree ? strdup(old_tree) : NULL,
                .new_tree = new_tree ? strdup(new_tree) : NULL,
        };
        if (!t->hierarchy || (old_tree && !t->old_tree) || (new_tree && !t->new_tree)) {
                transition_done(t);
                return -ENOMEM;
        }
        j->n_transitions++;
        return 0;
}

void journal_drop_transition(Journal *j, size_t i) {
        if (i >= j->n_transitions)
                return;
        transition_done(&j->transitions[i]);
        memmove(&j->transitions[i], &j->transitions[i + 1], sizeof(JournalTransition) * (j->n_transitions - i - 1));
        j->n_transitions--;
        if (j->n_transitions == 0)
                journal_pending_clear(j);
}

void journal_drop_transition_of(Journal *j, const char *hierarchy) {
        for (size_t i = 0; i < j->n_transitions; i++)
                if (streq(j->transitions[i].hierarchy, hierarchy)) {
                        journal_drop_transition(j, i);
                        return;
                }
}

static bool tree_ref_valid(const char *s) {
        if (!s)
                return true;
        if (strlen(s) != TREE_ID_LEN)
                return false;
        for (const char *c = s; *c; c++)
                if (!strchr("0123456789abcdef", *c))
                        return false;
        return true;
}

static bool hierarchy_name_valid(const char *s) {
        /* Relative, no empty, "." or ".." components. */
        if (isempty(s) || s[0] == '/' || endswith(s, "/"))
                return false;
        for (const char *c = s; *c;) {
                size_t n = strcspn(c, "/");
                if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
                        return false;
                c += n;
                if (*c == '/')
                        c++;
        }
        return utf8_is_valid(s) && !string_has_control(s);
}

#define VERSION_MAX_LEN 255
#define MESSAGE_MAX_LEN 4096

static bool version_valid(const char *v) {
        return !v || (!isempty(v) && utf8_is_valid(v) && !string_has_control(v) && !strchr(v, '/'));
}

static int modes_from_json(json_object *m, int mutable[static _IMAGE_CLASS_MAX]) {
        for (int k = 0; k < _IMAGE_CLASS_MAX; k++) {
                _cleanup_free_ char *v = NULL;

                if (json_get_string(m, image_class_to_string(k), 64, &v) < 0)
                        return -EBADMSG;
                mutable[k] = mutable_mode_from_string(v);
                if (mutable[k] < 0)
                        return -EBADMSG;
        }
        return 0;
}

static json_object *modes_to_json(const int mutable[static _IMAGE_CLASS_MAX]) {
        json_object *m = json_object_new_object();

        for (int k = 0; k < _IMAGE_CLASS_MAX; k++)
                json_object_object_add(m, image_class_to_string(k), json_object_new_string(mutable_mode_to_string(mutable[k])));
        return m;
}

static int generation_from_json(json_object *e, Generation *ret) {
        _cleanup_image_list_ ImageList all = {};
        Generation g = {};
        json_object *m, *a;
        int r;

        if (!json_object_is_type(e, json_type_object) || json_get_u64(e, "generation", &g.generation) < 0 ||
            json_get_u64(e, "when", &g.when) < 0 || json_get_bool(e, "forced", &g.forced) < 0)
                return -EBADMSG;
        m = json_get_object(e, "mutable");
        if (!m || modes_from_json(m, g.mutable) < 0)
                return -EBADMSG;
        a = json_get_array(e, "images");
        if (!a)
                return -EBADMSG;
        r = image_list_from_json(a, IMAGE_JSON_JOURNAL, &all);
        if (r < 0)
                return r;
        /* A generation is its compatible images (generation_from_images()); a state.json kept
         * as generations/N.json lists the others too, with their verdicts: a file refused for
         * its name is among them, and is none of the generation's business. */
        r = generation_from_images(g.generation, g.when, g.mutable, g.forced, &all, &g);
        if (r < 0)
                return r;
        for (size_t i = 0; i < g.images.n; i++)
                if (image_name_invalid_reason(g.images.images[i].name) || !version_valid(g.images.images[i].version)) {
                        generation_done(&g);
                        return -EBADMSG;
                }
        *ret = g;
        return 0;
}

static json_object *generation_to_json(const Generation *g) {
        json_object *e = json_object_new_object();

        json_object_object_add(e, "generation", json_object_new_uint64(g->generation));
        json_object_object_add(e, "when", json_object_new_uint64(g->when));
        json_object_object_add(e, "forced", json_object_new_boolean(g->forced));
        json_object_object_add(e, "mutable", modes_to_json(g->mutable));
        json_object_object_add(e, "images", image_list_to_json(&g->images, IMAGE_JSON_JOURNAL));
        return e;
}

/* The "generations" array of root (missing: none), oldest first and each once; entries newer
 * than up_to are dropped. */
static int generations_from_json(json_object *root, uint64_t up_to, Generation **list, size_t *n) {
        json_object *a;
        uint64_t last = 0;
        int r;

        a = json_get_array(root, "generations");
        if (json_object_object_get_ex(root, "generations", NULL) && !a)
                return -EBADMSG;
        for (size_t i = 0; a && i < json_object_array_length(a); i++) {
                Generation g = {};

                if (i >= JOURNAL_GENERATIONS_MAX)
                        return -EBADMSG;
                r = generation_from_json(json_object_array_get_idx(a, i), &g);
                if (r < 0)
                        return r;
                if (i > 0 && g.generation <= last) {
                        generation_done(&g);
                        return -EBADMSG;
                }
                last = g.generation;
                r = g.generation <= up_to ? generations_push(list, n, &g, JOURNAL_GENERATIONS_MAX) : 0;
                generation_done(&g);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* The optional parts: pins, confirmation, last rollback; and the history where a state.json
 * of an earlier version keeps it ("generations": moved to generations/ by the next save). */
static int history_from_json(json_object *root, Journal *j) {
        json_object *a, *o;
        int r;

        if (json_object_object_get_ex(root, "generations", NULL)) {
                r = generations_from_json(root, UINT64_MAX, &j->generations, &j->n_generations);
                if (r < 0)
                        return r;
                j->generations_loaded = j->generations_dirty = true;
        }

        a = json_get_array(root, "pins");
        if (json_object_object_get_ex(root, "pins", NULL) && !a)
                return -EBADMSG;
        for (size_t i = 0; a && i < json_object_array_length(a); i++) {
                json_object *e = json_object_array_get_idx(a, i);
                _cleanup_free_ char *klass = NULL, *name = NULL, *version = NULL, *from = NULL;
                uint64_t generation;
                Pin *n;
                int k;

                if (i >= 4096 || json_get_string(e, "class", 64, &klass) < 0 || (k = image_class_from_string(klass)) < 0 ||
                    json_get_string(e, "name", IMAGE_NAME_MAX, &name) < 0 || image_name_invalid_reason(name) ||
                    json_get_string_or_null(e, "version", VERSION_MAX_LEN, &version) < 0 || !version_valid(version) ||
                    json_get_string_or_null(e, "from_version", VERSION_MAX_LEN, &from) < 0 || !version_valid(from) ||
                    json_get_u64(e, "generation", &generation) < 0 || pin_find(&j->pins, k, name))
                        return -EBADMSG;
                n = realloc(j->pins.pins, sizeof(Pin) * (j->pins.n + 1));
                if (!n)
                        return -ENOMEM;
                j->pins.pins = n;
                n[j->pins.n++] = (Pin) { .klass = k, .name = TAKE_PTR(name), .version = TAKE_PTR(version),
                                         .from_version = TAKE_PTR(from), .generation = generation };
        }

        if (json_object_object_get_ex(root, "confirm", &o) && o) {
                if (!json_object_is_type(o, json_type_object) || json_get_u64(o, "generation", &j->confirm_generation) < 0 ||
                    json_get_u64(o, "since", &j->confirm_since) < 0 || json_get_u64(o, "deadline", &j->confirm_deadline) < 0 ||
                    json_get_u64(o, "target", &j->confirm_target) < 0 || j->confirm_generation == 0 ||
                    j->confirm_deadline < j->confirm_since || j->confirm_deadline - j->confirm_since > JOURNAL_CONFIRM_MAX_USEC)
                        return -EBADMSG;
        }

        if (json_object_object_get_ex(root, "last_rollback", &o) && o) {
                if (!json_object_is_type(o, json_type_object) || json_get_u64(o, "when", &j->rollback_when) < 0 ||
                    json_get_u64(o, "from", &j->rollback_from) < 0 || json_get_u64(o, "to", &j->rollback_to) < 0 ||
                    json_get_string(o, "reason", 64, &j->rollback_reason) < 0 ||
                    !STR_IN_SET(j->rollback_reason, "command", "deadline") ||
                    json_get_string_or_null(o, "error", MESSAGE_MAX_LEN, &j->rollback_error) < 0 ||
                    (j->rollback_error && (!utf8_is_valid(j->rollback_error) || string_has_control(j->rollback_error))))
                        return -EBADMSG;
        }
        return 0;
}

static void history_write(JsonWriter *w, const Journal *j) {
        json_writer_key(w, "pins");
        json_writer_begin_array(w);
        for (size_t i = 0; i < j->pins.n; i++) {
                const Pin *p = &j->pins.pins[i];

                json_writer_begin_object(w);
                json_writer_field_string(w, "class", image_class_to_string(p->klass));
                json_writer_field_string(w, "name", p->name);
                json_writer_field_string(w, "version", p->version);
                json_writer_field_string(w, "from_version", p->from_version);
                json_writer_field_u64(w, "generation", p->generation);
                json_writer_end_object(w);
        }
        json_writer_end_array(w);

        if (j->confirm_generation > 0) {
                json_writer_key(w, "confirm");
                json_writer_begin_object(w);
                json_writer_field_u64(w, "generation", j->confirm_generation);
                json_writer_field_u64(w, "since", j->confirm_since);
                json_writer_field_u64(w, "deadline", j->confirm_deadline);
                json_writer_field_u64(w, "target", j->confirm_target);
                json_writer_end_object(w);
        }
        if (j->rollback_reason) {
                json_writer_key(w, "last_rollback");
                json_writer_begin_object(w);
                json_writer_field_u64(w, "when", j->rollback_when);
                json_writer_field_u64(w, "from", j->rollback_from);
                json_writer_field_u64(w, "to", j->rollback_to);
                json_writer_field_string(w, "reason", j->rollback_reason);
                json_writer_field_string(w, "error", j->rollback_error);
                json_writer_end_object(w);
        }
}

int journal_from_json(const char *text, Journal *ret) {
        _cleanup_json_ json_object *root = NULL;
        _cleanup_journal_ Journal j = {};
        json_object *a, *p;
        uint64_t version;
        int r;

        root = json_parse_object(text);
        if (!root)
                return -EBADMSG;
        if (json_get_u64(root, "version", &version) < 0 || version != JOURNAL_VERSION)
                return -EBADMSG;
        if (json_get_u64(root, "generation", &j.generation) < 0 ||
            json_get_u64(root, "config_stamp", &j.config_stamp) < 0 ||
            json_get_u64(root, "mount_namespace", &j.mount_ns) < 0 || json_get_bool(root, "incomplete", &j.incomplete) < 0)
                return -EBADMSG;
        if (json_object_object_get_ex(root, "forced", NULL) && json_get_bool(root, "forced", &j.forced) < 0)
                return -EBADMSG;
        if (json_object_object_get_ex(root, "when", NULL) && json_get_u64(root, "when", &j.when) < 0)
                return -EBADMSG;
        if (json_object_object_get_ex(root, "mutable", &p) && (!p || !json_object_is_type(p, json_type_object) ||
                                                               modes_from_json(p, j.mutable) < 0))
                return -EBADMSG;

        a = json_get_array(root, "hierarchies");
        if (!a)
                return -EBADMSG;
        for (size_t i = 0; i < json_object_array_length(a); i++) {
                json_object *e = json_object_array_get_idx(a, i);
                _cleanup_free_ char *name = NULL, *tree = NULL;

                if (json_get_string(e, "hierarchy", HIERARCHY_MAX_LEN, &name) < 0 || !hierarchy_name_valid(name) ||
                    json_get_string_or_null(e, "tree", TREE_ID_LEN, &tree) < 0 || !tree_ref_valid(tree) ||
                    journal_find_hierarchy(&j, name))
                        return -EBADMSG;
                r = journal_set_tree(&j, name, tree);
                if (r < 0)
                        return r;
        }

        a = json_get_array(root, "images");
        if (!a)
                return -EBADMSG;
        r = image_list_from_json(a, IMAGE_JSON_JOURNAL, &j.images);
        if (r < 0)
                return r;
        r = history_from_json(root, &j);
        if (r < 0)
                return r;

        if (json_object_object_get_ex(root, "pending", &p) && p) {
                if (!json_object_is_type(p, json_type_object))
                        return -EBADMSG;
                j.pending = true;
                if (json_get_u64(p, "generation", &j.pending_generation) < 0)
                        return -EBADMSG;
                /* A delay: both times or neither, the deadline not before the start. */
                if (json_object_object_get_ex(p, "delayed_since", NULL) || json_object_object_get_ex(p, "delay_deadline", NULL)) {
                        if (json_get_u64(p, "delayed_since", &j.delayed_since) < 0 ||
                            json_get_u64(p, "delay_deadline", &j.delay_deadline) < 0 || j.delayed_since == 0 ||
                            j.delay_deadline < j.delayed_since || j.delay_deadline - j.delayed_since > JOURNAL_DELAY_MAX_USEC)
                                return -EBADMSG;
                }
                a = json_get_array(p, "transitions");
                if (!a)
                        return -EBADMSG;
                for (size_t i = 0; i < json_object_array_length(a); i++) {
                        json_object *e = json_object_array_get_idx(a, i);
                        _cleanup_free_ char *name = NULL, *old_tree = NULL, *new_tree = NULL;

                        if (json_get_string(e, "hierarchy", HIERARCHY_MAX_LEN, &name) < 0 || !hierarchy_name_valid(name) ||
                            json_get_string_or_null(e, "old_tree", TREE_ID_LEN, &old_tree) < 0 ||
                            !tree_ref_valid(old_tree) || json_get_string_or_null(e, "new_tree", TREE_ID_LEN, &new_tree) < 0 ||
                            !tree_ref_valid(new_tree))
                                return -EBADMSG;
                        r = journal_add_transition(&j, name, old_tree, new_tree);
                        if (r < 0)
                                return r;
                }
                if (j.n_transitions == 0) {
                        j.pending = false;
                        j.delayed_since = j.delay_deadline = 0;
                }
        }

        *ret = j;
        j = (Journal) {};
        return 0;
}

/* Written on every transition (three times), so with a JsonWriter: no tree of objects. */
int journal_to_json(const Journal *j, char **ret) {
        JsonWriter w = {};

        json_writer_begin_object(&w);
        json_writer_field_u64(&w, "version", JOURNAL_VERSION);
        json_writer_field_u64(&w, "generation", j->generation);
        json_writer_field_u64(&w, "config_stamp", j->config_stamp);
        json_writer_field_u64(&w, "mount_namespace", j->mount_ns);
        json_writer_field_bool(&w, "incomplete", j->incomplete);
        json_writer_field_bool(&w, "forced", j->forced);
        json_writer_field_u64(&w, "when", j->when);
        json_writer_key(&w, "mutable");
        json_writer_begin_object(&w);
        for (int k = 0; k < _IMAGE_CLASS_MAX; k++) {
                json_writer_key(&w, image_class_to_string(k));
                json_writer_string(&w, mutable_mode_to_string(j->mutable[k]));
        }
        json_writer_end_object(&w);

        json_writer_key(&w, "hierarchies");
        json_writer_begin_array(&w);
        for (size_t i = 0; i < j->n_hierarchies; i++) {
                json_writer_begin_object(&w);
                json_writer_field_string(&w, "hierarchy", j->hierarchies[i].hierarchy);
                json_writer_field_string(&w, "tree", j->hierarchies[i].tree);
                json_writer_end_object(&w);
        }
        json_writer_end_array(&w);
        json_writer_key(&w, "images");
        image_list_write_json(&w, &j->images, IMAGE_JSON_JOURNAL);
        history_write(&w, j);

        if (j->pending) {
                json_writer_key(&w, "pending");
                json_writer_begin_object(&w);
                json_writer_field_u64(&w, "generation", j->pending_generation);
                if (j->delay_deadline > 0) {
                        json_writer_field_u64(&w, "delayed_since", j->delayed_since);
                        json_writer_field_u64(&w, "delay_deadline", j->delay_deadline);
                }
                json_writer_key(&w, "transitions");
                json_writer_begin_array(&w);
                for (size_t i = 0; i < j->n_transitions; i++) {
                        json_writer_begin_object(&w);
                        json_writer_field_string(&w, "hierarchy", j->transitions[i].hierarchy);
                        json_writer_field_string(&w, "old_tree", j->transitions[i].old_tree);
                        json_writer_field_string(&w, "new_tree", j->transitions[i].new_tree);
                        json_writer_end_object(&w);
                }
                json_writer_end_array(&w);
                json_writer_end_object(&w);
        }
        json_writer_end_object(&w);
        return json_writer_finish(&w, ret);
}

int journal_generations_from_json(const char *text, Journal *j) {
        _cleanup_json_ json_object *root = NULL;
        Generation *l = NULL;
        size_t n = 0;
        int r;

        root = json_parse_object(text);
        if (!root)
                return -EBADMSG;
        r = generations_from_json(root, j->generation, &l, &n);
        if (r < 0) {
                generations_free(l, n);
                return r;
        }
        generations_free(j->generations, j->n_generations);
        j->generations = l;
        j->n_generations = n;
        j->generations_loaded = true;
        j->generations_dirty = false;
        return 0;
}

int journal_generations_to_json(const Journal *j, char **ret) {
        _cleanup_json_ json_object *root = json_object_new_object();
        json_object *a = json_object_new_array();
        const char *s;

        if (!root || !a) {
                json_object_put(a);
                return -ENOMEM;
        }
        for (size_t i = 0; i < j->n_generations; i++)
                json_object_array_add(a, generation_to_json(&j->generations[i]));
        json_object_object_add(root, "generations", a);
        s = json_object_to_json_string_ext(root, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE);
        *ret = s ? strdup(s) : NULL;
        return *ret ? 0 : -ENOMEM;
}

int journal_dir_open(int root_fd, bool create, int *ret_fd) {
        int fd;

        if (create)
                fd = mkdir_p_in_root(root_fd, JOURNAL_DIR, 0755);
        else
                fd = open_directory_at(root_fd, JOURNAL_DIR, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
        if (fd < 0)
                return fd;
        *ret_fd = fd;
        return 0;
}

int journal_copy(const Journal *from, Journal *ret) {
        _cleanup_journal_ Journal j = {
                .generation = from->generation,
                .config_stamp = from->config_stamp,
                .mount_ns = from->mount_ns,
                .incomplete = from->incomplete,
                .forced = from->forced,
                .when = from->when,
                .pending = from->pending,
                .pending_generation = from->pending_generation,
                .delayed_since = from->delayed_since,
                .delay_deadline = from->delay_deadline,
                .confirm_generation = from->confirm_generation,
                .confirm_since = from->confirm_since,
                .confirm_deadline = from->confirm_deadline,
                .confirm_target = from->confirm_target,
                .rollback_when = from->rollback_when,
                .rollback_from = from->rollback_from,
                .rollback_to = from->rollback_to,
        };
        int r;

        for (int k = 0; k < _IMAGE_CLASS_MAX; k++)
                j.mutable[k] = from->mutable[k];
        for (size_t i = 0; i < from->n_hierarchies; i++) {
                r = journal_set_tree(&j, from->hierarchies[i].hierarchy, from->hierarchies[i].tree);
                if (r < 0)
                        return r;
        }
        if (from->images.n > 0) {
                j.images.images = calloc(from->images.n, sizeof(Image));
                if (!j.images.images)
                        return -ENOMEM;
                for (size_t i = 0; i < from->images.n; i++) {
                        r = image_copy(&from->images.images[i], &j.images.images[i]);
                        if (r < 0)
                                return r;
                        j.images.n++;
                }
        }
        for (size_t i = 0; i < from->n_transitions; i++) {
                r = journal_add_transition(&j, from->transitions[i].hierarchy, from->transitions[i].old_tree,
                                           from->transitions[i].new_tree);
                if (r < 0)
                        return r;
        }
        r = pin_list_copy(&from->pins, &j.pins);
        if (r < 0)
                return r;
        if (from->rollback_reason) {
                r = journal_set_rollback(&j, from->rollback_when, from->rollback_from, from->rollback_to, from->rollback_reason,
                                         from->rollback_error);
                if (r < 0)
                        return r;
        }
        *ret = j;
        j = (Journal) {};
        return 0;
}

void journal_cache_done(JournalCache *c) {
        journal_done(&c->journal);
        *c = (JournalCache) {};
}

/* What the cache is known by: state.json's bytes (a change in place within the clock's tick
 * would keep the file's times). */
static uint64_t state_stamp(const char *text) {
        uint64_t stamp = STAMP_INIT;

        stamp_add_string(&stamp, text);
        return stamp;
}

int journal_load_cached(int dir_fd, JournalCache *cache, Journal *ret, unsigned *ret_n_corrupt_trees) {
        _cleanup_journal_ Journal j = {};
        _cleanup_free_ char *text = NULL;
        size_t size = 0;
        uint64_t stamp = 0;
        bool parsed = false;
        int r, moved = 0;

        r = read_file_at(dir_fd, JOURNAL_STATE, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS, JOURNAL_FILE_MAX, &text, &size, NULL);
        if (r >= 0 && cache)
                stamp = state_stamp(text);
        if (r >= 0 && cache && cache->valid && cache->size == size && cache->stamp == stamp)
                r = journal_copy(&cache->journal, &j);
        else if (r >= 0) {
                r = journal_from_json(text, &j);
                parsed = r >= 0;
        }
        if (r == -ENOMEM)
                return r;
        if (r < 0 && r != -ENOENT) {
                /* A journal that cannot be used must not lock everyone out: keep it for
                 * inspection and start afresh.  The tree records still prove what is ours. */
                if (renameat(dir_fd, JOURNAL_STATE, dir_fd, JOURNAL_STATE ".corrupt") < 0)
                        return negative_errno();
                journal_done(&j);
                moved = 1;
        }
        /* Kept for the next load, unless it carries an earlier version's history (the next
         * save moves that). */
        if (cache && parsed) {
                Journal copy = {};

                journal_cache_done(cache);
                if (!j.generations_dirty && journal_copy(&j, &copy) >= 0)
                        *cache = (JournalCache) { .valid = true, .size = size, .stamp = stamp, .journal = copy };
        } else if (cache && r < 0)
                journal_cache_done(cache);
        r = tree_list_load(dir_fd, &j.trees, ret_n_corrupt_trees);
        if (r < 0)
                return r;
        *ret = j;
        j = (Journal) {};
        return moved;
}

void journal_cache_prefetch(int root_fd, JournalCache *cache) {
        _cleanup_close_ int dir_fd = -EBADF;
        _cleanup_free_ char *text = NULL;
        Journal j = {};
        size_t size = 0;

        journal_cache_done(cache);
        if (journal_dir_open(root_fd, false, &dir_fd) < 0 ||
            read_file_at(dir_fd, JOURNAL_STATE, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS, JOURNAL_FILE_MAX, &text, &size, NULL) < 0)
                return;
        if (journal_from_json(text, &j) < 0)
                return;
        /* As journal_load_cached() keeps it: not one that carries an earlier version's history. */
        if (j.generations_dirty) {
                journal_done(&j);
                return;
        }
        *cache = (JournalCache) { .valid = true, .size = size, .stamp = state_stamp(text), .journal = j };
}

int journal_load(int dir_fd, Journal *ret, unsigned *ret_n_corrupt_trees) {
        return journal_load_cached(dir_fd, NULL, ret, ret_n_corrupt_trees);
}

/* generations/: N.json for generation N (canonical digits, no leading zero). */
static bool generation_file_name(const char *name, uint64_t *ret) {
        uint64_t n = 0;
        const char *c = name;

        if (*c < '1' || *c > '9')
                return false;
        for (; *c >= '0' && *c <= '9'; c++) {
                if (n > (UINT64_MAX - 9) / 10)
                        return false;
                n = n * 10 + (uint64_t) (*c - '0');
        }
        if (!streq(c, ".json"))
                return false;
        *ret = n;
        return true;
}

/* generations/, made when asked.  Anything else at that name (a file, a symbolic link) is no
 * history: with create it is moved to generations.corrupt (ret_moved counts it) and the
 * directory made. */
static int generations_dir_open(int dir_fd, bool create, int *ret_fd, int *ret_moved) {
        int fd;

        if (create && mkdirat(dir_fd, JOURNAL_GENERATIONS, 0755) < 0 && errno != EEXIST)
                return negative_errno();
        fd = open_directory_at(dir_fd, JOURNAL_GENERATIONS, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS);
        if (create && IN_SET(fd, -ENOTDIR, -ELOOP)) {
                struct stat st;

                /* A leftover generations.corrupt that is no directory makes room. */
                if (fstatat(dir_fd, JOURNAL_GENERATIONS ".corrupt", &st, AT_SYMLINK_NOFOLLOW) >= 0 && !S_ISDIR(st.st_mode))
                        (void) unlinkat(dir_fd, JOURNAL_GENERATIONS ".corrupt", 0);
                if (renameat(dir_fd, JOURNAL_GENERATIONS, dir_fd, JOURNAL_GENERATIONS ".corrupt") < 0 &&
                    unlinkat(dir_fd, JOURNAL_GENERATIONS, 0) < 0)
                        return negative_errno();
                if (ret_moved)
                        (*ret_moved)++;
                if (mkdirat(dir_fd, JOURNAL_GENERATIONS, 0755) < 0 && errno != EEXIST)
                        return negative_errno();
                fd = open_directory_at(dir_fd, JOURNAL_GENERATIONS, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS);
        }
        if (fd < 0)
                return fd;
        *ret_fd = fd;
        return 0;
}

static int cmp_u64(const void *a, const void *b) {
        uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;

        return x < y ? -1 : x > y;
}

/* The generations with a file in fd, ascending.  With up_to, files of newer ones (a state.json
 * started afresh) are left out, and removed when asked; and so are leftovers of an
 * interrupted write ("N.json.tmpPID"). */
static int generations_list(int fd, uint64_t up_to, bool remove_stale, uint64_t **ret, size_t *ret_n) {
        _cleanup_free_ uint64_t *l = NULL;
        size_t n = 0, allocated = 0;
        struct dirent *de;
        _cleanup_closedir_ DIR *d = NULL;
        int dfd, r = 0;

        dfd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        if (dfd < 0)
                return negative_errno();
        d = fdopendir(dfd);
        if (!d) {
                safe_close(dfd);
                return negative_errno();
        }
        for (;;) {
                uint64_t g;

                errno = 0;
                de = readdir(d);
                if (!de) {
                        r = errno ? negative_errno() : 0;
                        break;
                }
                if (!generation_file_name(de->d_name, &g)) {
                        if (remove_stale && strstr(de->d_name, ".json.tmp"))
                                (void) unlinkat(fd, de->d_name, 0);
                        continue;
                }
                if (g > up_to) {
                        if (remove_stale)
                                (void) unlinkat(fd, de->d_name, 0);
                        continue;
                }
                if (n == allocated) {
                        uint64_t *m = reallocarray(l, allocated * 2 + 16, sizeof(uint64_t));
                        if (!m) {
                                r = -ENOMEM;
                                break;
                        }
                        l = m;
                        allocated = allocated * 2 + 16;
                }
                l[n++] = g;
        }
        if (r < 0)
                return r;
        if (n > 0)
                qsort(l, n, sizeof(uint64_t), cmp_u64);
        *ret = TAKE_PTR(l);
        *ret_n = n;
        return 0;
}

static int generation_write(int fd, const Generation *g) {
        _cleanup_json_ json_object *e = generation_to_json(g);
        char name[32];
        const char *s;

        s = e ? json_object_to_json_string_ext(e, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE) : NULL;
        if (!s)
                return -ENOMEM;
        snprintf(name, sizeof(name), "%" PRIu64 ".json", g->generation);
        return write_file_atomic_at(fd, name, s, 0644);
}

/* The history of an earlier version into generations/: the one that came with state.json
 * (j->generations_dirty) and generations.json.  Returns how many files were moved aside. */
static int generations_migrate(int dir_fd, Journal *j) {
        _cleanup_free_ char *text = NULL;
        _cleanup_close_ int fd = -EBADF;
        _cleanup_journal_ Journal legacy = { .generation = j->generation };
        int r, moved = 0;

        r = read_file_at(dir_fd, JOURNAL_GENERATIONS_LEGACY, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS, JOURNAL_FILE_MAX, &text,
                         NULL, NULL);
        if (r >= 0)
                r = journal_generations_from_json(text, &legacy);
        if (r < 0 && r != -ENOENT) {
                /* What the file is or holds, not a passing failure to read it (EMFILE, EIO,
                 * ...): only then is it moved aside, kept for inspection. */
                if (!IN_SET(r, -EBADMSG, -EFBIG, -EBADFD, -ELOOP, -EISDIR, -ENXIO))
                        return r;
                if (renameat(dir_fd, JOURNAL_GENERATIONS_LEGACY, dir_fd, JOURNAL_GENERATIONS_LEGACY ".corrupt") < 0 &&
                    errno != ENOENT)
                        return negative_errno();
                moved++;
        }
        if (legacy.n_generations == 0 && !j->generations_dirty) {
                if (r >= 0 && unlinkat(dir_fd, JOURNAL_GENERATIONS_LEGACY, 0) < 0 && errno != ENOENT)
                        return negative_errno();
                return moved;
        }
        r = generations_dir_open(dir_fd, true, &fd, &moved);
        for (size_t i = 0; r >= 0 && i < legacy.n_generations; i++)
                r = generation_write(fd, &legacy.generations[i]);
        for (size_t i = 0; r >= 0 && j->generations_dirty && i < j->n_generations; i++)
                r = generation_write(fd, &j->generations[i]);
        if (r < 0)
                return r;
        j->generations_dirty = false;
        if (legacy.n_generations > 0 && unlinkat(dir_fd, JOURNAL_GENERATIONS_LEGACY, 0) < 0 && errno != ENOENT)
                return negative_errno();
        return moved;
}

static bool generations_migration_due(int dir_fd, const Journal *j) {
        struct stat st;

        return j->generations_dirty || fstatat(dir_fd, JOURNAL_GENERATIONS_LEGACY, &st, AT_SYMLINK_NOFOLLOW) >= 0 ||
               errno != ENOENT;
}

/* The history of an earlier version, read only: generations.json's entries, then those that
 * came with state.json (j->generations when dirty).  Returns how many files failed. */
static int generations_legacy_read(int dir_fd, const Journal *j, Generation **list, size_t *n) {
        _cleanup_free_ char *text = NULL;
        _cleanup_journal_ Journal legacy = { .generation = j->generation };
        int r, bad = 0;

        r = read_file_at(dir_fd, JOURNAL_GENERATIONS_LEGACY, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS, JOURNAL_FILE_MAX, &text,
                         NULL, NULL);
        if (r >= 0)
                r = journal_generations_from_json(text, &legacy);
        if (r < 0 && r != -ENOENT) {
                if (!IN_SET(r, -EBADMSG, -EFBIG, -EBADFD, -ELOOP, -EISDIR, -ENXIO))
                        return r;
                bad++;
        }
        for (size_t i = 0; i < legacy.n_generations; i++) {
                r = generations_push(list, n, &legacy.generations[i], JOURNAL_GENERATIONS_MAX);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; j->generations_dirty && i < j->n_generations; i++) {
                Generation g = {};

                r = generation_from_images(j->generations[i].generation, j->generations[i].when, j->generations[i].mutable,
                                           j->generations[i].forced, &j->generations[i].images, &g);
                if (r >= 0)
                        r = generations_push(list, n, &g, JOURNAL_GENERATIONS_MAX);
                generation_done(&g);
                if (r < 0)
                        return r;
        }
        return bad;
}

static int cmp_generation(const void *a, const void *b) {
        const Generation *x = a, *y = b;

        return x->generation < y->generation ? -1 : x->generation > y->generation;
}

int journal_load_generations(int dir_fd, Journal *j, bool writable) {
        _cleanup_free_ uint64_t *list = NULL;
        _cleanup_close_ int fd = -EBADF;
        Generation *l = NULL;
        size_t n = 0, count = 0;
        int r, bad = 0;

        if (j->generations_loaded && !j->generations_dirty)
                return 0;
        if (writable && generations_migration_due(dir_fd, j)) {
                bad = generations_migrate(dir_fd, j);
                if (bad < 0)
                        return bad;
        } else if (!writable) {
                /* Nothing is written here (no lock is held): the history of an earlier version
                 * is read where it is, and moved by the next transition. */
                bad = generations_legacy_read(dir_fd, j, &l, &n);
                if (bad < 0) {
                        generations_free(l, n);
                        return bad;
                }
        }
        r = generations_dir_open(dir_fd, writable, &fd, &bad);
        if (r == -ENOENT)
                goto done;
        if (!writable && IN_SET(r, -ENOTDIR, -ELOOP)) {
                bad++; /* not a directory: moved aside by the next transition */
                goto done;
        }
        if (r >= 0)
                r = generations_list(fd, j->generation, false, &list, &count);
        if (r < 0)
                goto fail;
        /* The newest JOURNAL_GENERATIONS_MAX at most: a lowered Generations= prunes the rest at
         * the next record. */
        for (size_t i = count > JOURNAL_GENERATIONS_MAX ? count - JOURNAL_GENERATIONS_MAX : 0; i < count; i++) {
                _cleanup_free_ char *text = NULL;
                _cleanup_json_ json_object *root = NULL;
                char name[32], aside[48];
                Generation g = {};

                snprintf(name, sizeof(name), "%" PRIu64 ".json", list[i]);
                r = read_file_at(fd, name, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS, JOURNAL_FILE_MAX, &text, NULL, NULL);
                if (r == -ENOENT)
                        continue; /* removed by a record meanwhile */
                if (r >= 0) {
                        root = json_parse_object(text);
                        r = root ? generation_from_json(root, &g) : -EBADMSG;
                        if (r >= 0 && g.generation != list[i]) {
                                generation_done(&g);
                                r = -EBADMSG;
                        }
                }
                if (r >= 0) {
                        /* The same generation from an earlier version's history: this one. */
                        for (size_t k = 0; k < n; k++)
                                if (l[k].generation == g.generation) {
                                        generation_done(&l[k]);
                                        l[k] = g;
                                        g = (Generation) {};
                                        break;
                                }
                        r = g.generation == 0 ? 0 : generations_push(&l, &n, &g, JOURNAL_GENERATIONS_MAX);
                        generation_done(&g);
                        if (r < 0)
                                goto fail;
                        continue;
                }
                /* As state.json's: what the file is or holds counts, and a transition moves it
                 * aside (kept for inspection); a passing failure to read it fails the whole. */
                if (!IN_SET(r, -EBADMSG, -EFBIG, -EBADFD, -ELOOP, -EISDIR, -ENXIO))
                        goto fail;
                bad++;
                snprintf(aside, sizeof(aside), "%s.corrupt", name);
                if (writable && renameat(fd, name, fd, aside) < 0 && errno != ENOENT)
                        (void) unlinkat(fd, name, 0); /* e.g. a directory at the .corrupt name */
        }
done:
        if (n > 1)
                qsort(l, n, sizeof(Generation), cmp_generation);
        while (n > JOURNAL_GENERATIONS_MAX) {
                generation_done(&l[0]);
                memmove(&l[0], &l[1], sizeof(Generation) * (n - 1));
                n--;
        }
        generations_free(j->generations, j->n_generations);
        j->generations = l;
        j->n_generations = n;
        j->generations_loaded = true;
        return bad;
fail:
        generations_free(l, n);
        return r;
}

/* generations/N.json for j's generation: a hard link of the file from in dir_fd (state.json,
 * or the new state.json not yet renamed over it), made under a temporary name and renamed. */
static int generation_link(int dir_fd, const char *from, Journal *j, int *ret_gfd) {
        _cleanup_close_ int fd = -EBADF;
        char name[32], tmp[64];
        int r;

        if (j->generation == 0)
                return -EINVAL;
        if (generations_migration_due(dir_fd, j)) {
                r = generations_migrate(dir_fd, j);
                if (r < 0)
                        return r;
        }
        r = generations_dir_open(dir_fd, true, &fd, NULL);
        if (r < 0)
                return r;
        snprintf(name, sizeof(name), "%" PRIu64 ".json", j->generation);
        snprintf(tmp, sizeof(tmp), "%s.tmp%d", name, (int) getpid());
        (void) unlinkat(fd, tmp, 0);
        if (linkat(dir_fd, from, fd, tmp, 0) < 0)
                return negative_errno();
        if (renameat(fd, tmp, fd, name) < 0) {
                r = negative_errno();
                (void) unlinkat(fd, tmp, 0);
                return r;
        }
        /* What is in memory is not the history any more. */
        j->generations_loaded = false;
        *ret_gfd = TAKE_FD(fd);
        return 0;
}

/* The newest keep (>= 1) records at most, none newer than j's generation, no leftovers. */
static int generations_prune(int gfd, const Journal *j, unsigned keep) {
        _cleanup_free_ uint64_t *list = NULL;
        size_t count = 0;
        char name[32];
        int r;

        r = generations_list(gfd, j->generation, true, &list, &count);
        if (r < 0)
                return r;
        for (size_t i = 0; i + keep < count; i++) {
                snprintf(name, sizeof(name), "%" PRIu64 ".json", list[i]);
                (void) unlinkat(gfd, name, 0);
        }
        return 0;
}

typedef struct RecordContext {
        Journal *j;
        unsigned keep;
        int gfd, r;
} RecordContext;

/* write_file_atomic_hook_at()'s hook: the new state.json, written and synced, is linked as
 * the record before it is renamed into place. */
static void record_before_rename(int dir_fd, const char *tmp, void *userdata) {
        RecordContext *c = userdata;

        c->r = generation_link(dir_fd, tmp, c->j, &c->gfd);
}

int journal_save_recording(int dir_fd, Journal *j, unsigned keep, int *ret_record_error) {
        _cleanup_free_ char *text = NULL;
        RecordContext c = { .j = j, .keep = keep, .gfd = -EBADF };
        int r;

        if (j->generations_dirty) {
                r = generations_migrate(dir_fd, j);
                if (r < 0)
                        return r;
        }
        r = journal_to_json(j, &text);
        if (r < 0)
                return r;
        /* Whatever moment a crash comes, the record is there once state.json says the
         * generation (and one newer than state.json's is ignored). */
        r = write_file_atomic_hook_at(dir_fd, JOURNAL_STATE, text, 0644, keep > 0 ? record_before_rename : NULL, &c);
        if (r >= 0 && keep > 0 && c.r >= 0)
                c.r = generations_prune(c.gfd, j, keep);
        safe_close(c.gfd);
        if (ret_record_error)
                *ret_record_error = c.r < 0 ? c.r : 0;
        return r;
}

int journal_save(int dir_fd, Journal *j) {
        return journal_save_recording(dir_fd, j, 0, NULL);
}
