#!/bin/bash
# Verity identity for refresh (issue 16 §5; systemd-sysext 260's rule: the root hash first,
# then the file): a merged verity image (NAME.raw with NAME.verity and NAME.roothash) copied
# with its sidecars to new inodes is the same image, so refresh says "unchanged" and keeps the
# live tree (same mount id); an image of other content (another root hash) is rebuilt; and
# replacing only NAME.roothash with another valid root hash (the image's bytes the same) is no
# "unchanged" either: the refresh probes the image again, which no longer verifies, and keeps
# the live tree. The journal records each merged image's root hash.
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

# build VERSION — $WORK/VERSION/app.raw (usr/share/app/f says VERSION) with its verity
# sidecars; echoes the root hash.
build() {
	local t
	t=$(ext_tree app "$WORK/src-$1")
	ext_file "$t" usr/share/app/f "$1"
	mkdir -p "$WORK/$1"
	mk_erofs "$t" "$WORK/$1/app.raw"
	verity_format "$WORK/$1/app.raw"
}

# put_version VERSION — put copies of VERSION's image and sidecars in place as new files (new
# inodes, new mtimes), each renamed over the one there.
put_version() {
	local f
	for f in app.raw app.verity app.roothash; do
		replace_image "$WORK/$1/$f" "$ext/$f"
	done
}

# journal_roothash — the root hash the journal records for app.
journal_roothash() {
	json_q "$(cat "$R/run/sysextd/state.json")" '[i.get("roothash") for i in d["images"] if i["name"] == "app"][0]'
}

rh1=$(build v1)
rh2=$(build v2)
assert_ne "$rh2" "$rh1" "root hash of v2"
loops_before=$(loop_snapshot)

check "a verity image merges; the journal records its root hash"
put_version v1
run_sysextd merge
assert_ok merge
assert_file_content "$R/usr/share/app/f" v1
mode=$(list_field app verity)
[[ "$mode" == userspace || "$mode" == dm ]] || fail "list --json verity for app: $mode"
assert_eq "$(journal_roothash)" "$rh1" "root hash in the journal"
id=$(top_mount_id "$R/usr")

check "a copy of the image and its sidecars (new inodes, same root hash): refresh says unchanged"
ino=$(stat -c %i "$ext/app.raw")
put_version v1
assert_ne "$(stat -c %i "$ext/app.raw")" "$ino" "inode of app.raw after the copy"
run_sysextd refresh
assert_ok "refresh after the copy"
assert_contains "$ERR" "unchanged" "stderr of refresh after the copy"
assert_eq "$(top_mount_id "$R/usr")" "$id" "mount id of the live /usr after the copy"
assert_file_content "$R/usr/share/app/f" v1
# Twice: the journal still has the first file, and the hash still decides.
put_version v1
run_sysextd refresh
assert_ok "refresh after a second copy"
assert_contains "$ERR" "unchanged" "stderr of refresh after a second copy"
assert_eq "$(top_mount_id "$R/usr")" "$id" "mount id of the live /usr after a second copy"

check "another image (other content, another root hash): refresh rebuilds"
put_version v2
run_sysextd refresh
assert_ok "refresh with v2"
assert_not_contains "$ERR" "unchanged" "stderr of refresh with v2"
assert_ne "$(top_mount_id "$R/usr")" "$id" "mount id of the live /usr after v2"
assert_file_content "$R/usr/share/app/f" v2
assert_eq "$(journal_roothash)" "$rh2" "root hash in the journal after v2"
id=$(top_mount_id "$R/usr")

check "only NAME.roothash replaced by another valid root hash: no 'unchanged'; the image is refused, the live tree stays"
ino=$(stat -c %i "$ext/app.raw")
printf %s "$rh1" >"$WORK/other.roothash"
replace_image "$WORK/other.roothash" "$ext/app.roothash"
assert_eq "$(stat -c %i "$ext/app.raw")" "$ino" "inode of app.raw (untouched)"
run_sysextd refresh
assert_failed "refresh with a replaced NAME.roothash"
assert_not_contains "$ERR" "unchanged" "stderr of refresh with a replaced NAME.roothash"
assert_contains "$ERR" "$ext/app.raw" "stderr of refresh with a replaced NAME.roothash"
assert_eq "$(top_mount_id "$R/usr")" "$id" "mount id of the live /usr after the refused refresh"
assert_file_content "$R/usr/share/app/f" v2
assert_eq "$(journal_roothash)" "$rh2" "root hash in the journal after the refused refresh"

check "the right NAME.roothash back (a new file beside the same image file): verified again, merged"
# The same image file whose sidecars changed is verified again (a hash tree tampered with in
# place must be noticed); only another file with the same root hash is taken as unchanged.
replace_image "$WORK/v2/app.roothash" "$ext/app.roothash"
run_sysextd refresh
assert_ok "refresh with NAME.roothash restored"
assert_not_contains "$ERR" "unchanged" "stderr of refresh with NAME.roothash restored"
assert_file_content "$R/usr/share/app/f" v2
check "and a copy of it all again: unchanged"
id=$(top_mount_id "$R/usr")
put_version v2
run_sysextd refresh
assert_ok "refresh of the copy"
assert_contains "$ERR" "unchanged" "stderr of refresh of the copy"
assert_eq "$(top_mount_id "$R/usr")" "$id" "mount id of the live /usr after the copy"

check "unmerge leaves no loop device behind"
run_sysextd unmerge
assert_ok unmerge
assert_missing "$R/usr/share/app"
assert_loops_as_before "$loops_before"

echo "PASS"
