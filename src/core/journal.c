/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <linux/openat2.h>
#include <string.h>
#include <sys/stat.h>

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

int journal_record_generation(Journal *j, uint64_t generation, uint64_t when, const int mutable[static _IMAGE_CLASS_MAX],
                              bool forced, const ImageList *images, unsigned keep) {
        Generation g = {};
        int r;

        if (!j->generations_loaded)
                return -ESTALE;
        r = generation_from_images(generation, when, mutable, forced, images, &g);
        if (r < 0)
                return r;
        r = generations_push(&j->generations, &j->n_generations, &g, keep);
        generation_done(&g);
        if (r >= 0)
                j->generations_dirty = true;
        return r;
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

static int generation_from_json(json_object *e, Generation *ret) {
        Generation g = {};
        json_object *m, *a;
        int r;

        if (!json_object_is_type(e, json_type_object) || json_get_u64(e, "generation", &g.generation) < 0 ||
            json_get_u64(e, "when", &g.when) < 0 || json_get_bool(e, "forced", &g.forced) < 0)
                return -EBADMSG;
        m = json_get_object(e, "mutable");
        if (!m)
                return -EBADMSG;
        for (int k = 0; k < _IMAGE_CLASS_MAX; k++) {
                _cleanup_free_ char *v = NULL;

                if (json_get_string(m, image_class_to_string(k), 64, &v) < 0)
                        return -EBADMSG;
                g.mutable[k] = mutable_mode_from_string(v);
                if (g.mutable[k] < 0)
                        return -EBADMSG;
        }
        a = json_get_array(e, "images");
        if (!a)
                return -EBADMSG;
        r = image_list_from_json(a, IMAGE_JSON_JOURNAL, &g.images);
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
        json_object *e = json_object_new_object(), *m = json_object_new_object();

        json_object_object_add(e, "generation", json_object_new_uint64(g->generation));
        json_object_object_add(e, "when", json_object_new_uint64(g->when));
        json_object_object_add(e, "forced", json_object_new_boolean(g->forced));
        for (int k = 0; k < _IMAGE_CLASS_MAX; k++)
                json_object_object_add(m, image_class_to_string(k), json_object_new_string(mutable_mode_to_string(g->mutable[k])));
        json_object_object_add(e, "mutable", m);
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
 * written before generations.json keeps it. */
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

static void history_to_json(const Journal *j, json_object *root) {
        json_object *a = json_object_new_array();

        for (size_t i = 0; i < j->pins.n; i++) {
                const Pin *p = &j->pins.pins[i];
                json_object *e = json_object_new_object();

                json_object_object_add(e, "class", json_object_new_string(image_class_to_string(p->klass)));
                json_object_object_add(e, "name", json_object_new_string(p->name));
                json_object_object_add(e, "version", json_new_string_or_null(p->version));
                json_object_object_add(e, "from_version", json_new_string_or_null(p->from_version));
                json_object_object_add(e, "generation", json_object_new_uint64(p->generation));
                json_object_array_add(a, e);
        }
        json_object_object_add(root, "pins", a);

        if (j->confirm_generation > 0) {
                json_object *o = json_object_new_object();

                json_object_object_add(o, "generation", json_object_new_uint64(j->confirm_generation));
                json_object_object_add(o, "since", json_object_new_uint64(j->confirm_since));
                json_object_object_add(o, "deadline", json_object_new_uint64(j->confirm_deadline));
                json_object_object_add(o, "target", json_object_new_uint64(j->confirm_target));
                json_object_object_add(root, "confirm", o);
        }
        if (j->rollback_reason) {
                json_object *o = json_object_new_object();

                json_object_object_add(o, "when", json_object_new_uint64(j->rollback_when));
                json_object_object_add(o, "from", json_object_new_uint64(j->rollback_from));
                json_object_object_add(o, "to", json_object_new_uint64(j->rollback_to));
                json_object_object_add(o, "reason", json_object_new_string(j->rollback_reason));
                json_object_object_add(o, "error", json_new_string_or_null(j->rollback_error));
                json_object_object_add(root, "last_rollback", o);
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

int journal_to_json(const Journal *j, char **ret) {
        _cleanup_json_ json_object *root = json_object_new_object();
        json_object *a;
        const char *s;

        if (!root)
                return -ENOMEM;
        json_object_object_add(root, "version", json_object_new_uint64(JOURNAL_VERSION));
        json_object_object_add(root, "generation", json_object_new_uint64(j->generation));
        json_object_object_add(root, "config_stamp", json_object_new_uint64(j->config_stamp));
        json_object_object_add(root, "mount_namespace", json_object_new_uint64(j->mount_ns));
        json_object_object_add(root, "incomplete", json_object_new_boolean(j->incomplete));
        json_object_object_add(root, "forced", json_object_new_boolean(j->forced));

        a = json_object_new_array();
        json_object_object_add(root, "hierarchies", a);
        for (size_t i = 0; i < j->n_hierarchies; i++) {
                json_object *e = json_object_new_object();
                json_object_object_add(e, "hierarchy", json_object_new_string(j->hierarchies[i].hierarchy));
                json_object_object_add(e, "tree", json_new_string_or_null(j->hierarchies[i].tree));
                json_object_array_add(a, e);
        }
        json_object_object_add(root, "images", image_list_to_json(&j->images, IMAGE_JSON_JOURNAL));
        history_to_json(j, root);

        if (j->pending) {
                json_object *p = json_object_new_object();

                json_object_object_add(p, "generation", json_object_new_uint64(j->pending_generation));
                if (j->delay_deadline > 0) {
                        json_object_object_add(p, "delayed_since", json_object_new_uint64(j->delayed_since));
                        json_object_object_add(p, "delay_deadline", json_object_new_uint64(j->delay_deadline));
                }
                a = json_object_new_array();
                for (size_t i = 0; i < j->n_transitions; i++) {
                        json_object *e = json_object_new_object();
                        json_object_object_add(e, "hierarchy", json_object_new_string(j->transitions[i].hierarchy));
                        json_object_object_add(e, "old_tree", json_new_string_or_null(j->transitions[i].old_tree));
                        json_object_object_add(e, "new_tree", json_new_string_or_null(j->transitions[i].new_tree));
                        json_object_array_add(a, e);
                }
                json_object_object_add(p, "transitions", a);
                json_object_object_add(root, "pending", p);
        }

        s = json_object_to_json_string_ext(root, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE);
        *ret = s ? strdup(s) : NULL;
        return *ret ? 0 : -ENOMEM;
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

int journal_load(int dir_fd, Journal *ret, unsigned *ret_n_corrupt_trees) {
        _cleanup_journal_ Journal j = {};
        _cleanup_free_ char *text = NULL;
        mode_t mode = 0;
        int r, moved = 0;

        r = read_file_at(dir_fd, JOURNAL_STATE, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS, JOURNAL_FILE_MAX, &text, NULL, &mode);
        if (r >= 0) {
                r = journal_from_json(text, &j);
                if (r == -ENOMEM)
                        return r;
        }
        if (r < 0 && r != -ENOENT) {
                /* A journal that cannot be used must not lock everyone out: keep it for
                 * inspection and start afresh.  The tree records still prove what is ours. */
                if (renameat(dir_fd, JOURNAL_STATE, dir_fd, JOURNAL_STATE ".corrupt") < 0)
                        return negative_errno();
                journal_done(&j);
                moved = 1;
        }
        r = tree_list_load(dir_fd, &j.trees, ret_n_corrupt_trees);
        if (r < 0)
                return r;
        *ret = j;
        j = (Journal) {};
        return moved;
}

int journal_load_generations(int dir_fd, Journal *j) {
        _cleanup_free_ char *text = NULL;
        int r;

        if (j->generations_loaded)
                return 0;
        r = read_file_at(dir_fd, JOURNAL_GENERATIONS, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS, JOURNAL_FILE_MAX, &text, NULL, NULL);
        if (r >= 0)
                r = journal_generations_from_json(text, j);
        if (r == -ENOENT || r >= 0) {
                j->generations_loaded = true;
                return 0;
        }
        /* What the file is or holds, not a passing failure to read it (EMFILE, EIO, ...): only
         * then is it moved aside.  As with state.json: kept for inspection, and the history
         * starts afresh. */
        if (!IN_SET(r, -EBADMSG, -EFBIG, -EBADFD, -ELOOP, -EISDIR, -ENXIO))
                return r;
        if (renameat(dir_fd, JOURNAL_GENERATIONS, dir_fd, JOURNAL_GENERATIONS ".corrupt") < 0)
                return negative_errno();
        j->generations_loaded = true;
        return 1;
}

int journal_save(int dir_fd, Journal *j) {
        _cleanup_free_ char *text = NULL;
        int r;

        if (j->generations_dirty) {
                r = journal_generations_to_json(j, &text);
                if (r >= 0)
                        r = write_file_atomic_at(dir_fd, JOURNAL_GENERATIONS, text, 0644);
                if (r < 0)
                        return r;
                j->generations_dirty = false;
                free(text);
                text = NULL;
        }
        r = journal_to_json(j, &text);
        if (r < 0)
                return r;
        return write_file_atomic_at(dir_fd, JOURNAL_STATE, text, 0644);
}
