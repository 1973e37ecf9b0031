#!/bin/bash
# Mutating calls are queued and run one at a time in arrival order
# (org.sysextd1(5)): three `sysextd refresh --always-refresh=yes` started 50 ms apart while
# the first is held before its swap (test hook before-swap, `sleep 3`) all
# succeed; their transitions never overlap; they get generations G+1, G+2,
# G+3 in the order they were started; Generation rises by exactly 3, and one
# TreeChanged is emitted per transition.
set -euo pipefail
# shellcheck source=test/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=test/bus/lib-bus.sh
. "$(dirname "$0")/lib-bus.sh"
enter_sandbox "$@"
bus_requirements
require_test_hooks
make_root
bus_setup_images

# While $WORK/slow exists each transition logs when its hook starts and ends;
# the first one to get there is held 3 s, the others 0.5 s.
HOOK="if [ -e $WORK/slow ]; then echo start \$(date +%s%N) >> $WORK/hook.log; \
if [ -e $WORK/first ]; then rm -f $WORK/first; sleep 3; else sleep 0.5; fi; \
echo end \$(date +%s%N) >> $WORK/hook.log; fi"
start_bus "$NOIDLE_CONF" SYSEXTD_TEST_HOOK=before-swap "SYSEXTD_TEST_HOOK_EXEC=$HOOK"

check "merge through the daemon"
run_cli merge
assert_ok merge
g=$(generation)
start_monitor

check "three refresh --always-refresh=yes calls, started 50 ms apart, the first one held"
touch "$WORK/slow" "$WORK/first"
pids=()
for i in 1 2 3; do
	env DBUS_SYSTEM_BUS_ADDRESS="$BUS_ADDR" "$SYSEXTD" --root="$R" --json refresh --always-refresh=yes \
		>"$WORK/r$i.out" 2>"$WORK/r$i.err" &
	pids+=($!)
	on_exit "kill ${pids[-1]} 2>/dev/null; wait ${pids[-1]} 2>/dev/null"
	sleep 0.05
done

check "while the first is held, the others wait (they have not returned)"
sleep 1
for i in 2 3; do
	kill -0 "${pids[i - 1]}" 2>/dev/null || fail "refresh $i returned while refresh 1 was still held: $(cat "$WORK/r$i.err")"
done
assert_eq "$(grep -c '^start' "$WORK/hook.log")" 1 "transitions started while the first is held"

check "all three succeed"
for i in 1 2 3; do
	rc=0
	wait "${pids[i - 1]}" || rc=$?
	echo "refresh $i: rc=$rc out=$(cat "$WORK/r$i.out") err=$(tr '\n' ' ' <"$WORK/r$i.err")"
	assert_eq "$rc" 0 "refresh $i exit status ($(cat "$WORK/r$i.err"))"
done
rm -f "$WORK/slow"

check "in arrival order: refresh i got generation G+i"
for i in 1 2 3; do
	assert_eq "$(json_q "$(cat "$WORK/r$i.out")" 'd')" "{\"generation\": $((g + i)), \"changed\": true}" \
		"reply of refresh $i"
done

check "the transitions did not overlap (hook log: start end start end start end)"
assert_eq "$(awk '{printf "%s ", $1}' "$WORK/hook.log")" "start end start end start end " "hook log"
awk 'NR > 1 && $2 < prev { bad = 1 } { prev = $2 } END { exit bad }' "$WORK/hook.log" ||
	fail "hook timestamps are not increasing: $(cat "$WORK/hook.log")"

check "Generation rose by 3; three TreeChanged signals, one per generation"
assert_eq "$(generation)" $((g + 3)) "Generation"
wait_signal TreeChanged 3
assert_eq "$(monitor_signals TreeChanged | python3 -c 'import json,sys; print([json.loads(l)[0] for l in sys.stdin])')" \
	"[$((g + 1)), $((g + 2)), $((g + 3))]" "TreeChanged generations"

check "the tree is intact: one sysextd overlay per hierarchy, the files are there"
assert_eq "$(ours_at "$R/usr")" 1 "sysextd overlays on $R/usr"
assert_eq "$(ours_at "$R/opt")" 1 "sysextd overlays on $R/opt"
assert_file_content "$R/usr/share/ext1/hello" "hello from ext1"
assert_file_content "$R/opt/app/ext2" "ext2 in opt"

echo "PASS"
