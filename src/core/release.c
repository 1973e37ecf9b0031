/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * os-release / extension-release parsing and matching.
 *
 * The rules follow systemd-sysext so that its images are accepted as they are:
 *   1. SYSEXT_SCOPE, when present, must contain "system";
 *   2. ID must be "_any", equal to the host's ID, or (as in systemd 258) one of the host's
 *      ID_LIKE words;
 *   3. when ID is not "_any": SYSEXT_LEVEL is compared when both sides have it, otherwise
 *      VERSION_ID is compared when the extension has it (a host without either matches on ID);
 *   4. ARCHITECTURE, when present, must be "_any" or this machine's architecture.
 */
#include <ctype.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>

#include "fileio.h"
#include "release.h"
#include "util.h"

void release_done(Release *r) {
        free(r->id);
        strv_free(r->id_like);
        free(r->version_id);
        free(r->sysext_level);
        free(r->architecture);
        strv_free(r->sysext_scope);
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
                        free(r.sysext_level), r.sysext_level = TAKE_PTR(value);
                else if (streq(key, "ARCHITECTURE"))
                        free(r.architecture), r.architecture = TAKE_PTR(value);
                else if (streq(key, "ID_LIKE")) {
                        strv_free(r.id_like), r.id_like = NULL;
                        k = strv_split(value, " \t", &r.id_like);
                        if (k < 0)
                                return k;
                } else if (streq(key, "SYSEXT_SCOPE")) {
                        strv_free(r.sysext_scope), r.sysext_scope = NULL;
                        k = strv_split(value, " \t", &r.sysext_scope);
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

                r = read_file_at(root_fd, paths[i], RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS, 64 * 1024, &text, NULL, NULL);
                if (r == -ENOENT)
                        continue;
                if (r < 0)
                        return r;
                return release_parse(text, ret);
        }
        return r;
}

const char *release_native_architecture(void) {
        static const struct {
                const char *machine, *arch;
        } table[] = {
                { "x86_64", "x86-64" },   { "i686", "x86" },       { "i586", "x86" },
                { "i386", "x86" },        { "aarch64", "arm64" },  { "aarch64_be", "arm64-be" },
                { "armv7l", "arm" },      { "armv8l", "arm" },     { "ppc64le", "ppc64-le" },
                { "ppc64", "ppc64" },     { "s390x", "s390x" },    { "riscv64", "riscv64" },
                { "loongarch64", "loongarch64" }, { "mips64", "mips64" },
        };
        static struct utsname u;

        if (uname(&u) < 0)
                return "unknown";
        for (size_t i = 0; i < ELEMENTSOF(table); i++)
                if (streq(u.machine, table[i].machine))
                        return table[i].arch;
        return u.machine;
}

int release_match(const Release *host, const Release *ext, char **ret_reason) {
        if (ext->sysext_scope && !strv_contains(ext->sysext_scope, "system")) {
                _cleanup_free_ char *s = strv_join(ext->sysext_scope, " ");
                return set_message(ret_reason, 0, "SYSEXT_SCOPE=%s does not include 'system'", strna(s));
        }

        if (ext->architecture && !streq(ext->architecture, "_any") &&
            !streq(ext->architecture, release_native_architecture()))
                return set_message(ret_reason, 0, "ARCHITECTURE=%s does not match this machine (%s)",
                                ext->architecture, release_native_architecture());

        if (!ext->id)
                return set_message(ret_reason, 0, "extension-release has no ID=");
        if (streq(ext->id, "_any"))
                return 1;

        if (!host->id || (!streq(ext->id, host->id) && !strv_contains(host->id_like, ext->id)))
                return set_message(ret_reason, 0, "ID=%s does not match host ID=%s", ext->id, strna(host->id));

        if (ext->sysext_level && host->sysext_level) {
                if (!streq(ext->sysext_level, host->sysext_level))
                        return set_message(ret_reason, 0, "SYSEXT_LEVEL=%s does not match host SYSEXT_LEVEL=%s",
                                        ext->sysext_level, host->sysext_level);
                return 1;
        }

        /* A host without VERSION_ID (rolling releases) matches on ID and, where both sides
         * have it, SYSEXT_LEVEL alone. */
        if (!host->version_id)
                return 1;

        if (!ext->version_id)
                return set_message(ret_reason, 0, "extension-release has neither a matching SYSEXT_LEVEL nor VERSION_ID (host VERSION_ID=%s)",
                                host->version_id);

        if (!streq(ext->version_id, host->version_id))
                return set_message(ret_reason, 0, "VERSION_ID=%s does not match host VERSION_ID=%s",
                                ext->version_id, host->version_id);
        return 1;
}
