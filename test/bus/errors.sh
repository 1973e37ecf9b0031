#!/bin/bash
# Named errors of org.sysextd1 (org.sysextd1(5) ERRORS), through gdbus (which
# prints the error name), busctl and the CLI:
#  - malformed options (an unknown key; a value that is not a boolean) to
#    Merge, Refresh and Unmerge -> org.sysextd1.Error.InvalidOption, nothing
#    changes;
#  - Merge with no image at all, and with only incompatible images ->
#    org.sysextd1.Error.NoImages;
#  - Merge while merged -> org.sysextd1.Error.AlreadyMerged, "already merged";
#  - a call for another root (the option root, which the CLI sends with every
#    call that takes options, and the property Root, which it reads before the
#    others) -> org.sysextd1.Error.WrongRoot, and every verb of the CLI refuses
#    with the same line; the root given through a symlink is the daemon's.
# For the last two the CLI, through the daemon, prints the error's message as
# its one line on stderr and exits 1 — the line `--no-bus` ends with.
set -euo pipefail
# shellcheck source=test/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=test/bus/lib-bus.sh
. "$(dirname "$0")/lib-bus.sh"
enter_sandbox "$@"
bus_requirements
require_cmd gdbus
make_root
noidle_config
start_bus "$NOIDLE_CONF"

# expect_error NAME MESSAGE_PART METHOD GVARIANT — gdbus call fails with NAME.
expect_error() {
	gcall "$3" "$4"
	assert_failed "$3 $4"
	assert_eq "$(gdbus_error_name)" "$1" "error name of $3 $4"
	assert_contains "$(gdbus_error_message)" "$2" "error message of $3 $4"
}

# cli_same_error VERB MESSAGE — `sysextd VERB` through the daemon exits 1
# with MESSAGE as its only line on stderr; with --no-bus it exits 1 and
# MESSAGE is its last line (warnings logged on the way, such as why an image
# was skipped, come before it).
cli_same_error() {
	run_cli "$1"
	assert_rc 1 "sysextd $1 (through the daemon)"
	assert_eq "$ERR" "$2" "stderr of sysextd $1 through the daemon"
	run_sysextd "$1"
	assert_rc 1 "sysextd --no-bus $1"
	assert_eq "$(tail -n1 <<<"$ERR")" "$2" "last line on stderr of sysextd --no-bus $1"
}

# cli_same_notice VERB MESSAGE — as cli_same_error, but exiting 0: what
# systemd-sysext does when there is nothing to merge.
cli_same_notice() {
	run_cli "$1"
	assert_rc 0 "sysextd $1 (through the daemon)"
	assert_eq "$ERR" "$2" "stderr of sysextd $1 through the daemon"
	run_sysextd "$1"
	assert_rc 0 "sysextd --no-bus $1"
	assert_eq "$(tail -n1 <<<"$ERR")" "$2" "last line on stderr of sysextd --no-bus $1"
}

# --------------------------------------------------------------- NoImages
check "Merge with no image at all: org.sysextd1.Error.NoImages"
expect_error org.sysextd1.Error.NoImages "" Merge '@a{sv} {}'
msg_none=$(gdbus_error_message)
[[ -n "$msg_none" ]] || fail "NoImages carries no message"
run_bctl call org.sysextd1 /org/sysextd1 org.sysextd1.Manager Merge 'a{sv}' 0
assert_failed "busctl Merge"
assert_eq "$ERR" "Call failed: $msg_none" "busctl's error for Merge without images"
cli_same_notice merge "$msg_none"
assert_eq "$msg_none" "No extensions found." "the message for no image at all"
! is_overlay "$R/usr" || fail "$R/usr became an overlay"

check "Merge with only an incompatible image: org.sysextd1.Error.NoSuitableImages on the bus, the CLI exits 0 with the count"
t=$(EXT_RELEASE='ID=otheros
VERSION_ID=7' ext_tree alien)
ext_file "$t" usr/share/alien/file alien
mk_erofs "$t" "$R/var/lib/extensions/alien.raw"
expect_error org.sysextd1.Error.NoSuitableImages "1 ignored due to incompatible image" Merge '@a{sv} {}'
cli_same_notice merge "$(gdbus_error_message)"
assert_missing "$R/usr/share/alien/file"
! is_overlay "$R/usr" || fail "$R/usr became an overlay"

# ----------------------------------------------------------- InvalidOption
t=$(ext_tree ext1)
ext_file "$t" usr/share/ext1/hello "hello from ext1"
mk_erofs "$t" "$R/var/lib/extensions/ext1.raw"

for method in Merge Refresh Unmerge; do
	check "$method with an unknown option: org.sysextd1.Error.InvalidOption"
	before=$(tree_snapshot)
	expect_error org.sysextd1.Error.InvalidOption "bogus" "$method" '{"bogus": <true>}'
	run_bctl call org.sysextd1 /org/sysextd1 org.sysextd1.Manager "$method" 'a{sv}' 1 bogus b true
	assert_failed "busctl $method bogus"
	assert_contains "$ERR" "bogus" "busctl's error for $method with an unknown option"

	check "$method with a known option of the wrong type (string, int, variant in variant)"
	expect_error org.sysextd1.Error.InvalidOption "force" "$method" '{"force": <"yes">}'
	expect_error org.sysextd1.Error.InvalidOption "noexec" "$method" '{"noexec": <int32 1>}'
	expect_error org.sysextd1.Error.InvalidOption "strict" "$method" '{"strict": <<true>>}'
	run_bctl call org.sysextd1 /org/sysextd1 org.sysextd1.Manager "$method" 'a{sv}' 1 force s yes
	assert_failed "busctl $method force=s"
	assert_contains "$ERR" "force" "busctl's error for $method force=s"

	check "$method: a good option next to a bad one is refused as a whole"
	expect_error org.sysextd1.Error.InvalidOption "bogus" "$method" '{"force": <true>, "bogus": <false>}'

	check "nothing changed after the refused $method calls"
	assert_eq "$(tree_snapshot)" "$before" "tree after refused $method"
	assert_eq "$(generation)" 0 "Generation"
	assert_missing "$R/usr/share/ext1/hello"
done

check "the well-formed options are accepted: Merge {force, noexec, strict: false}"
gcall Merge '{"force": <false>, "noexec": <false>, "strict": <false>}'
assert_ok "Merge with all options"
assert_file_content "$R/usr/share/ext1/hello" "hello from ext1"

# ---------------------------------------------------------- AlreadyMerged
check "Merge while merged: org.sysextd1.Error.AlreadyMerged, 'already merged'"
before=$(tree_snapshot)
expect_error org.sysextd1.Error.AlreadyMerged "already merged" Merge '@a{sv} {}'
msg=$(gdbus_error_message)
run_bctl call org.sysextd1 /org/sysextd1 org.sysextd1.Manager Merge 'a{sv}' 0
assert_failed "busctl Merge twice"
assert_eq "$ERR" "Call failed: $msg" "busctl's error for Merge twice"
cli_same_error merge "$msg"
assert_eq "$(tree_snapshot)" "$before" "tree after Merge twice"
assert_eq "$(generation)" 1 "Generation after Merge twice"

check "InvalidOption is checked before AlreadyMerged"
expect_error org.sysextd1.Error.InvalidOption "bogus" Merge '{"bogus": <true>}'

# -------------------------------------------------------------- WrongRoot
OTHER=$(mktemp -d "$WORK/other-root.XXXXXX")
mkdir -p "$OTHER"/usr "$OTHER"/var/lib/extensions
cp "$R"/var/lib/extensions/ext1.raw "$OTHER"/var/lib/extensions/
served=$(realpath "$R")
wrong_line="The sysextd daemon serves $served, not $OTHER; use --no-bus to work on $OTHER."

# cli_other_root VERB... — sysextd VERB for $OTHER through the daemon exits 1
# with the one line naming both roots; neither tree changes.
cli_other_root() {
	local before gen
	before=$(tree_snapshot) gen=$(generation)
	_capture env DBUS_SYSTEM_BUS_ADDRESS="$BUS_ADDR" "$SYSEXTD" --root="$OTHER" "$@"
	assert_rc 1 "sysextd --root=$OTHER $* (through the daemon)"
	assert_eq "$ERR" "$wrong_line" "stderr of sysextd --root=$OTHER $*"
	assert_eq "$(tree_snapshot)" "$before" "tree after sysextd --root=$OTHER $*"
	assert_eq "$(generation)" "$gen" "Generation after sysextd --root=$OTHER $*"
	! is_overlay "$OTHER/usr" || fail "$OTHER/usr became an overlay after sysextd $*"
}

for verb in merge refresh "refresh --always-refresh=yes" "refresh --force" unmerge rollback "rollback --unpin" list \
	"list --json=short" status "status --namespaces" confirm; do
	check "sysextd $verb for another root than the daemon's: refused, one line, nothing changes"
	# shellcheck disable=SC2086
	cli_other_root $verb
done

for method in Merge Refresh Unmerge; do
	check "$method with the option root naming another root: org.sysextd1.Error.WrongRoot"
	before=$(tree_snapshot) gen=$(generation)
	expect_error org.sysextd1.Error.WrongRoot "$wrong_line" "$method" "{\"root\": <\"$OTHER\">}"
	assert_eq "$(gdbus_error_message)" "$wrong_line" "the message of WrongRoot"
	expect_error org.sysextd1.Error.WrongRoot "not /" "$method" '{"root": <"/">}'
	# Not canonical is another root too: the client resolves it first.
	expect_error org.sysextd1.Error.WrongRoot "not $served/" "$method" "{\"root\": <\"$served/\">}"
	expect_error org.sysextd1.Error.InvalidOption "root" "$method" '{"root": <true>}'
	assert_eq "$(tree_snapshot)" "$before" "tree after $method for another root"
	assert_eq "$(generation)" "$gen" "Generation after $method for another root"
done

check "Rollback and ListImagesEx with the option root naming another root: org.sysextd1.Error.WrongRoot"
gcall Rollback "uint64 0" "{\"root\": <\"$OTHER\">}"
assert_failed "Rollback for another root"
assert_eq "$(gdbus_error_name)" org.sysextd1.Error.WrongRoot "error name of Rollback for another root"
assert_eq "$(gdbus_error_message)" "$wrong_line" "error message of Rollback for another root"
expect_error org.sysextd1.Error.WrongRoot "$wrong_line" ListImagesEx "{\"root\": <\"$OTHER\">}"

check "a root that is no valid string to print is escaped in the message"
expect_error org.sysextd1.Error.WrongRoot 'not /tmp/a\x1bb;' Refresh '{"root": <"/tmp/a\u001bb">}'

check "the option root naming the daemon's root: the call runs"
gcall Refresh "{\"root\": <\"$served\">, \"always-refresh\": <true>}"
assert_ok "Refresh with the daemon's root"
gen=$(generation)
[[ "$gen" -ge 2 ]] || fail "Refresh with the daemon's root did not run (Generation $gen)"
assert_file_content "$R/usr/share/ext1/hello" "hello from ext1"

check "the daemon's root through a symlink is the daemon's: every verb runs"
ln -s "$served" "$WORK/root-link"
for verb in "refresh --always-refresh=yes" list status; do
	# shellcheck disable=SC2086
	_capture env DBUS_SYSTEM_BUS_ADDRESS="$BUS_ADDR" "$SYSEXTD" --root="$WORK/root-link" $verb
	assert_rc 0 "sysextd --root=<link> $verb"
done
assert_eq "$(generation)" $((gen + 1)) "Generation after the refresh through the symlinked root"
_capture env DBUS_SYSTEM_BUS_ADDRESS="$BUS_ADDR" "$SYSEXTD" --root="$WORK/root-link" unmerge
assert_rc 0 "sysextd --root=<link> unmerge"
assert_missing "$R/usr/share/ext1/hello"

check "a root that does not exist: the CLI says so, one line, before any call"
_capture env DBUS_SYSTEM_BUS_ADDRESS="$BUS_ADDR" "$SYSEXTD" --root="$WORK/no-such-root" refresh
assert_rc 1 "sysextd --root=<missing> refresh"
assert_eq "$ERR" "Failed to resolve $WORK/no-such-root: No such file or directory" "stderr for a missing root"

echo "PASS"
