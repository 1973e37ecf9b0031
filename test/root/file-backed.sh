#!/bin/bash
# erofs images without a loop device (file-backed erofs, Linux 6.12+): an erofs image on a
# file system that serves page-cache reads (ext4 here) is mounted from its file; what the
# kernel cannot mount that way (a file on tmpfs, squashfs, an image with verity data) still
# goes through a loop device.  status says which; a refresh has no window; a corrupt image is
# skipped by name; nothing is left behind.
set -euo pipefail
# shellcheck source=test/lib.sh
. "$(dirname "$0")/../lib.sh"
enter_sandbox "$@"
require_cmd mkfs.erofs mksquashfs mkfs.ext4 veritysetup python3 cc
require_fs erofs squashfs ext4 overlay
make_root

# /var/lib/extensions on ext4 (the root itself is tmpfs, where the kernel refuses).
truncate -s 64M "$WORK/ext4.img"
mkfs.ext4 -q -F "$WORK/ext4.img"
mount -o loop "$WORK/ext4.img" "$R/var/lib/extensions"
EXT4_LOOP=$(findmnt -n -o SOURCE --mountpoint "$R/var/lib/extensions")
rmdir "$R/var/lib/extensions/lost+found"

# The kernel must have file-backed erofs for this test to mean anything: ask it directly.
mkdir -p "$WORK/probe-tree/usr/lib/extension-release.d"
echo ID=_any >"$WORK/probe-tree/usr/lib/extension-release.d/extension-release.probe"
mk_erofs "$WORK/probe-tree" "$R/var/lib/extensions/.probe.raw"
# (mount(8) would set up a loop device by itself: the new mount API, as sysextd does.)
cat >"$WORK/probe.c" <<'C'
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <sys/mount.h>
int main(int argc, char **argv) {
	char src[64];
	int fd = open(argv[1], O_RDONLY | O_CLOEXEC), fs = fsopen("erofs", FSOPEN_CLOEXEC);
	snprintf(src, sizeof src, "/proc/self/fd/%d", fd);
	return fd < 0 || fs < 0 || fsconfig(fs, FSCONFIG_SET_STRING, "source", src, 0) < 0 ||
	       fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0 || fsmount(fs, FSMOUNT_CLOEXEC, 0) < 0;
}
C
cc -O2 -o "$WORK/probe" "$WORK/probe.c" || fail "cannot compile the probe"
"$WORK/probe" "$R/var/lib/extensions/.probe.raw" ||
	skip "this kernel cannot mount erofs from a file on ext4 (Linux 6.12+ with CONFIG_EROFS_FS_BACKED_BY_FILE)"
rm "$R/var/lib/extensions/.probe.raw"

# Loop devices of images only: not the one under the ext4 file system.
image_loops() { losetup -a | grep -v -F "$WORK/ext4.img" | grep -c -F -e "$R/" -e "$WORK/" || true; }
loops_before=$(loop_snapshot)

build() { # NAME VERSION [KIND]
	local t
	t=$(ext_tree "$1" "$WORK/src/$1-$2")
	ext_file "$t" "usr/share/fb/$1" "$2"
	mk_image "${3:-erofs}" "$t" "$1" >/dev/null
}
for i in 1 2 3 4 5 6; do build "fb$i" v1; done

check "merge: six erofs images on ext4, no loop device"
run_sysextd merge
assert_ok merge
for i in 1 2 3 4 5 6; do assert_file_content "$R/usr/share/fb/fb$i" v1; done
assert_eq "$(image_loops)" 0 "loop devices of images after merging six erofs images from ext4"
run_sysextd status
assert_ok status
assert_contains "$OUT" "Images: 6 mounted from their files, 0 through loop devices" "status says how the images are mounted"
assert_eq "$(json_q "$(cat "$R/run/sysextd/state.json")" 'sorted(set(i.get("backing") for i in d["images"] if i["status"] == "compatible"))')" '["file"]' \
	"the journal records every image as file-backed"

check "refresh: one image replaced, a reader never sees the base"
stop=$WORK/stop-reader
(
	n=0 gone=0
	while [[ ! -e $stop ]]; do
		if [[ ! -e $R/usr/share/fb/fb3 ]]; then gone=$((gone + 1)); fi
		n=$((n + 1))
	done
	echo "$n $gone" >"$WORK/reader.out"
) &
reader=$!
for v in v2 v3 v4 v5 v6; do
	build fb3 "$v"
	run_sysextd refresh
	assert_ok "refresh to $v"
	assert_file_content "$R/usr/share/fb/fb3" "$v"
done
touch "$stop"
wait "$reader"
read -r reads gone <"$WORK/reader.out"
log "reader: $reads reads, $gone without the file"
[[ $reads -gt 0 ]] || fail "the reader read nothing"
assert_eq "$gone" 0 "reads that found the file gone during five refreshes"
assert_eq "$(image_loops)" 0 "loop devices of images after five refreshes"

check "a deleted image stays readable while merged (the mount holds its file)"
rm "$R/var/lib/extensions/fb6.raw"
assert_file_content "$R/usr/share/fb/fb6" v1
run_sysextd refresh
assert_ok "refresh without fb6"
assert_missing "$R/usr/share/fb/fb6"

check "mixed: squashfs, and erofs with verity data, go through loop devices"
build sq1 v1 squashfs
build vr1 v1 erofs
verity_out=$(veritysetup format "$R/var/lib/extensions/vr1.raw" "$R/var/lib/extensions/vr1.verity") ||
	fail "veritysetup format failed"
awk '/^Root hash:/ { printf "%s", $3 }' <<<"$verity_out" >"$R/var/lib/extensions/vr1.roothash"
run_sysextd refresh
assert_ok "refresh with squashfs and verity"
assert_file_content "$R/usr/share/fb/sq1" v1
assert_file_content "$R/usr/share/fb/vr1" v1
assert_file_content "$R/usr/share/fb/fb1" v1
run_sysextd status
assert_contains "$OUT" "Images: 5 mounted from their files, 2 through loop devices" "status counts both kinds"
assert_eq "$(image_loops)" 2 "loop devices: one for squashfs, one under dm-verity"
rm "$R/var/lib/extensions/sq1.raw" "$R/var/lib/extensions/vr1".*

check "an erofs image on tmpfs: the kernel cannot, a loop device does"
mkdir -p "$R/run/extensions"
t=$(ext_tree tmp1 "$WORK/src/tmp1")
ext_file "$t" usr/share/fb/tmp1 v1
mk_erofs "$t" "$R/run/extensions/tmp1.raw"
run_sysextd refresh
assert_ok "refresh with an image on tmpfs"
assert_file_content "$R/usr/share/fb/tmp1" v1
run_sysextd status
assert_contains "$OUT" "Images: 5 mounted from their files, 1 through loop devices" "the tmpfs image needs a loop device"
assert_eq "$(image_loops)" 1 "loop devices: the tmpfs image's"
rm "$R/run/extensions/tmp1.raw"

check "a corrupt erofs image on ext4 is skipped by name, the others stay merged"
t=$(ext_tree bad1 "$WORK/src/bad1")
ext_file "$t" usr/share/fb/bad1 v1
mk_erofs "$t" "$R/var/lib/extensions/bad1.raw"
# One byte of the superblock (checksummed): blkid still says erofs, the kernel refuses.
python3 - "$R/var/lib/extensions/bad1.raw" <<'PY'
import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(1024 + 0x30)
    b = f.read(1)
    f.seek(1024 + 0x30)
    f.write(bytes([b[0] ^ 0xff]))
PY
run_sysextd refresh
assert_ok "refresh with a corrupt image"
assert_contains "$ERR" "Skipping $R/var/lib/extensions/bad1.raw: cannot mount erofs file system" "the image is skipped by name, with why"
assert_missing "$R/usr/share/fb/bad1"
for i in 1 2 4 5; do assert_file_content "$R/usr/share/fb/fb$i" v1; done
assert_file_content "$R/usr/share/fb/fb3" v6
run_sysextd status
assert_contains "$OUT" "Skipped bad1" "status lists the skipped image"
rm "$R/var/lib/extensions/bad1.raw"

check "unmerge: the base, no erofs mount and no loop device of an image left"
run_sysextd unmerge
assert_ok unmerge
assert_missing "$R/usr/share/fb"
assert_eq "$(awk '$9 == "erofs"' /proc/self/mountinfo | wc -l)" 0 "erofs mounts in this namespace"
assert_loops_as_before "$loops_before"
umount "$R/var/lib/extensions"
log "ext4 under the images was on $EXT4_LOOP"
