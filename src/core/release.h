/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>

/* os-release and extension-release files: parsing, and the compatibility rules of
 * systemd-sysext, so that images built for it work here unchanged. */

typedef struct Release {
        char *id;
        char **id_like;
        char *version_id;
        char *sysext_level;
        char *architecture;
        char **sysext_scope; /* NULL when the key is absent */
} Release;

void release_done(Release *r);
#define _cleanup_release_ _cleanup_(release_done)

/* Parses the KEY=VALUE format of os-release(5): '#' comments, single or double quotes, and
 * backslash escapes inside double quotes. Unknown keys are ignored. */
int release_parse(const char *text, Release *ret);

/* Reads the host's os-release below root_fd: usr/lib/os-release, else etc/os-release. */
int release_read_host(int root_fd, Release *ret);

/* The architecture name systemd uses for this machine ("x86-64", "arm64", ...). */
const char *release_native_architecture(void);

/* Decides whether an extension fits the host. Returns 1 when compatible, 0 when not (and
 * *ret_reason says why, in words for a person), < 0 on error. */
int release_match(const Release *host, const Release *ext, char **ret_reason);
