#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# The fleet path (README, "Updating a fleet") on a running system with systemd 257 as PID 1:
# systemd-sysupdate fetches an extension over HTTP (busybox httpd on 127.0.0.1 serves a
# directory with SHA256SUMS; Type=url-file, target /var/lib/extensions/app.raw.v/,
# InstancesMax=2), its OnSuccess= runs sysextd-refresh.service (sysextd refresh
# --confirm-within=), whose OnSuccess= runs a health check that confirms only a healthy
# version:
#  (a) v1 installed by sysupdate and merged; two reader services (ProtectSystem=strict,
#      PrivateMounts=yes) see it;
#  (b) v2, unhealthy: sysupdate installs it, the refresh makes it live, the health check does
#      not confirm it, and the daemon rolls back to v1 at the deadline by itself; status shows
#      the rollback and the pin;
#  (c) the pin survives a refresh by sysextd-refresh.path (v2 is still installed);
#  (d) v3, healthy: sysupdate installs it (and removes v1, InstancesMax=2), the refresh unpins
#      (v3 is newer than v2, the version rolled back from) and makes it live, the health check
#      confirms it, and it stays past the deadline;
#  (e) through all of it the readers never saw the base and never got an error (windows 0);
#  (f) the time of a rollback against a refresh on the same images (medians of 5), the readers
#      again seeing no base and no error;
#  (g) varlinkctl calls of every io.systemd.sysext method on sysextd-varlink.socket (in place
#      of systemd-sysext.socket), and io.systemd.SysUpdate.Notify.OnCompletedUpdate on the
#      notify socket, as systemd-sysupdate 258 calls it after an update; sysextd's own
#      org.sysextd1.Manager there, and root's sysextd refresh and unmerge through it with no
#      bus reachable.
# Usage (via test/vm/run): sysupdate.sh [sd-varlink|json-c]: the varlink implementation the
# installed binary must have (the trixie build root's libsystemd 257 gives sd-varlink, Debian
# 12's libsystemd 252 the json-c layer); without it, either.
set -u
. "$(dirname "$0")/lib.sh"

SRC=/var/lib/vmtest/sysupdate-src
VDIR=$EXTDIR/app.raw.v
HEALTH=/usr/share/vmtest/health
DEADLINE=20  # seconds a refreshed generation has to be confirmed in
PORT=18080
NS=(vmtest-strict vmtest-private)

note "$(uname -r), $(systemctl --version | head -n1), $(sysextd --version 2>&1 | head -n1)"
impl=json-c
grep -q sd_varlink_server_new /usr/bin/sysextd && impl=sd-varlink
note "varlink implementation of this build: $impl"
[[ -z ${1:-} ]] || expect "the build's varlink implementation" "$1" "$impl"
systemctl stop sysextd-refresh.path 2>/dev/null
mkdir -p /etc/sysextd "$SRC" "$EXTDIR"
printf '[Daemon]\nIdleTimeoutSec=3\n' >/etc/sysextd/sysextd.conf
setup_base

# app_image VERSION HEALTH: an erofs sysext "app" whose $PROBE says vVERSION and $HEALTH says
# HEALTH ("ok" or "bad"), in $IMGDIR/app_VERSION.raw.
app_image() {
	local t
	t=$(mktemp -d)
	mkdir -p "$t/usr/share/vmtest" "$t/usr/lib/extension-release.d"
	echo "v$1" >"$t/usr/share/vmtest/probe"
	echo "$2" >"$t/usr/share/vmtest/health"
	printf 'ID=_any\n' >"$t/usr/lib/extension-release.d/extension-release.app"
	mkdir -p "$IMGDIR"
	mkfs.erofs "$IMGDIR/app_$1.raw" "$t" >/dev/null || return 1
	rm -rf "$t"
}
# publish VERSION: put it on the update server, with a new SHA256SUMS.
publish() {
	cp "$IMGDIR/app_$1.raw" "$SRC/" && (cd "$SRC" && sha256sum app_*.raw >SHA256SUMS.new && mv SHA256SUMS.new SHA256SUMS)
}
app_image 1 ok || die "mkfs.erofs app 1"
app_image 2 bad || die "mkfs.erofs app 2"
app_image 3 ok || die "mkfs.erofs app 3"

# The update server.
busybox httpd -f -p "127.0.0.1:$PORT" -h "$SRC" &
httpd_pid=$!

# --- the files of README's "Updating a fleet" -------------------------------------------
mkdir -p /etc/sysupdate.d /etc/systemd/system/systemd-sysupdate.service.d \
	/etc/systemd/system/sysextd-refresh.service.d
cat >/etc/sysupdate.d/50-app.transfer <<EOF
[Transfer]
# No GPG keyring in this test: SHA256SUMS alone checks what is downloaded.
Verify=no

[Source]
Type=url-file
Path=http://127.0.0.1:$PORT/
MatchPattern=app_@v.raw

[Target]
Type=regular-file
Path=$VDIR
MatchPattern=app_@v.raw
Mode=0444
InstancesMax=2
EOF
mkdir -p "$VDIR"

# sysupdate_run: one systemd-sysupdate.service run, to its end.
sysupdate_run() { systemctl start --wait systemd-sysupdate.service; }

# --- (a) v1 ---------------------------------------------------------------------------
publish 1 || die "publish 1"
check "systemd-sysupdate installs app 1" sysupdate_run
check "app_1.raw in $VDIR" test -f "$VDIR/app_1.raw"
check "sysextd merge" sysextd merge
expect "v1 merged in the host" v1 "$(probe_in)"

# Now the health-gated chain: sysupdate -> refresh (--confirm-within) -> health check.
cat >/etc/systemd/system/systemd-sysupdate.service.d/50-sysextd.conf <<'EOF'
[Unit]
OnSuccess=sysextd-refresh.service
EOF
cat >/etc/systemd/system/sysextd-refresh.service.d/50-confirm.conf <<EOF
[Unit]
OnSuccess=vmtest-health.service

[Service]
ExecStart=
ExecStart=/usr/bin/sysextd refresh --confirm-within=$DEADLINE
EOF
cat >/etc/systemd/system/vmtest-health.service <<EOF
[Unit]
Description=vmtest health check of the merged extension

[Service]
Type=oneshot
ExecStart=/bin/sh -c 'test "\$(cat $HEALTH)" = ok && exec /usr/bin/sysextd confirm'
EOF
write_reader_unit vmtest-strict ProtectSystem=strict "ReadWritePaths=$READERS"
write_reader_unit vmtest-private PrivateMounts=yes
systemctl daemon-reload
check "reader services started" systemctl start vmtest-strict.service vmtest-private.service
for s in "${NS[@]}"; do expect "$s sees v1" v1 "$(probe_in "$(main_pid "$s")")"; done
for s in "${NS[@]}"; do reset_reader "$s"; done

status_text() { sysextd status 2>&1; }

# --- (b) v2, unhealthy: rolled back at the deadline -----------------------------------------
publish 2 || die "publish 2"
t0=$(now_ms)
check "systemd-sysupdate installs app 2" sysupdate_run
check "app_1.raw and app_2.raw kept" test -f "$VDIR/app_1.raw" -a -f "$VDIR/app_2.raw"
if wait_for 120 bash -c "[[ \$(cat $PROBE) == v2 ]]"; then
	ok "the refresh after the update made v2 live ($(( $(now_ms) - t0 )) ms after sysupdate started)"
else
	not_ok "v2 not live after sysupdate: $(probe_in)"; systemctl status sysextd-refresh.service --no-pager
fi
st=$(status_text)
if [[ $st == *"must be confirmed"* || $st == *"Confirm: generation"* ]]; then ok "status shows the generation waiting for confirmation"; else not_ok "status shows no wait for confirmation:
$st"; fi
wait_for 60 bash -c '[[ $(systemctl is-active vmtest-health.service) == failed ]]'
expect "the health check did not confirm v2" failed "$(systemctl is-active vmtest-health.service)"
t1=$(now_ms)
if wait_for $((DEADLINE * 4)) bash -c "[[ \$(cat $PROBE) == v1 ]]"; then
	ok "the daemon rolled back to v1 at the deadline ($(( $(now_ms) - t1 )) ms after the health check)"
else
	not_ok "no rollback at the deadline: $(probe_in)"
fi
st=$(status_text)
note "status after the deadline's rollback:"; sed 's/^/#   /' <<<"$st"
check "status: the last rollback, by the deadline" grep -q "Last rollback: .*its confirmation deadline passed" <<<"$st"
check "status: app pinned at version 1" grep -q "Pinned: app at version 1" <<<"$st"
for s in "${NS[@]}"; do expect "$s sees v1 after the rollback" v1 "$(probe_in "$(main_pid "$s")")"; done

# --- (c) the pin survives a refresh by the path unit -----------------------------------------
check "sysextd-refresh.path started" systemctl start sysextd-refresh.path
before=$(systemctl show -P InvocationID sysextd-refresh.service)
touch "$EXTDIR/.vmtest-poke" && rm -f "$EXTDIR/.vmtest-poke"
if wait_for 60 bash -c "[[ \$(systemctl show -P InvocationID sysextd-refresh.service) != '$before' &&
		\$(systemctl is-active sysextd-refresh.service) != activating ]]"; then
	ok "sysextd-refresh.path ran sysextd-refresh.service"
else
	not_ok "sysextd-refresh.path did not run the refresh"
fi
expect "the path unit's refresh kept the pinned v1 (v2 still installed)" "v1 yes" \
	"$(probe_in) $([[ -f $VDIR/app_2.raw ]] && echo yes)"
systemctl stop sysextd-refresh.path

# --- (d) v3, healthy: confirmed, stays ---------------------------------------------------------
systemctl reset-failed vmtest-health.service 2>/dev/null
publish 3 || die "publish 3"
check "systemd-sysupdate installs app 3" sysupdate_run
expect "InstancesMax=2: app 2 and 3 kept, 1 removed" "app_2.raw app_3.raw" "$(cd "$VDIR" && echo app_*.raw)"
if wait_for 120 bash -c "[[ \$(cat $PROBE) == v3 ]]"; then ok "v3 live (unpinned: newer than 2)"; else not_ok "v3 not live: $(probe_in)"; fi
if wait_for 60 bash -c '[[ $(systemctl show -P Result vmtest-health.service) == success && $(systemctl is-active vmtest-health.service) != activating ]]'; then
	ok "the health check confirmed v3"
else
	not_ok "the health check did not confirm v3 ($(systemctl is-active vmtest-health.service))"
fi
sleep $((DEADLINE + 5))
expect "v3 stays past the deadline" v3 "$(probe_in)"
st=$(status_text)
check "status: nothing waits for confirmation, no pin" bash -c '! grep -q -e "must be confirmed" -e "^Confirm:" -e "^Pinned:" <<<"$1"' _ "$st"

# --- (e) the readers ---------------------------------------------------------------------------
for s in "${NS[@]}"; do
	line=$(dump_reader "$s")
	note "$s: $line"
	expect "$s reader never saw the base (update, deadline rollback, path refresh, update)" 0 "$(field "$line" base)"
	expect "$s reader never got an error" 0 "$(field "$line" err)"
	expect "$s reader: windows" 0 "$(field "$line" windows)"
	check "$s reader saw v1, v2 and v3" test "$(field "$line" v1)" -gt 0 -a "$(field "$line" v2)" -gt 0 -a "$(field "$line" vn)" -gt 0
done

# --- (f) rollback against refresh, same images -------------------------------------------------
rm -f /etc/systemd/system/sysextd-refresh.service.d/50-confirm.conf
systemctl daemon-reload
median() { sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
out=$(sysextd rollback 2>&1)
rc=$?
check "a rollback to v1's generation (app_1.raw removed by sysupdate) is refused" test "$rc" -ne 0
check "the refusal names the image" grep -q "image app version 1" <<<"$out"
note "$out"
expect "the live tree unchanged by the refusal" v3 "$(probe_in)"
# The generation of app 2, from status' "Generations kept:" ("  N  DATE  app 2").
g2=$(sysextd status 2>/dev/null | awk '/^Generations kept:/ { f = 1; next } f && $(NF - 1) == "app" && $NF == "2" { g = $1 } END { print g }')
check "a generation of app 2 is kept" test -n "$g2"
rb=() rf=()
for s in "${NS[@]}"; do reset_reader "$s"; done
for ((i = 0; i < 5; i++)); do
	to=(); ((i == 0)) && to=(--to="$g2")
	t0=$(now_ms); sysextd rollback "${to[@]}" >/dev/null 2>&1 || not_ok "rollback $i failed"; rb+=($(( $(now_ms) - t0 )))
	[[ $(probe_in) == v2 ]] || not_ok "rollback $i: $(probe_in), want v2"
	t0=$(now_ms); sysextd rollback --unpin >/dev/null 2>&1 || not_ok "rollback --unpin $i failed"; rf+=($(( $(now_ms) - t0 )))
	[[ $(probe_in) == v3 ]] || not_ok "refresh $i: $(probe_in), want v3"
done
for s in "${NS[@]}"; do
	line=$(dump_reader "$s")
	note "$s during the rollbacks and refreshes: $line"
	expect "$s reader during 5 rollbacks and 5 refreshes: base, errors, windows" "0 0 0" \
		"$(field "$line" base) $(field "$line" err) $(field "$line" windows)"
done
note "rollback (v3 -> v2): median $(printf '%s\n' "${rb[@]}" | median) ms of ${rb[*]}"
note "refresh by rollback --unpin (v2 -> v3): median $(printf '%s\n' "${rf[@]}" | median) ms of ${rf[*]}"

# --- (g) varlinkctl --------------------------------------------------------------------------------
VL=/run/systemd/io.systemd.sysext
NOTIFY=/run/systemd/sysupdate/notify/io.systemd.sysext
systemctl disable --now systemd-sysext.socket >/dev/null 2>&1
check "sysextd-varlink.socket enabled and listening" systemctl enable --now sysextd-varlink.socket
generation() { busctl get-property org.sysextd1 /org/sysextd1 org.sysextd1.Manager Generation 2>/dev/null | awk '{print $2}'; }
# vl_expect DESCRIPTION PATTERN VARLINKCTL-ARGS...: the output (and errors) match PATTERN.
vl_expect() {
	local d=$1 pat=$2 out
	shift 2
	out=$(varlinkctl "$@" 2>&1)
	if grep -q -E -- "$pat" <<<"$out"; then ok "varlinkctl $d"; else not_ok "varlinkctl $d: no '$pat' in:
$out"; fi
}
vl_expect "info: io.systemd.sysext" 'io\.systemd\.sysext' info "$VL"
vl_expect "introspect: method Refresh" 'method Refresh' introspect "$VL" io.systemd.sysext
vl_expect "List: app" '"Name" *: *"app"' call --more "$VL" io.systemd.sysext.List '{}'
vl_expect "List of confexts: NoImagesFound" 'NoImagesFound' call --more "$VL" io.systemd.sysext.List '{"class":"confext"}'
vl_expect "Merge while merged: AlreadyMerged" 'AlreadyMerged' call "$VL" io.systemd.sysext.Merge '{}'
g=$(generation)
check "Refresh '{\"alwaysRefresh\":true}'" varlinkctl call "$VL" io.systemd.sysext.Refresh '{"alwaysRefresh":true}'
check "Refresh made a new generation" test "$(generation)" -gt "$g"
check "Unmerge" varlinkctl call "$VL" io.systemd.sysext.Unmerge '{}'
expect "the base after Unmerge" base "$(probe_in)"
check "Merge" varlinkctl call "$VL" io.systemd.sysext.Merge '{}'
expect "v3 after Merge" v3 "$(probe_in)"
g=$(generation)
check "Refresh with nothing changed" varlinkctl call "$VL" io.systemd.sysext.Refresh '{}'
expect "nothing changed: the same generation" "$g" "$(generation)"
app_image 4 ok && cp "$IMGDIR/app_4.raw" "$VDIR/"
check "OnCompletedUpdate on the notify socket, as systemd-sysupdate calls it" \
	varlinkctl call "$NOTIFY" io.systemd.SysUpdate.Notify.OnCompletedUpdate '{"component":"app","version":"4"}'
expect "OnCompletedUpdate refreshed: v4" v4 "$(probe_in)"
check "Unmerge through the notify socket" varlinkctl call "$NOTIFY" io.systemd.sysext.Unmerge '{}'
expect "the base" base "$(probe_in)"

# sysextd's own interface on the same socket, and root's commands through it (no bus reachable:
# only that way works).
vl_expect "introspect: org.sysextd1.Manager" 'error Failed' introspect "$VL" org.sysextd1.Manager
vl_expect "org.sysextd1.Manager.Merge: generation and messages" '"messages"' \
	call "$VL" org.sysextd1.Manager.Merge '{"root":"/","classes":["sysext"]}'
expect "v4 after org.sysextd1.Manager.Merge" v4 "$(probe_in)"
vl_expect "org.sysextd1.Manager for another root: WrongRoot" 'WrongRoot' \
	call "$VL" org.sysextd1.Manager.Refresh '{"root":"/elsewhere"}'
vl_expect "org.sysextd1.Manager without a root: InvalidParameter" 'InvalidParameter' \
	call "$VL" org.sysextd1.Manager.Refresh '{}'
g=$(generation)
check "sysextd refresh --always-refresh=yes with no bus reachable" \
	env DBUS_SYSTEM_BUS_ADDRESS=unix:path=/nonexistent sysextd refresh --always-refresh=yes
check "that refresh made a new generation" test "$(generation)" -gt "$g"
check "sysextd unmerge with no bus reachable" env DBUS_SYSTEM_BUS_ADDRESS=unix:path=/nonexistent sysextd unmerge
expect "the base after it" base "$(probe_in)"

kill "$httpd_pid" 2>/dev/null
systemctl stop vmtest-strict.service vmtest-private.service
finish
