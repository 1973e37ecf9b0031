/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The names of the classes of extension (image-class.h), for configuration, the journal, the
 * command line and the bus.  Pure; below every module that knows an image's class.
 */
#include "image-class.h"
#include "util.h"

static const char *const class_table[_IMAGE_CLASS_MAX] = {
        [IMAGE_CLASS_SYSEXT] = "sysext",
        [IMAGE_CLASS_CONFEXT] = "confext",
};

const char *image_class_to_string(ImageClass c) {
        return c >= 0 && c < _IMAGE_CLASS_MAX ? class_table[c] : NULL;
}

int image_class_from_string(const char *s) {
        return string_table_find(class_table, _IMAGE_CLASS_MAX, s);
}
