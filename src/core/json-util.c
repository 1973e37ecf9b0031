/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json-util.h"
#include "util.h"

static int get(json_object *o, const char *key, json_type type, json_object **ret) {
        json_object *v;

        if (!o || !json_object_is_type(o, json_type_object))
                return -EBADMSG;
        if (!json_object_object_get_ex(o, key, &v))
                return -ENOENT;
        if (!json_object_is_type(v, type))
                return v ? -EBADMSG : -ENODATA; /* a JSON null is NULL */
        *ret = v;
        return 0;
}

int json_get_string(json_object *o, const char *key, size_t max_len, char **ret) {
        json_object *v;
        const char *s;
        int r;

        r = get(o, key, json_type_string, &v);
        if (r == -ENODATA)
                return -EBADMSG;
        if (r < 0)
                return r;
        s = json_object_get_string(v);
        /* An embedded NUL would make the string shorter than the JSON says. */
        if (!s || (size_t) json_object_get_string_len(v) != strlen(s) || strlen(s) > max_len)
                return -EBADMSG;
        *ret = strdup(s);
        return *ret ? 0 : -ENOMEM;
}

int json_get_string_or_null(json_object *o, const char *key, size_t max_len, char **ret) {
        json_object *v;
        int r = get(o, key, json_type_string, &v);

        if (r == -ENODATA || r == -ENOENT) {
                *ret = NULL;
                return 0;
        }
        if (r < 0)
                return r;
        return json_get_string(o, key, max_len, ret);
}

int json_get_u64(json_object *o, const char *key, uint64_t *ret) {
        json_object *v;
        int r = get(o, key, json_type_int, &v);

        if (r == -ENODATA)
                return -EBADMSG;
        if (r < 0)
                return r;
        /* json-c keeps negative numbers as int64 and large ones as uint64. */
        if (json_object_get_int64(v) < 0)
                return -EBADMSG;
        *ret = json_object_get_uint64(v);
        return 0;
}

int json_get_bool(json_object *o, const char *key, bool *ret) {
        json_object *v;
        int r = get(o, key, json_type_boolean, &v);

        if (r == -ENODATA)
                return -EBADMSG;
        if (r < 0)
                return r;
        *ret = json_object_get_boolean(v);
        return 0;
}

int json_get_strv(json_object *o, const char *key, size_t max_items, size_t max_len, char ***ret) {
        _cleanup_strv_free_ char **l = NULL;
        json_object *a;
        size_t n;
        int r;

        r = get(o, key, json_type_array, &a);
        if (r == -ENODATA) {
                *ret = NULL;
                return 0;
        }
        if (r < 0)
                return r;
        n = json_object_array_length(a);
        if (n > max_items)
                return -EBADMSG;
        l = calloc(n + 1, sizeof(char *));
        if (!l)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                json_object *e = json_object_array_get_idx(a, i);
                const char *s;

                if (!json_object_is_type(e, json_type_string))
                        return -EBADMSG;
                s = json_object_get_string(e);
                if (!s || (size_t) json_object_get_string_len(e) != strlen(s) || strlen(s) > max_len)
                        return -EBADMSG;
                l[i] = strdup(s);
                if (!l[i])
                        return -ENOMEM;
        }
        *ret = TAKE_PTR(l);
        return 0;
}

json_object *json_get_array(json_object *o, const char *key) {
        json_object *v;
        return get(o, key, json_type_array, &v) >= 0 ? v : NULL;
}

const char *json_peek_string(json_object *o, const char *key) {
        json_object *v;
        return get(o, key, json_type_string, &v) >= 0 ? json_object_get_string(v) : NULL;
}

json_object *json_get_object(json_object *o, const char *key) {
        json_object *v;
        return get(o, key, json_type_object, &v) >= 0 ? v : NULL;
}

json_object *json_new_string_or_null(const char *s) {
        return s ? json_object_new_string(s) : NULL;
}

json_object *json_new_strv(char *const *l) {
        json_object *a = json_object_new_array();

        STRV_FOREACH(s, l)
                json_object_array_add(a, json_object_new_string(*s));
        return a;
}

json_object *json_parse_object(const char *text) {
        json_object *o = json_tokener_parse(text);

        if (o && !json_object_is_type(o, json_type_object)) {
                json_object_put(o);
                return NULL;
        }
        return o;
}

static void writer_put(JsonWriter *w, const char *s, size_t n) {
        if (w->failed)
                return;
        if (w->len + n + 1 > w->allocated) {
                size_t a = w->allocated ? w->allocated : 4096;
                char *b;

                while (a < w->len + n + 1)
                        a *= 2;
                b = realloc(w->buf, a);
                if (!b) {
                        w->failed = true;
                        return;
                }
                w->buf = b;
                w->allocated = a;
        }
        memcpy(w->buf + w->len, s, n);
        w->len += n;
        w->buf[w->len] = 0;
}

/* Before a value (or a key): the comma that separates it from the one before. */
static void writer_value(JsonWriter *w) {
        if (w->after_key)
                w->after_key = false;
        else if (!w->first && w->len > 0)
                writer_put(w, ",", 1);
        w->first = false;
}

void json_writer_begin_object(JsonWriter *w) {
        writer_value(w);
        writer_put(w, "{", 1);
        w->first = true;
}

void json_writer_end_object(JsonWriter *w) {
        writer_put(w, "}", 1);
        w->first = false;
}

void json_writer_begin_array(JsonWriter *w) {
        writer_value(w);
        writer_put(w, "[", 1);
        w->first = true;
}

void json_writer_end_array(JsonWriter *w) {
        writer_put(w, "]", 1);
        w->first = false;
}

static void writer_escaped(JsonWriter *w, const char *s) {
        static const char hex[] = "0123456789abcdef";
        const char *run = s;

        writer_put(w, "\"", 1);
        for (; *s; s++) {
                unsigned char c = (unsigned char) *s;
                char e[6] = { '\\', 0 };
                size_t n = 2;

                if (c >= 0x20 && c != '"' && c != '\\')
                        continue;
                writer_put(w, run, (size_t) (s - run));
                run = s + 1;
                switch (c) {
                case '"':
                case '\\':
                        e[1] = (char) c;
                        break;
                case '\b':
                        e[1] = 'b';
                        break;
                case '\f':
                        e[1] = 'f';
                        break;
                case '\n':
                        e[1] = 'n';
                        break;
                case '\r':
                        e[1] = 'r';
                        break;
                case '\t':
                        e[1] = 't';
                        break;
                default:
                        e[1] = 'u';
                        e[2] = '0';
                        e[3] = '0';
                        e[4] = hex[c >> 4];
                        e[5] = hex[c & 15];
                        n = 6;
                        break;
                }
                writer_put(w, e, n);
        }
        writer_put(w, run, (size_t) (s - run));
        writer_put(w, "\"", 1);
}

void json_writer_key(JsonWriter *w, const char *key) {
        writer_value(w);
        writer_escaped(w, key);
        writer_put(w, ":", 1);
        w->after_key = true;
}

void json_writer_string(JsonWriter *w, const char *s) {
        if (!s) {
                json_writer_null(w);
                return;
        }
        writer_value(w);
        writer_escaped(w, s);
}

void json_writer_u64(JsonWriter *w, uint64_t v) {
        char b[32];
        int n = snprintf(b, sizeof(b), "%" PRIu64, v);

        writer_value(w);
        writer_put(w, b, (size_t) n);
}

void json_writer_i64(JsonWriter *w, int64_t v) {
        char b[32];
        int n = snprintf(b, sizeof(b), "%" PRId64, v);

        writer_value(w);
        writer_put(w, b, (size_t) n);
}

void json_writer_bool(JsonWriter *w, bool v) {
        writer_value(w);
        writer_put(w, v ? "true" : "false", v ? 4 : 5);
}

void json_writer_null(JsonWriter *w) {
        writer_value(w);
        writer_put(w, "null", 4);
}

void json_writer_strv(JsonWriter *w, char *const *l) {
        json_writer_begin_array(w);
        for (; l && *l; l++)
                json_writer_string(w, *l);
        json_writer_end_array(w);
}

void json_writer_field_u64(JsonWriter *w, const char *key, uint64_t v) {
        json_writer_key(w, key);
        json_writer_u64(w, v);
}

void json_writer_field_string(JsonWriter *w, const char *key, const char *s) {
        json_writer_key(w, key);
        json_writer_string(w, s);
}

void json_writer_field_bool(JsonWriter *w, const char *key, bool v) {
        json_writer_key(w, key);
        json_writer_bool(w, v);
}

int json_writer_finish(JsonWriter *w, char **ret) {
        if (w->failed || !w->buf) {
                json_writer_done(w);
                return -ENOMEM;
        }
        *ret = w->buf;
        *w = (JsonWriter) {};
        return 0;
}

void json_writer_done(JsonWriter *w) {
        free(w->buf);
        *w = (JsonWriter) {};
}
