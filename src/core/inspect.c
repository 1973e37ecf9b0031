/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <linux/openat2.h>
#include <string.h>
#include <sys/stat.h>

#include "fd-util.h"
#include "inspect.h"
#include "overlay.h"
#include "util.h"

void hierarchy_state_done(HierarchyState *h) {
        free(h->name);
        free(h->path);
        mount_stack_done(&h->stack);
        free(h->roles);
        free(h->trees);
        mount_children_done(&h->children);
        *h = (HierarchyState) {};
}

void hierarchy_states_free(HierarchyState *h, size_t n) {
        for (size_t i = 0; h && i < n; i++)
                hierarchy_state_done(&h[i]);
        free(h);
}

int hierarchy_open(int root_fd, const char *name) {
        return openat_resolve(root_fd, name, O_PATH | O_DIRECTORY,
                              RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
}

char *mount_entry_describe(const MountEntry *e) {
        _cleanup_free_ char *fstype = NULL, *source = NULL;
        char *r;

        if (asprintf(&r, "%s from '%s'", string_safe(e->fstype, &fstype), string_safe(e->source, &source)) < 0)
                return NULL;
        return r;
}

int mount_namespace_id(uint64_t *ret) {
        struct stat st;

        char path[32];

        snprintf(path, sizeof(path), "%sself/ns/mnt", proc_prefix());
        if (stat(path, &st) < 0)
                return negative_errno();
        *ret = st.st_ino;
        return 0;
}

static int inspect_once(int root_fd, const char *root_path, const char *name, Journal *j, HierarchyState *ret) {
        _cleanup_(hierarchy_state_done) HierarchyState h = {};
        _cleanup_close_ int fd = -EBADF;
        int r;

        h.name = strdup(name);
        h.path = path_join(root_path, name);
        if (!h.name || !h.path)
                return -ENOMEM;

        fd = hierarchy_open(root_fd, name);
        if (fd == -ELOOP) {
                h.is_symlink = true;
                goto done;
        }
        if (fd == -ENOENT || fd == -ENOTDIR)
                goto done;
        if (fd < 0)
                return fd;
        h.exists = true;

        r = mount_stack_read(root_fd, name, h.path, &h.stack);
        if (r < 0)
                return r;
        h.parent_propagates = h.stack.has_parent && h.stack.parent.shared;
        h.roles = calloc(h.stack.n ?: 1, sizeof(StackRole));
        h.trees = calloc(h.stack.n ?: 1, sizeof(Tree *));
        if (!h.roles || !h.trees)
                return -ENOMEM;
        for (size_t i = 0; i < h.stack.n; i++) {
                const MountEntry *e = &h.stack.entries[i];
                uint64_t unique = i == h.stack.n - 1 ? h.stack.top_unique_id : 0;

                h.roles[i] = STACK_FOREIGN;
                for (size_t k = 0; j && k < j->trees.n; k++)
                        if (streq(j->trees.trees[k]->hierarchy, name) && tree_matches_entry(j->trees.trees[k], e, unique)) {
                                h.roles[i] = STACK_OURS;
                                h.trees[i] = j->trees.trees[k];
                                break;
                        }
                if (h.roles[i] == STACK_FOREIGN && streq(e->fstype, "overlay") && streq(e->source, OVERLAY_SOURCE))
                        h.roles[i] = STACK_UNRECORDED;
        }

        /* The mounts below, as a reader of the live path sees them. */
        safe_close(fd);
        fd = hierarchy_open(root_fd, name);
        if (fd < 0)
                return fd;
        r = mount_children_read(fd, h.path, &h.children);
        if (r < 0)
                return r;
        if (h.children.n > 0 && h.stack.n > 0 && h.roles[h.stack.n - 1] == STACK_OURS) {
                size_t k = h.stack.n - 1;

                while (k > 0 && h.roles[k - 1] != STACK_FOREIGN)
                        k--;
                if (k > 0 || h.stack.has_parent) {
                        r = mount_below_same(h.stack.entries[h.stack.n - 1].id,
                                             k > 0 ? h.stack.entries[k - 1].id : h.stack.parent.id, h.path, &h.base_has_children);
                        if (r < 0)
                                return r;
                }
        }
done:
        *ret = h;
        h = (HierarchyState) {};
        return 0;
}

int hierarchy_inspect(int root_fd, const char *root_path, const char *name, Journal *j, HierarchyState *ret) {
        int r = -EXDEV;

        /* openat2() with RESOLVE_BENEATH fails with EXDEV when the mount it walked onto is
         * detached meanwhile (a transition's old top going, KERNEL-NOTES): the hierarchy
         * changed under the reader, who reads it again. */
        for (unsigned attempt = 0; attempt < 8 && r == -EXDEV; attempt++)
                r = inspect_once(root_fd, root_path, name, j, ret);
        return r;
}
