#!/bin/bash
# Authorization through a real polkitd on the private bus (inside this test's private mount
# namespace: its action file and rules are put where polkitd reads them, for this namespace
# only).  The rule of this test allows the user nobody the action org.sysextd1.manage;
# everyone else gets polkit's default for it, auth_admin_keep, and no authentication agent
# runs:
#  (a) nobody merges, refreshes and unmerges;
#  (b) another unprivileged user (daemon) is refused: without interactive authorization
#      with org.freedesktop.DBus.Error.InteractiveAuthorizationRequired, with it (no agent
#      to ask) with org.sysextd1.Error.AccessDenied; the tree does not change;
#  (c) root is let through without polkit being asked (polkitd stopped), nobody is not.
set -euo pipefail
# shellcheck source=test/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=test/bus/lib-bus.sh
. "$(dirname "$0")/lib-bus.sh"
# shellcheck source=test/bus/lib-polkit.sh
. "$(dirname "$0")/lib-polkit.sh"
enter_sandbox "$@"
bus_requirements
require_cmd gdbus python3
polkit_requirements
id daemon >/dev/null 2>&1 || skip "no user daemon"
make_root
bus_setup_images
noidle_config

polkit_files 'polkit.addRule(function(action, subject) {
        if (action.id == "org.sysextd1.manage" && subject.user == "nobody")
                return polkit.Result.YES;
});'
start_bus "$NOIDLE_CONF"
start_polkit

# gdbus_as USER METHOD — the D-Bus error name, through gdbus (which prints it).
gdbus_as() {
	local u=$1 method=$2
	_capture env DBUS_SYSTEM_BUS_ADDRESS="$BUS_ADDR" setpriv --reuid="$u" --regid="$(id -g "$u")" --clear-groups -- \
		gdbus call --system --dest org.sysextd1 --object-path /org/sysextd1 \
		--method org.sysextd1.Manager."$method" '{}'
}

# ---------------------------------------------------------------- (a)
check "(a) nobody is allowed by the rule: merge, refresh, unmerge"
call_as nobody Merge
assert_ok "Merge as nobody"
assert_file_content "$R/usr/share/ext1/hello" "hello from ext1"
run_cli --unpriv refresh --always-refresh=yes
assert_ok "sysextd refresh --always-refresh=yes as nobody"
call_as nobody Unmerge
assert_ok "Unmerge as nobody"
assert_missing "$R/usr/share/ext1/hello"

# ---------------------------------------------------------------- (b)
check "(b) daemon (no rule for it, no agent): refused, the tree as it was"
before=$(tree_snapshot)
gen=$(generation)
call_as daemon Merge
assert_failed "Merge as daemon"
assert_contains "$ERR" "authentication" "busctl's message without interactive authorization"
gdbus_as daemon Merge
assert_failed "Merge as daemon through gdbus"
assert_contains "$ERR" "org.freedesktop.DBus.Error.InteractiveAuthorizationRequired" "error name without interactive authorization"
call_as daemon --interactive Merge
assert_failed "Merge as daemon with interactive authorization"
assert_contains "$ERR" "not authorized" "message with interactive authorization (no agent)"
for m in Refresh Unmerge; do
	call_as daemon "$m"
	assert_failed "$m as daemon"
done
assert_eq "$(tree_snapshot)" "$before" "tree after the refusals"
assert_eq "$(generation)" "$gen" "generation after the refusals"

# ---------------------------------------------------------------- (c)
check "(c) root is not asked: with polkitd gone, root still merges, nobody does not"
stop_polkit
run_cli merge
assert_ok "merge as root without polkit"
call_as nobody Refresh
assert_failed "Refresh as nobody without polkit"
assert_contains "$ERR" "polkit" "the message says polkit is missing"
start_polkit

run_cli unmerge
assert_ok "unmerge as root"
echo PASS
