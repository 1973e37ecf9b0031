/* SPDX-License-Identifier: LGPL-2.1-or-later */
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
