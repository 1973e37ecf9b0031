#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Signed verity images through dm-verity on a kernel with device-mapper (issue 6, item 7).
# verity.host built the images on the host (share/host/): a signed image, a signed image
# with one byte flipped in a file's data, one with a byte flipped in its release file, and
# the certificate.  With ImagePolicy=signed and that certificate in /etc/verity.d:
#  - `sysextd merge` as a plain client (D-Bus activated daemon) merges the good image;
#  - status --json lists it with verity "dm" (not "userspace") and signed true, and a
#    sysextd-* device-mapper device exists while it is merged;
#  - the tampered images are not merged, and list --json gives each a reason that mentions
#    verity; reading any file of the merged tree never returns tampered data;
#  - after `sysextd unmerge`, no sysextd process holds anything of the old tree and, once
#    systemd-udevd lets go of it too, no sysextd-* dm device and no loop device of ours remain;
#  - a `sysextd --no-bus merge` killed (SIGKILL) while dm-verity reads its big image in full
#    leaves no dm device and no loop device (deferred removal was requested right after the
#    device was opened);
#  - a sysextd-* dm device that nothing holds (left by a process killed before it could ask
#    for its removal) is removed when the daemon starts.
set -u
. "$(dirname "$0")/lib.sh"

H=$VMTEST_SHARE/host
GOOD=vsigned
BAD=(vtampered vbadrel)

# sysextd's dm devices (names from /sys, no dmsetup needed) and attached loop devices.
dm_ours() {
	local f
	for f in /sys/block/dm-*/dm/name; do
		[[ -e $f ]] && grep -h '^sysextd-' "$f"
	done
	return 0
}
loops_attached() {
	local f n=0
	for f in /sys/block/loop*/loop/backing_file; do [[ -e $f ]] && n=$((n + 1)); done
	echo "$n"
}
# json_obj JSON NAME: the flat JSON object whose "name" is NAME (images have no nesting).
json_obj() { tr -d '\n' <<<"$1" | grep -o "{[^{}]*\"name\": *\"$2\"[^{}]*}" | head -n1; }
# json_get OBJECT KEY: a string (unquoted) or literal value.
json_get() {
	sed -n -E "s/.*\"$2\": *(\"(([^\"\\\\]|\\\\.)*)\"|([a-z0-9.-]+)).*/\\2\\4/p" <<<"$1"
}

note "$(uname -r), $(systemctl --version | head -n1), $(sysextd --version 2>&1 | head -n1)"

# --- setup --------------------------------------------------------------------------
systemctl stop sysextd-refresh.path 2>/dev/null
mkdir -p /etc/sysextd /etc/verity.d "$EXTDIR"
printf '[Extensions]\nImagePolicy=signed\n\n[Daemon]\nIdleTimeoutSec=3\n' >/etc/sysextd/sysextd.conf
cp "$H/trusted.crt" /etc/verity.d/vmtest.crt
setup_base
for n in "$GOOD" "${BAD[@]}"; do
	for s in raw verity roothash roothash.p7s; do
		cp "$H/$n.$s" "$EXTDIR/$n.$s" || die "copy $n.$s from the share"
	done
done
loops_before=$(loops_attached)
check "device-mapper: /dev/mapper/control exists" test -e /dev/mapper/control
expect "no sysextd dm device before the merge" "" "$(dm_ours)"

# --- merge ----------------------------------------------------------------------------
expect "sysextd.service inactive before the first call" inactive "$(systemctl is-active sysextd.service)"
t0=$(now_ms)
sysextd merge >/run/vmtest-merge.out 2>/run/vmtest-merge.err
rc=$?
note "merge exited $rc in $(( $(now_ms) - t0 )) ms; stderr: $(tr '\n' '|' </run/vmtest-merge.err)"
expect "sysextd merge (client, over the bus) succeeds with the bad images skipped" 0 "$rc"
check "sysextd.service was activated by the call" test -n "$(systemctl show -P InvocationID sysextd.service)"
expect "the signed image is merged" "$GOOD" "$(cat "/usr/share/vmtest/$GOOD" 2>&1)"
expect "its blob reads back intact" "$(grep "$GOOD-blob" "$H/blobs.md5" | cut -d' ' -f1)" \
	"$(md5sum "/usr/share/vmtest/$GOOD-blob" 2>&1 | cut -d' ' -f1)"
expect "one overlay on /usr" 1 "$(usr_overlays_in)"
dm=$(dm_ours)
check "a sysextd-* dm device exists while merged ($(tr '\n' ' ' <<<"$dm"))" test -n "$dm"
for d in $dm; do
	note "$d: $(cat "/sys/block/$(basename "$(readlink -f "/dev/mapper/$d")")/dm/uuid" 2>/dev/null)"
done
src=$(findmnt -n -o SOURCE --target "/usr/share/vmtest/$GOOD" | tail -n1)
note "the merged file is on $src"

status=$(sysextd status --json)
rc=$?
expect "sysextd status --json" 0 "$rc"
o=$(json_obj "$status" "$GOOD")
note "status --json: $o"
expect "status --json: $GOOD verity" dm "$(json_get "$o" verity)"
expect "status --json: $GOOD signed" true "$(json_get "$o" signed)"
expect "status --json: policy" signed "$(json_get "$(tr -d '\n' <<<"$status")" policy)"

list=$(sysextd list --json)
expect "sysextd list --json" 0 "$?"
o=$(json_obj "$list" "$GOOD")
expect "list --json: $GOOD compatible" true "$(json_get "$o" compatible)"
expect "list --json: $GOOD verity" dm "$(json_get "$o" verity)"
for n in "${BAD[@]}"; do
	o=$(json_obj "$list" "$n")
	note "list --json: $o"
	reason=$(json_get "$o" reason)
	expect "$n is refused (list --json compatible)" false "$(json_get "$o" compatible)"
	if [[ ${reason,,} == *verity* ]]; then
		ok "$n: the reason mentions verity ($reason)"
	else
		not_ok "$n: the reason does not mention verity: '$reason'"
	fi
	check "$n: not merged (/usr/share/vmtest/$n absent)" test ! -e "/usr/share/vmtest/$n"
	if [[ -e /usr/share/vmtest/$n-blob ]]; then
		# Merged anyway: dm-verity must at least refuse to serve the tampered block.
		if md5sum "/usr/share/vmtest/$n-blob" >/run/vmtest-blob.out 2>&1; then
			not_ok "$n: the tampered blob is merged and reads without error: $(cat /run/vmtest-blob.out)"
		else
			note "$n: the tampered blob is merged; reading it fails: $(cat /run/vmtest-blob.out)"
		fi
	fi
	if grep -q "$n" /run/vmtest-merge.err; then ok "merge warned about $n"; else not_ok "merge did not warn about $n"; fi
done
dmesg | grep -i 'verity' | tail -n 5 | sed 's/^/# dmesg: /'

# --- unmerge --------------------------------------------------------------------------
check "sysextd unmerge" sysextd unmerge
expect "base after unmerge" base "$(probe_in)"
expect "no overlay on /usr after unmerge" 0 "$(usr_overlays_in)"
# The old tree is detached lazily: it lives on, and with it the dm-verity device and the loop
# devices under its image, while some process still has a file of it open or mapped.  No
# sysextd process may be one of them.  systemd-udevd can be: it reloads its hardware database
# and module indexes from /usr when a uevent finds them changed (the dm devices `list` opens
# while the tree is merged are such events) and keeps them mapped until it reloads again.
# Ask it to; then nothing may be left.
holders=$(old_tree_holders)
note "holding the old tree after the unmerge: $(tr '\n' ';' <<<"${holders:-nothing}")"
expect "no sysextd process holds the old tree" "" "$(awk '$2 == "sysextd"' <<<"$holders")"
expect "nothing but systemd-udevd holds the old tree" "" "$(awk '$2 != "systemd-udevd"' <<<"$holders")"
[[ -n $holders ]] && udevadm control --reload
no_dm_ours() { [[ -z $(dm_ours) ]]; }
loops_as_before() { (( $(loops_attached) <= loops_before )); }
if wait_for 20 no_dm_ours; then
	ok "no sysextd-* dm device once the old tree is let go (deferred removal done)"
else
	not_ok "sysextd dm devices left: $(dm_ours | tr '\n' ' ')"
	dmsetup info 2>/dev/null | grep -E '^(Name|State|Open count)' | sed 's/^/#   /'
	note "holding the old tree now: $(old_tree_holders | tr '\n' ';')"
fi
if wait_for 20 loops_as_before; then
	ok "loop devices attached as before the merge ($loops_before)"
else
	not_ok "loop devices attached: $(loops_attached), before the merge $loops_before: $(cat /sys/block/loop*/loop/backing_file 2>/dev/null | tr '\n' ' ')"
fi
if wait_for 30 bash -c '[[ $(systemctl is-active sysextd.service) == inactive ]]'; then
	ok "the daemon exited when idle"
else
	not_ok "sysextd.service still $(systemctl is-active sysextd.service) 30 s after the unmerge"
fi

# --- a kill during dm-verity's full read ----------------------------------------------
BIGDIR=/var/lib/vmtest/big
mkdir -p "$BIGDIR"
for s in raw verity roothash roothash.p7s; do cp "$H/vbig.$s" "$BIGDIR/vbig.$s" || die "copy vbig.$s"; done
printf '[Extensions]\nImagePolicy=signed\nSearchPaths=%s\n' "$BIGDIR" >/run/vmtest-big.conf
loops_before=$(loops_attached)
sysextd --no-bus --config=/run/vmtest-big.conf merge >/run/vmtest-big.out 2>&1 &
pid=$!
big_dm() { dm_ours | grep -q vbig; }
if wait_for 60 big_dm; then
	sleep 0.5
	if kill -0 "$pid" 2>/dev/null; then
		kill -KILL "$pid"
		wait "$pid" 2>/dev/null
		ok "sysextd killed while dm-verity read the big image"
	else
		not_ok "the merge of the big image finished before it could be killed: $(cat /run/vmtest-big.out)"
	fi
else
	not_ok "no dm device for the big image appeared: $(cat /run/vmtest-big.out)"
	kill -KILL "$pid" 2>/dev/null
fi
if wait_for 20 no_dm_ours; then
	ok "no sysextd-* dm device after the kill"
else
	not_ok "sysextd dm devices left after the kill: $(dm_ours | tr '\n' ' ')"
fi
if wait_for 20 loops_as_before; then
	ok "loop devices as before the killed merge ($loops_before)"
else
	not_ok "loop devices attached after the kill: $(loops_attached), before $loops_before"
fi
expect "nothing merged by the killed merge" 0 "$(usr_overlays_in)"

# --- an orphaned dm device is removed at daemon start ----------------------------------
veritysetup open "$BIGDIR/vbig.raw" sysextd-orphan-test "$BIGDIR/vbig.verity" "$(<"$BIGDIR/vbig.roothash")" ||
	not_ok "cannot make an orphaned sysextd-* dm device"
check "the orphaned device exists" bash -c 'dm_ours() { for f in /sys/block/dm-*/dm/name; do [[ -e $f ]] && cat "$f"; done; }; dm_ours | grep -q sysextd-orphan-test'
sysextd status >/dev/null 2>&1
if wait_for 20 no_dm_ours; then
	ok "the daemon removed the orphaned sysextd-* dm device at its start"
else
	not_ok "orphaned dm device still there after the daemon started: $(dm_ours | tr '\n' ' ')"
	veritysetup close sysextd-orphan-test 2>/dev/null
fi
finish
