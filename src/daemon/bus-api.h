/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The D-Bus interface, org.sysextd1(5). Shared by the daemon and its client. */

#include "engine.h"

#define SYSEXTD_BUS_NAME "org.sysextd1"
#define SYSEXTD_BUS_PATH "/org/sysextd1"
#define SYSEXTD_BUS_INTERFACE "org.sysextd1.Manager"

#define SYSEXTD_ERROR_FAILED "org.sysextd1.Error.Failed"
#define SYSEXTD_ERROR_NO_IMAGES "org.sysextd1.Error.NoImages"
#define SYSEXTD_ERROR_NO_SUITABLE_IMAGES "org.sysextd1.Error.NoSuitableImages"
#define SYSEXTD_ERROR_ALREADY_MERGED "org.sysextd1.Error.AlreadyMerged"
#define SYSEXTD_ERROR_IMAGE_REFUSED "org.sysextd1.Error.ImageRefused"
#define SYSEXTD_ERROR_KERNEL_REFUSED "org.sysextd1.Error.KernelRefused"
#define SYSEXTD_ERROR_FOREIGN_MOUNT "org.sysextd1.Error.ForeignMount"
#define SYSEXTD_ERROR_BUSY "org.sysextd1.Error.Busy"
#define SYSEXTD_ERROR_ACCESS_DENIED "org.sysextd1.Error.AccessDenied"
#define SYSEXTD_ERROR_INVALID_OPTION "org.sysextd1.Error.InvalidOption"
#define SYSEXTD_ERROR_WRONG_ROOT "org.sysextd1.Error.WrongRoot"

/* The error a failure of the engine is answered with (engine.h's EngineError). */
static inline const char *sysextd_error_name(EngineError kind) {
        switch (kind) {
        case ENGINE_ERROR_NO_IMAGES:
                return SYSEXTD_ERROR_NO_IMAGES;
        case ENGINE_ERROR_NO_SUITABLE_IMAGES:
                return SYSEXTD_ERROR_NO_SUITABLE_IMAGES;
        case ENGINE_ERROR_ALREADY_MERGED:
                return SYSEXTD_ERROR_ALREADY_MERGED;
        case ENGINE_ERROR_IMAGE_REFUSED:
                return SYSEXTD_ERROR_IMAGE_REFUSED;
        case ENGINE_ERROR_KERNEL_REFUSED:
                return SYSEXTD_ERROR_KERNEL_REFUSED;
        case ENGINE_ERROR_FOREIGN_MOUNT:
                return SYSEXTD_ERROR_FOREIGN_MOUNT;
        case ENGINE_ERROR_BUSY:
                return SYSEXTD_ERROR_BUSY;
        default:
                return SYSEXTD_ERROR_FAILED;
        }
}

/* The polkit actions the mutating methods are authorized with (share/polkit-1/actions): the
 * second when an option weakens the configuration (authorize.h). */
#define SYSEXTD_POLKIT_ACTION "org.sysextd1.manage"
#define SYSEXTD_POLKIT_ACTION_UNSAFE "org.sysextd1.manage-unsafe"

/* Merge/Refresh/Unmerge(a{sv} options) -> (t generation, b changed, a(us) messages) */
#define SYSEXTD_TRANSITION_REPLY "tba(us)"
/* ListImages() -> a(ssssssb): name, kind, path, status, reason, verity, signed */
#define SYSEXTD_IMAGE_STRUCT "(ssssssb)"
/* ListImagesEx(a{sv} options: "class") -> a(ssssssbs): the same and the class */
#define SYSEXTD_IMAGE_EX_STRUCT "(ssssssbs)"
/* GetStatus() -> (s mode, t generation, a(sbastb) hierarchies, a(ssss) skipped, s policy,
 *                 a(sssb) images, a(ssb) classes)
 *   hierarchy: path, merged, extensions, since (usec, CLOCK_REALTIME), foreign mount on top
 *   skipped:   name, path, status, reason
 *   images:    name, path, verity ("none", "userspace", "dm"), signed — the merged ones */
#define SYSEXTD_HIERARCHY_STRUCT "(sbastb)"
#define SYSEXTD_SKIPPED_STRUCT "(ssss)"
#define SYSEXTD_MERGED_IMAGE_STRUCT "(sssb)"
/*   classes:   per hierarchy its path, class ("sysext", "confext"), writable (mutable modes) */
#define SYSEXTD_CLASS_STRUCT "(ssb)"

/* UnitJobs property, UnitJobsFinished(t generation, a(ssss) jobs) signal: the jobs the last
 * transition queued for images that ship units: unit, action ("restart", "reload-or-restart",
 * "stop", "start"), image, result ("" while it runs, then systemd's: "done", "failed", "canceled",
 * "timeout", "dependency", "skipped", ...; "not-queued" when the manager refused it) */
#define SYSEXTD_UNIT_JOB_STRUCT "(ssss)"

/* Follow(h pidfd), Unfollow(h pidfd) -> (): the mount namespace of the process of a pidfd
 * starts or stops following the host; queued with the transitions. */
/* ListFollowed() -> a(tisstasass), one per followed namespace: namespace (the inode of the mount
 * namespace: its identity), pid (the process last found in it), name (its unit, or its command
 * name), machine ("" when none), generation (the host's generation it shows), hierarchies
 * (where sysextd's tree is placed there: "usr", ...), problems (hierarchies left alone there and
 * why), error ("" when its last update did not fail, else why it did) */
#define SYSEXTD_FOLLOWER_STRUCT "(tisstasass)"
/* GetDelay(): a mount namespace of a delayed transition: its inode, first process, unit. */
#define SYSEXTD_DELAY_NS_STRUCT "(tis)"
/* ListNamespaces() -> a(tiussbba(ss)), one per mount namespace that did not get the last swap
 * (sysextd status --namespaces): namespace (the inode of the mount namespace), pid (its first
 * process in /proc), processes (how many it has), unit ("" when none), machine ("" when none),
 * followed, own_root (its root is not the host's: the hierarchies are below its own root),
 * hierarchies: per hierarchy its name ("usr") and what it shows there: "older-over-current",
 * "older", "base", "current", "own" or "absent" */
#define SYSEXTD_NAMESPACE_STRUCT "(tiussbba(ss))"
/* FollowFailed(t namespace, i pid, s message): after a transition, a followed namespace whose
 * update failed (it keeps what it showed) */

/* GetRollback() -> (tttt) confirm, (tttss) last_rollback, a(sssst) pins, a(ttba(ssss)) generations
 * (sysextd(8), ROLLBACK):
 *   confirm: the generation waiting for confirmation, since, deadline (CLOCK_REALTIME µs) and the
 *            generation the deadline rolls back to; all 0 when none waits
 *   last_rollback: when, from, to, reason ("command", "deadline"; "" when there was none), error
 *            ("" unless a deadline's rollback failed)
 *   pins: class, name, version ("": kept out), from_version ("": none), generation rolled back to
 *   generations: generation, when, forced, images (class, name, version or "", path) */
#define SYSEXTD_CONFIRM_STRUCT "(tttt)"
#define SYSEXTD_LAST_ROLLBACK_STRUCT "(tttss)"
#define SYSEXTD_PIN_STRUCT "(sssst)"
#define SYSEXTD_GENERATION_STRUCT "(ttba(ssss))"
/* ListChangedImages() -> a(sssstt), one per live layer that changed under the live tree since
 * it was merged (sysextd(8), WATCHED LAYERS): name, path, how ("media-changed", "modified",
 * "deleted", "replaced"), description (for people), generation (the one it changed under),
 * since (CLOCK_REALTIME µs when it was noticed).
 * ImageChanged(s name, s path, s how, s description, t generation): the same, when the daemon
 * notices it. */
#define SYSEXTD_CHANGED_IMAGE_STRUCT "(sssstt)"

/* How long a client waits for a transition. */
#define SYSEXTD_CALL_TIMEOUT_USEC (15ULL * 60ULL * 1000000ULL)
