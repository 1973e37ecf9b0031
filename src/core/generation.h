/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "image.h"

/* Generations, rollback and pins: the decisions, pure (no file system, no clock), so that
 * they are unit-tested on their own; the journal keeps what they work on (journal.h) and the
 * engine carries them out (engine_rollback(), engine.h).
 *
 * A generation is what a transition left live: every compatible image of every class by
 * identity (the journal's form of an image: class, name, path, version, device and inode, size
 * and mtime, the stamp over a directory's entries or a raw image's sidecars, the verity root
 * hash where there is one) and the mutable mode of each class.  The journal keeps the last
 * Generations= of them.
 *
 * A rollback discovers every version of every image (image_discover_ex()), then
 * generation_select() picks exactly the recorded image per name, or names the first recorded
 * image that is gone or changed: then nothing changes.
 *
 * A rollback pins what it went back to (pins_for_rollback()): per image whose version
 * differs, the version rolled back to (or none: the image stays out) and the version rolled
 * back from.  Later refreshes reduce what discovery found with pins_apply(): a pinned image
 * keeps its pinned version until a version newer than the one rolled back from appears
 * (pin_decide(), version_compare() as for NAME.v), or the pinned version has gone; every other
 * image is the entry a plain discovery picks. */

typedef struct Generation {
        uint64_t generation;
        uint64_t when;                 /* CLOCK_REALTIME µs of its transition */
        int mutable[_IMAGE_CLASS_MAX]; /* MutableMode of each class's trees */
        bool forced;                   /* built with --force */
        ImageList images;              /* the compatible ones, bottom to top */
} Generation;

typedef struct Pin {
        ImageClass klass;
        char *name;
        char *version;       /* the version kept; NULL: the image is kept out */
        char *from_version;  /* the version rolled back from; NULL: it was not merged, or no version */
        uint64_t generation; /* the generation rolled back to */
} Pin;

typedef struct PinList {
        Pin *pins;
        size_t n;
} PinList;

void generation_done(Generation *g);
void generations_free(Generation *l, size_t n);
void pin_done(Pin *p);
void pin_list_done(PinList *l);
int pin_list_copy(const PinList *from, PinList *ret);

/* A copy of an image's identity and what the journal keeps of it (no fds, no mounts). */
int image_copy(const Image *s, Image *ret);

/* A generation of the compatible images of list. */
int generation_from_images(uint64_t generation, uint64_t when, const int mutable[static _IMAGE_CLASS_MAX], bool forced,
                           const ImageList *images, Generation *ret);

/* Appends g (taken) to the list, oldest first, keeping at most keep (>= 1): the oldest go. */
int generations_push(Generation **list, size_t *n, Generation *g, unsigned keep);

/* The generation to roll back to from the live generation current: want, or with want 0 the
 * newest kept that is older than current.  NULL with the reason in *ret_message when there is
 * none (not kept, the live one, none older). */
const Generation *generation_find(const Generation *list, size_t n, uint64_t current, uint64_t want, char **ret_message);

/* Whether found (discovered) is the image recorded as recorded: class, name, path, version,
 * device and inode, size and mtime, stamp, root hash. */
bool generation_image_same(const Image *recorded, const Image *found);

/* From candidates (every version, image_discover_ex()), exactly the images of g, taken out of
 * candidates into *ret in candidates' order.  When a recorded image is not among them:
 * -ENOENT, *ret_missing the recorded image, nothing taken. */
int generation_select(ImageList *candidates, const Generation *g, ImageList *ret, const Image **ret_missing);

/* "Cannot roll back to generation 4: image app version 1 (/var/lib/extensions/app.v/app_1.raw,
 * dev:ino) is gone or changed; put it back or roll back to another generation." */
int generation_missing_message(uint64_t generation, const Image *missing, char **ret);

/* The pins of a rollback from generation from to generation to: one per name of either
 * (class and name) whose version differs, or that is versioned in one and absent in the other. */
int pins_for_rollback(const Generation *from, const Generation *to, PinList *ret);

typedef enum PinDecision {
        PIN_KEEP,
        PIN_RELEASE, /* a version newer than the one rolled back from is there */
} PinDecision;

/* newest: the newest version of the pinned image among those discovered (NULL: none). */
PinDecision pin_decide(const Pin *p, const char *newest);

/* The pin of an image, or NULL. */
const Pin *pin_find(const PinList *l, ImageClass klass, const char *name);

/* Reduces candidates (every version of the classes in the mask classes, IMAGE_CLASS_* bits) to
 * one image per name: the pinned version of a pinned image (none when its pin keeps it out),
 * the picked entry of every other.  Pins of those classes released (pin_decide()) or whose
 * version has gone are dropped from pins, each with a line in *ret_notes (may be NULL); pins of
 * other classes are left alone.  Returns how many were dropped. */
int pins_apply(ImageList *candidates, PinList *pins, unsigned classes, char ***ret_notes);

/* Reduces candidates to the entries a plain discovery picks. */
void generation_keep_picked(ImageList *candidates);
