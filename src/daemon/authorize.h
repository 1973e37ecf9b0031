/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "bus-api.h"
#include "engine.h"

/* What a caller of Merge, Refresh, Unmerge, Follow or Unfollow asks polkit for (org.sysextd1(5)),
 * decided from the options of the call and the daemon's configuration alone: pure functions, no
 * bus.
 *
 * An option that lets the call do what the configuration would not is "unsafe": the call is
 * then authorized with the action org.sysextd1.manage-unsafe instead of org.sysextd1.manage
 * (the policy file makes the first imply the second: whoever may weaken the policy may also
 * apply it).  The same
 * rules hold whatever the method, and only for the classes the call covers:
 *
 *   force=true            always (release files not matched against the host)
 *   image-policy=P        P allows an image that the configured ImagePolicy= refuses: the
 *                         policies are ordered open < verity < signed < deny, each allowing a
 *                         subset of what the one before allows, so P is unsafe when it comes
 *                         before the configured one; the same or a later one is safe
 *   noexec=false          when a covered class is configured noexec (confext by default)
 *   mutable=M, sysext-mutable=M, confext-mutable=M
 *                         M is not the covered class's configured mode and is not "no": every
 *                         such mode gives a writable tree (yes, auto, ephemeral,
 *                         ephemeral-import) or imports the unverified mutable directory as a
 *                         layer (import); "no" is always safe
 *
 * always-refresh, strict, no-reload, class and noexec=true never are. */

typedef enum AuthorizeUnsafe {
        AUTHORIZE_UNSAFE_FORCE = 1u << 0,
        AUTHORIZE_UNSAFE_IMAGE_POLICY = 1u << 1,
        AUTHORIZE_UNSAFE_NOEXEC = 1u << 2,
        AUTHORIZE_UNSAFE_MUTABLE = 1u << 3,
} AuthorizeUnsafe;

/* The AUTHORIZE_UNSAFE_* bits of o under c (0: only org.sysextd1.manage is needed). */
unsigned authorize_unsafe(const EngineConfig *c, const EngineOptions *o);

static inline const char *authorize_action(unsigned unsafe) {
        return unsafe ? SYSEXTD_POLKIT_ACTION_UNSAFE : SYSEXTD_POLKIT_ACTION;
}

/* The unsafe options of o as a person reads them: "force=true, image-policy=open".  NULL on
 * ENOMEM. */
char *authorize_unsafe_to_string(const EngineConfig *c, const EngineOptions *o);

/* The polkit details of a call (CheckAuthorization's a{ss}), as key, value, key, value, ...:
 *   verb            merge, refresh, unmerge or rollback
 *   generation      rollback only: the generation asked for ("0": the one before the live one)
 *   unpin           rollback only: "true" or "false"
 *   class           the classes the call covers, space-separated ("sysext confext")
 *   force, always-refresh, strict, no-reload     "true" or "false"
 *   image-policy    the policy in effect: the caller's, else the configured one
 *   noexec          "true" or "false" when the caller gave it, else "" (the configuration's)
 *   sysext-noexec, confext-noexec     "true" or "false", in effect (covered classes only)
 *   sysext-mutable, confext-mutable   the mutable mode in effect (covered classes only)
 *   unsafe          the unsafe options' names, space-separated ("" when none)
 * Returns 0 or -ENOMEM. */
int authorize_details(const EngineConfig *c, EngineVerb verb, const EngineOptions *o, char ***ret);

/* The polkit details of a Follow or Unfollow call (always org.sysextd1.manage, as Refresh
 * without options), as authorize_details() gives them:
 *   verb            follow or unfollow
 *   pid             the process whose mount namespace it is about, in the daemon's PID namespace
 *   unsafe          "" (no option of these calls weakens anything)
 * Returns 0 or -ENOMEM. */
int authorize_follow_details(bool follow, pid_t pid, char ***ret);

/* The polkit details of a Commit call that names namespaces (always org.sysextd1.manage; a
 * caller committing its own namespace is not asked about):
 *   verb            commit
 *   pid             the process whose namespace is committed, "" for every namespace or a unit
 *   unit            the unit whose namespaces are committed, ""
 *   unsafe          "" */
int authorize_commit_details(pid_t pid, const char *unit, char ***ret);

/* The polkit details of a Confirm call (always org.sysextd1.manage, as Refresh):
 *   verb            confirm
 *   unsafe          "" */
int authorize_confirm_details(char ***ret);
