#!/bin/bash
# An extension with only usr/ content leaves /opt alone; one with opt/
# content puts an overlay on /opt too, with the base /opt still visible.
set -euo pipefail
# shellcheck source=test/lib.sh
. "$(dirname "$0")/../lib.sh"
enter_sandbox "$@"
require_cmd mkfs.erofs mksquashfs
require_fs erofs squashfs overlay
make_root

echo data >"$R/opt/app/data/file"
t=$(ext_tree usronly); ext_file "$t" usr/share/usronly/f usronly; mk_image erofs "$t" usronly >/dev/null
loops_before=$(loop_snapshot)

check "usr-only extension: /usr merged, /opt untouched"
run_sysextd merge
assert_ok merge
assert_file_content "$R/usr/share/usronly/f" usronly
is_overlay "$R/usr" || fail "$R/usr is not an overlay after merge"
if has_overlay_mount "$R/opt" || is_overlay "$R/opt"; then
	fail "$R/opt has an overlay although no extension ships opt/: $(mounts_at "$R/opt")"
fi
assert_file_content "$R/opt/app/data/file" data
run_sysextd --json status
assert_ok "status --json"
assert_eq "$(json_q "$OUT" '[h["merged"] for h in d["hierarchies"] if h["hierarchy"] == "/opt"] in ([], [False])')" \
	true "/opt reported as not merged"
run_sysextd unmerge
assert_ok unmerge

check "an extension with opt/ content: /opt merged too"
t=$(ext_tree withopt); ext_file "$t" opt/withopt/f withopt; mk_image squashfs "$t" withopt >/dev/null
run_sysextd merge
assert_ok merge
is_overlay "$R/opt" || fail "$R/opt is not an overlay although withopt ships opt/"
assert_file_content "$R/opt/withopt/f" withopt
assert_file_content "$R/opt/app/data/file" data
assert_file_content "$R/usr/share/usronly/f" usronly
run_sysextd --json status
assert_ok "status --json"
assert_eq "$(json_q "$OUT" '[h["extensions"] for h in d["hierarchies"] if h["hierarchy"] == "/opt"]')" \
	'[["withopt"]]' "/opt extensions"

run_sysextd unmerge
assert_ok unmerge
assert_missing "$R/opt/withopt"
! has_overlay_mount "$R/opt" || fail "$R/opt still has an overlay after unmerge"
assert_file_content "$R/opt/app/data/file" data
assert_loops_as_before "$loops_before"

echo "PASS"
