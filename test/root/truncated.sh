#!/bin/bash
# A truncated erofs image beside good ones: merge skips it with a warning and
# merges the rest; list and status say why. With --strict the whole merge
# fails and nothing is merged or left behind.
set -euo pipefail
# shellcheck source=test/lib.sh
. "$(dirname "$0")/../lib.sh"
enter_sandbox "$@"
require_cmd mkfs.erofs mksquashfs
require_fs erofs squashfs overlay
make_root

ext=$R/var/lib/extensions
t=$(ext_tree good1); ext_file "$t" usr/share/good1/f good1; mk_image erofs "$t" good1 >/dev/null
t=$(ext_tree good2); ext_file "$t" usr/share/good2/f good2; mk_image squashfs "$t" good2 >/dev/null
t=$(ext_tree broken)
ext_file "$t" usr/share/broken/f broken
head -c 200000 /dev/urandom >"$t/usr/share/broken/blob"
# Enough inodes ahead of the release file (usr/lib/aaa sorts before
# usr/lib/extension-release.d) that its metadata lies beyond the first 4 KiB.
mkdir -p "$t/usr/lib/aaa"
for i in $(seq 1 300); do echo "$i" >"$t/usr/lib/aaa/file-$i"; done
mk_image erofs "$t" broken >/dev/null
# Keep the superblock (at 1024): the image still looks like erofs and even
# mounts, but the release file and all data are gone. A careful reader sees
# that the superblock's block count exceeds the file's size.
truncate -s 4096 "$ext/broken.raw"
log "broken.raw: $(file -b "$ext/broken.raw")"
loops_before=$(loop_snapshot)

check "merge succeeds, warns about broken.raw, merges the good images"
run_sysextd merge
assert_ok merge
assert_contains "$ERR" "broken.raw" "merge stderr"
assert_file_content "$R/usr/share/good1/f" good1
assert_file_content "$R/usr/share/good2/f" good2
assert_missing "$R/usr/share/broken"

check "list says broken is not usable, and why"
run_sysextd list
assert_ok list
row=$(grep -E '^broken[[:space:]]' <<<"$OUT" || true)
[[ -n "$row" ]] || fail "list does not show broken:
$OUT"
if [[ "$row" != *"refused: "?* && "$row" != *"incompatible: "?* ]]; then
	fail "list row for broken gives no reason: $row"
fi
run_sysextd --json list
assert_ok "list --json"
assert_eq "$(json_q "$OUT" '[e["compatible"] for e in d if e["name"] == "broken"]')" '[false]' "broken compatible"
[[ -n "$(json_q "$OUT" '[e["reason"] for e in d if e["name"] == "broken"][0] or ""')" ]] ||
	fail "list --json gives no reason for broken"

check "status mentions broken and why"
run_sysextd status
assert_ok status
assert_contains "$OUT" "broken" "status output"
row=$(grep -E '^Skipped broken ' <<<"$OUT" || true)
assert_contains "$row" "broken.raw" "status Skipped line"
[[ "$row" == *": "?* ]] || fail "status Skipped line gives no reason: $row"
run_sysextd --json status
assert_ok "status --json"
assert_eq "$(json_q "$OUT" '[s["name"] for s in d["skipped"]]')" '["broken"]' "skipped"
[[ -n "$(json_q "$OUT" 'd["skipped"][0]["reason"] or ""')" ]] || fail "status --json gives no reason for broken"

run_sysextd unmerge
assert_ok unmerge
assert_loops_as_before "$loops_before"

check "merge --strict fails and merges nothing"
run_sysextd --strict merge
assert_failed "merge --strict"
assert_contains "$ERR" "broken.raw" "merge --strict stderr"
if mounts_at "$R/usr" | grep -q overlay; then
	fail "$R/usr has an overlay mount after a failed strict merge: $(mounts_at "$R/usr")"
fi
! is_overlay "$R/usr" || fail "$R/usr is an overlay after a failed strict merge"
assert_missing "$R/usr/share/good1"
assert_missing "$R/usr/share/good2"
assert_file_content "$R/usr/share/base/file" base
assert_loops_as_before "$loops_before"

echo "PASS"
