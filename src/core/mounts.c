/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Mount table reading with libmount.  libmount returns positive errno values in some places
 * and negative in others; this file wraps it once and returns -errno like the rest.
 */
#include <libmount.h>
#include <string.h>

#include "mounts.h"
#include "overlay.h"
#include "util.h"

static void table_unrefp(struct libmnt_table **t) {
        mnt_unref_table(*t);
}

static int table_read(struct libmnt_table **ret) {
        struct libmnt_table *t = mnt_new_table();
        int r;

        if (!t)
                return -ENOMEM;
        r = mnt_table_parse_file(t, "/proc/self/mountinfo");
        if (r != 0) {
                mnt_unref_table(t);
                return r < 0 ? r : -r;
        }
        *ret = t;
        return 0;
}

void mount_stack_done(MountStack *s) {
        free(s->top_fstype);
        free(s->top_source);
        *s = (MountStack) {};
}

int mount_stack_read(const char *path, MountStack *ret) {
        _cleanup_(table_unrefp) struct libmnt_table *t = NULL;
        struct libmnt_iter *it;
        struct libmnt_fs *fs, *top = NULL, *parent = NULL;
        MountStack s = {};
        int r;

        r = table_read(&t);
        if (r < 0)
                return r;
        it = mnt_new_iter(MNT_ITER_FORWARD);
        if (!it)
                return -ENOMEM;

        /* Mounts at the same mount point stack: each one's parent is the one below it. The
         * top is the one no other mount at this path names as parent.  mountinfo lists mounts
         * in creation order, which is not the stacking order after MOVE_MOUNT_BENEATH. */
        while (mnt_table_next_fs(t, it, &fs) == 0) {
                const char *target = mnt_fs_get_target(fs);
                bool has_child_here = false;

                if (!target || !streq(target, path))
                        continue;
                s.n_mounts++;
                if (streq_ptr(mnt_fs_get_fstype(fs), "overlay") && streq_ptr(mnt_fs_get_source(fs), OVERLAY_SOURCE))
                        s.n_ours++;

                struct libmnt_iter *it2 = mnt_new_iter(MNT_ITER_FORWARD);
                struct libmnt_fs *other;
                if (!it2) {
                        mnt_free_iter(it);
                        return -ENOMEM;
                }
                while (mnt_table_next_fs(t, it2, &other) == 0)
                        if (other != fs && streq_ptr(mnt_fs_get_target(other), path) &&
                            mnt_fs_get_parent_id(other) == mnt_fs_get_id(fs))
                                has_child_here = true;
                mnt_free_iter(it2);
                if (!has_child_here)
                        top = fs;
        }
        mnt_free_iter(it);

        if (top) {
                s.top_fstype = strdup(mnt_fs_get_fstype(top) ?: "");
                s.top_source = strdup(mnt_fs_get_source(top) ?: "");
                if (!s.top_fstype || !s.top_source) {
                        mount_stack_done(&s);
                        return -ENOMEM;
                }
                s.top_is_ours = streq(s.top_fstype, "overlay") && streq(s.top_source, OVERLAY_SOURCE);
        }

        /* The mount the stack sits on: the parent of the bottom of the stack, or, with no
         * mount at the path, the mount containing the path. */
        {
                _cleanup_free_ char *p = strdup(path);
                if (!p) {
                        mount_stack_done(&s);
                        return -ENOMEM;
                }
                while (!parent) {
                        char *slash = strrchr(p, '/');
                        if (!slash)
                                break;
                        if (slash == p)
                                slash[1] = 0;
                        else
                                *slash = 0;
                        parent = mnt_table_find_mountpoint(t, p, MNT_ITER_BACKWARD);
                        if (streq(p, "/"))
                                break;
                }
                if (parent) {
                        const char *opt = mnt_fs_get_optional_fields(parent);
                        s.parent_shared = opt && strstr(opt, "shared:");
                }
        }

        *ret = s;
        return 0;
}

static int compare_str(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

int mounts_below(const char *path, char ***ret) {
        _cleanup_(table_unrefp) struct libmnt_table *t = NULL;
        _cleanup_strv_free_ char **all = NULL, **result = NULL;
        _cleanup_free_ char *prefix = NULL;
        struct libmnt_iter *it;
        struct libmnt_fs *fs;
        size_t n;
        int r;

        r = table_read(&t);
        if (r < 0)
                return r;
        prefix = strjoin3(path, streq(path, "/") ? "" : "/", "");
        if (!prefix)
                return -ENOMEM;
        it = mnt_new_iter(MNT_ITER_FORWARD);
        if (!it)
                return -ENOMEM;
        while (mnt_table_next_fs(t, it, &fs) == 0) {
                const char *target = mnt_fs_get_target(fs);
                if (target && startswith(target, prefix) && target[strlen(prefix)] && !strv_contains(all, target)) {
                        r = strv_extend(&all, target);
                        if (r < 0) {
                                mnt_free_iter(it);
                                return r;
                        }
                }
        }
        mnt_free_iter(it);

        n = strv_length(all);
        if (n > 0)
                qsort(all, n, sizeof(char *), compare_str);
        result = calloc(1, sizeof(char *));
        if (!result)
                return -ENOMEM;
        /* Sorted, so a mount point's ancestors in the list come before it. */
        STRV_FOREACH(a, all) {
                bool nested = false;
                STRV_FOREACH(b, result) {
                        const char *rest = startswith(*a, *b);
                        if (rest && *rest == '/')
                                nested = true;
                }
                if (nested)
                        continue;
                r = strv_extend(&result, *a);
                if (r < 0)
                        return r;
        }
        *ret = TAKE_PTR(result);
        return 0;
}

int mounts_count(unsigned *ret) {
        _cleanup_(table_unrefp) struct libmnt_table *t = NULL;
        int r = table_read(&t);
        if (r < 0)
                return r;
        *ret = mnt_table_get_nents(t);
        return 0;
}
