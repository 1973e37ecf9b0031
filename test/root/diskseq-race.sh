#!/bin/bash
# The diskseq race, proven closed. Through the loop-before-mount test hook (after the loop
# device is attached, and after any user-space verity check, before its file system is
# mounted) the loop device is re-pointed at a different image of the same size
# (LOOP_CHANGE_FD). sysextd must notice that the disk sequence number changed, refuse the
# image, mount nothing (the other image's content never appears under $R/usr), and leave
# no loop device behind. Once for a plain image, once for a signed verity image (whose check
# passed before the swap).
set -euo pipefail
# shellcheck source=test/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=test/lib-verity.sh
. "$(dirname "$0")/../lib-verity.sh"
enter_sandbox "$@"
require_test_hooks
require_cmd mkfs.erofs veritysetup openssl
require_fs erofs overlay
make_root

ext=$R/var/lib/extensions

# images NAME — the genuine $ext/NAME.raw and $WORK/NAME-evil.raw: same extension name,
# usr/share/NAME/f says "genuine" or "evil"; evil padded to the genuine one's size.
images() {
	local t
	t=$(ext_tree "$1" "$WORK/genuine-$1")
	ext_file "$t" "usr/share/$1/f" genuine
	mk_erofs "$t" "$ext/$1.raw"
	t=$(ext_tree "$1" "$WORK/evil-$1")
	ext_file "$t" "usr/share/$1/f" evil
	ext_file "$t" "usr/share/$1/evil" "evil was here"
	mk_erofs "$t" "$WORK/$1-evil.raw"
	(($(stat -c %s "$WORK/$1-evil.raw") <= $(stat -c %s "$ext/$1.raw"))) ||
		truncate -s "$(stat -c %s "$WORK/$1-evil.raw")" "$ext/$1.raw"
	truncate -s "$(stat -c %s "$ext/$1.raw")" "$WORK/$1-evil.raw"
}

# The hook: swap the backing file of /dev/loop$SYSEXTD_TEST_HOOK_ARG for $EVIL, and record
# that it did.
cat >"$WORK/swap.py" <<'PY'
import fcntl, os, sys
n = os.environ["SYSEXTD_TEST_HOOK_ARG"]
dev = os.open("/dev/loop" + n, os.O_RDONLY | os.O_CLOEXEC)
new = os.open(os.environ["EVIL"], os.O_RDONLY | os.O_CLOEXEC)
fcntl.ioctl(dev, 0x4C06, new)  # LOOP_CHANGE_FD
with open(os.environ["HOOK_LOG"], "a") as f:
    f.write("/dev/loop%s -> %s\n" % (n, os.environ["EVIL"]))
PY

# race NAME — merge with the hook armed; assert the refusal and that nothing changed.
race() {
	local name=$1 before all_before
	before=$(live_state)
	all_before=$(cat /proc/self/mountinfo)
	loops=$(loop_snapshot)
	rm -f "$WORK/hook.log"
	export SYSEXTD_TEST_HOOK=loop-before-mount SYSEXTD_TEST_HOOK_EXEC="python3 $WORK/swap.py"
	export EVIL=$WORK/$name-evil.raw HOOK_LOG=$WORK/hook.log
	run_sysextd merge
	unset SYSEXTD_TEST_HOOK SYSEXTD_TEST_HOOK_EXEC EVIL HOOK_LOG
	[[ -s "$WORK/hook.log" ]] || fail "the hook did not run (no $WORK/hook.log)"
	log "hook: $(cat "$WORK/hook.log")"
	assert_failed "merge with the loop device swapped under it"
	assert_contains "$ERR" "disk sequence number" "stderr"
	assert_contains "$ERR" "$ext/$name.raw" "stderr"
	assert_not_contains "$ERR" "test hook loop-before-mount: " "stderr (the hook failed)"
	assert_missing "$R/usr/share/$name"
	if grep -rqs evil "$R/usr" "$R/opt"; then
		fail "evil content is visible under \$R: $(grep -rls evil "$R/usr" "$R/opt")"
	fi
	assert_live_unchanged "$before" "live tree after the race"
	assert_eq "$(cat /proc/self/mountinfo)" "$all_before" "this namespace's mount table"
	assert_loops_as_before "$loops"
}

check "plain erofs image: the swap is noticed, nothing is mounted"
images plain
race plain
check "the same image merges without the hook (the refusal was the race, nothing else)"
run_sysextd merge
assert_ok merge
assert_file_content "$R/usr/share/plain/f" genuine
run_sysextd unmerge
assert_ok unmerge
rm "$ext/plain.raw"

check "signed verity image: verified, then swapped; the swap is noticed"
set_policy signed
mk_cert trusted
trust trusted
images signed
verity_format "$ext/signed.raw" >/dev/null
sign_file "$ext/signed.roothash" trusted "$ext/signed.roothash.p7s"
race signed
run_sysextd merge
assert_ok merge
assert_file_content "$R/usr/share/signed/f" genuine
run_sysextd unmerge
assert_ok unmerge

echo "PASS"
