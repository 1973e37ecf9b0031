/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Which polkit action a transition needs and what polkit is told about it (authorize.h).
 * Pure functions of the options and the configuration; bus-service.c asks polkit.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "authorize.h"
#include "image-class.h"
#include "util.h"

static bool requested_mutable_unsafe(const EngineConfig *c, const EngineOptions *o, ImageClass k) {
        int m = o->mutable[k];

        return m >= 0 && m < _MUTABLE_MAX && m != MUTABLE_NO && (MutableMode) m != c->classes[k].mutable;
}

static bool requested_policy_unsafe(const EngineConfig *c, const EngineOptions *o) {
        /* IMAGE_POLICY_* are in order: each allows a subset of what the one before allows.
         * Weaker than what any covered class is configured with (sysext.conf/confext.conf
         * may set a class's own) is unsafe. */
        if (o->policy < 0 || o->policy >= _IMAGE_POLICY_MAX)
                return false;
        if ((ImagePolicy) o->policy < c->policy)
                return true;
        for (ImageClass k = 0; k < _IMAGE_CLASS_MAX; k++)
                if (engine_options_cover(o, k) && c->classes[k].policy >= 0 && o->policy < c->classes[k].policy)
                        return true;
        return false;
}

unsigned authorize_unsafe(const EngineConfig *c, const EngineOptions *o) {
        unsigned u = 0;

        if (o->force)
                u |= AUTHORIZE_UNSAFE_FORCE;
        if (requested_policy_unsafe(c, o))
                u |= AUTHORIZE_UNSAFE_IMAGE_POLICY;
        for (ImageClass k = 0; k < _IMAGE_CLASS_MAX; k++) {
                if (!engine_options_cover(o, k))
                        continue;
                if (o->noexec == 0 && c->classes[k].noexec)
                        u |= AUTHORIZE_UNSAFE_NOEXEC;
                if (requested_mutable_unsafe(c, o, k))
                        u |= AUTHORIZE_UNSAFE_MUTABLE;
        }
        return u;
}

/* Appends "KEY=VALUE" and, with 'configured', " (configured: CONFIGURED)". */
static int push_assignment(char ***l, const char *key, const char *value, const char *configured) {
        char *s;

        if (asprintf(&s, "%s=%s%s%s%s", key, value, configured ? " (configured: " : "", configured ?: "",
                     configured ? ")" : "") < 0)
                return -ENOMEM;
        return strv_push(l, s);
}

char *authorize_unsafe_to_string(const EngineConfig *c, const EngineOptions *o) {
        _cleanup_strv_free_ char **l = NULL;
        unsigned u = authorize_unsafe(c, o);
        int r = 0;

        if (u & AUTHORIZE_UNSAFE_FORCE)
                r = strv_extend(&l, "force=true");
        if (r >= 0 && (u & AUTHORIZE_UNSAFE_IMAGE_POLICY))
                r = push_assignment(&l, "image-policy", image_policy_to_string(o->policy),
                                    image_policy_to_string(c->policy));
        for (ImageClass k = 0; r >= 0 && (u & AUTHORIZE_UNSAFE_NOEXEC) && k < _IMAGE_CLASS_MAX; k++)
                if (engine_options_cover(o, k) && c->classes[k].noexec) {
                        char *n;

                        /* Named once, with the first class configured noexec. */
                        if (asprintf(&n, "noexec=false (configured: noexec for %s)", image_class_to_string(k)) < 0)
                                return NULL;
                        r = strv_push(&l, n);
                        break;
                }
        for (ImageClass k = 0; r >= 0 && k < _IMAGE_CLASS_MAX; k++)
                if (engine_options_cover(o, k) && requested_mutable_unsafe(c, o, k)) {
                        char key[32];

                        snprintf(key, sizeof(key), "%s-mutable", image_class_to_string(k));
                        r = push_assignment(&l, key, mutable_mode_to_string(o->mutable[k]),
                                    mutable_mode_to_string(c->classes[k].mutable));
                }
        if (r < 0)
                return NULL;
        return strv_join(l, ", ");
}

static int push_pair(char ***l, const char *key, const char *value) {
        int r = strv_extend(l, key);
        return r < 0 ? r : strv_extend(l, value ?: "");
}

static const char *true_false(bool b) {
        return b ? "true" : "false";
}

int authorize_details(const EngineConfig *c, EngineVerb verb, const EngineOptions *o, char ***ret) {
        _cleanup_strv_free_ char **l = NULL, **classes = NULL, **unsafe = NULL;
        _cleanup_free_ char *class_list = NULL, *unsafe_list = NULL;
        unsigned u = authorize_unsafe(c, o);
        int policy = o->policy >= 0 && o->policy < _IMAGE_POLICY_MAX ? o->policy : (int) c->policy;
        int r = 0;

        for (ImageClass k = 0; r >= 0 && k < _IMAGE_CLASS_MAX; k++)
                if (engine_options_cover(o, k))
                        r = strv_extend(&classes, image_class_to_string(k));
        if (r >= 0 && (u & AUTHORIZE_UNSAFE_FORCE))
                r = strv_extend(&unsafe, "force");
        if (r >= 0 && (u & AUTHORIZE_UNSAFE_IMAGE_POLICY))
                r = strv_extend(&unsafe, "image-policy");
        if (r >= 0 && (u & AUTHORIZE_UNSAFE_NOEXEC))
                r = strv_extend(&unsafe, "noexec");
        if (r >= 0 && (u & AUTHORIZE_UNSAFE_MUTABLE))
                r = strv_extend(&unsafe, "mutable");
        if (r < 0)
                return r;
        /* strv_join() of an empty list is "". */
        class_list = strv_join(classes, " ");
        unsafe_list = strv_join(unsafe, " ");
        if (!class_list || !unsafe_list)
                return -ENOMEM;

        r = push_pair(&l, "verb", engine_verb_to_string(verb));
        if (r >= 0)
                r = push_pair(&l, "class", class_list);
        if (r >= 0)
                r = push_pair(&l, "force", true_false(o->force));
        if (r >= 0)
                r = push_pair(&l, "always-refresh", true_false(o->always_refresh));
        if (r >= 0)
                r = push_pair(&l, "strict", true_false(o->strict));
        if (r >= 0)
                r = push_pair(&l, "no-reload", true_false(o->no_reload));
        if (r >= 0)
                r = push_pair(&l, "image-policy", image_policy_to_string(policy));
        if (r >= 0)
                r = push_pair(&l, "noexec", o->noexec < 0 ? "" : true_false(o->noexec > 0));
        for (ImageClass k = 0; r >= 0 && k < _IMAGE_CLASS_MAX; k++) {
                char key[32];
                int m = o->mutable[k] >= 0 && o->mutable[k] < _MUTABLE_MAX ? o->mutable[k] : (int) c->classes[k].mutable;

                if (!engine_options_cover(o, k))
                        continue;
                snprintf(key, sizeof(key), "%s-noexec", image_class_to_string(k));
                r = push_pair(&l, key, true_false(o->noexec >= 0 ? o->noexec > 0 : c->classes[k].noexec));
                if (r >= 0) {
                        snprintf(key, sizeof(key), "%s-mutable", image_class_to_string(k));
                        r = push_pair(&l, key, mutable_mode_to_string(m));
                }
        }
        if (r >= 0)
                r = push_pair(&l, "unsafe", unsafe_list);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(l);
        return 0;
}
