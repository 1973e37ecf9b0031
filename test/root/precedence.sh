#!/bin/bash
# When two images ship the same file, the one whose name sorts highest (as a
# version: ext-10 after ext-9) is on top.
set -euo pipefail
# shellcheck source=test/lib.sh
. "$(dirname "$0")/../lib.sh"
enter_sandbox "$@"
require_cmd mkfs.erofs mksquashfs
require_fs erofs squashfs overlay
make_root

# Mixed kinds on purpose: precedence must depend on the name only.
t=$(ext_tree a); ext_file "$t" usr/share/common/file a; mk_image erofs "$t" a >/dev/null
t=$(ext_tree b); ext_file "$t" usr/share/common/file b; mk_image directory "$t" b >/dev/null
t=$(ext_tree ext-9); ext_file "$t" usr/share/common/ver ext-9; mk_image squashfs "$t" ext-9 >/dev/null
t=$(ext_tree ext-10); ext_file "$t" usr/share/common/ver ext-10; mk_image erofs "$t" ext-10 >/dev/null

run_sysextd merge
assert_ok merge

check "b is above a"
assert_file_content "$R/usr/share/common/file" b

check "ext-10 is above ext-9 (names compare as versions, not bytes)"
assert_file_content "$R/usr/share/common/ver" ext-10

run_sysextd unmerge
assert_ok unmerge
assert_missing "$R/usr/share/common"

check "the same with the directory and erofs roles swapped"
rm -rf "$R/var/lib/extensions/"*
t=$(ext_tree a "$WORK/swap/a"); ext_file "$t" usr/share/common/file a; mk_image directory "$t" a >/dev/null
t=$(ext_tree b "$WORK/swap/b"); ext_file "$t" usr/share/common/file b; mk_image erofs "$t" b >/dev/null
run_sysextd merge
assert_ok merge
assert_file_content "$R/usr/share/common/file" b
run_sysextd unmerge
assert_ok unmerge

echo "PASS"
