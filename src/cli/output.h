/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>

#include "engine.h"

/* What 'list' and 'status' print, as text tables or as JSON. The same JSON is built from the
 * engine's results in-process and from the daemon's replies. */
json_object *output_list_json(const ImageList *l);
json_object *output_status_json(const EngineStatus *s);
void output_list_text(json_object *list);
void output_status_text(json_object *status);
void output_json(json_object *o);
