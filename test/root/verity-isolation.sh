#!/bin/bash
# Failure isolation covers verification: one tampered verity image among good ones is
# skipped with a warning naming it and the rest merge; with --strict the merge fails and
# $R/usr is untouched; and when a merged extension is replaced by a tampered update, refresh
# fails and keeps the current tree (same mounts, same files, same loop devices).
set -euo pipefail
# shellcheck source=test/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=test/lib-verity.sh
. "$(dirname "$0")/../lib-verity.sh"
enter_sandbox "$@"
require_verity_tools
require_cmd mksquashfs
require_fs erofs squashfs overlay
make_root

ext=$R/var/lib/extensions
set_policy verity

# good NAME KIND CONTENT — a verity-protected image NAME of KIND with usr/share/NAME/f.
good() {
	local t
	t=$(ext_tree "$1" "$WORK/src-$1-$3")
	ext_file "$t" "usr/share/$1/f" "$3"
	marker_file "$t" "usr/share/$1/blob" "MARKER-$1-$3-"
	mk_image "$2" "$t" "$1" >/dev/null
	verity_format "$ext/$1.raw" >/dev/null
}

# tamper NAME MARKER — flip a byte inside the data of usr/share/NAME/blob.
tamper() {
	local off
	off=$(offset_of "$ext/$1.raw" "$2") || fail "marker $2 not found in $1.raw"
	flip_byte "$ext/$1.raw" $((off + 2000))
}

good g1 erofs one
good g2 squashfs two
good g3 erofs three
good bad erofs bad
tamper bad MARKER-bad-bad-
before=$(live_state)
loops_before=$(loop_snapshot)

check "merge skips the tampered image with a warning and merges the rest"
run_sysextd merge
assert_ok merge
assert_refused bad "$ext/bad.raw" verity
assert_file_content "$R/usr/share/g1/f" one
assert_file_content "$R/usr/share/g2/f" two
assert_file_content "$R/usr/share/g3/f" three
cmp -s "$R/usr/share/g2/blob" "$WORK/src-g2-two/usr/share/g2/blob" || fail "g2's blob differs from its source"
assert_missing "$R/usr/share/bad"
run_sysextd status
assert_contains "$(grep -E '^Skipped bad ' <<<"$OUT")" "verity" "status Skipped line"
wait_loop_count 3

run_sysextd unmerge
assert_ok unmerge
assert_live_unchanged "$before" "live tree after unmerge"
assert_loops_as_before "$loops_before"

check "merge --strict fails and leaves \$R/usr untouched"
run_sysextd --strict merge
assert_failed "merge --strict"
assert_contains "$ERR" "$ext/bad.raw" "stderr of merge --strict"
assert_live_unchanged "$before" "live tree after merge --strict"
assert_missing "$R/usr/share/g1"
assert_loops_as_before "$loops_before"

check "refresh after a merged extension was replaced by a tampered update: fails, keeps the tree"
rm "$ext"/bad.*
run_sysextd merge
assert_ok merge
assert_file_content "$R/usr/share/g2/f" two
merged=$(live_state)
loops_merged=$(loop_ids)
# The update: a new g2 with its own verity data, then one byte of it flipped; the image is
# renamed into place the way an update tool does it, the sidecars too.
t=$(ext_tree g2 "$WORK/src-g2-new")
ext_file "$t" usr/share/g2/f "two, updated"
marker_file "$t" usr/share/g2/blob MARKER-g2-new-
mk_squashfs "$t" "$WORK/g2.raw"
verity_format "$WORK/g2.raw" >/dev/null
off=$(offset_of "$WORK/g2.raw" MARKER-g2-new-) || fail "marker not found in the new g2"
flip_byte "$WORK/g2.raw" $((off + 2000))
replace_image "$WORK/g2.verity" "$ext/g2.verity"
replace_image "$WORK/g2.roothash" "$ext/g2.roothash"
replace_image "$WORK/g2.raw" "$ext/g2.raw"

run_sysextd refresh
assert_failed "refresh with a tampered g2"
assert_contains "$ERR" "$ext/g2.raw" "stderr of refresh"
assert_contains "${ERR,,}" "verity" "stderr of refresh"
assert_live_unchanged "$merged" "live tree after the failed refresh"
assert_file_content "$R/usr/share/g2/f" two
assert_loop_ids_as_before "$loops_merged"

check "refresh --strict: the same"
run_sysextd --strict refresh
assert_failed "refresh --strict with a tampered g2"
assert_contains "$ERR" "$ext/g2.raw" "stderr of refresh --strict"
assert_live_unchanged "$merged" "live tree after the failed refresh --strict"
assert_loop_ids_as_before "$loops_merged"

check "with a good update in place, refresh picks it up"
rm -rf "$WORK/g2".* "$WORK/src-g2-new"
t=$(ext_tree g2 "$WORK/src-g2-new")
ext_file "$t" usr/share/g2/f "two, updated"
mk_squashfs "$t" "$WORK/g2.raw"
verity_format "$WORK/g2.raw" >/dev/null
replace_image "$WORK/g2.verity" "$ext/g2.verity"
replace_image "$WORK/g2.roothash" "$ext/g2.roothash"
replace_image "$WORK/g2.raw" "$ext/g2.raw"
run_sysextd refresh
assert_ok refresh
assert_file_content "$R/usr/share/g2/f" "two, updated"
assert_file_content "$R/usr/share/g1/f" one
assert_file_content "$R/usr/share/g3/f" three

run_sysextd unmerge
assert_ok unmerge
assert_live_unchanged "$before" "live tree after unmerge"
assert_loops_as_before "$loops_before"

echo "PASS"
