#!/bin/bash
# Every file system sysextd takes as an image, merged together, refreshed and unmerged:
# erofs, squashfs, ext4, ext2, btrfs (as Flatcar's sysext bakery builds them) and xfs.
# list names each kind; unmerge leaves no loop device.
set -euo pipefail
# shellcheck source=test/lib.sh
. "$(dirname "$0")/../lib.sh"
enter_sandbox "$@"
require_cmd mkfs.erofs mksquashfs mkfs.ext4 mkfs.ext2 mkfs.btrfs mkfs.xfs python3
require_fs erofs squashfs ext4 btrfs xfs overlay
make_root

KINDS="erofs squashfs ext4 ext2 btrfs xfs"
loops_before=$(loop_snapshot)
build() {
	local k=$1 v=$2 t
	t=$(ext_tree "k$k" "$WORK/src/$k-$v")
	ext_file "$t" "usr/share/kinds/$k" "$v"
	mk_image "$k" "$t" "k$k" >/dev/null
}
for k in $KINDS; do build "$k" v1; done

check "list: every image compatible, each with its kind"
run_sysextd --json list
assert_ok list
assert_eq "$(json_q "$OUT" 'sorted((i["name"], i["kind"], i["status"]) for i in d)')" \
	'[["kbtrfs", "btrfs", "compatible"], ["kerofs", "erofs", "compatible"], ["kext2", "ext4", "compatible"], ["kext4", "ext4", "compatible"], ["ksquashfs", "squashfs", "compatible"], ["kxfs", "xfs", "compatible"]]' \
	"kinds in list"

check "merge: the file of every kind"
run_sysextd merge
assert_ok merge
for k in $KINDS; do assert_file_content "$R/usr/share/kinds/$k" v1; done

check "refresh to v2 of every kind"
for k in $KINDS; do build "$k" v2; done
run_sysextd refresh
assert_ok refresh
for k in $KINDS; do assert_file_content "$R/usr/share/kinds/$k" v2; done

check "unmerge: the base, no loop device left"
run_sysextd unmerge
assert_ok unmerge
assert_missing "$R/usr/share/kinds"
assert_loops_as_before "$loops_before"
