#!/bin/bash
# Host facts come from the base (issue 16, §6; base.c): what sysextd believes about the host
# is never something a merged image supplies.
#  (a) a root whose release file is only etc/os-release: a confext that ships etc/os-release
#      (another OS) is merged; the next refresh and list still judge the sysexts by the
#      host's own release: the right one stays merged, the foreign one stays out;
#  (b) a confext that ships etc/systemd/sysext.conf (Mutable=yes, then an ImagePolicy=
#      that refuses every image) and etc/sysextd/sysextd.conf (Hierarchies=/opt only): none
#      of it changes what the next refresh does;
#  (c) a sysext that ships a certificate under usr/lib/... where TrustedCertificates= points
#      (and a confext that ships one under etc/verity.d): an image signed with its key is
#      still refused under ImagePolicy=signed.
# PARTS="b c" runs only those parts.
set -euo pipefail
# shellcheck source=test/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=test/lib-verity.sh
. "$(dirname "$0")/../lib-verity.sh"
enter_sandbox "$@"
require_cmd mkfs.erofs python3
require_fs erofs overlay
make_root
loops_before=$(loop_snapshot)

E=$R/var/lib/extensions
C=$R/var/lib/confexts
# The host's release is etc/os-release only.
rm -f "$R/usr/lib/os-release"
printf 'ID=hostos\nVERSION_ID=1\n' >"$R/etc/os-release"

EXT_RELEASE=$'ID=hostos\nVERSION_ID=1' t=$(ext_tree right)
ext_file "$t" usr/share/right/f right
mk_erofs "$t" "$E/right.raw"
EXT_RELEASE=$'ID=otheros\nVERSION_ID=1' t=$(ext_tree foreign)
ext_file "$t" usr/share/foreign/f foreign
mk_erofs "$t" "$E/foreign.raw"

# confext CASE FILE CONTENT — a directory confext named 'evil' shipping FILE (below etc/).
confext() {
	rm -rf "$C/evil"
	mkdir -p "$C/evil/etc/extension-release.d"
	printf 'ID=hostos\nVERSION_ID=1\n' >"$C/evil/etc/extension-release.d/extension-release.evil"
	mkdir -p "$(dirname "$C/evil/etc/$1")"
	printf '%s\n' "$2" >"$C/evil/etc/$1"
}

part() { [[ " ${PARTS:-a b c} " == *" $1 "* ]]; }

shows() {
	local s=
	[[ -e $R/usr/share/right/f ]] && s+=right
	[[ -e $R/usr/share/foreign/f ]] && s+=${s:+,}foreign
	echo "${s:-none}"
}

# ---------------------------------------------------------------- (a)
if part a; then
check "(a) a confext ships etc/os-release of another OS: the sysexts are still judged by the host's"
confext os-release $'ID=otheros\nVERSION_ID=1'
run_sysextd merge
assert_ok "merge"
assert_eq "$(shows)" right "sysexts merged"
assert_file_content "$R/etc/os-release" $'ID=otheros\nVERSION_ID=1'
for i in 1 2; do
	run_sysextd --always-refresh=yes refresh
	assert_ok "refresh $i with the confext's os-release merged"
	assert_eq "$(shows)" right "sysexts merged after refresh $i"
done
run_sysextd list
assert_contains "$OUT" "foreign" "list"
python3 - "$OUT" <<'PY' || fail "list judges by the confext's os-release"
import sys
for line in sys.argv[1].splitlines():
    f = line.split()
    if f and f[0] == "right" and "incompatible" in line:
        sys.exit(1)
    if f and f[0] == "foreign" and "incompatible" not in line:
        sys.exit(1)
PY
run_sysextd unmerge
assert_ok "unmerge"

# The command line reaches the root below the trees for its configuration before it takes the
# lock, and keeps that for the facts only when it is a copy made with our trees stripped off: a
# confext merged in between (here by another sysextd, from a test hook) must not supply them.
if [[ $("$SYSEXTD" --version) == *"+test-hooks"* ]]; then
	check "(a) a confext merged after the configuration was read, before the lock: the facts are still the host's"
	SYSEXTD_TEST_HOOK=config-read \
		SYSEXTD_TEST_HOOK_EXEC="env -u SYSEXTD_TEST_HOOK $SYSEXTD --root=$R --no-bus --class=confext merge" \
		run_sysextd --class=sysext merge
	assert_ok "merge of the sysexts, the confext merged meanwhile"
	assert_file_content "$R/etc/os-release" $'ID=otheros\nVERSION_ID=1'
	assert_eq "$(shows)" right "sysexts merged, judged by the host's os-release"
	run_sysextd unmerge
	assert_ok "unmerge"
fi
fi

# ---------------------------------------------------------------- (b)
if part b; then
for c in "systemd/sysext.conf|[SysExt]
Mutable=yes" "systemd/sysext.conf|[SysExt]
ImagePolicy=root=absent:usr=absent" "sysextd/sysextd.conf|[Extensions]
Hierarchies=/opt" "sysextd/sysextd.conf|[Extensions]
Mutable=yes"; do
	file=${c%%|*} content=${c#*|}
	check "(b) a confext ships etc/$file (${content//$'\n'/ }): the next refresh does as the host's configuration says"
	confext "$file" "$content"
	run_sysextd merge
	assert_ok "merge with the confext"
	assert_eq "$(shows)" right "sysexts merged"
	assert_file_content "$R/etc/$file" "$content"
	run_sysextd --always-refresh=yes refresh
	assert_ok "refresh with the confext's $file merged"
	assert_eq "$(shows)" right "sysexts after the refresh"
	echo x 2>/dev/null >"$R/usr/share/written" && fail "/usr became writable through the confext's $file"
	is_overlay "$R/usr" || fail "/usr is no longer merged after the refresh"
	run_sysextd unmerge
	assert_ok "unmerge"
done
rm -rf "$C/evil"
fi

# ---------------------------------------------------------------- (c)
if part c; then
if command -v veritysetup >/dev/null && command -v openssl >/dev/null; then
	check "(c) certificates that images ship are not trusted"
	set_policy signed "TrustedCertificates=/usr/lib/sysextd-trust"
	mk_cert host
	mk_cert evil
	mkdir -p "$R/usr/lib/sysextd-trust"
	cp "$WORK/host.crt" "$R/usr/lib/sysextd-trust/host.crt"
	# 'right' signed by the host's key; 'carrier' ships the evil certificate into the trusted
	# directory and is itself signed by the host's key; 'payload' is signed by the evil key.
	rm -f "$E"/*.raw
	EXT_RELEASE=$'ID=hostos\nVERSION_ID=1' t=$(ext_tree carrier "$WORK/src/carrier")
	ext_file "$t" usr/lib/sysextd-trust/evil.crt "$(cat "$WORK/evil.crt")"
	mk_erofs "$t" "$E/carrier.raw"
	verity_format "$E/carrier.raw" >/dev/null
	sign_file "$E/carrier.roothash" host "$E/carrier.roothash.p7s"
	EXT_RELEASE=$'ID=hostos\nVERSION_ID=1' t=$(ext_tree payload "$WORK/src/payload")
	ext_file "$t" usr/share/payload/f payload
	mk_erofs "$t" "$E/payload.raw"
	verity_format "$E/payload.raw" >/dev/null
	sign_file "$E/payload.roothash" evil "$E/payload.roothash.p7s"
	run_sysextd merge
	assert_ok "merge under ImagePolicy=signed"
	[[ -e $R/usr/lib/sysextd-trust/evil.crt ]] || fail "the carrier is not merged"
	[[ -e $R/usr/share/payload/f ]] && fail "the payload signed by an untrusted key was merged"
	run_sysextd --always-refresh=yes refresh
	assert_ok "refresh with the carrier's certificate merged"
	[[ -e $R/usr/share/payload/f ]] && fail "the payload was merged on the strength of a certificate an image shipped"
	run_sysextd list
	assert_contains "$OUT" "payload" "list"
	run_sysextd unmerge
	assert_ok "unmerge"
else
	log "(c) skipped: veritysetup or openssl missing"
fi
fi

assert_loops_as_before "$loops_before"
