/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <errno.h>
#include <stdbool.h>

#include "dlopen-systemd.h"
#include "image.h"
#include "unit-files.h"

/* Images that ship units: what the service manager is asked to do after a transition that
 * changed the merged trees of the running system (not with --root=, not with --no-reload).
 *
 *   EXTENSION_RELOAD_MANAGER=1        a daemon-reload (org.freedesktop.systemd1.Manager.Reload),
 *                                     synchronous (bounded by a timeout)
 *   EXTENSION_RESTART_UNITS=          after it, a RestartUnit() job of each unit
 *   EXTENSION_RELOAD_OR_RESTART_UNITS= the same with ReloadOrRestartUnit(); a unit in both
 *                                     lists is restarted
 * for the images the transition added, removed or changed (a refresh that leaves an image as
 * it was does not restart its units, unlike systemd-sysext, which restarts those of every
 * merged image).
 *
 * Only the image's own units: an image may name a unit only if it ships a unit file for it
 * or a drop-in (NAME.d/ with a *.conf file) in its own tree, for an instance also the
 * template's (foo@bar.service: foo@.service, foo@.service.d/), looked up in the image's
 * layer when it is probed:
 *   sysext   usr/lib/systemd/system/, usr/local/lib/systemd/system/
 *   confext  etc/systemd/system/
 * A unit file counts only as a regular file (a symlink, an alias or a mask, is not the
 * image's own unit).  Targets, mounts, automounts, swaps, slices, scopes and devices are never
 * restarted by an image, shipped or not.  Every name refused is a warning naming the image
 * and the reason.  Listing a unit the image ships implies the reload.
 *
 * A unit whose file an image shipped and that is gone after the transition (the image was
 * removed, or its new version no longer ships it, and no image that stays ships it) is
 * stopped; a drop-in that is gone restarts the unit it applied to.
 *
 * A unit an image enables and ships: a symbolic link T.wants/U or T.requires/U in those
 * directories (Image.wanted_units; not T.upholds/U, which systemd enforces by itself once
 * reloaded), U a unit file of the image's own, of a type it may restart.  With
 * EXTENSION_RELOAD_MANAGER=1 only, for an image added or in a new version (a link its previous
 * version had, to a unit it shipped, does not count again): after the reload, U is started
 * (StartUnit()) if T is being started: ActiveState "activating", or a start or restart job
 * queued for it.  That is the boot-time merge: the start job of multi-user.target and its
 * Wants= were computed before the image was merged, and a reload adds no job.  When T is
 * active (or inactive, nothing starting it) nothing happens and nothing is said: enabling is
 * not starting, as with systemd-sysext.  A unit also listed for a restart is restarted.
 *
 * Jobs are enqueued (mode "replace") and never waited for: a transition does not depend on
 * how long a unit takes.  A failure is a warning: the trees are in place by then. */

typedef enum UnitJobKind {
        UNIT_JOB_STOP,
        UNIT_JOB_RESTART,
        UNIT_JOB_RELOAD_OR_RESTART,
        UNIT_JOB_START, /* only while a unit it is enabled for is being started (wanted_by) */
        _UNIT_JOB_KIND_MAX,
        _UNIT_JOB_KIND_INVALID = -EINVAL,
} UnitJobKind;

/* "stop", "restart", "reload-or-restart", "start" */
const char *unit_job_kind_to_string(UnitJobKind k);
int unit_job_kind_from_string(const char *s);
/* "StopUnit", "RestartUnit", "ReloadOrRestartUnit", "StartUnit" */
const char *unit_job_kind_method(UnitJobKind k);

typedef struct UnitAction {
        char *unit;
        UnitJobKind kind;  /* once queued: what was queued (a restart of a unit gone: a stop) */
        char *image;       /* the image that asked (or whose unit went), for messages */
        char **wanted_by;  /* a start: the units it is enabled for (T of T.wants/U); started only
                            * if one of them is being started when the manager has reloaded */
        char *job;         /* once queued: the job's object path */
        char *error;       /* could not be queued: why */
} UnitAction;

typedef struct UnitActions {
        bool reload;
        UnitAction *actions; /* stops first, then restarts, then reloads-or-restarts, then starts */
        size_t n;
        char **warnings; /* refused names, for the log */
} UnitActions;

void unit_actions_done(UnitActions *a);

/* Pure: from the compatible images merged before and after a transition, of the classes in
 * the mask (those the transition covered; images of the other classes stay as they were):
 * the stops, restarts and reloads-or-restarts, and the starts that are candidates (each with
 * the units it is enabled for; whether one of them is being started is asked by
 * unit_actions_run()). */
int unit_actions_plan(const ImageList *before, const ImageList *after, unsigned classes, UnitActions *ret);

/* The service manager: as root its private socket /run/systemd/private (there before the
 * system bus, at boot), else or when that fails the system bus ($DBUS_SYSTEM_BUS_ADDRESS,
 * when set, is used as it is: tests run a bus of their own). */
int unit_manager_connect(sd_bus **ret);

/* Logs the warnings, reloads the service manager, then queues the jobs without waiting for
 * them ("Queued restart of foo.service."), each action's job or error filled in; a start only
 * when a unit it is enabled for is being started, asked of the manager then (GetUnit(), the
 * unit's ActiveState and Job, the job's JobType): otherwise neither job nor error is filled in,
 * and nothing is logged.  Returns < 0 when the manager could not be reached or reloaded
 * (logged; no job queued), 1 when it ran, 0 when there was nothing to do. */
int unit_actions_run(UnitActions *a);

/* Queues one job; "Unit not found" for a restart or reload-or-restart becomes a stop (its unit
 * file went; never for a start).
 * *ret_job: the job's object path; on failure *ret_error: why, for people.  Logs nothing. */
int unit_job_enqueue(sd_bus *bus, const UnitAction *a, char **ret_job, UnitJobKind *ret_kind, char **ret_error);
