/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * os-release / extension-release parsing and matching.
 *
 * The rules follow systemd-sysext and systemd-confext so that their images are accepted as they
 * are, in this order (X is SYSEXT or CONFEXT, by the image's class):
 *   1. X_SCOPE (default "system portable") must contain the host's scope: "initrd" when the
 *      root has etc/initrd-release, else "system";
 *   2. ARCHITECTURE, when present, must be "_any" or this machine's architecture;
 *   3. ID must be present; "_any" matches any host without further checks;
 *   4. ID must equal the host's ID, be one of the host's ID_LIKE words (systemd 258), or the
 *      extension's ID_LIKE must name the host's ID (sysextd; an extension built for a
 *      derivative that says what it is like);
 *   5. X_LEVEL is compared when both sides have it; otherwise a host with VERSION_ID needs the
 *      same VERSION_ID; a host with neither matches on ID alone.
 * Comparisons are exact ("40" is not "40.0").
 */
#include <ctype.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>

#include "fd-util.h"
#include "fileio.h"
#include "release.h"
#include "util.h"

void release_done(Release *r) {
        free(r->id);
        strv_free(r->id_like);
        free(r->version_id);
        free(r->architecture);
        for (int c = 0; c < _IMAGE_CLASS_MAX; c++) {
                free(r->level[c]);
                strv_free(r->scope[c]);
        }
        free(r->reload_manager);
        strv_free(r->restart_units);
        strv_free(r->reload_or_restart_units);
        *r = (Release) {};
}

static int unquote(const char *v, char **ret) {
        _cleanup_free_ char *out = malloc(strlen(v) + 1);
        char *o = out, quote = 0;

        if (!out)
                return -ENOMEM;
        for (; *v; v++) {
                if (quote) {
                        if (*v == quote) {
                                quote = 0;
                                continue;
                        }
                        if (quote == '"' && *v == '\\' && v[1] && strchr("\"\\$`", v[1]))
                                v++;
                        *o++ = *v;
                } else if (*v == '"' || *v == '\'') {
                        quote = *v;
                } else if (*v == '\\' && v[1]) {
                        *o++ = *++v;
                } else
                        *o++ = *v;
        }
        if (quote)
                return -EBADMSG;
        *o = 0;
        *ret = TAKE_PTR(out);
        return 0;
}

int release_parse(const char *text, Release *ret) {
        _cleanup_release_ Release r = {};
        _cleanup_free_ char *copy = strdup(text);
        char *saveptr = NULL;

        if (!copy)
                return -ENOMEM;

        for (char *line = strtok_r(copy, "\n", &saveptr); line; line = strtok_r(NULL, "\n", &saveptr)) {
                _cleanup_free_ char *value = NULL;
                char *key, *eq;
                int k;

                key = strstrip(line);
                if (*key == 0 || *key == '#')
                        continue;
                eq = strchr(key, '=');
                if (!eq)
                        continue; /* os-release(5): lines that are not assignments are ignored */
                *eq = 0;
                key = strstrip(key);
                k = unquote(strstrip(eq + 1), &value);
                if (k < 0)
                        return k;

                if (streq(key, "ID"))
                        free(r.id), r.id = TAKE_PTR(value);
                else if (streq(key, "VERSION_ID"))
                        free(r.version_id), r.version_id = TAKE_PTR(value);
                else if (streq(key, "SYSEXT_LEVEL"))
                        free(r.level[IMAGE_CLASS_SYSEXT]), r.level[IMAGE_CLASS_SYSEXT] = TAKE_PTR(value);
                else if (streq(key, "CONFEXT_LEVEL"))
                        free(r.level[IMAGE_CLASS_CONFEXT]), r.level[IMAGE_CLASS_CONFEXT] = TAKE_PTR(value);
                else if (streq(key, "ARCHITECTURE"))
                        free(r.architecture), r.architecture = TAKE_PTR(value);
                else if (streq(key, "EXTENSION_RELOAD_MANAGER"))
                        free(r.reload_manager), r.reload_manager = TAKE_PTR(value);
                else {
                        char ***list = streq(key, "ID_LIKE")                             ? &r.id_like
                                       : streq(key, "SYSEXT_SCOPE")                      ? &r.scope[IMAGE_CLASS_SYSEXT]
                                       : streq(key, "CONFEXT_SCOPE")                     ? &r.scope[IMAGE_CLASS_CONFEXT]
                                       : streq(key, "EXTENSION_RESTART_UNITS")           ? &r.restart_units
                                       : streq(key, "EXTENSION_RELOAD_OR_RESTART_UNITS") ? &r.reload_or_restart_units
                                                                                         : NULL;
                        if (!list)
                                continue;
                        strv_free(*list), *list = NULL;
                        k = strv_split(value, " \t", list);
                        if (k < 0)
                                return k;
                }
        }
        *ret = r;
        r = (Release) {};
        return 0;
}

int release_read_host(int root_fd, Release *ret) {
        static const char *const paths[] = { "usr/lib/os-release", "etc/os-release" };
        int r = -ENOENT;

        for (size_t i = 0; i < ELEMENTSOF(paths); i++) {
                _cleanup_free_ char *text = NULL;
                int fd;

                r = read_file_at(root_fd, paths[i], RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS, 64 * 1024, &text, NULL, NULL);
                if (r == -ENOENT)
                        continue;
                if (r < 0)
                        return r;
                r = release_parse(text, ret);
                if (r < 0)
                        return r;
                fd = openat_resolve(root_fd, "etc/initrd-release", O_PATH, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
                ret->initrd = fd >= 0;
                safe_close(fd);
                return 0;
        }
        return r;
}

static char native_architecture[sizeof(((struct utsname *) 0)->machine)];
static pthread_once_t native_architecture_once = PTHREAD_ONCE_INIT;

static void native_architecture_init(void) {
        static const struct {
                const char *machine, *arch;
        } table[] = {
                { "x86_64", "x86-64" },   { "i686", "x86" },       { "i586", "x86" },
                { "i386", "x86" },        { "aarch64", "arm64" },  { "aarch64_be", "arm64-be" },
                { "armv7l", "arm" },      { "armv8l", "arm" },     { "ppc64le", "ppc64-le" },
                { "ppc64", "ppc64" },     { "s390x", "s390x" },    { "riscv64", "riscv64" },
                { "loongarch64", "loongarch64" }, { "mips64", "mips64" },
        };
        struct utsname u;
        const char *arch = "unknown";

        if (uname(&u) >= 0) {
                arch = u.machine;
                for (size_t i = 0; i < ELEMENTSOF(table); i++)
                        if (streq(u.machine, table[i].machine)) {
                                arch = table[i].arch;
                                break;
                        }
        }
        snprintf(native_architecture, sizeof(native_architecture), "%s", arch);
}

/* Worked out once: the probe matches release files on several threads (image.c). */
const char *release_native_architecture(void) {
        (void) pthread_once(&native_architecture_once, native_architecture_init);
        return native_architecture;
}

int release_match(const Release *host, const Release *ext, ImageClass klass, char **ret_reason) {
        static const char *const level_key[_IMAGE_CLASS_MAX] = { "SYSEXT_LEVEL", "CONFEXT_LEVEL" };
        static const char *const scope_key[_IMAGE_CLASS_MAX] = { "SYSEXT_SCOPE", "CONFEXT_SCOPE" };
        static char *const default_scope[] = { (char *) "system", (char *) "portable", NULL };
        const char *host_scope = host->initrd ? "initrd" : "system";
        char *const *scope = ext->scope[klass] ?: default_scope;
        const char *ext_level = ext->level[klass], *host_level = host->level[klass];

        if (!strv_contains(scope, host_scope)) {
                _cleanup_free_ char *s = strv_join(scope, " ");
                return set_message(ret_reason, 0, "%s=%s does not include '%s'%s", scope_key[klass], strna(s), host_scope,
                                   ext->scope[klass] ? "" : " (the default)");
        }

        if (ext->architecture && !streq(ext->architecture, "_any") &&
            !streq(ext->architecture, release_native_architecture()))
                return set_message(ret_reason, 0, "ARCHITECTURE=%s does not match this machine (%s)",
                                ext->architecture, release_native_architecture());

        if (!ext->id)
                return set_message(ret_reason, 0, "extension-release has no ID=");
        if (streq(ext->id, "_any"))
                return 1;

        if (!host->id || (!streq(ext->id, host->id) && !strv_contains(host->id_like, ext->id) &&
                          !strv_contains(ext->id_like, host->id)))
                return set_message(ret_reason, 0, "ID=%s does not match host ID=%s", ext->id, strna(host->id));

        if (ext_level && host_level) {
                if (!streq(ext_level, host_level))
                        return set_message(ret_reason, 0, "%s=%s does not match host %s=%s", level_key[klass], ext_level,
                                           level_key[klass], host_level);
                return 1;
        }

        /* A host without VERSION_ID (rolling releases) matches on ID and, where both sides
         * have it, the level alone. */
        if (!host->version_id)
                return 1;

        if (!ext->version_id)
                return set_message(ret_reason, 0, "extension-release has neither a matching %s nor VERSION_ID (host VERSION_ID=%s)",
                                   level_key[klass], host->version_id);

        if (!streq(ext->version_id, host->version_id))
                return set_message(ret_reason, 0, "VERSION_ID=%s does not match host VERSION_ID=%s",
                                ext->version_id, host->version_id);
        return 1;
}
