#!/bin/bash
# systemd's varlink interfaces, served by the daemon (sysextd(8), VARLINK): io.systemd.sysext
# (Merge, Refresh, Unmerge, List) and io.systemd.SysUpdate.Notify.OnCompletedUpdate, driven with
# test/bus/varlink-call.py (varlinkctl is not in Debian 12) on the sockets the daemon opens below
# the throw-away root when it is not socket-activated:
#   $R/run/systemd/io.systemd.sysext, $R/run/systemd/sysupdate/notify/io.systemd.sysext.
# Each call changes the tree as its D-Bus twin does; List streams one reply per image ("more");
# errors: NoImagesFound, AlreadyMerged (merging twice), MethodNotFound, InterfaceNotFound,
# InvalidParameter (naming the parameter), ExpectedMore; garbage and an endless message close
# the connection and the daemon serves on; an unprivileged caller (no polkit on the bus) is
# refused with PermissionDenied and the tree does not change; OnCompletedUpdate refreshes.
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

# A copy nobody can read (the checkout may not be open to it).
CLIENT_DIR=$(mktemp -d /tmp/sysextd-varlink-client.XXXXXX)
_rm_client() { rm -rf "$CLIENT_DIR"; }
on_exit _rm_client
chmod 0755 "$CLIENT_DIR"
install -m 0755 "$(dirname "$0")/varlink-call.py" "$CLIENT_DIR/varlink-call.py"
CLIENT=$CLIENT_DIR/varlink-call.py
# The distribution's python3: one found through root's PATH may sit where nobody cannot reach.
PYTHON=/usr/bin/python3
[[ -x $PYTHON ]] || PYTHON=$(command -v python3)
VL=$R/run/systemd/io.systemd.sysext
NOTIFY=$R/run/systemd/sysupdate/notify/io.systemd.sysext

# vcall [--unpriv] SOCKET ARGS... — the client; sets OUT, ERR, RC.
vcall() {
	local -a pre=()
	if [[ "${1:-}" == --unpriv ]]; then
		pre=(setpriv --reuid=nobody --regid=nogroup --clear-groups --)
		shift
	fi
	_capture "${pre[@]}" "$PYTHON" "$CLIENT" "$@"
}


# expect_error SOCKET ERROR-NAME ARGS... — the call fails with that varlink error.
expect_error() {
	local sock=$1 want=$2
	shift 2
	vcall "$sock" "$@"
	assert_eq "$RC" 1 "exit status of the client for $*"
	assert_eq "$(field "$(tail -n1 <<<"$OUT")" error)" "$want" "error of $*"
}

start_bus "$NOIDLE_CONF"
check "the daemon, activated over D-Bus on a root other than /, listens on its own sockets below it"
run_cli status
assert_ok "status"
for ((i = 0; i < 100; i++)); do
	[[ -S "$VL" && -S "$NOTIFY" ]] && break
	sleep 0.1
done
[[ -S "$VL" ]] || fail "no socket $VL:
$(bus_log)"
[[ -S "$NOTIFY" ]] || fail "no socket $NOTIFY"
PID=$(daemon_pid)
[[ -n "$PID" ]] || fail "no daemon"

check "org.varlink.service.GetInfo and GetInterfaceDescription"
vcall "$VL" org.varlink.service.GetInfo
assert_ok "GetInfo"
assert_contains "$OUT" '"io.systemd.sysext"' "GetInfo's interfaces"
assert_contains "$OUT" '"io.systemd.SysUpdate.Notify"' "GetInfo's interfaces"
vcall "$VL" org.varlink.service.GetInterfaceDescription '{"interface":"io.systemd.sysext"}'
assert_ok "GetInterfaceDescription"
assert_contains "$(field "$OUT" parameters description)" "method Merge(" "the description"
assert_contains "$(field "$OUT" parameters description)" "error AlreadyMerged (hierarchy: string)" "the description"
expect_error "$VL" org.varlink.service.InterfaceNotFound org.varlink.service.GetInterfaceDescription '{"interface":"io.nope"}'

check "List streams one reply per image, with more"
vcall "$VL" io.systemd.sysext.List '{}' --more
assert_ok "List"
assert_eq "$(wc -l <<<"$OUT")" 2 "replies to List"
assert_eq "$(field "$(head -n1 <<<"$OUT")" continues)" True "the first reply continues"
assert_contains "$OUT" '"Name":"ext1"' "List"
assert_contains "$OUT" '"Name":"ext2"' "List"
assert_contains "$OUT" '"Class":"sysext"' "List"
assert_contains "$OUT" '"Type":"raw"' "List"
expect_error "$VL" org.varlink.service.ExpectedMore io.systemd.sysext.List '{}'

check "List of a class without images: NoImagesFound"
expect_error "$VL" io.systemd.sysext.NoImagesFound io.systemd.sysext.List '{"class":"confext"}' --more

check "errors of the protocol: MethodNotFound, InterfaceNotFound, InvalidParameter"
expect_error "$VL" org.varlink.service.MethodNotFound io.systemd.sysext.Status '{}'
expect_error "$VL" org.varlink.service.InterfaceNotFound io.systemd.nothing.Merge '{}'
expect_error "$VL" org.varlink.service.InvalidParameter io.systemd.sysext.Merge '{"force":"yes"}'
assert_eq "$(field "$OUT" parameters parameter)" force "the invalid parameter"
expect_error "$VL" org.varlink.service.InvalidParameter io.systemd.sysext.Refresh '{"class":"portable"}'
assert_eq "$(field "$OUT" parameters parameter)" class "the invalid parameter"
expect_error "$VL" org.varlink.service.InvalidParameter io.systemd.sysext.Unmerge '{"force":true}'
expect_error "$VL" org.varlink.service.InvalidParameter io.systemd.sysext.Merge '{"bogus":1}'
assert_eq "$(field "$OUT" parameters parameter)" bogus "the invalid parameter"
assert_missing "$R/usr/share/ext1/hello"

check "an unprivileged caller is refused (no polkit to allow it) and the tree does not change"
before=$(tree_snapshot)
for m in Merge Refresh Unmerge; do
	vcall --unpriv "$VL" "io.systemd.sysext.$m" '{}'
	assert_eq "$RC" 1 "$m as nobody"
	assert_eq "$(field "$OUT" error)" org.varlink.service.PermissionDenied "$m as nobody"
done
vcall --unpriv "$NOTIFY" io.systemd.SysUpdate.Notify.OnCompletedUpdate '{}'
assert_eq "$(field "$OUT" error)" org.varlink.service.PermissionDenied "OnCompletedUpdate as nobody"
assert_eq "$(tree_snapshot)" "$before" "the tree after the refused calls"
vcall --unpriv "$VL" io.systemd.sysext.List '{}' --more
assert_ok "List as nobody"
assert_contains "$OUT" '"Name":"ext1"' "List as nobody"

check "Merge merges; merging twice: AlreadyMerged"
gen=$(generation)
vcall "$VL" io.systemd.sysext.Merge '{}'
assert_ok "Merge"
assert_eq "$OUT" '{"parameters":{}}' "Merge's reply"
assert_file_content "$R/usr/share/ext1/hello" "hello from ext1"
assert_file_content "$R/opt/app/ext2" "ext2 in opt"
assert_eq "$(generation)" $((gen + 1)) "Generation after Merge"
expect_error "$VL" io.systemd.sysext.AlreadyMerged io.systemd.sysext.Merge '{}'
assert_contains "$(field "$OUT" parameters hierarchy)" usr "AlreadyMerged's hierarchy"
assert_file_content "$R/usr/share/ext1/hello" "hello from ext1"

check "Refresh after ext2 went: ext2 leaves the tree; alwaysRefresh"
mv "$R/var/lib/extensions/ext2.raw" "$WORK/ext2.raw"
vcall "$VL" io.systemd.sysext.Refresh '{"noReload":true}'
assert_ok "Refresh"
assert_missing "$R/usr/share/ext2/hello"
assert_file_content "$R/usr/share/ext1/hello" "hello from ext1"
mv "$WORK/ext2.raw" "$R/var/lib/extensions/ext2.raw"
vcall "$VL" io.systemd.sysext.Refresh '{"alwaysRefresh":true,"class":"sysext","force":false}'
assert_ok "Refresh with alwaysRefresh"
assert_file_content "$R/usr/share/ext2/hello" "hello from ext2"

check "Unmerge unmerges"
vcall "$VL" io.systemd.sysext.Unmerge '{"class":null}'
assert_ok "Unmerge"
assert_missing "$R/usr/share/ext1/hello"
assert_missing "$R/opt/app/ext2"

check "garbage and an endless message close the connection; the daemon serves on"
vcall "$VL" --raw '{"method":'
assert_eq "$RC" 2 "garbage"
assert_eq "$OUT" EOF "garbage"
vcall "$VL" --raw '["io.systemd.sysext.Merge"]'
assert_eq "$OUT" EOF "not an object"
vcall "$VL" --raw '{"method":"io.systemd.sysext.Merge","parameters":[]}'
assert_eq "$OUT" EOF "parameters not an object"
vcall "$VL" --huge $((4 * 1024 * 1024))
assert_eq "$OUT" EOF "a message of 4 MiB"
assert_eq "$(daemon_pid)" "$PID" "the daemon after hostile input"
vcall "$VL" org.varlink.service.GetInfo
assert_ok "GetInfo after hostile input"
assert_missing "$R/usr/share/ext1/hello"

check "io.systemd.SysUpdate.Notify.OnCompletedUpdate, as systemd-sysupdate calls it, refreshes"
vcall "$NOTIFY" io.systemd.SysUpdate.Notify.OnCompletedUpdate \
	'{"component":null,"version":"v2","resources":[{"transfer":"app","path":"/var/lib/extensions/ext1.raw"}]}'
assert_ok "OnCompletedUpdate"
assert_file_content "$R/usr/share/ext1/hello" "hello from ext1"
assert_file_content "$R/usr/share/ext2/hello" "hello from ext2"
expect_error "$NOTIFY" org.varlink.service.InvalidParameter io.systemd.SysUpdate.Notify.OnCompletedUpdate '{"version":2}'

check "the notify socket serves io.systemd.sysext too; Unmerge through it"
vcall "$NOTIFY" io.systemd.sysext.Unmerge '{}'
assert_ok "Unmerge on the notify socket"
assert_missing "$R/usr/share/ext1/hello"
assert_eq "$(daemon_pid)" "$PID" "the daemon at the end"

echo "PASS"
