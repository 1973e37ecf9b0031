/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A transition's vocabulary below the engine (transition.h): verb names, the result a failure
 * is kept in (and logged once), the check for a stop request.  Owns nothing beyond an
 * EngineResult's message; touches no mount and nothing below the root.
 */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "log.h"
#include "transition.h"

static const char *const verb_names[_ENGINE_VERB_MAX] = {
        [ENGINE_MERGE] = "merge",
        [ENGINE_REFRESH] = "refresh",
        [ENGINE_UNMERGE] = "unmerge",
        [ENGINE_ROLLBACK] = "rollback",
};

const char *engine_verb_to_string(EngineVerb v) {
        return v >= 0 && v < _ENGINE_VERB_MAX ? verb_names[v] : NULL;
}

void engine_result_done(EngineResult *r) {
        free(r->message);
        *r = (EngineResult) {};
}

int engine_result_failv(EngineResult *r, EngineError kind, int error, const char *fmt, va_list ap) {
        error = error ? -abs(error) : -EIO;
        errno = -error;
        free(r->message);
        if (vasprintf(&r->message, fmt, ap) < 0)
                r->message = NULL;
        r->error = kind;
        log_error("%s", r->message ?: "Out of memory.");
        return error;
}

int transition_fail(const TransitionContext *ctx, EngineError kind, int error, const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        error = engine_result_failv(ctx->result, kind, error, fmt, ap);
        va_end(ap);
        return error;
}

bool engine_stop_requested(void) {
        sigset_t s;

        if (sigpending(&s) < 0)
                return false;
        return sigismember(&s, SIGINT) > 0 || sigismember(&s, SIGTERM) > 0 || sigismember(&s, SIGHUP) > 0;
}
