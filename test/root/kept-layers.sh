#!/bin/bash
# Kept layers: a run in process (--no-bus) keeps the image mounts of the trees it built in a
# mount namespace of their own, pinned at run/sysextd/layers, and the next run reuses those
# of the files it finds again as recorded.  Only raw images of compatible extensions,
# mounted without attributes; nothing of the host's tree in that namespace; an image changed
# in any way, a host os-release that changed, a mount missing from the namespace: mounted
# anew.  An unmerge drops it all; a mount at that path that is not ours is never used or
# detached.
set -euo pipefail
# shellcheck source=test/lib.sh
. "$(dirname "$0")/../lib.sh"
enter_sandbox "$@"
require_cmd mkfs.erofs mksquashfs python3 taskset
require_fs erofs squashfs overlay
make_root

EXT=$R/var/lib/extensions
PIN=$R/run/sysextd/layers

# kept — the kept mounts, one line "NAME MOUNT-ID" each, sorted; and, on stderr's side, fails
# when the namespace holds anything else than its tmpfs root and those mounts.
kept() {
	python3 - "$PIN" <<'PY'
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
proc = os.open("/proc/self", os.O_RDONLY | os.O_DIRECTORY)
home = os.open("/proc/self/ns/mnt", os.O_RDONLY)
fd = os.open(sys.argv[1], os.O_RDONLY)
if libc.setns(fd, 0x00020000) != 0:
    sys.exit("setns into %s: %s" % (sys.argv[1], os.strerror(ctypes.get_errno())))
with open(os.open("mountinfo", os.O_RDONLY, dir_fd=proc)) as f:
    rows = [l.split() for l in f]
names = sorted(os.listdir("/l"))
libc.setns(home, 0x00020000)
out = []
for r in rows:
    point, fstype = r[4], r[r.index("-") + 1]
    if point == "/":
        if fstype != "tmpfs" or r[r.index("-") + 2] != "sysextd-layers":
            sys.exit("the namespace's root is %s %s" % (fstype, r[r.index("-") + 2]))
    elif point.startswith("/l/") and point.count("/") == 2:
        out.append("%s %s" % (point[3:], r[0]))
    else:
        sys.exit("the namespace holds a mount at %s (%s)" % (point, fstype))
if sorted(o.split()[0] for o in out) != names:
    sys.exit("entries of l/ without a mount: %s against %s" % (names, out))
print("\n".join(sorted(out)))
PY
}

# name_of IMAGE — the name its mount is kept under: DEV-INO of its file.
name_of() {
	stat -c '%d-%i' "$1"
}

# kept_names — the names only.
kept_names() {
	kept | awk '{ print $1 }' | tr '\n' ' '
}

# kept_id IMAGE — the mount id of its kept mount (empty: none).
kept_id() {
	kept | awk -v n="$(name_of "$1")" '$1 == n { print $2 }'
}

pin_is_ours() {
	[[ $(findmnt -n -o FSTYPE --mountpoint "$PIN" 2>/dev/null) == nsfs && -s "$R/run/sysextd/layers.id" ]]
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

check "merge: the mounts of the five raw sysexts are kept, in a namespace of their own"
run_sysextd merge
assert_ok
for f in e1 e2 e3 sq dir; do
	assert_file_content "$R/usr/share/kept/$f" "$f v1"
done
assert_file_content "$R/usr/share/kept/v1only" "v1only"
assert_missing "$R/usr/share/kept/other"
assert_file_content "$R/etc/kept-conf" "conf v1"
pin_is_ours || fail "no nsfs mount at $PIN with its record: $(findmnt -n --mountpoint "$PIN" || true)"
expected=$(for f in e1 e2 e3 sq v1only; do name_of "$EXT/$f.raw"; done | sort | tr '\n' ' ')
assert_eq "$(kept_names)" "$expected" "kept mounts (not the directory, the confext or the refused image)"
before=$(kept)
# The one mount this adds to the table, at a path of ours.
assert_eq "$(mountinfo_under "$R/run" | wc -l)" 1 "mounts under $R/run"

check "refresh after one image was replaced: the others' kept mounts are reused, the old one goes"
old_e2=$(name_of "$EXT/e2.raw")
mk_ext e2 erofs "e2 v2"
replace_image "$WORK/e2.raw" "$EXT/e2.raw"
run_sysextd refresh
assert_ok
assert_file_content "$R/usr/share/kept/e2" "e2 v2"
assert_file_content "$R/usr/share/kept/e1" "e1 v1"
assert_file_content "$R/usr/share/kept/sq" "sq v1"
for f in e1 e3 sq v1only; do
	assert_eq "$(kept_id "$EXT/$f.raw")" "$(awk -v n="$(name_of "$EXT/$f.raw")" '$1 == n { print $2 }' <<<"$before")" \
		"kept mount of $f (the same mount, reused)"
done
[[ -n $(kept_id "$EXT/e2.raw") ]] || fail "the new e2 is not kept"
assert_not_contains "$(kept_names)" "$old_e2" "kept mounts after the refresh"
assert_eq "$(kept | wc -l)" 5 "kept mounts"

check "an image written in place (same inode, new times) is mounted anew, its new content merged"
mk_ext e3 erofs "e3 v2"
id_e3=$(kept_id "$EXT/e3.raw")
cat "$WORK/e3.raw" >"$EXT/e3.raw"
touch -d '+1 minute' "$EXT/e3.raw"
run_sysextd refresh
assert_ok
assert_file_content "$R/usr/share/kept/e3" "e3 v2"
assert_ne "$(kept_id "$EXT/e3.raw")" "$id_e3" "kept mount of e3 after it was written"
assert_eq "$(kept | wc -l)" 5 "kept mounts"

check "a kept mount gone from the namespace: the image is mounted again"
python3 - "$PIN" "$(name_of "$EXT/e1.raw")" <<'PY'
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
home = os.open("/proc/self/ns/mnt", os.O_RDONLY)
libc.setns(os.open(sys.argv[1], os.O_RDONLY), 0x00020000)
if libc.umount2(("/l/" + sys.argv[2]).encode(), 2) != 0:
    sys.exit("umount2: " + os.strerror(ctypes.get_errno()))
libc.setns(home, 0x00020000)
PY
[[ -z $(kept_id "$EXT/e1.raw") ]] || fail "e1's kept mount is still there"
run_sysextd refresh --always-refresh=yes
assert_ok
assert_file_content "$R/usr/share/kept/e1" "e1 v1"
[[ -n $(kept_id "$EXT/e1.raw") ]] || fail "e1 is not kept again"
assert_eq "$(kept | wc -l)" 5 "kept mounts"

check "the host's os-release changed: a kept image is judged again (v1only no longer fits)"
printf 'ID=sysextdtest\nVERSION_ID=2\n' >"$WORK/base-lib/os-release"
run_sysextd refresh --always-refresh=yes
assert_ok
assert_missing "$R/usr/share/kept/v1only"
assert_file_content "$R/usr/share/kept/e1" "e1 v1"
assert_eq "$(kept | wc -l)" 4 "kept mounts"
assert_not_contains "$(kept_names)" "$(name_of "$EXT/v1only.raw")" "kept mounts"
printf 'ID=sysextdtest\nVERSION_ID=1\n' >"$WORK/base-lib/os-release"

check "a failed refresh leaves the kept mounts as they were"
run_sysextd refresh --always-refresh=yes
assert_ok
before=$(kept)
mount -t tmpfs foreign "$R/usr"
run_sysextd refresh --always-refresh=yes
umount "$R/usr"
assert_failed "refresh under a foreign mount"
assert_eq "$(kept)" "$before" "kept mounts after a failed refresh"

check "--noexec=yes: the sysexts are mounted with it, so nothing is kept; the next plain refresh keeps them again"
run_sysextd refresh --noexec=yes
assert_ok
[[ -z $(findmnt -n --mountpoint "$PIN" || true) ]] || fail "kept layers left after a noexec refresh"
assert_missing "$R/run/sysextd/layers.id"
run_sysextd refresh --always-refresh=yes
assert_ok
assert_eq "$(kept | wc -l)" 5 "kept mounts"

check "a refresh killed after its swap: recovery finishes it and drops what the last run kept"
if [[ $("$SYSEXTD" --version) == *"+test-hooks"* ]]; then
	mk_ext e1 erofs "e1 v3"
	replace_image "$WORK/e1.raw" "$EXT/e1.raw"
	SYSEXTD_TEST_HOOK=swap-after-beneath run_sysextd refresh
	assert_rc 137 "refresh killed at swap-after-beneath"
	run_sysextd status
	assert_ok
	assert_file_content "$R/usr/share/kept/e1" "e1 v3"
	[[ -z $(findmnt -n --mountpoint "$PIN" || true) ]] || fail "kept layers left after recovery"
	assert_missing "$R/run/sysextd/layers.id"
	# Nothing kept holds the replaced e1 (or any other image): only the live trees' loop devices.
	assert_eq "$(loop_count)" "$(($(grep -c . <<<"$loops_before" || true) + 6))" "loop devices (the six merged raw images)"
	mk_ext e1 erofs "e1 v1"
	replace_image "$WORK/e1.raw" "$EXT/e1.raw"
	run_sysextd refresh
	assert_ok
	assert_file_content "$R/usr/share/kept/e1" "e1 v1"
	assert_eq "$(kept | wc -l)" 5 "kept mounts"
fi

check "unmerge drops them: no mount, no record, no loop device left"
run_sysextd unmerge
assert_ok
[[ -z $(findmnt -n --mountpoint "$PIN" || true) ]] || fail "kept layers left after unmerge"
assert_missing "$PIN"
assert_missing "$R/run/sysextd/layers.id"
assert_loops_as_before "$loops_before"

check "a mount at run/sysextd/layers that is not ours: not used, not covered, not detached"
# (Linux binds only a namespace with a higher id than the binder's, and 6.18 takes ids from
# per-CPU batches: a holder made on each CPU in turn until one can be bound.)
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
run_sysextd merge
assert_ok
assert_file_content "$R/usr/share/kept/e1" "e1 v1"
assert_eq "$(mountinfo_under "$PIN" | awk '{ print $1 }' | tr '\n' ' ')" "$(awk -v p="$PIN" '$5 == p { print $1 }' /proc/self/mountinfo | tr '\n' ' ')" "mounts at $PIN"
assert_eq "$(mountinfo_under "$PIN" | wc -l)" 1 "mounts at $PIN (nothing stacked on the foreign one)"
# A record forged to name it: still not ours (its mount id is not the one recorded).
echo "1 $(stat -L -c %i "/proc/$holder/ns/mnt")" >"$R/run/sysextd/layers.id"
run_sysextd refresh --always-refresh=yes
assert_ok
run_sysextd unmerge
assert_ok
assert_eq "$(mountinfo_under "$PIN" | wc -l)" 1 "the foreign mount at $PIN after unmerge"
umount "$PIN"
kill "$holder"
assert_loops_as_before "$loops_before"

echo PASS
