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

/* What image_cache_from_handover() promises: on success every fd is taken and every old
 * entry named is moved (none twice), the new entries get fresh ids; on failure nothing moved. */
static void check_handover(json_object *a, size_t n_records, size_t n_fds) {
        _cleanup_image_list_ ImageList l = {}, old = {};
        _cleanup_free_ int *fds = calloc(n_fds + 1, sizeof(int));
        uint64_t next = 3;
        size_t moved = 0;
        int r;

        old.images = calloc(2, sizeof(Image));
        if (!fds || !old.images)
                return;
        for (size_t i = 0; i < 2; i++)
                old.images[old.n++] = (Image) { .root_fd = open("/dev/null", O_RDONLY | O_CLOEXEC), .cache_id = i + 1 };
        for (size_t i = 0; i < n_fds; i++)
                fds[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
        /* (Out of fds: no fault of the code under test.) */
        for (size_t i = 0; i < MAX(n_fds, old.n); i++)
                if ((i < n_fds && fds[i] < 0) || (i < old.n && old.images[i].root_fd < 0))
                        goto done;
        r = image_cache_from_handover(a, &old, fds, n_fds, &next, &l);
        if (r >= 0) {
                if (n_fds != n_records || l.n > json_object_array_length(a) || next != 3 + n_records)
                        abort();
                for (size_t i = 0; i < n_fds; i++)
                        if (fds[i] >= 0)
                                abort(); /* an fd not taken */
                for (size_t i = 0; i < old.n; i++)
                        moved += old.images[i].root_fd < 0;
                if (l.n != n_records + moved)
                        abort();
                for (size_t i = 0; i < l.n; i++)
                        if (l.images[i].root_fd < 0 || l.images[i].cache_id == 0 ||
                            (l.images[i].cache_id >= 3 && l.images[i].cache_id >= next))
                                abort();
        } else
                for (size_t i = 0; i < old.n; i++)
                        if (old.images[i].root_fd < 0)
                                abort(); /* moved, though refused */
done:
        for (size_t i = 0; i < n_fds; i++)
                safe_close(fds[i]);
}

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
                size_t n_records = 0;

                for (size_t i = 0; i < json_object_array_length(a); i++) {
                        json_object *e = json_object_array_get_idx(a, i);
                        if (!json_object_is_type(e, json_type_object) || !json_object_object_get_ex(e, "cached", NULL))
                                n_records++;
                }
                /* Against a cache of two entries (ids 1 and 2): with an fd for each record (as
                 * the worker sends), and with one too many, which must be refused. */
                for (size_t n_fds = n_records; n_fds <= n_records + 1; n_fds++)
                        check_handover(a, n_records, n_fds);
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
