/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <json-c/json.h>

#include "image.h"
#include "json-util.h"

/* The one JSON form of an image.  Every field is one line of the table in image-json.c,
 * marked with the documents it belongs to:
 *   IMAGE_JSON_PUBLIC   what users see: `sysextd list --json`, status, the bus replies
 *   IMAGE_JSON_JOURNAL  what state.json keeps of the images of the last transition
 *   IMAGE_JSON_WORKER   what a daemon worker reports of the image mounts it hands over
 * A field added to the table appears in each document it is marked for, both ways. */

typedef enum ImageJsonSet {
        IMAGE_JSON_PUBLIC = 1 << 0,
        IMAGE_JSON_JOURNAL = 1 << 1,
        IMAGE_JSON_WORKER = 1 << 2,
} ImageJsonSet;

json_object *image_to_json(const Image *img, ImageJsonSet set);
/* The same document as text, through a JsonWriter (for what is written on every transition). */
void image_write_json(JsonWriter *w, const Image *img, ImageJsonSet set);
void image_list_write_json(JsonWriter *w, const ImageList *l, ImageJsonSet set);

/* Fills *ret (fds -EBADF, nothing else open) from a document of that set; every field of the
 * set must be there with its type and range (-EBADMSG otherwise). */
int image_from_json(json_object *o, ImageJsonSet set, Image *ret);

/* A JSON array of images / back. */
json_object *image_list_to_json(const ImageList *l, ImageJsonSet set);
int image_list_from_json(json_object *a, ImageJsonSet set, ImageList *ret);

/* The daemon's next image cache from the array a daemon worker hands over: each entry either
 * an image record (IMAGE_JSON_WORKER), whose mount is the next of fds, or {"cached": ID}: the
 * entry of old with that cache_id, whose mount the worker reused, moved out of old (one that
 * is no longer there is left out: the daemon dropped it meanwhile, its file having changed).
 * Records get ids from *next_id on.  The fds taken are set to -EBADF.  -EBADMSG, with nothing
 * moved or taken, when the entries do not fit the fds (as many records as fds), an entry is
 * neither, or an id is named twice. */
int image_cache_from_handover(json_object *a, ImageList *old, int *fds, size_t n_fds, uint64_t *next_id, ImageList *ret);
