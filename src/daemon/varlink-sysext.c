/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * io.systemd.sysext and io.systemd.SysUpdate.Notify (varlink-sysext.h): the interface
 * descriptions, a call's parameters to an engine request, a result to a reply.  Pure.
 */
#include <errno.h>
#include <string.h>

#include "bus-api.h"
#include "image-class.h"
#include "json-util.h"
#include "util.h"
#include "varlink-message.h"
#include "varlink-sysext.h"

/* As systemd's src/shared/varlink-io.systemd.sysext.c describes it (systemd 258 and later add
 * alwaysRefresh and allowInteractiveAuthentication). */
const char sysext_varlink_description[] =
        "interface io.systemd.sysext\n"
        "\n"
        "type ImageClass (sysext, confext)\n"
        "\n"
        "type ImageType (directory, subvolume, raw, block)\n"
        "\n"
        "method Merge(\n"
        "  class: ?ImageClass,\n"
        "  force: ?bool,\n"
        "  noReload: ?bool,\n"
        "  noexec: ?bool,\n"
        "  allowInteractiveAuthentication: ?bool\n"
        ") -> ()\n"
        "\n"
        "method Unmerge(\n"
        "  class: ?ImageClass,\n"
        "  noReload: ?bool,\n"
        "  allowInteractiveAuthentication: ?bool\n"
        ") -> ()\n"
        "\n"
        "method Refresh(\n"
        "  class: ?ImageClass,\n"
        "  force: ?bool,\n"
        "  noReload: ?bool,\n"
        "  noexec: ?bool,\n"
        "  alwaysRefresh: ?bool,\n"
        "  allowInteractiveAuthentication: ?bool\n"
        ") -> ()\n"
        "\n"
        "method List(\n"
        "  class: ?ImageClass\n"
        ") -> (\n"
        "  Class: ImageClass,\n"
        "  Type: ImageType,\n"
        "  Name: string,\n"
        "  Path: ?string,\n"
        "  ReadOnly: bool,\n"
        "  CreationTimestamp: ?int,\n"
        "  ModificationTimestamp: ?int,\n"
        "  Usage: ?int,\n"
        "  UsageExclusive: ?int,\n"
        "  Limit: ?int,\n"
        "  LimitExclusive: ?int\n"
        ")\n"
        "\n"
        "error NoImagesFound ()\n"
        "\n"
        "error AlreadyMerged (hierarchy: string)\n";

const char sysupdate_notify_description[] =
        "interface io.systemd.SysUpdate.Notify\n"
        "\n"
        "method OnCompletedUpdate(\n"
        "  component: ?string,\n"
        "  version: ?string,\n"
        "  resources: ?[]object\n"
        ") -> ()\n";

/* sysextd's own interface (varlink-sysext.h): what `sysextd merge` and its siblings call.  The
 * three transitions take the same parameters and answer the same. */
#define MANAGER_TRANSITION                                                                  \
        "(\n"                                                                               \
        "  root: string,\n"                                                                 \
        "  classes: ?[]ImageClass,\n"                                                       \
        "  force: ?bool,\n"                                                                 \
        "  alwaysRefresh: ?bool,\n"                                                         \
        "  strict: ?bool,\n"                                                                \
        "  noReload: ?bool,\n"                                                              \
        "  noexec: ?bool,\n"                                                                \
        "  allowInteractiveAuthentication: ?bool\n"                                         \
        ") -> (generation: int, changed: bool, messages: []Message)\n"

const char sysextd_varlink_description[] =
        "interface org.sysextd1.Manager\n"
        "\n"
        "type ImageClass (sysext, confext)\n"
        "\n"
        "type Message (level: int, text: string)\n"
        "\n"
        "method Merge" MANAGER_TRANSITION
        "\n"
        "method Refresh" MANAGER_TRANSITION
        "\n"
        "method Unmerge" MANAGER_TRANSITION
        "\n"
        "error Failed (name: string, message: string)\n";

const char *const sysextd_varlink_methods[] = {
        SYSEXTD_VARLINK_INTERFACE ".Merge", SYSEXTD_VARLINK_INTERFACE ".Refresh", SYSEXTD_VARLINK_INTERFACE ".Unmerge", NULL,
};

const char *const sysext_varlink_methods[] = {
        SYSEXT_VARLINK_INTERFACE ".Merge", SYSEXT_VARLINK_INTERFACE ".Unmerge", SYSEXT_VARLINK_INTERFACE ".Refresh",
        SYSEXT_VARLINK_INTERFACE ".List", NULL,
};

const char *const sysupdate_notify_methods[] = {
        SYSUPDATE_NOTIFY_INTERFACE ".OnCompletedUpdate", NULL,
};

typedef enum Param {
        P_CLASS = 1u << 0,
        P_FORCE = 1u << 1,
        P_NO_RELOAD = 1u << 2,
        P_NOEXEC = 1u << 3,
        P_ALWAYS_REFRESH = 1u << 4,
        P_INTERACTIVE = 1u << 5,
        P_ROOT = 1u << 6,
        P_CLASSES = 1u << 7,
        P_STRICT = 1u << 8,
} Param;

#define P_MANAGER (P_ROOT | P_CLASSES | P_FORCE | P_ALWAYS_REFRESH | P_STRICT | P_NO_RELOAD | P_NOEXEC | P_INTERACTIVE)

static const struct {
        const char *name;
        SysextMethod method;
        unsigned params;
} methods[] = {
        { SYSEXT_VARLINK_INTERFACE ".Merge", SYSEXT_METHOD_MERGE, P_CLASS | P_FORCE | P_NO_RELOAD | P_NOEXEC | P_INTERACTIVE },
        { SYSEXT_VARLINK_INTERFACE ".Unmerge", SYSEXT_METHOD_UNMERGE, P_CLASS | P_NO_RELOAD | P_INTERACTIVE },
        { SYSEXT_VARLINK_INTERFACE ".Refresh", SYSEXT_METHOD_REFRESH,
          P_CLASS | P_FORCE | P_NO_RELOAD | P_NOEXEC | P_ALWAYS_REFRESH | P_INTERACTIVE },
        { SYSEXT_VARLINK_INTERFACE ".List", SYSEXT_METHOD_LIST, P_CLASS },
        { SYSUPDATE_NOTIFY_INTERFACE ".OnCompletedUpdate", SYSEXT_METHOD_COMPLETED_UPDATE, 0 },
        { SYSEXTD_VARLINK_INTERFACE ".Merge", SYSEXT_METHOD_MANAGER_MERGE, P_MANAGER },
        { SYSEXTD_VARLINK_INTERFACE ".Refresh", SYSEXT_METHOD_MANAGER_REFRESH, P_MANAGER },
        { SYSEXTD_VARLINK_INTERFACE ".Unmerge", SYSEXT_METHOD_MANAGER_UNMERGE, P_MANAGER },
};

static const struct {
        const char *name;
        Param param;
} params[] = {
        { "class", P_CLASS },
        { "force", P_FORCE },
        { "noReload", P_NO_RELOAD },
        { "noexec", P_NOEXEC },
        { "alwaysRefresh", P_ALWAYS_REFRESH },
        { "allowInteractiveAuthentication", P_INTERACTIVE },
        { "root", P_ROOT },
        { "classes", P_CLASSES },
        { "strict", P_STRICT },
};

/* classes: an array of distinct class names, at least one. */
static int parse_classes(json_object *v, unsigned *ret) {
        unsigned classes = 0;
        size_t n;

        if (!json_object_is_type(v, json_type_array) || (n = json_object_array_length(v)) == 0)
                return -EINVAL;
        for (size_t i = 0; i < n; i++) {
                json_object *e = json_object_array_get_idx(v, i);
                int k = json_object_is_type(e, json_type_string) ? image_class_from_string(json_object_get_string(e)) : -1;

                if (k < 0 || (classes & (1u << k)))
                        return -EINVAL;
                classes |= 1u << k;
        }
        *ret = classes;
        return 0;
}

/* OnCompletedUpdate: what systemd-sysupdate passes is checked for its type only, and unused. */
static int parse_completed_update(json_object *parameters, const char **ret_parameter) {
        json_object_object_foreach(parameters, key, v) {
                bool ok;

                if (STR_IN_SET(key, "component", "version"))
                        ok = json_object_is_type(v, json_type_null) || json_object_is_type(v, json_type_string);
                else if (streq(key, "resources"))
                        ok = json_object_is_type(v, json_type_null) || json_object_is_type(v, json_type_array);
                else
                        ok = true;
                if (!ok) {
                        *ret_parameter = key;
                        return -EINVAL;
                }
        }
        return 0;
}

/* org.sysextd1.Manager's transitions: the D-Bus methods' defaults (the daemon's configuration
 * for every class the call does not name), root required. */
static int parse_manager_call(SysextCall *c, json_object *parameters, SysextCall *ret, const char **ret_parameter) {
        c->manager = true;
        c->verb = c->method == SYSEXT_METHOD_MANAGER_MERGE     ? ENGINE_MERGE
                  : c->method == SYSEXT_METHOD_MANAGER_UNMERGE ? ENGINE_UNMERGE
                                                               : ENGINE_REFRESH;
        json_object_object_foreach(parameters, key, v) {
                Param p = 0;
                bool *target = NULL;

                for (size_t k = 0; k < ELEMENTSOF(params); k++)
                        if (streq(key, params[k].name))
                                p = params[k].param;
                if (!(p & P_MANAGER)) {
                        *ret_parameter = key;
                        return -EINVAL;
                }
                if (p != P_ROOT && json_object_is_type(v, json_type_null))
                        continue;
                switch (p) {
                case P_ROOT:
                        if (!json_object_is_type(v, json_type_string) || json_object_get_string(v)[0] != '/') {
                                *ret_parameter = key;
                                return -EINVAL;
                        }
                        c->root = json_object_get_string(v);
                        continue;
                case P_CLASSES:
                        if (parse_classes(v, &c->options.classes) < 0) {
                                *ret_parameter = key;
                                return -EINVAL;
                        }
                        continue;
                case P_FORCE:
                        target = &c->options.force;
                        break;
                case P_ALWAYS_REFRESH:
                        target = &c->options.always_refresh;
                        break;
                case P_STRICT:
                        target = &c->options.strict;
                        break;
                case P_NO_RELOAD:
                        target = &c->options.no_reload;
                        break;
                case P_INTERACTIVE:
                        target = &c->interactive;
                        break;
                default: /* P_NOEXEC: a tristate */
                        break;
                }
                if (!json_object_is_type(v, json_type_boolean)) {
                        *ret_parameter = key;
                        return -EINVAL;
                }
                if (target)
                        *target = json_object_get_boolean(v);
                else
                        c->options.noexec = json_object_get_boolean(v);
        }
        if (!c->root) {
                *ret_parameter = "root";
                return -EINVAL;
        }
        *ret = *c;
        return 0;
}

int sysext_call_parse(const char *method, json_object *parameters, unsigned flags, SysextCall *ret,
                      const char **ret_parameter) {
        SysextCall c = { .options = ENGINE_OPTIONS_INIT };
        unsigned allowed = 0;
        size_t i;

        *ret_parameter = NULL;
        for (i = 0; i < ELEMENTSOF(methods); i++)
                if (method && streq(method, methods[i].name))
                        break;
        if (i >= ELEMENTSOF(methods))
                return -EOPNOTSUPP;
        c.method = methods[i].method;
        allowed = methods[i].params;
        if (!parameters || !json_object_is_type(parameters, json_type_object)) {
                *ret_parameter = "parameters";
                return -EINVAL;
        }

        switch (c.method) {
        case SYSEXT_METHOD_MERGE:
                c.verb = ENGINE_MERGE;
                break;
        case SYSEXT_METHOD_UNMERGE:
                c.verb = ENGINE_UNMERGE;
                break;
        case SYSEXT_METHOD_MANAGER_MERGE:
        case SYSEXT_METHOD_MANAGER_REFRESH:
        case SYSEXT_METHOD_MANAGER_UNMERGE:
                return parse_manager_call(&c, parameters, ret, ret_parameter);
        case SYSEXT_METHOD_LIST:
                if (!(flags & VARLINK_CALL_MORE))
                        return -EPROTO;
                c.verb = ENGINE_REFRESH; /* unused */
                break;
        case SYSEXT_METHOD_COMPLETED_UPDATE: {
                int r = parse_completed_update(parameters, ret_parameter);
                if (r < 0)
                        return r;
                /* Both classes, as systemd-sysext answers it. */
                c.verb = ENGINE_REFRESH;
                c.options.classes = 0;
                *ret = c;
                return 0;
        }
        default:
                c.verb = ENGINE_REFRESH;
        }

        /* As systemd-sysext: without a class, system extensions. */
        c.options.classes = 1u << IMAGE_CLASS_SYSEXT;
        json_object_object_foreach(parameters, key, v) {
                Param p = 0;

                for (size_t k = 0; k < ELEMENTSOF(params); k++)
                        if (streq(key, params[k].name))
                                p = params[k].param;
                if (!(p & allowed)) {
                        *ret_parameter = key;
                        return -EINVAL;
                }
                if (json_object_is_type(v, json_type_null))
                        continue;
                if (p == P_CLASS) {
                        int k = json_object_is_type(v, json_type_string) ? image_class_from_string(json_object_get_string(v)) : -1;
                        if (k < 0) {
                                *ret_parameter = key;
                                return -EINVAL;
                        }
                        c.options.classes = 1u << k;
                        continue;
                }
                if (!json_object_is_type(v, json_type_boolean)) {
                        *ret_parameter = key;
                        return -EINVAL;
                }
                switch (p) {
                case P_FORCE:
                        c.options.force = json_object_get_boolean(v);
                        break;
                case P_NO_RELOAD:
                        c.options.no_reload = json_object_get_boolean(v);
                        break;
                case P_NOEXEC:
                        c.options.noexec = json_object_get_boolean(v);
                        break;
                case P_ALWAYS_REFRESH:
                        c.options.always_refresh = json_object_get_boolean(v);
                        break;
                case P_INTERACTIVE:
                        c.interactive = json_object_get_boolean(v);
                        break;
                default:
                        break;
                }
        }
        *ret = c;
        return 0;
}

/* A worker's result: its return value (-EIO when there is none: the worker died) and the kind
 * of failure (ENGINE_ERROR_FAILED when there is none or it is out of range). */
static void doc_outcome(json_object *doc, int *ret_r, int *ret_kind) {
        json_object *v;

        *ret_r = -EIO;
        *ret_kind = ENGINE_ERROR_FAILED;
        if (doc && json_object_object_get_ex(doc, "r", &v) && json_object_is_type(v, json_type_int))
                *ret_r = json_object_get_int(v);
        if (doc && json_object_object_get_ex(doc, "kind", &v) && json_object_is_type(v, json_type_int))
                *ret_kind = json_object_get_int(v);
        if (*ret_kind < 0 || *ret_kind >= _ENGINE_ERROR_MAX)
                *ret_kind = ENGINE_ERROR_FAILED;
}

int sysext_transition_reply(json_object *doc, const char *merged_hierarchy, const char **ret_error,
                            json_object **ret_parameters) {
        json_object *p;
        int r, kind;

        doc_outcome(doc, &r, &kind);

        if (r >= 0) {
                p = json_object_new_object();
                *ret_error = NULL;
        } else if (kind == ENGINE_ERROR_ALREADY_MERGED) {
                _cleanup_free_ char *buf = NULL;

                p = json_object_new_object();
                if (p)
                        json_object_object_add(p, "hierarchy",
                                               json_object_new_string(string_safe(merged_hierarchy ?: "/usr", &buf)));
                *ret_error = SYSEXT_ERROR_ALREADY_MERGED;
        } else {
                /* Only errnos a person can look up: anything else was an I/O error to us. */
                if (r < -4095)
                        r = -EIO;
                p = varlink_errno_parameters(r);
                *ret_error = VARLINK_ERROR_SYSTEM;
        }
        if (!p)
                return -ENOMEM;
        *ret_parameters = p;
        return 0;
}

int sysextd_transition_reply(json_object *doc, const char **ret_error, json_object **ret_parameters) {
        _cleanup_json_ json_object *p = NULL;
        _cleanup_free_ char *buf = NULL;
        json_object *v, *msgs, *a;
        uint64_t generation = 0;
        int r, kind;

        doc_outcome(doc, &r, &kind);
        p = json_object_new_object();
        if (!p)
                return -ENOMEM;

        /* As the D-Bus methods: nothing (suitable) to merge is an error the client reports as
         * no failure. */
        if (r < 0 || IN_SET(kind, ENGINE_ERROR_NO_IMAGES, ENGINE_ERROR_NO_SUITABLE_IMAGES)) {
                const char *text = json_peek_string(doc, "error");

                if (json_object_object_add(p, "name", json_object_new_string(sysextd_error_name(kind))) < 0 ||
                    json_object_object_add(p, "message",
                                           json_object_new_string(string_safe(isempty(text) ? "The transition failed." : text, &buf))) < 0)
                        return -ENOMEM;
                *ret_error = SYSEXTD_VARLINK_ERROR_FAILED;
                *ret_parameters = TAKE_PTR(p);
                return 0;
        }

        (void) json_get_u64(doc, "generation", &generation);
        a = json_object_new_array();
        if (!a || json_object_object_add(p, "generation", json_object_new_int64((int64_t) generation)) < 0 ||
            json_object_object_add(p, "changed",
                                   json_object_new_boolean(json_object_object_get_ex(doc, "changed", &v) &&
                                                           json_object_is_type(v, json_type_boolean) &&
                                                           json_object_get_boolean(v))) < 0 ||
            json_object_object_add(p, "messages", a) < 0) {
                json_object_put(a);
                return -ENOMEM;
        }
        msgs = json_get_array(doc, "messages");
        for (size_t i = 0; msgs && i < json_object_array_length(msgs); i++) {
                json_object *e = json_object_array_get_idx(msgs, i), *m;
                _cleanup_free_ char *b = NULL;

                if (!json_object_is_type(e, json_type_array) || json_object_array_length(e) != 2)
                        continue;
                v = json_object_array_get_idx(e, 1);
                m = json_object_new_object();
                if (!m || json_object_array_add(a, m) < 0) {
                        json_object_put(m);
                        return -ENOMEM;
                }
                if (json_object_object_add(m, "level", json_object_new_int(json_object_get_int(json_object_array_get_idx(e, 0)))) < 0 ||
                    json_object_object_add(m, "text", json_object_new_string(string_safe(
                                                                 json_object_is_type(v, json_type_string) ? json_object_get_string(v) : "", &b))) < 0)
                        return -ENOMEM;
        }
        *ret_error = NULL;
        *ret_parameters = TAKE_PTR(p);
        return 0;
}

const char *sysext_image_type(const char *kind) {
        if (kind && streq(kind, "directory"))
                return "directory";
        if (kind && streq(kind, "btrfs-subvolume"))
                return "subvolume";
        return "raw";
}

json_object *sysext_list_items(json_object *doc, unsigned classes, int *ret_errno) {
        _cleanup_json_ json_object *a = NULL;
        json_object *images, *v;
        int r = -EIO;

        if (doc && json_object_object_get_ex(doc, "r", &v) && json_object_is_type(v, json_type_int))
                r = json_object_get_int(v);
        if (r < 0) {
                *ret_errno = r < -4095 ? -EIO : r;
                return NULL;
        }
        a = json_object_new_array();
        if (!a) {
                *ret_errno = -ENOMEM;
                return NULL;
        }
        images = json_get_array(doc, "images");
        for (size_t i = 0; images && i < json_object_array_length(images); i++) {
                _cleanup_free_ char *b1 = NULL, *b2 = NULL;
                json_object *img = json_object_array_get_idx(images, i), *o;
                const char *name = NULL, *path = NULL, *kind = NULL, *klass = NULL;
                int k;

                if (!json_object_is_type(img, json_type_object))
                        continue;
                if (json_object_object_get_ex(img, "name", &v) && json_object_is_type(v, json_type_string))
                        name = json_object_get_string(v);
                if (json_object_object_get_ex(img, "path", &v) && json_object_is_type(v, json_type_string))
                        path = json_object_get_string(v);
                if (json_object_object_get_ex(img, "kind", &v) && json_object_is_type(v, json_type_string))
                        kind = json_object_get_string(v);
                if (json_object_object_get_ex(img, "class", &v) && json_object_is_type(v, json_type_string))
                        klass = json_object_get_string(v);
                k = image_class_from_string(klass);
                if (!name || k < 0 || (classes && !(classes & (1u << k))))
                        continue;
                o = json_object_new_object();
                if (!o) {
                        *ret_errno = -ENOMEM;
                        return NULL;
                }
                json_object_object_add(o, "Class", json_object_new_string(image_class_to_string(k)));
                json_object_object_add(o, "Type", json_object_new_string(sysext_image_type(kind)));
                json_object_object_add(o, "Name", json_object_new_string(string_safe(name, &b1)));
                if (path)
                        json_object_object_add(o, "Path", json_object_new_string(string_safe(path, &b2)));
                /* sysextd merges every image read-only (a mutable mode adds a writable layer
                 * above them all). */
                json_object_object_add(o, "ReadOnly", json_object_new_boolean(true));
                json_object_array_add(a, o);
        }
        return TAKE_PTR(a);
}
