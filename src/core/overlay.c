/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Overlay assembly.
 *
 * Steps: fsopen("overlay") -> fsconfig(source, lowerdir+ ..., [upperdir, workdir], options,
 *        [ro]) -> FSCONFIG_CMD_CREATE -> fsmount(attributes).
 * A layer the caller has open goes in by its fd (FSCONFIG_SET_FD, Linux 6.13; used from 6.15,
 * kernel.h's detached-layers, on; all by path again where the kernel refuses such an fd), else
 * by its path.
 * Before Linux 6.8 (no lowerdir+, kernel.h) all layers go into one "lowerdir" string, or,
 * for a long one, into mount(2)'s options.  A tree without an upper directory is read-only;
 * one with it is writable (mutable modes, mutable.h).  Options that are per-mount flags in
 * the kernel (noatime, nosuid, ...) become mount attributes, never fs parameters.
 * Nothing is attached here: the caller decides where the detached mount goes.  A failure
 * leaves nothing behind (the fs context and mount fds are closed).
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>

#include "fd-util.h"
#include "kernel.h"
#include "loopdev.h"
#include "missing.h"
#include "overlay.h"
#include "util.h"

void overlay_plan_done(OverlayPlan *p) {
        for (size_t i = 0; i < p->n; i++) {
                free(p->params[i].key);
                free(p->params[i].value);
        }
        free(p->params);
        *p = (OverlayPlan) {};
}

static int plan_add_fd(OverlayPlan *p, const char *key, const char *value, int fd) {
        OverlayParam *n = realloc(p->params, sizeof(OverlayParam) * (p->n + 1));

        if (!n)
                return -ENOMEM;
        p->params = n;
        n[p->n] = (OverlayParam) { .key = strdup(key), .value = value ? strdup(value) : NULL, .fd = fd };
        if (!n[p->n].key || (value && !n[p->n].value)) {
                free(n[p->n].key);
                free(n[p->n].value);
                return -ENOMEM;
        }
        p->n++;
        return 0;
}

static int plan_add(OverlayPlan *p, const char *key, const char *value) {
        return plan_add_fd(p, key, value, -EBADF);
}

static char *escape_layer(const char *s) {
        char *r = malloc(strlen(s) * 2 + 1), *o = r;

        if (!r)
                return NULL;
        for (; *s; s++) {
                if (*s == ':' || *s == '\\')
                        *o++ = '\\';
                *o++ = *s;
        }
        *o = 0;
        return r;
}

/* Options sysextd gives itself: a layer, the upper or work directory, the source. */
static bool key_names_layer(const char *key) {
        return STR_IN_SET(key, "lowerdir", "lowerdir+", "upperdir", "workdir", "datadir+", "source");
}

/* Whether options a and b ("key[=value]") have the same key. */
static bool same_key(const char *a, const char *b) {
        size_t n = strcspn(a, "=");

        return n == strcspn(b, "=") && strncmp(a, b, n) == 0;
}

/* Splits options into fs parameters (added to p) and mount attributes (p->attrs). */
static int plan_options(OverlayPlan *p, const char *options) {
        static const struct {
                const char *name;
                unsigned set, clear;
        } attrs[] = {
                { "noatime", MOUNT_ATTR_NOATIME, MOUNT_ATTR__ATIME },
                { "relatime", MOUNT_ATTR_RELATIME, MOUNT_ATTR__ATIME },
                { "strictatime", MOUNT_ATTR_STRICTATIME, MOUNT_ATTR__ATIME },
                { "nodiratime", MOUNT_ATTR_NODIRATIME, 0 },
                { "nosuid", MOUNT_ATTR_NOSUID, 0 },
                { "nodev", MOUNT_ATTR_NODEV, 0 },
                { "noexec", MOUNT_ATTR_NOEXEC, 0 },
        };
        _cleanup_strv_free_ char **l = NULL;
        int r;

        r = strv_split(options, ",", &l);
        if (r < 0)
                return r;
        STRV_FOREACH(o, l) {
                _cleanup_free_ char *key = NULL;
                const char *eq = strchr(*o, '=');
                bool done = false;

                key = eq ? strndup(*o, eq - *o) : strdup(*o);
                if (!key)
                        return -ENOMEM;
                if (isempty(key) || key_names_layer(key) || string_has_control(*o))
                        return -EINVAL;
                for (size_t i = 0; i < ELEMENTSOF(attrs); i++)
                        if (!eq && streq(key, attrs[i].name)) {
                                p->attrs = (p->attrs & ~attrs[i].clear) | attrs[i].set;
                                done = true;
                        }
                if (done || (!eq && STR_IN_SET(key, "ro", "rw")))
                        continue; /* ro/rw follow from the upper directory */
                r = plan_add(p, key, eq ? eq + 1 : NULL);
                if (r < 0)
                        return r;
        }
        return 0;
}

int overlay_options_check(const char *options, char **ret_bad) {
        _cleanup_strv_free_ char **l = NULL;
        int r;

        if (isempty(options))
                return 0;
        r = strv_split(options, ",", &l);
        if (r < 0)
                return r;
        STRV_FOREACH(o, l) {
                _cleanup_free_ char *key = strndup(*o, strcspn(*o, "="));

                if (!key)
                        return -ENOMEM;
                if (isempty(key) || key_names_layer(key) || string_has_control(*o) || !utf8_is_valid(*o)) {
                        if (ret_bad) {
                                *ret_bad = strdup(*o);
                                if (!*ret_bad)
                                        return -ENOMEM;
                        }
                        return -EINVAL;
                }
        }
        return 0;
}

int overlay_options_merge(const char *defaults, const char *given, char **ret) {
        _cleanup_strv_free_ char **d = NULL, **g = NULL, **out = NULL;
        bool metacopy_on = false;
        char *joined;
        int r;

        r = strv_split(defaults, ",", &d);
        if (r >= 0 && !isempty(given))
                r = strv_split(given, ",", &g);
        if (r < 0)
                return r;
        STRV_FOREACH(o, g)
                if (streq(*o, "metacopy=on"))
                        metacopy_on = true;
        STRV_FOREACH(o, d) {
                /* metacopy=on needs redirects followed: the kernel refuses it together with an
                 * explicit redirect_dir=nofollow, and turns redirects on by itself without one. */
                bool replaced = metacopy_on && same_key(*o, "redirect_dir");

                STRV_FOREACH(x, g)
                        replaced = replaced || same_key(*o, *x);
                if (!replaced && strv_extend(&out, *o) < 0)
                        return -ENOMEM;
        }
        STRV_FOREACH(o, g)
                if (strv_extend(&out, *o) < 0)
                        return -ENOMEM;
        joined = out ? strv_join(out, ",") : strdup("");
        if (!joined)
                return -ENOMEM;
        *ret = joined;
        return 0;
}

int overlay_plan_build(const OverlaySpec *s, bool lowerdir_plus, OverlayPlan *ret) {
        __attribute__((cleanup(overlay_plan_done))) OverlayPlan p = {};
        size_t n = strv_length(s->layers);
        bool writable = s->upper && s->work;
        _cleanup_free_ char *options = NULL;
        int r;

        if (n < (writable ? 1 : 2) || n > OVERLAY_LAYERS_MAX || !!s->upper != !!s->work)
                return -EINVAL;

        p.attrs = s->attrs | (writable ? 0 : MOUNT_ATTR_RDONLY);
        r = plan_add(&p, "source", OVERLAY_SOURCE);
        if (r < 0)
                return r;

        if (lowerdir_plus) {
                for (size_t i = 0; i < n; i++) {
                        r = plan_add_fd(&p, "lowerdir+", s->layers[i], s->layer_fds ? s->layer_fds[i] : -EBADF);
                        if (r < 0)
                                return r;
                }
        } else {
                _cleanup_strv_free_ char **escaped = NULL;
                _cleanup_free_ char *joined = NULL;

                STRV_FOREACH(l, s->layers) {
                        r = strv_push(&escaped, escape_layer(*l));
                        if (r < 0)
                                return r;
                }
                joined = strv_join(escaped, ":");
                if (!joined)
                        return -ENOMEM;
                if (strlen(joined) >= 256)
                        return -E2BIG;
                r = plan_add(&p, "lowerdir", joined);
                if (r < 0)
                        return r;
        }
        if (writable) {
                r = plan_add(&p, "upperdir", s->upper);
                if (r >= 0)
                        r = plan_add(&p, "workdir", s->work);
                if (r < 0)
                        return r;
        }

        if (!writable) {
                r = overlay_options_merge(OVERLAY_OPTIONS_READ_ONLY, s->options, &options);
                if (r < 0)
                        return r;
        } else if (!s->options)
                options = strdup(OVERLAY_OPTIONS_WRITABLE);
        else
                /* No index, whatever else was asked for: the next tree shares this upper
                 * directory (an explicit index=on then fails that mount, with the kernel's
                 * words). */
                options = strstr(s->options, "index=") ? strdup(s->options)
                                                       : strjoin3(s->options, *s->options ? "," : "", "index=off");
        if (!options)
                return -ENOMEM;
        r = plan_options(&p, options);
        if (r < 0)
                return r;
        if (!writable) {
                r = plan_add(&p, "ro", NULL);
                if (r < 0)
                        return r;
        }

        *ret = p;
        p = (OverlayPlan) {};
        return 0;
}

/* 'by_fd': layers with an fd are given by it (FSCONFIG_SET_FD), which spares the kernel a path
 * walk through /proc per layer; *ret_fd_refused when the kernel refused such an fd (EBADF,
 * EINVAL) of a layer that has a path too: the caller tries again by path, in a new context
 * (this one's log holds the refusal). */
static int overlay_try(const OverlayPlan *p, bool by_fd, int *ret_mount_fd, char **ret_message, bool *ret_fd_refused) {
        _cleanup_close_ int fs_fd = -EBADF, mnt_fd = -EBADF;
        int r;

        fs_fd = fsopen("overlay", FSOPEN_CLOEXEC);
        if (fs_fd < 0)
                return negative_errno();

        for (size_t i = 0; i < p->n; i++) {
                if (by_fd && p->params[i].fd >= 0) {
                        r = fsconfig(fs_fd, FSCONFIG_SET_FD, p->params[i].key, NULL, p->params[i].fd);
                        if (r >= 0)
                                continue;
                        /* A kernel that takes no O_PATH fd for a layer (overlayfs from 6.13
                         * until O_PATH fds were accepted with detached layers; a backport may
                         * have one without the other). */
                        if (IN_SET(errno, EBADF, EINVAL) && p->params[i].value)
                                *ret_fd_refused = true;
                        goto fail;
                }
                if (p->params[i].value)
                        r = fsconfig(fs_fd, FSCONFIG_SET_STRING, p->params[i].key, p->params[i].value, 0);
                else
                        r = fsconfig(fs_fd, FSCONFIG_SET_FLAG, p->params[i].key, NULL, 0);
                if (r < 0)
                        goto fail;
        }
        if (fsconfig(fs_fd, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
                goto fail;
        mnt_fd = fsmount(fs_fd, FSMOUNT_CLOEXEC, p->attrs);
        if (mnt_fd < 0)
                goto fail;
        *ret_mount_fd = TAKE_FD(mnt_fd);
        return 0;
fail:
        r = negative_errno();
        *ret_message = fs_context_message(fs_fd);
        return r;
}

int overlay_mount(const OverlaySpec *s, int *ret_mount_fd, char **ret_message) {
        __attribute__((cleanup(overlay_plan_done))) OverlayPlan p = {};
        _cleanup_free_ char *msg = NULL;
        bool fd_refused = false;
        int r;

        r = overlay_plan_build(s, kernel_has(KERNEL_LOWERDIR_PLUS), &p);
        if (r < 0)
                return r;
        /* Layers as fds came with Linux 6.13, before detached mounts as layers (6.15). */
        r = overlay_try(&p, kernel_has(KERNEL_DETACHED_LAYERS), ret_mount_fd, &msg, &fd_refused);
        if (r < 0 && fd_refused) {
                free(msg);
                msg = NULL;
                r = overlay_try(&p, false, ret_mount_fd, &msg, &fd_refused);
        }
        if (r < 0)
                *ret_message = TAKE_PTR(msg);
        return r;
}

static unsigned long ms_flags_of(unsigned attrs) {
        unsigned long f = 0;

        if (attrs & MOUNT_ATTR_RDONLY)
                f |= MS_RDONLY;
        if (attrs & MOUNT_ATTR_NOSUID)
                f |= MS_NOSUID;
        if (attrs & MOUNT_ATTR_NODEV)
                f |= MS_NODEV;
        if (attrs & MOUNT_ATTR_NOEXEC)
                f |= MS_NOEXEC;
        if (attrs & MOUNT_ATTR_NODIRATIME)
                f |= MS_NODIRATIME;
        if ((attrs & MOUNT_ATTR__ATIME) == MOUNT_ATTR_NOATIME)
                f |= MS_NOATIME;
        else if ((attrs & MOUNT_ATTR__ATIME) == MOUNT_ATTR_STRICTATIME)
                f |= MS_STRICTATIME;
        return f;
}

int overlay_mount_legacy(const OverlaySpec *s, const char *where, char **ret_message) {
        __attribute__((cleanup(overlay_plan_done))) OverlayPlan p = {};
        _cleanup_strv_free_ char **lowers = NULL, **rest = NULL;
        _cleanup_free_ char *options = NULL, *joined = NULL, *others = NULL;
        int r;

        STRV_FOREACH(l, s->layers)
                if (strchr(*l, ','))
                        return set_message(ret_message, EINVAL, "layer path %s contains a comma", *l);
        if ((s->upper && strchr(s->upper, ',')) || (s->work && strchr(s->work, ',')))
                return set_message(ret_message, EINVAL, "the upper or work directory contains a comma");
        /* The same parameters as for fsconfig(), the one lowerdir string without its 256 byte
         * limit: mount(2) takes one page of options. */
        r = overlay_plan_build(s, true, &p);
        if (r < 0)
                return r;
        for (size_t i = 0; i < p.n; i++) {
                const OverlayParam *o = &p.params[i];

                if (streq(o->key, "lowerdir+"))
                        r = strv_push(&lowers, escape_layer(o->value));
                else if (!STR_IN_SET(o->key, "source", "ro"))
                        r = strv_push(&rest, o->value ? strjoin3(o->key, "=", o->value) : strdup(o->key));
                if (r < 0)
                        return r;
        }
        joined = strv_join(lowers, ":");
        others = strv_join(rest, ",");
        if (!joined || !others)
                return -ENOMEM;
        options = strjoin3("lowerdir=", joined, "");
        if (options && *others) {
                char *n = strjoin3(options, ",", others);
                free(options);
                options = n;
        }
        if (!options || strlen(options) >= 4096)
                return -E2BIG;
        if (mkdir(where, 0755) < 0 && errno != EEXIST)
                return negative_errno();
        if (mount(OVERLAY_SOURCE, where, "overlay", ms_flags_of(p.attrs), options) < 0)
                return negative_errno();
        return 0;
}
