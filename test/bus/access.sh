#!/bin/bash
# Merge, Refresh and Unmerge change the tree only for root, or for whom polkit
# allows (the action org.sysextd1.manage; test/bus/polkit.sh runs a real polkitd).
# Here no polkit runs on the bus: the bus policy (conf/org.sysextd1.conf) lets an
# unprivileged caller (nobody:nogroup, no supplementary groups) reach the daemon,
# which refuses with org.sysextd1.Error.AccessDenied, saying that polkit is not
# there to ask.  After each refusal the tree is exactly as it was.  The same
# caller gets GetStatus, ListImages, ListFollowed, GetDelay, ListNamespaces, every property,
# GetAll and introspection,
# and the CLI run as nobody prints status and list and fails with one line for
# the rest.
set -euo pipefail
# shellcheck source=test/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=test/bus/lib-bus.sh
. "$(dirname "$0")/lib-bus.sh"
enter_sandbox "$@"
bus_requirements
require_cmd gdbus
make_root
bus_setup_images
id nobody >/dev/null 2>&1 || skip "no user nobody"
getent group nogroup >/dev/null || skip "no group nogroup"
NOBODY_UID=$(id -u nobody)

PROPS=(Root Generation Merged Hierarchies Extensions KernelFeatures Mode)

# refused_everything EXPECTED_ERROR_NAME MESSAGE_PART — every mutating method,
# through busctl, gdbus and the CLI as nobody, is refused with that error;
# the tree, the generation and the daemon's answers do not change.
refused_everything() {
	local want=$1 part=$2 before gen_before method cli_verb err_line
	before=$(tree_snapshot)
	gen_before=$(generation)
	for method in Merge Refresh Unmerge; do
		check "$method as nobody through gdbus: $want"
		gcall --unpriv "$method" '{"force": <true>}'
		assert_failed "$method as nobody"
		assert_eq "$(gdbus_error_name)" "$want" "error name of $method as nobody"
		assert_contains "$(gdbus_error_message)" "$part" "error message of $method as nobody"

		check "$method as nobody through busctl: refused"
		run_bctl --unpriv call org.sysextd1 /org/sysextd1 org.sysextd1.Manager "$method" 'a{sv}' 1 force b true
		assert_failed "busctl $method as nobody"
		assert_contains "$ERR" "$part" "busctl's error for $method"

		cli_verb=${method,,}
		check "sysextd $cli_verb as nobody: exit 1, one line"
		run_cli --unpriv "$cli_verb"
		assert_rc 1 "sysextd $cli_verb as nobody"
		assert_eq "$(wc -l <<<"$ERR")" 1 "lines on stderr of sysextd $cli_verb as nobody"
		err_line=$ERR
		assert_eq "$err_line" "$(gdbus_error_message_for "$method")" "CLI message vs D-Bus message"

		check "the tree is unchanged after the refused $method"
		assert_eq "$(tree_snapshot)" "$before" "tree after refused $method"
		assert_eq "$(generation)" "$gen_before" "Generation after refused $method"
	done
}

# gdbus_error_message_for METHOD — the error message of METHOD as nobody.
gdbus_error_message_for() {
	local o=$OUT e=$ERR r=$RC msg
	gcall --unpriv "$1" '{"force": <true>}' 2>/dev/null
	msg=$(gdbus_error_message)
	OUT=$o ERR=$e RC=$r
	echo "$msg"
}

# readers_allowed — everything read-only works for nobody.
readers_allowed() {
	local p cli_status
	check "GetStatus as nobody through busctl and gdbus"
	run_bctl --unpriv call org.sysextd1 /org/sysextd1 org.sysextd1.Manager GetStatus
	assert_ok "busctl GetStatus as nobody"
	assert_contains "$OUT" "sta(sbastb)a(ssss)sa(sssb)" "GetStatus reply"
	gcall --unpriv GetStatus
	assert_ok "gdbus GetStatus as nobody"

	check "ListImages as nobody through busctl"
	run_bctl --unpriv call org.sysextd1 /org/sysextd1 org.sysextd1.Manager ListImages
	assert_ok "busctl ListImages as nobody"
	assert_contains "$OUT" '"ext1" "erofs"' "ListImages reply"
	assert_contains "$OUT" '"ext2" "erofs"' "ListImages reply"

	check "ListFollowed, GetDelay and ListNamespaces as nobody (open to every caller, org.sysextd1(5))"
	for m in ListFollowed GetDelay ListNamespaces; do
		run_bctl --unpriv call org.sysextd1 /org/sysextd1 org.sysextd1.Manager "$m"
		assert_ok "busctl $m as nobody"
	done
	run_cli --unpriv status --namespaces
	assert_ok "sysextd status --namespaces as nobody"

	check "every property as nobody, one by one and with GetAll"
	for p in "${PROPS[@]}"; do
		run_bctl --unpriv get-property org.sysextd1 /org/sysextd1 org.sysextd1.Manager "$p"
		assert_ok "get-property $p as nobody"
		assert_eq "$OUT" "$(prop "$p")" "property $p as nobody vs as root"
	done
	run_bctl --unpriv call org.sysextd1 /org/sysextd1 org.freedesktop.DBus.Properties GetAll s org.sysextd1.Manager
	assert_ok "GetAll as nobody"

	check "introspection as nobody"
	run_bctl --unpriv introspect org.sysextd1 /org/sysextd1 org.sysextd1.Manager
	assert_ok "introspect as nobody"
	assert_contains "$OUT" ".GetStatus" "introspection"

	check "sysextd status and list as nobody = as root"
	run_cli --unpriv status
	assert_ok "sysextd status as nobody"
	cli_status=$OUT
	run_cli status
	assert_ok "sysextd status as root"
	assert_eq "$cli_status" "$OUT" "status as nobody vs as root"
	run_cli --unpriv list
	assert_ok "sysextd list as nobody"
	assert_contains "$OUT" ext1 "list as nobody"
}

# ------------------------------------------------------------ default policy
start_bus "$NOIDLE_CONF"

check "unmerged: nobody cannot merge (no polkit to allow it)"
run_cli status
assert_ok "status"
refused_everything org.sysextd1.Error.AccessDenied "polkit"
assert_missing "$R/usr/share/ext1/hello"
readers_allowed

check "root merges"
run_cli merge
assert_ok "merge as root"
assert_file_content "$R/usr/share/ext1/hello" "hello from ext1"

check "merged: nobody cannot refresh or unmerge"
refused_everything org.sysextd1.Error.AccessDenied "polkit"
assert_file_content "$R/usr/share/ext1/hello" "hello from ext1"
readers_allowed

check "the daemon takes the caller's uid from the bus, not from /proc: root's unmerge works"
run_cli unmerge
assert_ok "unmerge as root"
assert_missing "$R/usr/share/ext1/hello"

echo "PASS"
