/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stddef.h>
#include <string.h>

#include "image-json.h"
#include "json-util.h"
#include "unit-files.h"
#include "util.h"

#define STRING_MAX 8192
/* A list's items: at most this many, each at most this long (unless its field says more). */
#define STRV_ITEMS_MAX 1024
#define STRV_ITEM_MAX 256
_Static_assert(UNIT_WANTED_MAX <= STRV_ITEMS_MAX, "the journal keeps every link an image may record");

typedef enum FieldType {
        FIELD_STRING,   /* char *, may be NULL ("reason") */
        FIELD_BOOL,     /* bool */
        FIELD_UNSIGNED, /* any unsigned integer, by size */
        FIELD_SIGNED,   /* any signed integer, by size, kept >= 0 */
        FIELD_KIND,     /* ImageKind as its name */
        FIELD_VERDICT,  /* ImageVerdict as its name */
        FIELD_VERITY,   /* VerityMode as its name */
        FIELD_CLASS,    /* ImageClass as its name */
        FIELD_STRV,     /* char **, NULL as [] */
        FIELD_ROOTHASH, /* char *, lowercase hex as verity_normalize_roothash() leaves it, or null */
        FIELD_BACKING,  /* ImageBacking as its name */
} FieldType;

#define P IMAGE_JSON_PUBLIC
#define J IMAGE_JSON_JOURNAL
#define W IMAGE_JSON_WORKER

static const struct {
        const char *key;
        FieldType type;
        size_t offset, size;
        ImageJsonSet sets;
        bool nullable;
        bool optional; /* may be missing (documents written before it existed): 0 */
        size_t item_max; /* FIELD_STRV: the longest item, 0 for STRV_ITEM_MAX */
} fields[] = {
#define F(key, type, member, sets, nullable) { key, type, offsetof(Image, member), sizeof(((Image *) 0)->member), sets, nullable, false, 0 }
#define O(key, type, member, sets) { key, type, offsetof(Image, member), sizeof(((Image *) 0)->member), sets, false, true, 0 }
#define OL(key, member, sets, item_max) { key, FIELD_STRV, offsetof(Image, member), sizeof(((Image *) 0)->member), sets, false, true, item_max }
        O("class", FIELD_CLASS, klass, P | J | W),
        F("name", FIELD_STRING, name, P | J | W, false),
        F("kind", FIELD_KIND, kind, P | J | W, false),
        F("path", FIELD_STRING, path, P | J | W, false),
        F("status", FIELD_VERDICT, verdict, P | J, false),
        F("reason", FIELD_STRING, reason, P | J, true),
        F("refused_by_policy", FIELD_BOOL, refused_by_policy, J, false),
        F("verity", FIELD_VERITY, verity, P | J | W, false),
        F("signed", FIELD_BOOL, signed_valid, P | J | W, false),
        O("roothash", FIELD_ROOTHASH, roothash, J | W),
        /* NAME.v's entries: their version (null for other images); newer than the journal. */
        { "version", FIELD_STRING, offsetof(Image, version), sizeof(((Image *) 0)->version), P | J | W, true, true, 0 },
        F("fstype", FIELD_STRING, fstype, J | W, true),
        O("backing", FIELD_BACKING, backing, J | W),
        F("hierarchies", FIELD_UNSIGNED, hierarchies, J | W, false),
        F("usr_partition", FIELD_BOOL, usr_partition, J | W, false),
        F("dev", FIELD_UNSIGNED, st.st_dev, J | W, false),
        F("ino", FIELD_UNSIGNED, st.st_ino, J | W, false),
        F("size", FIELD_SIGNED, st.st_size, J | W, false),
        F("mtime_sec", FIELD_SIGNED, st.st_mtim.tv_sec, J | W, false),
        F("mtime_nsec", FIELD_SIGNED, st.st_mtim.tv_nsec, J | W, false),
        F("stamp", FIELD_UNSIGNED, stamp, J | W, false),
        O("loop_devnum", FIELD_UNSIGNED, loop_devnum, J | W),
        O("loop_diskseq", FIELD_UNSIGNED, loop_diskseq, J | W),
        F("judged_by", FIELD_UNSIGNED, judged_by, J | W, false),
        O("reload_manager", FIELD_BOOL, reload_manager, J | W),
        O("restart_units", FIELD_STRV, restart_units, J | W),
        O("reload_or_restart_units", FIELD_STRV, reload_or_restart_units, J | W),
        O("shipped_units", FIELD_STRV, shipped_units, J | W),
        OL("wanted_units", wanted_units, J | W, UNIT_WANTED_LINK_MAX),
#undef F
#undef O
#undef OL
};

#undef P
#undef J
#undef W

static uint64_t get_unsigned(const void *p, size_t size) {
        switch (size) {
        case 1:
                return *(const uint8_t *) p;
        case 2:
                return *(const uint16_t *) p;
        case 4:
                return *(const uint32_t *) p;
        default:
                return *(const uint64_t *) p;
        }
}

static int64_t get_signed(const void *p, size_t size) {
        switch (size) {
        case 1:
                return *(const int8_t *) p;
        case 2:
                return *(const int16_t *) p;
        case 4:
                return *(const int32_t *) p;
        default:
                return *(const int64_t *) p;
        }
}

static bool set_unsigned(void *p, size_t size, uint64_t v) {
        switch (size) {
        case 1:
                if (v > UINT8_MAX)
                        return false;
                *(uint8_t *) p = v;
                return true;
        case 2:
                if (v > UINT16_MAX)
                        return false;
                *(uint16_t *) p = v;
                return true;
        case 4:
                if (v > UINT32_MAX)
                        return false;
                *(uint32_t *) p = v;
                return true;
        default:
                *(uint64_t *) p = v;
                return true;
        }
}

static bool set_signed(void *p, size_t size, uint64_t v) {
        switch (size) {
        case 4:
                if (v > INT32_MAX)
                        return false;
                *(int32_t *) p = (int32_t) v;
                return true;
        case 8:
                if (v > INT64_MAX)
                        return false;
                *(int64_t *) p = (int64_t) v;
                return true;
        default:
                return false;
        }
}

/* A field's value, as JSON has it. */
typedef struct FieldValue {
        enum { VALUE_NULL, VALUE_STRING, VALUE_BOOL, VALUE_U64, VALUE_I64, VALUE_STRV } type;
        const char *s;
        char *const *l;
        uint64_t u;
        int64_t i;
        bool b;
} FieldValue;

static FieldValue field_value(size_t i, const void *p) {
        const char *s = NULL;

        switch (fields[i].type) {
        case FIELD_STRING:
        case FIELD_ROOTHASH:
                s = *(char *const *) p;
                return s ? (FieldValue) { .type = VALUE_STRING, .s = s } : (FieldValue) { .type = VALUE_NULL };
        case FIELD_BOOL:
                return (FieldValue) { .type = VALUE_BOOL, .b = *(const bool *) p };
        case FIELD_UNSIGNED:
                return (FieldValue) { .type = VALUE_U64, .u = get_unsigned(p, fields[i].size) };
        case FIELD_SIGNED:
                return (FieldValue) { .type = VALUE_I64, .i = get_signed(p, fields[i].size) };
        case FIELD_STRV:
                return (FieldValue) { .type = VALUE_STRV, .l = *(char **const *) p };
        case FIELD_KIND:
                s = image_kind_to_string(*(const ImageKind *) p);
                break;
        case FIELD_VERDICT:
                s = image_verdict_to_string(*(const ImageVerdict *) p);
                break;
        case FIELD_VERITY:
                s = verity_mode_to_string(*(const VerityMode *) p);
                break;
        case FIELD_CLASS:
                s = image_class_to_string(*(const ImageClass *) p);
                break;
        case FIELD_BACKING:
                s = image_backing_to_string(*(const ImageBacking *) p);
                break;
        }
        return (FieldValue) { .type = VALUE_STRING, .s = s };
}

/* Whether field i is left out of the document of set: not of the set, or, outside the public
 * form, optional and holding what its absence reads as (NULL, false, 0, [], the enum's first
 * value).  The journal and the worker's report leave those out: with 50 images a third of the
 * fields, parsed by every status and every transition.  The public form, for people and
 * programs reading the JSON, has every field of its set; class is always written. */
static bool field_skipped(size_t i, const void *p, ImageJsonSet set) {
        bool dflt;

        if (!(fields[i].sets & set))
                return true;
        if ((set & IMAGE_JSON_PUBLIC) || !fields[i].optional || fields[i].type == FIELD_CLASS)
                return false;
        switch (fields[i].type) {
        case FIELD_STRING:
        case FIELD_ROOTHASH:
                dflt = !*(char *const *) p;
                break;
        case FIELD_BOOL:
                dflt = !*(const bool *) p;
                break;
        case FIELD_UNSIGNED:
                dflt = get_unsigned(p, fields[i].size) == 0;
                break;
        case FIELD_SIGNED:
                dflt = get_signed(p, fields[i].size) == 0;
                break;
        case FIELD_STRV:
                dflt = !*(char **const *) p || !(*(char **const *) p)[0];
                break;
        default:
                dflt = *(const int *) p == 0;
                break;
        }
        return dflt;
}

json_object *image_to_json(const Image *img, ImageJsonSet set) {
        json_object *o = json_object_new_object();

        if (!o)
                return NULL;
        for (size_t i = 0; i < ELEMENTSOF(fields); i++) {
                const void *p = (const uint8_t *) img + fields[i].offset;
                FieldValue v;
                json_object *j = NULL;

                if (field_skipped(i, p, set))
                        continue;
                v = field_value(i, p);
                switch (v.type) {
                case VALUE_NULL:
                        break;
                case VALUE_STRING:
                        j = json_object_new_string(v.s);
                        break;
                case VALUE_BOOL:
                        j = json_object_new_boolean(v.b);
                        break;
                case VALUE_U64:
                        j = json_object_new_uint64(v.u);
                        break;
                case VALUE_I64:
                        j = json_object_new_int64(v.i);
                        break;
                case VALUE_STRV:
                        j = json_new_strv(v.l);
                        break;
                }
                json_object_object_add(o, fields[i].key, j);
        }
        /* Derived, for people reading the JSON. */
        if (set & IMAGE_JSON_PUBLIC)
                json_object_object_add(o, "compatible", json_object_new_boolean(img->verdict == IMAGE_COMPATIBLE));
        return o;
}

void image_write_json(JsonWriter *w, const Image *img, ImageJsonSet set) {
        json_writer_begin_object(w);
        for (size_t i = 0; i < ELEMENTSOF(fields); i++) {
                const void *p = (const uint8_t *) img + fields[i].offset;
                FieldValue v;

                if (field_skipped(i, p, set))
                        continue;
                v = field_value(i, p);
                json_writer_key(w, fields[i].key);
                switch (v.type) {
                case VALUE_NULL:
                        json_writer_null(w);
                        break;
                case VALUE_STRING:
                        json_writer_string(w, v.s);
                        break;
                case VALUE_BOOL:
                        json_writer_bool(w, v.b);
                        break;
                case VALUE_U64:
                        json_writer_u64(w, v.u);
                        break;
                case VALUE_I64:
                        json_writer_i64(w, v.i);
                        break;
                case VALUE_STRV:
                        json_writer_strv(w, v.l);
                        break;
                }
        }
        if (set & IMAGE_JSON_PUBLIC) {
                json_writer_key(w, "compatible");
                json_writer_bool(w, img->verdict == IMAGE_COMPATIBLE);
        }
        json_writer_end_object(w);
}

void image_list_write_json(JsonWriter *w, const ImageList *l, ImageJsonSet set) {
        json_writer_begin_array(w);
        for (size_t i = 0; i < l->n; i++)
                image_write_json(w, &l->images[i], set);
        json_writer_end_array(w);
}

int image_from_json(json_object *o, ImageJsonSet set, Image *ret) {
        Image img = { .root_fd = -EBADF };
        int r = 0;

        if (!o || !json_object_is_type(o, json_type_object))
                return -EBADMSG;
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(fields); i++) {
                void *p = (uint8_t *) &img + fields[i].offset;
                _cleanup_free_ char *s = NULL;
                uint64_t u;
                bool b;

                if (!(fields[i].sets & set))
                        continue;
                if (fields[i].optional && !json_object_object_get_ex(o, fields[i].key, NULL))
                        continue;
                switch (fields[i].type) {
                case FIELD_STRING:
                        r = fields[i].nullable ? json_get_string_or_null(o, fields[i].key, STRING_MAX, (char **) p)
                                               : json_get_string(o, fields[i].key, STRING_MAX, (char **) p);
                        break;
                case FIELD_BOOL:
                        r = json_get_bool(o, fields[i].key, &b);
                        if (r >= 0)
                                *(bool *) p = b;
                        break;
                case FIELD_UNSIGNED:
                        r = json_get_u64(o, fields[i].key, &u);
                        if (r >= 0 && !set_unsigned(p, fields[i].size, u))
                                r = -EBADMSG;
                        break;
                case FIELD_SIGNED:
                        r = json_get_u64(o, fields[i].key, &u);
                        if (r >= 0 && !set_signed(p, fields[i].size, u))
                                r = -EBADMSG;
                        break;
                case FIELD_STRV:
                        r = json_get_strv(o, fields[i].key, STRV_ITEMS_MAX, fields[i].item_max ?: STRV_ITEM_MAX,
                                          (char ***) p);
                        break;
                case FIELD_ROOTHASH: {
                        _cleanup_free_ char *normal = NULL;

                        /* Compared with the hash discovery reads: only the form it has. */
                        r = json_get_string_or_null(o, fields[i].key, STRING_MAX, (char **) p);
                        if (r < 0 || !*(char **) p)
                                break;
                        r = verity_normalize_roothash(*(char **) p, &normal);
                        if (r == -EINVAL || (r >= 0 && !streq(normal, *(char **) p)))
                                r = -EBADMSG;
                        break;
                }
                case FIELD_CLASS:
                case FIELD_KIND:
                case FIELD_VERDICT:
                case FIELD_VERITY:
                case FIELD_BACKING: {
                        int v;

                        r = json_get_string(o, fields[i].key, 64, &s);
                        if (r < 0)
                                break;
                        v = fields[i].type == FIELD_KIND      ? image_kind_from_string(s)
                            : fields[i].type == FIELD_VERDICT ? image_verdict_from_string(s)
                            : fields[i].type == FIELD_CLASS   ? image_class_from_string(s)
                            : fields[i].type == FIELD_BACKING ? image_backing_from_string(s)
                                                              : verity_mode_from_string(s);
                        if (v < 0)
                                r = -EBADMSG;
                        else
                                *(int *) p = v;
                        break;
                }
                }
        }
        if (r >= 0 && (isempty(img.name) || isempty(img.path)))
                r = -EBADMSG;
        if (r < 0) {
                image_done(&img);
                return r == -ENOENT ? -EBADMSG : r;
        }
        *ret = img;
        return 0;
}

json_object *image_list_to_json(const ImageList *l, ImageJsonSet set) {
        json_object *a = json_object_new_array();

        for (size_t i = 0; a && i < l->n; i++)
                json_object_array_add(a, image_to_json(&l->images[i], set));
        return a;
}

int image_list_from_json(json_object *a, ImageJsonSet set, ImageList *ret) {
        _cleanup_image_list_ ImageList l = {};
        size_t n;
        int r;

        if (!a || !json_object_is_type(a, json_type_array))
                return -EBADMSG;
        n = json_object_array_length(a);
        l.images = calloc(n ?: 1, sizeof(Image));
        if (!l.images)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                r = image_from_json(json_object_array_get_idx(a, i), set, &l.images[l.n]);
                if (r < 0)
                        return r;
                l.n++;
        }
        *ret = l;
        l = (ImageList) {};
        return 0;
}

int image_cache_from_handover(json_object *a, ImageList *old, int *fds, size_t n_fds, uint64_t *next_id, ImageList *ret) {
        _cleanup_image_list_ ImageList records = {}, l = {};
        _cleanup_free_ size_t *from = NULL; /* per entry: 1 + its index in old; 0: a record, or gone */
        _cleanup_free_ bool *taken = NULL;  /* per entry of old: named already */
        size_t n, n_records = 0, next = 0;
        int r;

        if (!a || !json_object_is_type(a, json_type_array))
                return -EBADMSG;
        n = json_object_array_length(a);
        from = calloc(n ?: 1, sizeof(size_t));
        taken = calloc(old->n ?: 1, sizeof(bool));
        if (!from || !taken)
                return -ENOMEM;
        /* Everything checked and parsed before anything is moved or taken. */
        for (size_t i = 0; i < n; i++) {
                json_object *e = json_object_array_get_idx(a, i);
                uint64_t want;

                if (!json_object_is_type(e, json_type_object))
                        return -EBADMSG;
                if (!json_object_object_get_ex(e, "cached", NULL)) {
                        n_records++;
                        continue;
                }
                if (json_object_object_length(e) != 1 || json_get_u64(e, "cached", &want) < 0 || want == 0)
                        return -EBADMSG;
                for (size_t k = 0; k < old->n; k++)
                        if (old->images[k].cache_id == want && old->images[k].root_fd >= 0) {
                                if (taken[k])
                                        return -EBADMSG; /* named twice */
                                taken[k] = true;
                                from[i] = k + 1;
                                break;
                        }
        }
        if (n_records != n_fds)
                return -EBADMSG;
        records.images = calloc(n_records ?: 1, sizeof(Image));
        l.images = calloc(n ?: 1, sizeof(Image));
        if (!records.images || !l.images)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                json_object *e = json_object_array_get_idx(a, i);

                if (json_object_object_get_ex(e, "cached", NULL))
                        continue;
                r = image_from_json(e, IMAGE_JSON_WORKER, &records.images[records.n]);
                if (r < 0)
                        return r;
                records.n++;
        }
        /* Moved and taken, in order. */
        for (size_t i = 0; i < n; i++) {
                Image *img = &l.images[l.n];

                if (json_object_object_get_ex(json_object_array_get_idx(a, i), "cached", NULL)) {
                        if (from[i] == 0)
                                continue;
                        *img = old->images[from[i] - 1];
                        old->images[from[i] - 1] = (Image) { .root_fd = -EBADF };
                } else {
                        *img = records.images[next];
                        records.images[next] = (Image) { .root_fd = -EBADF };
                        img->root_fd = fds[next];
                        fds[next++] = -EBADF;
                        img->verdict = IMAGE_COMPATIBLE;
                        img->cache_id = (*next_id)++;
                }
                l.n++;
        }
        *ret = l;
        l = (ImageList) {};
        return 0;
}
