#!/bin/bash
# D-Bus activation and exit on idle: with no daemon running, the first CLI
# call starts `sysextd daemon` through the activation file; with
# [Daemon] IdleTimeoutSec=2 it exits by itself within ~10 s of idling (and
# gives the name back); the next call activates it again. A transition that
# runs longer than the idle timeout is not cut short by it.
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

printf '[Daemon]\nIdleTimeoutSec=2\n' >"$WORK/idle2.conf"
HOOK="if [ -e $WORK/slow ]; then sleep 4; fi"
start_bus "$WORK/idle2.conf" SYSEXTD_TEST_HOOK=before-swap "SYSEXTD_TEST_HOOK_EXEC=$HOOK"

# wait_exit PID SECONDS — true once PID is gone (or a zombie) within SECONDS.
wait_exit() {
	local i
	for ((i = 0; i < $2 * 10; i++)); do
		kill -0 "$1" 2>/dev/null || return 0
		[[ $(ps -o stat= -p "$1" 2>/dev/null) == Z* ]] && return 0
		sleep 0.1
	done
	return 1
}

check "no daemon before the first call"
assert_eq "$(daemon_pid)" "" "owner of org.sysextd1"
[[ -z "$(_descendants "$BUS_PID")" ]] || fail "the bus has children before any call: $(_descendants "$BUS_PID")"

check "the first CLI call (status) activates the daemon"
run_cli status
assert_ok "status"
assert_contains "$OUT" "Mode:" "status output"
pid1=$(daemon_pid)
[[ -n "$pid1" ]] || fail "no daemon owns org.sysextd1 after the first call"
assert_contains "$(tr '\0' ' ' </proc/"$pid1"/cmdline)" "daemon --root=$R --config=$WORK/idle2.conf" \
	"the daemon's command line (from the activation file)"
assert_contains "$(bus_log)" "Activating service name='org.sysextd1'" "bus log"

check "idle for IdleTimeoutSec=2: the daemon exits within 10 s and releases the name"
t0=$(date +%s%N)
wait_exit "$pid1" 10 || fail "the daemon (PID $pid1) did not exit within 10 s of idling"
t1=$(date +%s%N)
wait_daemon_gone 2 || fail "org.sysextd1 still has an owner after the daemon exited"
echo "daemon exited $(((t1 - t0) / 1000000)) ms after the last call (IdleTimeoutSec=2)"
assert_contains "$(bus_log)" "Idle for 2 s, exiting." "daemon log"

check "the next call (list) activates it again"
run_cli list
assert_ok "list"
assert_contains "$OUT" "ext1" "list output"
pid2=$(daemon_pid)
[[ -n "$pid2" ]] || fail "no daemon after the second activation"
assert_ne "$pid2" "$pid1" "PID of the second daemon"

check "calls keep it alive: status every second for 4 s, the same daemon answers"
for _ in 1 2 3 4; do
	sleep 1
	run_cli status
	assert_ok status
done
assert_eq "$(daemon_pid)" "$pid2" "daemon PID after 4 s of calls every second"

check "a merge held 4 s (longer than the idle timeout) completes through an activated daemon"
wait_exit "$pid2" 10 || fail "the daemon (PID $pid2) did not exit on idle"
wait_daemon_gone 2 || fail "org.sysextd1 still has an owner"
touch "$WORK/slow"
run_cli --json merge
assert_ok "merge"
assert_eq "$(json_q "$OUT" 'd')" '{"generation": 1, "changed": true}' "merge reply"
rm -f "$WORK/slow"
pid3=$(daemon_pid)
[[ -n "$pid3" ]] || fail "the daemon exited right after the merge, before idling 2 s"
assert_file_content "$R/usr/share/ext1/hello" "hello from ext1"

check "after idling again it exits; the merged tree stays; the next call sees generation 1"
wait_exit "$pid3" 10 || fail "the daemon (PID $pid3) did not exit on idle after the merge"
wait_daemon_gone 2 || fail "org.sysextd1 still has an owner"
assert_file_content "$R/usr/share/ext1/hello" "hello from ext1"
assert_eq "$(generation)" 1 "Generation read from a freshly activated daemon"
[[ -n "$(daemon_pid)" ]] || fail "reading a property did not activate the daemon"
run_cli --json status
assert_ok status
assert_eq "$(json_q "$OUT" '[h["extensions"] for h in d["hierarchies"]]')" '[["ext1", "ext2"], ["ext2"], []]' "extensions"

check "stop: after SIGTERM the daemon and the bus are gone, nothing of ours is left running"
p=$(daemon_pid)
stop_bus
[[ -z "$p" ]] || wait_exit "$p" 1 || fail "the daemon (PID $p) is still running after stop_bus"
assert_eq "$(_our_daemons)" "" "processes running the activation file's command line"
rm -rf "$BUS_DIR"

echo "PASS"
