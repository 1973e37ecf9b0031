#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Images that ship units, and configuration extensions, on a running system with systemd
# 257 as PID 1:
#  (a) a squashfs sysext built the way Flatcar's sysext bakery builds them (mksquashfs
#      -all-root; a service in usr/lib/systemd/system enabled through a
#      multi-user.target.upholds/ symlink; EXTENSION_RELOAD_MANAGER=1 and
#      EXTENSION_RESTART_UNITS=) merged through the daemon: the service runs without a manual
#      daemon-reload; after a refresh to v2 it runs the new binary (a new process); after
#      unmerge the unit is gone (stopped); the jobs are queued, not waited for; with
#      --no-reload nothing is asked of systemd;
#  (b) a confext that ships a drop-in for a running service's configuration: the service
#      sees v1 after the merge and v2 after the refresh;
#  (c) the window of a confext refresh as a reader service (PrivateMounts=yes) sees it:
#      sysextd's REFRESHES refreshes against systemd-confext's on the same images;
#  (d) a slow unit: an image whose service takes 60 s to start lists it in
#      EXTENSION_RESTART_UNITS=; merge, refresh and unmerge through the daemon each answer
#      in seconds (the job is queued, not awaited), and a status call meanwhile is answered
#      at once.
# Usage (via test/vm/run): units.sh [REFRESHES [CONFEXT_REFRESHES]]
set -u
. "$(dirname "$0")/lib.sh"

REFRESHES=${1:-20}
CONFEXT_REFRESHES=${2:-10}
CFGDIR=/var/lib/confexts
CFGPROBE=/etc/vmtest/probe

note "$(uname -r), $(systemctl --version | head -n1), $(sysextd --version 2>&1 | head -n1)"
systemctl stop sysextd-refresh.path 2>/dev/null
mkdir -p /etc/sysextd "$IMGDIR" "$EXTDIR" "$CFGDIR"
printf '[Daemon]\nIdleTimeoutSec=3\n' >/etc/sysextd/sysextd.conf

# --- images -------------------------------------------------------------------------
# hello_image VERSION: the Flatcar-style sysext, in $IMGDIR/hello-VERSION.raw.
hello_image() {
	local v=$1 t
	t=$(mktemp -d)
	mkdir -p "$t/usr/lib/systemd/system/multi-user.target.upholds" "$t/usr/lib/vmtest-hello" \
		"$t/usr/lib/extension-release.d"
	cat >"$t/usr/lib/vmtest-hello/run" <<EOF
#!/bin/sh
echo $v >/run/vmtest-hello.version
exec sleep infinity
EOF
	chmod 755 "$t/usr/lib/vmtest-hello/run"
	cat >"$t/usr/lib/systemd/system/vmtest-hello.service" <<'EOF'
[Unit]
Description=vmtest hello, shipped by a system extension
[Service]
ExecStart=/usr/lib/vmtest-hello/run
EOF
	ln -s ../vmtest-hello.service "$t/usr/lib/systemd/system/multi-user.target.upholds/vmtest-hello.service"
	printf 'ID=_any\nEXTENSION_RELOAD_MANAGER=1\nEXTENSION_RESTART_UNITS=vmtest-hello.service\n' \
		>"$t/usr/lib/extension-release.d/extension-release.hello"
	mksquashfs "$t" "$IMGDIR/hello-$v.raw" -all-root -noappend -quiet >/dev/null || return 1
	rm -rf "$t"
}
# cfg_image VERSION: a confext with a drop-in for vmtest-cfg and the reader's probe.
cfg_image() {
	local v=$1 t
	t=$(mktemp -d)
	mkdir -p "$t/etc/vmtest-cfg/conf.d" "$t/etc/vmtest" "$t/etc/extension-release.d"
	echo "value=$v" >"$t/etc/vmtest-cfg/conf.d/10-ext.conf"
	echo "$v" >"$t/etc/vmtest/probe"
	printf 'ID=_any\n' >"$t/etc/extension-release.d/extension-release.cfg"
	mkfs.erofs "$IMGDIR/cfg-$v.raw" "$t" >/dev/null || return 1
	rm -rf "$t"
}
# use NAME VERSION DIR: make DIR/NAME.raw that version (atomic rename of a hard link).
use() { ln -f "$IMGDIR/$1-$2.raw" "$IMGDIR/.next" && mv -f "$IMGDIR/.next" "$3/$1.raw"; }
for v in v1 v2; do
	hello_image "$v" || die "mksquashfs hello $v"
	cfg_image "$v" || die "mkfs.erofs cfg $v"
done

hello_version() { cat /run/vmtest-hello.version 2>/dev/null; }
hello_active() { [[ $(systemctl is-active vmtest-hello.service) == active ]]; }
hello_pid() { systemctl show -P MainPID vmtest-hello.service; }

# --- (a) a sysext that ships a service ------------------------------------------------
use hello v1 "$EXTDIR"
out=$(sysextd merge --no-reload 2>&1)
expect "sysextd merge --no-reload" 0 "$?"
sleep 3
if grep -q Reloaded <<<"$out"; then not_ok "--no-reload reloaded: $out"; else ok "--no-reload: the service manager was not asked"; fi
check "--no-reload: vmtest-hello.service was not started (nothing upholds it)" test ! -e /run/vmtest-hello.version
check "sysextd unmerge --no-reload" sysextd unmerge --no-reload
systemctl daemon-reload

rm -f /run/vmtest-hello.version
out=$(sysextd merge 2>&1)
expect "sysextd merge through the daemon" 0 "$?"
note "merge: $(tr '\n' '|' <<<"$out")"
check "merge says it reloaded the service manager" grep -q "Reloaded the service manager" <<<"$out"
if wait_for 30 hello_active; then ok "vmtest-hello.service runs, with no daemon-reload by anyone else"; else
	not_ok "vmtest-hello.service is $(systemctl is-active vmtest-hello.service) after the merge"; fi
wait_for 10 test -s /run/vmtest-hello.version
expect "the service runs v1" v1 "$(hello_version)"
pid1=$(hello_pid)

use hello v2 "$EXTDIR"
out=$(sysextd refresh 2>&1)
expect "sysextd refresh to v2" 0 "$?"
note "refresh: $(tr '\n' '|' <<<"$out")"
check "refresh restarted the unit" grep -q "Queued restart of vmtest-hello.service" <<<"$out"
wait_for 20 bash -c '[[ $(cat /run/vmtest-hello.version 2>/dev/null) == v2 ]]'
expect "after the refresh the service runs v2" v2 "$(hello_version)"
check "a new process ($pid1 -> $(hello_pid))" test "$(hello_pid)" != "$pid1" -a "$(hello_pid)" != 0

pid2=$(hello_pid)
out=$(sysextd refresh 2>&1)
if grep -q "Queued " <<<"$out"; then not_ok "an unchanged refresh restarted units: $out"; else ok "an unchanged refresh restarts nothing"; fi
expect "the same process after the unchanged refresh" "$pid2" "$(hello_pid)"

out=$(sysextd unmerge 2>&1)
expect "sysextd unmerge" 0 "$?"
note "unmerge: $(tr '\n' '|' <<<"$out")"
if wait_for 20 bash -c '! systemctl is-active -q vmtest-hello.service'; then ok "vmtest-hello.service stopped after unmerge"; else
	not_ok "vmtest-hello.service still $(systemctl is-active vmtest-hello.service)"; fi
expect "the unit is gone after unmerge" not-found "$(systemctl show -P LoadState vmtest-hello.service)"
check "process $pid2 is gone" bash -c "! kill -0 $pid2 2>/dev/null"
rm -f "$EXTDIR/hello.raw"

# --- (b) a confext drop-in for a running service ----------------------------------------
mkdir -p /etc/vmtest-cfg/conf.d
echo "value=base" >/etc/vmtest-cfg/conf.d/00-base.conf
cat >/run/systemd/system/vmtest-cfg.service <<'EOF'
[Unit]
Description=vmtest service reading its configuration drop-ins
[Service]
PrivateMounts=yes
ExecStart=/bin/sh -c 'while :; do cat /etc/vmtest-cfg/conf.d/*.conf >/run/vmtest-cfg.tmp 2>&1; mv /run/vmtest-cfg.tmp /run/vmtest-cfg.seen; sleep 0.05; done'
EOF
systemctl daemon-reload
check "vmtest-cfg.service started" systemctl start vmtest-cfg.service
wait_for 10 grep -q value=base /run/vmtest-cfg.seen
seen() { tr '\n' ' ' </run/vmtest-cfg.seen 2>/dev/null; }
expect "the service sees its own configuration" "value=base " "$(seen)"
use cfg v1 "$CFGDIR"
check "sysextd merge (the confext)" sysextd merge
wait_for 10 grep -q value=v1 /run/vmtest-cfg.seen
expect "the service sees the confext's drop-in v1" "value=base value=v1 " "$(seen)"
use cfg v2 "$CFGDIR"
check "sysextd refresh (the confext to v2)" sysextd refresh
wait_for 10 grep -q value=v2 /run/vmtest-cfg.seen
expect "the service sees v2 after the refresh" "value=base value=v2 " "$(seen)"
opts=$(findmnt -n -o OPTIONS --mountpoint /etc)
check "/etc is nosuid, nodev, noexec ($opts)" bash -c "[[ ,$opts, == *,nosuid,* && ,$opts, == *,nodev,* && ,$opts, == *,noexec,* ]]"

# --- (c) the window of a confext refresh, seen by a service -----------------------------
mkdir -p "$READERS"
cat >/run/systemd/system/vmtest-cfgreader.service <<EOF
[Unit]
Description=vmtest reader of a confext's file
[Service]
PrivateMounts=yes
ExecStart=$READER $CFGPROBE $READERS/cfgreader.txt 200
EOF
systemctl daemon-reload
check "vmtest-cfgreader.service started" systemctl start vmtest-cfgreader.service
sleep 0.5
pid=$(systemctl show -P MainPID vmtest-cfgreader.service)
kill -USR1 "$pid"
fail=0
t0=$(now_ms)
for ((i = 1; i <= REFRESHES; i++)); do
	use cfg "v$(( i % 2 ? 1 : 2 ))" "$CFGDIR"
	sysextd refresh --class=confext >/dev/null 2>&1 || fail=$((fail + 1))
done
t_sysextd=$(( $(now_ms) - t0 ))
rm -f "$READERS/cfgreader.txt"; kill -USR2 "$pid"; wait_for 10 test -s "$READERS/cfgreader.txt"
W_SYSEXTD=$(cat "$READERS/cfgreader.txt")
expect "confext refreshes that failed" 0 "$fail"
note "sysextd, $REFRESHES confext refreshes in $t_sysextd ms: $W_SYSEXTD"
expect "the reader of /etc never missed the confext's file (sysextd)" 0 "$(field "$W_SYSEXTD" err)"
expect "windows the reader saw (sysextd)" 0 "$(field "$W_SYSEXTD" windows)"
check "sysextd unmerge" sysextd unmerge

# systemd-confext on the same images, with the same reader.
if command -v systemd-confext >/dev/null; then
	use cfg v1 "$CFGDIR"
	check "systemd-confext merge" systemd-confext merge
	sleep 0.3
	kill -USR1 "$pid"
	t0=$(now_ms)
	for ((i = 1; i <= CONFEXT_REFRESHES; i++)); do
		use cfg "v$(( i % 2 ? 2 : 1 ))" "$CFGDIR"
		systemd-confext refresh >/dev/null 2>&1 || note "systemd-confext refresh $i failed"
	done
	t_confext=$(( $(now_ms) - t0 ))
	rm -f "$READERS/cfgreader.txt"; kill -USR2 "$pid"; wait_for 10 test -s "$READERS/cfgreader.txt"
	W_CONFEXT=$(cat "$READERS/cfgreader.txt")
	note "systemd-confext, $CONFEXT_REFRESHES refreshes in $t_confext ms: $W_CONFEXT"
	systemd-confext unmerge
	note "window per refresh: sysextd $(field "$W_SYSEXTD" windows)/$REFRESHES ($(field "$W_SYSEXTD" window_ms) ms in all), systemd-confext $(field "$W_CONFEXT" windows)/$CONFEXT_REFRESHES ($(field "$W_CONFEXT" window_ms) ms in all, longest $(field "$W_CONFEXT" max_window_ms) ms)"
else
	not_ok "systemd-confext is not installed in the guest"
fi
systemctl stop vmtest-cfgreader.service vmtest-cfg.service

# --- (d) a slow unit -------------------------------------------------------------------
slow_image() {
	local v=$1 t
	t=$(mktemp -d)
	mkdir -p "$t/usr/lib/systemd/system" "$t/usr/lib/extension-release.d"
	cat >"$t/usr/lib/systemd/system/vmtest-slow.service" <<EOF
[Unit]
Description=vmtest: a service that takes 60 s to start ($v)
[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/sleep 60
EOF
	printf 'ID=_any\nEXTENSION_RELOAD_MANAGER=1\nEXTENSION_RESTART_UNITS=vmtest-slow.service\n' \
		>"$t/usr/lib/extension-release.d/extension-release.slow"
	mkfs.erofs "$IMGDIR/slow-$v.raw" "$t" >/dev/null || return 1
	rm -rf "$t"
}
for v in v1 v2; do slow_image "$v" || die "mkfs.erofs slow $v"; done
use slow v1 "$EXTDIR"
timed() { local t0; t0=$(now_ms); out=$("$@" 2>&1); rc=$?; took=$(( $(now_ms) - t0 )); }
timed sysextd merge
expect "merge of the slow image" 0 "$rc"
note "merge with a unit that takes 60 s to start: $took ms"
check "the merge answered within 20 s ($took ms)" test "$took" -lt 20000
check "the restart was queued" grep -q "Queued restart of vmtest-slow.service" <<<"$out"
wait_for 10 bash -c '[[ $(systemctl is-active vmtest-slow.service) == activating ]]'
use slow v2 "$EXTDIR"
timed sysextd refresh
expect "refresh of the slow image" 0 "$rc"
note "refresh with a unit that takes 60 s to start: $took ms (sysextd before issue 16 waited for the job, up to 90 s)"
check "the refresh answered within 20 s ($took ms)" test "$took" -lt 20000
timed sysextd status
check "status answered at once meanwhile ($took ms)" test "$took" -lt 5000
timed sysextd unmerge
expect "unmerge of the slow image" 0 "$rc"
check "the unmerge answered within 20 s ($took ms)" test "$took" -lt 20000
note "unmerge with the slow unit starting: $took ms"
rm -f "$EXTDIR/slow.raw"
systemctl stop vmtest-slow.service 2>/dev/null
finish
