#!/bin/bash
# refresh must re-check what the verdict of a merged image depends on besides the image
# file itself: its sidecars (NAME.roothash.p7s, NAME.verity, NAME.roothash), the trusted
# certificates and ImagePolicy. Each case below changes only one of those for a merged
# image so that it would now be refused; refresh must not answer "unchanged, nothing to
# do" with success, but re-probe the image and say why it is refused (what it then does
# with the live tree is the engine's rule for a refused live extension).
# Fails on 8e7a877: images_unchanged() (src/core/engine.c) compares only the image file's
# dev/inode/size/mtime with the journal.
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
mk_cert trusted

t=$(bad_tree sig)
mk_image erofs "$t" sig >/dev/null
verity_format "$ext/sig.raw" >/dev/null
sign_file "$ext/sig.roothash" trusted "$ext/sig.roothash.p7s"
cp "$ext"/sig.* "$WORK/"
loops_before=$(loop_snapshot)

# fresh POLICY — unmerged, pristine sidecars, trusted certificate, POLICY; then merge.
fresh() {
	run_sysextd unmerge
	assert_ok unmerge
	assert_loops_as_before "$loops_before"
	cp "$WORK"/sig.roothash "$WORK"/sig.verity "$WORK"/sig.roothash.p7s "$ext/"
	rm -rf "$R/etc/verity.d"
	trust trusted
	set_policy "$1"
	run_sysextd merge
	assert_ok merge
	assert_file_content "$R/usr/share/sig/f" sig
}

# refresh_notices NEEDLE — refresh re-probes and reports the refusal (reason has NEEDLE).
refresh_notices() {
	run_sysextd refresh
	assert_not_contains "$ERR" "unchanged, nothing to do" "stderr of refresh"
	assert_contains "$ERR" "$1" "stderr of refresh"
	run_sysextd --strict refresh
	assert_failed "refresh --strict"
	assert_contains "$ERR" "$1" "stderr of refresh --strict"
}

fresh signed
check "ImagePolicy=signed: the signature removed from a merged image"
rm "$ext/sig.roothash.p7s"
refresh_notices "requires a root hash signature"

fresh signed
check "ImagePolicy=signed: the trusted certificate removed"
rm "$R/etc/verity.d/trusted.crt"
refresh_notices "no trusted certificates"

fresh open
check "a merged image's hash tree tampered with"
flip_byte "$ext/sig.verity" 4100
refresh_notices "verity"

fresh open
check "ImagePolicy changed from open to signed with an unsigned image merged"
run_sysextd unmerge
set_policy open
rm "$ext/sig".*
t=$(bad_tree plain)
mk_image erofs "$t" plain >/dev/null
run_sysextd merge
assert_ok merge
assert_file_content "$R/usr/share/plain/f" plain
set_policy signed
run_sysextd refresh
assert_not_contains "$ERR" "unchanged, nothing to do" "stderr of refresh"
assert_contains "$ERR" "requires" "stderr of refresh"

run_sysextd unmerge
assert_ok unmerge
assert_loops_as_before "$loops_before"
echo "PASS"
