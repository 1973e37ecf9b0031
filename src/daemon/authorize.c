/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Which polkit action a transition needs and what polkit is told about it, and what it is told
 * about Follow and Unfollow (authorize.h).
 * Pure functions of the options and the configuration; bus-service.c asks polkit.
 */
#include <errno.h>
#include <inttypes.h>
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

/* The first covered class whose configured image policy (its own, from sysext.conf or
 * confext.conf, else sysextd.conf's) the requested one is weaker than, or -1.  IMAGE_POLICY_*
 * are in order: each allows a subset of what the one before allows. */
static int policy_weakened_class(const EngineConfig *c, const EngineOptions *o) {
        if (o->policy < 0 || o->policy >= _IMAGE_POLICY_MAX)
                return -1;
        for (ImageClass k = 0; k < _IMAGE_CLASS_MAX; k++)
                if (engine_options_cover(o, k) && (ImagePolicy) o->policy < engine_class_policy(c, NULL, k))
                        return k;
        return -1;
}

/* The first covered class configured noexec, or -1. */
static int noexec_class(const EngineConfig *c, const EngineOptions *o) {
        for (ImageClass k = 0; k < _IMAGE_CLASS_MAX; k++)
                if (engine_options_cover(o, k) && c->classes[k].noexec)
                        return k;
        return -1;
}

unsigned authorize_unsafe(const EngineConfig *c, const EngineOptions *o) {
        unsigned u = 0;

        if (o->force)
                u |= AUTHORIZE_UNSAFE_FORCE;
        if (policy_weakened_class(c, o) >= 0)
                u |= AUTHORIZE_UNSAFE_IMAGE_POLICY;
        if (o->noexec == 0 && noexec_class(c, o) >= 0)
                u |= AUTHORIZE_UNSAFE_NOEXEC;
        for (ImageClass k = 0; k < _IMAGE_CLASS_MAX; k++)
                if (engine_options_cover(o, k) && requested_mutable_unsafe(c, o, k))
                        u |= AUTHORIZE_UNSAFE_MUTABLE;
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
        if (r >= 0 && (u & AUTHORIZE_UNSAFE_IMAGE_POLICY)) {
                int k = policy_weakened_class(c, o);
                char *configured;

                if (asprintf(&configured, "%s for %s", image_policy_to_string(engine_class_policy(c, NULL, k)),
                             image_class_to_string(k)) < 0)
                        return NULL;
                r = push_assignment(&l, "image-policy", image_policy_to_string(o->policy), configured);
                free(configured);
        }
        if (r >= 0 && (u & AUTHORIZE_UNSAFE_NOEXEC)) {
                char *n;

                /* Named once, with the first class configured noexec. */
                if (asprintf(&n, "noexec=false (configured: noexec for %s)", image_class_to_string(noexec_class(c, o))) < 0)
                        return NULL;
                r = strv_push(&l, n);
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
        int policy = -1, r = 0;

        /* "image-policy": the weakest in force for a covered class. */
        for (ImageClass k = 0; k < _IMAGE_CLASS_MAX; k++)
                if (engine_options_cover(o, k) && (policy < 0 || (int) engine_class_policy(c, o, k) < policy))
                        policy = engine_class_policy(c, o, k);

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
        if (r >= 0 && verb == ENGINE_ROLLBACK) {
                char buf[32];

                snprintf(buf, sizeof(buf), "%" PRIu64, o->rollback_to);
                r = push_pair(&l, "generation", buf);
                if (r >= 0)
                        r = push_pair(&l, "unpin", true_false(o->unpin));
        }
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

                if (!engine_options_cover(o, k))
                        continue;
                snprintf(key, sizeof(key), "%s-image-policy", image_class_to_string(k));
                r = push_pair(&l, key, image_policy_to_string(engine_class_policy(c, o, k)));
                if (r >= 0) {
                        snprintf(key, sizeof(key), "%s-noexec", image_class_to_string(k));
                        r = push_pair(&l, key, true_false(engine_class_noexec(c, o, k)));
                }
                if (r >= 0) {
                        snprintf(key, sizeof(key), "%s-mutable", image_class_to_string(k));
                        r = push_pair(&l, key, mutable_mode_to_string(engine_class_mutable(c, o, k)));
                }
        }
        if (r >= 0)
                r = push_pair(&l, "unsafe", unsafe_list);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(l);
        return 0;
}

int authorize_follow_details(bool follow, pid_t pid, char ***ret) {
        _cleanup_strv_free_ char **l = NULL;
        char buf[16];
        int r;

        snprintf(buf, sizeof(buf), "%i", (int) pid);
        r = push_pair(&l, "verb", follow ? "follow" : "unfollow");
        if (r >= 0)
                r = push_pair(&l, "pid", buf);
        if (r >= 0)
                r = push_pair(&l, "unsafe", "");
        if (r < 0)
                return r;
        *ret = TAKE_PTR(l);
        return 0;
}

int authorize_confirm_details(char ***ret) {
        _cleanup_strv_free_ char **l = NULL;
        int r;

        r = push_pair(&l, "verb", "confirm");
        if (r >= 0)
                r = push_pair(&l, "unsafe", "");
        if (r < 0)
                return r;
        *ret = TAKE_PTR(l);
        return 0;
}

int authorize_commit_details(pid_t pid, const char *unit, char ***ret) {
        _cleanup_strv_free_ char **l = NULL;
        char buf[16] = "";
        int r;

        if (pid > 0)
                snprintf(buf, sizeof(buf), "%i", (int) pid);
        r = push_pair(&l, "verb", "commit");
        if (r >= 0)
                r = push_pair(&l, "pid", buf);
        if (r >= 0)
                r = push_pair(&l, "unit", unit ?: "");
        if (r >= 0)
                r = push_pair(&l, "unsafe", "");
        if (r < 0)
                return r;
        *ret = TAKE_PTR(l);
        return 0;
}
