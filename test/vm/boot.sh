#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# (d) Two boots of one disk:
#  boot 1: an image in /var/lib/extensions, sysextd-merge.service and sysextd-refresh.path
#          enabled, nothing merged by hand; reboot.
#  boot 2: the system comes up merged (by sysextd-merge.service, before sysinit.target);
#          the services that an image ships, enabled through multi-user.target.wants/ and
#          .upholds/ in the image (EXTENSION_RELOAD_MANAGER=1), run after boot without a
#          daemon-reload by hand (sysextd reaches PID 1 over its private socket, the bus
#          not being up yet);
#          dropping an image into /var/lib/extensions, and replacing one, makes the .path
#          unit refresh.
set -u
. "$(dirname "$0")/lib.sh"

# units_image: an image that ships two services, one enabled through
# multi-user.target.wants/, one through multi-user.target.upholds/.
units_image() {
	local t u
	t=$(mktemp -d)
	mkdir -p "$t/usr/lib/systemd/system/multi-user.target.wants" \
		"$t/usr/lib/systemd/system/multi-user.target.upholds" "$t/usr/lib/extension-release.d"
	for u in wants upholds; do
		cat >"$t/usr/lib/systemd/system/vmtest-$u.service" <<EOF
[Unit]
Description=vmtest: a service an image ships, enabled through multi-user.target.$u
[Service]
ExecStart=/bin/sh -c 'echo up >/run/vmtest-$u; exec sleep infinity'
EOF
		ln -s ../vmtest-$u.service "$t/usr/lib/systemd/system/multi-user.target.$u/vmtest-$u.service"
	done
	printf 'ID=_any\nEXTENSION_RELOAD_MANAGER=1\n' >"$t/usr/lib/extension-release.d/extension-release.units"
	mkdir -p "$IMGDIR"
	mkfs.erofs "$IMGDIR/units.raw" "$t" >/dev/null || return 1
	rm -rf "$t"
}

if [[ $VMTEST_BOOT == 1 ]]; then
	mkdir -p /etc/sysextd
	printf '[Daemon]\nIdleTimeoutSec=3\n' >/etc/sysextd/sysextd.conf
	setup_base
	for v in v1 v2; do make_image "$v" || die "mkfs.erofs $v"; done
	make_image extra1 extra || die "mkfs.erofs extra"
	units_image || die "mkfs.erofs units"
	use_image units units
	use_image v1
	check "enable sysextd-merge.service and sysextd-refresh.path" \
		systemctl enable sysextd-merge.service sysextd-refresh.path
	expect "nothing merged before the reboot" base "$(probe_in)"
	((fails)) && finish
	exit 100 # reboot
fi

# --- boot 2 ---------------------------------------------------------------------------
expect "sysextd-merge.service ran at boot" "active success" \
	"$(systemctl is-active sysextd-merge.service) $(systemctl show -P Result sysextd-merge.service)"
expect "merged at boot" v1 "$(probe_in)"
expect "one overlay on /usr" 1 "$(usr_overlays_in)"
merged=$(systemctl show -P ExecMainExitTimestampMonotonic sysextd-merge.service)
sysinit=$(systemctl show -P ActiveEnterTimestampMonotonic sysinit.target)
check "merged before sysinit.target ($merged < $sysinit us)" test "$merged" -lt "$sysinit"
expect "sysextd-refresh.path is active" active "$(systemctl is-active sysextd-refresh.path)"
sysextd status
for u in wants upholds; do
	wait_for 30 test -e /run/vmtest-$u
	expect "vmtest-$u.service, shipped by an image merged at boot, runs" \
		"active /usr/lib/systemd/system/vmtest-$u.service up" \
		"$(systemctl is-active vmtest-$u.service) $(systemctl show -P FragmentPath vmtest-$u.service) $(cat /run/vmtest-$u 2>/dev/null)"
done
journalctl -b -u sysextd-merge.service --no-pager | tail -n 20

runs() { systemctl show -P InvocationID sysextd-refresh.service; }
before=$(runs)

# Drop a new image in: the .path unit refreshes and its file appears.
use_image extra1 extra
if wait_for 60 test -e /usr/share/vmtest/extra; then
	ok "the .path unit merged a dropped-in image ($(cat /usr/share/vmtest/extra))"
else
	not_ok "/usr/share/vmtest/extra did not appear within 60 s"
fi
check "sysextd-refresh.service ran" test "$(runs)" != "$before"
wait_for 30 bash -c '[[ $(systemctl is-active sysextd-refresh.service) != activating ]]'
expect "sysextd-refresh.service succeeded" success "$(systemctl show -P Result sysextd-refresh.service)"
expect "ext is still merged" v1 "$(probe_in)"

# Replace an image: the .path unit refreshes to the new version.
use_image v2
if wait_for 60 bash -c '[[ $(cat /usr/share/vmtest/probe) == v2 ]]'; then
	ok "the .path unit refreshed to a replaced image (v2)"
else
	not_ok "/usr/share/vmtest/probe still '$(probe_in)' 60 s after replacing the image"
fi
wait_for 30 bash -c '[[ $(systemctl is-active sysextd-refresh.service) != activating ]]'
expect "one overlay on /usr after the refreshes" 1 "$(usr_overlays_in)"
sysextd status

check "sysextd unmerge" sysextd unmerge
expect "base after unmerge" base "$(probe_in)"
finish
