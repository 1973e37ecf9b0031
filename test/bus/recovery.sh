#!/bin/bash
# Through the daemon, finishing an interrupted transition is a commit (issue 10, section 5):
#  (a) a worker killed after the new trees went beneath their old tops: the caller is told
#      the worker died, and the daemon finishes the transition at once, without another
#      call: the generation advances by one and TreeChanged is emitted with it;
#  (b) a worker killed after the swap: the daemon commits it at once; the daemon itself
#      killed in the middle of a transition: the next instance finishes it at its start,
#      before it serves anyone, and emits TreeChanged;
#  (c) a transition interrupted between the hierarchies: the daemon records what is live
#      and completes the rest with a refresh of its own, at once;
#  (d) writable trees (--mutable=yes), a worker killed after the old trees were sealed
#      read-only: the daemon finishes the transition at once, and both are writable again
#      without another call.
#  (e) the worker sends its result before it hands over its image cache: the caller is
#      answered while the handover still runs; a worker killed after its result, before the
#      handover: the caller heard that the refresh succeeded (it did), the daemon says it has
#      no cache, and the next refresh mounts every image anew and works.
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
check "(a) the daemon finishes it at once and emits TreeChanged"
for _ in $(seq 100); do [[ "$(shows)" == "v2 v2" ]] && break; sleep 0.1; done
assert_eq "$(shows)" "v2 v2" "versions after the worker's death, with no further call"
wait_signal TreeChanged 1
assert_eq "$(monitor_signals TreeChanged | head -n1)" "[$((gen + 1)),[\"app\"]]" "TreeChanged"
assert_eq "$(generation)" "$((gen + 1))" "generation"
assert_eq "$(ours_at "$R/usr") $(ours_at "$R/opt")" "1 1" "one overlay each"
run_cli refresh
assert_ok "refresh after the worker's death"
assert_contains "$ERR" "unchanged" "nothing left to do"
stop_bus

# ---------------------------------------------------------------- (b)
check "(b) a kill of the worker after the swap, before the commit: the daemon commits it at once"
start_bus "$NOIDLE_CONF" SYSEXTD_TEST_HOOK=after-swap
gen=$(generation)
start_monitor
replace_image "$WORK/v3.raw" "$ext/app.raw"
run_cli refresh
assert_failed "refresh with its worker killed"
assert_eq "$(shows)" "v3 v3" "versions right after the kill: the new tree is live"
wait_signal TreeChanged 1
assert_eq "$(generation)" "$((gen + 1))" "generation after the worker's death"
stop_bus

check "(b) the daemon killed in the middle of a transition: the next instance finishes it at its start"
# the hook runs in the worker's shell: its parent is the worker, whose parent is the daemon
start_bus "$NOIDLE_CONF" SYSEXTD_TEST_HOOK=swap-after-beneath \
	SYSEXTD_TEST_HOOK_EXEC='kill -9 $(awk "/^PPid:/ {print \$2}" /proc/$PPID/status); sleep 5'
gen=$(generation)
replace_image "$WORK/v4.raw" "$ext/app.raw"
run_cli refresh
assert_failed "refresh with the daemon killed"
wait_daemon_gone
assert_eq "$(shows)" "v3 v3" "versions right after the kill"
stop_bus
start_bus "$NOIDLE_CONF"
start_monitor
assert_eq "$(generation)" "$((gen + 1))" "generation after the restart"
assert_eq "$(shows)" "v4 v4" "versions after the restart"
wait_signal TreeChanged 1
stop_bus

# ---------------------------------------------------------------- (c)
check "(c) interrupted between the hierarchies: the daemon completes it with a refresh of its own"
# the worker is killed once (the hook's shell kills its parent): the daemon's own refresh goes
# through
start_bus "$NOIDLE_CONF" SYSEXTD_TEST_HOOK=swap-placed \
	SYSEXTD_TEST_HOOK_EXEC="[ -e '$WORK/killed-c' ] || { touch '$WORK/killed-c'; kill -9 \$PPID; sleep 5; }"
start_monitor
replace_image "$WORK/v3.raw" "$ext/app.raw"
run_cli refresh
assert_failed "refresh with its worker killed after usr's tree was placed"
for _ in $(seq 100); do [[ "$(shows)" == "v3 v3" ]] && break; sleep 0.1; done
assert_eq "$(shows)" "v3 v3" "versions once the daemon completed the transition"
wait_signal TreeChanged 1
for _ in $(seq 100); do
	run_cli status --json
	[[ "$(json_q "$OUT" 'd.get("incomplete", False)')" == false ]] && break
	sleep 0.1
done
assert_eq "$(json_q "$OUT" 'd.get("incomplete", False)')" false "complete again"
assert_eq "$(ours_at "$R/usr") $(ours_at "$R/opt")" "1 1" "one overlay each"
stop_bus
start_bus "$NOIDLE_CONF"
run_cli unmerge
assert_ok unmerge
stop_bus

# ---------------------------------------------------------------- (d)
check "(d) writable trees: a worker killed after the old trees were sealed; the daemon makes them writable at once"
start_bus "$NOIDLE_CONF" SYSEXTD_TEST_HOOK=swap-sealed \
	SYSEXTD_TEST_HOOK_EXEC="[ -e '$WORK/killed-d' ] || { touch '$WORK/killed-d'; kill -9 \$PPID; sleep 5; }"
replace_image "$WORK/v1.raw" "$ext/app.raw"
run_cli --mutable=yes merge
assert_ok "merge --mutable=yes"
echo before >"$R/opt/before-d"
gen=$(generation)
replace_image "$WORK/v2.raw" "$ext/app.raw"
run_cli --mutable=yes refresh
assert_failed "refresh with its worker killed after the seal"
writable=no
for _ in $(seq 100); do
	if echo after 2>/dev/null >"$R/opt/after-d" && echo after 2>/dev/null >"$R/usr/after-d"; then writable=yes; break; fi
	sleep 0.1
done
assert_eq "$writable" yes "/opt and /usr writable again, with no further call"
assert_eq "$(shows)" "v2 v2" "versions: the transition was finished"
assert_eq "$(generation)" "$((gen + 1))" "generation"
assert_file_content "$R/opt/before-d" before
assert_file_content "$R/opt/after-d" after
run_cli unmerge
assert_ok unmerge
stop_bus

# ---------------------------------------------------------------- (e)
check "(e) the caller is answered while the worker still hands over its cache"
start_bus "$NOIDLE_CONF" SYSEXTD_TEST_HOOK=worker-handover \
	SYSEXTD_TEST_HOOK_EXEC="touch '$WORK/handover-began'; sleep 8; touch '$WORK/handover-ended'"
replace_image "$WORK/v1.raw" "$ext/app.raw"
run_cli merge
assert_ok "merge"
# The worker begins its handover right after its result (it yields the CPU to the daemon in
# between): it has by now or will within moments; the handover takes 8 s.
for _ in $(seq 40); do
	[[ -e "$WORK/handover-began" ]] && break
	sleep 0.1
done
[[ -e "$WORK/handover-began" ]] || fail "the worker did not begin its handover within 4 s of its caller's answer"
[[ ! -e "$WORK/handover-ended" ]] || fail "the caller was answered only after the handover"
assert_eq "$(shows)" "v1 v1" "versions after the merge"
gen=$(generation)
replace_image "$WORK/v2.raw" "$ext/app.raw"
rm -f "$WORK/handover-began" "$WORK/handover-ended"
# The next job waits for the worker's end: this refresh runs once the handover is done.
run_cli refresh
assert_ok "refresh after the merge"
[[ -e "$WORK/handover-ended" ]] || fail "the merge's handover had not ended when the next transition ran"
assert_eq "$(shows)" "v2 v2" "versions after the refresh"
assert_eq "$(generation)" "$((gen + 1))" "generation after the refresh"
stop_bus

check "(e) a worker killed after its result, before the handover: success told, no cache kept, the next refresh works"
start_bus "$NOIDLE_CONF" SYSEXTD_TEST_HOOK=worker-handover
gen=$(generation)
replace_image "$WORK/v3.raw" "$ext/app.raw"
run_cli refresh
assert_ok "refresh whose worker is killed after its result"
assert_eq "$(shows)" "v3 v3" "versions after the refresh"
assert_eq "$(generation)" "$((gen + 1))" "generation after the refresh"
for _ in $(seq 100); do
	[[ "$(bus_log)" == *"image cache could not be read"* ]] && break
	sleep 0.1
done
assert_contains "$(bus_log)" "The worker's image cache could not be read; the next transition probes every image." \
	"the daemon says it kept no cache"
assert_not_contains "$(bus_log)" "died before reporting" "the worker's death after its result is no failure"
run_cli status --json
assert_ok "status"
assert_eq "$(json_q "$OUT" 'd.get("incomplete", False)')" false "nothing left to recover"
replace_image "$WORK/v4.raw" "$ext/app.raw"
run_cli refresh
assert_ok "the next refresh"
assert_eq "$(shows)" "v4 v4" "versions after the next refresh"
assert_eq "$(generation)" "$((gen + 2))" "generation after the next refresh"
assert_eq "$(ours_at "$R/usr") $(ours_at "$R/opt")" "1 1" "one overlay each"
stop_bus
start_bus "$NOIDLE_CONF"
run_cli unmerge
assert_ok unmerge
echo PASS
