#!/bin/bash
# A root whose mount does not propagate (private) cannot reach any other mount namespace:
# systemd-sysext merges there and says nothing.  sysextd merges too, but warns, naming the
# hierarchy; on a shared root there is no such warning.
set -euo pipefail
# shellcheck source=test/lib.sh
. "$(dirname "$0")/../lib.sh"
enter_sandbox "$@"
require_cmd mkfs.erofs
require_fs erofs overlay
make_root

t=$(ext_tree one); ext_file "$t" usr/share/one/f one; mk_image erofs "$t" one >/dev/null

check "on the shared root: no propagation warning"
run_sysextd merge
assert_ok "merge on a shared root"
assert_not_contains "$ERR" "does not propagate" "stderr of merge on a shared root"
run_sysextd unmerge
assert_ok unmerge

check "on a private root: merged, with a warning naming \$R/usr"
mount --make-private "$R"
run_sysextd merge
assert_ok "merge on a private root"
assert_file_content "$R/usr/share/one/f" one
assert_contains "$ERR" "$R/usr sits on a mount that does not propagate" "stderr of merge on a private root"
run_sysextd unmerge
assert_ok unmerge
assert_missing "$R/usr/share/one"

echo "PASS"
