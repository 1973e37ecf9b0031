/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The documents a daemon worker sends back: the image cache it hands over and the listing, as
 * the daemon reads them. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "image-json.h"
#include "json-util.h"
#include "util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_free_ char *text = NULL;
        _cleanup_json_ json_object *doc = NULL;
        json_object *a;
        uint64_t u;
        bool b;

        text = strndup((const char *) data, size);
        if (!text)
                return 0;
        doc = json_parse_object(text);
        if (!doc)
                return 0;
        (void) json_get_u64(doc, "generation", &u);
        (void) json_get_bool(doc, "changed", &b);
        a = json_get_array(doc, "cache");
        if (a) {
                _cleanup_image_list_ ImageList l = {};
                (void) image_list_from_json(a, IMAGE_JSON_WORKER, &l);
        }
        a = json_get_array(doc, "images");
        if (a) {
                _cleanup_image_list_ ImageList l = {};
                if (image_list_from_json(a, IMAGE_JSON_PUBLIC, &l) >= 0) {
                        _cleanup_json_ json_object *back = image_list_to_json(&l, IMAGE_JSON_PUBLIC);
                        if (!back)
                                abort();
                }
        }
        return 0;
}
