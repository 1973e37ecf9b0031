/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/openat2.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "fd-util.h"
#include "fileio.h"
#include "json-util.h"
#include "kernel.h"
#include "overlay.h"
#include "tree.h"
#include "util.h"

#define TREE_FILE_MAX (64 * 1024)
#define TREE_EXTENSIONS_MAX 4096
#define NAME_MAX_LEN 255

void tree_done(Tree *t) {
        free(t->id);
        free(t->hierarchy);
        strv_free(t->extensions);
        free(t->workdir);
        *t = (Tree) {};
}

void tree_list_done(TreeList *l) {
        for (size_t i = 0; i < l->n; i++) {
                tree_done(l->trees[i]);
                free(l->trees[i]);
        }
        free(l->trees);
        *l = (TreeList) {};
}

bool tree_id_valid(const char *id) {
        if (!id || strlen(id) != TREE_ID_LEN)
                return false;
        for (const char *c = id; *c; c++)
                if (!strchr("0123456789abcdef", *c))
                        return false;
        return true;
}

bool tree_workdir_valid(const char *rel) {
        const char *base, *dot;

        if (isempty(rel) || rel[0] == '/' || strstr(rel, "//") || endswith(rel, "/") || strlen(rel) >= PATH_MAX)
                return false;
        for (const char *c = rel; c; c = strchr(c, '/')) {
                if (*c == '/')
                        c++;
                if (startswith(c, "../") || streq(c, "..") || startswith(c, "./") || streq(c, "."))
                        return false;
        }
        if (!utf8_is_valid(rel) || string_has_control(rel))
                return false;
        base = strrchr(rel, '/');
        base = base ? base + 1 : rel;
        if (!startswith(base, ".sysextd-"))
                return false;
        dot = strrchr(base, '.');
        return dot && dot > base && tree_id_valid(dot + 1) && (size_t) (dot - base) > strlen(".sysextd--work") &&
               !strncmp(dot - strlen("-work"), "-work", strlen("-work"));
}

int tree_to_json_string(const Tree *t, char **ret) {
        _cleanup_json_ json_object *o = json_object_new_object();
        const char *s;

        if (!o)
                return -ENOMEM;
        json_object_object_add(o, "id", json_object_new_string(t->id));
        json_object_object_add(o, "hierarchy", json_object_new_string(t->hierarchy));
        json_object_object_add(o, "generation", json_object_new_uint64(t->generation));
        json_object_object_add(o, "unique_mount_id", json_object_new_uint64(t->unique_id));
        json_object_object_add(o, "mount_id", json_object_new_uint64(t->mount_id));
        json_object_object_add(o, "dev_major", json_object_new_uint64(major(t->dev)));
        json_object_object_add(o, "dev_minor", json_object_new_uint64(minor(t->dev)));
        json_object_object_add(o, "base_only", json_object_new_boolean(t->base_only));
        json_object_object_add(o, "extensions", json_new_strv(t->extensions));
        json_object_object_add(o, "since", json_object_new_uint64(t->since));
        json_object_object_add(o, "writable", json_object_new_boolean(t->writable));
        json_object_object_add(o, "workdir", json_new_string_or_null(t->workdir));
        s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE);
        *ret = s ? strdup(s) : NULL;
        return *ret ? 0 : -ENOMEM;
}

int tree_from_json_string(const char *text, Tree *ret) {
        _cleanup_json_ json_object *o = json_parse_object(text);
        _cleanup_(tree_done) Tree t = {};
        uint64_t maj, mnr;
        int r;

        if (!o)
                return -EBADMSG;
        if (json_get_string(o, "id", TREE_ID_LEN, &t.id) < 0 || !tree_id_valid(t.id) ||
            json_get_string(o, "hierarchy", 4096, &t.hierarchy) < 0 || isempty(t.hierarchy) ||
            json_get_u64(o, "generation", &t.generation) < 0 || json_get_u64(o, "unique_mount_id", &t.unique_id) < 0 ||
            json_get_u64(o, "mount_id", &t.mount_id) < 0 || t.mount_id == 0 || t.mount_id > UINT32_MAX ||
            json_get_u64(o, "dev_major", &maj) < 0 || json_get_u64(o, "dev_minor", &mnr) < 0 || maj > 0xfff ||
            mnr > 0xfffff || json_get_bool(o, "base_only", &t.base_only) < 0 ||
            json_get_strv(o, "extensions", TREE_EXTENSIONS_MAX, NAME_MAX_LEN, &t.extensions) < 0 ||
            json_get_u64(o, "since", &t.since) < 0)
                return -EBADMSG;
        /* Written since mutable modes; absent from older records (read-only trees). */
        r = json_get_bool(o, "writable", &t.writable);
        if (r < 0 && r != -ENOENT)
                return -EBADMSG;
        r = json_get_string_or_null(o, "workdir", PATH_MAX, &t.workdir);
        if ((r < 0 && r != -ENOENT) || (t.workdir && !tree_workdir_valid(t.workdir)))
                return -EBADMSG;
        t.dev = makedev(maj, mnr);
        *ret = t;
        t = (Tree) {};
        return 0;
}

static int trees_dir_open(int journal_dir_fd, bool create) {
        int fd = open_directory_at(journal_dir_fd, TREES_DIR, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS);

        if (fd == -ENOENT && create) {
                if (mkdirat(journal_dir_fd, TREES_DIR, 0700) < 0 && errno != EEXIST)
                        return negative_errno();
                fd = open_directory_at(journal_dir_fd, TREES_DIR, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS);
        }
        return fd;
}

int tree_save(int journal_dir_fd, const Tree *t) {
        _cleanup_close_ int dfd = -EBADF;
        _cleanup_free_ char *text = NULL, *name = NULL;
        int r;

        if (!tree_id_valid(t->id))
                return -EINVAL;
        dfd = trees_dir_open(journal_dir_fd, true);
        if (dfd < 0)
                return dfd;
        r = tree_to_json_string(t, &text);
        if (r < 0)
                return r;
        name = strjoin3(t->id, ".json", "");
        if (!name)
                return -ENOMEM;
        return write_file_atomic_at(dfd, name, text, 0600);
}

static int tree_retire(int journal_dir_fd, int trees_fd, const char *name);

int tree_remove(int journal_dir_fd, const char *id) {
        _cleanup_close_ int dfd = -EBADF;
        _cleanup_free_ char *name = NULL;

        if (!tree_id_valid(id))
                return -EINVAL;
        dfd = trees_dir_open(journal_dir_fd, false);
        if (dfd == -ENOENT)
                return 0;
        if (dfd < 0)
                return dfd;
        name = strjoin3(id, ".json", "");
        if (!name)
                return -ENOMEM;
        /* Kept as retired (tree.h); where that fails, the record goes all the same. */
        if (tree_retire(journal_dir_fd, dfd, name) >= 0)
                return 0;
        if (unlinkat(dfd, name, 0) < 0 && errno != ENOENT)
                return negative_errno();
        return 0;
}

static int retired_dir_open(int journal_dir_fd, bool create) {
        int fd = open_directory_at(journal_dir_fd, RETIRED_DIR, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS);

        if (fd == -ENOENT && create) {
                if (mkdirat(journal_dir_fd, RETIRED_DIR, 0700) < 0 && errno != EEXIST)
                        return negative_errno();
                fd = open_directory_at(journal_dir_fd, RETIRED_DIR, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS);
        }
        return fd;
}

/* Only the newest RETIRED_MAX records stay: the oldest (by mtime: when the tree was recorded)
 * go first. */
static void retired_prune(int dfd) {
        for (unsigned round = 0; round < 4 * RETIRED_MAX; round++) {
                _cleanup_closedir_ DIR *d = NULL;
                _cleanup_free_ char *oldest = NULL;
                struct timespec oldest_t = {};
                struct dirent *de;
                size_t n = 0;
                int fd = fcntl(dfd, F_DUPFD_CLOEXEC, 3);

                if (fd < 0)
                        return;
                d = fdopendir(fd);
                if (!d) {
                        safe_close(fd);
                        return;
                }
                while ((de = readdir(d))) {
                        struct stat st;

                        if (!endswith(de->d_name, ".json") || fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                                continue;
                        n++;
                        if (!oldest || st.st_mtim.tv_sec < oldest_t.tv_sec ||
                            (st.st_mtim.tv_sec == oldest_t.tv_sec && st.st_mtim.tv_nsec < oldest_t.tv_nsec)) {
                                free(oldest);
                                oldest = strdup(de->d_name);
                                oldest_t = st.st_mtim;
                        }
                }
                if (n <= RETIRED_MAX || !oldest)
                        return;
                (void) unlinkat(dfd, oldest, 0);
        }
}

static int tree_retire(int journal_dir_fd, int trees_fd, const char *name) {
        _cleanup_close_ int dfd = retired_dir_open(journal_dir_fd, true);

        if (dfd < 0)
                return dfd;
        if (renameat(trees_fd, name, dfd, name) < 0)
                return negative_errno();
        retired_prune(dfd);
        return 0;
}

int tree_retired_find_dev(int journal_dir_fd, dev_t dev, Tree *ret) {
        _cleanup_closedir_ DIR *d = NULL;
        struct dirent *de;
        int dfd;

        dfd = retired_dir_open(journal_dir_fd, false);
        if (dfd == -ENOENT)
                return 0;
        if (dfd < 0)
                return dfd;
        d = fdopendir(dfd);
        if (!d) {
                safe_close(dfd);
                return negative_errno();
        }
        while ((de = readdir(d))) {
                _cleanup_free_ char *text = NULL;
                _cleanup_(tree_done) Tree t = {};

                if (de->d_name[0] == '.' || !endswith(de->d_name, ".json"))
                        continue;
                if (read_file_at(dirfd(d), de->d_name, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS, 64 * 1024, &text, NULL, NULL) < 0 ||
                    tree_from_json_string(text, &t) < 0)
                        continue; /* not a proof */
                if (t.dev != dev || t.base_only)
                        continue;
                *ret = t;
                t = (Tree) {};
                return 1;
        }
        return 0;
}

Tree *tree_list_find(TreeList *l, const char *id) {
        for (size_t i = 0; id && i < l->n; i++)
                if (streq(l->trees[i]->id, id))
                        return l->trees[i];
        return NULL;
}

int tree_list_add(TreeList *l, Tree *t) {
        Tree **n = realloc(l->trees, sizeof(Tree *) * (l->n + 1)), *c;

        if (!n)
                return -ENOMEM;
        l->trees = n;
        c = malloc(sizeof(Tree));
        if (!c)
                return -ENOMEM;
        *c = *t;
        *t = (Tree) {};
        l->trees[l->n++] = c;
        return 0;
}

void tree_list_drop(TreeList *l, const char *id) {
        for (size_t i = 0; i < l->n; i++)
                if (streq(l->trees[i]->id, id)) {
                        tree_done(l->trees[i]);
                        free(l->trees[i]);
                        memmove(&l->trees[i], &l->trees[i + 1], sizeof(Tree *) * (l->n - i - 1));
                        l->n--;
                        return;
                }
}

int tree_list_load(int journal_dir_fd, TreeList *ret, unsigned *ret_n_corrupt) {
        _cleanup_(tree_list_done) TreeList l = {};
        _cleanup_closedir_ DIR *d = NULL;
        struct dirent *de;
        unsigned n_corrupt = 0;
        int dfd, r;

        dfd = trees_dir_open(journal_dir_fd, false);
        if (dfd == -ENOENT) {
                *ret = (TreeList) {};
                if (ret_n_corrupt)
                        *ret_n_corrupt = 0;
                return 0;
        }
        if (dfd < 0)
                return dfd;
        d = fdopendir(dfd);
        if (!d) {
                safe_close(dfd);
                return negative_errno();
        }
        while ((de = readdir(d))) {
                _cleanup_free_ char *text = NULL, *id = NULL;
                _cleanup_(tree_done) Tree t = {};
                const char *suffix;

                suffix = endswith(de->d_name, ".json") ? de->d_name + strlen(de->d_name) - 5 : NULL;
                if (de->d_name[0] == '.' || !suffix)
                        continue;
                id = strndup(de->d_name, suffix - de->d_name);
                if (!id)
                        return -ENOMEM;
                r = read_file_at(dirfd(d), de->d_name, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS, TREE_FILE_MAX, &text,
                                 NULL, NULL);
                if (r == -ENOMEM)
                        return r;
                if (r >= 0)
                        r = tree_from_json_string(text, &t);
                if (r >= 0 && (!streq(t.id, id) || tree_list_find(&l, t.id)))
                        r = -EBADMSG;
                if (r < 0) {
                        _cleanup_free_ char *aside = strjoin3(de->d_name, ".corrupt", "");
                        if (aside)
                                (void) renameat(dirfd(d), de->d_name, dirfd(d), aside);
                        n_corrupt++;
                        continue;
                }
                r = tree_list_add(&l, &t);
                if (r < 0)
                        return r;
        }
        *ret = l;
        l = (TreeList) {};
        if (ret_n_corrupt)
                *ret_n_corrupt = n_corrupt;
        return 0;
}

int tree_set_identity(Tree *t, int tree_fd) {
        MountIdentity m;
        int r;

        r = mount_identity_of_fd(tree_fd, &m);
        if (r < 0)
                return r;
        if (!m.is_root || !m.overlay)
                return -EINVAL;
        t->unique_id = m.unique_id;
        t->mount_id = m.id;
        t->dev = m.dev;
        return 0;
}

bool tree_matches_entry(const Tree *t, const MountEntry *e, uint64_t unique_id) {
        if (e->id != t->mount_id || e->dev != t->dev || !streq_ptr(e->fstype, "overlay") ||
            !streq_ptr(e->source, OVERLAY_SOURCE))
                return false;
        return unique_id == 0 || t->unique_id == 0 || unique_id == t->unique_id;
}

int tree_check_fd(const Tree *t, int fd, char **ret_reason) {
        MountIdentity m;
        MountEntry e = {};
        int r;

        r = mount_identity_of_fd(fd, &m);
        if (r < 0)
                return r;
        if (!m.is_root) {
                set_message(ret_reason, 0, "not the root of a mount");
                return 0;
        }
        if (t->unique_id != 0) {
                if (m.unique_id != t->unique_id || m.dev != t->dev) {
                        set_message(ret_reason, 0, "mount %" PRIu64 " on device %u:%u, not sysextd's tree %s (mount %" PRIu64 " on %u:%u)",
                                    m.unique_id, major(m.dev), minor(m.dev), t->id, t->unique_id, major(t->dev),
                                    minor(t->dev));
                        return 0;
                }
                return 1;
        }
        /* No unique ids on this kernel: the 32-bit id, the device, and what mountinfo says of
         * that id. */
        if (m.id != t->mount_id || m.dev != t->dev || !m.overlay) {
                set_message(ret_reason, 0, "mount %" PRIu64 " on device %u:%u, not sysextd's tree %s (mount %" PRIu64 " on %u:%u)",
                            m.id, major(m.dev), minor(m.dev), t->id, t->mount_id, major(t->dev), minor(t->dev));
                return 0;
        }
        r = mountinfo_find(m.id, &e);
        if (r == -ENOENT) {
                set_message(ret_reason, 0, "mount %" PRIu64 " is not in the mount table", m.id);
                return 0;
        }
        if (r < 0)
                return r;
        r = tree_matches_entry(t, &e, 0);
        if (!r)
                set_message(ret_reason, 0, "a mount of %s from '%s', not sysextd's tree %s", e.fstype, e.source, t->id);
        mount_entry_done(&e);
        return r;
}

const char *tree_proof_string(void) {
        return kernel_has(KERNEL_UNIQUE_MOUNT_ID) ? "unique mount id" : "mount id, device and source";
}
