/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>


/* os-release and extension-release files: parsing, and the compatibility rules of
 * systemd-sysext, so that images built for it work here unchanged. */

#include "image-class.h"

typedef struct Release {
        char *id;
        char **id_like;
        char *version_id;
        char *level[_IMAGE_CLASS_MAX];  /* SYSEXT_LEVEL, CONFEXT_LEVEL */
        char *architecture;
        char **scope[_IMAGE_CLASS_MAX]; /* SYSEXT_SCOPE, CONFEXT_SCOPE; NULL when absent */
        /* Extensions that ship units (extension-release only). */
        char *reload_manager;           /* EXTENSION_RELOAD_MANAGER= as written */
        char **restart_units;           /* EXTENSION_RESTART_UNITS= */
        char **reload_or_restart_units; /* EXTENSION_RELOAD_OR_RESTART_UNITS= */
        /* The host's: the root is an initrd (etc/initrd-release exists). */
        bool initrd;
} Release;

void release_done(Release *r);
#define _cleanup_release_ _cleanup_(release_done)

/* Parses the KEY=VALUE format of os-release(5): '#' comments, single or double quotes, and
 * backslash escapes inside double quotes. Unknown keys are ignored. */
int release_parse(const char *text, Release *ret);

/* Reads the host's os-release below root_fd: usr/lib/os-release, else etc/os-release (not
 * the other way round as systemd does: no extension can replace usr/lib/os-release, while a
 * configuration extension could ship etc/os-release), and whether the root is an initrd. */
int release_read_host(int root_fd, Release *ret);

/* The architecture name systemd uses for this machine ("x86-64", "arm64", ...). */
const char *release_native_architecture(void);

/* Decides whether an extension of class klass fits the host. Returns 1 when compatible, 0 when
 * not (and *ret_reason says why, in words for a person), < 0 on error. */
int release_match(const Release *host, const Release *ext, ImageClass klass, char **ret_reason);
