/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>

#include "image.h"

/* Images that ship units: what the service manager is asked to do after a transition that
 * changed the merged trees of the running system (not with --root=, not with --no-reload).
 *
 *   EXTENSION_RELOAD_MANAGER=1        a daemon-reload (org.freedesktop.systemd1.Manager.Reload)
 *   EXTENSION_RESTART_UNITS=          after it, RestartUnit() of each, one after the other,
 *                                     each job waited for (a unit that is gone, e.g. one the
 *                                     removed extension shipped, is stopped instead)
 *   EXTENSION_RELOAD_OR_RESTART_UNITS= the same with ReloadOrRestartUnit(); a unit in both
 *                                     lists is restarted
 * for the images the transition added, removed or changed (a refresh that leaves an image as
 * it was does not restart its units, unlike systemd-sysext, which restarts those of every
 * merged image); listing any unit implies the reload.  A failure is a warning: the trees are
 * in place by then. */

typedef struct UnitActions {
        bool reload;
        char **restart;
        char **reload_or_restart;
        char **warnings; /* invalid unit names, for the log */
} UnitActions;

void unit_actions_done(UnitActions *a);

/* Whether a unit name can be restarted: NAME.TYPE (service, socket, target, ...), an
 * instance allowed, not a template, no path, at most 255 bytes. */
bool unit_name_valid(const char *name);

/* Pure: from the compatible images merged before and after a transition, of the classes in
 * the mask (those the transition covered). */
int unit_actions_plan(const ImageList *before, const ImageList *after, unsigned classes, UnitActions *ret);

/* Asks the service manager on the system bus.  Logs what it does and what fails. */
void unit_actions_run(const UnitActions *a);
