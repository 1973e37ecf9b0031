#!/bin/bash
# Policy applies to the live tree (issue 11, section 7): an image merged earlier that no longer
# passes the policy is taken out at the next refresh, with a message naming it, and the other
# images stay; the refresh after that has nothing to do.  A merged image that is broken (its
# hash tree tampered with) still keeps the current tree, as before.
#  (a) its signature deleted under ImagePolicy=signed;
#  (b) its certificate removed from the trusted directory;
#  (c) ImagePolicy tightened from open to verity, with a directory image merged;
#  (d) a tampered hash tree: the refresh fails, the tree stays.
set -euo pipefail
# shellcheck source=test/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=test/lib-verity.sh
. "$(dirname "$0")/../lib-verity.sh"
enter_sandbox "$@"
require_verity_tools
require_fs erofs overlay
make_root

ext=$R/var/lib/extensions
mk_cert one
mk_cert two
for n in alpha beta; do
	t=$(bad_tree "$n")
	mk_image erofs "$t" "$n" >/dev/null
	verity_format "$ext/$n.raw" >/dev/null
done
sign_file "$ext/alpha.roothash" one "$ext/alpha.roothash.p7s"
sign_file "$ext/beta.roothash" two "$ext/beta.roothash.p7s"
mkdir -p "$WORK/pristine"
cp "$ext"/* "$WORK/pristine/"
loops_before=$(loop_snapshot)

fresh() {
	run_sysextd unmerge
	assert_ok unmerge
	rm -rf "${ext:?}"/*
	cp "$WORK/pristine/"* "$ext/"
	rm -rf "$R/etc/verity.d"
	trust one
	trust two
	set_policy "$1"
	run_sysextd merge
	assert_ok merge
	assert_file_content "$R/usr/share/alpha/f" alpha
	assert_file_content "$R/usr/share/beta/f" beta
}

# taken_out NAME WHY — the refresh takes NAME out, naming it, keeps the other; a second refresh
# has nothing to do.
taken_out() {
	run_sysextd refresh
	assert_ok "refresh with $1 no longer allowed"
	assert_contains "$ERR" "$1" "the message names the image"
	assert_contains "$ERR" "no longer passes the image policy" "the message says why"
	assert_contains "$ERR" "$2" "the reason"
	assert_missing "$R/usr/share/$1/f"
	run_sysextd status --json
	assert_contains "$(json_q "$OUT" '[h["extensions"] for h in d["hierarchies"] if h["hierarchy"] == "/usr"][0]')" "$3" "what stays merged"
	run_sysextd refresh
	assert_ok "the next refresh"
	assert_contains "$ERR" "unchanged" "the next refresh has nothing to do"
}

check "(a) ImagePolicy=signed, beta's signature deleted: beta goes, alpha stays"
fresh signed
rm "$ext/beta.roothash.p7s"
taken_out beta "requires a root hash signature" alpha
assert_file_content "$R/usr/share/alpha/f" alpha

check "(b) beta's certificate removed: beta goes, alpha stays"
fresh signed
rm "$R/etc/verity.d/two.crt"
taken_out beta "signature check failed" alpha
assert_file_content "$R/usr/share/alpha/f" alpha

check "(c) ImagePolicy tightened to verity with a directory image merged: the directory goes"
fresh open
run_sysextd unmerge
d=$(bad_tree dirimg)
mk_image directory "$d" dirimg >/dev/null
run_sysextd merge
assert_ok merge
assert_file_content "$R/usr/share/dirimg/f" dirimg
set_policy verity
taken_out dirimg "policy is verity" alpha
assert_file_content "$R/usr/share/alpha/f" alpha
rm -rf "$ext/dirimg"

check "(d) a tampered hash tree: the refresh fails and the current tree stays"
fresh open
flip_byte "$ext/beta.verity" 4100
run_sysextd refresh
assert_failed "refresh with a tampered image merged"
assert_contains "$ERR" "current tree stays" "the message"
assert_file_content "$R/usr/share/beta/f" beta

run_sysextd unmerge
assert_ok unmerge
assert_loops_as_before "$loops_before"
echo PASS
