#!/bin/bash
# Both classes through the daemon (org.sysextd1(5)):
#  - Merge with {"class": "confext"} merges /etc only, {"class": "sysext"} then /usr and /opt;
#  - GetStatus reports each hierarchy's class and whether its tree is writable;
#  - ListImagesEx lists images with their class, one class with {"class": ...};
#  - the mutable mode travels with the call: --mutable=yes and $SYSTEMD_SYSEXT_MUTABLE_MODE
#    of the CLI client make the daemon's tree writable; an invalid class or mode is
#    org.sysextd1.Error.InvalidOption;
#  - `sysextd --json status` and `list` through the daemon say what --no-bus says.
set -euo pipefail
# shellcheck source=test/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=test/bus/lib-bus.sh
. "$(dirname "$0")/lib-bus.sh"
enter_sandbox "$@"
bus_requirements
make_root
bus_setup_images
mkdir -p "$R/var/lib/confexts/site/etc/extension-release.d" "$R/var/lib/confexts/site/etc/site"
echo 'ID=sysextdtest
VERSION_ID=1' >"$R/var/lib/confexts/site/etc/extension-release.d/extension-release.site"
echo site >"$R/var/lib/confexts/site/etc/site/conf"
start_bus "$NOIDLE_CONF"

check "Merge {class: confext}: /etc only"
gcall Merge '{"class": <"confext">}'
assert_ok "Merge class=confext"
assert_file_content "$R/etc/site/conf" site
assert_missing "$R/usr/share/ext1/hello"

check "GetStatus: the class of every hierarchy, last"
run_bctl --json=short call org.sysextd1 /org/sysextd1 org.sysextd1.Manager GetStatus
assert_ok GetStatus
assert_eq "$(json_q "$OUT" 'd["type"]')" "sta(sbastb)a(ssss)sa(sssb)a(ssb)" "GetStatus signature"
assert_eq "$(json_q "$OUT" 'd["data"][6]')" '[["/usr", "sysext", false], ["/opt", "sysext", false], ["/etc", "confext", false]]' "classes"
assert_eq "$(json_q "$OUT" '[h[1] for h in d["data"][2]]')" '[false, false, true]' "merged per hierarchy"

check "Merge {class: sysext}: /usr and /opt, /etc stays"
gcall Merge '{"class": <"sysext">}'
assert_ok "Merge class=sysext"
assert_file_content "$R/usr/share/ext1/hello" "hello from ext1"
assert_file_content "$R/etc/site/conf" site

check "ListImagesEx: the class of every image; one class on request"
run_bctl --json=short call org.sysextd1 /org/sysextd1 org.sysextd1.Manager ListImagesEx 'a{sv}' 0
assert_ok ListImagesEx
assert_eq "$(json_q "$OUT" 'sorted((i[0], i[7]) for i in d["data"][0])')" '[["ext1", "sysext"], ["ext2", "sysext"], ["site", "confext"]]' "images"
run_bctl --json=short call org.sysextd1 /org/sysextd1 org.sysextd1.Manager ListImagesEx 'a{sv}' 1 class s confext
assert_eq "$(json_q "$OUT" '[i[0] for i in d["data"][0]]')" '["site"]' "ListImagesEx class=confext"
run_bctl --json=short call org.sysextd1 /org/sysextd1 org.sysextd1.Manager ListImages
assert_eq "$(json_q "$OUT" 'd["type"]')" "a(ssssssb)" "ListImages keeps its signature"

check "the CLI through the daemon says what --no-bus says (status, list, both classes)"
for verb in status list; do
	run_cli --json "$verb"
	a=$OUT
	run_sysextd --json "$verb"
	b=$OUT
	assert_eq "$(json_q "$a" 'd')" "$(json_q "$b" 'd')" "sysextd --json $verb through the daemon and in process"
done
run_cli --class=confext --json status
assert_eq "$(json_q "$OUT" '[(h["hierarchy"], h["class"]) for h in d["hierarchies"]]')" '[["/etc", "confext"]]' "status --class=confext"

check "--mutable=yes through the daemon: /opt writable, GetStatus says so"
run_cli --mutable=yes --always-refresh=yes refresh
assert_ok "refresh --mutable=yes"
echo w >"$R/opt/w" || fail "/opt is not writable after refresh --mutable=yes"
assert_file_content "$R/var/lib/extensions.mutable/opt/w" w
run_bctl --json=short call org.sysextd1 /org/sysextd1 org.sysextd1.Manager GetStatus
assert_eq "$(json_q "$OUT" 'd["data"][6]')" '[["/usr", "sysext", true], ["/opt", "sysext", true], ["/etc", "confext", false]]' "writable per hierarchy"
run_cli status
assert_contains "$OUT" "(writable)" "status (text)"

check "\$SYSTEMD_SYSEXT_MUTABLE_MODE of the client travels with the call"
run_cli unmerge
assert_ok unmerge
_capture env DBUS_SYSTEM_BUS_ADDRESS="$BUS_ADDR" SYSTEMD_SYSEXT_MUTABLE_MODE=no "$SYSEXTD" --root="$R" merge
assert_ok "merge with SYSTEMD_SYSEXT_MUTABLE_MODE=no"
! touch "$R/opt/x" 2>/dev/null || fail "/opt writable with SYSTEMD_SYSEXT_MUTABLE_MODE=no"
run_cli unmerge
_capture env DBUS_SYSTEM_BUS_ADDRESS="$BUS_ADDR" SYSTEMD_SYSEXT_MUTABLE_MODE=auto "$SYSEXTD" --root="$R" merge
assert_ok "merge with SYSTEMD_SYSEXT_MUTABLE_MODE=auto"
echo a >"$R/opt/a" || fail "/opt not writable with SYSTEMD_SYSEXT_MUTABLE_MODE=auto (the directory exists)"
run_cli unmerge

check "an invalid class or mutable mode: InvalidOption, nothing merged"
gcall Merge '{"class": <"bogus">}'
assert_failed "Merge class=bogus"
assert_eq "$(gdbus_error_name)" org.sysextd1.Error.InvalidOption "error of class=bogus"
gcall Merge '{"mutable": <"sometimes">}'
assert_failed "Merge mutable=sometimes"
assert_eq "$(gdbus_error_name)" org.sysextd1.Error.InvalidOption "error of mutable=sometimes"
gcall Merge '{"class": <true>}'
assert_eq "$(gdbus_error_name)" org.sysextd1.Error.InvalidOption "error of class=true"
! is_overlay "$R/usr" || fail "/usr merged after the refused calls"

check "a transition through the daemon drops the image mounts a run in process kept (sysextd(8), KEPT LAYERS)"
run_sysextd merge
assert_ok "merge in process"
if [[ $(findmnt -n -o FSTYPE --mountpoint "$R/run/sysextd/layers/ns" 2>/dev/null) == nsfs ]]; then
	run_cli refresh --always-refresh=yes
	assert_ok "refresh through the daemon"
	[[ -z $(findmnt -n --mountpoint "$R/run/sysextd/layers" 2>/dev/null || true) ]] ||
		fail "the kept layers are still there after a transition of the daemon"
	assert_missing "$R/run/sysextd/layers.id"
	assert_file_content "$R/usr/share/ext1/hello" "hello from ext1"
elif python3 -c 'import os, sys; v = os.uname().release.split("-")[0].split("."); sys.exit(0 if (int(v[0]), int(v[1])) >= (6, 15) else 1)'; then
	fail "nothing kept by the merge in process on Linux $(uname -r) (6.15 or later keeps the image mounts)"
else
	log "nothing kept here (a kernel older than 6.15): nothing to drop"
fi
run_cli unmerge
assert_ok unmerge
