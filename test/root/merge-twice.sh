#!/bin/bash
# merge on a merged root fails, says "already merged", and changes nothing.
set -euo pipefail
# shellcheck source=test/lib.sh
. "$(dirname "$0")/../lib.sh"
enter_sandbox "$@"
require_cmd mkfs.erofs
require_fs erofs overlay
make_root

t=$(ext_tree one); ext_file "$t" usr/share/one/f one; mk_image erofs "$t" one >/dev/null
t=$(ext_tree two); ext_file "$t" usr/share/two/f two; mk_image directory "$t" two >/dev/null
loops_before=$(loop_snapshot)

run_sysextd merge
assert_ok "first merge"
assert_file_content "$R/usr/share/one/f" one

mounts_before=$(mountinfo_under "$R/usr")
loops_merged=$(loop_snapshot)

check "a second merge fails with 'already merged'"
run_sysextd merge
assert_failed "second merge"
assert_contains "${ERR,,}" "already merged" "stderr of second merge"

check "the mount table under \$R/usr is unchanged"
mounts_after=$(mountinfo_under "$R/usr")
assert_eq "$(wc -l <<<"$mounts_after")" "$(wc -l <<<"$mounts_before")" "mountinfo lines for $R/usr"
assert_eq "$mounts_after" "$mounts_before" "mountinfo for $R/usr"
assert_eq "$(loop_snapshot)" "$loops_merged" "loop devices"
assert_file_content "$R/usr/share/one/f" one
assert_file_content "$R/usr/share/two/f" two

run_sysextd unmerge
assert_ok unmerge
assert_missing "$R/usr/share/one"
assert_loops_as_before "$loops_before"

echo "PASS"
