/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Mount table reading: /proc/thread-self/mountinfo (proc_pid_mountinfo(5)), parsed here, and
 * the identity of mounts.
 *
 * Two sources are combined: the mountinfo file describes every mount, covered or not, by
 * its 32-bit id; statx() on a live path says which mount a reader of that path reaches (and
 * its unique id on Linux 6.8).  What is visible is always decided at the live path: a
 * mountinfo path also names mounts hidden under another mount.
 *
 * The parser is ours, not libmount's: the daemon reads the table for every status, and
 * libmount (with libselinux and libpcre2 it loads) was a tenth of its resident memory and
 * canonicalized the file's own path with four readlink() calls per read.  What it takes from
 * a line is what libmount took: the ids, the device, the root, the mount point (without the
 * kernel's " (deleted)"), the optional fields, the type, the source ("" where the kernel
 * shows none) and the superblock options, with the kernel's octal escapes undone.
 */
#include <fcntl.h>
#include <linux/openat2.h>
#include <poll.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "fd-util.h"
#include "fileio.h"
#include "kernel.h"
#include "log.h"
#include "missing.h"
#include "mounts.h"
#include "util.h"

/* A mount table larger than this is not read (a namespace with ~200000 mounts). */
#define MOUNTINFO_MAX (64U * 1024U * 1024U)

void mount_table_done(MountTable *t) {
        free(t->rows);
        free(t->text);
        *t = (MountTable) {};
}

/* Undoes the kernel's "\ooo" escapes (space, tab, newline, backslash) in place. */
static void unescape(char *s) {
        char *w = s;

        for (char *r = s; *r;) {
                if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' && r[2] <= '7' && r[3] >= '0' && r[3] <= '7') {
                        *w++ = (char) ((r[1] - '0') << 6 | (r[2] - '0') << 3 | (r[3] - '0'));
                        r += 4;
                } else
                        *w++ = *r++;
        }
        *w = 0;
}

/* The next field of a line: up to the next space (made NUL), or the end of the line. */
static char *next_field(char **p) {
        char *f = *p, *sp;

        if (!f)
                return NULL;
        sp = strchr(f, ' ');
        if (sp) {
                *sp = 0;
                *p = sp + 1;
        } else
                *p = NULL;
        return f;
}

static int parse_u64(const char *s, uint64_t *ret) {
        char *end;
        unsigned long long v;

        if (!s || *s < '0' || *s > '9')
                return -EBADMSG;
        errno = 0;
        v = strtoull(s, &end, 10);
        if (errno != 0 || *end)
                return -EBADMSG;
        *ret = v;
        return 0;
}

static int parse_line(char *line, MountRow *ret) {
        MountRow m = {};
        char *p = line, *f, *opt, *dash;
        unsigned maj, min;
        int n = 0;

        if (parse_u64(next_field(&p), &m.id) < 0 || parse_u64(next_field(&p), &m.parent_id) < 0)
                return -EBADMSG;
        f = next_field(&p);
        if (!f || sscanf(f, "%u:%u%n", &maj, &min, &n) != 2 || f[n])
                return -EBADMSG;
        m.devno = makedev(maj, min);
        m.root = next_field(&p);
        m.target = next_field(&p);
        if (!next_field(&p) || !p) /* the mount's own options */
                return -EBADMSG;
        /* Optional fields ("shared:1 master:2"), none or more, then "-". */
        opt = p;
        if (startswith(p, "- "))
                dash = p;
        else {
                dash = strstr(p, " - ");
                if (!dash)
                        return -EBADMSG;
                *dash++ = 0;
        }
        /* None: the NUL next_field() left after the mount's options, so that every field
         * points into the table's text (a kept table is copied by moving the pointers). */
        m.optional = dash == opt ? opt - 1 : opt;
        p = dash + 2;
        m.fstype = next_field(&p);
        m.source = next_field(&p);
        m.super_options = next_field(&p);
        if (!m.root || !m.target || !m.fstype || !m.source || !m.super_options)
                return -EBADMSG;
        unescape((char *) m.root);
        unescape((char *) m.target);
        unescape((char *) m.fstype);
        unescape((char *) m.source);
        /* A mount point that was deleted: the kernel appends this to its path. */
        if (endswith(m.target, " (deleted)") && strlen(m.target) > strlen(" (deleted)"))
                ((char *) m.target)[strlen(m.target) - strlen(" (deleted)")] = 0;
        *ret = m;
        return 0;
}

int mount_table_parse(char *text, MountTable *ret) {
        _cleanup_(mount_table_done) MountTable t = { .text = text };
        size_t allocated = 0;

        for (char *line = text; line && *line;) {
                char *nl = strchr(line, '\n');

                if (nl)
                        *nl = 0;
                if (t.n >= allocated) {
                        MountRow *n;

                        allocated = allocated ? allocated * 2 : 64;
                        n = realloc(t.rows, allocated * sizeof(MountRow));
                        if (!n) {
                                t.text = NULL; /* the caller's still */
                                return -ENOMEM;
                        }
                        t.rows = n;
                }
                if (parse_line(line, &t.rows[t.n]) < 0) {
                        t.text = NULL;
                        return -EBADMSG;
                }
                t.n++;
                line = nl ? nl + 1 : NULL;
        }
        *ret = t;
        t = (MountTable) {};
        return 0;
}

static int table_read_fd(int fd, MountTable *ret, size_t *ret_size) {
        _cleanup_free_ char *buf = NULL;
        size_t size = 0;
        int r;

        r = read_fd_full(fd, MOUNTINFO_MAX, &buf, &size);
        if (r < 0)
                return r;
        r = mount_table_parse(buf, ret);
        if (r < 0)
                return r;
        buf = NULL; /* the table's now */
        if (ret_size)
                *ret_size = size;
        return 0;
}

static int mountinfo_open(pid_t pid) {
        char path[64];
        int fd;

        /* A path of our own: in a process that entered another namespace, proc_prefix() says
         * where the host's /proc is. */
        if (pid > 0)
                snprintf(path, sizeof(path), "%s%i/mountinfo", proc_prefix(), (int) pid);
        else
                snprintf(path, sizeof(path), "%sthread-self/mountinfo", proc_prefix());
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        return fd < 0 ? negative_errno() : fd;
}

/* The mount table of process pid's namespace (pid > 0; ours is table_read()). */
static int table_read_of(pid_t pid, MountTable *ret) {
        _cleanup_close_ int fd = mountinfo_open(pid);

        if (fd < 0)
                return fd;
        return table_read_fd(fd, ret, NULL);
}

/* Within one operation (mount_table_cache_begin()), our namespace's table is read once and
 * read again only when the kernel says it changed: the open mountinfo file is pollable, and
 * POLLPRI says a mount was added, removed, moved or remounted in the namespace since the last
 * look (proc_pid_mountinfo(5)).  A change of propagation (shared, slave, private) raises no
 * event, so the table is kept for one operation only, and what changes propagation in this
 * process calls mount_table_cache_invalidate().  A forked child (another pid) is in no
 * operation until it begins one, and never uses its parent's cache or its open file (polling
 * the shared file would take the parent's events); a process in another namespace
 * (/proc/self/ns/mnt) reads its own.  "Our" namespace is the calling thread's: a thread may have
 * one of its own (base.c), so the table is /proc/thread-self/mountinfo and the cache is kept
 * per thread (a thread starts with none). */
static _Thread_local struct {
        unsigned depth;  /* begin() calls not ended, by scope_pid */
        pid_t scope_pid; /* the process whose operation it is: a forked child's is none */
        int fd;
        pid_t pid;
        ino_t ns;
        MountTable table;
        size_t size;
} cache = { .fd = -EBADF };

static void cache_drop(void) {
        if (cache.pid == getpid())
                cache.fd = safe_close(cache.fd);
        else
                cache.fd = -EBADF; /* the parent's: closed by _exit() or exec with the rest */
        mount_table_done(&cache.table);
        cache.size = 0;
        cache.pid = 0;
}

void mount_table_cache_begin(void) {
        /* A forked child starts with no operation of its own, whatever its parent had. */
        if (cache.scope_pid != getpid()) {
                cache_drop();
                cache.depth = 0;
                cache.scope_pid = getpid();
        }
        cache.depth++;
}

void mount_table_cache_end(void) {
        if (cache.scope_pid == getpid() && cache.depth > 0 && --cache.depth == 0)
                cache_drop();
}

void mount_table_cache_invalidate(void) {
        cache_drop();
}

static void *memdup(const void *p, size_t n) {
        void *q = malloc(n);

        return q ? memcpy(q, p, n) : NULL;
}

static int table_copy(const MountTable *from, size_t size, MountTable *ret) {
        _cleanup_(mount_table_done) MountTable t = {};

        t.text = memdup(from->text, size + 1);
        t.rows = from->n > 0 ? memdup(from->rows, from->n * sizeof(MountRow)) : NULL;
        if (!t.text || (from->n > 0 && !t.rows))
                return -ENOMEM;
        t.n = from->n;
        for (size_t i = 0; i < t.n; i++) {
                MountRow *w = &t.rows[i];
                const char **f[] = { &w->root, &w->target, &w->optional, &w->fstype, &w->source, &w->super_options };

                /* Every field points into the text (parse_line()). */
                for (size_t k = 0; k < ELEMENTSOF(f); k++)
                        *f[k] = t.text + (*f[k] - from->text);
        }
        *ret = t;
        t = (MountTable) {};
        return 0;
}

static ino_t our_namespace(void) {
        char path[64];
        struct stat st;

        snprintf(path, sizeof(path), "%sthread-self/ns/mnt", proc_prefix());
        return stat(path, &st) < 0 ? 0 : st.st_ino;
}

/* Our namespace's table. */
static int table_read(MountTable *ret) {
        struct pollfd p;
        ino_t ns;
        int r;

        if (cache.depth == 0 || cache.scope_pid != getpid()) {
                _cleanup_close_ int fd = mountinfo_open(0);

                if (fd < 0)
                        return fd;
                return table_read_fd(fd, ret, NULL);
        }
        if (cache.pid != 0 && cache.pid != getpid())
                cache_drop();
        ns = our_namespace();
        if (cache.fd >= 0 && (ns == 0 || ns != cache.ns))
                cache_drop();
        if (cache.fd >= 0) {
                p = (struct pollfd) { .fd = cache.fd, .events = POLLPRI };
                r = poll(&p, 1, 0);
                if (r == 0)
                        return table_copy(&cache.table, cache.size, ret);
                cache_drop();
        }
        /* Opened first, read after: a change in between shows at the next poll, and the table
         * is read again then. */
        cache.fd = mountinfo_open(0);
        if (cache.fd < 0) {
                r = cache.fd;
                cache.fd = -EBADF;
                return r;
        }
        cache.pid = getpid();
        cache.ns = ns;
        r = table_read_fd(cache.fd, &cache.table, &cache.size);
        if (r < 0) {
                cache_drop();
                return r;
        }
        return table_copy(&cache.table, cache.size, ret);
}

int mount_identity_of_fd(int fd, MountIdentity *ret) {
        struct statx sx = {};
        struct statfs sfs;
        MountIdentity m = {};

        if (statx(fd, "", AT_EMPTY_PATH | AT_NO_AUTOMOUNT, STATX_MNT_ID, &sx) < 0)
                return negative_errno();
        if (!(sx.stx_mask & STATX_MNT_ID))
                return -EOPNOTSUPP;
        m.id = sx.stx_mnt_id;
        m.dev = makedev(sx.stx_dev_major, sx.stx_dev_minor);
        m.is_root = (sx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) && (sx.stx_attributes & STATX_ATTR_MOUNT_ROOT);
        if (kernel_has(KERNEL_UNIQUE_MOUNT_ID)) {
                sx = (struct statx) {};
                if (statx(fd, "", AT_EMPTY_PATH | AT_NO_AUTOMOUNT, STATX_MNT_ID_UNIQUE, &sx) < 0)
                        return negative_errno();
                if (sx.stx_mask & STATX_MNT_ID_UNIQUE)
                        m.unique_id = sx.stx_mnt_id;
        }
        if (fstatfs(fd, &sfs) < 0)
                return negative_errno();
        m.overlay = (unsigned long) sfs.f_type == OVERLAYFS_SUPER_MAGIC;
        *ret = m;
        return 0;
}

void mount_entry_done(MountEntry *e) {
        free(e->fstype);
        free(e->source);
        *e = (MountEntry) {};
}

static int entry_from_row(const MountRow *row, MountEntry *ret) {
        const char *so = row->super_options;
        MountEntry e = {
                .id = row->id,
                .parent_id = row->parent_id,
                .dev = row->devno,
                .fstype = strdup(row->fstype),
                .source = strdup(row->source),
                .shared = strstr(row->optional, "shared:"),
                .slave = strstr(row->optional, "master:"),
                .sb_writable = strncmp(so, "rw", 2) == 0 && (so[2] == 0 || so[2] == ','),
        };

        if (!e.fstype || !e.source) {
                mount_entry_done(&e);
                return -ENOMEM;
        }
        *ret = e;
        return 0;
}

void mount_stack_done(MountStack *s) {
        for (size_t i = 0; i < s->n; i++)
                mount_entry_done(&s->entries[i]);
        free(s->entries);
        mount_entry_done(&s->parent);
        *s = (MountStack) {};
}

const MountRow *mount_table_find(const MountTable *t, uint64_t id) {
        for (size_t i = 0; i < t->n; i++)
                if (t->rows[i].id == id)
                        return &t->rows[i];
        return NULL;
}
static int open_live(int root_fd, const char *rel) {
        /* A fresh lookup: it ends on whatever is mounted on top at the path now. */
        return openat_resolve(root_fd, rel, O_PATH | O_DIRECTORY,
                              RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
}

static int stack_read_once(int root_fd, const char *rel, int path_fd, const char *path, MountStack *ret,
                           bool *ret_raced) {
        _cleanup_(mount_table_done) MountTable t = {};
        _cleanup_(mount_stack_done) MountStack s = {};
        MountIdentity top;
        const MountRow *fs, *top_fs;
        size_t n_max = 0;
        int r;

        *ret_raced = false;
        r = mount_identity_of_fd(path_fd, &top);
        if (r < 0)
                return r;
        r = table_read(&t);
        if (r < 0)
                return r;
        top_fs = mount_table_find(&t, top.id);
        if (!top_fs) {
                *ret_raced = true;
                return 0;
        }

        if (top.is_root && streq(top_fs->target, path)) {
                /* Walk down from the top along the parent ids while they stay at the path;
                 * what is below the bottom is the parent. */
                _cleanup_free_ const MountRow **chain = NULL;
                size_t n = 0;

                n_max = t.n;
                chain = calloc(n_max + 1, sizeof(*chain));
                if (!chain)
                        return -ENOMEM;
                for (fs = top_fs; fs && streq(fs->target, path) && n < n_max; fs = mount_table_find(&t, fs->parent_id))
                        chain[n++] = fs;
                s.entries = calloc(n, sizeof(MountEntry));
                if (!s.entries)
                        return -ENOMEM;
                for (size_t i = 0; i < n; i++) {
                        r = entry_from_row(chain[n - 1 - i], &s.entries[i]);
                        if (r < 0)
                                return r;
                        s.n++;
                }
                s.top_unique_id = top.unique_id;
                fs = fs && !streq(fs->target, path) ? fs : NULL;
                if (fs) {
                        r = entry_from_row(fs, &s.parent);
                        if (r < 0)
                                return r;
                        s.has_parent = true;
                }
        } else {
                /* Nothing mounted at the path: the fd is on the mount that contains it. */
                if (top.is_root) {
                        /* The root of a mount that mountinfo lists at another path: the
                         * table changed under us; read again. */
                        *ret_raced = true;
                        return 0;
                }
                r = entry_from_row(top_fs, &s.parent);
                if (r < 0)
                        return r;
                s.has_parent = true;
        }

        /* Nothing may have been mounted or unmounted at the path while the table was read. */
        {
                _cleanup_close_ int again_fd = open_live(root_fd, rel);
                MountIdentity again;

                if (again_fd < 0)
                        return again_fd;
                r = mount_identity_of_fd(again_fd, &again);
                if (r < 0)
                        return r;
                if (again.id != top.id) {
                        *ret_raced = true;
                        return 0;
                }
        }
        *ret = s;
        s = (MountStack) {};
        return 0;
}

int mount_stack_read(int root_fd, const char *rel, const char *path, MountStack *ret) {
        _cleanup_close_ int fd = -EBADF;
        bool raced;
        int r;

        for (unsigned attempt = 0; attempt < 8; attempt++) {
                fd = safe_close(fd);
                fd = open_live(root_fd, rel);
                if (fd == -EXDEV)
                        continue; /* the mount walked onto was detached meanwhile */
                if (fd < 0)
                        return fd;
                r = stack_read_once(root_fd, rel, fd, path, ret, &raced);
                if (r == -EXDEV)
                        continue; /* the same, at the second look */
                if (r < 0 || !raced)
                        return r;
        }
        return -EAGAIN;
}

void mount_children_done(MountChildren *c) {
        for (size_t i = 0; i < c->n; i++) {
                free(c->children[i].path);
                free(c->children[i].fstype);
        }
        free(c->children);
        *c = (MountChildren) {};
}

static int compare_str(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

int mount_children_read(int path_fd, const char *path, MountChildren *ret) {
        _cleanup_(mount_table_done) MountTable t = {};
        _cleanup_strv_free_ char **all = NULL;
        _cleanup_(mount_children_done) MountChildren c = {};
        _cleanup_free_ char *prefix = NULL;
        size_t n;
        int r;

        r = table_read(&t);
        if (r < 0)
                return r;
        prefix = strjoin3(path, streq(path, "/") ? "" : "/", "");
        if (!prefix)
                return -ENOMEM;
        for (size_t i = 0; i < t.n; i++) {
                const char *target = t.rows[i].target;
                if (startswith(target, prefix) && target[strlen(prefix)] && !strv_contains(all, target)) {
                        r = strv_extend(&all, target);
                        if (r < 0)
                                return r;
                }
        }

        n = strv_length(all);
        if (n > 0)
                qsort(all, n, sizeof(char *), compare_str);
        c.children = calloc(n ?: 1, sizeof(MountChild));
        if (!c.children)
                return -ENOMEM;

        /* Sorted, so a mount point's ancestors in the list come before it. */
        STRV_FOREACH(a, all) {
                _cleanup_close_ int fd = -EBADF;
                MountIdentity m;
                const MountRow *seen;
                bool nested = false;

                for (size_t k = 0; k < c.n; k++) {
                        const char *rest = startswith(*a, c.children[k].path);
                        if (rest && *rest == '/')
                                nested = true;
                }
                if (nested)
                        continue;

                /* Resolve the live path the way a reader does, but without following a
                 * symlink (a mountinfo path never has one) or triggering an automount at the
                 * end.  Where it does not end on the root of a mount listed at that path, the
                 * listed mount is covered: it is not part of what readers see. */
                fd = openat_resolve(path_fd, *a + strlen(prefix), O_PATH | O_NOFOLLOW,
                                    RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
                if (fd < 0)
                        continue;
                if (mount_identity_of_fd(fd, &m) < 0 || !m.is_root)
                        continue;
                seen = mount_table_find(&t, m.id);
                if (!seen || !streq(seen->target, *a))
                        continue;

                c.children[c.n] = (MountChild) {
                        .path = strdup(*a),
                        .id = m.id,
                        .unique_id = m.unique_id,
                        .fstype = strdup(seen->fstype),
                };
                if (!c.children[c.n].path || !c.children[c.n].fstype) {
                        free(c.children[c.n].path);
                        free(c.children[c.n].fstype);
                        return -ENOMEM;
                }
                c.n++;
        }
        *ret = c;
        c = (MountChildren) {};
        return 0;
}

bool mount_children_equal(const MountChildren *a, const MountChildren *b) {
        if (a->n != b->n)
                return false;
        for (size_t i = 0; i < a->n; i++)
                if (!streq(a->children[i].path, b->children[i].path) || a->children[i].id != b->children[i].id ||
                    a->children[i].unique_id != b->children[i].unique_id)
                        return false;
        return true;
}

int mountinfo_find(uint64_t id, MountEntry *ret) {
        return mountinfo_find_of(0, id, ret);
}

int mountinfo_find_of(pid_t pid, uint64_t id, MountEntry *ret) {
        _cleanup_(mount_table_done) MountTable t = {};
        const MountRow *row;
        int r;

        r = table_read_of(pid, &t);
        if (r < 0)
                return r;
        row = mount_table_find(&t, id);
        if (!row)
                return -ENOENT;
        return entry_from_row(row, ret);
}


/* Whether the mounts on a (id) below 'path' — strictly below it at the first level, 'strict' —
 * match those on b one for one: the same mount point, file system (device), root within it
 * and type, and recursively the same mounts on each. */
static bool subtree_same(const MountTable *t, uint64_t a, uint64_t b, const char *path, bool strict, unsigned depth) {
        _cleanup_free_ char *prefix = strjoin3(path, streq(path, "/") ? "" : "/", "");
        size_t n_a = 0, n_b = 0;

        if (!prefix || depth > 64)
                return false;
        for (size_t i = 0; i < t->n; i++) {
                const MountRow *fs = &t->rows[i];
                const char *target = fs->target;
                uint64_t parent = fs->parent_id;
                bool found = false;

                if ((parent != a && parent != b) || fs->id == parent)
                        continue;
                if (!startswith(target, prefix) && (strict || !streq(target, path)))
                        continue;
                if (parent == b) {
                        n_b++;
                        continue;
                }
                n_a++;
                for (size_t k = 0; !found && k < t->n; k++) {
                        const MountRow *other = &t->rows[k];

                        found = other->parent_id == b && streq(other->target, target) && other->devno == fs->devno &&
                                streq(other->root, fs->root) && streq(other->fstype, fs->fstype) &&
                                subtree_same(t, fs->id, other->id, target, false, depth + 1);
                }
                if (!found)
                        return false;
        }
        return n_a == n_b;
}

int mount_below_same(uint64_t top_id, uint64_t base_id, const char *path, bool *ret) {
        _cleanup_(mount_table_done) MountTable t = {};
        int r;

        r = table_read(&t);
        if (r < 0)
                return r;
        *ret = subtree_same(&t, top_id, base_id, path, true, 0);
        return 0;
}

int mount_targets_of(const char *fstype, const char *source, const char *under, char ***ret) {
        _cleanup_(mount_table_done) MountTable t = {};
        _cleanup_strv_free_ char **l = NULL;
        size_t len = strlen(under);
        int r;

        while (len > 1 && under[len - 1] == '/')
                len--;
        r = table_read(&t);
        if (r < 0)
                return r;
        l = calloc(1, sizeof(char *));
        if (!l)
                return -ENOMEM;
        for (size_t i = 0; i < t.n; i++) {
                const char *target = t.rows[i].target;

                if (!streq(t.rows[i].fstype, fstype) || !streq(t.rows[i].source, source))
                        continue;
                if (!(len == 1 && under[0] == '/') &&
                    (strncmp(target, under, len) != 0 || (target[len] != 0 && target[len] != '/')))
                        continue;
                if (strv_extend(&l, target) < 0)
                        return -ENOMEM;
        }
        *ret = TAKE_PTR(l);
        return 0;
}

int mount_top_entry(int fd, MountEntry *ret) {
        MountIdentity m;
        int r;

        r = mount_identity_of_fd(fd, &m);
        if (r < 0)
                return r;
        if (!m.is_root)
                return -ENOENT;
        return mountinfo_find(m.id, ret);
}

void mount_ns_visit_done(MountNsVisit *v) {
        safe_close(v->home);
        safe_close(v->root);
        safe_close(v->cwd);
        *v = (MountNsVisit) MOUNT_NS_VISIT_INIT;
}

int mount_ns_open_own(uint64_t *ret_id) {
        char path[64];
        int fd;

        if (ret_id)
                *ret_id = 0;
        snprintf(path, sizeof(path), "%sself/ns/mnt", proc_prefix());
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        if (ret_id && ioctl(fd, NS_GET_MNTNS_ID, ret_id) < 0)
                *ret_id = 0;
        return fd;
}

int mount_ns_visit_begin(MountNsVisit *v) {
        int r;

        *v = (MountNsVisit) MOUNT_NS_VISIT_INIT;
        v->home = mount_ns_open_own(NULL);
        v->root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
        v->cwd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
        /* setns() into a mount namespace wants the thread's root and working directory to be
         * its own: a thread that has just ended may not have let go of them yet (the kernel
         * wakes its joiner first), and other threads share them. */
        if (v->home < 0 || v->root < 0 || v->cwd < 0 || unshare(CLONE_FS) < 0) {
                r = negative_errno();
                mount_ns_visit_done(v);
                return r;
        }
        return 0;
}

int mount_ns_visit_end(MountNsVisit *v) {
        int r = 0;

        if (setns(v->home, CLONE_NEWNS) < 0 || fchdir(v->root) < 0 || chroot(".") < 0 || fchdir(v->cwd) < 0)
                r = negative_errno();
        mount_ns_visit_done(v);
        if (r < 0)
                return log_error_errno(r, "Failed to return to this process's mount namespace: %m");
        mount_table_cache_invalidate();
        return 0;
}

