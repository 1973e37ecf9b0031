/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Test-only hook points, compiled in with -Dtest-hooks=true and never in a production build.
 * When $SYSEXTD_TEST_HOOK names the point that is reached, the process either runs
 * $SYSEXTD_TEST_HOOK_EXEC (with $SYSEXTD_TEST_HOOK_ARG set to 'arg') and goes on, or, without
 * it, kills itself with SIGKILL: a crash at exactly that step. */
void testhook_point(const char *name, long arg);
