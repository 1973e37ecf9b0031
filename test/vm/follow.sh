#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Namespaces that do not simply receive the host's mounts, on a running system with systemd
# 257 as PID 1 and systemd-machined:
#  (a) FollowMachines=yes: the daemon (started as a unit, IdleTimeoutSec=3 ignored) follows
#      a systemd-nspawn container registered with machined whose /usr is a read-only bind of
#      the host's /usr (started before the first merge, so that it shows the host's base: a
#      bind made after a merge shows a copy of the host's tree and is left alone, see
#      sysextd(8)); status lists it with machine name "ctr"; a reader inside it (writing to a
#      bind-mounted directory) sees v1 after the merge, never the base nor an error during
#      REFRESHES refreshes alternating v2/v1, one overlay on its /usr, and the base after the
#      unmerge; a second container with its own /usr (busybox) is not followed ("has its own
#      /usr; not followed.") and keeps its /usr; when the container stops, machined removes
#      the machine and status stops listing it;
#  (b) a delayed refresh (--delay=20) under two services with mount namespaces of their own
#      (PrivateTmp=yes: slaves of the host's), each with a reader: both keep v1 after the
#      refresh; the cooperative one calls Commit(a{sv}) over the bus from its own namespace and
#      sees v2 at once while the other still sees v1; the other moves when the deadline has
#      passed; neither reader ever sees the base or an error, and each sees v1, then v2.
# Usage (via test/vm/run): follow.sh [REFRESHES]
set -u
. "$(dirname "$0")/lib.sh"

REFRESHES=${1:-10}
CT=/var/lib/machines/ctr
CT2=/var/lib/machines/ctr2
CTOUT=/run/vmtest/ctr-out
STATE=/run/vmtest

note "$(uname -r), $(systemctl --version | head -n1), $(sysextd --version 2>&1 | head -n1)"
command -v systemd-nspawn >/dev/null && command -v machinectl >/dev/null ||
	die "systemd-nspawn/machinectl missing: the image lacks systemd-container (build-image PACKAGES)"

# --- setup --------------------------------------------------------------------------
systemctl stop sysextd-refresh.path 2>/dev/null
mkdir -p /etc/sysextd "$STATE" "$CTOUT" "$READERS"
printf '[Extensions]\nFollowMachines=yes\n[Daemon]\nIdleTimeoutSec=3\n' >/etc/sysextd/sysextd.conf
setup_base
for v in v1 v2; do make_image "$v" || die "mkfs.erofs $v"; done
use_image v1

# children_of PID: its child processes (/proc's children file, else a scan of /proc).
children_of() {
	local c p
	c=$(cat "/proc/$1/task/$1/children" 2>/dev/null)
	if [[ -n $c ]]; then echo "$c"; return; fi
	for p in /proc/[0-9]*; do
		[[ $(awk '{print $4}' "$p/stat" 2>/dev/null) == "$1" ]] && echo "${p#/proc/}"
	done
}
# What a process's root shows at the probe: /proc/PID/root resolves in its mount namespace.
probe_root() { cat "/proc/$1/root$PROBE" 2>&1; }
leader_of() { machinectl show "$1" -p Leader --value 2>/dev/null; }
followed_as() { sysextd status 2>/dev/null | grep -F "Follows:" | grep -qF ", machine $1)"; }
# dump_pid PID FILE: the counter line of the reader PID that writes FILE.
dump_pid() {
	rm -f "$2"
	kill -USR2 "$1"
	wait_for 10 test -s "$2" || { echo "reader $1 did not answer"; return 1; }
	cat "$2"
}
# reader_checks NAME LINE: the reader never saw the base nor an error, and saw both versions.
reader_checks() {
	note "$1: $2"
	expect "$1 reader never saw the base" 0 "$(field "$2" base)"
	expect "$1 reader never got an error" 0 "$(field "$2" err)"
	check "$1 reader saw v1 and v2" test "$(field "$2" v1)" -gt 0 -a "$(field "$2" v2)" -gt 0
}

# --- (a) the daemon, with FollowMachines=yes -----------------------------------------
check "sysextd.service started" systemctl start sysextd.service
wait_for 30 bash -c 'journalctl -b -u sysextd.service | grep -q "Following the machines of systemd-machined"' &&
	ok "the daemon follows machined's machines" || not_ok "no 'Following the machines' line from the daemon"

# The container: a directory whose /usr is the host's base (bound read-only), the reader's
# binary bound in, its counts written to a bind-mounted directory of the host.  The base is
# bound through a private bind of it: nspawn's namespace is a slave of the host's, and a bind
# of the host's /usr itself would receive the host's trees by propagation (status would say
# "shows the host's tree already; left alone") instead of being reached by sysextd directly,
# which is what this checks.
USRPRIV=/run/vmtest/usr-private
mkdir -p "$USRPRIV"
mount --bind /usr "$USRPRIV" && mount --make-private "$USRPRIV" || die "cannot make a private bind of /usr"
mkdir -p "$CT"/{usr,etc,proc,sys,dev,run,tmp,out,vmtest-bin}
for l in bin sbin lib lib64; do ln -sfn "usr/$l" "$CT/$l"; done
ln -sfn ../usr/lib/os-release "$CT/etc/os-release"
nspawn_opts=(--register=yes --as-pid2 --console=pipe --resolv-conf=off --timezone=off --link-journal=no)
check "container ctr started" systemd-run --unit=ctr --quiet -p Type=simple \
	systemd-nspawn "${nspawn_opts[@]}" -D "$CT" --machine=ctr "--bind-ro=$USRPRIV:/usr" \
	"--bind=$CTOUT:/out" "--bind-ro=$VMTEST_BIN:/vmtest-bin" \
	-- /vmtest-bin/vmtest-reader "$PROBE" /out/ctr.txt 1000
if wait_for 120 bash -c '[[ $(machinectl show ctr -p State --value 2>/dev/null) == running ]]'; then
	ok "machinectl lists ctr as running"
else
	machinectl list; systemctl status ctr.service --no-pager | tail -n 20
	die "container ctr did not come up"
fi
machinectl list
leader=$(leader_of ctr)
rpid=
wait_for 30 bash -c '[[ -n $(cat /proc/'"$leader"'/task/'"$leader"'/children 2>/dev/null) ]]' || true
for c in $(children_of "$leader"); do [[ $(cat "/proc/$c/comm" 2>/dev/null) == vmtest-reader ]] && rpid=$c; done
[[ -n $rpid ]] || die "the reader does not run in container ctr (leader $leader)"
note "container ctr: leader $leader, reader $rpid"
expect "ctr sees the base before the merge" base "$(probe_root "$leader")"

# A second container with its own /usr: never followed.
mkdir -p "$CT2"/{usr/bin,usr/share/vmtest,etc,proc,sys,dev,run,tmp}
cp /bin/busybox "$CT2/usr/bin/busybox"
echo own >"$CT2$PROBE"
for l in bin sbin lib; do ln -sfn "usr/$l" "$CT2/$l"; done
check "container ctr2 (its own /usr) started" systemd-run --unit=ctr2 --quiet -p Type=simple \
	systemd-nspawn "${nspawn_opts[@]}" -D "$CT2" --machine=ctr2 -- /usr/bin/busybox sleep 100000
wait_for 120 bash -c '[[ $(machinectl show ctr2 -p State --value 2>/dev/null) == running ]]' ||
	not_ok "container ctr2 did not come up"

if wait_for 60 followed_as ctr; then ok "status lists ctr as followed, with its machine name"; else
	not_ok "status does not list machine ctr as followed"; fi
sysextd status
if sysextd status 2>/dev/null | grep -q "usr shows"; then not_ok "status: ctr's /usr was left alone"; else
	ok "ctr's /usr is followed by sysextd itself (not left alone)"; fi
wait_for 60 bash -c 'journalctl -b -u sysextd.service | grep -q "Machine ctr2 has its own /usr; not followed."' &&
	ok "ctr2: 'Machine ctr2 has its own /usr; not followed.'" || not_ok "no 'has its own /usr' line for ctr2"
if followed_as ctr2; then not_ok "ctr2 (its own /usr) is followed"; else ok "ctr2 is not followed"; fi
check "the daemon stays although IdleTimeoutSec=3 (FollowMachines=yes)" bash -c 'sleep 8; systemctl is-active -q sysextd.service'

# --- (a) merge, refreshes, unmerge under the container's reader ----------------------
check "sysextd merge" sysextd merge
expect "merged in the host" v1 "$(probe_in)"
expect "merged in ctr" v1 "$(probe_root "$leader")"
check "the private bind of the base still shows the base (nothing reached ctr by propagation)" \
	test "$(cat "$USRPRIV/share/vmtest/probe")" == base
expect "ctr2 keeps its own /usr" own "$(probe_root "$(leader_of ctr2)")"
kill -USR1 "$rpid"
refresh_fail=0 wrong=0
for ((i = 1; i <= REFRESHES; i++)); do
	v=v$(( i % 2 ? 2 : 1 ))
	use_image "$v"
	if ! out=$(sysextd refresh 2>&1); then
		refresh_fail=$((refresh_fail + 1))
		((refresh_fail <= 3)) && echo "# refresh $i failed: $out"
		continue
	fi
	got=$(probe_root "$leader")
	if [[ $got != "$v" ]]; then
		wrong=$((wrong + 1))
		((wrong <= 3)) && echo "# refresh $i: ctr sees '$got', want $v"
	fi
done
expect "refreshes that failed" 0 "$refresh_fail"
expect "refreshes after which ctr saw the wrong version" 0 "$wrong"
reader_checks ctr "$(dump_pid "$rpid" "$CTOUT/ctr.txt")"
expect "ctr: one overlay on /usr after $REFRESHES refreshes" 1 "$(usr_overlays_in "$leader")"
expect "ctr2 still keeps its own /usr" own "$(probe_root "$(leader_of ctr2)")"
sysextd status
check "sysextd unmerge" sysextd unmerge
expect "the host sees the base after unmerge" base "$(probe_in)"
expect "ctr sees the base after unmerge" base "$(probe_root "$leader")"
expect "ctr: no overlay on /usr after unmerge" 0 "$(usr_overlays_in "$leader")"

# --- (a) the machine goes ---------------------------------------------------------
check "container ctr stopped" systemctl stop ctr.service
wait_for 60 bash -c '! machinectl show ctr >/dev/null 2>&1' || not_ok "machined still lists ctr"
if wait_for 60 bash -c '! sysextd status 2>/dev/null | grep -qF ", machine ctr)"'; then
	ok "status no longer lists ctr"
else
	not_ok "status still lists ctr after it went"; sysextd status
fi
systemctl stop ctr2.service 2>/dev/null
umount "$USRPRIV"

# --- (b) a delayed refresh: one service commits, the other waits for the deadline -----
# The cooperative service: its main process (bash, in the service's mount namespace) runs
# the reader and, on SIGHUP, calls Commit from that namespace.  (Not ExecReload=: systemd
# sets up a new mount namespace for each command of a unit.)
cat >"$STATE/coop.sh" <<EOF
#!/bin/bash
"$READER" "$PROBE" "$READERS/vmtest-coop.txt" 1000 &
rpid=\$!
echo "\$rpid" >"$STATE/coop.reader"
commit() {
	busctl call org.sysextd1 /org/sysextd1 org.sysextd1.Manager Commit 'a{sv}' 0 >"$STATE/coop.commit.tmp" 2>&1
	echo "rc=\$?" >>"$STATE/coop.commit.tmp"
	mv "$STATE/coop.commit.tmp" "$STATE/coop.commit"
}
trap commit HUP
while kill -0 "\$rpid" 2>/dev/null; do wait "\$rpid"; done
EOF
chmod 755 "$STATE/coop.sh"
printf '[Unit]\nDescription=vmtest cooperative reader\n[Service]\nExecStart=/bin/bash %s\nPrivateTmp=yes\n' "$STATE/coop.sh" \
	>/run/systemd/system/vmtest-coop.service
write_reader_unit vmtest-lazy PrivateTmp=yes
systemctl daemon-reload
rm -f "$STATE/coop.reader" "$STATE/coop.commit"
check "services started" systemctl start vmtest-coop.service vmtest-lazy.service
wait_for 10 test -s "$STATE/coop.reader"
coop_main=$(main_pid vmtest-coop) coop_reader=$(cat "$STATE/coop.reader" 2>/dev/null) lazy=$(main_pid vmtest-lazy)
note "vmtest-coop: main $coop_main, reader $coop_reader; vmtest-lazy: $lazy"
for p in "$coop_main" "$lazy"; do
	check "process $p has a mount namespace of its own" \
		test "$(readlink "/proc/$p/ns/mnt")" != "$(readlink /proc/1/ns/mnt)"
done
check "the cooperative reader is in its service's namespace" \
	test "$(readlink "/proc/$coop_reader/ns/mnt")" == "$(readlink "/proc/$coop_main/ns/mnt")"

use_image v1
check "sysextd merge (v1)" sysextd merge
expect "vmtest-coop sees v1" v1 "$(probe_in "$coop_main")"
expect "vmtest-lazy sees v1" v1 "$(probe_in "$lazy")"
kill -USR1 "$coop_reader" "$lazy"
use_image v2
t0=$(date +%s)
check "sysextd refresh --delay=20" sysextd refresh --delay=20
expect "host still sees v1 during the delay" v1 "$(probe_in)"
expect "vmtest-coop still sees v1 during the delay" v1 "$(probe_in "$coop_main")"
expect "vmtest-lazy still sees v1 during the delay" v1 "$(probe_in "$lazy")"
sysextd status

kill -HUP "$coop_main"
if wait_for 30 test -s "$STATE/coop.commit"; then
	note "Commit from vmtest-coop: $(tr '\n' ' ' <"$STATE/coop.commit")"
	check "Commit from vmtest-coop's namespace succeeded" grep -q '^rc=0$' "$STATE/coop.commit"
else
	not_ok "vmtest-coop did not call Commit"
fi
expect "vmtest-coop sees v2 after its commit" v2 "$(probe_in "$coop_main")"
expect "vmtest-coop's reader process sees v2" v2 "$(probe_in "$coop_reader")"
expect "vmtest-lazy still sees v1" v1 "$(probe_in "$lazy")"
expect "the host still sees v1" v1 "$(probe_in)"

# The deadline: 20 s after the refresh.  The daemon commits by itself then: nobody runs a
# command.  (Up to 40 s more on a slow guest.)
sleep $(( t0 + 21 - $(date +%s) > 0 ? t0 + 21 - $(date +%s) : 0 ))
for ((i = 0; i < 400; i++)); do
	[[ $(probe_in "$lazy") == v2 ]] && break
	sleep 0.1
done
note "the lazy service moved $(( $(date +%s) - t0 )) s after the delayed refresh (deadline 20 s)"
expect "vmtest-lazy sees v2 after the deadline" v2 "$(probe_in "$lazy")"
expect "the host sees v2 after the deadline" v2 "$(probe_in)"
for p in "" "$coop_main" "$lazy"; do
	expect "${p:-host}: one overlay on /usr" 1 "$(usr_overlays_in "$p")"
done
reader_checks vmtest-coop "$(dump_pid "$coop_reader" "$READERS/vmtest-coop.txt")"
reader_checks vmtest-lazy "$(dump_pid "$lazy" "$READERS/vmtest-lazy.txt")"
sysextd status

check "sysextd unmerge" sysextd unmerge
systemctl stop vmtest-coop.service vmtest-lazy.service
finish
