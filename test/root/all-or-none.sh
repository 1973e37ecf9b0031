#!/bin/bash
# All hierarchies or none (issue 10, section 4).  Needs test hooks.
# A refresh whose new usr tree is already beneath the old one fails on opt:
#  (a) the kernel refuses opt (ENOSPC: the mount limit is reached right after usr's tree went
#      beneath): usr's new tree is taken back, usr and opt stay v1, the message says so, one
#      overlay each, no loop device kept; a reader in a service namespace (a slave) saw v1 all
#      along, never v2 and never the base;
#  (b) the same with a mount below usr (its copy on the new tree goes too, the original stays);
#  (c) opt's top changed (a foreign mount): the same;
#  (d) after each of them the next refresh goes through;
#  (e) where usr's parent mount does not propagate, the new tree cannot be taken back: it stays
#      beneath the old one, invisible, readers see v1, status reports it as buried, and later
#      transitions never show it.
set -euo pipefail
# shellcheck source=test/lib.sh
. "$(dirname "$0")/../lib.sh"
enter_sandbox "$@"
require_cmd mkfs.erofs nsenter
require_fs erofs overlay
require_test_hooks
make_root

SYSEXTD_TIMEOUT=60
ext=$R/var/lib/extensions
t=$(ext_tree app)
for v in v1 v2 v3; do
	ext_file "$t" usr/share/app/version "$v"
	ext_file "$t" opt/app/version "$v"
	mkdir -p "$t/usr/local"
	mk_erofs "$t" "$WORK/$v.raw"
done
loops_before=$(loop_ids)
mount_max=$(cat /proc/sys/fs/mount-max)
on_exit "echo $mount_max >/proc/sys/fs/mount-max"

shows() {
	echo "$(cat "$R/usr/share/app/version" 2>/dev/null || echo base) $(cat "$R/opt/app/version" 2>/dev/null || echo base)"
}

# A reader in a service namespace (a slave of the root): what it ever saw at usr and opt.
start_reader() {
	: >"$WORK/reader.log"
	unshare -m --propagation slave bash -c '
		while :; do
			u=$(cat "$1/usr/share/app/version" 2>/dev/null || echo base)
			o=$(cat "$1/opt/app/version" 2>/dev/null || echo base)
			echo "$u $o"
		done >>"$2"' reader "$R" "$WORK/reader.log" &
	READER=$!
	on_exit "kill $READER 2>/dev/null || true"
	sleep 0.3
}

stop_reader() {
	sleep 0.2
	kill "$READER" 2>/dev/null || true
	wait "$READER" 2>/dev/null || true
	READER_SAW=$(sort -u "$WORK/reader.log" | tr '\n' ',')
}

# The hook fires after each tree is placed, with the index of its hierarchy (0 usr, 1 opt):
# after usr's, make opt fail.
enospc_hook() {
	# Everything this namespace holds now: the next mount fails.
	echo "[ \"\$SYSEXTD_TEST_HOOK_ARG\" = 0 ] && wc -l </proc/self/mountinfo >/proc/sys/fs/mount-max; true"
}

# refused_on_opt WHAT HOOK [SHOWS_AFTER [READER_SAW]]
refused_on_opt() {
	local what=$1 hook=$2 want_after=${3:-v1 v1} want_saw=${4:-v1 v1,} before
	check "($what) a refresh from v1 to v2 that fails on opt after usr's new tree went beneath"
	assert_eq "$(shows)" "v1 v1" "versions before"
	before=$(mountinfo_under "$R")
	replace_image "$WORK/v2.raw" "$ext/app.raw"
	start_reader
	SYSEXTD_TEST_HOOK=swap-placed SYSEXTD_TEST_HOOK_EXEC="$hook" run_sysextd refresh
	echo "$mount_max" >/proc/sys/fs/mount-max
	stop_reader
	assert_failed "refresh failing on opt"
	REFRESH_ERR=$ERR
	assert_contains "$ERR" "$R/opt" "the message names opt"
	assert_eq "$(shows)" "$want_after" "versions after the failed refresh"
	assert_eq "$(ours_at "$R/usr") $(ours_at "$R/opt")" "1 1" "one overlay each: usr's new tree was taken back"
	assert_eq "$READER_SAW" "$want_saw" "what the service namespace saw during the refresh"
	! journal_has_pending || fail "a pending record is left after the failed refresh"
	run_sysextd status --json
	assert_eq "$(json_q "$OUT" '[h["trees"] for h in d["hierarchies"] if h["class"] == "sysext"]')" "[1, 1]" "trees per hierarchy in status"
}

# ---------------------------------------------------------------- (a)
replace_image "$WORK/v1.raw" "$ext/app.raw"
run_sysextd merge
assert_ok merge
loops_merged=$(loop_ids)
refused_on_opt a "$(enospc_hook)"
assert_contains "$REFRESH_ERR" "mount limit" "the kernel's refusal in words"
assert_loop_ids_as_before "$loops_merged"

check "(d) the next refresh goes through"
run_sysextd refresh
assert_ok "refresh after the failed one"
assert_eq "$(shows)" "v2 v2" "versions"
replace_image "$WORK/v1.raw" "$ext/app.raw"
run_sysextd refresh
assert_ok "refresh back to v1"

# ---------------------------------------------------------------- (b)
check "(b) with a mount below usr"
mount -t tmpfs local "$R/usr/local"
echo local >"$R/usr/local/file"
local_id=$(findmnt -n -o ID --mountpoint "$R/usr/local" | tail -n1)
run_sysextd --always-refresh=yes refresh
assert_ok "refresh carrying usr/local"
before_local=$(mountinfo_under "$R/usr/local")
refused_on_opt b "$(enospc_hook)"
assert_file_content "$R/usr/local/file" local
assert_eq "$(mountinfo_under "$R/usr/local")" "$before_local" "usr/local after the failed refresh"
run_sysextd refresh
assert_ok "refresh after the failed one"
assert_eq "$(shows)" "v2 v2" "versions"
assert_file_content "$R/usr/local/file" local
replace_image "$WORK/v1.raw" "$ext/app.raw"
run_sysextd refresh
assert_ok "refresh back to v1"
umount "$R/usr/local"
[[ -n "$local_id" ]] || true

# ---------------------------------------------------------------- (c)
# The foreign mount covers opt from the moment it is made (in the service namespace too).
refused_on_opt c "[ \"\$SYSEXTD_TEST_HOOK_ARG\" = 0 ] && mount -t tmpfs late-opt '$R/opt'; true" "v1 base" "v1 base,v1 v1,"
assert_contains "$REFRESH_ERR" "late-opt" "the message names the foreign mount"
umount "$R/opt"
assert_eq "$(shows)" "v1 v1" "versions once the foreign mount is gone"
run_sysextd refresh
assert_ok "refresh after the failed one"
assert_eq "$(shows)" "v2 v2" "versions"
run_sysextd unmerge
assert_ok unmerge
assert_loop_ids_as_before "$loops_before"

# ---------------------------------------------------------------- (e)
check "(e) a parent mount that does not propagate: the new tree stays buried, never shown"
mount --make-private "$R"
replace_image "$WORK/v1.raw" "$ext/app.raw"
run_sysextd merge
assert_ok merge
replace_image "$WORK/v2.raw" "$ext/app.raw"
SYSEXTD_TEST_HOOK=swap-placed SYSEXTD_TEST_HOOK_EXEC="$(enospc_hook)" run_sysextd refresh
echo "$mount_max" >/proc/sys/fs/mount-max
assert_failed "refresh failing on opt"
assert_eq "$(shows)" "v1 v1" "versions after the failed refresh"
assert_contains "$ERR" "buried" "the message says the tree stays beneath"
run_sysextd status --json
assert_eq "$(json_q "$OUT" '[h.get("buried_trees", 0) for h in d["hierarchies"] if h["hierarchy"] == "/usr"][0]')" 1 "buried trees at usr"
replace_image "$WORK/v3.raw" "$ext/app.raw"
run_sysextd refresh
assert_ok "refresh to v3"
assert_eq "$(shows)" "v3 v3" "versions"
run_sysextd unmerge
assert_ok unmerge
assert_eq "$(shows)" "base base" "unmerge shows the base, never the buried tree"
mount --make-shared "$R"
echo PASS
