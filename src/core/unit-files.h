/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>

#include "image-class.h"

/* The units an image ships and the links that enable them, read from its own layer when it is
 * probed (image.c), and the rules for unit names those readings and the plan (units.h, which
 * says what an image's units are asked to do) share.  Nothing here knows an Image. */

/* Whether a unit name can be restarted: NAME.TYPE (service, socket, target, ...), an
 * instance allowed, not a template, no path, at most 255 bytes. */
bool unit_name_valid(const char *name);

/* For a unit type an image may never restart (target, mount, automount, swap, slice, scope,
 * device): its plural for messages ("targets"); NULL when the type may be restarted. */
const char *unit_type_refused(const char *name);

/* What an image's unit directory must hold for it to ship the unit: the unit file "NAME",
 * the drop-in directory "NAME.d/", and for an instance the template's "T@.TYPE" and
 * "T@.TYPE.d/".  The spellings are those of Image.shipped_units. */
int unit_candidates(const char *name, char ***ret);

typedef enum UnitShipped {
        UNIT_NOT_SHIPPED,
        UNIT_SHIPPED_DROPIN, /* a drop-in only: the unit itself comes from elsewhere */
        UNIT_SHIPPED_FILE,   /* its unit file (or its template's) */
} UnitShipped;

/* Pure: whether the entries an image ships (Image.shipped_units) ship the unit. */
UnitShipped unit_shipped(const char *name, char *const *shipped);

/* Where an image of class k keeps units, relative to its root (a usr partition's root is
 * usr/).  NULL-terminated. */
char *const *unit_dirs(ImageClass k, bool usr_partition);

/* I/O: which of the candidates of the names (unit_candidates()) exist in the unit
 * directories below the image's root fd, resolved beneath it without following any symlink;
 * names NULL: every unit file and drop-in directory there (at most UNIT_DIR_ENTRIES_MAX
 * entries of each directory are looked at).  Returns the entries found (NULL when none). */
#define UNIT_DIR_ENTRIES_MAX 4096
int unit_files_scan(int image_root_fd, char *const *dirs, char *const *names, char ***ret);

/* Links that enable a unit for another: "T.wants/U" or "T.requires/U" (the spelling of
 * Image.wanted_units), T and U valid unit names (unit_name_valid(): no template).  At most
 * UNIT_WANTED_LINK_MAX bytes (T.wants and U are each one file name). */
#define UNIT_WANTED_LINK_MAX 511
/* The most links recorded for one image (the journal keeps no more). */
#define UNIT_WANTED_MAX 1024

/* Pure: T and U of such a link (ret_target, ret_unit may be NULL); -EINVAL for anything else,
 * T.upholds/U included (Upholds= is enforced by systemd itself once it has reloaded). */
int unit_wanted_link_split(const char *link, char **ret_target, char **ret_unit);

/* I/O: the links in the T.wants/ and T.requires/ directories of the unit directories below the
 * image's root fd: each such directory opened beneath the root without following a symlink,
 * and in it every symbolic link whose name is a valid unit name, read and never followed (one
 * to /dev/null is a mask, not counted); at most UNIT_DIR_ENTRIES_MAX entries of each directory
 * looked at, UNIT_WANTED_MAX links recorded.  The links name U; whether the image ships U is
 * the plan's question (unit_shipped()).  Returns the links found (NULL when none). */
int unit_wanted_scan(int image_root_fd, char *const *dirs, char ***ret);
