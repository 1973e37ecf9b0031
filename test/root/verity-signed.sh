#!/bin/bash
# Signed verity images (NAME.roothash.p7s, PKCS#7 over the hex root hash) checked against
# the certificates in $R/etc/verity.d. Under ImagePolicy=signed: a validly signed image
# merges and status says "signed"; an image without a signature, one signed by an untrusted
# certificate, one whose signature is over another root hash, and any image when the trusted
# directory is empty are refused, each with its reason. Under ImagePolicy=open a signature
# that does not validate is still refused. Every refusal leaves the live tree as it was.
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
set_policy signed
mk_cert trusted
mk_cert other
trust trusted

t=$(ext_tree sig)
ext_file "$t" usr/share/sig/f sig
mk_image erofs "$t" sig >/dev/null
verity_format "$ext/sig.raw" >/dev/null
sign_file "$ext/sig.roothash" trusted "$ext/sig.roothash.p7s"
loops_before=$(loop_snapshot)

check "a validly signed image merges under ImagePolicy=signed"
run_sysextd merge
assert_ok merge
assert_file_content "$R/usr/share/sig/f" sig
mode=$(list_field sig verity)
[[ "$mode" == userspace || "$mode" == dm ]] || fail "list --json verity for sig: $mode"
assert_eq "$(list_field sig signed)" true "list --json signed for sig"
run_sysextd list
assert_contains "$(grep -E '^sig[[:space:]]' <<<"$OUT")" "compatible verity=$mode signed" "list row for sig"
run_sysextd status
assert_ok status
assert_contains "$OUT" "Image sig ($ext/sig.raw): verity=$mode, signed" "status"
run_sysextd --json status
assert_ok "status --json"
assert_eq "$(json_q "$OUT" '[i["signed"] for i in d["images"] if i["name"] == "sig"]')" '[true]' "status --json signed"

check "verity without a signature: refused under ImagePolicy=signed"
t=$(bad_tree nosig)
mk_image erofs "$t" nosig >/dev/null
verity_format "$ext/nosig.raw" >/dev/null
try_refused nosig "requires a root hash signature"

check "a signature by an untrusted certificate: refused"
t=$(bad_tree untr)
mk_image erofs "$t" untr >/dev/null
verity_format "$ext/untr.raw" >/dev/null
sign_file "$ext/untr.roothash" other "$ext/untr.roothash.p7s"
try_refused untr "signature" "etc/verity.d"

check "a trusted signature over another root hash: refused"
t=$(bad_tree swapped)
mk_image erofs "$t" swapped >/dev/null
verity_format "$ext/swapped.raw" >/dev/null
sign_file "$ext/sig.roothash" trusted "$ext/swapped.roothash.p7s"
try_refused swapped "signature"

check "garbage in .roothash.p7s: refused"
t=$(bad_tree garbage)
mk_image erofs "$t" garbage >/dev/null
verity_format "$ext/garbage.raw" >/dev/null
head -c 300 /dev/urandom >"$ext/garbage.roothash.p7s"
try_refused garbage "signature"

check "ImagePolicy=open: a signature that does not validate is still refused"
set_policy open
t=$(bad_tree openuntr)
mk_image erofs "$t" openuntr >/dev/null
verity_format "$ext/openuntr.raw" >/dev/null
sign_file "$ext/openuntr.roothash" other "$ext/openuntr.roothash.p7s"
try_refused openuntr "signature"
t=$(bad_tree openswap)
mk_image erofs "$t" openswap >/dev/null
verity_format "$ext/openswap.raw" >/dev/null
sign_file "$ext/sig.roothash" trusted "$ext/openswap.roothash.p7s"
try_refused openswap "signature"
set_policy signed

run_sysextd unmerge
assert_ok unmerge
assert_loops_as_before "$loops_before"

# From here on, on an unmerged root: a merge that refuses its only image fails and
# changes nothing.
merge_refused() {
	local before
	before=$(live_state)
	run_sysextd merge
	assert_failed "merge ($*)"
	assert_refused sig "$ext/sig.raw" "$@"
	assert_live_unchanged "$before" "live tree after a refused merge"
	assert_missing "$R/usr/share/sig"
	assert_loops_as_before "$loops_before"
}

check "the trusted directory empty: refused, the reason names the directory"
rm "$R/etc/verity.d/trusted.crt"
merge_refused "etc/verity.d"
check "the trusted directory missing: refused, the reason names the directory"
rmdir "$R/etc/verity.d"
merge_refused "etc/verity.d"
mkdir "$R/etc/verity.d"
trust trusted

check "the same image without its .roothash.p7s: refused under ImagePolicy=signed"
mv "$ext/sig.roothash.p7s" "$WORK/sig.roothash.p7s"
merge_refused "requires a root hash signature"

check "... and merges again with it"
mv "$WORK/sig.roothash.p7s" "$ext/sig.roothash.p7s"
run_sysextd merge
assert_ok merge
assert_file_content "$R/usr/share/sig/f" sig
run_sysextd unmerge
assert_ok unmerge
assert_loops_as_before "$loops_before"

echo "PASS"
