/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Images that ship units (units.h).
 *
 *   1. probe (image.c): unit_files_scan() records every unit file and drop-in the image ships
 *      (Image.shipped_units), unit_wanted_scan() the links that enable a unit, T.wants/U and
 *      T.requires/U (Image.wanted_units), read from its own layer beneath its root, no symlink
 *      followed; kept in the journal with the image
 *   2. plan (pure): unit_actions_plan() from the images before and after a transition: which
 *      units to stop, restart or reload-or-restart, and the names refused, with the reason;
 *      and the candidates for a start: units an added or changed image with
 *      EXTENSION_RELOAD_MANAGER=1 newly enables and ships, each with what it is enabled for
 *   3. run: reload the service manager (synchronous, bounded), then enqueue the jobs and
 *      never wait for them; a candidate start only if a unit it is enabled for is being
 *      started (asked of the manager now: at boot, multi-user.target's start job was computed
 *      before the merge, and a reload adds no job), otherwise it is dropped without a word.
 *      The command line enqueues them itself; the daemon's worker enqueues them and its bus
 *      process reports how they ended (src/daemon/unit-jobs.c).
 * Nothing here changes a tree: a failure in 3 is a warning.
 */
#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fd-util.h"
#include "fileio.h"
#include "log.h"
#include "units.h"
#include "util.h"

#define MANAGER_CALL_TIMEOUT_USEC (120ULL * 1000000ULL)
#define JOB_CALL_TIMEOUT_USEC (25ULL * 1000000ULL)
#define MANAGER_PRIVATE_SOCKET "/run/systemd/private"
#define MANAGER_PRIVATE_ADDRESS "unix:path=" MANAGER_PRIVATE_SOCKET
#define MANAGER_SERVICE "org.freedesktop.systemd1"
#define MANAGER_PATH "/org/freedesktop/systemd1"
#define MANAGER_INTERFACE "org.freedesktop.systemd1.Manager"
/* A drop-in directory is read this far looking for a *.conf file. */
#define DROPIN_ENTRIES_MAX 4096

static const char *const kind_names[_UNIT_JOB_KIND_MAX] = {
        [UNIT_JOB_STOP] = "stop",
        [UNIT_JOB_RESTART] = "restart",
        [UNIT_JOB_RELOAD_OR_RESTART] = "reload-or-restart",
        [UNIT_JOB_START] = "start",
};

static const char *const kind_methods[_UNIT_JOB_KIND_MAX] = {
        [UNIT_JOB_STOP] = "StopUnit",
        [UNIT_JOB_RESTART] = "RestartUnit",
        [UNIT_JOB_RELOAD_OR_RESTART] = "ReloadOrRestartUnit",
        [UNIT_JOB_START] = "StartUnit",
};

const char *unit_job_kind_to_string(UnitJobKind k) {
        return k >= 0 && k < _UNIT_JOB_KIND_MAX ? kind_names[k] : NULL;
}

int unit_job_kind_from_string(const char *s) {
        int i = s ? string_table_find(kind_names, _UNIT_JOB_KIND_MAX, s) : -1;
        return i >= 0 ? i : -EINVAL;
}

const char *unit_job_kind_method(UnitJobKind k) {
        return k >= 0 && k < _UNIT_JOB_KIND_MAX ? kind_methods[k] : NULL;
}

void unit_actions_done(UnitActions *a) {
        for (size_t i = 0; i < a->n; i++) {
                free(a->actions[i].unit);
                free(a->actions[i].image);
                strv_free(a->actions[i].wanted_by);
                free(a->actions[i].job);
                free(a->actions[i].error);
        }
        free(a->actions);
        strv_free(a->warnings);
        *a = (UnitActions) {};
}

bool unit_name_valid(const char *name) {
        static const char *const types[] = { ".service", ".socket", ".target", ".device", ".mount", ".automount",
                                             ".swap", ".timer", ".path", ".slice", ".scope" };
        const char *at, *dot;
        bool typed = false;

        if (isempty(name) || strlen(name) > 255 || !utf8_is_valid(name))
                return false;
        for (const char *c = name; *c; c++)
                if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
                      strchr(":-_.\\@", *c)))
                        return false;
        for (size_t i = 0; i < ELEMENTSOF(types); i++)
                if (endswith(name, types[i]) && strlen(name) > strlen(types[i]))
                        typed = true;
        if (!typed || name[0] == '.' || name[0] == '@')
                return false;
        dot = strrchr(name, '.');
        at = strchr(name, '@');
        /* foo@bar.service is an instance; foo@.service a template, which cannot run. */
        if (at && (at + 1 == dot || strchr(at + 1, '@')))
                return false;
        return true;
}

const char *unit_type_refused(const char *name) {
        static const char *const refused[][2] = {
                { ".target", "targets" }, { ".mount", "mounts" }, { ".automount", "automounts" },
                { ".swap", "swaps" },     { ".slice", "slices" }, { ".scope", "scopes" },
                { ".device", "devices" },
        };

        for (size_t i = 0; name && i < ELEMENTSOF(refused); i++)
                if (endswith(name, refused[i][0]))
                        return refused[i][1];
        return NULL;
}

int unit_candidates(const char *name, char ***ret) {
        _cleanup_(strv_freep) char **l = NULL;
        const char *at = strchr(name, '@'), *dot = strrchr(name, '.');

        if (strv_extend(&l, name) < 0 || strv_push(&l, strjoin3(name, ".d/", "")) < 0)
                return -ENOMEM;
        if (at && dot && dot > at + 1) {
                /* An instance: its template "foo@.service" and the template's drop-ins. */
                _cleanup_free_ char *template = strndup(name, at + 1 - name);
                char *t;

                if (!template)
                        return -ENOMEM;
                t = strjoin3(template, dot, "");
                if (strv_push(&l, t) < 0 || strv_push(&l, t ? strjoin3(t, ".d/", "") : NULL) < 0)
                        return -ENOMEM;
        }
        *ret = TAKE_PTR(l);
        return 0;
}

UnitShipped unit_shipped(const char *name, char *const *shipped) {
        _cleanup_(strv_freep) char **c = NULL;
        UnitShipped s = UNIT_NOT_SHIPPED;

        if (!unit_name_valid(name) || !shipped || unit_candidates(name, &c) < 0)
                return UNIT_NOT_SHIPPED;
        STRV_FOREACH(x, c)
                if (strv_contains(shipped, *x)) {
                        if (!endswith(*x, ".d/"))
                                return UNIT_SHIPPED_FILE;
                        s = UNIT_SHIPPED_DROPIN;
                }
        return s;
}

char *const *unit_dirs(ImageClass k, bool usr_partition) {
        static char *const sysext[] = { (char *) "usr/lib/systemd/system", (char *) "usr/local/lib/systemd/system", NULL };
        static char *const usr[] = { (char *) "lib/systemd/system", (char *) "local/lib/systemd/system", NULL };
        static char *const confext[] = { (char *) "etc/systemd/system", NULL };

        return k == IMAGE_CLASS_CONFEXT ? confext : usr_partition ? usr : sysext;
}

/* A drop-in directory (never through a symlink) with at least one regular *.conf file. */
static bool dropin_ships(int dir_fd, const char *entry) {
        _cleanup_free_ char *name = strndup(entry, strlen(entry) - 1); /* without the "/" */
        _cleanup_closedir_ DIR *d = NULL;
        struct dirent *de;
        int fd;

        if (!name)
                return false;
        fd = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0)
                return false;
        d = fdopendir(fd);
        if (!d) {
                safe_close(fd);
                return false;
        }
        for (unsigned n = 0; n < DROPIN_ENTRIES_MAX && (de = readdir(d)); n++) {
                struct stat st;

                if (de->d_name[0] == '.' || !endswith(de->d_name, ".conf"))
                        continue;
                if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) >= 0 && S_ISREG(st.st_mode))
                        return true;
        }
        return false;
}

static bool entry_ships(int dir_fd, const char *entry) {
        struct stat st;

        if (endswith(entry, ".d/"))
                return dropin_ships(dir_fd, entry);
        /* One component (a valid unit name), looked at, not followed. */
        return fstatat(dir_fd, entry, &st, AT_SYMLINK_NOFOLLOW) >= 0 && S_ISREG(st.st_mode);
}

/* "foo@.service": a template, whose instances (foo@x.service) are valid unit names. */
static bool template_name_valid(const char *name) {
        _cleanup_free_ char *instance = NULL;
        const char *at = strstr(name, "@.");

        if (!at)
                return false;
        if (asprintf(&instance, "%.*s@x%s", (int) (at - name), name, at + 1) < 0) {
                instance = NULL;
                return false;
        }
        return unit_name_valid(instance);
}

/* Every unit file and drop-in directory in one unit directory (dfd), at most
 * UNIT_DIR_ENTRIES_MAX entries looked at. */
static int scan_all(int dfd, char ***found) {
        _cleanup_closedir_ DIR *d = NULL;
        struct dirent *de;
        int fd;

        fd = fcntl(dfd, F_DUPFD_CLOEXEC, 3);
        if (fd < 0)
                return -errno;
        d = fdopendir(fd);
        if (!d) {
                safe_close(fd);
                return -errno;
        }
        for (unsigned n = 0; n < UNIT_DIR_ENTRIES_MAX && (de = readdir(d)); n++) {
                _cleanup_free_ char *entry = NULL, *unit = NULL;
                size_t l = strlen(de->d_name);

                if (de->d_name[0] == '.')
                        continue;
                if (l > 2 && endswith(de->d_name, ".d")) {
                        unit = strndup(de->d_name, l - 2);
                        entry = strjoin3(de->d_name, "/", "");
                } else
                        unit = strdup(de->d_name), entry = strdup(de->d_name);
                if (!unit || !entry)
                        return -ENOMEM;
                if ((unit_name_valid(unit) || template_name_valid(unit)) && !strv_contains(*found, entry) &&
                    entry_ships(dirfd(d), entry) &&
                    strv_extend(found, entry) < 0)
                        return -ENOMEM;
        }
        return 0;
}

int unit_files_scan(int image_root_fd, char *const *dirs, char *const *names, char ***ret) {
        _cleanup_(strv_freep) char **found = NULL;

        STRV_FOREACH(dir, dirs) {
                _cleanup_close_ int dfd = -EBADF;
                int r;

                if (names && strv_length(names) == 0)
                        break;
                dfd = open_directory_at(image_root_fd, *dir, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
                if (dfd == -ENOMEM)
                        return dfd;
                if (dfd < 0)
                        continue; /* none there, or not a plain directory: ships nothing */
                if (!names) {
                        r = scan_all(dfd, &found);
                        if (r < 0)
                                return r;
                        continue;
                }
                STRV_FOREACH(u, names) {
                        _cleanup_(strv_freep) char **c = NULL;

                        if (!unit_name_valid(*u))
                                continue;
                        if (unit_candidates(*u, &c) < 0)
                                return -ENOMEM;
                        STRV_FOREACH(x, c)
                                if (!strv_contains(found, *x) && entry_ships(dfd, *x) && strv_extend(&found, *x) < 0)
                                        return -ENOMEM;
                }
        }
        *ret = TAKE_PTR(found);
        return 0;
}

/* ---- links that enable a unit (T.wants/U, T.requires/U) ------------------------------- */

static const char *const wanted_suffixes[] = { ".wants", ".requires" };

int unit_wanted_link_split(const char *link, char **ret_target, char **ret_unit) {
        const char *slash = link ? strchr(link, '/') : NULL;

        if (!slash || strlen(link) > UNIT_WANTED_LINK_MAX)
                return -EINVAL;
        for (size_t i = 0; i < ELEMENTSOF(wanted_suffixes); i++) {
                size_t l = strlen(wanted_suffixes[i]);
                _cleanup_free_ char *target = NULL, *unit = NULL;

                if ((size_t) (slash - link) <= l || strncmp(slash - l, wanted_suffixes[i], l) != 0)
                        continue;
                target = strndup(link, slash - l - link);
                unit = strdup(slash + 1);
                if (!target || !unit)
                        return -ENOMEM;
                /* unit_name_valid() allows no "/": U is one name, T too. */
                if (!unit_name_valid(target) || !unit_name_valid(unit))
                        return -EINVAL;
                if (ret_target)
                        *ret_target = TAKE_PTR(target);
                if (ret_unit)
                        *ret_unit = TAKE_PTR(unit);
                return 0;
        }
        return -EINVAL;
}

/* One T.wants/ or T.requires/ directory (never through a symlink): its symbolic links with a
 * unit's name, as systemd reads them (a link, not followed; a regular file there is ignored by
 * systemd too), not a mask. */
static int scan_wanted_dir(int dfd, const char *dir, char ***found) {
        _cleanup_closedir_ DIR *d = NULL;
        struct dirent *de;
        int fd;

        fd = openat(dfd, dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0)
                return 0; /* not a directory of its own: enables nothing */
        d = fdopendir(fd);
        if (!d) {
                int r = -errno;

                safe_close(fd);
                return r == -ENOMEM ? r : 0;
        }
        for (unsigned n = 0; n < UNIT_DIR_ENTRIES_MAX && (de = readdir(d)); n++) {
                _cleanup_free_ char *link = NULL;
                char target[sizeof("/dev/null")];
                struct stat st;
                ssize_t k;

                if (de->d_name[0] == '.')
                        continue;
                link = strjoin3(dir, "/", de->d_name);
                if (!link)
                        return -ENOMEM;
                if (unit_wanted_link_split(link, NULL, NULL) < 0 || strv_contains(*found, link))
                        continue;
                if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISLNK(st.st_mode))
                        continue;
                /* The link's text only: "/dev/null" masks the dependency. */
                k = readlinkat(dirfd(d), de->d_name, target, sizeof(target));
                if (k < 0 || ((size_t) k == strlen("/dev/null") && memcmp(target, "/dev/null", k) == 0))
                        continue;
                if (strv_length(*found) >= UNIT_WANTED_MAX)
                        return 0;
                if (strv_push(found, TAKE_PTR(link)) < 0)
                        return -ENOMEM;
        }
        return 0;
}

int unit_wanted_scan(int image_root_fd, char *const *dirs, char ***ret) {
        _cleanup_(strv_freep) char **found = NULL;

        STRV_FOREACH(dir, dirs) {
                _cleanup_close_ int dfd = -EBADF;
                _cleanup_closedir_ DIR *d = NULL;
                struct dirent *de;

                dfd = open_directory_at(image_root_fd, *dir, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
                if (dfd == -ENOMEM)
                        return dfd;
                if (dfd < 0)
                        continue; /* none there, or not a plain directory: enables nothing */
                d = fdopendir(dfd);
                if (!d)
                        return -errno;
                TAKE_FD(dfd);
                for (unsigned n = 0; n < UNIT_DIR_ENTRIES_MAX && (de = readdir(d)); n++) {
                        bool wanted = false;
                        int r;

                        for (size_t i = 0; i < ELEMENTSOF(wanted_suffixes); i++)
                                wanted = wanted || endswith(de->d_name, wanted_suffixes[i]);
                        if (de->d_name[0] == '.' || !wanted)
                                continue;
                        r = scan_wanted_dir(dirfd(d), de->d_name, &found);
                        if (r < 0)
                                return r;
                }
        }
        *ret = TAKE_PTR(found);
        return 0;
}

/* ---- the plan ------------------------------------------------------------------------- */

static const Image *find(const ImageList *l, const Image *img) {
        for (size_t i = 0; i < l->n; i++)
                if (l->images[i].verdict == IMAGE_COMPATIBLE && l->images[i].klass == img->klass &&
                    streq(l->images[i].name, img->name))
                        return &l->images[i];
        return NULL;
}

static bool same_image(const Image *a, const Image *b) {
        return streq_ptr(a->path, b->path) && a->st.st_dev == b->st.st_dev && a->st.st_ino == b->st.st_ino &&
               a->st.st_size == b->st.st_size && a->st.st_mtim.tv_sec == b->st.st_mtim.tv_sec &&
               a->st.st_mtim.tv_nsec == b->st.st_mtim.tv_nsec && a->stamp == b->stamp;
}

static int warn(UnitActions *a, const char *fmt, ...) _printf_(2, 3);
static int warn(UnitActions *a, const char *fmt, ...) {
        va_list ap;
        char *w;
        int r;

        va_start(ap, fmt);
        r = vasprintf(&w, fmt, ap);
        va_end(ap);
        if (r < 0)
                return -ENOMEM;
        return strv_push(&a->warnings, w);
}

/* Whether a job of kind k replaces one of kind old for the same unit: a restart wins over a
 * reload-or-restart, either over a stop (a unit still there) and over a start (it starts the
 * unit whatever its targets do).  A start replaces nothing: a unit an image enables is one it
 * ships, so no stop is planned for it, and a restart or reload-or-restart starts it anyway. */
static bool kind_wins(UnitJobKind k, UnitJobKind old) {
        switch (old) {
        case UNIT_JOB_STOP:
        case UNIT_JOB_START:
                return IN_SET(k, UNIT_JOB_RESTART, UNIT_JOB_RELOAD_OR_RESTART);
        case UNIT_JOB_RELOAD_OR_RESTART:
                return k == UNIT_JOB_RESTART;
        default:
                return false;
        }
}

/* wanted_by: for a start, the unit it is enabled for (T of T.wants/U). */
static int add_action(UnitActions *a, const char *unit, UnitJobKind kind, const char *image, const char *wanted_by) {
        UnitAction *n;

        for (size_t i = 0; i < a->n; i++) {
                UnitAction *x = &a->actions[i];

                if (!streq(x->unit, unit))
                        continue;
                if (kind_wins(kind, x->kind)) {
                        char *img = strdup(image);

                        if (!img)
                                return -ENOMEM;
                        free(x->image);
                        x->image = img;
                        x->kind = kind;
                        strv_free(x->wanted_by);
                        x->wanted_by = NULL;
                } else if (kind == UNIT_JOB_START && x->kind == UNIT_JOB_START && !strv_contains(x->wanted_by, wanted_by))
                        return strv_extend(&x->wanted_by, wanted_by); /* enabled for another unit too */
                return 0;
        }
        n = realloc(a->actions, sizeof(UnitAction) * (a->n + 1));
        if (!n)
                return -ENOMEM;
        a->actions = n;
        n[a->n] = (UnitAction) { .unit = strdup(unit), .kind = kind, .image = strdup(image) };
        if (!n[a->n].unit || !n[a->n].image || (wanted_by && strv_extend(&n[a->n].wanted_by, wanted_by) < 0)) {
                free(n[a->n].unit);
                free(n[a->n].image);
                strv_free(n[a->n].wanted_by);
                return -ENOMEM;
        }
        a->n++;
        return 0;
}

static const char *list_key(UnitJobKind k) {
        return k == UNIT_JOB_RESTART ? "EXTENSION_RESTART_UNITS" : "EXTENSION_RELOAD_OR_RESTART_UNITS";
}

static char *const *listed(const Image *img, UnitJobKind k) {
        return k == UNIT_JOB_RESTART ? img->restart_units : img->reload_or_restart_units;
}

static bool lists(const Image *img, const char *unit) {
        return strv_contains(img->restart_units, unit) || strv_contains(img->reload_or_restart_units, unit);
}

/* Whether the image enables its own unit through the link (T.wants/U, T.requires/U): one it
 * ships a unit file for (its template's for an instance), of a type an image may start. */
static bool enables_own(const Image *img, const char *link, char **ret_target, char **ret_unit) {
        _cleanup_free_ char *target = NULL, *unit = NULL;

        if (!img || !strv_contains(img->wanted_units, link) || unit_wanted_link_split(link, &target, &unit) < 0 ||
            unit_type_refused(unit) || unit_shipped(unit, img->shipped_units) != UNIT_SHIPPED_FILE)
                return false;
        if (ret_target)
                *ret_target = TAKE_PTR(target);
        if (ret_unit)
                *ret_unit = TAKE_PTR(unit);
        return true;
}

/* The units the image enables that it ships, to be started after the reload if what they are
 * enabled for is being started (at boot: the target's start job predates the merge, and a
 * reload adds no job).  Only with EXTENSION_RELOAD_MANAGER=1.  A link the image's previous
 * version (old) had, to a unit it shipped too, was a candidate when that version came. */
static int consider_enabled(UnitActions *a, const Image *img, const Image *old) {
        if (!img->reload_manager)
                return 0;
        STRV_FOREACH(l, img->wanted_units) {
                _cleanup_free_ char *target = NULL, *unit = NULL;
                int r;

                if (!enables_own(img, *l, &target, &unit) || enables_own(old, *l, NULL, NULL))
                        continue;
                r = add_action(a, unit, UNIT_JOB_START, img->name, target);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* An image that is merged after the transition (added, or the new version of a changed one,
 * old): the units it lists and ships, and those it enables. */
static int consider_present(UnitActions *a, const Image *img, const Image *old) {
        int r;

        if (img->reload_manager)
                a->reload = true;
        for (UnitJobKind k = UNIT_JOB_RESTART; k <= UNIT_JOB_RELOAD_OR_RESTART; k++)
                STRV_FOREACH(u, listed(img, k)) {
                        const char *type;

                        if (!unit_name_valid(*u)) {
                                _cleanup_free_ char *safe = NULL;

                                r = warn(a, "Invalid unit name '%s' in %s= of %s, ignoring.", string_safe(*u, &safe),
                                         list_key(k), img->name);
                        } else if ((type = unit_type_refused(*u)))
                                r = warn(a, "Extension %s lists %s in %s=, but %s are never restarted by an image, ignoring it.",
                                         img->name, *u, list_key(k), type);
                        else if (unit_shipped(*u, img->shipped_units) == UNIT_NOT_SHIPPED)
                                r = warn(a, "Extension %s ships no unit file or drop-in for %s, not restarting it.", img->name,
                                         *u);
                        else {
                                a->reload = true;
                                r = add_action(a, *u, k, img->name, NULL);
                        }
                        if (r < 0)
                                return r;
                }
        return consider_enabled(a, img, old);
}

/* Whether a unit file for the unit stays merged: shipped by an image after the transition,
 * or by an image of a class the transition did not cover. */
static bool file_stays(const ImageList *before, const ImageList *after, unsigned classes, const char *unit) {
        for (size_t i = 0; i < after->n; i++) {
                const Image *img = &after->images[i];

                if (img->verdict == IMAGE_COMPATIBLE && (classes & (1u << img->klass)) &&
                    unit_shipped(unit, img->shipped_units) == UNIT_SHIPPED_FILE)
                        return true;
        }
        for (size_t i = 0; i < before->n; i++) {
                const Image *img = &before->images[i];

                if (img->verdict == IMAGE_COMPATIBLE && !(classes & (1u << img->klass)) &&
                    unit_shipped(unit, img->shipped_units) == UNIT_SHIPPED_FILE)
                        return true;
        }
        return false;
}

/* An image that goes (removed, or the old version of a changed one, then now is the new):
 * the units it listed and shipped.  Its refused names were reported when it came. */
static int consider_gone(UnitActions *a, const Image *old, const Image *now, const ImageList *before,
                         const ImageList *after, unsigned classes) {
        int r;

        if (old->reload_manager)
                a->reload = true;
        for (UnitJobKind k = UNIT_JOB_RESTART; k <= UNIT_JOB_RELOAD_OR_RESTART; k++)
                STRV_FOREACH(u, listed(old, k)) {
                        UnitShipped s;

                        if (!unit_name_valid(*u) || unit_type_refused(*u))
                                continue;
                        s = unit_shipped(*u, old->shipped_units);
                        if (s == UNIT_NOT_SHIPPED)
                                continue;
                        a->reload = true;
                        if (now && lists(now, *u) && unit_shipped(*u, now->shipped_units) != UNIT_NOT_SHIPPED)
                                continue; /* the new version asks for it itself */
                        if (s == UNIT_SHIPPED_FILE && !file_stays(before, after, classes, *u))
                                r = add_action(a, *u, UNIT_JOB_STOP, old->name, NULL); /* its unit went */
                        else
                                r = add_action(a, *u, k, old->name, NULL); /* the unit stays, changed */
                        if (r < 0)
                                return r;
                }
        return 0;
}

static int by_kind(const void *x, const void *y) {
        const UnitAction *a = x, *b = y;
        return a->kind != b->kind ? (a->kind < b->kind ? -1 : 1) : 0;
}

int unit_actions_plan(const ImageList *before, const ImageList *after, unsigned classes, UnitActions *ret) {
        UnitActions a = {};
        int r = 0;

        for (size_t i = 0; r >= 0 && i < after->n; i++) {
                const Image *img = &after->images[i], *old;

                if (img->verdict != IMAGE_COMPATIBLE || !(classes & (1u << img->klass)))
                        continue;
                old = find(before, img);
                if (old && same_image(old, img))
                        continue;
                r = consider_present(&a, img, old); /* added or changed */
                if (r >= 0 && old)
                        r = consider_gone(&a, old, img, before, after, classes);
        }
        for (size_t i = 0; r >= 0 && i < before->n; i++) {
                const Image *img = &before->images[i];

                if (img->verdict == IMAGE_COMPATIBLE && (classes & (1u << img->klass)) && !find(after, img))
                        r = consider_gone(&a, img, NULL, before, after, classes); /* removed */
        }
        if (r < 0) {
                unit_actions_done(&a);
                return r;
        }
        /* Stops first, then restarts, then reloads-or-restarts, then starts; in the order listed
         * within each (insertion sort: qsort is not stable). */
        for (size_t i = 1; i < a.n; i++)
                for (size_t j = i; j > 0 && by_kind(&a.actions[j - 1], &a.actions[j]) > 0; j--) {
                        UnitAction t = a.actions[j];
                        a.actions[j] = a.actions[j - 1];
                        a.actions[j - 1] = t;
                }
        *ret = a;
        return 0;
}

/* ---- running it ----------------------------------------------------------------------- */

int unit_manager_connect(sd_bus **ret) {
        int r;

        /* As systemd's bus_connect_system_systemd(): the manager's private socket for root,
         * which exists before the system bus does (early boot). */
        if (geteuid() == 0 && !getenv("DBUS_SYSTEM_BUS_ADDRESS") && access(MANAGER_PRIVATE_SOCKET, F_OK) >= 0) {
                _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;

                r = sd_bus_new(&bus);
                if (r >= 0)
                        r = sd_bus_set_address(bus, MANAGER_PRIVATE_ADDRESS);
                if (r >= 0)
                        r = sd_bus_start(bus);
                if (r >= 0) {
                        *ret = TAKE_PTR(bus);
                        return 0;
                }
                log_debug("Failed to connect to the service manager's private socket, trying the system bus: %s",
                          strerror(-r));
        }
        return sd_bus_open_system(ret);
}

static int manager_reload(sd_bus *bus, char **ret_error) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        int r;

        r = sd_bus_message_new_method_call(bus, &m, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                                           "org.freedesktop.systemd1.Manager", "Reload");
        if (r >= 0)
                r = sd_bus_call(bus, m, MANAGER_CALL_TIMEOUT_USEC, &error, NULL);
        if (r < 0)
                *ret_error = strdup(error.message ?: strerror(-r));
        return r;
}

static int call_job(sd_bus *bus, const char *method, const char *unit, char **ret_job, sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL, *reply = NULL;
        const char *path;
        int r;

        r = sd_bus_message_new_method_call(bus, &m, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                                           "org.freedesktop.systemd1.Manager", method);
        if (r >= 0)
                r = sd_bus_message_append(m, "ss", unit, "replace");
        if (r >= 0)
                r = sd_bus_call(bus, m, JOB_CALL_TIMEOUT_USEC, error, &reply);
        if (r >= 0)
                r = sd_bus_message_read(reply, "o", &path);
        if (r < 0)
                return r;
        *ret_job = strdup(path);
        return *ret_job ? 0 : -ENOMEM;
}

int unit_job_enqueue(sd_bus *bus, const UnitAction *a, char **ret_job, UnitJobKind *ret_kind, char **ret_error) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        UnitJobKind kind = a->kind;
        int r;

        r = call_job(bus, unit_job_kind_method(kind), a->unit, ret_job, &error);
        /* Its unit file is gone (another image's went with it): stop what runs.  Not on
         * LoadFailed: a unit file that does not parse is no reason to stop a running service.
         * Never for a start: what is not there is not started. */
        if (r < 0 && IN_SET(kind, UNIT_JOB_RESTART, UNIT_JOB_RELOAD_OR_RESTART) &&
            sd_bus_error_has_name(&error, "org.freedesktop.systemd1.NoSuchUnit")) {
                sd_bus_error_free(&error);
                kind = UNIT_JOB_STOP;
                r = call_job(bus, "StopUnit", a->unit, ret_job, &error);
        }
        if (r < 0) {
                *ret_error = strdup(error.message ?: strerror(-r));
                return r;
        }
        *ret_kind = kind;
        return 0;
}

/* Whether the unit is being started: its ActiveState is "activating", or a start (or restart)
 * job is queued for it.  A target has no "activating" state: at boot, multi-user.target is
 * "inactive" with a start job waiting for what it is ordered after.  A unit not loaded is not
 * being started.  1 yes, 0 no, < 0 could not tell (*ret_error: why).  Logs nothing. */
static int unit_being_started(sd_bus *bus, const char *unit, char **ret_error) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_free_ char *path = NULL, *state = NULL, *job = NULL, *type = NULL;
        const char *s;
        uint32_t id = 0;
        int r;

        r = sd_bus_call_method(bus, MANAGER_SERVICE, MANAGER_PATH, MANAGER_INTERFACE, "GetUnit", &error, &reply, "s", unit);
        if (r < 0 && sd_bus_error_has_name(&error, "org.freedesktop.systemd1.NoSuchUnit"))
                return 0;
        if (r >= 0)
                r = sd_bus_message_read(reply, "o", &s);
        if (r >= 0 && !(path = strdup(s)))
                r = -ENOMEM;
        reply = sd_bus_message_unref(reply);
        if (r >= 0)
                r = sd_bus_get_property_string(bus, MANAGER_SERVICE, path, "org.freedesktop.systemd1.Unit", "ActiveState",
                                               &error, &state);
        if (r >= 0 && streq(state, "activating"))
                return 1;
        if (r >= 0)
                r = sd_bus_get_property(bus, MANAGER_SERVICE, path, "org.freedesktop.systemd1.Unit", "Job", &error, &reply,
                                        "(uo)");
        if (r >= 0)
                r = sd_bus_message_read(reply, "(uo)", &id, &s);
        if (r >= 0 && id != 0 && !(job = strdup(s)))
                r = -ENOMEM;
        if (r >= 0 && id == 0)
                return 0;
        if (r >= 0) {
                r = sd_bus_get_property_string(bus, MANAGER_SERVICE, job, "org.freedesktop.systemd1.Job", "JobType", &error,
                                               &type);
                /* The job ended meanwhile: the unit is no longer being started. */
                if (r < 0 && (sd_bus_error_has_name(&error, SD_BUS_ERROR_UNKNOWN_OBJECT) ||
                              sd_bus_error_has_name(&error, "org.freedesktop.systemd1.NoSuchJob")))
                        return 0;
        }
        if (r < 0) {
                *ret_error = strdup(error.message ?: strerror(-r));
                return r;
        }
        return STR_IN_SET(type, "start", "restart");
}

/* For a start: the first unit it is enabled for that is being started (*ret_target), each asked
 * once per run (starting, idle: the answers so far).  1 found, 0 none, < 0 could not tell
 * (*ret_target: about which, *ret_error: why). */
static int find_starting(sd_bus *bus, const UnitAction *x, char ***starting, char ***idle, const char **ret_target,
                         char **ret_error) {
        STRV_FOREACH(t, x->wanted_by) {
                int r;

                if (strv_contains(*starting, *t)) {
                        *ret_target = *t;
                        return 1;
                }
                if (strv_contains(*idle, *t))
                        continue;
                r = unit_being_started(bus, *t, ret_error);
                if (r < 0) {
                        *ret_target = *t;
                        return r;
                }
                (void) strv_extend(r > 0 ? starting : idle, *t); /* saves asking again, no more */
                if (r > 0) {
                        *ret_target = *t;
                        return 1;
                }
        }
        return 0;
}

int unit_actions_run(UnitActions *a) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        _cleanup_(strv_freep) char **starting = NULL, **idle = NULL;
        _cleanup_free_ char *error = NULL;
        int r;

        STRV_FOREACH(w, a->warnings)
                log_warning("%s", *w);
        if (!a->reload && a->n == 0)
                return 0;
        r = unit_manager_connect(&bus);
        if (r < 0)
                return log_warning_errno(r, "Failed to connect to the service manager to reload it: %m");
        r = manager_reload(bus, &error);
        if (r < 0) {
                log_warning("Failed to reload the service manager: %s", strna(error));
                return r;
        }
        log_info("Reloaded the service manager (an extension ships units).");
        for (size_t i = 0; i < a->n; i++) {
                UnitAction *x = &a->actions[i];
                const char *target = NULL;
                UnitJobKind kind;

                free(x->job), free(x->error);
                x->job = x->error = NULL;
                if (x->kind == UNIT_JOB_START) {
                        r = find_starting(bus, x, &starting, &idle, &target, &x->error);
                        if (r < 0) {
                                log_warning("Failed to learn whether %s is being started, not starting %s (extension %s): %s",
                                            target, x->unit, x->image, strna(x->error));
                                continue;
                        }
                        if (r == 0)
                                continue; /* enabling is not starting (as systemd-sysext): nothing said */
                }
                r = unit_job_enqueue(bus, x, &x->job, &kind, &x->error);
                if (r < 0)
                        log_warning("Failed to queue the %s of %s (for extension %s): %s", unit_job_kind_to_string(x->kind), x->unit,
                                    x->image, strna(x->error));
                else {
                        x->kind = kind;
                        if (target)
                                log_info("Queued start of %s (extension %s): it is enabled for %s, which is being started.",
                                         x->unit, x->image, target);
                        else
                                log_info("Queued %s of %s (extension %s).", unit_job_kind_to_string(kind), x->unit, x->image);
                }
        }
        return 1;
}
