#!/bin/bash
# One erofs image: merge makes its file visible under /usr, `status --json`
# names it, unmerge takes it away again and leaves no loop device behind.
set -euo pipefail
# shellcheck source=test/lib.sh
. "$(dirname "$0")/../lib.sh"
enter_sandbox "$@"
require_cmd mkfs.erofs
require_fs erofs overlay
make_root

t=$(ext_tree ext1)
ext_file "$t" usr/share/ext1/hello "hello from ext1"
mk_erofs "$t" "$R/var/lib/extensions/ext1.raw"
loops_before=$(loop_snapshot)

check "merge of one erofs image succeeds"
run_sysextd merge
assert_ok merge

check "its file is readable under \$R/usr, the base is still there"
assert_file_content "$R/usr/share/ext1/hello" "hello from ext1"
assert_file_content "$R/usr/share/base/file" base
is_overlay "$R/usr" || fail "$R/usr is not an overlay after merge (it is $(fstype "$R/usr"))"

check "status --json names ext1 on /usr"
run_sysextd --json status
assert_ok "status --json"
assert_eq "$(json_q "$OUT" '[h["merged"] for h in d["hierarchies"] if h["hierarchy"] == "/usr"]')" \
	'[true]' "/usr merged"
assert_eq "$(json_q "$OUT" '[h["extensions"] for h in d["hierarchies"] if h["hierarchy"] == "/usr"]')" \
	'[["ext1"]]' "/usr extensions"
[[ $(json_q "$OUT" 'd["mode"] in ("beneath", "degraded")') == true ]] || fail "bad mode in status --json"

check "status (text) names ext1"
run_sysextd status
assert_ok status
assert_contains "$OUT" "ext1" "status output"

check "unmerge succeeds"
run_sysextd unmerge
assert_ok unmerge

check "the file is gone, the base is intact, no loop device left"
assert_missing "$R/usr/share/ext1/hello"
assert_file_content "$R/usr/share/base/file" base
! is_overlay "$R/usr" || fail "$R/usr is still an overlay after unmerge"
assert_loops_as_before "$loops_before"

check "status --json after unmerge: /usr not merged"
run_sysextd --json status
assert_ok "status --json"
assert_eq "$(json_q "$OUT" '[h["merged"] for h in d["hierarchies"] if h["hierarchy"] == "/usr"]')" \
	'[false]' "/usr merged"

echo "PASS"
