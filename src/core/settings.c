/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * sysextd.conf:
 *
 *   [Extensions]                 # system extensions, and what applies to both classes
 *   SearchPaths=/etc/extensions /run/extensions /var/lib/extensions
 *   Hierarchies=/usr /opt
 *   NoExec=no
 *   Mutable=no                   # yes, auto, import, ephemeral, ephemeral-import
 *   ImagePolicy=open             # or verity, signed
 *   TrustedCertificates=/etc/verity.d
 *   Strict=no
 *   Delay=0                      # seconds a transition waits for namespaces to commit (0: none)
 *   Generations=3                # generations the journal keeps for rollback (1-64)
 *   FollowMachines=no            # the daemon follows every machine of systemd-machined (follow.c)
 *   [ConfigurationExtensions]
 *   SearchPaths=/run/confexts /var/lib/confexts /usr/local/lib/confexts /usr/lib/confexts
 *   Hierarchies=/etc
 *   NoExec=yes
 *   Mutable=no
 *   [Kernel]
 *   DegradedMode=refuse          # or unmount-mount
 *   [Daemon]
 *   IdleTimeoutSec=30            # 0 or "infinity": stay
 *
 * The syntax is systemd's: [Section] headers, Key=Value lines, '#' and ';' comments, a line
 * ending in a backslash continued on the next one, an empty value resetting a setting to its
 * default.  Lines are of any length (the file is read whole, at most 1 MiB, never from a FIFO or
 * a device).  Paths are absolute and taken below --root.  Unknown sections and keys are errors,
 * so a typo never silently falls back to a default; every error names the file and line.
 * Configurations that cannot work are refused when they are read (config_validate()).
 */
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "fileio.h"
#include "overlay.h"
#include "settings.h"
#include "util.h"

#define CONFIG_FILE_MAX (1024 * 1024)

typedef struct Parser {
        EngineConfig *engine;
        DaemonConfig *daemon;
        const char *path;
        unsigned line;
        char *message;
} Parser;

static int parser_error(Parser *p, const char *fmt, ...) _printf_(2, 3);
static int parser_error(Parser *p, const char *fmt, ...) {
        _cleanup_free_ char *m = NULL, *safe_path = NULL;
        va_list ap;

        va_start(ap, fmt);
        if (vasprintf(&m, fmt, ap) < 0)
                m = NULL;
        va_end(ap);
        if (p->line > 0)
                return set_message(&p->message, EINVAL, "%s:%u: %s", string_safe(p->path, &safe_path), p->line,
                                   strna(m));
        return set_message(&p->message, EINVAL, "%s: %s", string_safe(p->path, &safe_path), strna(m));
}

static int parse_bool(const char *v, bool *ret) {
        int b = parse_boolean(v);

        if (b < 0)
                return b;
        *ret = b;
        return 0;
}

/* "/a//b/./" -> "a/b"; refuses relative paths and ".." components. */
static int normalize_path(const char *s, char **ret) {
        _cleanup_strv_free_ char **parts = NULL, **kept = NULL;
        char *joined;
        int r;

        if (s[0] != '/')
                return -EINVAL;
        r = strv_split(s, "/", &parts);
        if (r < 0)
                return r;
        kept = calloc(1, sizeof(char *));
        if (!kept)
                return -ENOMEM;
        STRV_FOREACH(c, parts) {
                if (streq(*c, ".."))
                        return -EINVAL;
                if (streq(*c, "."))
                        continue;
                r = strv_extend(&kept, *c);
                if (r < 0)
                        return r;
        }
        joined = strv_join(kept, "/");
        if (!joined)
                return -ENOMEM;
        *ret = joined; /* "" for "/" itself */
        return 0;
}

/* A list of absolute paths split at any of separators, normalized below the root; with
 * allow_root false, "/" itself is refused. */
static int parse_path_list(const char *v, const char *separators, bool allow_root, char ***ret) {
        _cleanup_strv_free_ char **l = NULL, **rel = NULL;
        int r;

        r = strv_split(v, separators, &l);
        if (r < 0)
                return r;
        if (strv_length(l) == 0)
                return -EINVAL;
        rel = calloc(1, sizeof(char *));
        if (!rel)
                return -ENOMEM;
        STRV_FOREACH(p, l) {
                char *n;

                if (!utf8_is_valid(*p) || string_has_control(*p))
                        return -EINVAL;
                r = normalize_path(*p, &n);
                if (r < 0)
                        return r;
                if (!allow_root && isempty(n)) {
                        free(n);
                        return -EINVAL;
                }
                r = strv_push(&rel, n);
                if (r < 0)
                        return r;
        }
        strv_free(*ret);
        *ret = TAKE_PTR(rel);
        return 0;
}

static int parse_paths(const char *v, char ***ret) {
        /* "/" is caught by config_validate(), with a message of its own. */
        return parse_path_list(v, " \t", true, ret);
}

static ImageClass section_class(const char *section) {
        return streq(section, "ConfigurationExtensions") ? IMAGE_CLASS_CONFEXT : IMAGE_CLASS_SYSEXT;
}

/* sysextd.conf's ImagePolicy= has the last word, over sysext.conf's and confext.conf's. */
static void set_policy(EngineConfig *c, ImagePolicy policy) {
        c->policy = policy;
        for (int k = 0; k < _IMAGE_CLASS_MAX; k++)
                c->classes[k].policy = -1;
}

static int set_default(Parser *p, const char *section, const char *key) {
        ClassConfig *c = &p->engine->classes[section_class(section)], *dc;
        EngineConfig d;
        int r = engine_config_default(&d);

        if (r < 0)
                return r;
        dc = &d.classes[section_class(section)];
        if (streq(key, "SearchPaths")) {
                strv_free(c->search_dirs);
                c->search_dirs = TAKE_PTR(dc->search_dirs);
        } else if (streq(key, "Hierarchies")) {
                strv_free(c->hierarchies);
                c->hierarchies = TAKE_PTR(dc->hierarchies);
        } else if (streq(key, "NoExec"))
                c->noexec = dc->noexec;
        else if (streq(key, "Mutable"))
                c->mutable = dc->mutable;
        else if (streq(key, "TrustedCertificates")) {
                free(p->engine->trusted_dir);
                p->engine->trusted_dir = TAKE_PTR(d.trusted_dir);
        } else if (streq(key, "ImagePolicy"))
                set_policy(p->engine, d.policy);
        else if (streq(key, "Strict"))
                p->engine->strict = d.strict;
        else if (streq(key, "DegradedMode"))
                p->engine->allow_degraded = d.allow_degraded;
        else if (streq(key, "Delay"))
                p->engine->delay_usec = d.delay_usec;
        else if (streq(key, "Generations"))
                p->engine->generations = d.generations;
        else if (streq(key, "FollowMachines"))
                p->daemon->follow_machines = false;
        else if (streq(key, "OnImageChange"))
                p->daemon->refresh_on_change = false;
        else if (streq(key, "IdleTimeoutSec"))
                p->daemon->idle_timeout_usec = CONFIG_DEFAULT_IDLE_TIMEOUT_USEC;
        engine_config_done(&d);
        return 0;
}

static const char *const known[][2] = {
        { "Extensions", "SearchPaths" },
        { "Extensions", "Hierarchies" },
        { "Extensions", "NoExec" },
        { "Extensions", "Mutable" },
        { "Extensions", "ImagePolicy" },
        { "Extensions", "TrustedCertificates" },
        { "Extensions", "Strict" },
        { "Extensions", "Delay" },
        { "Extensions", "Generations" },
        { "Extensions", "FollowMachines" },
        { "Extensions", "OnImageChange" },
        { "ConfigurationExtensions", "SearchPaths" },
        { "ConfigurationExtensions", "Hierarchies" },
        { "ConfigurationExtensions", "NoExec" },
        { "ConfigurationExtensions", "Mutable" },
        { "Kernel", "DegradedMode" },
        { "Daemon", "IdleTimeoutSec" },
};

static int assign(Parser *p, const char *section, const char *key, const char *value) {
        _cleanup_free_ char *safe_key = NULL, *safe_value = NULL, *safe_section = NULL;
        const char *what = NULL;
        bool found = false, b;
        int r = 0;

        for (size_t i = 0; i < ELEMENTSOF(known); i++)
                if (streq(section, known[i][0]) && streq(key, known[i][1]))
                        found = true;
        if (!found)
                return parser_error(p, "unknown setting %s= in [%s]", string_safe(key, &safe_key),
                                    string_safe(section, &safe_section));
        if (isempty(value))
                return set_default(p, section, key);

        ClassConfig *cc = &p->engine->classes[section_class(section)];

        if (streq(key, "SearchPaths"))
                r = parse_paths(value, &cc->search_dirs), what = "a list of absolute paths";
        else if (streq(key, "Hierarchies"))
                r = parse_paths(value, &cc->hierarchies), what = "a list of absolute paths";
        else if (streq(key, "Mutable")) {
                int m = mutable_mode_from_string(value);
                what = "no, yes, auto, import, ephemeral or ephemeral-import";
                r = m < 0 ? -EINVAL : 0;
                if (r >= 0)
                        cc->mutable = m;
        } else if (streq(key, "ImagePolicy")) {
                int policy = image_policy_parse(value);
                what = "'open', 'verity', 'signed' or a systemd image policy";
                r = policy < 0 ? -EINVAL : 0;
                if (r >= 0)
                        set_policy(p->engine, policy);
        } else if (streq(key, "TrustedCertificates")) {
                _cleanup_strv_free_ char **l = NULL;
                what = "one absolute directory";
                r = parse_paths(value, &l);
                if (r >= 0 && (strv_length(l) != 1 || isempty(l[0])))
                        r = -EINVAL;
                if (r >= 0) {
                        free(p->engine->trusted_dir);
                        p->engine->trusted_dir = TAKE_PTR(l[0]);
                }
        } else if (streq(key, "NoExec")) {
                r = parse_bool(value, &b), what = "a boolean";
                if (r >= 0)
                        cc->noexec = b;
        } else if (streq(key, "Strict")) {
                r = parse_bool(value, &b), what = "a boolean";
                if (r >= 0)
                        p->engine->strict = b;
        } else if (streq(key, "DegradedMode")) {
                what = "'refuse' or 'unmount-mount'";
                if (streq(value, "refuse"))
                        p->engine->allow_degraded = false;
                else if (streq(value, "unmount-mount"))
                        p->engine->allow_degraded = true;
                else
                        r = -EINVAL;
        } else if (streq(key, "Delay")) {
                uint64_t v;

                what = "a number of seconds, at most a year (0: no delay)";
                r = parse_seconds(value, JOURNAL_DELAY_MAX_USEC, &v);
                if (r >= 0)
                        p->engine->delay_usec = v;
        } else if (streq(key, "Generations")) {
                char *end;
                unsigned long v;

                what = "a number of generations from 1 to 64";
                errno = 0;
                v = strtoul(value, &end, 10);
                if (errno || end == value || *end || value[0] == '-' || v < 1 || v > JOURNAL_GENERATIONS_MAX)
                        r = -EINVAL;
                else
                        p->engine->generations = (unsigned) v;
        } else if (streq(key, "FollowMachines")) {
                r = parse_bool(value, &b), what = "a boolean";
                if (r >= 0)
                        p->daemon->follow_machines = b;
        } else if (streq(key, "OnImageChange")) {
                what = "'report' or 'refresh'";
                if (streq(value, "report"))
                        p->daemon->refresh_on_change = false;
                else if (streq(value, "refresh"))
                        p->daemon->refresh_on_change = true;
                else
                        r = -EINVAL;
        } else if (streq(key, "IdleTimeoutSec")) {
                char *end;
                unsigned long long v;

                what = "a number of seconds, 0 or 'infinity'";
                if (streq(value, "infinity"))
                        p->daemon->idle_timeout_usec = 0;
                else {
                        errno = 0;
                        v = strtoull(value, &end, 10);
                        if (errno || end == value || *end || value[0] == '-' || v > 86400ULL * 365)
                                r = -EINVAL;
                        else
                                p->daemon->idle_timeout_usec = v * 1000000ULL;
                }
        }
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return parser_error(p, "invalid value '%s' for %s= (expected %s)", string_safe(value, &safe_value), key, what);
        return 0;
}

/* Parses the text of a configuration file (NUL-terminated, size bytes). */
static int parse_text(Parser *p, const char *text, size_t size) {
        _cleanup_free_ char *section = NULL, *logical = NULL;
        const char *c = text, *end = text + size;
        unsigned physical = 0, first_line = 0;

        if (memchr(text, 0, size))
                return parser_error(p, "contains a NUL byte; not a configuration file");
        if (!utf8_is_valid(text))
                return parser_error(p, "is not valid UTF-8");

        while (c < end) {
                const char *nl = memchr(c, '\n', end - c);
                size_t n = nl ? (size_t) (nl - c) : (size_t) (end - c);
                _cleanup_free_ char *raw = strndup(c, n);
                char *l, *eq, *joined;
                bool continued;
                int r;

                c = nl ? nl + 1 : end;
                if (!raw)
                        return -ENOMEM;
                physical++;
                l = strstrip(raw);
                /* Comments and empty lines; they also end a continued line, as in systemd. */
                if (!logical && (*l == '#' || *l == ';' || *l == 0))
                        continue;
                if (!logical)
                        first_line = physical;
                continued = endswith(l, "\\");
                if (continued)
                        l[strlen(l) - 1] = 0;
                joined = strjoin3(logical ?: "", logical ? " " : "", l);
                if (!joined)
                        return -ENOMEM;
                free(logical);
                logical = joined;
                if (continued && c < end)
                        continue;

                /* Errors name the line the assignment starts on. */
                p->line = first_line;
                l = strstrip(logical);
                if (*l == '[') {
                        size_t k = strlen(l);
                        if (k < 3 || l[k - 1] != ']')
                                return parser_error(p, "invalid section header '%s'", l);
                        l[k - 1] = 0;
                        if (!STR_IN_SET(l + 1, "Extensions", "ConfigurationExtensions", "Kernel", "Daemon"))
                                return parser_error(p, "unknown section [%s]", l + 1);
                        free(section);
                        section = strdup(l + 1);
                        if (!section)
                                return -ENOMEM;
                } else {
                        eq = strchr(l, '=');
                        if (!eq)
                                return parser_error(p, "'%s' is neither a [Section] header nor a Key=Value assignment", l);
                        *eq = 0;
                        if (!section)
                                return parser_error(p, "%s= outside of any section", strstrip(l));
                        r = assign(p, section, strstrip(l), strstrip(eq + 1));
                        if (r < 0)
                                return r;
                }
                free(logical);
                logical = NULL;
        }
        p->line = 0;
        return 0;
}

/* What cannot work: refused with a message naming the setting. */
int config_validate(const EngineConfig *c, char **ret_message) {
        _cleanup_strv_free_ char **all = NULL;
        size_t n;

        for (int k = 0; k < _IMAGE_CLASS_MAX; k++)
                STRV_FOREACH(h, c->classes[k].hierarchies)
                        if (strv_extend(&all, *h) < 0)
                                return -ENOMEM;
        n = strv_length(all);
        if (strv_length(c->classes[IMAGE_CLASS_SYSEXT].hierarchies) == 0 &&
            strv_length(c->classes[IMAGE_CLASS_CONFEXT].hierarchies) == 0)
                return set_message(ret_message, EINVAL, "Hierarchies= is empty; nothing could be merged");
        if (n > HIERARCHIES_MAX)
                return set_message(ret_message, EINVAL, "Hierarchies= lists %zu hierarchies in all, at most %d are supported", n,
                                   HIERARCHIES_MAX);
        for (size_t i = 0; i < n; i++) {
                const char *h = all[i];

                if (isempty(h))
                        return set_message(ret_message, EINVAL,
                                           "Hierarchies= contains / itself: an overlay over the whole root would hide everything below it, sysextd's own state included");
                if (streq(h, "run") || startswith(h, "run/sysextd") || streq(h, "run/sysextd"))
                        return set_message(ret_message, EINVAL,
                                           "Hierarchies= contains /%s, which holds sysextd's own state (/run/sysextd); it cannot be merged over",
                                           h);
                for (size_t k = 0; k < n; k++) {
                        const char *o = all[k], *rest;

                        if (k == i)
                                continue;
                        if (streq(h, o))
                                return set_message(ret_message, EINVAL, "Hierarchies= lists /%s twice", h);
                        rest = startswith(o, h);
                        if (rest && *rest == '/')
                                return set_message(ret_message, EINVAL,
                                                   "Hierarchies= lists /%s and /%s: one lies inside the other, and a tree cannot be built over a hierarchy it is part of",
                                                   h, o);
                }
        }
        for (int k = 0; k < _IMAGE_CLASS_MAX; k++) {
                if (strv_length(c->classes[k].hierarchies) > 0 && strv_length(c->classes[k].search_dirs) == 0)
                        return set_message(ret_message, EINVAL, "SearchPaths= is empty; no image could be found");
                STRV_FOREACH(sd, c->classes[k].search_dirs)
                        if (isempty(*sd))
                                return set_message(ret_message, EINVAL, "SearchPaths= contains / itself, which is no image directory");
        }
        return 0;
}

/* systemd's sysext.conf / confext.conf, for a drop-in: Mutable= and ImagePolicy= of [SysExt] or [ConfExt],
 * read from the first of etc, run, usr/local/lib and usr/lib (systemd/NAME.conf) below the
 * root.  Read before sysextd.conf, which has the last word.  Like systemd, what it does not
 * know it ignores (with a warning), and a bad value too. */
static void read_systemd_conf(int root_fd, const char *name, const char *section, ClassConfig *cc) {
        static const char *const dirs[] = { "etc", "run", "usr/local/lib", "usr/lib" };
        _cleanup_free_ char *text = NULL, *path = NULL, *current = NULL;
        char *saveptr = NULL;

        for (size_t i = 0; i < ELEMENTSOF(dirs) && !text; i++) {
                free(path);
                if (asprintf(&path, "%s/systemd/%s", dirs[i], name) < 0)
                        return;
                if (read_file_at(root_fd, path, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS, CONFIG_FILE_MAX, &text, NULL, NULL) < 0)
                        text = NULL;
        }
        if (!text)
                return;
        for (char *line = strtok_r(text, "\n", &saveptr); line; line = strtok_r(NULL, "\n", &saveptr)) {
                char *l = strstrip(line), *eq, *value;
                int m;

                if (*l == '#' || *l == ';' || *l == 0)
                        continue;
                if (*l == '[') {
                        free(current);
                        current = strdup(l);
                        continue;
                }
                eq = strchr(l, '=');
                if (!eq || !current || strncmp(current + 1, section, strlen(section)) != 0 ||
                    !streq(current + 1 + strlen(section), "]"))
                        continue;
                *eq = 0;
                value = strstrip(eq + 1);
                if (streq(strstrip(l), "Mutable")) {
                        m = mutable_mode_from_string(value);
                        if (m >= 0)
                                cc->mutable = m;
                } else if (streq(strstrip(l), "ImagePolicy")) {
                        /* Empty: back to sysextd.conf's. */
                        m = isempty(value) ? -1 : image_policy_parse(value);
                        if (m >= 0 || isempty(value))
                                cc->policy = m;
                }
        }
}

int config_apply_environment(EngineConfig *c, char **ret_message) {
        static const char *const hier[_IMAGE_CLASS_MAX] = { "SYSTEMD_SYSEXT_HIERARCHIES", "SYSTEMD_CONFEXT_HIERARCHIES" };
        static const char *const mode[_IMAGE_CLASS_MAX] = { "SYSTEMD_SYSEXT_MUTABLE_MODE", "SYSTEMD_CONFEXT_MUTABLE_MODE" };
        static const char *const opts[_IMAGE_CLASS_MAX] = { "SYSTEMD_SYSEXT_OVERLAYFS_MOUNT_OPTIONS",
                                                            "SYSTEMD_CONFEXT_OVERLAYFS_MOUNT_OPTIONS" };
        int r;

        for (int k = 0; k < _IMAGE_CLASS_MAX; k++) {
                _cleanup_free_ char *safe = NULL;
                const char *v = getenv(hier[k]);
                int m;

                if (v) {
                        char **l = NULL;
                        /* "/usr:/opt": absolute, not "/", not empty. */
                        r = parse_path_list(v, ":", false, &l);
                        if (r == -ENOMEM)
                                return r;
                        if (r < 0)
                                return set_message(ret_message, EINVAL,
                                                   "Failed to parse %s environment variable '%s': a colon-separated list of absolute paths other than / is expected.",
                                                   hier[k], string_safe(v, &safe));
                        strv_free(c->classes[k].hierarchies);
                        c->classes[k].hierarchies = l;
                }
                v = getenv(mode[k]);
                if (v) {
                        m = mutable_mode_from_string(v);
                        if (m < 0)
                                fprintf(stderr, "Failed to parse %s environment variable value '%s'. Ignoring.\n", mode[k],
                                        string_safe(v, &safe));
                        else
                                c->classes[k].mutable = m;
                }
                v = getenv(opts[k]);
                if (v) {
                        _cleanup_free_ char *bad = NULL, *bad_safe = NULL;

                        if (!utf8_is_valid(v) || string_has_control(v))
                                return set_message(ret_message, EINVAL, "%s contains invalid characters.", opts[k]);
                        r = overlay_options_check(v, &bad);
                        if (r == -ENOMEM)
                                return r;
                        if (r < 0)
                                return set_message(ret_message, EINVAL,
                                                   "%s: option '%s' is not accepted: sysextd sets the layers, the upper and work directory and the source itself; give only options such as metacopy=on or xino=off.",
                                                   opts[k], string_safe(strempty(bad), &bad_safe));
                        free(c->classes[k].overlay_options);
                        c->classes[k].overlay_options = strdup(v);
                        if (!c->classes[k].overlay_options)
                                return -ENOMEM;
                }
        }
        return config_validate(c, ret_message);
}

int config_load(int root_fd, const char *root, const char *path, EngineConfig *ret, DaemonConfig *ret_daemon,
                char **ret_message) {
        _cleanup_free_ char *default_path = NULL, *text = NULL, *safe = NULL;
        _cleanup_(engine_config_done) EngineConfig c = {};
        DaemonConfig d = { .idle_timeout_usec = CONFIG_DEFAULT_IDLE_TIMEOUT_USEC };
        Parser p = { .engine = &c, .daemon = &d };
        size_t size = 0;
        mode_t mode = 0;
        int r;

        r = engine_config_default(&c);
        if (r < 0)
                return r;
        read_systemd_conf(root_fd, "sysext.conf", "SysExt", &c.classes[IMAGE_CLASS_SYSEXT]);
        read_systemd_conf(root_fd, "confext.conf", "ConfExt", &c.classes[IMAGE_CLASS_CONFEXT]);

        if (path) {
                /* A file named on the command line: resolved as the caller would, but read
                 * like any other (no FIFO, no device, bounded). */
                p.path = path;
                r = read_file_at(AT_FDCWD, path, 0, CONFIG_FILE_MAX, &text, &size, &mode);
        } else {
                default_path = path_join(root ?: "/", CONFIG_DEFAULT_PATH);
                if (!default_path)
                        return -ENOMEM;
                p.path = default_path;
                r = read_file_at(root_fd, CONFIG_DEFAULT_PATH, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS, CONFIG_FILE_MAX, &text,
                                 &size, &mode);
                if (r == -ENOENT)
                        goto done; /* no configuration: defaults */
        }
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return set_message(ret_message, r, "Failed to read the configuration %s: it %s", string_safe(p.path, &safe),
                                   READ_ERROR_STRING(r, mode, CONFIG_FILE_MAX));

        r = parse_text(&p, text, size);
        if (r < 0) {
                if (ret_message) {
                        free(*ret_message);
                        *ret_message = TAKE_PTR(p.message);
                }
                free(p.message);
                return r;
        }
done:
        r = config_validate(&c, &p.message);
        if (r < 0) {
                r = set_message(ret_message, r, "%s: %s", string_safe(p.path, &safe), p.message);
                free(p.message);
                return r;
        }
        *ret = c;
        c = (EngineConfig) {};
        if (ret_daemon)
                *ret_daemon = d;
        return 0;
}

int config_parse_string(const char *name, const char *text, EngineConfig *ret, DaemonConfig *ret_daemon,
                        char **ret_message) {
        _cleanup_(engine_config_done) EngineConfig c = {};
        DaemonConfig d = { .idle_timeout_usec = CONFIG_DEFAULT_IDLE_TIMEOUT_USEC };
        Parser p = { .engine = &c, .daemon = &d, .path = name };
        int r;

        r = engine_config_default(&c);
        if (r < 0)
                return r;
        r = parse_text(&p, text, strlen(text));
        if (r >= 0)
                r = config_validate(&c, &p.message);
        if (r < 0) {
                if (ret_message) {
                        free(*ret_message);
                        *ret_message = TAKE_PTR(p.message);
                }
                free(p.message);
                return r;
        }
        *ret = c;
        c = (EngineConfig) {};
        if (ret_daemon)
                *ret_daemon = d;
        return 0;
}
