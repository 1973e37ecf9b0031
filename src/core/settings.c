/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * sysextd.conf:
 *
 *   [Extensions]
 *   SearchPaths=/etc/extensions /run/extensions /var/lib/extensions
 *   Hierarchies=/usr /opt
 *   ImagePolicy=open             # or verity, signed
 *   TrustedCertificates=/etc/verity.d
 *   NoExec=no
 *   Strict=no
 *   [Kernel]
 *   DegradedMode=refuse          # or unmount-mount
 *   [Daemon]
 *   IdleTimeoutSec=30            # 0 or "infinity": stay
 *
 * Paths are absolute and taken below --root.  Unknown sections and keys are errors, so a
 * typo never silently falls back to a default.  The handler keeps only the first error;
 * libinih reports the line it was on.
 */
#include <ini.h>
#include <stdio.h>
#include <string.h>

#include "settings.h"
#include "util.h"

typedef struct Parser {
        EngineConfig *engine;
        DaemonConfig *daemon;
        char *message;
        const char *path;
} Parser;

static int parse_bool(const char *v, bool *ret) {
        if (STR_IN_SET(v, "1", "yes", "true", "on"))
                *ret = true;
        else if (STR_IN_SET(v, "0", "no", "false", "off"))
                *ret = false;
        else
                return -EINVAL;
        return 0;
}

static int parse_paths(const char *v, char ***ret) {
        _cleanup_strv_free_ char **l = NULL, **rel = NULL;
        int r;

        r = strv_split(v, " \t", &l);
        if (r < 0)
                return r;
        if (strv_length(l) == 0)
                return -EINVAL;
        rel = calloc(1, sizeof(char *));
        if (!rel)
                return -ENOMEM;
        STRV_FOREACH(p, l) {
                const char *s = *p;
                if (s[0] != '/' || strstr(s, "/../") || endswith(s, "/.."))
                        return -EINVAL;
                while (*s == '/')
                        s++;
                if (!*s)
                        return -EINVAL;
                r = strv_extend(&rel, s);
                if (r < 0)
                        return r;
                /* Drop a trailing slash. */
                if (endswith(rel[strv_length(rel) - 1], "/"))
                        rel[strv_length(rel) - 1][strlen(rel[strv_length(rel) - 1]) - 1] = 0;
        }
        strv_free(*ret);
        *ret = TAKE_PTR(rel);
        return 0;
}

static int handler(void *userdata, const char *section, const char *key, const char *value) {
        Parser *p = userdata;
        const char *what = NULL;
        bool b;
        int r = 0;

        if (streq(section, "Extensions")) {
                if (streq(key, "SearchPaths"))
                        r = parse_paths(value, &p->engine->search_dirs), what = "a list of absolute paths";
                else if (streq(key, "Hierarchies")) {
                        r = parse_paths(value, &p->engine->hierarchies), what = "a list of absolute paths";
                        if (r >= 0 && strv_length(p->engine->hierarchies) > 8)
                                r = -EINVAL, what = "at most 8 hierarchies";
                } else if (streq(key, "ImagePolicy")) {
                        int policy = image_policy_from_string(value);
                        what = "'open', 'verity' or 'signed'";
                        r = policy < 0 ? -EINVAL : 0;
                        if (r >= 0)
                                p->engine->policy = policy;
                } else if (streq(key, "TrustedCertificates")) {
                        _cleanup_strv_free_ char **l = NULL;
                        what = "one absolute directory";
                        r = parse_paths(value, &l);
                        if (r >= 0 && strv_length(l) != 1)
                                r = -EINVAL;
                        if (r >= 0) {
                                free(p->engine->trusted_dir);
                                p->engine->trusted_dir = TAKE_PTR(l[0]); /* l is now empty */
                        }
                } else if (streq(key, "NoExec")) {
                        r = parse_bool(value, &b), what = "a boolean";
                        if (r >= 0)
                                p->engine->noexec = b;
                } else if (streq(key, "Strict")) {
                        r = parse_bool(value, &b), what = "a boolean";
                        if (r >= 0)
                                p->engine->strict = b;
                } else
                        goto unknown;
        } else if (streq(section, "Kernel")) {
                if (streq(key, "DegradedMode")) {
                        what = "'refuse' or 'unmount-mount'";
                        if (streq(value, "refuse"))
                                p->engine->allow_degraded = false;
                        else if (streq(value, "unmount-mount"))
                                p->engine->allow_degraded = true;
                        else
                                r = -EINVAL;
                } else
                        goto unknown;
        } else if (streq(section, "Daemon")) {
                if (streq(key, "IdleTimeoutSec")) {
                        char *end;
                        unsigned long long v;

                        what = "a number of seconds, 0 or 'infinity'";
                        if (streq(value, "infinity"))
                                p->daemon->idle_timeout_usec = 0;
                        else {
                                errno = 0;
                                v = strtoull(value, &end, 10);
                                if (errno || end == value || *end || v > 86400ULL * 365)
                                        r = -EINVAL;
                                else
                                        p->daemon->idle_timeout_usec = v * 1000000ULL;
                        }
                } else
                        goto unknown;
        } else {
                if (asprintf(&p->message, "unknown section [%s]", section) < 0)
                        p->message = NULL;
                return 0;
        }

        if (r == -ENOMEM && !p->message)
                p->message = strdup("out of memory");
        if (r < 0 && !p->message &&
            asprintf(&p->message, "invalid value '%s' for %s= (expected %s)", value, key, what) < 0)
                p->message = NULL;
        return r < 0 ? 0 : 1;

unknown:
        if (!p->message && asprintf(&p->message, "unknown setting %s= in [%s]", key, section) < 0)
                p->message = NULL;
        return 0;
}

int config_load(const char *root, const char *path, EngineConfig *ret, DaemonConfig *ret_daemon, char **ret_message) {
        _cleanup_free_ char *default_path = NULL;
        EngineConfig c;
        DaemonConfig d = { .idle_timeout_usec = CONFIG_DEFAULT_IDLE_TIMEOUT_USEC };
        Parser p = { .engine = &c, .daemon = &d };
        FILE *f;
        int r;

        r = engine_config_default(&c);
        if (r < 0)
                return r;

        if (!path) {
                default_path = path_join(root ?: "/", CONFIG_DEFAULT_PATH);
                if (!default_path) {
                        engine_config_done(&c);
                        return -ENOMEM;
                }
        }
        p.path = path ?: default_path;

        f = fopen(p.path, "re");
        if (!f) {
                r = negative_errno();
                if (r == -ENOENT && !path)
                        goto done; /* no configuration: defaults */
                engine_config_done(&c);
                if (asprintf(ret_message, "Failed to open configuration %s: %s", p.path, strerror(-r)) < 0)
                        *ret_message = NULL;
                return r;
        }
        r = ini_parse_file(f, handler, &p);
        fclose(f);
        if (r != 0 || p.message) {
                /* libinih returns the number of the first line it or the handler refused. */
                engine_config_done(&c);
                if (asprintf(ret_message, "%s:%d: %s", p.path, r, p.message ?: "syntax error") < 0)
                        *ret_message = NULL;
                free(p.message);
                return -EINVAL;
        }

done:
        *ret = c;
        if (ret_daemon)
                *ret_daemon = d;
        return 0;
}
