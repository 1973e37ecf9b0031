#!/bin/bash
# Verity sidecars (NAME.verity + NAME.roothash, no signature) under ImagePolicy=verity:
# a valid image merges with verity=userspace (or dm); a tampered data block, a tampered
# hash tree, a wrong root hash and a .roothash without its .verity are each refused with a
# reason, as are an image without verity data and a directory. Each refusal leaves the live
# tree as it was: --strict refresh changes nothing at all (same mounts, same files), a plain
# refresh skips the image with a warning naming it and keeps the same content.
set -euo pipefail
# shellcheck source=test/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=test/lib-verity.sh
. "$(dirname "$0")/../lib-verity.sh"
enter_sandbox "$@"
require_verity_tools
require_fs erofs overlay
make_root

ext=$R/var/lib/extensions
set_policy verity

t=$(ext_tree good)
ext_file "$t" usr/share/good/f good
mk_image erofs "$t" good >/dev/null
good_rh=$(verity_format "$ext/good.raw")
loops_before=$(loop_snapshot)

check "a valid verity image merges under ImagePolicy=verity"
run_sysextd merge
assert_ok merge
assert_file_content "$R/usr/share/good/f" good
mode=$(list_field good verity)
[[ "$mode" == userspace || "$mode" == dm ]] || fail "list --json verity for good: $mode"
if [[ ! -e /dev/mapper/control ]]; then
	assert_eq "$mode" userspace "verity mode without device-mapper"
fi
assert_eq "$(list_field good signed)" false "list --json signed for good"
run_sysextd list
assert_contains "$(grep -E '^good[[:space:]]' <<<"$OUT")" "compatible verity=$mode" "list row for good"
run_sysextd status
assert_ok status
assert_contains "$OUT" "Image good ($ext/good.raw): verity=$mode" "status"
run_sysextd --json status
assert_ok "status --json"
assert_eq "$(json_q "$OUT" '[i["verity"] for i in d["images"] if i["name"] == "good"]')" "[\"$mode\"]" "status --json verity"

check "tampered data block: refused, reason mentions verity"
t=$(bad_tree tdata)
mk_image erofs "$t" tdata >/dev/null
verity_format "$ext/tdata.raw" >/dev/null
off=$(offset_of "$ext/tdata.raw" "MARKER-tdata-") || fail "marker not found in tdata.raw"
flip_byte "$ext/tdata.raw" $((off + 1000))
# The tamper is real, inside the file's data: without verity the image still mounts, and
# the file reads back different from what was put in.
mkdir -p "$WORK/mnt"
mount -t erofs -o ro,loop "$ext/tdata.raw" "$WORK/mnt" || fail "tampered tdata.raw does not mount without verity"
assert_file_content "$WORK/mnt/usr/share/tdata/f" tdata
if cmp -s "$WORK/mnt/usr/share/tdata/blob" "$t/usr/share/tdata/blob"; then
	fail "the flipped byte did not change usr/share/tdata/blob"
fi
umount "$WORK/mnt"
try_refused tdata verity

check "tampered hash tree: refused"
t=$(bad_tree thash)
mk_image erofs "$t" thash >/dev/null
verity_format "$ext/thash.raw" >/dev/null
# Beyond the 4 KiB superblock: the first hash block.
flip_byte "$ext/thash.verity" 4100
try_refused thash verity

check "wrong root hash (another image's valid root hash): refused"
t=$(bad_tree wrongrh)
mk_image erofs "$t" wrongrh >/dev/null
verity_format "$ext/wrongrh.raw" >/dev/null
printf %s "$good_rh" >"$ext/wrongrh.roothash"
try_refused wrongrh "root hash"

check ".roothash without .verity: refused, the reason names the missing file"
t=$(bad_tree nohtree)
mk_image erofs "$t" nohtree >/dev/null
verity_format "$ext/nohtree.raw" >/dev/null
rm "$ext/nohtree.verity"
try_refused nohtree nohtree.verity missing

check "ImagePolicy=verity refuses an image without verity data"
t=$(bad_tree plain)
mk_image erofs "$t" plain >/dev/null
try_refused plain "ImagePolicy=verity" verity

check "ImagePolicy=verity refuses a directory"
t=$(bad_tree dir)
mk_image directory "$t" dir >/dev/null
try_refused dir "directories"

check "unmerge leaves no loop device behind"
run_sysextd unmerge
assert_ok unmerge
assert_missing "$R/usr/share/good"
assert_loops_as_before "$loops_before"

echo "PASS"
