#!/bin/bash
# The daemon's image cache: after each transition its worker hands over the image mounts of
# the new tree, and the next refresh reuses those of the images that did not change; the
# worker names the mounts it reused by their entries' ids instead of sending them again, so
# that the chain holds over any number of refreshes:
#  - after a merge of four images the daemon holds one image mount (superblock) per image;
#  - through five refreshes, each replacing another image (one of them twice), the mounts of
#    the images not replaced are the very ones of the merge, each replaced image's is a new
#    one, and every mount let go is gone from the daemon: it holds one per merged image;
#  - a refresh that finds nothing changed keeps every mount;
#  - a refresh that takes an image away (file removed) lets its mount go, keeps the others;
#  - after an unmerge the daemon holds none.
set -euo pipefail
# shellcheck source=test/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=test/bus/lib-bus.sh
. "$(dirname "$0")/lib-bus.sh"
enter_sandbox "$@"
bus_requirements
make_root
noidle_config
EXT=$R/var/lib/extensions

# Two versions of each of four images.
for n in a b c d; do
	t=$(ext_tree "$n")
	for v in 1 2; do
		ext_file "$t" "usr/share/$n/version" "$n$v"
		mk_erofs "$t" "$WORK/$n-$v.raw"
	done
	cp "$WORK/$n-1.raw" "$EXT/$n.raw"
done
shows() {
	local n out=
	for n in a b c d; do out+="$(cat "$R/usr/share/$n/version" 2>/dev/null || echo "-") "; done
	echo "${out% }"
}

# held — "NAME=DEV ..." for every erofs mount the daemon holds an fd on (the root of an image
# mount), by the release file of the image it is: DEV is its superblock's device number.
held() {
	local p fd dev name out=()
	p=$(daemon_pid)
	[[ -n "$p" ]] || fail "no daemon"
	for fd in /proc/"$p"/fd/*; do
		[[ -d "$fd" ]] || continue
		[[ $(stat -L -f -c %T "$fd" 2>/dev/null) == erofs ]] || continue
		dev=$(stat -L -c %d "$fd")
		name=$(find "$fd/usr/lib/extension-release.d/" -mindepth 1 -name 'extension-release.*' -printf '%f\n' 2>/dev/null | head -n1)
		out+=("${name#extension-release.}=$dev")
	done
	printf '%s\n' "${out[@]}" | sort | tr '\n' ' ' | sed 's/ $//'
}
# settled — waits (up to 20 s) until the daemon has no worker left: the callers are answered
# as soon as the result is in, and the daemon takes the cache when the worker has ended.
settled() {
	local p i
	p=$(daemon_pid)
	[[ -n "$p" ]] || fail "no daemon"
	for i in $(seq 200); do
		[[ -z "$(cat /proc/"$p"/task/*/children 2>/dev/null | tr -d ' ')" ]] && return 0
		sleep 0.1
	done
	fail "the daemon's worker did not end within 20 s"
}
dev_of() { # NAME HELD
	local e
	for e in $2; do [[ ${e%%=*} == "$1" ]] && { echo "${e#*=}"; return; }; done
	echo none
}

start_bus "$NOIDLE_CONF"
# The cache holds image mounts only where the kernel takes detached mounts as overlay layers.
run_bctl --json=short get-property org.sysextd1 /org/sysextd1 org.sysextd1.Manager KernelFeatures
assert_ok "KernelFeatures"
if [[ $(json_q "$OUT" '"detached-layers" in d["data"]') != true ]]; then
	stop_bus
	skip "the kernel takes no detached mounts as overlay layers: the daemon keeps no image mounts"
fi

check "a merge of four images: the daemon holds one image mount for each"
run_cli merge
assert_ok merge
settled
assert_eq "$(shows)" "a1 b1 c1 d1" "versions after the merge"
first=$(held)
assert_eq "$(wc -w <<<"$first")" 4 "image mounts held after the merge ($first)"
for n in a b c d; do
	[[ $(dev_of "$n" "$first") != none ]] || fail "no mount of $n held after the merge: $first"
done

prev=$first
step=0
for n in b d a b c; do
	step=$((step + 1))
	check "refresh $step, $n replaced: the others' mounts are the ones before, $n's is new, the old one let go"
	v=$(( (step == 4) ? 1 : 2 ))
	replace_image "$WORK/$n-$v.raw" "$EXT/$n.raw"
	run_cli refresh
	assert_ok "refresh $step"
	settled
	now=$(held)
	assert_eq "$(wc -w <<<"$now")" 4 "image mounts held after refresh $step ($now)"
	for m in a b c d; do
		if [[ $m == "$n" ]]; then
			[[ $(dev_of "$m" "$now") != "$(dev_of "$m" "$prev")" ]] || fail "refresh $step: $m was replaced but its mount is the old one ($now)"
			[[ $(dev_of "$m" "$now") != none ]] || fail "refresh $step: no mount of $m held ($now)"
		else
			assert_eq "$(dev_of "$m" "$now")" "$(dev_of "$m" "$prev")" "refresh $step: the mount of $m (unchanged) is the one before"
		fi
	done
	prev=$now
done
assert_eq "$(shows)" "a2 b1 c2 d2" "versions after the refreshes"

check "a refresh that finds nothing changed keeps every mount"
run_cli refresh
assert_ok "refresh, nothing changed"
settled
assert_eq "$(held)" "$prev" "image mounts after a refresh that changed nothing"

check "a refresh after an image was removed lets its mount go and keeps the others'"
rm -f "$EXT/c.raw"
run_cli refresh
assert_ok "refresh without c"
settled
assert_eq "$(shows)" "a2 b1 - d2" "versions without c"
now=$(held)
assert_eq "$(wc -w <<<"$now")" 3 "image mounts held without c ($now)"
for m in a b d; do
	assert_eq "$(dev_of "$m" "$now")" "$(dev_of "$m" "$prev")" "the mount of $m after c was removed"
done

check "an unmerge: the daemon holds no image mount"
run_cli unmerge
assert_ok unmerge
settled
assert_eq "$(held)" "" "image mounts held after the unmerge"
stop_bus
echo PASS
