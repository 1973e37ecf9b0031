#!/bin/bash
# An unreadable journal (run/sysextd/state.json) does not lock anyone out: it is moved aside
# with a warning, status still tells the truth from the mount table's markers, and refresh
# and unmerge work.
set -euo pipefail
# shellcheck source=test/lib.sh
. "$(dirname "$0")/../lib.sh"
enter_sandbox "$@"
require_cmd mkfs.erofs
require_fs erofs overlay
make_root

t=$(ext_tree one); ext_file "$t" usr/share/one/f one; mk_image erofs "$t" one >/dev/null
loops_before=$(loop_snapshot)
run_sysextd merge
assert_ok merge

check "a garbled journal is moved aside with a warning"
echo '{"generation": 3, "hierarch' > "$R/run/sysextd/state.json"
run_sysextd status
assert_ok "status with a garbled journal"
assert_contains "$ERR" "state.json could not be read" "stderr of status"
[[ -f "$R/run/sysextd/state.json.corrupt" ]] || fail "the garbled journal was not kept as state.json.corrupt"

check "refresh rebuilds and unmerge removes our overlay"
run_sysextd refresh
assert_ok "refresh after the journal was lost"
assert_file_content "$R/usr/share/one/f" one
assert_eq "$(ours_at "$R/usr")" 1 "sysextd overlays at usr"
run_sysextd --json status
assert_eq "$(json_q "$OUT" '[h["extensions"] for h in d["hierarchies"] if h["hierarchy"] == "/usr"][0]')" '["one"]' "status extensions"
run_sysextd unmerge
assert_ok unmerge
assert_missing "$R/usr/share/one"
assert_eq "$(ours_at "$R/usr")" 0 "sysextd overlays at usr after unmerge"
assert_loops_as_before "$loops_before"

echo "PASS"
