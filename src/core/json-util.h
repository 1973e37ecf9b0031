/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>

#include "macro.h"

/* json-c with ownership made explicit, and typed, validating getters for documents that
 * come from disk or from another process: a field of the wrong type or range is an error
 * (-EBADMSG), never a NULL string or a silent 0. */

static inline void json_object_putp(json_object **o) {
        if (*o)
                json_object_put(*o);
        *o = NULL;
}
#define _cleanup_json_ _cleanup_(json_object_putp)

/* Object field getters.  Missing fields: -ENOENT (the caller decides whether that is fine),
 * present with another type: -EBADMSG.  Strings are copied; *ret is left alone on error. */
int json_get_string(json_object *o, const char *key, size_t max_len, char **ret);
int json_get_string_or_null(json_object *o, const char *key, size_t max_len, char **ret); /* null -> NULL */
int json_get_u64(json_object *o, const char *key, uint64_t *ret);
int json_get_bool(json_object *o, const char *key, bool *ret);
int json_get_strv(json_object *o, const char *key, size_t max_items, size_t max_len, char ***ret);
json_object *json_get_array(json_object *o, const char *key); /* NULL unless an array */
json_object *json_get_object(json_object *o, const char *key);

json_object *json_new_string_or_null(const char *s);
json_object *json_new_strv(char *const *l);

/* Parses text as a JSON document whose top level is an object; NULL otherwise. */
json_object *json_parse_object(const char *text);
