#!/bin/bash
# The client's own path to the daemon (sysextd(8), VARLINK): root's merge, refresh and unmerge
# go to org.sysextd1.Manager on the daemon's socket below the root ($R/run/systemd/
# io.systemd.sysext), not through dbus-daemon, and answer as the bus does: the same messages,
# the same exit status, nothing to merge no failure, merging twice AlreadyMerged.  With no
# daemon there (no socket, nobody accepting), a socket that only root could not have made (not
# root's, a symlink, in a directory others may write), or another server on it (one that does
# not know the interface), the client uses the bus and that server hears nothing of the call.
# The interface itself: a call for another root is Failed (WrongRoot), bad parameters are
# InvalidParameter naming them, a caller who is not root is PermissionDenied (no polkit here).
set -euo pipefail
# shellcheck source=test/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=test/bus/lib-bus.sh
. "$(dirname "$0")/lib-bus.sh"
enter_sandbox "$@"
bus_requirements
require_cmd python3
make_root
bus_setup_images
id nobody >/dev/null 2>&1 || skip "no user nobody"
getent group nogroup >/dev/null || skip "no group nogroup"

VL=$R/run/systemd/io.systemd.sysext
CALL=$(dirname "$0")/varlink-call.py
NOBUS=unix:path=$WORK/no-bus-here

# run_nobus ARGS... — the CLI as root with no system bus to reach: only the varlink path works.
run_nobus() {
	_capture env DBUS_SYSTEM_BUS_ADDRESS="$NOBUS" "$SYSEXTD" --root="$R" "$@"
}
vcall() {
	_capture python3 "$CALL" "$@"
}

start_bus "$NOIDLE_CONF"

check "no daemon yet (no socket): merge goes over the bus, which starts the daemon"
[[ ! -e "$VL" ]] || fail "$VL before the daemon ran"
run_cli merge
assert_ok "merge"
assert_contains "$ERR" "Merged extensions into '$R/usr'." "merge's messages"
assert_file_content "$R/usr/share/ext1/hello" "hello from ext1"
for ((i = 0; i < 100; i++)); do [[ -S "$VL" ]] && break; sleep 0.1; done
[[ -S "$VL" ]] || fail "no socket $VL: $(bus_log)"
PID=$(daemon_pid)

check "root's refresh, unmerge and merge reach the daemon without the bus"
ext_file "$(ext_tree ext1 "$WORK/ext1-v2")" usr/share/ext1/hello "ext1 v2" >/dev/null
mk_erofs "$WORK/ext1-v2" "$WORK/ext1-v2.raw"
mv "$WORK/ext1-v2.raw" "$R/var/lib/extensions/ext1.raw"
run_nobus refresh
assert_ok "refresh without a bus"
assert_contains "$ERR" "Merged extensions into '$R/usr'." "refresh's messages"
assert_file_content "$R/usr/share/ext1/hello" "ext1 v2"
run_nobus refresh
assert_ok "refresh with nothing changed"
assert_contains "$ERR" "unchanged, nothing to do" "refresh with nothing changed"
run_nobus merge
assert_eq "$RC" 1 "merging twice"
assert_contains "$ERR" "Extensions are already merged into $R/usr" "merging twice"
run_nobus unmerge
assert_ok "unmerge without a bus"
assert_contains "$ERR" "Unmerged extensions from '$R/usr'." "unmerge's messages"
assert_missing "$R/usr/share/ext1/hello"
run_nobus unmerge
assert_ok "unmerge with nothing merged"
run_nobus merge --class=confext
assert_ok "merge of a class without images: no failure"
assert_contains "$ERR" "No" "nothing to merge is said"
assert_missing "$R/usr/share/ext1/hello"
run_nobus merge --no-reload --force
assert_ok "merge with options"
assert_file_content "$R/usr/share/ext1/hello" "ext1 v2"
assert_eq "$(daemon_pid)" "$PID" "the daemon (one, the same)"

check "the same answers over the bus (an option only the bus takes: --mutable=no)"
run_nobus refresh
via_varlink="$RC|$ERR"
run_cli refresh --mutable=no
assert_eq "$RC|$ERR" "$via_varlink" "refresh with nothing changed, over the bus"
run_nobus refresh --mutable=no
assert_eq "$RC" 1 "an option only the bus takes, without a bus"
assert_contains "$ERR" "system bus" "an option only the bus takes, without a bus"
run_cli merge --mutable=no
run_nobus merge
assert_eq "$RC" 1 "merging twice, varlink"
assert_contains "$ERR" "already merged" "merging twice, varlink"

check "org.sysextd1.Manager itself: WrongRoot, InvalidParameter, PermissionDenied"
vcall "$VL" org.sysextd1.Manager.Refresh '{"root":"/elsewhere"}'
assert_eq "$(field "$OUT" error)" org.sysextd1.Manager.Failed "another root"
assert_eq "$(field "$OUT" parameters name)" org.sysextd1.Error.WrongRoot "another root"
assert_contains "$(field "$OUT" parameters message)" "serves $R, not /elsewhere" "another root"
for bad in '{}' '{"root":null}' '{"root":"relative"}' "{\"root\":\"$R\",\"classes\":[\"portable\"]}" \
	"{\"root\":\"$R\",\"classes\":[\"sysext\",\"sysext\"]}" "{\"root\":\"$R\",\"classes\":[]}" \
	"{\"root\":\"$R\",\"classes\":\"sysext\"}" "{\"root\":\"$R\",\"force\":\"yes\"}" \
	"{\"root\":\"$R\",\"delay\":5}" "{\"root\":\"$R\",\"class\":\"sysext\"}"; do
	vcall "$VL" org.sysextd1.Manager.Refresh "$bad"
	assert_eq "$(field "$OUT" error)" org.varlink.service.InvalidParameter "Refresh $bad"
done
vcall "$VL" org.sysextd1.Manager.Status "{\"root\":\"$R\"}"
assert_eq "$(field "$OUT" error)" org.varlink.service.MethodNotFound "an unknown method"
before=$(tree_snapshot)
for m in Merge Refresh Unmerge; do
	_capture setpriv --reuid=nobody --regid=nogroup --clear-groups -- /usr/bin/python3 "$CALL" "$VL" \
		"org.sysextd1.Manager.$m" "{\"root\":\"$R\"}"
	assert_eq "$(field "$OUT" error)" org.varlink.service.PermissionDenied "$m as nobody"
done
assert_eq "$(tree_snapshot)" "$before" "the tree after the refused calls"
vcall "$VL" org.sysextd1.Manager.Refresh "{\"root\":\"$R\",\"alwaysRefresh\":true,\"classes\":[\"sysext\"],\"noexec\":null}"
assert_ok "Refresh with alwaysRefresh"
assert_eq "$(field "$OUT" parameters changed)" True "changed"
assert_contains "$OUT" '"messages":[' "the messages"
assert_contains "$OUT" "Merged extensions into" "the messages"

# A stand-in server at the daemon's path: records each connection, answers MethodNotFound.  The
# daemon's socket waits beside it (a socket moved to another file system would be a new one).
REAL=$R/run/systemd/real.sock
mv "$VL" "$REAL"
_restore_socket() { [[ -S "$REAL" ]] && rm -f "$VL" && mv "$REAL" "$VL"; return 0; }
on_exit _restore_socket
fake_server() { # OWNER — serve at $VL (a socket owned by OWNER) until killed; connections logged to $WORK/fake.log
	: >"$WORK/fake.log"
	python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(sys.argv[1]); s.listen(8)
open(sys.argv[2], "a").write("listening\n")
while True:
    c, _ = s.accept()
    data = b""
    while not data.endswith(b"\0"):
        d = c.recv(65536)
        if not d: break
        data += d
    open(sys.argv[2], "a").write("call " + data.rstrip(b"\0").decode() + "\n")
    c.sendall(b"{\"error\":\"org.varlink.service.MethodNotFound\",\"parameters\":{}}\0")
    c.close()
' "$VL" "$WORK/fake.log" &
	FAKE=$!
	for ((i = 0; i < 100; i++)); do grep -q listening "$WORK/fake.log" 2>/dev/null && break; sleep 0.05; done
	grep -q listening "$WORK/fake.log" || fail "the stand-in server did not start"
	chown "$1" "$VL"
}
stop_fake() { kill "$FAKE" 2>/dev/null; wait "$FAKE" 2>/dev/null || true; rm -f "$VL"; }

check "another server there that does not know the interface: the bus is used"
fake_server root
gen=$(generation)
run_cli refresh --always-refresh=yes
assert_ok "refresh with another server on the socket"
assert_eq "$(generation)" $((gen + 1)) "generation after the refresh (over the bus)"
assert_contains "$(cat "$WORK/fake.log")" '"method":"org.sysextd1.Manager.Refresh"' "the other server was asked"
stop_fake

check "a socket someone other than root made: not even connected to; the bus is used"
fake_server nobody
gen=$(generation)
run_cli refresh --always-refresh=yes
assert_ok "refresh with nobody's socket there"
assert_eq "$(generation)" $((gen + 1)) "generation after the refresh (over the bus)"
assert_not_contains "$(cat "$WORK/fake.log")" "call" "nobody's server heard of the call"
stop_fake

check "a symlink to the daemon's socket, and a directory others may write: the bus is used"
ln -s "$REAL" "$VL"
gen=$(generation)
run_nobus refresh --always-refresh=yes
assert_eq "$RC" 1 "through a symlink, without a bus"
assert_eq "$(generation)" "$gen" "generation (nothing ran)"
run_cli refresh --always-refresh=yes
assert_ok "through a symlink, with the bus"
assert_eq "$(generation)" $((gen + 1)) "generation after the refresh (over the bus)"
rm -f "$VL"
mv "$REAL" "$VL"
chmod 0777 "$R/run/systemd"
run_nobus refresh --always-refresh=yes
assert_eq "$RC" 1 "in a directory others may write, without a bus"
chmod 0755 "$R/run/systemd"
run_nobus refresh --always-refresh=yes
assert_ok "the daemon's socket again, without a bus"
assert_eq "$(generation)" $((gen + 2)) "generation at the end"

check "the daemon gone (the socket left, nobody accepting): the bus starts it again"
_bus_kill_wait "$PID" 20
wait_daemon_gone
run_cli refresh --always-refresh=yes
assert_ok "refresh with the daemon gone"
assert_file_content "$R/usr/share/ext1/hello" "ext1 v2"
assert_ne "$(daemon_pid)" "" "a daemon again"

echo "PASS"
