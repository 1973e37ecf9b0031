/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>

#include "manager.h"

/* Layers watched while merged (layer-watch.c, sysextd(8) WATCHED LAYERS): the daemon watches the
 * files and loop devices of the live layers and reports each one that changed under the live
 * tree (status, ImageChanged, the log); with OnImageChange=refresh it refreshes by itself. */

/* Opens the uevent socket and builds the watch set from the journal; what changed while no
 * daemon watched is found now (and refreshed once with OnImageChange=refresh). */
int layer_watch_start(Manager *m);
/* After a transition or commit: the watch set from the journal again. */
void layer_watch_rebuild(Manager *m, EngineStatus *status);
void layer_watch_done(Manager *m);
/* With OnImageChange=refresh and live layers to watch, the daemon does not exit when idle. */
bool layer_watch_keeps_alive(Manager *m);
