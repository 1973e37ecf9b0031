#!/bin/bash
# Images that do not match the host are skipped, with a reason, and the
# others are merged:
#   - ID=otheros                    incompatible, reason names "otheros"
#   - ships usr/lib/os-release      refused, reason mentions os-release
#   - ID=_any                       accepted
#   - SYSEXT_LEVEL=1 on a host with SYSEXT_LEVEL=2   incompatible
#   - SYSEXT_LEVEL=2 on that host   accepted
set -euo pipefail
# shellcheck source=test/lib.sh
. "$(dirname "$0")/../lib.sh"
enter_sandbox "$@"
require_cmd mkfs.erofs
require_fs erofs overlay
make_root

ext=$R/var/lib/extensions

# list_field NAME EXPR — EXPR over the list --json entry `e` of image NAME.
list_field() {
	json_q "$OUT" "[$2 for e in d if e['name'] == '$1'][0]"
}

t=$(ext_tree good); ext_file "$t" usr/share/good/f good; mk_image erofs "$t" good >/dev/null
t=$(EXT_RELEASE='ID=otheros
VERSION_ID=1' ext_tree other)
ext_file "$t" usr/share/other/f other; mk_image erofs "$t" other >/dev/null
t=$(ext_tree osrel); ext_file "$t" usr/share/osrel/f osrel
ext_file "$t" usr/lib/os-release 'ID=evil'
mk_image directory "$t" osrel >/dev/null
t=$(EXT_RELEASE='ID=_any' ext_tree any); ext_file "$t" usr/share/any/f any; mk_image erofs "$t" any >/dev/null
loops_before=$(loop_snapshot)

check "list --json: good and any compatible, other incompatible, osrel refused"
run_sysextd --json list
assert_ok "list --json"
assert_eq "$(list_field good 'e["compatible"]')" true "good compatible"
assert_eq "$(list_field good 'e["status"]')" compatible "good status"
assert_eq "$(list_field good 'e["reason"]')" null "good reason"
assert_eq "$(list_field any 'e["compatible"]')" true "any (ID=_any) compatible"
assert_eq "$(list_field other 'e["compatible"]')" false "other compatible"
assert_eq "$(list_field other 'e["status"]')" incompatible "other status"
assert_contains "$(list_field other 'e["reason"] or ""')" otheros "reason for other"
assert_eq "$(list_field osrel 'e["compatible"]')" false "osrel compatible"
assert_eq "$(list_field osrel 'e["status"]')" refused "osrel status"
assert_contains "$(list_field osrel 'e["reason"] or ""')" os-release "reason for osrel"

check "list (text): header, and the reasons"
run_sysextd list
assert_ok list
header=$(head -n1 <<<"$OUT")
assert_eq "$(tr -s ' \t' ' ' <<<"$header")" "NAME CLASS KIND PATH STATUS" "list header"
row=$(grep -E '^other[[:space:]]' <<<"$OUT" || true)
assert_contains "$row" "incompatible:" "list row for other"
assert_contains "$row" "otheros" "list row for other"
row=$(grep -E '^osrel[[:space:]]' <<<"$OUT" || true)
assert_contains "$row" "refused:" "list row for osrel"
assert_contains "$row" "os-release" "list row for osrel"
row=$(grep -E '^good[[:space:]]' <<<"$OUT" || true)
assert_contains "$row" "compatible" "list row for good"
assert_not_contains "$row" "incompatible" "list row for good"

check "merge: good and any merged, other and osrel skipped with a warning naming their paths"
run_sysextd merge
assert_ok merge
assert_file_content "$R/usr/share/good/f" good
assert_file_content "$R/usr/share/any/f" any
assert_missing "$R/usr/share/other"
assert_missing "$R/usr/share/osrel"
assert_file_content "$R/usr/lib/os-release" "ID=sysextdtest
VERSION_ID=1"
assert_contains "$ERR" "$ext/other.raw" "merge stderr"
assert_contains "$ERR" "$ext/osrel" "merge stderr"

check "status --json: merged good and any, skipped other and osrel"
run_sysextd --json status
assert_ok "status --json"
assert_eq "$(json_q "$OUT" '[sorted(h["extensions"]) for h in d["hierarchies"] if h["hierarchy"] == "/usr"]')" \
	'[["any", "good"]]' "/usr extensions"
assert_eq "$(json_q "$OUT" 'sorted(s["name"] for s in d["skipped"])')" '["osrel", "other"]' "skipped"
assert_contains "$(json_q "$OUT" '[s["reason"] for s in d["skipped"] if s["name"] == "other"][0]')" otheros "skip reason"

run_sysextd unmerge
assert_ok unmerge
assert_loops_as_before "$loops_before"

check "host with SYSEXT_LEVEL=2: SYSEXT_LEVEL=1 skipped, SYSEXT_LEVEL=2 merged"
rm -rf "${ext:?}"/*
host_os_release 'ID=sysextdtest
VERSION_ID=1
SYSEXT_LEVEL=2'
t=$(EXT_RELEASE='ID=sysextdtest
SYSEXT_LEVEL=1' ext_tree level1)
ext_file "$t" usr/share/level1/f level1; mk_image erofs "$t" level1 >/dev/null
t=$(EXT_RELEASE='ID=sysextdtest
SYSEXT_LEVEL=2' ext_tree level2)
ext_file "$t" usr/share/level2/f level2; mk_image erofs "$t" level2 >/dev/null

run_sysextd --json list
assert_ok "list --json"
assert_eq "$(list_field level1 'e["compatible"]')" false "level1 compatible"
assert_eq "$(list_field level1 'e["status"]')" incompatible "level1 status"
[[ -n "$(list_field level1 'e["reason"] or ""')" ]] || fail "no reason given for level1"
assert_eq "$(list_field level2 'e["compatible"]')" true "level2 compatible"

run_sysextd merge
assert_ok merge
assert_file_content "$R/usr/share/level2/f" level2
assert_missing "$R/usr/share/level1"
assert_contains "$ERR" "$ext/level1.raw" "merge stderr"
run_sysextd unmerge
assert_ok unmerge
assert_loops_as_before "$loops_before"

echo "PASS"
