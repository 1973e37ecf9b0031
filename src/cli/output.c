/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdio.h>
#include <string.h>

#include "output.h"
#include "util.h"

static json_object *string_or_null(const char *s) {
        return s ? json_object_new_string(s) : NULL;
}

json_object *output_list_json(const ImageList *l) {
        json_object *a = json_object_new_array();

        for (size_t i = 0; i < l->n; i++) {
                const Image *img = &l->images[i];
                json_object *o = json_object_new_object();

                json_object_object_add(o, "name", json_object_new_string(img->name));
                json_object_object_add(o, "kind", json_object_new_string(image_kind_to_string(img->kind)));
                json_object_object_add(o, "path", json_object_new_string(img->path));
                json_object_object_add(o, "status", json_object_new_string(image_verdict_to_string(img->verdict)));
                json_object_object_add(o, "compatible", json_object_new_boolean(img->verdict == IMAGE_COMPATIBLE));
                json_object_object_add(o, "reason", string_or_null(img->reason));
                json_object_object_add(o, "verity", json_object_new_string(verity_mode_to_string(img->verity)));
                json_object_object_add(o, "signed", json_object_new_boolean(img->signed_valid));
                json_object_array_add(a, o);
        }
        return a;
}

static char *since_string(uint64_t usec) {
        return usec > 0 ? format_timestamp(usec) : NULL;
}

json_object *output_status_json(const EngineStatus *s) {
        json_object *o = json_object_new_object(), *a = json_object_new_array(), *sk = json_object_new_array();

        json_object_object_add(o, "mode", json_object_new_string(s->mode));
        json_object_object_add(o, "policy", json_object_new_string(s->policy));
        json_object_object_add(o, "generation", json_object_new_uint64(s->generation));
        for (size_t i = 0; i < s->n_hierarchies; i++) {
                const HierarchyStatus *h = &s->hierarchies[i];
                json_object *e = json_object_new_object(), *x = json_object_new_array();
                _cleanup_free_ char *since = since_string(h->since);

                json_object_object_add(e, "hierarchy", json_object_new_string(h->path));
                json_object_object_add(e, "merged", json_object_new_boolean(h->merged));
                STRV_FOREACH(n, h->extensions)
                        json_object_array_add(x, json_object_new_string(*n));
                json_object_object_add(e, "extensions", x);
                json_object_object_add(e, "since", h->merged ? string_or_null(since) : NULL);
                json_object_object_add(e, "since_usec", json_object_new_uint64(h->merged ? h->since : 0));
                if (h->foreign_top)
                        json_object_object_add(e, "foreign_mount_on_top", json_object_new_boolean(true));
                json_object_array_add(a, e);
        }
        json_object_object_add(o, "hierarchies", a);
        for (size_t i = 0; i < s->journal.n_images; i++) {
                const JournalImage *m = &s->journal.images[i];
                json_object *e;

                if (streq_ptr(m->verdict, "compatible"))
                        continue;
                e = json_object_new_object();
                json_object_object_add(e, "name", json_object_new_string(m->name));
                json_object_object_add(e, "path", json_object_new_string(m->path));
                json_object_object_add(e, "status", string_or_null(m->verdict));
                json_object_object_add(e, "reason", string_or_null(m->reason));
                json_object_array_add(sk, e);
        }
        json_object_object_add(o, "skipped", sk);
        {
                json_object *im = json_object_new_array();
                for (size_t i = 0; i < s->journal.n_images; i++) {
                        const JournalImage *m = &s->journal.images[i];
                        json_object *e;

                        if (!streq_ptr(m->verdict, "compatible"))
                                continue;
                        e = json_object_new_object();
                        json_object_object_add(e, "name", json_object_new_string(m->name));
                        json_object_object_add(e, "path", json_object_new_string(m->path));
                        json_object_object_add(e, "verity", json_object_new_string(m->verity ?: "none"));
                        json_object_object_add(e, "signed", json_object_new_boolean(m->signed_valid));
                        json_object_array_add(im, e);
                }
                json_object_object_add(o, "images", im);
        }
        return o;
}

static const char *get_str(json_object *o, const char *key) {
        json_object *v;
        return json_object_object_get_ex(o, key, &v) && v ? json_object_get_string(v) : NULL;
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

void output_list_text(json_object *list) {
        int wn = (int) column_width(list, "name", "NAME"), wk = (int) column_width(list, "kind", "KIND"),
            wp = (int) column_width(list, "path", "PATH");

        if (json_object_array_length(list) == 0) {
                printf("No images found.\n");
                return;
        }
        printf("%-*s %-*s %-*s %s\n", wn, "NAME", wk, "KIND", wp, "PATH", "STATUS");
        for (size_t i = 0; i < json_object_array_length(list); i++) {
                json_object *o = json_object_array_get_idx(list, i);
                const char *status = get_str(o, "status"), *reason = get_str(o, "reason");

                const char *verity = get_str(o, "verity");
                json_object *v;
                bool sig = json_object_object_get_ex(o, "signed", &v) && json_object_get_boolean(v);

                printf("%-*s %-*s %-*s %s%s%s%s%s%s\n", wn, get_str(o, "name"), wk, get_str(o, "kind"), wp,
                       get_str(o, "path"), status, reason ? ": " : "", reason ?: "",
                       verity && !streq(verity, "none") ? " verity=" : "",
                       verity && !streq(verity, "none") ? verity : "", sig ? " signed" : "");
        }
}

void output_status_text(json_object *status) {
        json_object *a, *sk;
        size_t wh = strlen("HIERARCHY"), we = strlen("EXTENSIONS");
        char **ext = NULL;

        if (!json_object_object_get_ex(status, "hierarchies", &a))
                return;
        ext = calloc(json_object_array_length(a) + 1, sizeof(char *));
        if (!ext)
                return;
        for (size_t i = 0; i < json_object_array_length(a); i++) {
                json_object *h = json_object_array_get_idx(a, i), *x;
                _cleanup_strv_free_ char **names = NULL;

                if (json_object_object_get_ex(h, "extensions", &x))
                        for (size_t k = 0; k < json_object_array_length(x); k++)
                                (void) strv_extend(&names, json_object_get_string(json_object_array_get_idx(x, k)));
                ext[i] = names ? strv_join(names, " ") : strdup("none");
                if (ext[i] && strlen(ext[i]) > we)
                        we = strlen(ext[i]);
                if (strlen(get_str(h, "hierarchy")) > wh)
                        wh = strlen(get_str(h, "hierarchy"));
        }
        printf("%-*s %-*s %s\n", (int) wh, "HIERARCHY", (int) we, "EXTENSIONS", "SINCE");
        for (size_t i = 0; i < json_object_array_length(a); i++) {
                json_object *h = json_object_array_get_idx(a, i), *v;
                const char *since = get_str(h, "since");
                bool foreign = json_object_object_get_ex(h, "foreign_mount_on_top", &v) && json_object_get_boolean(v);

                printf("%-*s %-*s %s%s\n", (int) wh, get_str(h, "hierarchy"), (int) we, ext[i] ?: "none",
                       since ?: "-", foreign ? " (covered by a foreign mount)" : "");
        }
        strv_free(ext);

        printf("Mode: %s (generation %s)%s%s\n", strna(get_str(status, "mode")), strna(get_str(status, "generation")),
               get_str(status, "policy") ? ", image policy " : "", strempty(get_str(status, "policy")));
        if (json_object_object_get_ex(status, "images", &sk))
                for (size_t i = 0; i < json_object_array_length(sk); i++) {
                        json_object *o = json_object_array_get_idx(sk, i), *v;
                        const char *verity = get_str(o, "verity");
                        bool sig = json_object_object_get_ex(o, "signed", &v) && json_object_get_boolean(v);

                        if (!verity || streq(verity, "none"))
                                continue;
                        printf("Image %s (%s): verity=%s%s\n", get_str(o, "name"), get_str(o, "path"), verity,
                               sig ? ", signed" : "");
                }
        if (json_object_object_get_ex(status, "skipped", &sk))
                for (size_t i = 0; i < json_object_array_length(sk); i++) {
                        json_object *o = json_object_array_get_idx(sk, i);
                        printf("Skipped %s (%s): %s\n", get_str(o, "name"), get_str(o, "path"),
                               strna(get_str(o, "reason")));
                }
}

void output_json(json_object *o) {
        printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE));
}
