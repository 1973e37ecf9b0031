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
require_cmd mkfs.erofs mksquashfs mkfs.ext4 veritysetup python3 cc taskset
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

# corrupt_superblock FILE — one byte of an erofs image's superblock (checksummed) flipped:
# blkid still says erofs, the kernel refuses to mount it.
corrupt_superblock() {
	python3 - "$1" <<'PY'
import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(1024 + 0x30)
    b = f.read(1)
    f.seek(1024 + 0x30)
    f.write(bytes([b[0] ^ 0xff]))
PY
}
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
corrupt_superblock "$R/var/lib/extensions/bad1.raw"
run_sysextd refresh
assert_ok "refresh with a corrupt image"
assert_contains "$ERR" "Skipping $R/var/lib/extensions/bad1.raw: cannot mount erofs file system" "the image is skipped by name, with why"
assert_missing "$R/usr/share/fb/bad1"
for i in 1 2 4 5; do assert_file_content "$R/usr/share/fb/fb$i" v1; done
assert_file_content "$R/usr/share/fb/fb3" v6
run_sysextd status
assert_contains "$OUT" "Skipped bad1" "status lists the skipped image"
rm "$R/var/lib/extensions/bad1.raw"

check "many images at once: the same verdicts on one CPU as on all, each refused image by name"
# 38 images: the mounts of the plain erofs ones are made on several threads (with two CPUs
# or more); what cannot be mounted from its file (tmpfs, squashfs, verity) gets its loop
# device afterwards, one at a time.  Every kind of verdict is among them.
run_sysextd unmerge
assert_ok "unmerge before the many images"
rm -f "$R/var/lib/extensions"/*.raw
for i in $(seq 1 24); do build "mn$i" v1; done
t=$(EXT_RELEASE="ID=otheros" ext_tree mnos "$WORK/src/mnos")
mk_erofs "$t" "$R/var/lib/extensions/mnos.raw"                # incompatible: another OS
# ARCHITECTURE= is matched against uname(2)'s machine on every thread.
case $(uname -m) in
x86_64) native=x86-64 ;;
aarch64) native=arm64 ;;
*) native=$(uname -m) ;;
esac
t=$(EXT_RELEASE="ID=sysextdtest
VERSION_ID=1
ARCHITECTURE=$native" ext_tree mnarch "$WORK/src/mnarch")
ext_file "$t" usr/share/fb/mnarch v1
mk_erofs "$t" "$R/var/lib/extensions/mnarch.raw"             # this machine's architecture
t=$(EXT_RELEASE="ID=sysextdtest
VERSION_ID=1
ARCHITECTURE=alpha" ext_tree mnalpha "$WORK/src/mnalpha")
mk_erofs "$t" "$R/var/lib/extensions/mnalpha.raw"            # incompatible: another architecture
t=$(ext_tree mnnorel "$WORK/src/mnnorel")
rm "$t/usr/lib/extension-release.d/extension-release.mnnorel"
ext_file "$t" usr/share/fb/mnnorel v1
mk_erofs "$t" "$R/var/lib/extensions/mnnorel.raw"            # incompatible: no release file
t=$(ext_tree mnosrel "$WORK/src/mnosrel")
ext_file "$t" usr/lib/os-release "ID=sysextdtest"
mk_erofs "$t" "$R/var/lib/extensions/mnosrel.raw"            # refused: ships os-release
t=$(ext_tree mnmark "$WORK/src/mnmark")
ext_file "$t" usr/.sysextd/x v1
mk_erofs "$t" "$R/var/lib/extensions/mnmark.raw"             # refused: the marker
t=$(ext_tree mnfifo "$WORK/src/mnfifo")
rm "$t/usr/lib/extension-release.d/extension-release.mnfifo"
mkfifo "$t/usr/lib/extension-release.d/extension-release.mnfifo"
mk_erofs "$t" "$R/var/lib/extensions/mnfifo.raw"             # refused: the release file is a FIFO
t=$(ext_tree mnunit "$WORK/src/mnunit")
ext_file "$t" usr/lib/systemd/system/mnunit.service "[Service]
ExecStart=/bin/true"
mk_erofs "$t" "$R/var/lib/extensions/mnunit.raw"             # ships a unit
t=$(ext_tree mnopt "$WORK/src/mnopt")
ext_file "$t" opt/mnopt/file v1
mk_erofs "$t" "$R/var/lib/extensions/mnopt.raw"              # /opt only
t=$(ext_tree mnbad "$WORK/src/mnbad")
ext_file "$t" usr/share/fb/mnbad v1
mk_erofs "$t" "$R/var/lib/extensions/mnbad.raw"              # refused: a corrupt superblock
corrupt_superblock "$R/var/lib/extensions/mnbad.raw"
build mnsq v1 squashfs                                         # a loop device
for i in 1 2 3; do                                              # tmpfs: a loop device each
	t=$(ext_tree "mntmp$i" "$WORK/src/mntmp$i")
	ext_file "$t" "usr/share/fb/mntmp$i" v1
	mk_erofs "$t" "$R/run/extensions/mntmp$i.raw"
done
# Every image as the journal records it (verdict, reason, kind, backing, hierarchies, units),
# without the loop devices' numbers.
journal_images() {
	json_q "$(cat "$R/run/sysextd/state.json")" \
		'[{k: v for k, v in i.items() if k not in ("loop_devnum", "loop_diskseq")} for i in d["images"]]'
}
threads_log=$WORK/probe-threads
# One of the CPUs this test may run on (not always CPU 0), and how many there are (nproc would
# heed OMP_NUM_THREADS).
cpu_one=$(python3 -c 'import os; print(min(os.sched_getaffinity(0)))')
cpus=$(python3 -c 'import os; print(len(os.sched_getaffinity(0)))')
printf '#!/bin/bash\nexec taskset -c %s %q "$@"\n' "$cpu_one" "$SYSEXTD" >"$WORK/one-cpu"
chmod +x "$WORK/one-cpu"
SYSEXTD=$WORK/one-cpu SYSEXTD_TEST_HOOK=probe-threads SYSEXTD_TEST_HOOK_EXEC="echo \$SYSEXTD_TEST_HOOK_ARG >>$threads_log" \
	run_sysextd merge
assert_ok "merge of 38 images on one CPU"
one_cpu=$(journal_images)
one_cpu_err=$ERR
run_sysextd unmerge
assert_ok "unmerge after the merge on one CPU"
SYSEXTD_TEST_HOOK=probe-threads SYSEXTD_TEST_HOOK_EXEC="echo \$SYSEXTD_TEST_HOOK_ARG >>$threads_log" \
	run_sysextd merge
assert_ok "merge of 38 images on every CPU"
# The number of threads is told through a test hook, in builds that have them.
if [[ $("$SYSEXTD" --version) == *"+test-hooks"* ]]; then
	want_threads=$(( (cpus > 4 ? 4 : cpus) - 1 ))
	assert_eq "$(cat "$threads_log")" "0
$want_threads" "threads besides the caller's: on one CPU, then on $cpus"
fi
assert_eq "$(journal_images)" "$one_cpu" "every image as the journal records it, on one CPU and on all"
assert_eq "$ERR" "$one_cpu_err" "what the merge said, on one CPU and on all"
assert_eq "$(json_q "$(cat "$R/run/sysextd/state.json")" 'len([i for i in d["images"] if i["status"] == "compatible"])')" 31 \
	"compatible images: 24, the unit, /opt, the architecture's, the squashfs and three on tmpfs"
for n in mnos mnnorel mnalpha; do
	assert_eq "$(json_q "$(cat "$R/run/sysextd/state.json")" "[i['status'] for i in d['images'] if i['name'] == '$n']")" '["incompatible"]' "$n is incompatible"
done
for n in mnosrel mnmark mnfifo mnbad; do
	assert_eq "$(json_q "$(cat "$R/run/sysextd/state.json")" "[i['status'] for i in d['images'] if i['name'] == '$n']")" '["refused"]' "$n is refused"
done
for i in $(seq 1 24); do assert_file_content "$R/usr/share/fb/mn$i" v1; done
assert_file_content "$R/usr/share/fb/mnsq" v1
for i in 1 2 3; do assert_file_content "$R/usr/share/fb/mntmp$i" v1; done
assert_file_content "$R/opt/mnopt/file" v1
assert_file_content "$R/usr/share/fb/mnarch" v1
assert_contains "$ERR" "Skipping $R/var/lib/extensions/mnalpha.raw: not compatible with this system: ARCHITECTURE=alpha does not match this machine ($native)" \
	"the image of another architecture is skipped, naming this machine's"
[[ -f "$R/usr/lib/systemd/system/mnunit.service" ]] || fail "the unit mnunit ships is not merged"
for n in mnnorel mnbad; do assert_missing "$R/usr/share/fb/$n"; done
assert_contains "$ERR" "Skipping $R/var/lib/extensions/mnbad.raw: cannot mount erofs file system" "the corrupt image is skipped by name"
assert_contains "$ERR" "Skipping $R/var/lib/extensions/mnfifo.raw:" "the image whose release file is a FIFO is skipped by name"
run_sysextd status
assert_contains "$OUT" "Images: 27 mounted from their files, 4 through loop devices" "status: the squashfs and the tmpfs images need loop devices"
assert_eq "$(image_loops)" 4 "loop devices: the squashfs image's and the three tmpfs images'"

check "SIGTERM while the images are mounted, or before their loop devices: nothing changed"
# Test hooks: probe-mounts just before the mounts are made on the threads, probe-threads after
# them, before the loop devices.  SIGTERM waits (the transition blocks it) and stops the rest.
if [[ $("$SYSEXTD" --version) == *"+test-hooks"* ]]; then
	# Without the mounts the merge kept (sysextd(8), KEPT LAYERS), which the refresh would
	# reuse instead of mounting the images again: taken away as an administrator would.
	umount -R "$R/run/sysextd/layers"
	state_before=$(cat "$R/run/sysextd/state.json")
	mounts_before=$(wc -l </proc/self/mountinfo)
	for point in probe-mounts probe-threads; do
		SYSEXTD_TEST_HOOK=$point SYSEXTD_TEST_HOOK_EXEC='kill -TERM $PPID' run_sysextd refresh --always-refresh=yes
		[[ $RC -ne 0 ]] || fail "a refresh sent SIGTERM at $point succeeded"
		assert_contains "$ERR" "Interrupted; nothing was changed." "SIGTERM at $point: said so"
		# It stopped there, not at the next check after the probe: no image was judged.
		assert_not_contains "$ERR" "Skipping" "SIGTERM at $point: the probe stopped"
		assert_eq "$(cat "$R/run/sysextd/state.json")" "$state_before" "SIGTERM at $point: state.json as it was"
		assert_eq "$(wc -l </proc/self/mountinfo)" "$mounts_before" "SIGTERM at $point: the mount table as it was"
		assert_file_content "$R/usr/share/fb/mn24" v1
		assert_file_content "$R/usr/share/fb/mntmp3" v1
		# (The squashfs image's loop device of the interrupted refresh goes on its own.)
		_assert_back_to image_loops 4
	done
fi
rm -f "$R/run/extensions"/mntmp*.raw

check "unmerge: the base, no erofs mount and no loop device of an image left"
run_sysextd unmerge
assert_ok unmerge
assert_missing "$R/usr/share/fb"
assert_eq "$(awk '$9 == "erofs"' /proc/self/mountinfo | wc -l)" 0 "erofs mounts in this namespace"
assert_loops_as_before "$loops_before"
umount "$R/var/lib/extensions"
log "ext4 under the images was on $EXT4_LOOP"
