#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# One boot, four checks of sysextd on a running system with systemd as PID 1:
#  (a) `sysextd merge` as a plain client activates sysextd.service over D-Bus, and the
#      daemon exits when idle (IdleTimeoutSec=3);
#  (b) two services started before the merge (ProtectSystem=strict, PrivateMounts=yes)
#      see the merged /usr, and during REFRESHES refreshes alternating two versions their
#      readers never see the base and never get an error;
#  (c) /usr/local, a tmpfs mounted by a unit, survives the refreshes and the unmerge in
#      the host and in both services;
#      each transition leaves one journal entry with its MESSAGE_ID (merge, refresh);
#  (e) systemd-sysext in the same guest, on the same images, with the same readers:
#      both window figures side by side (sysextd's must be 0).
# Usage (via test/vm/run): live.sh [REFRESHES [SYSEXT_REFRESHES]]
set -u
. "$(dirname "$0")/lib.sh"

REFRESHES=${1:-20}
SYSEXT_REFRESHES=${2:-10}
NS=(vmtest-strict vmtest-private)
ALL=(host "${NS[@]}")

note "$(uname -r), $(systemctl --version | head -n1), $(sysextd --version 2>&1 | head -n1)"

# --- setup --------------------------------------------------------------------------
systemctl stop sysextd-refresh.path 2>/dev/null
mkdir -p /etc/sysextd
printf '[Daemon]\nIdleTimeoutSec=3\n' >/etc/sysextd/sysextd.conf
setup_base
for v in v1 v2; do make_image "$v" || die "mkfs.erofs $v"; done
use_image v1

# (c) /usr/local as a tmpfs mounted by a unit, with a copy of what the disk has there (the
# distribution's empty skeleton; sysextd is installed in /usr) and a marker.
cp -a /usr/local /run/vmtest/usr-local.disk
cat >/run/systemd/system/usr-local.mount <<'EOF'
[Unit]
Description=vmtest /usr/local on tmpfs
[Mount]
What=tmpfs
Where=/usr/local
Type=tmpfs
Options=mode=0755,size=64m
EOF
# (b) the readers' services (started after /usr/local is mounted, before the merge).
write_reader_unit vmtest-strict ProtectSystem=strict "ReadWritePaths=$READERS"
write_reader_unit vmtest-private PrivateMounts=yes
systemctl daemon-reload
check "usr-local.mount started" systemctl start usr-local.mount
cp -a /run/vmtest/usr-local.disk/. /usr/local/
echo local >"$MARKER"
expect "/usr/local is a tmpfs" tmpfs "$(findmnt -n -o FSTYPE /usr/local)"

# (b) the services start before the merge: they see the base now.
mkdir -p "$READERS"
check "reader services started" systemctl start vmtest-strict.service vmtest-private.service
start_host_reader
for s in "${NS[@]}"; do
	check "$s running" systemctl is-active -q "$s.service"
	expect "$s sees the base before the merge" base "$(probe_in "$(main_pid "$s")")"
done

# --- (a) activation and idle exit ---------------------------------------------------
expect "sysextd.service inactive before the first call" inactive "$(systemctl is-active sysextd.service)"
t0=$(now_ms)
check "sysextd merge (client, over the bus)" sysextd merge
note "merge took $(( $(now_ms) - t0 )) ms (including activation)"
inv=$(systemctl show -P InvocationID sysextd.service)
check "sysextd.service was activated by the call" test -n "$inv"
expect "merged in the host" v1 "$(probe_in)"
for s in "${NS[@]}"; do
	p=$(main_pid "$s")
	expect "$s sees the merged /usr" v1 "$(probe_in "$p")"
	expect "$s still sees /usr/local" local "$(marker_in "$p")"
done
expect "/usr/local still mounted in the host" local "$(marker_in)"
t0=$(now_ms)
if wait_for 30 bash -c '[[ $(systemctl is-active sysextd.service) == inactive ]]'; then
	ok "daemon exited when idle, $(( $(now_ms) - t0 )) ms after the merge returned"
else
	not_ok "daemon still $(systemctl is-active sysextd.service) 30 s after the merge"
fi
expect "daemon exit status" "success 0" \
	"$(systemctl show -P Result sysextd.service) $(systemctl show -P ExecMainStatus sysextd.service)"
sysextd status

# --- (b)(c) refreshes under readers -------------------------------------------------
for r in "${ALL[@]}"; do reset_reader "$r"; done
refresh_fail=0 wrong=0
t0=$(now_ms)
for ((i = 1; i <= REFRESHES; i++)); do
	v=v$(( i % 2 ? 2 : 1 ))
	use_image "$v"
	if ! out=$(sysextd refresh 2>&1); then
		refresh_fail=$((refresh_fail + 1))
		((refresh_fail <= 3)) && echo "# refresh $i failed: $out"
		continue
	fi
	got=$(probe_in)
	if [[ $got != "$v" ]]; then
		wrong=$((wrong + 1))
		((wrong <= 3)) && echo "# refresh $i: host sees '$got', want $v"
	fi
done
t_sysextd=$(( $(now_ms) - t0 ))
declare -A W_SYSEXTD W_SYSEXT
for r in "${ALL[@]}"; do W_SYSEXTD[$r]=$(dump_reader "$r"); done
expect "refreshes that failed" 0 "$refresh_fail"
expect "refreshes after which the host saw the wrong version" 0 "$wrong"
note "$REFRESHES refreshes through the daemon in $t_sysextd ms ($(( t_sysextd / REFRESHES )) ms each)"
# The update history in journald: one entry per transition, by MESSAGE_ID (sysextd(8), JOURNAL).
journalctl --sync 2>/dev/null
expect "journal entries of the merge (MESSAGE_ID of a merge)" 1 \
	"$(journalctl -b -o cat MESSAGE_ID=616a4a8c1bfe496390e35a295053c91e 2>/dev/null | wc -l)"
expect "journal entries of the refreshes (MESSAGE_ID of a refresh)" "$REFRESHES" \
	"$(journalctl -b -o cat MESSAGE_ID=0a89d217eccc4447b65d40cf2c08122d 2>/dev/null | wc -l)"
expect "the last refresh's SYSEXTD_GENERATION" "$((REFRESHES + 1))" \
	"$(journalctl -b -n 1 -o verbose MESSAGE_ID=0a89d217eccc4447b65d40cf2c08122d 2>/dev/null |
		sed -n 's/^ *SYSEXTD_GENERATION=//p')"
for r in "${ALL[@]}"; do
	line=${W_SYSEXTD[$r]}
	note "$r: $line"
	expect "$r reader never saw the base" 0 "$(field "$line" base)"
	expect "$r reader never got an error" 0 "$(field "$line" err)"
	check "$r reader saw both versions" test "$(field "$line" v1)" -gt 0 -a "$(field "$line" v2)" -gt 0
done
for s in "" "${NS[@]}"; do
	p=; [[ -n $s ]] && p=$(main_pid "$s")
	name=${s:-host}
	expect "$name: /usr/local survived $REFRESHES refreshes" local "$(marker_in "$p")"
	expect "$name: one overlay on /usr" 1 "$(usr_overlays_in "$p")"
done

# --- (c) unmerge --------------------------------------------------------------------
check "sysextd unmerge" sysextd unmerge
for s in "" "${NS[@]}"; do
	p=; [[ -n $s ]] && p=$(main_pid "$s")
	name=${s:-host}
	expect "$name sees the base after unmerge" base "$(probe_in "$p")"
	expect "$name: /usr/local survived the unmerge" local "$(marker_in "$p")"
done
expect "/usr/local is still the unit's tmpfs" "tmpfs active" \
	"$(findmnt -n -o FSTYPE /usr/local | tail -n1) $(systemctl is-active usr-local.mount)"
wait_for 30 bash -c '[[ $(systemctl is-active sysextd.service) == inactive ]]' ||
	not_ok "daemon did not exit after the unmerge"

# --- (e) systemd-sysext on the same images, same readers ----------------------------
use_image v1
check "systemd-sysext merge" systemd-sysext merge
expect "systemd-sysext merged in the host" v1 "$(probe_in)"
for r in "${ALL[@]}"; do reset_reader "$r"; done
sx_fail=0
t0=$(now_ms)
for ((i = 1; i <= SYSEXT_REFRESHES; i++)); do
	use_image "v$(( i % 2 ? 2 : 1 ))"
	if ! out=$(systemd-sysext refresh 2>&1); then
		sx_fail=$((sx_fail + 1))
		((sx_fail <= 3)) && echo "# systemd-sysext refresh $i failed: $out"
	fi
done
t_sysext=$(( $(now_ms) - t0 ))
for r in "${ALL[@]}"; do W_SYSEXT[$r]=$(dump_reader "$r"); done
note "$SYSEXT_REFRESHES systemd-sysext refreshes in $t_sysext ms ($(( t_sysext / SYSEXT_REFRESHES )) ms each); $sx_fail failed"
note "after systemd-sysext: /usr/local in the host is '$(marker_in)' ($(findmnt -n -o FSTYPE /usr/local | tr '\n' ' '))"
systemd-sysext unmerge >/dev/null 2>&1

# --- the figures side by side -------------------------------------------------------
echo
echo "# Window a refresh opens, seen by the same reader (read every 1 ms)"
printf '# %-16s | %-44s | %-44s\n' reader "sysextd ($REFRESHES refreshes)" "systemd-sysext $(systemctl --version | awk 'NR==1{print $2}') ($SYSEXT_REFRESHES refreshes)"
fmt() {
	printf 'base %s err %s windows %s total %s ms max %s ms' "$(field "$1" base)" "$(field "$1" err)" \
		"$(field "$1" windows)" "$(field "$1" window_ms)" "$(field "$1" max_window_ms)"
}
for r in "${ALL[@]}"; do
	printf '# %-16s | %-44s | %-44s\n' "$r" "$(fmt "${W_SYSEXTD[$r]}")" "$(fmt "${W_SYSEXT[$r]}")"
done
printf '# %-16s | %-44s | %-44s\n' "time/refresh" "$(( t_sysextd / REFRESHES )) ms" "$(( t_sysext / SYSEXT_REFRESHES )) ms"
echo

kill "$host_reader_pid" 2>/dev/null
systemctl stop vmtest-strict.service vmtest-private.service
finish
