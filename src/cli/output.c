/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What 'list' and 'status' print.  Both go through one JSON form, built from the engine's
 * results in process or from the daemon's replies; the text tables are made from it.  Every
 * string is made safe for a terminal (valid UTF-8, control characters escaped) once, when the
 * JSON form is built.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "image-json.h"
#include "json-util.h"
#include "output.h"
#include "util.h"

/* Strings in public JSON are made safe once, here: the JSON and the tables show the same. */
static const char *get_str(json_object *o, const char *key);

static json_object *safe_string(const char *s) {
        _cleanup_free_ char *buf = NULL;
        return s ? json_object_new_string(string_safe(s, &buf)) : NULL;
}

static void make_strings_safe(json_object *o) {
        if (json_object_is_type(o, json_type_object)) {
                json_object_object_foreach(o, key, v) {
                        if (json_object_is_type(v, json_type_string))
                                json_object_object_add(o, key, safe_string(json_object_get_string(v)));
                        else
                                make_strings_safe(v);
                }
        } else if (json_object_is_type(o, json_type_array)) {
                for (size_t i = 0; i < json_object_array_length(o); i++) {
                        json_object *e = json_object_array_get_idx(o, i);
                        if (json_object_is_type(e, json_type_string))
                                json_object_array_put_idx(o, i, safe_string(json_object_get_string(e)));
                        else
                                make_strings_safe(e);
                }
        }
}

json_object *output_list_json(const ImageList *l) {
        json_object *a = image_list_to_json(l, IMAGE_JSON_PUBLIC);
        make_strings_safe(a);
        return a;
}

static char *since_string(uint64_t usec) {
        return usec > 0 ? format_timestamp(usec) : NULL;
}

json_object *output_status_json(const EngineStatus *s) {
        json_object *o = json_object_new_object(), *a = json_object_new_array(), *sk = json_object_new_array(),
                    *im = json_object_new_array();

        json_object_object_add(o, "mode", json_object_new_string(s->mode));
        json_object_object_add(o, "policy", json_object_new_string(s->policy));
        json_object_object_add(o, "generation", json_object_new_uint64(s->generation));
        json_object_object_add(o, "ownership_proof", json_object_new_string(s->proof));
        if (s->pending)
                json_object_object_add(o, "pending", json_object_new_boolean(true));
        if (s->incomplete)
                json_object_object_add(o, "incomplete", json_object_new_boolean(true));
        if (s->other_namespace)
                json_object_object_add(o, "other_mount_namespace", json_object_new_boolean(true));
        for (size_t i = 0; i < s->n_hierarchies; i++) {
                const HierarchyStatus *h = &s->hierarchies[i];
                json_object *e = json_object_new_object();
                _cleanup_free_ char *since = since_string(h->since);

                json_object_object_add(e, "hierarchy", json_object_new_string(h->path));
                json_object_object_add(e, "class", json_object_new_string(image_class_to_string(h->klass)));
                json_object_object_add(e, "merged", json_object_new_boolean(h->merged));
                if (h->writable)
                        json_object_object_add(e, "writable", json_object_new_boolean(true));
                json_object_object_add(e, "extensions", json_new_strv(h->extensions));
                json_object_object_add(e, "since", h->merged ? json_new_string_or_null(since) : NULL);
                json_object_object_add(e, "since_usec", json_object_new_uint64(h->merged ? h->since : 0));
                json_object_object_add(e, "trees", json_object_new_int(h->n_ours));
                if (h->foreign_top)
                        json_object_object_add(e, "foreign_mount_on_top", json_object_new_boolean(true));
                if (h->n_buried > 0)
                        json_object_object_add(e, "buried_trees", json_object_new_int(h->n_buried));
                if (h->n_repair > 0)
                        json_object_object_add(e, "stale_trees", json_object_new_int(h->n_repair));
                if (h->n_unrecorded > 0)
                        json_object_object_add(e, "unrecorded_overlays", json_object_new_int(h->n_unrecorded));
                if (h->is_symlink)
                        json_object_object_add(e, "symlink", json_object_new_boolean(true));
                json_object_array_add(a, e);
        }
        json_object_object_add(o, "hierarchies", a);
        for (size_t i = 0; i < s->journal.images.n; i++) {
                const Image *m = &s->journal.images.images[i];
                json_object *e = json_object_new_object();

                json_object_object_add(e, "name", json_object_new_string(m->name));
                json_object_object_add(e, "path", json_object_new_string(m->path));
                if (m->verdict == IMAGE_COMPATIBLE) {
                        json_object_object_add(e, "verity", json_object_new_string(verity_mode_to_string(m->verity)));
                        json_object_object_add(e, "signed", json_object_new_boolean(m->signed_valid));
                        if (m->backing != IMAGE_BACKING_NONE)
                                json_object_object_add(e, "backing", json_object_new_string(image_backing_to_string(m->backing)));
                        json_object_array_add(im, e);
                } else {
                        json_object_object_add(e, "status", json_object_new_string(image_verdict_to_string(m->verdict)));
                        json_object_object_add(e, "reason", json_new_string_or_null(m->reason));
                        json_object_array_add(sk, e);
                }
        }
        json_object_object_add(o, "skipped", sk);
        json_object_object_add(o, "images", im);
        json_object_object_add(o, "followed", output_followers_json(&s->followers));
        if (s->delay_deadline > 0)
                json_object_object_add(o, "delayed", output_delayed_json(s));
        output_history_json(&s->journal, o);
        if (s->changed.n > 0) {
                json_object *ch = json_object_new_array();

                for (size_t i = 0; i < s->changed.n; i++) {
                        const WatchChange *c = &s->changed.changes[i];
                        json_object *e = json_object_new_object();
                        _cleanup_free_ char *since = since_string(c->since);

                        json_object_object_add(e, "name", json_object_new_string(c->name));
                        json_object_object_add(e, "path", json_object_new_string(c->path));
                        json_object_object_add(e, "how", json_object_new_string(watch_how_to_string(c->how)));
                        json_object_object_add(e, "description", json_object_new_string(c->description));
                        json_object_object_add(e, "generation", json_object_new_uint64(c->generation));
                        json_object_object_add(e, "since", json_new_string_or_null(since));
                        json_object_object_add(e, "since_usec", json_object_new_uint64(c->since));
                        json_object_array_add(ch, e);
                }
                json_object_object_add(o, "changed", ch);
        }
        make_strings_safe(o);
        return o;
}

static json_object *pin_json(const Pin *p) {
        json_object *e = json_object_new_object();

        json_object_object_add(e, "class", json_object_new_string(image_class_to_string(p->klass)));
        json_object_object_add(e, "name", json_object_new_string(p->name));
        json_object_object_add(e, "version", json_new_string_or_null(p->version));
        json_object_object_add(e, "from_version", json_new_string_or_null(p->from_version));
        json_object_object_add(e, "generation", json_object_new_uint64(p->generation));
        return e;
}

static void add_time(json_object *o, const char *key, uint64_t usec) {
        _cleanup_free_ char *text = since_string(usec);
        char k[64];

        json_object_object_add(o, key, json_new_string_or_null(text));
        snprintf(k, sizeof(k), "%s_usec", key);
        json_object_object_add(o, k, json_object_new_uint64(usec));
}

void output_history_json(const Journal *j, json_object *o) {
        json_object *a = json_object_new_array();

        for (size_t i = 0; i < j->pins.n; i++)
                json_object_array_add(a, pin_json(&j->pins.pins[i]));
        json_object_object_add(o, "pins", a);
        if (j->confirm_generation > 0) {
                json_object *c = json_object_new_object();

                json_object_object_add(c, "generation", json_object_new_uint64(j->confirm_generation));
                add_time(c, "since", j->confirm_since);
                add_time(c, "deadline", j->confirm_deadline);
                json_object_object_add(c, "rollback_to", json_object_new_uint64(j->confirm_target));
                json_object_object_add(o, "confirm", c);
        }
        if (j->rollback_reason) {
                json_object *r = json_object_new_object();

                json_object_object_add(r, "from", json_object_new_uint64(j->rollback_from));
                json_object_object_add(r, "to", json_object_new_uint64(j->rollback_to));
                json_object_object_add(r, "reason", json_object_new_string(j->rollback_reason));
                add_time(r, "when", j->rollback_when);
                json_object_object_add(r, "error", json_new_string_or_null(j->rollback_error));
                json_object_object_add(o, "last_rollback", r);
        }
        a = json_object_new_array();
        for (size_t i = 0; i < j->n_generations; i++) {
                const Generation *g = &j->generations[i];
                json_object *e = json_object_new_object(), *im = json_object_new_array();

                json_object_object_add(e, "generation", json_object_new_uint64(g->generation));
                add_time(e, "when", g->when);
                for (size_t k = 0; k < g->images.n; k++) {
                        const Image *m = &g->images.images[k];
                        json_object *x = json_object_new_object();

                        json_object_object_add(x, "class", json_object_new_string(image_class_to_string(m->klass)));
                        json_object_object_add(x, "name", json_object_new_string(m->name));
                        json_object_object_add(x, "version", json_new_string_or_null(m->version));
                        json_object_object_add(x, "path", json_object_new_string(m->path));
                        json_object_array_add(im, x);
                }
                json_object_object_add(e, "images", im);
                json_object_array_add(a, e);
        }
        json_object_object_add(o, "generations", a);
}

void output_list_pins(json_object *list, const PinList *pins) {
        for (size_t i = 0; list && i < json_object_array_length(list); i++) {
                json_object *img = json_object_array_get_idx(list, i);
                int k = image_class_from_string(strempty(get_str(img, "class")));
                const Pin *p = k >= 0 ? pin_find(pins, k, strempty(get_str(img, "name"))) : NULL;

                json_object_object_add(img, "pinned", json_object_new_boolean(p != NULL));
        }
}

static json_object *namespaces_json(const DelayNamespace *l, size_t n) {
        json_object *a = json_object_new_array();

        for (size_t i = 0; a && i < n; i++) {
                json_object *e = json_object_new_object();

                json_object_object_add(e, "namespace", json_object_new_uint64(l[i].ns));
                json_object_object_add(e, "pid", json_object_new_int(l[i].pid));
                json_object_object_add(e, "unit", json_new_string_or_null(l[i].unit));
                json_object_array_add(a, e);
        }
        return a;
}

json_object *output_delayed_json(const EngineStatus *s) {
        json_object *d = json_object_new_object();
        _cleanup_free_ char *since = since_string(s->delayed_since), *deadline = since_string(s->delay_deadline);

        json_object_object_add(d, "generation", json_object_new_uint64(s->delayed_generation));
        json_object_object_add(d, "since", json_new_string_or_null(since));
        json_object_object_add(d, "since_usec", json_object_new_uint64(s->delayed_since));
        json_object_object_add(d, "deadline", json_new_string_or_null(deadline));
        json_object_object_add(d, "deadline_usec", json_object_new_uint64(s->delay_deadline));
        json_object_object_add(d, "old", namespaces_json(s->delayed.old, s->delayed.n_old));
        json_object_object_add(d, "new", namespaces_json(s->delayed.new, s->delayed.n_new));
        return d;
}

json_object *output_followers_json(const FollowerList *l) {
        json_object *a = json_object_new_array();

        for (size_t i = 0; a && i < l->n; i++) {
                const Follower *f = &l->followers[i];
                json_object *e = json_object_new_object(), *trees = json_object_new_array();

                for (size_t k = 0; trees && k < f->trees.n; k++)
                        json_object_array_add(trees, json_object_new_string(f->trees.trees[k]->hierarchy));
                json_object_object_add(e, "namespace", json_object_new_uint64(f->ns));
                json_object_object_add(e, "pid", json_object_new_int(f->pid));
                json_object_object_add(e, "name", json_new_string_or_null(f->name));
                json_object_object_add(e, "machine", json_new_string_or_null(f->machine));
                json_object_object_add(e, "generation", json_object_new_uint64(f->generation));
                json_object_object_add(e, "hierarchies", trees);
                json_object_object_add(e, "problems", json_new_strv(f->problems));
                json_object_object_add(e, "error", json_new_string_or_null(f->error));
                json_object_array_add(a, e);
        }
        return a;
}

static const char *get_str(json_object *o, const char *key) {
        json_object *v;
        return json_object_object_get_ex(o, key, &v) && v ? json_object_get_string(v) : NULL;
}

static int get_int(json_object *o, const char *key) {
        json_object *v;
        return json_object_object_get_ex(o, key, &v) && v ? json_object_get_int(v) : 0;
}

static bool get_bool(json_object *o, const char *key) {
        json_object *v;
        return json_object_object_get_ex(o, key, &v) && json_object_get_boolean(v);
}

static size_t column_width(json_object *a, const char *key, const char *header) {
        size_t w = strlen(header);
        for (size_t i = 0; i < json_object_array_length(a); i++) {
                const char *s = get_str(json_object_array_get_idx(a, i), key);
                if (s && strlen(s) > w)
                        w = strlen(s);
        }
        return w;
}

static void output_list_text(json_object *list, bool legend) {
        int wn = (int) column_width(list, "name", "NAME"), wc = (int) column_width(list, "class", "CLASS"),
            wk = (int) column_width(list, "kind", "KIND"), wp = (int) column_width(list, "path", "PATH");

        if (json_object_array_length(list) == 0) {
                fprintf(stderr, "No OS extensions found.\n");
                return;
        }
        if (legend)
                printf("%-*s %-*s %-*s %-*s %s\n", wn, "NAME", wc, "CLASS", wk, "KIND", wp, "PATH", "STATUS");
        for (size_t i = 0; i < json_object_array_length(list); i++) {
                json_object *o = json_object_array_get_idx(list, i);
                const char *status = get_str(o, "status"), *reason = get_str(o, "reason"), *verity = get_str(o, "verity");
                bool sig = get_bool(o, "signed");

                printf("%-*s %-*s %-*s %-*s %s%s%s%s%s%s%s\n", wn, strna(get_str(o, "name")), wc, strna(get_str(o, "class")), wk,
                       strna(get_str(o, "kind")), wp, strna(get_str(o, "path")), strna(status), reason ? ": " : "", reason ?: "",
                       verity && !streq(verity, "none") ? " verity=" : "", verity && !streq(verity, "none") ? verity : "",
                       sig ? " signed" : "", get_bool(o, "pinned") ? " pinned" : "");
        }
}

static void output_status_text(json_object *status, bool legend) {
        json_object *a, *sk;
        size_t wh = strlen("HIERARCHY"), we = strlen("EXTENSIONS"), wc = strlen("CLASS");
        _cleanup_strv_free_ char **ext = NULL;

        if (!json_object_object_get_ex(status, "hierarchies", &a))
                return;
        for (size_t i = 0; i < json_object_array_length(a); i++) {
                json_object *h = json_object_array_get_idx(a, i), *x;
                _cleanup_strv_free_ char **names = NULL;

                if (json_object_object_get_ex(h, "extensions", &x))
                        for (size_t k = 0; k < json_object_array_length(x); k++)
                                (void) strv_extend(&names, json_object_get_string(json_object_array_get_idx(x, k)));
                (void) strv_push(&ext, names ? strv_join(names, " ") : strdup("none"));
                if (ext && ext[i] && strlen(ext[i]) > we)
                        we = strlen(ext[i]);
                if (strlen(strna(get_str(h, "hierarchy"))) > wh)
                        wh = strlen(get_str(h, "hierarchy"));
                if (strlen(strna(get_str(h, "class"))) > wc)
                        wc = strlen(get_str(h, "class"));
        }
        if (legend)
                printf("%-*s %-*s %-*s %s\n", (int) wh, "HIERARCHY", (int) wc, "CLASS", (int) we, "EXTENSIONS", "SINCE");
        for (size_t i = 0; i < json_object_array_length(a); i++) {
                json_object *h = json_object_array_get_idx(a, i);
                const char *since = get_str(h, "since");

                printf("%-*s %-*s %-*s %s%s%s\n", (int) wh, strna(get_str(h, "hierarchy")), (int) wc, strna(get_str(h, "class")),
                       (int) we, ext && i < strv_length(ext) ? ext[i] : "none", since ?: "-",
                       get_bool(h, "writable") ? " (writable)" : "",
                       get_bool(h, "foreign_mount_on_top") ? " (covered by a foreign mount)" : "");
        }
        for (size_t i = 0; i < json_object_array_length(a); i++) {
                json_object *h = json_object_array_get_idx(a, i);
                const char *path = strna(get_str(h, "hierarchy"));

                if (get_int(h, "trees") > 1)
                        printf("%s: %d trees of sysextd are stacked there%s%s.\n", path, get_int(h, "trees"),
                               get_int(h, "stale_trees") > 0 ? "; the stale ones above the live tree go at the next transition" : "",
                               get_int(h, "buried_trees") > 0 ? "; ones buried below the live tree stay until its parent mount goes" : "");
                if (get_int(h, "unrecorded_overlays") > 0)
                        printf("%s: %d overlay(s) from source 'sysextd' that sysextd has no record of (not touched).\n", path,
                               get_int(h, "unrecorded_overlays"));
                if (get_bool(h, "symlink"))
                        printf("%s: is a symbolic link; not merged into.\n", path);
        }

        printf("Mode: %s (generation %s)%s%s, ownership proven by %s\n", strna(get_str(status, "mode")),
               strna(get_str(status, "generation")), get_str(status, "policy") ? ", image policy " : "",
               strempty(get_str(status, "policy")), strna(get_str(status, "ownership_proof")));
        if (json_object_object_get_ex(status, "delayed", &sk) && sk) {
                static const char *const which[2] = { "old", "new" };

                printf("Delayed: the transition to generation %s waits since %s, until %s (sysextd commit commits it now).\n",
                       strna(get_str(sk, "generation")), strna(get_str(sk, "since")), strna(get_str(sk, "deadline")));
                for (int w = 0; w < 2; w++) {
                        json_object *l;

                        if (!json_object_object_get_ex(sk, which[w], &l))
                                continue;
                        for (size_t i = 0; i < json_object_array_length(l); i++) {
                                json_object *x = json_object_array_get_idx(l, i);
                                const char *unit = get_str(x, "unit");

                                printf("  %s trees: mount namespace %s, process %s%s%s%s\n", which[w], strna(get_str(x, "namespace")),
                                       strna(get_str(x, "pid")), unit ? " (" : "", strempty(unit), unit ? ")" : "");
                        }
                }
        } else if (get_bool(status, "pending"))
                printf("A transition is running, or was interrupted (it is resolved by the next command).\n");
        if (get_bool(status, "incomplete"))
                printf("An interrupted transition was finished for some hierarchies only; run 'sysextd refresh'.\n");
        if (json_object_object_get_ex(status, "confirm", &sk) && sk)
                printf("Confirm: generation %s must be confirmed by %s (sysextd confirm), or it is rolled back to generation %s.\n",
                       strna(get_str(sk, "generation")), strna(get_str(sk, "deadline")), strna(get_str(sk, "rollback_to")));
        if (json_object_object_get_ex(status, "pins", &sk))
                for (size_t i = 0; i < json_object_array_length(sk); i++) {
                        json_object *p = json_object_array_get_idx(sk, i);
                        const char *v = get_str(p, "version"), *from = get_str(p, "from_version");

                        printf("Pinned: %s at %s%s by the rollback to generation %s (rolled back from %s%s; %s unpins it, or sysextd rollback --unpin)\n",
                               strna(get_str(p, "name")), v ? "version " : "none", strempty(v), strna(get_str(p, "generation")),
                               from ? "version " : "none", strempty(from), "a version newer than that");
                }
        if (json_object_object_get_ex(status, "last_rollback", &sk) && sk) {
                const char *error = get_str(sk, "error");
                bool deadline = streq_ptr(get_str(sk, "reason"), "deadline");

                if (error)
                        printf("Last rollback: %s from generation %s to generation %s FAILED on %s: %s\n",
                               deadline ? "the confirmation deadline's" : "the one asked", strna(get_str(sk, "from")),
                               strna(get_str(sk, "to")), strna(get_str(sk, "when")), error);
                else
                        printf("Last rollback: from generation %s to the images of generation %s on %s (%s)\n",
                               strna(get_str(sk, "from")), strna(get_str(sk, "to")), strna(get_str(sk, "when")),
                               deadline ? "its confirmation deadline passed" : "asked for");
        }
        if (json_object_object_get_ex(status, "generations", &sk) && json_object_array_length(sk) > 0) {
                printf("Generations kept:\n");
                for (size_t i = 0; i < json_object_array_length(sk); i++) {
                        json_object *g = json_object_array_get_idx(sk, i), *im;
                        _cleanup_strv_free_ char **names = NULL;
                        _cleanup_free_ char *joined = NULL;

                        if (json_object_object_get_ex(g, "images", &im))
                                for (size_t k = 0; k < json_object_array_length(im); k++) {
                                        json_object *x = json_object_array_get_idx(im, k);
                                        _cleanup_free_ char *one = NULL;
                                        const char *v = get_str(x, "version");

                                        if (asprintf(&one, "%s%s%s", strna(get_str(x, "name")), v ? " " : "", strempty(v)) >= 0)
                                                (void) strv_extend(&names, one);
                                }
                        joined = names ? strv_join(names, ", ") : NULL;
                        printf("  %s  %s  %s\n", strna(get_str(g, "generation")), strna(get_str(g, "when")), joined ?: "none");
                }
        }
        if (json_object_object_get_ex(status, "changed", &sk))
                for (size_t i = 0; i < json_object_array_length(sk); i++) {
                        json_object *c = json_object_array_get_idx(sk, i);

                        printf("Changed: %s (%s) changed under the live tree since generation %s: %s.\n", strna(get_str(c, "name")),
                               strna(get_str(c, "path")), strna(get_str(c, "generation")), strna(get_str(c, "description")));
                }
        if (get_bool(status, "other_mount_namespace"))
                printf("The trees were recorded in another mount namespace; run sysextd there.\n");
        if (json_object_object_get_ex(status, "followed", &sk))
                for (size_t i = 0; i < json_object_array_length(sk); i++) {
                        json_object *o = json_object_array_get_idx(sk, i), *p;
                        const char *machine = get_str(o, "machine"), *error = get_str(o, "error");

                        printf("Follows: mount namespace %s, process %s (%s%s%s), generation %s%s%s\n",
                               strna(get_str(o, "namespace")), strna(get_str(o, "pid")), strna(get_str(o, "name")),
                               machine ? ", machine " : "", strempty(machine), strna(get_str(o, "generation")),
                               error ? "; last update failed: " : "", strempty(error));
                        if (json_object_object_get_ex(o, "problems", &p))
                                for (size_t k = 0; k < json_object_array_length(p); k++)
                                        printf("  %s\n", json_object_get_string(json_object_array_get_idx(p, k)));
                }
        if (json_object_object_get_ex(status, "images", &sk)) {
                unsigned files = 0, loops = 0;

                for (size_t i = 0; i < json_object_array_length(sk); i++) {
                        json_object *o = json_object_array_get_idx(sk, i);
                        const char *verity = get_str(o, "verity");

                        /* What the live layers are mounted from (sysextd(8), IMAGES). */
                        files += streq_ptr(get_str(o, "backing"), "file");
                        loops += streq_ptr(get_str(o, "backing"), "loop");
                        if (!verity || streq(verity, "none"))
                                continue;
                        printf("Image %s (%s): verity=%s%s\n", strna(get_str(o, "name")), strna(get_str(o, "path")), verity,
                               get_bool(o, "signed") ? ", signed" : "");
                }
                if (files + loops > 0)
                        printf("Images: %u mounted from their files, %u through loop devices\n", files, loops);
        }
        if (json_object_object_get_ex(status, "skipped", &sk))
                for (size_t i = 0; i < json_object_array_length(sk); i++) {
                        json_object *o = json_object_array_get_idx(sk, i);
                        printf("Skipped %s (%s): %s\n", strna(get_str(o, "name")), strna(get_str(o, "path")),
                               strna(get_str(o, "reason")));
                }
}

static void print_json(json_object *o, int flags) {
        printf("%s\n", json_object_to_json_string_ext(o, flags | JSON_C_TO_STRING_NOSLASHESCAPE));
}

static void copy_field(json_object *to, json_object *from, const char *key, const char *as) {
        json_object *v;

        if (json_object_object_get_ex(from, key, &v))
                json_object_object_add(to, as ?: key, json_object_get(v));
}

static int systemd_flags(OutputFormat f) {
        return f == OUTPUT_JSON_SHORT ? JSON_C_TO_STRING_PLAIN : JSON_C_TO_STRING_PRETTY;
}

void output_list(json_object *list, const OutputOptions *o) {
        _cleanup_json_ json_object *a = NULL;

        if (o->format == OUTPUT_TEXT)
                return output_list_text(list, o->legend);
        if (o->format == OUTPUT_JSON)
                return print_json(list, JSON_C_TO_STRING_PRETTY);
        a = json_object_new_array();
        for (size_t i = 0; i < json_object_array_length(list); i++) {
                json_object *img = json_object_array_get_idx(list, i), *e = json_object_new_object();
                const char *kind = get_str(img, "kind");

                copy_field(e, img, "name", NULL);
                json_object_object_add(e, "type", json_object_new_string(streq_ptr(kind, "directory") ? "directory" : "raw"));
                copy_field(e, img, "path", NULL);
                json_object_object_add(e, "time", NULL);
                copy_field(e, img, "class", NULL);
                copy_field(e, img, "kind", NULL);
                copy_field(e, img, "status", NULL);
                copy_field(e, img, "reason", NULL);
                json_object_array_add(a, e);
        }
        print_json(a, systemd_flags(o->format));
}

static int compare_hierarchy(const void *a, const void *b) {
        json_object *const *x = a, *const *y = b;
        return strcmp(strempty(get_str(*x, "hierarchy")), strempty(get_str(*y, "hierarchy")));
}

void output_status(json_object *status, const OutputOptions *o) {
        _cleanup_json_ json_object *a = NULL;
        json_object *hs;

        if (o->format == OUTPUT_TEXT)
                return output_status_text(status, o->legend);
        if (o->format == OUTPUT_JSON)
                return print_json(status, JSON_C_TO_STRING_PRETTY);
        a = json_object_new_array();
        if (json_object_object_get_ex(status, "hierarchies", &hs))
                for (size_t i = 0; i < json_object_array_length(hs); i++) {
                        json_object *h = json_object_array_get_idx(hs, i), *e = json_object_new_object(), *x;
                        bool merged = get_bool(h, "merged");

                        copy_field(e, h, "hierarchy", NULL);
                        /* As systemd-sysext: the names, or "none" when nothing is merged. */
                        if (merged && json_object_object_get_ex(h, "extensions", &x))
                                json_object_object_add(e, "extensions", json_object_get(x));
                        else
                                json_object_object_add(e, "extensions", json_object_new_string("none"));
                        json_object_object_add(e, "since", merged ? json_object_new_uint64(strtoull(strempty(get_str(h, "since_usec")), NULL, 10)) : NULL);
                        copy_field(e, h, "class", NULL);
                        copy_field(e, h, "merged", NULL);
                        copy_field(e, h, "writable", NULL);
                        json_object_array_add(a, e);
                }
        /* Ordered by hierarchy, as systemd-sysext orders them. */
        json_object_array_sort(a, compare_hierarchy);
        print_json(a, systemd_flags(o->format));
}

json_object *output_namespaces_json(const StaleNamespaceList *l, char *const *names) {
        json_object *a = json_object_new_array();

        for (size_t i = 0; a && i < l->n; i++) {
                const StaleNamespace *x = &l->namespaces[i];
                json_object *e = json_object_new_object(), *hs = json_object_new_array();

                for (size_t k = 0; k < x->n && names && names[k]; k++) {
                        json_object *h = json_object_new_object();

                        json_object_object_add(h, "hierarchy", json_object_new_string(names[k]));
                        json_object_object_add(h, "shows", json_object_new_string(namespace_view_to_string(x->tops[k].view)));
                        json_object_array_add(hs, h);
                }
                json_object_object_add(e, "namespace", json_object_new_uint64(x->ns));
                json_object_object_add(e, "pid", json_object_new_int(x->pid));
                json_object_object_add(e, "processes", json_object_new_int((int) x->n_processes));
                json_object_object_add(e, "unit", json_new_string_or_null(x->unit));
                json_object_object_add(e, "machine", json_new_string_or_null(x->machine));
                json_object_object_add(e, "own_root", json_object_new_boolean(x->own_root));
                json_object_object_add(e, "followed", json_object_new_boolean(x->followed));
                json_object_object_add(e, "hierarchies", hs);
                json_object_array_add(a, e);
        }
        make_strings_safe(a);
        return a;
}

static const char *view_words(const char *name) {
        for (int v = 0; v < _NAMESPACE_VIEW_MAX; v++)
                if (streq_ptr(namespace_view_to_string(v), name))
                        return namespace_view_describe(v);
        return name;
}

void output_namespaces(json_object *namespaces, const OutputOptions *o) {
        if (o->format != OUTPUT_TEXT)
                return print_json(namespaces, o->format == OUTPUT_JSON_SHORT ? JSON_C_TO_STRING_PLAIN : JSON_C_TO_STRING_PRETTY);
        if (json_object_array_length(namespaces) == 0) {
                if (o->legend)
                        printf("Every mount namespace shows the host's trees.\n");
                return;
        }
        for (size_t i = 0; i < json_object_array_length(namespaces); i++) {
                json_object *x = json_object_array_get_idx(namespaces, i), *hs;
                const char *unit = get_str(x, "unit"), *machine = get_str(x, "machine");

                printf("Mount namespace %s: process %s (%d process%s)%s%s%s%s%s\n", strna(get_str(x, "namespace")),
                       strna(get_str(x, "pid")), get_int(x, "processes"), get_int(x, "processes") == 1 ? "" : "es",
                       unit ? ", " : "", strempty(unit), machine ? ", machine " : "", strempty(machine),
                       get_bool(x, "followed") ? ", followed" : "");
                if (json_object_object_get_ex(x, "hierarchies", &hs))
                        for (size_t k = 0; k < json_object_array_length(hs); k++) {
                                json_object *h = json_object_array_get_idx(hs, k);
                                const char *shows = get_str(h, "shows");

                                if (streq_ptr(shows, "absent"))
                                        continue;
                                printf("  /%s: %s\n", strna(get_str(h, "hierarchy")), strna(view_words(shows)));
                        }
        }
}
