#!/bin/bash
# Every method and property of org.sysextd1.Manager, through the CLI (as a
# client of the daemon, no --no-bus) and through busctl, on a private system
# bus: Merge, Refresh (with and without force), Unmerge, ListImages,
# GetStatus, Root, Generation, Merged, Hierarchies, Extensions,
# KernelFeatures, Mode. The CLI prints what `--no-bus` prints for status and
# list; every transition that changes the tree emits TreeChanged (with the new
# generation and the merged extensions) and PropertiesChanged, and raises
# Generation by one; one that changes nothing emits neither.
set -euo pipefail
# shellcheck source=test/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=test/bus/lib-bus.sh
. "$(dirname "$0")/lib-bus.sh"
enter_sandbox "$@"
bus_requirements
make_root
bus_setup_images
start_bus "$NOIDLE_CONF"

# Timestamps ("Thu 2026-12-03 08:28:11 UTC") may legitimately differ between
# two runs of `status`; nothing else may.
normalize_text() {
	sed -E 's/[A-Z][a-z]{2} [0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2} [A-Z0-9+-]+/TIMESTAMP/g; s/ +/ /g' <<<"$1"
}

# JSON documents compared as data (key order aside), without timestamps.
normalize_json() {
	python3 -c '
import json, sys
def strip(o):
    if isinstance(o, dict):
        return {k: strip(v) for k, v in o.items() if k not in ("since", "since_usec")}
    if isinstance(o, list):
        return [strip(v) for v in o]
    return o
print(json.dumps(strip(json.loads(sys.argv[1])), sort_keys=True, indent=1))
' "$1" || fail "not JSON: $1"
}

# Differences between the CLI through the daemon and --no-bus are collected
# and reported together at the end, after the other checks have run.
PARITY_FAILS=()
parity_fail() {
	echo "PARITY: $1" >&2
	PARITY_FAILS+=("$1")
}

# same_as_no_bus VERB — `sysextd VERB` through the daemon prints what
# `sysextd --no-bus VERB` prints, as text and as --json.
same_as_no_bus() {
	local bus_out local_out
	run_cli "$1"
	assert_ok "sysextd $1 (through the daemon)"
	bus_out=$OUT
	run_sysextd "$1"
	assert_ok "sysextd --no-bus $1"
	local_out=$OUT
	[[ "$(normalize_text "$bus_out")" == "$(normalize_text "$local_out")" ]] ||
		parity_fail "sysextd $1 through the daemon differs from --no-bus:
--- through the daemon:
$bus_out
--- --no-bus:
$local_out"

	run_cli --json "$1"
	assert_ok "sysextd --json $1 (through the daemon)"
	bus_out=$OUT
	run_sysextd --json "$1"
	assert_ok "sysextd --no-bus --json $1"
	local_out=$OUT
	[[ "$(normalize_json "$bus_out")" == "$(normalize_json "$local_out")" ]] ||
		parity_fail "sysextd --json $1 through the daemon differs from --no-bus:
--- through the daemon:
$bus_out
--- --no-bus:
$local_out"
}

# busctl_json ARGS... — busctl --json=short ARGS, the reply's "data" as JSON.
busctl_json() {
	run_bctl --json=short "$@"
	assert_ok "busctl $*"
	json_q "$OUT" 'd["data"]'
}

call_json() {
	busctl_json call org.sysextd1 /org/sysextd1 org.sysextd1.Manager "$@"
}

prop_json() {
	busctl_json get-property org.sysextd1 /org/sysextd1 org.sysextd1.Manager "$1"
}

# expect_props GENERATION MERGED HIERARCHIES EXTENSIONS — the properties that
# change, as JSON.
expect_props() {
	assert_eq "$(prop_json Generation)" "$1" "Generation"
	assert_eq "$(prop_json Merged)" "$2" "Merged"
	assert_eq "$(prop_json Hierarchies)" "$3" "Hierarchies"
	assert_eq "$(prop_json Extensions)" "$4" "Extensions"
}

# status_matches_props — GetStatus and the properties tell the same story.
status_matches_props() {
	local st
	st=$(call_json GetStatus)
	assert_eq "$(json_q "$st" 'd[1]')" "$(prop_json Generation)" "GetStatus generation vs Generation"
	assert_eq "$(json_q "$st" 'd[0]')" "$(prop_json Mode)" "GetStatus mode vs Mode"
	assert_eq "$(json_q "$st" '[h[0] for h in d[2] if h[1]]')" "$(prop_json Hierarchies)" \
		"GetStatus merged hierarchies vs Hierarchies"
	assert_eq "$(json_q "$st" 'any(h[1] for h in d[2])')" "$(prop_json Merged)" "GetStatus vs Merged"
}

check "nothing owns org.sysextd1 before the first call"
assert_eq "$(daemon_pid)" "" "daemon PID before any call"

check "list through the daemon (activated by this call) = list --no-bus"
same_as_no_bus list
[[ -n "$(daemon_pid)" ]] || fail "the daemon is not on the bus after the first call"

check "status before merge: the same through the daemon and --no-bus"
same_as_no_bus status

check "constant properties: Root, KernelFeatures, Mode"
assert_eq "$(prop_json Root)" "$(realpath "$R")" "Root"
kf=$(prop_json KernelFeatures)
[[ $(json_q "$kf" 'isinstance(d, list) and all(isinstance(x, str) for x in d)') == true ]] ||
	fail "KernelFeatures is not a list of strings: $kf"
mode=$(prop_json Mode)
[[ "$mode" == beneath || "$mode" == degraded || "$mode" == unsupported ]] || fail "bad Mode '$mode'"
if [[ "$mode" == beneath ]]; then
	assert_eq "$(json_q "$kf" '"mount-beneath" in d')" true "KernelFeatures has mount-beneath in beneath mode"
fi
expect_props 0 false '[]' '[]'
status_matches_props

check "GetAll returns every documented property"
run_bctl --json=short call org.sysextd1 /org/sysextd1 org.freedesktop.DBus.Properties GetAll s org.sysextd1.Manager
assert_ok GetAll
assert_eq "$(json_q "$OUT" 'sorted(d["data"][0].keys())')" \
	'["Extensions", "Generation", "Hierarchies", "ImageBackings", "ImagePolicy", "KernelFeatures", "Merged", "Mode", "OwnershipProof", "Root", "Stacks", "UnitJobs"]' "GetAll keys"

check "ListImages through busctl: both images, typed fields"
imgs=$(call_json ListImages)
assert_eq "$(json_q "$imgs" '[[i[0], i[1], i[3], i[4]] for i in d[0]]')" \
	'[["ext1", "erofs", "compatible", ""], ["ext2", "erofs", "compatible", ""]]' "ListImages"
assert_eq "$(json_q "$imgs" 'd[0][0][2]')" "$(realpath "$R")/var/lib/extensions/ext1.raw" "ListImages path"

start_monitor
loops0=$(loop_count)

# ------------------------------------------------------------------ Merge (CLI)
check "merge through the CLI: generation 1, the files are there"
run_cli --json merge
assert_ok "sysextd merge"
assert_eq "$(json_q "$OUT" 'd')" '{"generation": 1, "changed": true}' "merge --json reply"
assert_file_content "$R/usr/share/ext1/hello" "hello from ext1"
assert_file_content "$R/opt/app/ext2" "ext2 in opt"
expect_props 1 true '["/usr", "/opt"]' '["ext1", "ext2"]'
# On the throw-away root's tmpfs the kernel cannot mount erofs from a file: loop devices.
assert_eq "$(prop_json ImageBackings)" '[["ext1", "loop"], ["ext2", "loop"]]' "ImageBackings after merge"
run_cli status
assert_ok "sysextd status"
assert_contains "$OUT" "Images: 0 mounted from their files, 2 through loop devices" "status through the daemon says how images are mounted"
status_matches_props
wait_signal TreeChanged 1
assert_eq "$(monitor_signals TreeChanged | tail -n1)" '[1,["ext1","ext2"]]' "TreeChanged after merge"
wait_signal PropertiesChanged 1
pc=$(monitor_signals PropertiesChanged | tail -n1)
assert_eq "$(json_q "$pc" 'd[0]')" org.sysextd1.Manager "PropertiesChanged interface"
assert_eq "$(json_q "$pc" '{k: v["data"] for k, v in d[1].items()}')" \
	'{"Generation": 1, "Merged": true, "Hierarchies": ["/usr", "/opt"], "Extensions": ["ext1", "ext2"]}' \
	"PropertiesChanged after merge"

check "status and list after merge: the same through the daemon and --no-bus"
same_as_no_bus status
same_as_no_bus list

# ------------------------------------------------------------ Refresh (CLI)
check "refresh through the CLI with nothing changed: no change, no signal"
n_tc=$(monitor_signals TreeChanged | wc -l)
run_cli --json refresh
assert_ok "sysextd refresh"
assert_eq "$(json_q "$OUT" 'd')" '{"generation": 1, "changed": false}' "refresh --json reply"
assert_eq "$(generation)" 1 "Generation after a refresh that changed nothing"

check "refresh --always-refresh=yes through the CLI: generation 2, TreeChanged(2)"
run_cli --json refresh --always-refresh=yes
assert_ok "sysextd refresh --always-refresh=yes"
assert_eq "$(json_q "$OUT" 'd')" '{"generation": 2, "changed": true}' "refresh --always-refresh=yes --json reply"
wait_signal TreeChanged $((n_tc + 1))
assert_eq "$(monitor_signals TreeChanged | tail -n1)" '[2,["ext1","ext2"]]' "TreeChanged after refresh --always-refresh=yes"
assert_eq "$(monitor_signals TreeChanged | wc -l)" $((n_tc + 1)) "TreeChanged count (none for the no-op refresh)"
expect_props 2 true '["/usr", "/opt"]' '["ext1", "ext2"]'
assert_file_content "$R/usr/share/ext1/hello" "hello from ext1"

# --------------------------------------------------------- Refresh (busctl)
check "Refresh through busctl with force=true: generation 3, messages typed (us)"
r=$(call_json Refresh 'a{sv}' 1 always-refresh b true)
assert_eq "$(json_q "$r" 'd[:2]')" '[3, true]' "Refresh reply (generation, changed)"
[[ $(json_q "$r" 'all(isinstance(l, int) and l in (3, 4, 6) and isinstance(t, str) and t for l, t in d[2])') == true ]] ||
	fail "Refresh messages are not (level, text) pairs: $r"
wait_signal TreeChanged $((n_tc + 2))
assert_eq "$(monitor_signals TreeChanged | tail -n1)" '[3,["ext1","ext2"]]' "TreeChanged after Refresh(force)"
expect_props 3 true '["/usr", "/opt"]' '["ext1", "ext2"]'

check "Refresh through busctl after ext1 changed (no force): the new content, generation 4"
t=$(ext_tree ext1 "$WORK/src/ext1-v2")
ext_file "$t" usr/share/ext1/hello "hello from ext1, v2"
mk_erofs "$t" "$WORK/ext1-v2.raw"
replace_image "$WORK/ext1-v2.raw" "$R/var/lib/extensions/ext1.raw"
r=$(call_json Refresh 'a{sv}' 0)
assert_eq "$(json_q "$r" 'd[:2]')" '[4, true]' "Refresh reply"
assert_file_content "$R/usr/share/ext1/hello" "hello from ext1, v2"
wait_signal TreeChanged $((n_tc + 3))
assert_eq "$(monitor_signals TreeChanged | tail -n1)" '[4,["ext1","ext2"]]' "TreeChanged after Refresh"

check "Refresh through busctl with force=false and nothing changed: changed=false"
r=$(call_json Refresh 'a{sv}' 1 always-refresh b false)
assert_eq "$(json_q "$r" 'd[:2]')" '[4, false]' "Refresh reply"

check "GetStatus through busctl: mode, generation, per hierarchy path/merged/extensions/since/foreign"
st=$(call_json GetStatus)
assert_eq "$(json_q "$st" 'd[0]')" "$mode" "GetStatus mode"
assert_eq "$(json_q "$st" 'd[1]')" 4 "GetStatus generation"
assert_eq "$(json_q "$st" '[[h[0], h[1], h[2], h[4]] for h in d[2]]')" \
	'[["/usr", true, ["ext1", "ext2"], false], ["/opt", true, ["ext2"], false], ["/etc", false, [], false]]' "GetStatus hierarchies"
[[ $(json_q "$st" 'all(h[3] > 1500000000 * 10**6 for h in d[2] if h[1])') == true ]] ||
	fail "GetStatus 'since' is not microseconds since the epoch: $st"
assert_eq "$(json_q "$st" 'd[3]')" '[]' "GetStatus skipped"
status_matches_props
same_as_no_bus status

# ------------------------------------------------------------ Unmerge (busctl)
check "Unmerge through busctl: generation 5, the base is back, TreeChanged(5, [])"
r=$(call_json Unmerge 'a{sv}' 0)
assert_eq "$(json_q "$r" 'd[:2]')" '[5, true]' "Unmerge reply"
assert_missing "$R/usr/share/ext1/hello"
assert_file_content "$R/usr/share/base/file" base
! is_overlay "$R/usr" || fail "$R/usr is still an overlay after Unmerge"
expect_props 5 false '[]' '[]'
wait_signal TreeChanged $((n_tc + 4))
assert_eq "$(monitor_signals TreeChanged | tail -n1)" '[5,[]]' "TreeChanged after Unmerge"
status_matches_props

check "after Unmerge through the daemon no loop device of ours is left"
wait_loop_count "$loops0"

# -------------------------------------------------------------- Merge (busctl)
check "Merge through busctl: generation 6"
r=$(call_json Merge 'a{sv}' 0)
assert_eq "$(json_q "$r" 'd[:2]')" '[6, true]' "Merge reply"
assert_file_content "$R/usr/share/ext1/hello" "hello from ext1, v2"
expect_props 6 true '["/usr", "/opt"]' '["ext1", "ext2"]'
wait_signal TreeChanged $((n_tc + 5))
assert_eq "$(monitor_signals TreeChanged | tail -n1)" '[6,["ext1","ext2"]]' "TreeChanged after Merge"

# ------------------------------------------------------------- Unmerge (CLI)
check "unmerge through the CLI: generation 7"
run_cli --json unmerge
assert_ok "sysextd unmerge"
assert_eq "$(json_q "$OUT" 'd')" '{"generation": 7, "changed": true}' "unmerge --json reply"
assert_missing "$R/usr/share/ext1/hello"
expect_props 7 false '[]' '[]'
wait_signal TreeChanged $((n_tc + 6))
assert_eq "$(monitor_signals TreeChanged | tail -n1)" '[7,[]]' "TreeChanged after unmerge"
same_as_no_bus status

check "every TreeChanged carried the next generation, in order"
assert_eq "$(monitor_signals TreeChanged | python3 -c 'import json,sys; print([json.loads(l)[0] for l in sys.stdin])')" \
	"[1, 2, 3, 4, 5, 6, 7]" "TreeChanged generations"

check "the CLI without --no-bus refuses a --root the daemon does not serve"
other=$(mktemp -d "$WORK/other.XXXXXX")
_capture env DBUS_SYSTEM_BUS_ADDRESS="$BUS_ADDR" "$SYSEXTD" --root="$other" status
assert_failed "status --root=OTHER through the daemon"
assert_contains "$ERR" "$(realpath "$R")" "error for a wrong --root"

check "the CLI printed the same through the daemon as with --no-bus (status, list; text and --json)"
if ((${#PARITY_FAILS[@]} > 0)); then
	fail "$(printf '%s\n\n' "${PARITY_FAILS[@]}")"
fi

echo "PASS"
