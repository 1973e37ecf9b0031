/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>

#include "engine.h"

/* What 'list' and 'status' print, as text tables or as JSON. The same JSON is built from the
 * engine's results in-process and from the daemon's replies. */
json_object *output_list_json(const ImageList *l);
/* The followed namespaces, for status (in process, or from the daemon's ListFollowed reply). */
json_object *output_followers_json(const FollowerList *l);
/* The "delayed" object of a status document: the delayed transition's generation, since and
 * deadline (text and µs), and the mount namespaces on its old and on its new trees. */
json_object *output_delayed_json(const EngineStatus *s);
json_object *output_status_json(const EngineStatus *s);
/* Adds the history of a journal to a status document o: "pins", "confirm" (a generation waiting
 * for confirmation), "last_rollback", "generations". */
void output_history_json(const Journal *j, json_object *o);
/* Marks each image of a list document whose name is pinned ("pinned": true/false). */
void output_list_pins(json_object *list, const PinList *pins);
/* status --namespaces: the mount namespaces that did not get the last swap (namespaces.h);
 * names: the hierarchies, in the order of each namespace's tops. */
json_object *output_namespaces_json(const StaleNamespaceList *l, char *const *names);

typedef enum OutputFormat {
        OUTPUT_TEXT,        /* tables */
        OUTPUT_JSON,        /* --json: sysextd's documents, pretty-printed */
        OUTPUT_JSON_PRETTY, /* --json=pretty: systemd-sysext's form, indented */
        OUTPUT_JSON_SHORT,  /* --json=short: systemd-sysext's form, one line */
        _OUTPUT_FORMAT_MAX,
} OutputFormat;

typedef struct OutputOptions {
        OutputFormat format;
        bool legend; /* table headers (off with --no-legend) */
} OutputOptions;

/* Prints a list or status document (from output_*_json()) in the chosen format.  systemd's
 * form is its array of {name, type, path, time} and {hierarchy, extensions, since}, with
 * sysextd's fields (class, status, ...) added to each object. */
void output_list(json_object *list, const OutputOptions *o);
void output_status(json_object *status, const OutputOptions *o);
/* status --namespaces: one line per namespace, one per hierarchy it shows (text), or the array
 * (JSON). */
void output_namespaces(json_object *namespaces, const OutputOptions *o);
