/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What an image's unit directories hold (unit-files.h): unit_files_scan() the unit files and
 * drop-ins it ships (Image.shipped_units), unit_wanted_scan() the links that enable a unit,
 * T.wants/U and T.requires/U (Image.wanted_units).  Read from the image's own layer, every
 * directory opened beneath its root fd, no symlink followed, a bounded number of entries
 * looked at; nothing is changed.  The name rules are pure.
 */
#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fd-util.h"
#include "fileio.h"
#include "unit-files.h"
#include "util.h"

/* A drop-in directory is read this far looking for a *.conf file. */
#define DROPIN_ENTRIES_MAX 4096

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
