/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* follow_decide() (follow.h): pure, every view, with and without a delayed transition. */
#include "follow.h"
#include "tests.h"

static FollowAction decide(FollowView v, bool host_tree, bool current, bool pending, bool waiting, bool waiting_current,
                           bool waiting_pending) {
        return follow_decide(&(FollowFacts) { .view = v, .host_tree = host_tree, .current = current, .pending = pending,
                                              .waiting = waiting, .waiting_current = waiting_current,
                                              .waiting_pending = waiting_pending });
}

int main(void) {
        /* Names. */
        CHECK_STREQ(follow_view_to_string(FOLLOW_VIEW_WAITING), "waiting");
        CHECK_STREQ(follow_action_to_string(FOLLOW_PROMOTE), "promote");
        CHECK(follow_action_to_string(_FOLLOW_ACTION_MAX) == NULL);

        /* Nothing delayed: the swap as on the host. */
        CHECK(decide(FOLLOW_VIEW_BASE, true, false, false, false, false, false) == FOLLOW_ATTACH);
        CHECK(decide(FOLLOW_VIEW_BASE, false, false, false, false, false, false) == FOLLOW_KEEP);
        CHECK(decide(FOLLOW_VIEW_OURS, true, true, false, false, false, false) == FOLLOW_KEEP);
        CHECK(decide(FOLLOW_VIEW_OURS, true, false, false, false, false, false) == FOLLOW_REPLACE);
        CHECK(decide(FOLLOW_VIEW_OURS, false, false, false, false, false, false) == FOLLOW_DETACH);
        CHECK(decide(FOLLOW_VIEW_OURS, false, true, false, false, false, false) == FOLLOW_DETACH);
        CHECK(decide(FOLLOW_VIEW_ABSENT, true, false, false, false, false, false) == FOLLOW_KEEP);
        /* Not ours, not the base: never touched, whatever else is true. */
        for (int b = 0; b < 64; b++) {
                CHECK(decide(FOLLOW_VIEW_OTHER, b & 1, b & 2, b & 4, b & 8, b & 16, b & 32) == FOLLOW_LEAVE);
                CHECK(decide(FOLLOW_VIEW_HOST_TREE, b & 1, b & 2, b & 4, b & 8, b & 16, b & 32) == FOLLOW_LEAVE);
        }

        /* The host's transition is delayed. */
        CHECK(decide(FOLLOW_VIEW_OURS, true, true, true, false, false, false) == FOLLOW_DELAY);
        CHECK(decide(FOLLOW_VIEW_OURS, true, true, true, true, false, true) == FOLLOW_KEEP); /* placed already */
        CHECK(decide(FOLLOW_VIEW_BASE, true, false, true, false, false, false) == FOLLOW_ATTACH); /* the live tree */
        CHECK(decide(FOLLOW_VIEW_OURS, true, false, true, false, false, false) == FOLLOW_REPLACE); /* behind: live tree */
        /* The namespace committed itself: the waiting tree shows. */
        CHECK(decide(FOLLOW_VIEW_WAITING, true, false, true, true, false, true) == FOLLOW_PROMOTE);
        /* The host committed. */
        CHECK(decide(FOLLOW_VIEW_OURS, true, false, false, true, true, false) == FOLLOW_COMMIT);
        CHECK(decide(FOLLOW_VIEW_WAITING, true, false, false, true, true, false) == FOLLOW_PROMOTE);
        /* A waiting tree that is neither the host's live nor its waiting one (superseded). */
        CHECK(decide(FOLLOW_VIEW_WAITING, true, false, false, true, false, false) == FOLLOW_REPLACE);
        CHECK(decide(FOLLOW_VIEW_OURS, true, false, false, true, false, false) == FOLLOW_REPLACE);
        /* Stopping: our tree with one waiting beneath stays (commit first); a waiting one that
         * shows goes. */
        CHECK(decide(FOLLOW_VIEW_OURS, false, false, false, true, false, false) == FOLLOW_LEAVE);
        CHECK(decide(FOLLOW_VIEW_WAITING, false, false, false, true, false, false) == FOLLOW_DETACH);
        return tap_finish();
}
