#!/bin/bash
# Open files (issue 3, item 5), and when refresh rebuilds.
#  - A file opened from the old tree stays readable, with the old content,
#    after a refresh swaps in a new version, and after unmerge.
#  - refresh with nothing changed says it did nothing and leaves mountinfo
#    exactly as it was; refresh --always-refresh=yes rebuilds (new overlay mount at usr).
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
echo base >"$R/opt/version"

t=$(ext_tree app)
ext_file "$t" "$file" v1
ext_file "$t" opt/version v1
mk_erofs "$t" "$WORK/v1.raw"
ext_file "$t" "$file" v2
ext_file "$t" opt/version v2
mk_erofs "$t" "$WORK/v2.raw"
loops_before=$(loop_snapshot)

# pread_fd FD — the content of open file descriptor FD from offset 0.
pread_fd() {
	python3 -c '
import os, sys
sys.stdout.write(os.pread(int(sys.argv[1]), 4096, 0).decode())' "$1"
}

replace_image "$WORK/v1.raw" "$ext/app.raw"
run_sysextd merge
assert_ok merge
assert_file_content "$R/$file" v1
assert_file_content "$R/opt/version" v1

# ---------------------------------------------------------------- unchanged
check "refresh with nothing changed does nothing, says so, and leaves mountinfo as it was"
mounts=$(cat /proc/self/mountinfo)
journal=$(cat "$R/run/sysextd/state.json")
loops=$(loop_ids)
run_sysextd refresh
assert_ok "refresh with nothing changed"
msg=$(tr '[:upper:]' '[:lower:]' <<<"$OUT$ERR")
[[ "$msg" == *"nothing to do"* || "$msg" == *unchanged* ]] ||
	fail "refresh with nothing changed does not say that it did nothing:
$OUT$ERR"
assert_eq "$(cat /proc/self/mountinfo)" "$mounts" "mountinfo after a refresh with nothing changed"
assert_eq "$(cat "$R/run/sysextd/state.json")" "$journal" "journal after a refresh with nothing changed"
assert_eq "$(loop_ids)" "$loops" "loop devices after a refresh with nothing changed"

# ---------------------------------------------------------------- --always-refresh=yes
check "refresh --always-refresh=yes rebuilds: a new overlay at usr and opt, same content, flat mount table"
usr_id=$(top_mount_id "$R/usr")
opt_id=$(top_mount_id "$R/opt")
marker=$(cat "$R/usr/.sysextd/id" 2>/dev/null || true)
lines=$(wc -l </proc/self/mountinfo)
run_sysextd --always-refresh=yes refresh
assert_ok "refresh --always-refresh=yes"
assert_ne "$(top_mount_id "$R/usr")" "$usr_id" "mount id of the overlay at usr after refresh --always-refresh=yes"
assert_ne "$(top_mount_id "$R/opt")" "$opt_id" "mount id of the overlay at opt after refresh --always-refresh=yes"
if [[ -n "$marker" ]]; then
	assert_ne "$(cat "$R/usr/.sysextd/id")" "$marker" "marker id of the overlay at usr after refresh --always-refresh=yes"
fi
assert_file_content "$R/$file" v1
assert_file_content "$R/opt/version" v1
assert_eq "$(wc -l </proc/self/mountinfo)" "$lines" "mountinfo lines after refresh --always-refresh=yes"
assert_eq "$(ours_at "$R/usr") $(ours_at "$R/opt")" "1 1" "sysextd overlays at usr and opt"

# ---------------------------------------------------------------- open files
check "a file opened from the old tree stays readable with the old content after a refresh"
exec 3<"$R/$file" 4<"$R/opt/version"
# A process whose working directory is in the old tree.
(cd "$R/usr/share/app" && exec sleep 600) </dev/null >/dev/null 2>&1 &
cwd_pid=$!
stop_cwd() {
	if [[ -n "${cwd_pid:-}" ]]; then
		kill "$cwd_pid" 2>/dev/null || true
		wait "$cwd_pid" 2>/dev/null || true
		cwd_pid=
	fi
}
on_exit stop_cwd
for ((i = 0; i < 100; i++)); do
	[[ "$(readlink "/proc/$cwd_pid/cwd" 2>/dev/null)" == "$R/usr/share/app" ]] && break
	sleep 0.05
done
assert_eq "$(cat "/proc/$cwd_pid/cwd/version")" v1 "file in a working directory in the tree before the refresh"
assert_eq "$(pread_fd 3)" v1 "open usr file before the refresh"
replace_image "$WORK/v2.raw" "$ext/app.raw"
run_sysextd refresh
assert_ok "refresh to v2"
assert_file_content "$R/$file" v2
assert_file_content "$R/opt/version" v2
assert_eq "$(pread_fd 3)" v1 "open usr file after the refresh"
assert_eq "$(pread_fd 4)" v1 "open opt file after the refresh"
assert_eq "$(cat "/proc/$cwd_pid/cwd/version" 2>&1)" v1 "file in the old tree, through a working directory in it"
assert_eq "$(ours_at "$R/usr") $(ours_at "$R/opt")" "1 1" "sysextd overlays at usr and opt"

check "an open file of the new tree, and the old one, stay readable after unmerge"
exec 5<"$R/$file"
run_sysextd unmerge
assert_ok unmerge
assert_file_content "$R/$file" base
assert_file_content "$R/opt/version" base
assert_eq "$(pread_fd 3)" v1 "open usr file of the v1 tree after unmerge"
assert_eq "$(pread_fd 4)" v1 "open opt file of the v1 tree after unmerge"
assert_eq "$(pread_fd 5)" v2 "open usr file of the v2 tree after unmerge"
assert_eq "$(cat "/proc/$cwd_pid/cwd/version" 2>&1)" v1 "file in the v1 tree, through a working directory in it, after unmerge"

check "once the files are closed, no loop device is left"
stop_cwd
exec 3<&- 4<&- 5<&-
assert_loops_as_before "$loops_before"

echo "PASS"
