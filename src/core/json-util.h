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
const char *json_peek_string(json_object *o, const char *key); /* not copied; NULL unless a string */
json_object *json_get_object(json_object *o, const char *key);

json_object *json_new_string_or_null(const char *s);
json_object *json_new_strv(char *const *l);

/* Parses text as a JSON document whose top level is an object; NULL otherwise. */
json_object *json_parse_object(const char *text);

/* A writer of JSON text, for what is written on every transition (state.json, three times):
 * no tree of objects built and freed to print it, as json-c's
 * json_object_to_json_string() needs.  Strings are escaped as json-c escapes them ('"', '\\',
 * the control characters), other bytes (UTF-8) are written as they are.  Calls nest; a
 * failed allocation is remembered and reported by json_writer_finish(). */
typedef struct JsonWriter {
        char *buf;
        size_t len, allocated;
        bool failed;
        bool first;     /* nothing written yet in the innermost object or array */
        bool after_key; /* a key was written: its value comes without a comma */
} JsonWriter;

void json_writer_begin_object(JsonWriter *w);
void json_writer_end_object(JsonWriter *w);
void json_writer_begin_array(JsonWriter *w);
void json_writer_end_array(JsonWriter *w);
void json_writer_key(JsonWriter *w, const char *key);
void json_writer_string(JsonWriter *w, const char *s); /* NULL: null */
void json_writer_u64(JsonWriter *w, uint64_t v);
void json_writer_i64(JsonWriter *w, int64_t v);
void json_writer_bool(JsonWriter *w, bool v);
void json_writer_null(JsonWriter *w);
void json_writer_strv(JsonWriter *w, char *const *l); /* NULL: [] */
/* A key and its value. */
void json_writer_field_u64(JsonWriter *w, const char *key, uint64_t v);
void json_writer_field_string(JsonWriter *w, const char *key, const char *s);
void json_writer_field_bool(JsonWriter *w, const char *key, bool v);
/* The text (taken by *ret), or -ENOMEM. */
int json_writer_finish(JsonWriter *w, char **ret);
void json_writer_done(JsonWriter *w);
