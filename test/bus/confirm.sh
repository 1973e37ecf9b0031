#!/bin/bash
# Health-gated updates through the daemon (issue 18, section 1): refresh --confirm-within=,
# Confirm() and the deadline the daemon keeps in the journal.  Extension "app" in five
# versions, kept in app.raw.v as systemd-sysupdate leaves them.
#   (a) refresh --confirm-within=5 and nothing else: status shows the deadline; the daemon
#       (IdleTimeoutSec=2) stays while it waits, then rolls back by itself: the previous
#       version is live, status says the deadline caused the rollback, the daemon's log says so;
#   (b) refresh --confirm-within=4 met by `sysextd confirm`: the new version stays after the
#       deadline; confirm with nothing waiting is no failure; Confirm() from a caller other
#       than root is refused (no polkit on this bus);
#   (c) across a restart: refresh --confirm-within=8, the daemon killed by PID, started again
#       by the next call: the deadline still rolls back;
#   (d) a deadline that passed while no daemon ran: the daemon rolls back as it starts;
#   (e) a listing asked for right after a rollback's answer, while its worker still exits:
#       the rollback's images, not a listing kept from before.
# The daemon is killed by PID (SIGKILL) and started again by the next call (bus activation).
set -euo pipefail
# shellcheck source=test/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=test/bus/lib-bus.sh
. "$(dirname "$0")/lib-bus.sh"
enter_sandbox "$@"
bus_requirements
require_cmd python3
make_root
id nobody >/dev/null 2>&1 || skip "no user nobody"
getent group nogroup >/dev/null || skip "no group nogroup"

vdir=$R/var/lib/extensions/app.raw.v
mkdir -p "$vdir"
t=$(ext_tree app)
for v in 1 2 3 4 5; do
	ext_file "$t" usr/share/app/version "v$v"
	ext_file "$t" opt/app/version "v$v"
	mk_erofs "$t" "$WORK/v$v.raw"
done
shows() {
	echo "$(cat "$R/usr/share/app/version" 2>/dev/null || echo base) $(cat "$R/opt/app/version" 2>/dev/null || echo base)"
}
# wait_shows WANT SECONDS — true once the tree shows WANT.
wait_shows() {
	local i
	for ((i = 0; i < $2 * 10; i++)); do
		[[ "$(shows)" == "$1" ]] && return 0
		sleep 0.1
	done
	return 1
}
# status_json — sets STATUS from status --json through the daemon.
status_json() {
	run_cli status --json
	assert_ok "status --json"
	STATUS=$OUT
}

printf '[Daemon]\nIdleTimeoutSec=2\n' >"$WORK/idle.conf"
start_bus "$WORK/idle.conf"

# ---------------------------------------------------------------- (a)
check "(a) refresh --confirm-within=5, not confirmed: the daemon rolls back by itself"
cp "$WORK/v1.raw" "$vdir/app_1.raw"
run_cli merge
assert_ok merge
assert_eq "$(shows)" "v1 v1" "after merge"
g1=$(generation)
cp "$WORK/v2.raw" "$vdir/app_2.raw"
run_cli refresh --confirm-within=5
assert_ok "refresh --confirm-within=5"
assert_eq "$(shows)" "v2 v2" "after the refresh"
dpid=$(daemon_pid)
[[ -n "$dpid" ]] || fail "no daemon after the refresh"
g2=$(generation)
assert_eq "$g2" "$((g1 + 1))" "the refresh made a generation"
status_json
assert_eq "$(json_q "$STATUS" 'd["confirm"]["generation"]')" "$g2" "status --json: the generation waiting"
assert_eq "$(json_q "$STATUS" 'd["confirm"]["rollback_to"]')" "$g1" "status --json: what the deadline rolls back to"
run_cli status
assert_ok status
assert_contains "$OUT" "Confirm: generation $g2 must be confirmed by"
sleep 3
assert_eq "$(daemon_pid)" "$dpid" "the daemon stays while a confirmation is awaited (idle timeout 2 s)"
wait_shows "v1 v1" 20 || fail "not rolled back after the deadline: $(shows)"
status_json
assert_eq "$(json_q "$STATUS" '"confirm" in d')" false "nothing waits any more"
assert_eq "$(json_q "$STATUS" 'd["last_rollback"]["reason"]')" deadline "status --json: the deadline rolled back"
assert_eq "$(json_q "$STATUS" 'd["last_rollback"]["from"]')" "$g2" "status --json: rolled back from"
assert_eq "$(json_q "$STATUS" 'd["last_rollback"]["to"]')" "$g1" "status --json: rolled back to"
assert_eq "$(json_q "$STATUS" 'd["last_rollback"]["error"]')" null "status --json: no error"
assert_eq "$(json_q "$STATUS" 'd["generation"]')" "$((g2 + 1))" "the rollback made a generation"
run_cli status
assert_ok status
assert_contains "$OUT" "its confirmation deadline passed"
assert_contains "$(bus_log)" "was not confirmed in time" "the daemon's log"
# A plain refresh (the path unit's) keeps what the deadline went back to.
run_cli refresh
assert_ok "refresh after the deadline's rollback"
assert_eq "$(shows)" "v1 v1" "pinned by the rollback"

# ---------------------------------------------------------------- (b)
check "(b) refresh --confirm-within=4 confirmed in time: it stays"
cp "$WORK/v3.raw" "$vdir/app_3.raw"
run_cli refresh --confirm-within=4
assert_ok "refresh --confirm-within=4"
assert_eq "$(shows)" "v3 v3" "after the refresh (app 3 is newer than 2: unpinned)"
g3=$(generation)
run_cli --unpriv confirm
assert_failed "confirm by a caller other than root"
run_cli confirm
assert_ok confirm
status_json
assert_eq "$(json_q "$STATUS" '"confirm" in d')" false "nothing waits after confirm"
sleep 6
assert_eq "$(shows)" "v3 v3" "still v3 after the deadline"
assert_eq "$(generation)" "$g3" "no rollback happened"
run_cli confirm
assert_ok "confirm with nothing waiting"
assert_contains "$ERR" "Nothing waits for confirmation."

# ---------------------------------------------------------------- (c)
check "(c) the deadline survives the daemon's restart"
cp "$WORK/v4.raw" "$vdir/app_4.raw"
run_cli refresh --confirm-within=8
assert_ok "refresh --confirm-within=8"
assert_eq "$(shows)" "v4 v4" "after the refresh"
g4=$(generation)
dpid=$(daemon_pid)
[[ -n "$dpid" ]] || fail "no daemon after the refresh"
kill -KILL "$dpid"
wait_daemon_gone 10 || fail "the daemon did not go"
assert_eq "$(shows)" "v4 v4" "still v4 with the daemon gone"
run_cli status
assert_ok "status (starts the daemon again)"
assert_contains "$OUT" "Confirm: generation $g4 must be confirmed by"
ndpid=$(daemon_pid)
[[ -n "$ndpid" && "$ndpid" != "$dpid" ]] || fail "no new daemon (was $dpid, now '$ndpid')"
wait_shows "v3 v3" 25 || fail "not rolled back after the restart: $(shows)"
status_json
assert_eq "$(json_q "$STATUS" 'd["last_rollback"]["reason"]')" deadline "rolled back by the deadline"
assert_eq "$(json_q "$STATUS" 'd["last_rollback"]["to"]')" "$g3" "rolled back to the generation before"

# ---------------------------------------------------------------- (d)
check "(d) a deadline that passed while no daemon ran: rolled back at start"
cp "$WORK/v5.raw" "$vdir/app_5.raw"
run_cli refresh --confirm-within=3
assert_ok "refresh --confirm-within=3"
# At once, before the deadline (no bus call meanwhile: it would start the daemon again).
dpid=$(daemon_pid)
[[ -n "$dpid" ]] || fail "no daemon after the refresh"
kill -KILL "$dpid"
wait_daemon_gone 10 || fail "the daemon did not go"
assert_eq "$(shows)" "v5 v5" "after the refresh (app 5 is newer than 4: unpinned)"
# g4: the refresh to v4; g4+1: the deadline's rollback to v3; g4+2: this refresh.
g5=$((g4 + 2))
sleep 4
assert_eq "$(shows)" "v5 v5" "nobody rolled back while no daemon ran"
run_cli status
assert_ok "status (starts the daemon again)"
# What was live before the refresh: the rollback of (c), with v3.
wait_shows "v3 v3" 15 || fail "not rolled back at the daemon's start: $(shows)"
status_json
assert_eq "$(json_q "$STATUS" 'd["last_rollback"]["from"]')" "$g5" "rolled back from the unconfirmed generation"
assert_eq "$(json_q "$STATUS" 'd["last_rollback"]["to"]')" "$((g4 + 1))" "rolled back to the generation before it"
assert_eq "$(json_q "$STATUS" 'd["last_rollback"]["reason"]')" deadline "rolled back by the deadline"

# ---------------------------------------------------------------- (e)
# The daemon answers a rollback once its worker's report is complete; the worker may still be
# exiting.  A listing asked for right then must be the rollback's, not one kept from before.
if [[ $("$SYSEXTD" --version) == *"+test-hooks"* ]]; then
	check "(e) a listing right after a rollback's answer, its worker still exiting: the new images"
	stop_bus
	noidle_config
	# Every worker stays 2 s after its report (test hook worker-exit).
	start_bus "$NOIDLE_CONF" SYSEXTD_TEST_HOOK=worker-exit SYSEXTD_TEST_HOOK_EXEC="sleep 2"
	assert_eq "$(shows)" "v3 v3" "pinned at v3 by the rollback of (d)"
	run_cli list
	assert_ok "list"
	assert_contains "$OUT" "app.raw.v/app_3.raw" "the listing picks the pinned version"
	sleep 2.5
	run_cli rollback --unpin
	assert_ok "rollback --unpin"
	assert_eq "$(shows)" "v5 v5" "unpinned: the newest"
	run_cli list
	assert_ok "list right after"
	assert_contains "$OUT" "app.raw.v/app_5.raw" "the listing right after the answer picks the newest"
	assert_not_contains "$OUT" "app.raw.v/app_3.raw" "no listing kept from before the rollback"
fi

stop_bus
echo "PASS"
