#!/bin/bash
# Kept layers: a run in process (--no-bus) keeps the image mounts of the trees it built in a
# mount namespace of their own, pinned on a small tmpfs of ours at run/sysextd/layers, and the
# next run reuses those of the files it finds again as recorded.  Only raw images of
# compatible extensions, mounted without attributes; nothing of the host's tree in that
# namespace; an image changed in any way, a host os-release that changed, a mount missing
# from the namespace: mounted anew.  It works where run/ has slave copies (as on a systemd
# host).  An unmerge and a recovery drop it all; a mount at that path that is not ours, even
# with a record forged to name it, is never used or detached.
set -euo pipefail
# shellcheck source=test/lib.sh
. "$(dirname "$0")/../lib.sh"
enter_sandbox "$@"
require_cmd mkfs.erofs mksquashfs python3 taskset
require_fs erofs squashfs overlay
make_root

EXT=$R/var/lib/extensions
HOLDER=$R/run/sysextd/layers
PIN=$HOLDER/ns

# Python: unique_id(PATH), the unique id (STATX_MNT_ID_UNIQUE, never reused) of the mount there.
UNIQUE_ID_PY='
import ctypes, os, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
def unique_id(path):
    buf = ctypes.create_string_buffer(256)
    if libc.statx(-100, path.encode(), 0x100 | 0x800, 0x4000, buf) != 0:
        raise OSError(ctypes.get_errno(), "statx " + path)
    return struct.unpack_from("Q", buf.raw, 0x90)[0]
'
unique_id() {
	python3 -c "$UNIQUE_ID_PY"'
print(unique_id(sys.argv[1]))' "$1"
}

# kept — the kept mounts, one line "NAME UNIQUE-MOUNT-ID" each, sorted; exits 1 when the
# namespace cannot be entered or holds anything else than its tmpfs root and those mounts.
kept() {
	python3 -c "$UNIQUE_ID_PY"'
proc = os.open("/proc/self", os.O_RDONLY | os.O_DIRECTORY)
home = os.open("/proc/self/ns/mnt", os.O_RDONLY)
fd = os.open(sys.argv[1], os.O_RDONLY)
if libc.setns(fd, 0x00020000) != 0:
    sys.exit("setns into %s: %s" % (sys.argv[1], os.strerror(ctypes.get_errno())))
with open(os.open("mountinfo", os.O_RDONLY, dir_fd=proc)) as f:
    rows = [l.split() for l in f]
names = sorted(os.listdir("/l"))
ids = {n: unique_id("/l/" + n) for n in names}
libc.setns(home, 0x00020000)
out = []
for r in rows:
    point, fstype = r[4], r[r.index("-") + 1]
    if point == "/":
        if fstype != "tmpfs" or r[r.index("-") + 2] != "sysextd-layers":
            sys.exit("the namespace root is %s %s" % (fstype, r[r.index("-") + 2]))
    elif point.startswith("/l/") and point.count("/") == 2:
        out.append("%s %s" % (point[3:], ids[point[3:]]))
    else:
        sys.exit("the namespace holds a mount at %s (%s)" % (point, fstype))
if sorted(o.split()[0] for o in out) != names:
    sys.exit("entries of l/ without a mount: %s against %s" % (names, out))
print("\n".join(sorted(out)))' "$PIN"
}

# name_of IMAGE — the name its mount is kept under: DEV-INO of its file.
name_of() {
	stat -c '%d-%i' "$1"
}

# read_kept — K: what kept printed, read in this shell (a failure stops the test).
read_kept() {
	K=$(kept) || fail "cannot list the kept mounts"
}

# kept_names, kept_id IMAGE (empty: none), kept_count — from K.
kept_names() {
	awk '{ print $1 }' <<<"$K" | tr '\n' ' '
}

kept_id() {
	awk -v n="$(name_of "$1")" '$1 == n { print $2 }' <<<"$K"
}

kept_count() {
	grep -c . <<<"$K" || true
}

pin_is_ours() {
	[[ $(findmnt -n -o FSTYPE --mountpoint "$HOLDER" 2>/dev/null) == tmpfs &&
		$(findmnt -n -o FSTYPE --mountpoint "$PIN" 2>/dev/null) == nsfs && -s "$R/run/sysextd/layers.id" ]]
}

nothing_kept() {
	[[ -z $(findmnt -n --mountpoint "$HOLDER" 2>/dev/null || true) ]] ||
		fail "${1:-}: kept layers left: $(findmnt -n --mountpoint "$HOLDER")"
	assert_missing "$R/run/sysextd/layers.id"
}

loops_before=$(loop_snapshot)
# The base's usr/lib, reached below the trees to come: where the host's os-release changes.
mkdir "$WORK/base-lib"
mount --bind "$R/usr/lib" "$WORK/base-lib"
on_exit "umount '$WORK/base-lib'"

# Three erofs sysexts, a squashfs one, a directory, a confext (mounted noexec, as systemd-
# confext does), an image of another OS (refused), one for VERSION_ID=1 only.
mk_ext() { # NAME KIND CONTENT [RELEASE]
	local t
	t=$(EXT_RELEASE=${4:-ID=_any} ext_tree "$1")
	ext_file "$t" "usr/share/kept/$1" "$3"
	case $2 in
	erofs) mk_erofs "$t" "$WORK/$1.raw" ;;
	squashfs) mk_squashfs "$t" "$WORK/$1.raw" ;;
	esac
}
for i in 1 2 3; do
	mk_ext "e$i" erofs "e$i v1"
	cp "$WORK/e$i.raw" "$EXT/e$i.raw"
done
mk_ext sq squashfs "sq v1"
cp "$WORK/sq.raw" "$EXT/sq.raw"
mk_ext v1only erofs "v1only" $'ID=sysextdtest\nVERSION_ID=1'
cp "$WORK/v1only.raw" "$EXT/v1only.raw"
mk_ext other erofs "other" $'ID=otheros\nVERSION_ID=1'
cp "$WORK/other.raw" "$EXT/other.raw"
t=$(EXT_RELEASE=ID=_any ext_tree dir)
ext_file "$t" usr/share/kept/dir "dir v1"
mk_dir "$t" "$EXT/dir"
t=$(ext_tree conf "$WORK/conf-tree")
rm -rf "$t/usr"
mkdir -p "$t/etc/extension-release.d"
echo ID=_any >"$t/etc/extension-release.d/extension-release.conf"
ext_file "$t" etc/kept-conf "conf v1"
mkdir -p "$R/var/lib/confexts"
mk_erofs "$t" "$R/var/lib/confexts/conf.raw"

# A service's namespace: a slave copy of the root, as systemd gives every service of /run.
unshare -m --propagation unchanged sleep 600 &
service=$!
on_exit "kill $service 2>/dev/null; wait $service 2>/dev/null"
for ((i = 0; i < 50; i++)); do
	[[ $(readlink /proc/$service/ns/mnt) != "$(readlink /proc/self/ns/mnt)" ]] && break
	sleep 0.1
done
[[ $(readlink /proc/$service/ns/mnt) != "$(readlink /proc/self/ns/mnt)" ]] || fail "the service's namespace did not appear"
nsenter -t "$service" -m mount --make-rslave "$R"
in_service() { # the mounts the service's namespace has at PATH
	awk -v p="$1" '$5 == p { print $5 }' "/proc/$service/mountinfo"
}

check "merge: the mounts of the five raw sysexts are kept, in a namespace of their own (with a slave copy of the root about)"
run_sysextd merge
assert_ok
for f in e1 e2 e3 sq dir; do
	assert_file_content "$R/usr/share/kept/$f" "$f v1"
done
assert_file_content "$R/usr/share/kept/v1only" "v1only"
assert_missing "$R/usr/share/kept/other"
assert_file_content "$R/etc/kept-conf" "conf v1"
pin_is_ours || fail "no holder at $HOLDER with the namespace bound at $PIN and its record: $(findmnt -n -R "$HOLDER" || true)"
expected=$(for f in e1 e2 e3 sq v1only; do name_of "$EXT/$f.raw"; done | sort | tr '\n' ' ')
read_kept
assert_eq "$(kept_names)" "$expected" "kept mounts (not the directory, the confext or the refused image)"
read_kept
before=$K
# The two mounts this adds to the table (the holder and the namespace bound in it), at a
# path of ours; the service's namespace gets a copy of the holder only (the kernel leaves
# nsfs mounts out of copies), and sees the new trees.
assert_eq "$(mountinfo_under "$R/run" | awk '{ print $5 }' | tr '\n' ' ')" "$HOLDER $PIN " "mounts under $R/run"
assert_eq "$(in_service "$HOLDER")" "$HOLDER" "the holder's copy in the service's namespace"
assert_eq "$(in_service "$PIN")" "" "the namespace in the service's namespace"
assert_eq "$(nsenter -t "$service" -m cat "$R/usr/share/kept/e1")" "e1 v1" "the merged tree in the service's namespace"

check "refresh after one image was replaced: the others' kept mounts are reused, the old one goes"
old_e2=$(name_of "$EXT/e2.raw")
mk_ext e2 erofs "e2 v2"
replace_image "$WORK/e2.raw" "$EXT/e2.raw"
run_sysextd refresh
assert_ok
assert_file_content "$R/usr/share/kept/e2" "e2 v2"
assert_file_content "$R/usr/share/kept/e1" "e1 v1"
assert_file_content "$R/usr/share/kept/sq" "sq v1"
read_kept
for f in e1 e3 sq v1only; do
	assert_eq "$(kept_id "$EXT/$f.raw")" "$(awk -v n="$(name_of "$EXT/$f.raw")" '$1 == n { print $2 }' <<<"$before")" \
		"kept mount of $f (the same mount, reused)"
done
read_kept
[[ -n $(kept_id "$EXT/e2.raw") ]] || fail "the new e2 is not kept"
assert_not_contains "$(kept_names)" "$old_e2" "kept mounts after the refresh"
assert_eq "$(kept_count)" 5 "kept mounts"

check "an image written in place (same inode, new times) is mounted anew, its new content merged"
mk_ext e3 erofs "e3 v2"
read_kept
id_e3=$(kept_id "$EXT/e3.raw")
cat "$WORK/e3.raw" >"$EXT/e3.raw"
touch -d '+1 minute' "$EXT/e3.raw"
run_sysextd refresh
assert_ok
assert_file_content "$R/usr/share/kept/e3" "e3 v2"
read_kept
assert_ne "$(kept_id "$EXT/e3.raw")" "$id_e3" "kept mount of e3 after it was written"
assert_eq "$(kept_count)" 5 "kept mounts"

check "a kept mount gone from the namespace: the image is mounted again"
python3 - "$PIN" "$(name_of "$EXT/e1.raw")" <<'PY'
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
home = os.open("/proc/self/ns/mnt", os.O_RDONLY)
libc.setns(os.open(sys.argv[1], os.O_RDONLY), 0x00020000)
if libc.umount2(("/l/" + sys.argv[2]).encode(), 2) != 0:
    sys.exit("umount2: " + os.strerror(ctypes.get_errno()))
os.rmdir("/l/" + sys.argv[2])
libc.setns(home, 0x00020000)
PY
read_kept
[[ -z $(kept_id "$EXT/e1.raw") ]] || fail "e1's kept mount is still there"
run_sysextd refresh --always-refresh=yes
assert_ok
assert_file_content "$R/usr/share/kept/e1" "e1 v1"
read_kept
[[ -n $(kept_id "$EXT/e1.raw") ]] || fail "e1 is not kept again"
assert_eq "$(kept_count)" 5 "kept mounts"

check "the host's os-release changed: a kept image is judged again (v1only no longer fits)"
printf 'ID=sysextdtest\nVERSION_ID=2\n' >"$WORK/base-lib/os-release"
run_sysextd refresh --always-refresh=yes
assert_ok
assert_missing "$R/usr/share/kept/v1only"
assert_file_content "$R/usr/share/kept/e1" "e1 v1"
read_kept
assert_eq "$(kept_count)" 4 "kept mounts"
assert_not_contains "$(kept_names)" "$(name_of "$EXT/v1only.raw")" "kept mounts"
printf 'ID=sysextdtest\nVERSION_ID=1\n' >"$WORK/base-lib/os-release"

check "a failed refresh leaves the kept mounts as they were"
run_sysextd refresh --always-refresh=yes
assert_ok
read_kept
before=$K
mount -t tmpfs foreign "$R/usr"
run_sysextd refresh --always-refresh=yes
umount "$R/usr"
assert_failed "refresh under a foreign mount"
read_kept
assert_eq "$K" "$before" "kept mounts after a failed refresh"

check "a refresh killed before its swap: the replaced image's kept mount went while the new tree was built, the others stay"
run_sysextd refresh
assert_ok
read_kept
before=$K
old_e2=$(name_of "$EXT/e2.raw")
mk_ext e2 erofs "e2 v3"
replace_image "$WORK/e2.raw" "$EXT/e2.raw"
SYSEXTD_TEST_HOOK=before-swap run_sysextd refresh
assert_rc 137 "refresh killed before its swap"
assert_file_content "$R/usr/share/kept/e2" "e2 v2"
read_kept
assert_not_contains "$(kept_names)" "$old_e2" "kept mounts after the kill"
for f in e1 e3 sq; do
	assert_eq "$(kept_id "$EXT/$f.raw")" "$(awk -v n="$(name_of "$EXT/$f.raw")" '$1 == n { print $2 }' <<<"$before")" \
		"kept mount of $f after the kill"
done
# (The refresh that follows recovers the interrupted transition first; it mounts the images
# anew, as it did before the kept mounts of files no longer found went during staging.)
run_sysextd refresh
assert_ok
assert_file_content "$R/usr/share/kept/e2" "e2 v3"
read_kept
assert_not_contains "$(kept_names)" "$old_e2" "kept mounts after the refresh that followed the kill"
[[ -n $(kept_id "$EXT/e2.raw") ]] || fail "the new e2 is not kept"

check "--noexec=yes: the sysexts are mounted with it, so nothing is kept; the next plain refresh keeps them again"
run_sysextd refresh --noexec=yes
assert_ok
nothing_kept "after a noexec refresh"
run_sysextd refresh --always-refresh=yes
assert_ok
read_kept
assert_eq "$(kept_count)" 5 "kept mounts"

check "a refresh killed after its swap: recovery finishes it and drops what the last run kept"
if [[ $("$SYSEXTD" --version) == *"+test-hooks"* ]]; then
	mk_ext e1 erofs "e1 v3"
	replace_image "$WORK/e1.raw" "$EXT/e1.raw"
	SYSEXTD_TEST_HOOK=swap-after-beneath run_sysextd refresh
	assert_rc 137 "refresh killed at swap-after-beneath"
	run_sysextd status
	assert_ok
	assert_file_content "$R/usr/share/kept/e1" "e1 v3"
	nothing_kept "after recovery"
	# Nothing kept holds the replaced e1 (or any other image): only the live trees' loop devices.
	assert_eq "$(loop_count)" "$(($(grep -c . <<<"$loops_before" || true) + 6))" "loop devices (the six merged raw images)"
	mk_ext e1 erofs "e1 v1"
	replace_image "$WORK/e1.raw" "$EXT/e1.raw"
	run_sysextd refresh
	assert_ok
	assert_file_content "$R/usr/share/kept/e1" "e1 v1"
	read_kept
	assert_eq "$(kept_count)" 5 "kept mounts"
fi

check "kept from another generation's trees (a record that says so): dropped and made anew"
read_kept
before=$K
holder_before=$(unique_id "$HOLDER")
read -r h ns g <"$R/run/sysextd/layers.id"
echo "$h $ns $((g - 1))" >"$R/run/sysextd/layers.id"
run_sysextd refresh --always-refresh=yes
assert_ok
pin_is_ours || fail "nothing kept after the refresh"
assert_ne "$(unique_id "$HOLDER")" "$holder_before" "the holder (made anew)"
read_kept
assert_eq "$(kept_count)" 5 "kept mounts"
for f in e1 e2 e3 sq; do
	assert_ne "$(kept_id "$EXT/$f.raw")" "$(awk -v n="$(name_of "$EXT/$f.raw")" '$1 == n { print $2 }' <<<"$before")" \
		"kept mount of $f (mounted anew, not reused from another generation)"
done

check "the namespace unmounted from the holder by hand: the holder goes at the next run, which keeps anew"
holder_before=$(unique_id "$HOLDER")
umount "$PIN"
run_sysextd refresh --always-refresh=yes
assert_ok
pin_is_ours || fail "nothing kept after the refresh"
assert_ne "$(unique_id "$HOLDER")" "$holder_before" "the holder (made anew)"
assert_eq "$(mountinfo_under "$HOLDER" | wc -l)" 2 "mounts at $HOLDER (the new holder and its namespace only)"

check "unmerge drops them: no mount, no record, no loop device left"
run_sysextd unmerge
assert_ok
nothing_kept "after unmerge"
assert_missing "$HOLDER"
assert_eq "$(in_service "$HOLDER")" "" "the holder's copy in the service's namespace after unmerge"
assert_loops_as_before "$loops_before"

check "a mount at run/sysextd/layers that is not ours: not used, not covered, not detached"
# Someone else's tmpfs there, with a mount namespace bound in it.  (Linux binds only a
# namespace with a higher id than the binder's, and 6.18 takes ids from per-CPU batches: a
# namespace made on each CPU in turn until one can be bound.)
mkdir -p "$HOLDER"
mount -t tmpfs -o mode=0700 foreign "$HOLDER"
mount --make-private "$HOLDER"
touch "$PIN"
holder=
for ((attempt = 0; attempt < 8; attempt++)); do
	taskset -c "$(python3 -c 'import os, sys; c = sorted(os.sched_getaffinity(0)); print(c[int(sys.argv[1]) % len(c)])' "$attempt")" \
		unshare -m sleep 600 &
	holder=$!
	for ((i = 0; i < 50; i++)); do
		[[ $(readlink /proc/$holder/ns/mnt) != "$(readlink /proc/self/ns/mnt)" ]] && break
		sleep 0.1
	done
	mount --bind "/proc/$holder/ns/mnt" "$PIN" 2>/dev/null && break
	kill "$holder"
	wait "$holder" 2>/dev/null || true
	holder=
done
[[ -n "$holder" ]] || fail "could not bind a mount namespace at $PIN"
on_exit "kill $holder 2>/dev/null; wait $holder 2>/dev/null"
foreign=$(mountinfo_under "$HOLDER")
run_sysextd merge
assert_ok
assert_file_content "$R/usr/share/kept/e1" "e1 v1"
assert_eq "$(mountinfo_under "$HOLDER")" "$foreign" "mounts at $HOLDER (nothing stacked on the foreign ones, nothing detached)"
assert_missing "$R/run/sysextd/layers.id"

check "...with a record forged to name it (its real unique mount id, namespace and generation): still not used or detached"
generation=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["generation"])' "$R/run/sysextd/state.json")
echo "$(unique_id "$HOLDER") $(stat -L -c %i "/proc/$holder/ns/mnt") $generation" >"$R/run/sysextd/layers.id"
mk_ext e2 erofs "e2 v3"
replace_image "$WORK/e2.raw" "$EXT/e2.raw"
run_sysextd refresh
assert_ok
assert_file_content "$R/usr/share/kept/e2" "e2 v3"
assert_eq "$(mountinfo_under "$HOLDER")" "$foreign" "mounts at $HOLDER after a refresh with the forged record"
echo "$(unique_id "$HOLDER") $(stat -L -c %i "/proc/$holder/ns/mnt") $generation" >"$R/run/sysextd/layers.id"
run_sysextd unmerge
assert_ok
assert_eq "$(mountinfo_under "$HOLDER")" "$foreign" "the foreign mounts at $HOLDER after unmerge"
umount "$PIN"
umount "$HOLDER"
kill "$holder"
assert_loops_as_before "$loops_before"

echo PASS
