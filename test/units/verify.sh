#!/bin/bash
# What meson installs for systemd and D-Bus is valid:
#  - `systemd-analyze verify` passes, silently, on every installed sysextd unit
#    (installed into a temporary DESTDIR next to a copy of this machine's
#    units, so that the targets they name resolve); deliberately broken copies
#    make it fail, so the check can fail;
#  - the D-Bus policy is well-formed XML (and valid against the busconfig DTD
#    when the dbus package ships it);
#  - the activation file names org.sysextd1, an installed binary, and
#    SystemdService=sysextd.service, whose BusName= is org.sysextd1.
# Needs no root and mounts nothing.
#
# Environment: BUILD, the meson build directory (test/meson.build sets it).
set -euo pipefail

log() { echo "# $*"; }
check() { echo "CHECK: $*"; }
fail() {
	echo "FAIL: $*" >&2
	exit 1
}
skip() {
	echo "SKIP: $*"
	exit 77
}

BUILD=${BUILD:-${MESON_BUILD_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)/build}}
[[ -f "$BUILD/build.ninja" ]] || skip "no meson build directory at $BUILD (set BUILD)"
command -v systemd-analyze >/dev/null || skip "systemd-analyze is not installed (run tools/deps)"
command -v meson >/dev/null || skip "meson is not installed"
command -v xmllint >/dev/null || skip "xmllint is not installed (run tools/deps: libxml2-utils)"

D=$(mktemp -d /tmp/sysextd-destdir.XXXXXX)
trap 'rm -rf --one-file-system "$D"' EXIT

# verify_quiet UNIT — systemd-analyze verify on UNIT (a path inside $D);
# sets VOUT and VRC.
verify_quiet() {
	VRC=0
	VOUT=$(cd "$D" && SYSTEMD_LOG_COLOR=0 systemd-analyze verify --man=no --root="$D" "${1#"$D"}" 2>&1) || VRC=$?
}

check "the host's units are copied, then meson install --destdir works"
if [[ -d /lib/systemd/system ]]; then
	mkdir -p "$D/lib/systemd/system"
	cp -a /lib/systemd/system/. "$D/lib/systemd/system/"
fi
if [[ -d /usr/lib/systemd/system && ! /usr/lib/systemd/system -ef /lib/systemd/system ]]; then
	mkdir -p "$D/usr/lib/systemd/system"
	cp -a /usr/lib/systemd/system/. "$D/usr/lib/systemd/system/"
fi
meson install -C "$BUILD" --destdir "$D" --no-rebuild >"$D/.install.log" 2>&1 ||
	fail "meson install failed:
$(cat "$D/.install.log")"
rm -f "$D/.install.log"

# Ours: what the build installs for systemd (listed by meson itself), found
# under $D.
mapfile -t units < <(
	meson introspect --installed "$BUILD" | python3 -c '
import json, sys
for src, dst in json.load(sys.stdin).items():
    if "/systemd/" in dst and dst.endswith((".service", ".path", ".socket", ".timer", ".target", ".mount")):
        print(dst)
' | sort
)
((${#units[@]} > 0)) || fail "meson installs no systemd unit"
log "installed units: ${units[*]}"
for want in sysextd.service sysextd-merge.service sysextd-refresh.service sysextd-refresh.path sysextd-varlink.socket; do
	printf '%s\n' "${units[@]}" | grep -q "/$want\$" || fail "$want is not installed"
done

for u in "${units[@]}"; do
	check "systemd-analyze verify $(basename "$u"): exit 0, no output"
	[[ -f "$D$u" ]] || fail "$D$u is missing after meson install"
	verify_quiet "$D$u"
	[[ "$VRC" == 0 && -z "$VOUT" ]] ||
		fail "systemd-analyze verify $u: exit $VRC, output:
$VOUT"
done

svc=$(printf '%s\n' "${units[@]}" | grep '/sysextd\.service$')
unitdir=$D$(dirname "$svc")

check "negative control: Type=bogus makes verify complain"
sed 's/^Type=.*/Type=bogus/' "$D$svc" >"$unitdir/sysextd-broken1.service"
grep -q '^Type=bogus' "$unitdir/sysextd-broken1.service" || fail "no Type= line to break in $svc"
verify_quiet "$unitdir/sysextd-broken1.service"
[[ "$VRC" != 0 || -n "$VOUT" ]] || fail "verify accepted Type=bogus silently: this check cannot fail"
log "verify on Type=bogus: exit $VRC, '$VOUT'"

check "negative control: a missing binary and a missing dependency make verify fail"
sed -e 's|^ExecStart=[^ ]*|ExecStart=/usr/bin/sysextd-does-not-exist|' "$D$svc" >"$unitdir/sysextd-broken2.service"
verify_quiet "$unitdir/sysextd-broken2.service"
[[ "$VRC" != 0 ]] || fail "verify passed with ExecStart= naming a missing binary (output: '$VOUT')"
log "verify on a missing binary: exit $VRC, '$VOUT'"
sed -e '0,/^\[Unit\]/s//[Unit]\nRequires=sysextd-no-such.target/' "$D$svc" >"$unitdir/sysextd-broken3.service"
verify_quiet "$unitdir/sysextd-broken3.service"
[[ "$VRC" != 0 ]] || fail "verify passed with Requires= on a missing unit (output: '$VOUT')"
log "verify on a missing dependency: exit $VRC, '$VOUT'"
rm -f "$unitdir"/sysextd-broken*.service

check "sysextd.service is the D-Bus service: BusName=org.sysextd1"
grep -qx 'BusName=org.sysextd1' "$D$svc" || fail "$svc has no BusName=org.sysextd1"

check "the installed D-Bus policy is well-formed XML"
mapfile -t policies < <(find "$D" -path '*/dbus-1/system.d/*' -name 'org.sysextd1.conf')
((${#policies[@]} == 1)) || fail "expected one installed dbus-1/system.d/org.sysextd1.conf, found: ${policies[*]:-none}"
xmllint --noout "${policies[0]}" || fail "xmllint rejects ${policies[0]}"
if [[ -r /usr/share/xml/dbus-1/busconfig.dtd ]]; then
	check "and valid against the busconfig DTD"
	xmllint --noout --nonet --dtdvalid /usr/share/xml/dbus-1/busconfig.dtd "${policies[0]}" ||
		fail "${policies[0]} is not valid against busconfig.dtd"
fi
grep -q 'own="org.sysextd1"' "${policies[0]}" || fail "the policy does not let anyone own org.sysextd1"

check "the activation file names org.sysextd1, an installed binary and sysextd.service"
mapfile -t acts < <(find "$D" -path '*/dbus-1/system-services/*' -name 'org.sysextd1.service')
((${#acts[@]} == 1)) || fail "expected one installed dbus-1/system-services/org.sysextd1.service, found: ${acts[*]:-none}"
act=${acts[0]}
grep -qx '\[D-BUS Service\]' "$act" || fail "$act has no [D-BUS Service] section"
grep -qx 'Name=org.sysextd1' "$act" || fail "$act does not say Name=org.sysextd1:
$(cat "$act")"
grep -qx 'SystemdService=sysextd.service' "$act" || fail "$act does not say SystemdService=sysextd.service:
$(cat "$act")"
grep -qx 'User=root' "$act" || fail "$act does not say User=root"
exe=$(sed -n 's/^Exec=\([^ ]*\).*/\1/p' "$act")
[[ -n "$exe" ]] || fail "$act has no Exec="
[[ -x "$D$exe" ]] || fail "Exec=$exe in $act is not an installed executable"
[[ "$(sed -n 's/^Exec=//p' "$act")" == *" daemon"* ]] || fail "Exec= in $act does not run 'sysextd daemon'"

echo "PASS"
