#!/bin/bash
# Through the daemon, finishing an interrupted transition is a commit (issue 10, section 5):
#  (a) a worker killed after the new trees went beneath their old tops: the caller is told
#      the worker died; the next call (a refresh with nothing left to do) finishes the
#      transition, the generation advances by one and TreeChanged is emitted with it;
#  (b) the daemon killed in the middle of a transition: the next instance finishes it at its
#      start, before it serves anyone, and emits TreeChanged;
#  (c) a transition interrupted between the hierarchies: the next instance records what is
#      live and completes the rest with a refresh of its own.
set -euo pipefail
# shellcheck source=test/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=test/bus/lib-bus.sh
. "$(dirname "$0")/lib-bus.sh"
enter_sandbox "$@"
bus_requirements
require_test_hooks
make_root
noidle_config

ext=$R/var/lib/extensions
t=$(ext_tree app)
for v in v1 v2 v3 v4; do
	ext_file "$t" usr/share/app/version "$v"
	ext_file "$t" opt/app/version "$v"
	mk_erofs "$t" "$WORK/$v.raw"
done
shows() {
	echo "$(cat "$R/usr/share/app/version" 2>/dev/null || echo base) $(cat "$R/opt/app/version" 2>/dev/null || echo base)"
}

# ---------------------------------------------------------------- (a)
start_bus "$NOIDLE_CONF" SYSEXTD_TEST_HOOK=swap-after-beneath
replace_image "$WORK/v1.raw" "$ext/app.raw"
check "(a) the merge itself goes through (the hook only fires with something to replace)"
run_cli merge
assert_ok merge
gen=$(generation)
start_monitor
replace_image "$WORK/v2.raw" "$ext/app.raw"
check "(a) a refresh whose worker is killed after the new trees went beneath"
run_cli refresh
assert_failed "refresh with its worker killed"
assert_contains "$ERR" "worker died" "the caller is told"
assert_eq "$(shows)" "v1 v1" "versions right after the kill"
stop_bus

start_bus "$NOIDLE_CONF"
start_monitor
check "(a) the next instance finishes it at its start and emits TreeChanged"
assert_eq "$(generation)" "$((gen + 1))" "generation after the restart"
assert_eq "$(shows)" "v2 v2" "versions"
wait_signal TreeChanged 1
assert_eq "$(monitor_signals TreeChanged | head -n1)" "[$((gen + 1)),[\"app\"]]" "TreeChanged"
assert_eq "$(ours_at "$R/usr") $(ours_at "$R/opt")" "1 1" "one overlay each"
run_cli refresh
assert_ok "refresh after the restart"
assert_contains "$ERR" "unchanged" "nothing left to do"
stop_bus

# ---------------------------------------------------------------- (b)
check "(b) a kill of the worker after the swap, before the commit: the next call commits it"
start_bus "$NOIDLE_CONF" SYSEXTD_TEST_HOOK=after-swap
gen=$(generation)
start_monitor
replace_image "$WORK/v3.raw" "$ext/app.raw"
run_cli refresh
assert_failed "refresh with its worker killed"
assert_eq "$(shows)" "v3 v3" "versions right after the kill: the new tree is live"
stop_bus
start_bus "$NOIDLE_CONF"
start_monitor
assert_eq "$(generation)" "$((gen + 1))" "generation after the restart"
wait_signal TreeChanged 1
stop_bus

# ---------------------------------------------------------------- (c)
check "(c) interrupted between the hierarchies: the next instance completes it with a refresh"
start_bus "$NOIDLE_CONF" SYSEXTD_TEST_HOOK=swap-placed
replace_image "$WORK/v4.raw" "$ext/app.raw"
run_cli refresh
assert_failed "refresh with its worker killed after usr's tree was placed"
assert_eq "$(shows)" "v3 v3" "versions right after the kill"
stop_bus
start_bus "$NOIDLE_CONF"
start_monitor
run_cli status # activates the daemon, which completes the transition
for _ in $(seq 100); do [[ "$(shows)" == "v4 v4" ]] && break; sleep 0.1; done
assert_eq "$(shows)" "v4 v4" "versions once the daemon completed the transition"
wait_signal TreeChanged 1
run_cli status --json
assert_eq "$(json_q "$OUT" 'd.get("incomplete", False)')" false "complete again"
assert_eq "$(ours_at "$R/usr") $(ours_at "$R/opt")" "1 1" "one overlay each"
run_cli unmerge
assert_ok unmerge
echo PASS
