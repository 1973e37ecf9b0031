/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* namespace_classify(): what one hierarchy of a mount namespace shows, compared with the host. */
#include <sys/sysmacros.h>

#include "missing.h"
#include "namespaces.h"
#include "tests.h"

#define CURRENT makedev(0, 40)
#define OLDER makedev(0, 39)
#define BASE_DEV makedev(8, 1)
#define BASE_INO 1234

static NamespaceLook look(void) {
        return (NamespaceLook) {
                .exists = true,
                .current_dev = CURRENT,
                .base_known = true,
                .base_dev = BASE_DEV,
                .base_ino = BASE_INO,
        };
}

/* A copy of an older tree of ours, the current one right beneath or not. */
static NamespaceLook older(bool current_beneath) {
        NamespaceLook l = look();

        l.top_magic = OVERLAYFS_SUPER_MAGIC;
        l.dev = OLDER;
        l.ino = 1;
        l.top_is_root = true;
        l.top_sysextd = true;
        l.beneath_dev = current_beneath ? CURRENT : BASE_DEV;
        l.beneath_sysextd = current_beneath;
        return l;
}

int main(void) {
        NamespaceLook l;

        l = look();
        l.exists = false;
        CHECK(namespace_classify(&l) == NAMESPACE_VIEW_ABSENT);

        /* The host's current tree: up to date. */
        l = older(false);
        l.dev = CURRENT;
        CHECK(namespace_classify(&l) == NAMESPACE_VIEW_CURRENT);

        l = older(true);
        CHECK(namespace_classify(&l) == NAMESPACE_VIEW_OLDER_OVER_CURRENT);
        l = older(false);
        CHECK(namespace_classify(&l) == NAMESPACE_VIEW_OLDER);
        /* Beneath on the current superblock, but not an overlay of ours: no current beneath. */
        l = older(true);
        l.beneath_sysextd = false;
        CHECK(namespace_classify(&l) == NAMESPACE_VIEW_OLDER);
        /* The host has no extensions there: nothing current can be beneath. */
        l = older(true);
        l.current_dev = 0;
        l.beneath_dev = 0;
        CHECK(namespace_classify(&l) == NAMESPACE_VIEW_OLDER);

        /* Not from "sysextd", not an overlay, not the root of its mount: something else. */
        l = older(true);
        l.top_sysextd = false;
        CHECK(namespace_classify(&l) == NAMESPACE_VIEW_OWN);
        l = older(true);
        l.top_magic = 0xEF53;
        CHECK(namespace_classify(&l) == NAMESPACE_VIEW_OWN);
        l = older(true);
        l.top_is_root = false; /* a bind of a subdirectory of a tree */
        CHECK(namespace_classify(&l) == NAMESPACE_VIEW_OWN);

        /* The base: the same directory as the host's below its trees. */
        l = look();
        l.top_magic = 0xEF53;
        l.dev = BASE_DEV;
        l.ino = BASE_INO;
        CHECK(namespace_classify(&l) == NAMESPACE_VIEW_BASE);
        l.current_dev = 0; /* the host shows its base too */
        CHECK(namespace_classify(&l) == NAMESPACE_VIEW_CURRENT);
        l = look();
        l.dev = BASE_DEV;
        l.ino = BASE_INO + 1; /* another directory of the same file system: its own */
        CHECK(namespace_classify(&l) == NAMESPACE_VIEW_OWN);
        l.ino = BASE_INO;
        l.base_known = false;
        CHECK(namespace_classify(&l) == NAMESPACE_VIEW_OWN);

        /* Which views are listed. */
        CHECK(namespace_view_stale(NAMESPACE_VIEW_OLDER_OVER_CURRENT));
        CHECK(namespace_view_stale(NAMESPACE_VIEW_OLDER));
        CHECK(namespace_view_stale(NAMESPACE_VIEW_BASE));
        CHECK(!namespace_view_stale(NAMESPACE_VIEW_CURRENT));
        CHECK(!namespace_view_stale(NAMESPACE_VIEW_OWN));
        CHECK(!namespace_view_stale(NAMESPACE_VIEW_ABSENT));
        CHECK_STREQ(namespace_view_describe(NAMESPACE_VIEW_OLDER_OVER_CURRENT), "older tree, current beneath");
        CHECK_STREQ(namespace_view_to_string(NAMESPACE_VIEW_BASE), "base");
        CHECK(namespace_view_to_string(_NAMESPACE_VIEW_MAX) == NULL);
        return tap_finish();
}
