/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <json-c/json.h>
#include <string.h>
#include <sys/stat.h>

#include "journal.h"
#include "util.h"

static void json_putp(json_object **o) {
        json_object_put(*o);
}
#define _cleanup_json_ _cleanup_(json_putp)

void journal_images_clear(Journal *j) {
        for (size_t i = 0; i < j->n_images; i++) {
                JournalImage *m = &j->images[i];
                free(m->name), free(m->path), free(m->kind), free(m->verdict), free(m->reason), free(m->verity);
        }
        free(j->images);
        j->images = NULL;
        j->n_images = 0;
}

void journal_pending_clear(Journal *j) {
        for (size_t i = 0; i < j->n_transitions; i++) {
                free(j->transitions[i].hierarchy);
                free(j->transitions[i].old_id);
                free(j->transitions[i].new_id);
                strv_free(j->transitions[i].old_extensions);
        }
        free(j->transitions);
        j->transitions = NULL;
        j->n_transitions = 0;
        j->pending = false;
        j->pending_generation = 0;
}

void journal_done(Journal *j) {
        for (size_t i = 0; i < j->n_hierarchies; i++) {
                free(j->hierarchies[i].hierarchy);
                free(j->hierarchies[i].id);
                strv_free(j->hierarchies[i].extensions);
        }
        free(j->hierarchies);
        journal_images_clear(j);
        journal_pending_clear(j);
        *j = (Journal) {};
}

JournalHierarchy *journal_find_hierarchy(Journal *j, const char *hierarchy) {
        for (size_t i = 0; i < j->n_hierarchies; i++)
                if (streq(j->hierarchies[i].hierarchy, hierarchy))
                        return &j->hierarchies[i];
        return NULL;
}

int journal_get_hierarchy(Journal *j, const char *hierarchy, JournalHierarchy **ret) {
        JournalHierarchy *h = journal_find_hierarchy(j, hierarchy), *n;

        if (h) {
                *ret = h;
                return 0;
        }
        n = realloc(j->hierarchies, sizeof(JournalHierarchy) * (j->n_hierarchies + 1));
        if (!n)
                return -ENOMEM;
        j->hierarchies = n;
        h = &n[j->n_hierarchies];
        *h = (JournalHierarchy) { .hierarchy = strdup(hierarchy) };
        if (!h->hierarchy)
                return -ENOMEM;
        j->n_hierarchies++;
        *ret = h;
        return 0;
}

static char *dup_string(json_object *o, const char *key) {
        json_object *v;
        if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_string))
                return NULL;
        return strdup(json_object_get_string(v));
}

static uint64_t get_u64(json_object *o, const char *key) {
        json_object *v;
        if (!json_object_object_get_ex(o, key, &v))
                return 0;
        return (uint64_t) json_object_get_uint64(v);
}

static bool get_bool(json_object *o, const char *key) {
        json_object *v;
        return json_object_object_get_ex(o, key, &v) && json_object_get_boolean(v);
}

static int get_strv(json_object *o, const char *key, char ***ret) {
        _cleanup_strv_free_ char **l = NULL;
        json_object *x;

        *ret = NULL;
        if (!json_object_object_get_ex(o, key, &x) || !json_object_is_type(x, json_type_array))
                return 0;
        l = calloc(1, sizeof(char *));
        if (!l)
                return -ENOMEM;
        for (size_t k = 0; k < json_object_array_length(x); k++) {
                int r = strv_extend(&l, json_object_get_string(json_object_array_get_idx(x, k)));
                if (r < 0)
                        return r;
        }
        *ret = TAKE_PTR(l);
        return 0;
}

static json_object *strv_to_json(char *const *l) {
        json_object *a;

        if (!l)
                return NULL;
        a = json_object_new_array();
        STRV_FOREACH(n, l)
                json_object_array_add(a, json_object_new_string(*n));
        return a;
}

int journal_from_json(const char *text, Journal *ret) {
        _cleanup_json_ json_object *root = NULL;
        _cleanup_journal_ Journal j = {};
        json_object *a, *p;
        int r;

        root = json_tokener_parse(text);
        if (!root || !json_object_is_type(root, json_type_object))
                return -EBADMSG;

        j.generation = get_u64(root, "generation");
        j.config_stamp = get_u64(root, "config_stamp");

        if (json_object_object_get_ex(root, "hierarchies", &a) && json_object_is_type(a, json_type_array))
                for (size_t i = 0; i < json_object_array_length(a); i++) {
                        json_object *e = json_object_array_get_idx(a, i);
                        _cleanup_free_ char *name = dup_string(e, "hierarchy");
                        JournalHierarchy *h;

                        if (!name)
                                return -EBADMSG;
                        r = journal_get_hierarchy(&j, name, &h);
                        if (r < 0)
                                return r;
                        h->merged = get_bool(e, "merged");
                        h->id = dup_string(e, "id");
                        h->since = get_u64(e, "since");
                        r = get_strv(e, "extensions", &h->extensions);
                        if (r < 0)
                                return r;
                }

        if (json_object_object_get_ex(root, "images", &a) && json_object_is_type(a, json_type_array)) {
                size_t n = json_object_array_length(a);
                j.images = calloc(n ?: 1, sizeof(JournalImage));
                if (!j.images)
                        return -ENOMEM;
                for (size_t i = 0; i < n; i++) {
                        json_object *e = json_object_array_get_idx(a, i);
                        JournalImage *m = &j.images[j.n_images++];
                        m->name = dup_string(e, "name");
                        m->path = dup_string(e, "path");
                        m->kind = dup_string(e, "kind");
                        m->verdict = dup_string(e, "verdict");
                        m->reason = dup_string(e, "reason");
                        m->verity = dup_string(e, "verity");
                        m->signed_valid = get_bool(e, "signed");
                        m->dev = get_u64(e, "dev");
                        m->ino = get_u64(e, "ino");
                        m->size = get_u64(e, "size");
                        m->mtime_nsec = get_u64(e, "mtime_nsec");
                        m->stamp = get_u64(e, "stamp");
                        if (!m->name || !m->path)
                                return -EBADMSG;
                }
        }

        if (json_object_object_get_ex(root, "pending", &p) && json_object_is_type(p, json_type_object)) {
                j.pending = true;
                j.pending_generation = get_u64(p, "generation");
                if (json_object_object_get_ex(p, "transitions", &a) && json_object_is_type(a, json_type_array)) {
                        size_t n = json_object_array_length(a);
                        j.transitions = calloc(n ?: 1, sizeof(JournalTransition));
                        if (!j.transitions)
                                return -ENOMEM;
                        for (size_t i = 0; i < n; i++) {
                                json_object *e = json_object_array_get_idx(a, i);
                                JournalTransition *t = &j.transitions[j.n_transitions++];
                                t->hierarchy = dup_string(e, "hierarchy");
                                t->old_id = dup_string(e, "old_id");
                                t->new_id = dup_string(e, "new_id");
                                t->old_since = get_u64(e, "old_since");
                                r = get_strv(e, "old_extensions", &t->old_extensions);
                                if (r < 0)
                                        return r;
                                if (!t->hierarchy)
                                        return -EBADMSG;
                        }
                }
        }

        *ret = j;
        j = (Journal) {};
        return 0;
}

static json_object *string_or_null(const char *s) {
        return s ? json_object_new_string(s) : NULL;
}

int journal_to_json(const Journal *j, char **ret) {
        _cleanup_json_ json_object *root = json_object_new_object();
        json_object *a;
        char *s;

        if (!root)
                return -ENOMEM;
        json_object_object_add(root, "generation", json_object_new_uint64(j->generation));
        json_object_object_add(root, "config_stamp", json_object_new_uint64(j->config_stamp));

        a = json_object_new_array();
        json_object_object_add(root, "hierarchies", a);
        for (size_t i = 0; i < j->n_hierarchies; i++) {
                const JournalHierarchy *h = &j->hierarchies[i];
                json_object *e = json_object_new_object();

                json_object_object_add(e, "hierarchy", json_object_new_string(h->hierarchy));
                json_object_object_add(e, "merged", json_object_new_boolean(h->merged));
                json_object_object_add(e, "id", string_or_null(h->id));
                json_object_object_add(e, "since", json_object_new_uint64(h->since));
                json_object_object_add(e, "extensions", strv_to_json(h->extensions));
                json_object_array_add(a, e);
        }

        a = json_object_new_array();
        json_object_object_add(root, "images", a);
        for (size_t i = 0; i < j->n_images; i++) {
                const JournalImage *m = &j->images[i];
                json_object *e = json_object_new_object();

                json_object_object_add(e, "name", string_or_null(m->name));
                json_object_object_add(e, "path", string_or_null(m->path));
                json_object_object_add(e, "kind", string_or_null(m->kind));
                json_object_object_add(e, "verdict", string_or_null(m->verdict));
                json_object_object_add(e, "reason", string_or_null(m->reason));
                json_object_object_add(e, "verity", string_or_null(m->verity));
                json_object_object_add(e, "signed", json_object_new_boolean(m->signed_valid));
                json_object_object_add(e, "dev", json_object_new_uint64(m->dev));
                json_object_object_add(e, "ino", json_object_new_uint64(m->ino));
                json_object_object_add(e, "size", json_object_new_uint64(m->size));
                json_object_object_add(e, "mtime_nsec", json_object_new_uint64(m->mtime_nsec));
                json_object_object_add(e, "stamp", json_object_new_uint64(m->stamp));
                json_object_array_add(a, e);
        }

        if (j->pending) {
                json_object *p = json_object_new_object();
                json_object_object_add(p, "generation", json_object_new_uint64(j->pending_generation));
                a = json_object_new_array();
                for (size_t i = 0; i < j->n_transitions; i++) {
                        json_object *e = json_object_new_object();
                        json_object_object_add(e, "hierarchy", json_object_new_string(j->transitions[i].hierarchy));
                        json_object_object_add(e, "old_id", string_or_null(j->transitions[i].old_id));
                        json_object_object_add(e, "new_id", string_or_null(j->transitions[i].new_id));
                        json_object_object_add(e, "old_extensions", strv_to_json(j->transitions[i].old_extensions));
                        json_object_object_add(e, "old_since", json_object_new_uint64(j->transitions[i].old_since));
                        json_object_array_add(a, e);
                }
                json_object_object_add(p, "transitions", a);
                json_object_object_add(root, "pending", p);
        }

        s = strdup(json_object_to_json_string_ext(root, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE));
        if (!s)
                return -ENOMEM;
        *ret = s;
        return 0;
}

int journal_load(int root_fd, Journal *ret) {
        _cleanup_free_ char *text = NULL;
        int r;

        r = read_file_at(root_fd, JOURNAL_FILE, 16 * 1024 * 1024, &text, NULL);
        if (r == -ENOENT) {
                *ret = (Journal) {};
                return 0;
        }
        if (r < 0)
                return r;
        r = journal_from_json(text, ret);
        if (r == -EBADMSG) {
                /* A journal that cannot be read must not lock everyone out: keep it for
                 * inspection and start afresh.  The mount table still tells what is ours
                 * (markers), so nothing is lost but the history. */
                if (renameat(root_fd, JOURNAL_FILE, root_fd, JOURNAL_FILE ".corrupt") < 0)
                        return negative_errno();
                *ret = (Journal) {};
                return 1;
        }
        return r;
}

int journal_save(int root_fd, const Journal *j) {
        _cleanup_free_ char *text = NULL;
        _cleanup_close_ int dfd = -EBADF;
        int r;

        r = mkdir_p_at(root_fd, JOURNAL_DIR, 0755);
        if (r < 0)
                return r;
        r = journal_to_json(j, &text);
        if (r < 0)
                return r;
        dfd = openat(root_fd, JOURNAL_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return negative_errno();
        return write_file_atomic_at(dfd, "state.json", text, 0644);
}
