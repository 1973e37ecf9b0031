#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Older kernels, proven on one (issue 11, section 8): Debian 12's own kernel (6.1) and systemd
# (252).  6.1 has neither MOVE_MOUNT_BENEATH (6.5), FSCONFIG_CMD_CREATE_EXCL (6.6),
# lowerdir+ nor unique mount ids (6.8), nor detached overlay layers (6.15):
#  - erofs, squashfs and ext4 images merge (through the D-Bus activated daemon);
#  - status says the mode is "unsupported" and ownership is proven by mount id, device and
#    source;
#  - a refresh is refused by default with the documented message, and the tree stays;
#  - with DegradedMode=unmount-mount the refresh goes through, and status says "degraded";
#  - a corrupt squashfs is refused with the kernel's own reason, not "busy";
#  - unmerge leaves the base and, once the daemon (started while /usr was merged, so its
#    libraries map files of the old tree) has stopped, no loop device.
set -u
. "$(dirname "$0")/lib.sh"

note "$(uname -r), $(systemctl --version | head -n1), $(sysextd --version 2>&1 | head -n1)"
systemctl stop sysextd-refresh.path 2>/dev/null
setup_base
mkdir -p "$EXTDIR" /etc/sysextd
printf '[Daemon]\nIdleTimeoutSec=0\n' >/etc/sysextd/sysextd.conf
loops_attached() {
	local f n=0
	for f in /sys/block/loop*/loop/backing_file; do [[ -e $f ]] && n=$((n + 1)); done
	echo "$n"
}
# Diagnostics: overlays on /usr per mount namespace (one process each).
ns_overlays() {
	local p seen=" " ns n
	for p in /proc/[0-9]*; do
		ns=$(readlink "$p/ns/mnt" 2>/dev/null) || continue
		[[ $seen == *" $ns "* ]] && continue
		seen+="$ns "
		n=$(grep -cE ' /usr [^-]* - overlay ' "$p/mountinfo" 2>/dev/null) || true
		[[ ${n:-0} -gt 0 ]] && echo -n "$(cat "$p/comm")=$n "
	done
}
loops_before=$(loops_attached)

# kind_image KIND VERSION: NAME-KIND.raw adding /usr/share/vmtest/KIND, saying VERSION.
kind_image() {
	local kind=$1 v=$2 t out
	t=$(mktemp -d)
	mkdir -p "$t/usr/share/vmtest" "$t/usr/lib/extension-release.d"
	echo "$v" >"$t/usr/share/vmtest/$kind"
	printf 'ID=_any\n' >"$t/usr/lib/extension-release.d/extension-release.$kind"
	out=$IMGDIR/$kind-$v.raw
	mkdir -p "$IMGDIR"
	case $kind in
	erofs) mkfs.erofs "$out" "$t" >/dev/null ;;
	squashfs) mksquashfs "$t" "$out" -noappend -quiet -all-root >/dev/null ;;
	ext4) truncate -s 8M "$out" && mkfs.ext4 -q -F -O ^has_journal -d "$t" "$out" >/dev/null ;;
	esac
	rm -rf "$t"
}
for k in erofs squashfs ext4; do
	kind_image "$k" v1 || die "cannot build the $k image"
	kind_image "$k" v2 || die "cannot build the $k image"
	ln -f "$IMGDIR/$k-v1.raw" "$EXTDIR/$k.raw"
done
shows() { echo "$(cat /usr/share/vmtest/erofs 2>&1) $(cat /usr/share/vmtest/squashfs 2>&1) $(cat /usr/share/vmtest/ext4 2>&1)"; }

# --- merge --------------------------------------------------------------------------------
sysextd merge >/run/vmtest.out 2>/run/vmtest.err
expect "sysextd merge (erofs, squashfs, ext4) through the daemon" 0 "$?"
note "merge: $(tr '\n' '|' </run/vmtest.err)"
expect "all three kinds merged" "v1 v1 v1" "$(shows)"
expect "base still there" base "$(probe_in)"
st=$(sysextd status)
note "status: $(tr '\n' '|' <<<"$st")"
check "status: mode unsupported" grep -q "Mode: unsupported" <<<"$st"
check "status: ownership by mount id, device and source" grep -q "ownership proven by mount id, device and source" <<<"$st"

# --- refresh refused by default ---------------------------------------------------------
for k in erofs squashfs ext4; do ln -f "$IMGDIR/$k-v2.raw" "$IMGDIR/.next" && mv -f "$IMGDIR/.next" "$EXTDIR/$k.raw"; done
sysextd refresh >/run/vmtest.out 2>/run/vmtest.err
rc=$?
msg=$(cat /run/vmtest.err)
check "refresh refused by default (exit $rc)" test "$rc" != 0
check "the documented message: MOVE_MOUNT_BENEATH needs Linux 6.5 ($msg)" grep -q "MOVE_MOUNT_BENEATH needs Linux 6.5" <<<"$msg"
check "the message names DegradedMode=unmount-mount" grep -q "DegradedMode=unmount-mount" <<<"$msg"
expect "the tree stays at v1" "v1 v1 v1" "$(shows)"
note "loops after the refused refresh: $(loops_attached); overlays: $(ns_overlays)"

# --- degraded mode ------------------------------------------------------------------------
printf '[Kernel]\nDegradedMode=unmount-mount\n[Daemon]\nIdleTimeoutSec=0\n' >/etc/sysextd/sysextd.conf
systemctl stop sysextd.service
t_refresh=$SECONDS
sysextd refresh >/run/vmtest.out 2>/run/vmtest.err
expect "refresh in degraded mode" 0 "$?"
note "loops after the degraded refresh: $(loops_attached); overlays: $(ns_overlays)"
note "refresh: $(tr '\n' '|' </run/vmtest.err)"
check "refresh says it ran degraded" grep -q "degraded mode" /run/vmtest.err
expect "the tree is v2" "v2 v2 v2" "$(shows)"
st=$(sysextd status)
check "status: mode degraded" grep -q "Mode: degraded" <<<"$st"
expect "one overlay on /usr" 1 "$(usr_overlays_in)"

# --- a corrupt squashfs -----------------------------------------------------------------------
cp "$IMGDIR/squashfs-v2.raw" "$EXTDIR/broken.raw"
# The inode table start, in the superblock: pointing past the end makes the mount fail.
printf '\xff\xff\xff\x7f' | dd of="$EXTDIR/broken.raw" bs=1 seek=64 conv=notrunc status=none
sysextd list >/run/vmtest.out 2>&1
reason=$(grep '^broken ' /run/vmtest.out)
note "list: $reason"
check "the corrupt squashfs is refused" grep -q refused <<<"$reason"
if grep -qi "busy" <<<"$reason"; then not_ok "the reason blames a busy device: $reason"; else ok "the reason is the kernel's own"; fi
rm -f "$EXTDIR/broken.raw"

# --- unmerge ----------------------------------------------------------------------------------
note "loops after list: $(loops_attached)"
check "sysextd unmerge" sysextd unmerge
note "loops after unmerge: $(loops_attached); overlays: $(ns_overlays)"
expect "base after unmerge" base "$(probe_in)"
expect "no overlay on /usr after unmerge" 0 "$(usr_overlays_in)"
# A process started while /usr was merged maps its libraries through that overlay, which
# keeps the lazily detached tree and its images alive: the daemon was (re)started then.
systemctl stop sysextd.service
no_loops() { (( $(loops_attached) <= loops_before )); }
if wait_for 20 no_loops; then ok "no loop device left"; else
	not_ok "loop devices: $(loops_attached), before $loops_before"
	note "losetup: $(losetup -l -O NAME,BACK-FILE,BACK-INO,AUTOCLEAR 2>&1 | tr '\n' '|')"
	note "images: $(ls -i "$IMGDIR" | tr '\n' ' ')"
	for p in /proc/[0-9]*; do
		l=$(grep -E ' 07:[0-9a-f]+ ' "$p/maps" 2>/dev/null | tr '\n' '|') || true
		[[ -n $l ]] && note "$(cat "$p/comm") maps from a loop device: $l"
		for x in cwd root exe; do
			case $(readlink "$p/$x" 2>/dev/null) in /usr/share*|*deleted*) note "$(cat "$p/comm") $x -> $(readlink "$p/$x")" ;; esac
		done
	done
	sleep 30
	note "30 s later: $(loops_attached) loop devices: $(losetup -l -O NAME,BACK-INO 2>&1 | tr '\n' '|')"
	for p in /proc/[0-9]*; do
		for f in "$p"/fd/*; do
			case $(readlink "$f" 2>/dev/null) in /dev/loop*|*.raw*|/usr*|mnt:*|/run/sysextd*) note "$(cat "$p/comm") $f -> $(readlink "$f")" ;; esac
		done
	done
	for p in /proc/[0-9]*; do
		l=$(grep -E ' - (overlay|erofs|squashfs|ext4) ' "$p/mountinfo" 2>/dev/null | grep -v ' / / ' | tr '\n' '|') || true
		[[ -n $l ]] && note "$(cat "$p/comm" 2>/dev/null) ($(readlink "$p/ns/mnt")): $l"
	done | sort -u -t'(' -k2,2
fi
finish
