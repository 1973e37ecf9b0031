#!/bin/bash
# The plan still holds at the moment of the swap (issue 10, section 3).  Needs test hooks.
#  (a) a foreign mount put on usr while the new tree is built: the refresh refuses, naming
#      it; the old tree stays below it, nothing of ours is put on top of it; once it is gone
#      there is one overlay and refresh works;
#  (b) the same on opt (the second hierarchy): nothing changes on usr either;
#  (c) a mount made below usr, or one below it unmounted, while the new tree is built: the
#      refresh stops, nothing changes, the new mount is still there;
#  (d) a mount below usr that is hidden under our overlay (the visible copy was unmounted) is
#      not carried into the next tree, and after unmerge no loop device of the old image is
#      left;
#  (e) an automount point below usr stays an automount point and is never triggered;
#  (f) two of our trees stacked with no pending record (a kill after the new tree went
#      beneath, and the journal lost): status says so and the next refresh leaves one;
#  (g) ours over a foreign mount over ours (the foreign mount's files hidden): status says
#      so, the next transition takes the upper one away and nothing foreign is detached.
set -euo pipefail
# shellcheck source=test/lib.sh
. "$(dirname "$0")/../lib.sh"
enter_sandbox "$@"
require_cmd mkfs.erofs python3
require_fs erofs overlay
require_test_hooks
make_root

SYSEXTD_TIMEOUT=60
ext=$R/var/lib/extensions
t=$(ext_tree app)
for v in v1 v2 v3; do
	ext_file "$t" usr/share/app/version "$v"
	ext_file "$t" opt/app/version "$v"
	mkdir -p "$t/usr/local" "$t/usr/auto"
	mk_erofs "$t" "$WORK/$v.raw"
done
loops_before=$(loop_ids)

shows() {
	echo "$(cat "$R/usr/share/app/version" 2>/dev/null || echo base) $(cat "$R/opt/app/version" 2>/dev/null || echo base)"
}

# stack_at PATH — "FSTYPE SOURCE" of each mount at PATH, bottom first.
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
out, cur = [], bottom[0] if bottom else None
while cur is not None:
    out.append("%s %s" % (ms[cur][1], ms[cur][2]))
    cur = children.get(cur)
print("\n".join(out))
PY
}

fresh_merge() {
	run_sysextd unmerge
	replace_image "$WORK/$1.raw" "$ext/app.raw"
	run_sysextd merge
	assert_ok "merge $1"
	assert_eq "$(shows)" "$1 $1" "versions after merge"
}

# ---------------------------------------------------------------- (a), (b)
for h in usr opt; do
	check "(a/b) a foreign mount on $h while the new tree is built: refused, named, nothing of ours on top"
	fresh_merge v1
	replace_image "$WORK/v2.raw" "$ext/app.raw"
	SYSEXTD_TEST_HOOK=before-swap SYSEXTD_TEST_HOOK_EXEC="mount -t tmpfs late-$h '$R/$h' && echo late >'$R/$h/late-file'" \
		run_sysextd refresh
	assert_failed "refresh with a foreign mount on $h"
	assert_contains "$ERR" "late-$h" "the message names the foreign mount"
	assert_contains "$ERR" "$R/$h" "the message names the hierarchy"
	assert_eq "$(tail -n1 <<<"$(stack_at "$R/$h")")" "tmpfs late-$h" "top of $h"
	assert_eq "$(stack_at "$R/usr" | grep -c sysextd)" 1 "our overlays at usr"
	assert_eq "$(stack_at "$R/opt" | grep -c sysextd)" 1 "our overlays at opt"
	assert_file_content "$R/$h/late-file" late
	other=$([[ $h == usr ]] && echo opt || echo usr)
	assert_file_content "$R/$other/$([[ $other == usr ]] && echo share/app/version || echo app/version)" v1
	umount "$R/$h"
	assert_eq "$(shows)" "v1 v1" "versions once the foreign mount is gone"
	run_sysextd refresh
	assert_ok "refresh after the foreign mount is gone"
	assert_eq "$(shows)" "v2 v2" "versions after the refresh"
	assert_eq "$(ours_at "$R/usr") $(ours_at "$R/opt")" "1 1" "one overlay each"
done

# ---------------------------------------------------------------- (c)
check "(c) a mount made below usr while the new tree is built: the refresh stops"
fresh_merge v1
replace_image "$WORK/v2.raw" "$ext/app.raw"
SYSEXTD_TEST_HOOK=before-swap SYSEXTD_TEST_HOOK_EXEC="mount -t tmpfs new-child '$R/usr/local' && echo child >'$R/usr/local/file'" \
	run_sysextd refresh
assert_failed "refresh with a new mount below usr"
assert_contains "$ERR" "$R/usr/local" "the message names the new mount"
assert_eq "$(shows)" "v1 v1" "versions"
assert_file_content "$R/usr/local/file" child
assert_eq "$(ours_at "$R/usr")" 1 "our overlays at usr"
run_sysextd refresh
assert_ok "refresh with the new mount in place"
assert_eq "$(shows)" "v2 v2" "versions"
assert_file_content "$R/usr/local/file" child

check "(c) a mount below usr unmounted while the new tree is built: the refresh stops"
replace_image "$WORK/v3.raw" "$ext/app.raw"
SYSEXTD_TEST_HOOK=before-swap SYSEXTD_TEST_HOOK_EXEC="umount '$R/usr/local'" run_sysextd refresh
assert_failed "refresh with a mount below usr gone"
assert_eq "$(shows)" "v2 v2" "versions"
run_sysextd refresh
assert_ok "refresh"
assert_eq "$(shows)" "v3 v3" "versions"
[[ ! -e "$R/usr/local/file" ]] || fail "the unmounted child came back"

# ---------------------------------------------------------------- (d)
check "(d) a hidden mount below usr is not carried into the next tree"
run_sysextd unmerge
mount -t tmpfs local "$R/usr/local"
echo original >"$R/usr/local/file"
replace_image "$WORK/v1.raw" "$ext/app.raw"
run_sysextd merge
assert_ok "merge with usr/local mounted"
assert_file_content "$R/usr/local/file" original
loops_merged=$(loop_ids)
umount "$R/usr/local" # the copy on our overlay; the original stays hidden under it
[[ ! -e "$R/usr/local/file" ]] || fail "usr/local still shows the mount after unmounting it"
replace_image "$WORK/v2.raw" "$ext/app.raw"
run_sysextd refresh
assert_ok "refresh"
assert_eq "$(shows)" "v2 v2" "versions"
[[ ! -e "$R/usr/local/file" ]] || fail "the hidden original of usr/local was carried into the new tree"
assert_eq "$(fstype "$R/usr/local")" overlayfs "what a reader of usr/local reaches"
run_sysextd unmerge
assert_ok "unmerge"
umount "$R/usr/local" 2>/dev/null || true
assert_loop_ids_as_before "$loops_before"

# ---------------------------------------------------------------- (e)
modprobe -q autofs4 2>/dev/null || true
if ! grep -qw autofs /proc/filesystems; then
	log "(e) skipped: this kernel has no autofs (the VM test covers automount points below /usr)"
else
check "(e) an automount point below usr stays one and is not triggered"
replace_image "$WORK/v1.raw" "$ext/app.raw"
run_sysextd merge
assert_ok merge
# An autofs mount with nobody answering its pipe: a lookup in it would hang.
python3 - "$R/usr/auto" "$WORK/autofs.pid" <<'PY' &
import os, subprocess, sys, time
r, w = os.pipe()
os.set_inheritable(w, True)
subprocess.run(["mount", "-t", "autofs", "-o", "fd=%d,pgrp=%d,minproto=5,maxproto=5,indirect" % (w, os.getpgrp()),
                "sysextd-test-auto", sys.argv[1]], check=True, pass_fds=(w,))
open(sys.argv[2], "w").write(str(os.getpid()))
time.sleep(3600)
PY
auto_pid=$!
on_exit "kill $auto_pid 2>/dev/null; umount -l '$R/usr/auto' 2>/dev/null || true"
for _ in $(seq 50); do [[ -s "$WORK/autofs.pid" ]] && break; sleep 0.1; done
assert_eq "$(findmnt -n -o FSTYPE --mountpoint "$R/usr/auto" | tail -n1)" autofs "usr/auto before the refresh"
replace_image "$WORK/v2.raw" "$ext/app.raw"
run_sysextd refresh
assert_ok "refresh with an automount point below usr"
assert_eq "$(findmnt -n -o FSTYPE --mountpoint "$R/usr/auto" | tail -n1)" autofs "usr/auto after the refresh"
assert_eq "$(shows)" "v2 v2" "versions"
run_sysextd unmerge
assert_ok "unmerge"
kill "$auto_pid" 2>/dev/null || true
umount -l "$R/usr/auto" 2>/dev/null || true
fi

# ---------------------------------------------------------------- (f)
check "(f) two of our trees stacked, no pending record: status says so, refresh leaves one"
fresh_merge v1
replace_image "$WORK/v2.raw" "$ext/app.raw"
SYSEXTD_TEST_HOOK=swap-after-beneath run_sysextd refresh
assert_rc 137 "refresh killed after the new trees went beneath"
assert_eq "$(ours_at "$R/usr")" 2 "our overlays at usr after the kill"
rm "$R/run/sysextd/state.json"
# Local status, like every local command, first resolves what it finds (and says so).
run_sysextd status --json
assert_ok "status"
assert_contains "$ERR" "stale tree" "status says what it repaired"
assert_eq "$(json_q "$OUT" '[h["trees"] for h in d["hierarchies"] if h["hierarchy"] == "/usr"][0]')" 1 "trees at usr after status"
assert_eq "$(ours_at "$R/usr") $(ours_at "$R/opt")" "1 1" "one overlay each after the repair"
assert_eq "$(shows)" "v2 v2" "versions: the newer tree, which was beneath"
run_sysextd refresh
assert_ok "refresh"
assert_eq "$(ours_at "$R/usr") $(ours_at "$R/opt")" "1 1" "one overlay each after the refresh"
SYSEXTD_TEST_HOOK=swap-after-beneath run_sysextd --always-refresh=yes refresh
rm "$R/run/sysextd/state.json"
assert_eq "$(ours_at "$R/usr")" 2 "our overlays at usr after the second kill"
run_sysextd refresh
assert_ok "refresh after the second kill"
assert_eq "$(ours_at "$R/usr") $(ours_at "$R/opt")" "1 1" "one overlay each after the refresh"

# ---------------------------------------------------------------- (g)
check "(g) ours over a foreign mount over ours: the upper one goes, the foreign mount shows again"
fresh_merge v1
# Build the stack the old swap left: our usr tree's record is lost for a moment, a foreign
# mount goes on top, and a merge of usr alone puts a new tree over it.
mkdir -p "$WORK/aside"
usr_record=$(grep -l '"hierarchy":"usr"' "$R/run/sysextd/trees/"*.json)
mv "$usr_record" "$WORK/aside/"
cp "$R/usr/lib/os-release" "$WORK/os-release"
mount -t tmpfs covering "$R/usr"
mkdir -p "$R/usr/lib"
cp "$WORK/os-release" "$R/usr/lib/os-release"
echo covering >"$R/usr/covering-file"
printf '[Extensions]\nHierarchies=/usr\n' >"$WORK/usr-only.conf"
replace_image "$WORK/v2.raw" "$ext/app.raw"
run_sysextd --config="$WORK/usr-only.conf" merge
assert_ok "merge of usr over the foreign mount"
mv "$WORK/aside/"*.json "$R/run/sysextd/trees/"
assert_eq "$(stack_at "$R/usr" | awk '{print $2}' | tr '\n' ' ')" "sysextd covering sysextd " "the interleaved stack"

run_sysextd status --json
assert_ok "status"
assert_contains "$ERR" "stale tree" "status says what it repaired"
assert_eq "$(stack_at "$R/usr" | awk '{print $2}' | tr '\n' ' ')" "sysextd covering " "the repaired stack"
assert_file_content "$R/usr/covering-file" covering
assert_eq "$(json_q "$OUT" '[h.get("foreign_mount_on_top", False) for h in d["hierarchies"] if h["hierarchy"] == "/usr"][0]')" true "usr covered"
run_sysextd refresh
assert_failed "refresh under the foreign mount"
assert_contains "$ERR" "foreign" "stderr of refresh"
assert_eq "$(stack_at "$R/usr" | awk '{print $2}' | tr '\n' ' ')" "sysextd covering " "the stack after the refused refresh"
umount "$R/usr"
run_sysextd refresh
assert_ok "refresh once the foreign mount is gone"
assert_eq "$(shows)" "v2 v2" "versions"
assert_eq "$(ours_at "$R/usr") $(ours_at "$R/opt")" "1 1" "one overlay each"
run_sysextd unmerge
assert_ok unmerge
assert_loop_ids_as_before "$loops_before"
echo PASS
