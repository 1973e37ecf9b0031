/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The varlink wire format (varlink-message.h): parsing a call, formatting a reply.  Pure: the
 * unit tests and the fuzzer drive it with any bytes.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "json-util.h"
#include "util.h"
#include "varlink-message.h"

void varlink_message_done(VarlinkMessage *m) {
        free(m->method);
        m->method = NULL;
        json_object_putp(&m->parameters);
        m->flags = 0;
}

static bool is_alpha(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static bool is_digit(char c) {
        return c >= '0' && c <= '9';
}

bool varlink_method_name_valid(const char *s) {
        const char *dot;
        size_t words = 0;

        if (!s || strlen(s) > VARLINK_METHOD_MAX)
                return false;
        dot = strrchr(s, '.');
        if (!dot || dot == s)
                return false;
        /* The member: [A-Z][A-Za-z0-9]* */
        if (!(dot[1] >= 'A' && dot[1] <= 'Z'))
                return false;
        for (const char *p = dot + 2; *p; p++)
                if (!is_alpha(*p) && !is_digit(*p))
                        return false;
        /* The interface: words of [A-Za-z0-9-] separated by single dots, each beginning with a
         * letter and not ending with '-'. */
        for (const char *p = s; p < dot;) {
                const char *start = p;

                if (!is_alpha(*p))
                        return false;
                while (p < dot && *p != '.') {
                        if (!is_alpha(*p) && !is_digit(*p) && *p != '-')
                                return false;
                        p++;
                }
                if (p[-1] == '-' || p == start)
                        return false;
                words++;
                if (p < dot)
                        p++; /* the dot; the next word must not be empty */
                if (p == dot && p[-1] == '.')
                        return false;
        }
        return words >= 2;
}

char *varlink_method_interface(const char *method) {
        const char *dot = strrchr(method, '.');
        return dot ? strndup(method, (size_t) (dot - method)) : NULL;
}

static int get_flag(json_object *o, const char *key, unsigned bit, unsigned *flags) {
        json_object *v;

        if (!json_object_object_get_ex(o, key, &v) || json_object_is_type(v, json_type_null))
                return 0;
        if (!json_object_is_type(v, json_type_boolean))
                return -EBADMSG;
        if (json_object_get_boolean(v))
                *flags |= bit;
        return 0;
}

int varlink_message_parse(const char *text, size_t len, VarlinkMessage *ret) {
        _cleanup_json_ json_object *o = NULL;
        _cleanup_free_ char *method = NULL;
        json_tokener *tok;
        json_object *v, *params = NULL;
        unsigned flags = 0, upgrade = 0;
        int r;

        if (!text || len == 0 || len > VARLINK_MESSAGE_MAX || memchr(text, 0, len))
                return -EBADMSG;
        tok = json_tokener_new_ex(VARLINK_DEPTH_MAX);
        if (!tok)
                return -ENOMEM;
        json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
        o = json_tokener_parse_ex(tok, text, (int) len);
        /* Complete, and nothing but white space after the object. */
        r = json_tokener_get_error(tok) == json_tokener_success ? 0 : -EBADMSG;
        if (r == 0)
                for (size_t i = json_tokener_get_parse_end(tok); i < len; i++)
                        if (!strchr(" \t\r\n", text[i]))
                                r = -EBADMSG;
        json_tokener_free(tok);
        if (r < 0 || !o || !json_object_is_type(o, json_type_object))
                return -EBADMSG;

        if (!json_object_object_get_ex(o, "method", &v) || !json_object_is_type(v, json_type_string) ||
            !varlink_method_name_valid(json_object_get_string(v)))
                return -EBADMSG;
        method = strdup(json_object_get_string(v));
        if (!method)
                return -ENOMEM;
        if (json_object_object_get_ex(o, "parameters", &v) && !json_object_is_type(v, json_type_null)) {
                if (!json_object_is_type(v, json_type_object))
                        return -EBADMSG;
                params = json_object_get(v);
        } else {
                params = json_object_new_object();
                if (!params)
                        return -ENOMEM;
        }
        if (get_flag(o, "oneway", VARLINK_CALL_ONEWAY, &flags) < 0 || get_flag(o, "more", VARLINK_CALL_MORE, &flags) < 0 ||
            get_flag(o, "upgrade", 1, &upgrade) < 0) {
                json_object_put(params);
                return -EBADMSG;
        }
        /* oneway and more together make no sense; nobody would hear the replies. */
        if ((flags & VARLINK_CALL_ONEWAY) && (flags & VARLINK_CALL_MORE)) {
                json_object_put(params);
                return -EBADMSG;
        }
        if (upgrade) {
                json_object_put(params);
                return -EPROTONOSUPPORT;
        }
        *ret = (VarlinkMessage) { .method = TAKE_PTR(method), .parameters = params, .flags = flags };
        return 0;
}

static char *format(json_object *o, size_t *ret_len) {
        const char *s;
        size_t n;
        char *buf;

        if (!o)
                return NULL;
        s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
        if (!s)
                return NULL;
        n = strlen(s);
        buf = malloc(n + 1);
        if (!buf)
                return NULL;
        memcpy(buf, s, n + 1); /* with the NUL: the message's terminator */
        *ret_len = n + 1;
        return buf;
}

char *varlink_format_reply(json_object *parameters, bool continues, size_t *ret_len) {
        _cleanup_json_ json_object *o = json_object_new_object();

        if (!o) {
                json_object_put(parameters);
                return NULL;
        }
        json_object_object_add(o, "parameters", parameters ?: json_object_new_object());
        if (continues)
                json_object_object_add(o, "continues", json_object_new_boolean(true));
        return format(o, ret_len);
}

char *varlink_format_error(const char *error, json_object *parameters, size_t *ret_len) {
        _cleanup_json_ json_object *o = json_object_new_object();

        if (!o || !varlink_error_name_valid(error)) {
                json_object_put(parameters);
                return NULL;
        }
        json_object_object_add(o, "error", json_object_new_string(error));
        json_object_object_add(o, "parameters", parameters ?: json_object_new_object());
        return format(o, ret_len);
}

json_object *varlink_errno_parameters(int error) {
        json_object *o = json_object_new_object();
        const char *name;

        if (!o)
                return NULL;
        error = error < 0 ? -error : error;
        json_object_object_add(o, "errno", json_object_new_int(error));
        name = strerrorname_np(error);
        if (name)
                json_object_object_add(o, "errnoName", json_object_new_string(name));
        return o;
}
