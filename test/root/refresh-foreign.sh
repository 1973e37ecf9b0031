#!/bin/bash
# Only our own (issue 3, item 5): a mount that something else placed on top of
# a hierarchy is never detached.
#  (a) After merge, a tmpfs is mounted on top of usr: refresh and unmerge
#      refuse with a message about the foreign mount, which stays on top; once
#      it is gone, refresh and unmerge work.
#  (b) usr is its own mount (a "partition") on an unmerged root: merge mounts
#      on top of it, refresh keeps it, unmerge removes only sysextd's mount.
#  (c) (needs a binary built with -Dtest-hooks=true) a foreign mount placed on
#      top of usr in the middle of a refresh, after the new tree went beneath
#      the old top: the refresh fails saying so and leaves the foreign mount
#      alone; once it is gone, the next commands leave exactly one sysextd
#      overlay at usr, showing the extension on disk, and unmerge leaves none.
set -euo pipefail
# shellcheck source=test/lib.sh
. "$(dirname "$0")/../lib.sh"
enter_sandbox "$@"
require_cmd mkfs.erofs
require_fs erofs overlay
make_root

ext=$R/var/lib/extensions
file=usr/share/app/version
mkdir -p "$R/usr/share/app"
echo base >"$R/$file"

t=$(ext_tree app)
ext_file "$t" "$file" v1
ext_file "$t" opt/app/version v1
mk_erofs "$t" "$WORK/v1.raw"
ext_file "$t" "$file" v2
ext_file "$t" opt/app/version v2
mk_erofs "$t" "$WORK/v2.raw"
loops_before=$(loop_snapshot)

# stack_at PATH — "FSTYPE SOURCE" of each mount at PATH, bottom first (the
# order of the parent chain, which after MOVE_MOUNT_BENEATH is not the order
# of mountinfo).
stack_at() {
	python3 - "$1" <<'PY'
import sys
path = sys.argv[1]
ms = {}
for line in open("/proc/self/mountinfo"):
    f = line.split()
    if f[4] != path:
        continue
    sep = f.index("-")
    ms[int(f[0])] = (int(f[1]), f[sep + 1], f[sep + 2])
children = {p: i for i, (p, _, _) in ms.items()}
bottom = [i for i, (p, _, _) in ms.items() if p not in ms]
out = []
cur = bottom[0] if bottom else None
while cur is not None:
    out.append("%s %s" % (ms[cur][1], ms[cur][2]))
    cur = children.get(cur)
print("\n".join(out))
PY
}

# ---------------------------------------------------------------- (a)
replace_image "$WORK/v1.raw" "$ext/app.raw"
run_sysextd merge
assert_ok merge
assert_file_content "$R/$file" v1

mount -t tmpfs foreign "$R/usr" || fail "cannot mount the foreign tmpfs"
echo "foreign content" >"$R/usr/foreign-file"
stack=$(stack_at "$R/usr")
log "stack at usr (bottom first): $(tr '\n' ',' <<<"$stack")"
assert_eq "$stack" $'overlay sysextd\ntmpfs foreign' "mount stack at usr"
snapshot=$(mountinfo_under "$R")

check "(a) refresh refuses with a message about the foreign mount, and leaves it on top"
replace_image "$WORK/v2.raw" "$ext/app.raw"
run_sysextd refresh
assert_failed "refresh under a foreign mount"
assert_contains "${ERR,,}" "foreign" "stderr of refresh"
assert_contains "$ERR" "$R/usr" "stderr of refresh"
assert_eq "$(stack_at "$R/usr")" $'overlay sysextd\ntmpfs foreign' "mount stack at usr after refresh"
assert_file_content "$R/usr/foreign-file" "foreign content"
assert_eq "$(mountinfo_under "$R")" "$snapshot" "mountinfo under the root after the refused refresh"

check "(a) refresh --always-refresh=yes refuses too"
run_sysextd --always-refresh=yes refresh
assert_failed "refresh --always-refresh=yes under a foreign mount"
assert_contains "${ERR,,}" "foreign" "stderr of refresh --always-refresh=yes"
assert_eq "$(mountinfo_under "$R")" "$snapshot" "mountinfo under the root after the refused refresh --always-refresh=yes"

check "(a) unmerge refuses, and leaves the foreign mount on top"
run_sysextd unmerge
assert_failed "unmerge under a foreign mount"
assert_contains "${ERR,,}" "foreign" "stderr of unmerge"
assert_eq "$(stack_at "$R/usr")" $'overlay sysextd\ntmpfs foreign' "mount stack at usr after unmerge"
assert_file_content "$R/usr/foreign-file" "foreign content"
assert_eq "$(mountinfo_under "$R")" "$snapshot" "mountinfo under the root after the refused unmerge"

check "(a) status still answers"
run_sysextd status
assert_ok "status under a foreign mount"

check "(a) once the foreign mount is gone, refresh and unmerge work"
umount "$R/usr"
assert_file_content "$R/$file" v1
run_sysextd refresh
assert_ok "refresh after the foreign mount is gone"
assert_file_content "$R/$file" v2
assert_file_content "$R/opt/app/version" v2
assert_eq "$(ours_at "$R/usr")" 1 "sysextd overlays at usr"
run_sysextd unmerge
assert_ok "unmerge after the foreign mount is gone"
assert_file_content "$R/$file" base
assert_eq "$(ours_at "$R/usr")" 0 "sysextd overlays at usr after unmerge"
assert_eq "$(ours_at "$R/opt")" 0 "sysextd overlays at opt after unmerge"
assert_loops_as_before "$loops_before"

# ---------------------------------------------------------------- (b)
check "(b) usr is its own mount: merge goes on top of it"
mkdir -p "$WORK/usr-copy"
cp -a "$R/usr/." "$WORK/usr-copy/"
mount -t tmpfs usr-partition "$R/usr" || fail "cannot mount the usr partition"
cp -a "$WORK/usr-copy/." "$R/usr/"
echo "partition content" >"$R/usr/partition-file"
echo "partition base" >"$R/$file"
partition_before=$(mountinfo_under "$R/usr")

replace_image "$WORK/v1.raw" "$ext/app.raw"
run_sysextd merge
assert_ok "merge on a usr partition"
assert_file_content "$R/$file" v1
assert_file_content "$R/usr/partition-file" "partition content"
assert_eq "$(stack_at "$R/usr")" $'tmpfs usr-partition\noverlay sysextd' "mount stack at usr after merge"

check "(b) refresh keeps the partition below"
replace_image "$WORK/v2.raw" "$ext/app.raw"
run_sysextd refresh
assert_ok "refresh on a usr partition"
assert_file_content "$R/$file" v2
assert_eq "$(stack_at "$R/usr")" $'tmpfs usr-partition\noverlay sysextd' "mount stack at usr after refresh"

check "(b) unmerge removes only sysextd's mount; the partition stays with its content"
run_sysextd unmerge
assert_ok "unmerge on a usr partition"
assert_eq "$(stack_at "$R/usr")" "tmpfs usr-partition" "mount stack at usr after unmerge"
assert_eq "$(mountinfo_under "$R/usr")" "$partition_before" "mountinfo under usr after unmerge"
assert_file_content "$R/$file" "partition base"
assert_file_content "$R/usr/partition-file" "partition content"
assert_eq "$(fstype "$R/usr")" tmpfs "file system visible at usr"

check "(b) a second unmerge has nothing to do and leaves the partition alone"
run_sysextd unmerge
assert_ok "second unmerge"
assert_eq "$(stack_at "$R/usr")" "tmpfs usr-partition" "mount stack at usr after the second unmerge"
assert_loops_as_before "$loops_before"
umount "$R/usr"
assert_file_content "$R/$file" base

# ---------------------------------------------------------------- (c)
if ! "$SYSEXTD" --version 2>/dev/null | grep -q '+test-hooks'; then
	log "(c) skipped: $SYSEXTD was built without test hooks"
	echo "PASS"
	exit 0
fi
check "(c) a foreign mount placed on usr during the swap is left alone, and the refresh fails"
replace_image "$WORK/v1.raw" "$ext/app.raw"
run_sysextd merge
assert_ok merge
assert_file_content "$R/$file" v1
replace_image "$WORK/v2.raw" "$ext/app.raw"
SYSEXTD_TEST_HOOK=swap-after-beneath \
	SYSEXTD_TEST_HOOK_EXEC="mount -t tmpfs late-foreign '$R/usr' && echo 'late foreign content' >'$R/usr/late-file'" \
	run_sysextd refresh
assert_failed "refresh with a foreign mount placed during the swap"
assert_contains "${ERR,,}" "foreign" "stderr of refresh"
stack=$(stack_at "$R/usr")
log "stack at usr (bottom first): $(tr '\n' ',' <<<"$stack")"
[[ "$(tail -n1 <<<"$stack")" == "tmpfs late-foreign" ]] ||
	fail "the foreign mount is not on top of usr any more: $stack"
assert_file_content "$R/usr/late-file" "late foreign content"

check "(c) once the foreign mount is gone: one sysextd overlay at usr, with the extension on disk; unmerge leaves none"
umount "$R/usr"
run_sysextd status
assert_ok "status after the foreign mount is gone"
run_sysextd refresh
assert_ok "refresh after the foreign mount is gone"
bad=
[[ "$(ours_at "$R/usr")" == 1 ]] || bad+="$(ours_at "$R/usr") sysextd overlays at usr after refresh (expected 1); "
[[ "$(cat "$R/$file")" == v2 ]] || bad+="usr shows '$(cat "$R/$file")' after refresh, but v2 is the image on disk; "
journal_has_pending && bad+="the journal still has a pending record; "
run_sysextd unmerge
assert_ok "unmerge"
[[ "$(ours_at "$R/usr")" == 0 ]] || bad+="$(ours_at "$R/usr") sysextd overlays at usr after unmerge (expected 0); "
[[ "$(cat "$R/$file")" == base ]] || bad+="usr shows '$(cat "$R/$file")' after unmerge, not the base; "
[[ -z "$bad" ]] || fail "$bad
mountinfo:
$(mountinfo_under "$R")"
assert_loops_as_before "$loops_before"

echo "PASS"
