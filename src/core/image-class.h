/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The two kinds of extension: system extensions (/usr, /opt) and configuration extensions
 * (/etc), as systemd-sysext and systemd-confext have them. */
typedef enum ImageClass {
        IMAGE_CLASS_SYSEXT,
        IMAGE_CLASS_CONFEXT,
        _IMAGE_CLASS_MAX,
} ImageClass;

#define IMAGE_CLASS_ALL ((1u << _IMAGE_CLASS_MAX) - 1)

const char *image_class_to_string(ImageClass c); /* "sysext", "confext" */
int image_class_from_string(const char *s);
