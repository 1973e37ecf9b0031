#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Not a test: tools/bench-boot runs it (test/vm/run boot-bench.sh N ROUNDS) to measure what
# merging N erofs images adds to boot, sysextd-merge.service against the distribution's
# systemd-sysext.service on the same images, one of them enabled per boot, alternating:
#  boot 1: N images in /var/lib/extensions; sysextd-merge.service enabled; reboot.
#  boots 2..2*ROUNDS+1: what the enabled unit took (activating to active, systemd-analyze
#          blame's figure), and when it, sysinit.target and basic.target became active,
#          counted from the start of userspace, as one "BOOTBENCH" line; then the other unit
#          enabled; reboot.
set -u
. "$(dirname "$0")/lib.sh"
N=${1:-10}
ROUNDS=${2:-2}
STATE=/var/lib/vmtest/bootbench

# unit_ms UNIT: activating -> active, in ms (what systemd-analyze blame shows).
unit_ms() {
	local a b
	a=$(systemctl show -P InactiveExitTimestampMonotonic "$1")
	b=$(systemctl show -P ActiveEnterTimestampMonotonic "$1")
	awk -v a="$a" -v b="$b" 'BEGIN { printf "%.1f", (b - a) / 1000 }'
}
# since_userspace_ms UNIT: when UNIT became active, from the start of userspace.
since_userspace_ms() {
	local u b
	u=$(systemctl show -P UserspaceTimestampMonotonic)
	b=$(systemctl show -P ActiveEnterTimestampMonotonic "$1")
	awk -v a="$u" -v b="$b" 'BEGIN { printf "%.1f", (b - a) / 1000 }'
}

if [[ $VMTEST_BOOT == 1 ]]; then
	mkdir -p "$STATE" "$EXTDIR"
	for i in $(seq 1 "$N"); do
		t=$(mktemp -d)
		mkdir -p "$t/usr/share/vmtest/bb$i" "$t/usr/lib/extension-release.d"
		head -c 65536 /dev/urandom >"$t/usr/share/vmtest/bb$i/data"
		printf 'ID=_any\n' >"$t/usr/lib/extension-release.d/extension-release.bb$i"
		mkfs.erofs --quiet "$EXTDIR/bb$i.raw" "$t" >/dev/null || die "mkfs.erofs bb$i"
		rm -rf "$t"
	done
	systemctl disable --quiet systemd-sysext.service systemd-confext.service 2>/dev/null
	systemctl enable --quiet sysextd-merge.service || die "systemctl enable sysextd-merge.service"
	echo sysextd-merge.service >"$STATE/unit"
	exit 100
fi

unit=$(cat "$STATE/unit")
merged=no
[[ -f /usr/share/vmtest/bb$N/data ]] && merged=yes
# (The boot finishes only after this script: vmtest.service is part of it.  sysinit.target is
# what both units come before.)
echo "BOOTBENCH images=$N boot=$VMTEST_BOOT unit=$unit unit_ms=$(unit_ms "$unit") active_at_ms=$(since_userspace_ms "$unit") sysinit_ms=$(since_userspace_ms sysinit.target) basic_ms=$(since_userspace_ms basic.target) merged=$merged"
systemd-analyze critical-chain sysinit.target --no-pager 2>/dev/null | sed 's/^/# /' | head -n 12
[[ $merged == yes ]] || die "$unit did not merge the $N images"
((VMTEST_BOOT >= 2 * ROUNDS + 1)) && exit 0
if [[ $unit == sysextd-merge.service ]]; then
	systemctl disable --quiet sysextd-merge.service
	systemctl enable --quiet systemd-sysext.service || die "systemctl enable systemd-sysext.service"
	echo systemd-sysext.service >"$STATE/unit"
else
	systemctl disable --quiet systemd-sysext.service
	systemctl enable --quiet sysextd-merge.service || die "systemctl enable sysextd-merge.service"
	echo sysextd-merge.service >"$STATE/unit"
fi
exit 100
