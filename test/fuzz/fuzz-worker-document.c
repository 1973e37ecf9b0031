/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The documents a daemon worker sends back: the image cache it hands over (records and the
 * entries of the daemon's cache it names) and the listing, as the daemon reads them. */
#include <fcntl.h>
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
                /* Against a cache of two entries (ids 1 and 2), with as many fds as entries and
                 * with none. */
                for (size_t n_fds = 0; n_fds <= json_object_array_length(a); n_fds += MAX(json_object_array_length(a), 1u)) {
                        _cleanup_image_list_ ImageList l = {}, old = {};
                        _cleanup_free_ int *fds = calloc(n_fds + 1, sizeof(int));
                        uint64_t next = 3;

                        old.images = calloc(2, sizeof(Image));
                        if (!fds || !old.images)
                                return 0;
                        for (size_t i = 0; i < 2; i++) {
                                old.images[i] = (Image) { .root_fd = open("/dev/null", O_RDONLY | O_CLOEXEC), .cache_id = i + 1 };
                                old.n++;
                        }
                        for (size_t i = 0; i < n_fds; i++)
                                fds[i] = -EBADF;
                        if (image_cache_from_handover(a, &old, fds, n_fds, &next, &l) >= 0 && l.n > json_object_array_length(a))
                                abort();
                }
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
