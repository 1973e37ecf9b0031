/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Mount namespaces that did not get the last swap (namespaces.c has the design). */

/* What a namespace shows at one hierarchy, compared with the host. */
typedef enum NamespaceView {
        NAMESPACE_VIEW_ABSENT,             /* no such directory there */
        NAMESPACE_VIEW_CURRENT,            /* the host's current tree (or, where the host has no
                                            * extensions there, its base): up to date */
        NAMESPACE_VIEW_OLDER_OVER_CURRENT, /* an older tree of sysextd, the current one right beneath */
        NAMESPACE_VIEW_OLDER,              /* an older tree of sysextd, nothing current beneath */
        NAMESPACE_VIEW_BASE,               /* the host's base while the host has extensions merged */
        NAMESPACE_VIEW_OWN,                /* something else: its own OS, a foreign mount */
        _NAMESPACE_VIEW_MAX,
} NamespaceView;

const char *namespace_view_to_string(NamespaceView v);
/* In words, for the text status: "older tree, current beneath", "older tree", "base", ... */
const char *namespace_view_describe(NamespaceView v);
/* Whether a namespace showing this at a hierarchy missed the last swap there. */
bool namespace_view_stale(NamespaceView v);

/* What classifying one hierarchy takes: pure data. */
typedef struct NamespaceLook {
        bool exists;             /* the directory resolves there */
        unsigned long top_magic; /* statfs f_type of what shows there */
        dev_t dev;               /* st_dev, st_ino of the directory that shows */
        ino_t ino;
        bool top_is_root;        /* it is the root of its mount */
        bool top_sysextd;        /* that mount's source (mountinfo) is "sysextd" */
        dev_t beneath_dev;       /* the mount right beneath it (its parent), 0: none known */
        bool beneath_sysextd;    /* that one is an overlay from "sysextd" */
        dev_t current_dev;       /* the host's current tree there; 0: no extensions there */
        bool base_known;         /* the host's base directory of the hierarchy */
        dev_t base_dev;
        ino_t base_ino;
} NamespaceLook;

/* The classification of one hierarchy: pure. */
NamespaceView namespace_classify(const NamespaceLook *l);

/* One hierarchy, as the host sees it. */
typedef struct NamespaceHierarchy {
        const char *name; /* "usr": below a namespace's own root */
        const char *path; /* "/R/usr": below a root that is the host's */
        dev_t current_dev;
        bool base_known;
        dev_t base_dev;
        ino_t base_ino;
} NamespaceHierarchy;

#define NAMESPACE_HIERARCHIES_MAX 16

/* One hierarchy of one namespace, looked at from outside, through /proc/PID/root. */
typedef struct NamespaceTop {
        NamespaceView view;
        dev_t dev;          /* of what shows there */
        uint64_t unique_id; /* its mount's ids (for a view of an older tree) */
        uint64_t mount_id;
} NamespaceTop;

typedef struct StaleNamespace {
        uint64_t ns;          /* the inode of its mount namespace */
        pid_t pid;            /* its first process in /proc */
        unsigned n_processes;
        char *unit;           /* NULL: none */
        char *machine;        /* systemd-machined's name from the cgroup; NULL: none */
        bool own_root;        /* its root is not the host's: the hierarchies below its root */
        bool followed;        /* set by the caller */
        size_t n;
        NamespaceTop tops[NAMESPACE_HIERARCHIES_MAX];
} StaleNamespace;

typedef struct StaleNamespaceList {
        StaleNamespace *namespaces;
        size_t n;
} StaleNamespaceList;

void stale_namespace_done(StaleNamespace *s);
void stale_namespace_list_done(StaleNamespaceList *l);

/* Looks at every hierarchy of the namespace of process pid (no unit, no count). */
int namespace_look(pid_t pid, const NamespaceHierarchy *h, size_t n, StaleNamespace *ret);

/* Every mount namespace on the machine but ours, once, by its first process, that shows an
 * older tree of sysextd or the base at some hierarchy while the host shows another tree.
 * Namespaces that are up to date or show only their own OS are left out. */
int namespaces_scan(const NamespaceHierarchy *h, size_t n, StaleNamespaceList *ret);

/* The path of hierarchy h as the namespace's processes see it (allocated, absolute). */
char *namespace_hierarchy_path(const StaleNamespace *s, const NamespaceHierarchy *h);
