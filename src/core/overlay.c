/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Overlay assembly.
 *
 * Steps: fsopen("overlay") -> fsconfig(source, lowerdir+ ..., redirect_dir, metacopy, ro)
 *        -> FSCONFIG_CMD_CREATE -> fsmount(RDONLY|NODEV[|NOEXEC]).
 * Before Linux 6.8 (no lowerdir+, kernel.h) all layers go into one "lowerdir" string.
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

static int plan_add(OverlayPlan *p, const char *key, const char *value) {
        OverlayParam *n = realloc(p->params, sizeof(OverlayParam) * (p->n + 1));

        if (!n)
                return -ENOMEM;
        p->params = n;
        n[p->n] = (OverlayParam) { .key = strdup(key), .value = value ? strdup(value) : NULL };
        if (!n[p->n].key || (value && !n[p->n].value)) {
                free(n[p->n].key);
                free(n[p->n].value);
                return -ENOMEM;
        }
        p->n++;
        return 0;
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

int overlay_plan_build(char *const *layers, bool lowerdir_plus, OverlayPlan *ret) {
        __attribute__((cleanup(overlay_plan_done))) OverlayPlan p = {};
        size_t n = strv_length(layers);
        int r;

        if (n < 2 || n > OVERLAY_LAYERS_MAX)
                return -EINVAL;

        r = plan_add(&p, "source", OVERLAY_SOURCE);
        if (r < 0)
                return r;

        if (lowerdir_plus) {
                STRV_FOREACH(l, layers) {
                        r = plan_add(&p, "lowerdir+", *l);
                        if (r < 0)
                                return r;
                }
        } else {
                _cleanup_strv_free_ char **escaped = NULL;
                _cleanup_free_ char *joined = NULL;

                STRV_FOREACH(l, layers) {
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

        /* Layers come from images we did not build: never follow redirects or metacopy
         * xattrs out of a layer. */
        r = plan_add(&p, "redirect_dir", "nofollow");
        if (r < 0)
                return r;
        r = plan_add(&p, "metacopy", "off");
        if (r < 0)
                return r;
        r = plan_add(&p, "ro", NULL);
        if (r < 0)
                return r;

        *ret = p;
        p = (OverlayPlan) {};
        return 0;
}

static int overlay_try(const OverlayPlan *p, bool noexec, int *ret_mount_fd, char **ret_message) {
        _cleanup_close_ int fs_fd = -EBADF, mnt_fd = -EBADF;
        int r;

        fs_fd = fsopen("overlay", FSOPEN_CLOEXEC);
        if (fs_fd < 0)
                return negative_errno();

        for (size_t i = 0; i < p->n; i++) {
                if (p->params[i].value)
                        r = fsconfig(fs_fd, FSCONFIG_SET_STRING, p->params[i].key, p->params[i].value, 0);
                else
                        r = fsconfig(fs_fd, FSCONFIG_SET_FLAG, p->params[i].key, NULL, 0);
                if (r < 0)
                        goto fail;
        }
        if (fsconfig(fs_fd, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
                goto fail;
        mnt_fd = fsmount(fs_fd, FSMOUNT_CLOEXEC,
                         MOUNT_ATTR_RDONLY | MOUNT_ATTR_NODEV | (noexec ? MOUNT_ATTR_NOEXEC : 0));
        if (mnt_fd < 0)
                goto fail;
        *ret_mount_fd = TAKE_FD(mnt_fd);
        return 0;
fail:
        r = negative_errno();
        *ret_message = fs_context_message(fs_fd);
        return r;
}

int overlay_mount(char *const *layers, bool noexec, int *ret_mount_fd, char **ret_message) {
        __attribute__((cleanup(overlay_plan_done))) OverlayPlan p = {};
        _cleanup_free_ char *msg = NULL;
        int r;

        r = overlay_plan_build(layers, kernel_has(KERNEL_LOWERDIR_PLUS), &p);
        if (r < 0)
                return r;
        r = overlay_try(&p, noexec, ret_mount_fd, &msg);
        if (r < 0)
                *ret_message = TAKE_PTR(msg);
        return r;
}

int overlay_mount_legacy(char *const *layers, bool noexec, const char *where, char **ret_message) {
        _cleanup_strv_free_ char **escaped = NULL;
        _cleanup_free_ char *joined = NULL, *options = NULL;
        size_t n = strv_length(layers);
        int r;

        if (n < 2 || n > OVERLAY_LAYERS_MAX)
                return -EINVAL;
        STRV_FOREACH(l, layers) {
                if (strchr(*l, ','))
                        return set_message(ret_message, EINVAL, "layer path %s contains a comma", *l);
                r = strv_push(&escaped, escape_layer(*l));
                if (r < 0)
                        return r;
        }
        joined = strv_join(escaped, ":");
        if (!joined)
                return -ENOMEM;
        if (asprintf(&options, "lowerdir=%s,redirect_dir=nofollow,metacopy=off", joined) < 0)
                return -ENOMEM;
        /* mount(2) takes one page of options. */
        if (strlen(options) >= 4096)
                return -E2BIG;
        if (mkdir(where, 0755) < 0 && errno != EEXIST)
                return negative_errno();
        if (mount(OVERLAY_SOURCE, where, "overlay", MS_RDONLY | MS_NODEV | (noexec ? MS_NOEXEC : 0), options) < 0)
                return negative_errno();
        return 0;
}
