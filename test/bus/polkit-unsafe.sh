#!/bin/bash
# Options that weaken the configuration need org.sysextd1.manage-unsafe (org.sysextd1(5)), with
# a real polkitd on the private bus as in polkit.sh, ImagePolicy=signed configured, a signed
# image "sig", an unsigned one "unsigned" (refused by the configuration) and a signed one
# "foreign" built for another OS (incompatible unless force):
#  (a) a rule granting nobody org.sysextd1.manage only: plain Merge, Refresh and Unmerge,
#      always-refresh, strict, no-reload, a stricter or the same image-policy, noexec=true,
#      noexec=false for sysext only, mutable=no pass; image-policy=open (or verity, or
#      systemd's root=unprotected), force=true, mutable=yes/ephemeral/import, noexec=false for
#      every class are refused naming org.sysextd1.manage-unsafe, the tree as it was after
#      each refusal; root may use all of them without polkit;
#  (b) a rule granting nobody both actions: image-policy=open merges the unsigned image,
#      force=true the foreign one;
#  (c) a rule looking at the details: manage unless the verb is unmerge, manage-unsafe when
#      force is the only unsafe option and the image policy in effect is signed;
#  (d) a polkit that never answers (a stub owning org.freedesktop.PolicyKit1; test hooks
#      shorten the timeouts to 5 s): the caller is refused with "did not answer within 5 s",
#      an interactive query is cancelled (CancelCheckAuthorization), and the daemon exits when
#      idle afterwards: the pending queries are let go.
set -euo pipefail
# shellcheck source=test/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=test/lib-verity.sh
. "$(dirname "$0")/../lib-verity.sh"
# shellcheck source=test/bus/lib-bus.sh
. "$(dirname "$0")/lib-bus.sh"
# shellcheck source=test/bus/lib-polkit.sh
. "$(dirname "$0")/lib-polkit.sh"
enter_sandbox "$@"
bus_requirements
require_verity_tools
require_cmd gdbus python3
polkit_requirements
make_root

# The images: sig and foreign signed by a trusted certificate, unsigned without verity.
ext=$R/var/lib/extensions
mk_cert trusted
trust trusted
t=$(ext_tree sig)
ext_file "$t" usr/share/sig/f "sig"
mk_image erofs "$t" sig >/dev/null
verity_format "$ext/sig.raw" >/dev/null
sign_file "$ext/sig.roothash" trusted "$ext/sig.roothash.p7s"
t=$(EXT_RELEASE='ID=otheros
VERSION_ID=7' ext_tree foreign)
ext_file "$t" usr/share/foreign/f "foreign"
mk_image erofs "$t" foreign >/dev/null
verity_format "$ext/foreign.raw" >/dev/null
sign_file "$ext/foreign.roothash" trusted "$ext/foreign.roothash.p7s"
t=$(ext_tree unsigned)
ext_file "$t" usr/share/unsigned/f "unsigned"
mk_image erofs "$t" unsigned >/dev/null

CONF=$WORK/signed.conf
printf '[Extensions]\nImagePolicy=signed\n[Daemon]\nIdleTimeoutSec=0\n' >"$CONF"
IDLE_CONF=$WORK/signed-idle.conf
printf '[Extensions]\nImagePolicy=signed\n[Daemon]\nIdleTimeoutSec=3\n' >"$IDLE_CONF"

polkit_files
# Without test hooks the variable does nothing and (d) is skipped.
start_bus "$CONF" SYSEXTD_TEST_POLKIT_TIMEOUT_SEC=5

# refused_unsafe METHOD [N KEY TYPE VALUE...] — nobody's call fails naming the unsafe action,
# and neither the tree nor the generation changes.
refused_unsafe() {
	local before gen
	before=$(tree_snapshot)
	gen=$(generation)
	call_as nobody "$@"
	assert_failed "$* as nobody"
	assert_contains "$ERR" "not authorized to change the merged tree (polkit action org.sysextd1.manage-unsafe, for options that weaken the configuration:" "the refusal of $*"
	assert_eq "$(tree_snapshot)" "$before" "tree after the refusal of $*"
	assert_eq "$(generation)" "$gen" "generation after the refusal of $*"
}

# allowed METHOD [N KEY TYPE VALUE...] — nobody's call succeeds.
allowed() {
	call_as nobody "$@"
	assert_ok "$* as nobody"
}

RULE_MANAGE='polkit.addRule(function(action, subject) {
        if (action.id == "org.sysextd1.manage" && subject.user == "nobody")
                return polkit.Result.YES;
});'
RULE_BOTH='polkit.addRule(function(action, subject) {
        if ((action.id == "org.sysextd1.manage" || action.id == "org.sysextd1.manage-unsafe") &&
            subject.user == "nobody")
                return polkit.Result.YES;
});'
RULE_DETAILS='polkit.addRule(function(action, subject) {
        if (subject.user != "nobody")
                return polkit.Result.NOT_HANDLED;
        if (action.id == "org.sysextd1.manage" && action.lookup("verb") != "unmerge" &&
            action.lookup("force") == "false")
                return polkit.Result.YES;
        if (action.id == "org.sysextd1.manage-unsafe" && action.lookup("force") == "true" &&
            action.lookup("unsafe") == "force" && action.lookup("image-policy") == "signed")
                return polkit.Result.YES;
        return polkit.Result.NO;
});'

# ---------------------------------------------------------------- (a)
check "(a) nobody may manage only: plain calls and options within the configuration pass"
use_rule "$RULE_MANAGE"
allowed Merge
assert_file_content "$R/usr/share/sig/f" sig
assert_missing "$R/usr/share/unsigned/f"
assert_missing "$R/usr/share/foreign/f"
gen=$(generation)
allowed Refresh 1 always-refresh b true
assert_ne "$(generation)" "$gen" "generation after always-refresh"
allowed Refresh 2 strict b true no-reload b true
allowed Refresh 1 image-policy s signed
allowed Refresh 1 noexec b true
allowed Refresh 2 noexec b false class s sysext
allowed Refresh 1 mutable s no
assert_file_content "$R/usr/share/sig/f" sig
assert_missing "$R/usr/share/unsigned/f"

check "(a) options that weaken the configuration are refused, the tree as it was"
refused_unsafe Merge 1 image-policy s open
refused_unsafe Refresh 1 image-policy s open
assert_contains "$ERR" "image-policy=open (configured: signed for sysext)" "the message names the option"
refused_unsafe Refresh 1 image-policy s verity
refused_unsafe Refresh 1 image-policy s root=unprotected
refused_unsafe Refresh 1 force b true
assert_contains "$ERR" "force=true" "the message names the option"
refused_unsafe Refresh 1 mutable s yes
refused_unsafe Refresh 1 mutable s ephemeral
refused_unsafe Refresh 1 sysext-mutable s import
refused_unsafe Refresh 1 noexec b false
refused_unsafe Refresh 2 noexec b false class s confext
refused_unsafe Unmerge 1 force b true
refused_unsafe Refresh 2 always-refresh b true force b true
refused_unsafe --interactive Refresh 1 force b true
assert_file_content "$R/usr/share/sig/f" sig
assert_missing "$R/usr/share/unsigned/f"

check "(a) root uses the same options without polkit"
run_cli refresh --image-policy=open
assert_ok "refresh --image-policy=open as root"
assert_file_content "$R/usr/share/unsigned/f" unsigned
run_cli refresh
assert_ok "refresh as root"
assert_missing "$R/usr/share/unsigned/f"
allowed Unmerge
assert_missing "$R/usr/share/sig/f"

# ---------------------------------------------------------------- (b)
check "(b) nobody may also manage-unsafe: image-policy=open and force go through"
use_rule "$RULE_BOTH"
allowed Merge 1 image-policy s open
assert_file_content "$R/usr/share/unsigned/f" unsigned
assert_file_content "$R/usr/share/sig/f" sig
assert_missing "$R/usr/share/foreign/f"
allowed Refresh 1 force b true
assert_file_content "$R/usr/share/foreign/f" foreign
assert_missing "$R/usr/share/unsigned/f"
# A plain refresh that finds the same images keeps what the forced one merged (as
# systemd-sysext: "unchanged"); a rebuild without force leaves the foreign image out.
allowed Refresh
assert_file_content "$R/usr/share/foreign/f" foreign
allowed Refresh 1 always-refresh b true
assert_missing "$R/usr/share/foreign/f"
allowed Unmerge
assert_missing "$R/usr/share/sig/f"

# ---------------------------------------------------------------- (c)
check "(c) a rule that looks at the details"
use_rule "$RULE_DETAILS"
allowed Merge
assert_file_content "$R/usr/share/sig/f" sig
allowed Refresh 1 force b true
assert_file_content "$R/usr/share/foreign/f" foreign
refused_unsafe Refresh 2 force b true image-policy s open
before=$(tree_snapshot)
call_as nobody Unmerge
assert_failed "Unmerge as nobody (the rule refuses the verb)"
assert_contains "$ERR" "(polkit action org.sysextd1.manage)" "the refusal of Unmerge"
assert_eq "$(tree_snapshot)" "$before" "tree after the refused Unmerge"
run_cli unmerge
assert_ok "unmerge as root"

# ---------------------------------------------------------------- (d)
if [[ "$("$SYSEXTD" --version 2>/dev/null || true)" != *"+test-hooks"* ]]; then
	log "(d) skipped: $SYSEXTD was built without test hooks (-Dtest-hooks=true), the polkit timeout cannot be shortened"
	echo PASS
	exit 0
fi
check "(d) a polkit that never answers: refused after 5 s, the query cancelled, the daemon goes idle"
stop_polkit
STUB_LOG=$WORK/polkit-stub.log
: >"$STUB_LOG"
chmod a+w "$STUB_LOG"
# The system's python (polkitd cannot run one installed in root's home), on a copy polkitd
# can read.
[[ -x /usr/bin/python3 ]] || skip "(d) needs /usr/bin/python3 for the polkit stub"
install -m 0644 "$BUS_SRCDIR/test/bus/polkit-stub.py" "$WORK/polkit-stub.py"
setpriv --reuid=polkitd --regid="$(id -g polkitd)" --clear-groups -- \
	/usr/bin/python3 "$WORK/polkit-stub.py" "$BUS_ADDR" "$STUB_LOG" >>"$BUS_LOG" 2>&1 &
STUB_PID=$!
on_exit "kill $STUB_PID 2>/dev/null || true"
for _ in $(seq 100); do
	grep -qx READY "$STUB_LOG" && break
	kill -0 "$STUB_PID" 2>/dev/null || fail "the polkit stub exited:
$(bus_log)"
	sleep 0.1
done
grep -qx READY "$STUB_LOG" || fail "the polkit stub did not take org.freedesktop.PolicyKit1"

# The next daemon exits after 3 s idle.
write_activation_file "$IDLE_CONF"
p=$(daemon_pid)
[[ -z "$p" ]] || _bus_kill_wait "$p" 20
wait_daemon_gone 20 || fail "the daemon did not exit on SIGTERM"
before=$(tree_snapshot)

start=$SECONDS
call_as nobody Merge
took=$((SECONDS - start))
assert_failed "Merge as nobody with polkit silent"
assert_contains "$ERR" "polkit did not answer within 5 s" "the refusal"
((took >= 4 && took <= 30)) || fail "the refusal came after $took s, not after about 5 s"
grep -q "^CALL CheckAuthorization$" "$STUB_LOG" || fail "the stub saw no CheckAuthorization"

start=$SECONDS
call_as nobody --interactive Refresh 1 force b true
took=$((SECONDS - start))
assert_failed "interactive Refresh as nobody with polkit silent"
assert_contains "$ERR" "polkit did not answer within 5 s" "the refusal"
assert_contains "$ERR" "org.sysextd1.manage-unsafe" "the refusal names the action"
((took >= 4 && took <= 30)) || fail "the refusal came after $took s, not after about 5 s"
for _ in $(seq 50); do
	grep -q "^CALL CancelCheckAuthorization$" "$STUB_LOG" && break
	sleep 0.1
done
grep -q "^CALL CancelCheckAuthorization$" "$STUB_LOG" || fail "the interactive query was not cancelled:
$(cat "$STUB_LOG")"
assert_eq "$(tree_snapshot)" "$before" "tree after the timeouts"

# Nothing is pending any more: the daemon exits when idle (3 s).
wait_daemon_gone 20 || fail "the daemon did not exit when idle after polkit's timeouts:
$(bus_log)"
grep -q "polkit did not answer" "$BUS_LOG" || fail "the daemon did not log the timeout"
echo PASS
