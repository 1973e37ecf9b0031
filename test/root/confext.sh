#!/bin/bash
# Configuration extensions on /etc (systemd-confext(8)), through `sysextd --no-bus`:
#   - images in run/confexts, var/lib/confexts, usr/local/lib/confexts, usr/lib/confexts, the
#     first directory winning a name; NAME.confext.raw; the release file in
#     etc/extension-release.d; CONFEXT_LEVEL and CONFEXT_SCOPE, never the SYSEXT_ keys;
#   - /etc merged read-only, nodev, nosuid and noexec, --noexec=no lifting noexec only;
#   - one transaction for both classes, --class= restricting a command; list and status show
#     the class;
#   - a mount below /etc survives merge, refresh and unmerge; a refresh has no window for a
#     reader of /etc.
set -euo pipefail
# shellcheck source=test/lib.sh
. "$(dirname "$0")/../lib.sh"
enter_sandbox "$@"
require_cmd mkfs.erofs
require_fs erofs overlay
make_root

mkdir -p "$R/etc/base" "$R/run/confexts" "$R/var/lib/confexts" "$R/usr/local/lib/confexts" "$R/usr/lib/confexts"
echo base >"$R/etc/base/file"

# cfg_tree NAME [RELEASE] — a configuration extension's tree, release in etc/.
cfg_tree() {
	local d=$WORK/cfg/$1
	rm -rf "$d"
	mkdir -p "$d/etc/extension-release.d"
	printf '%s\n' "${2:-ID=sysextdtest
VERSION_ID=1}" >"$d/etc/extension-release.d/extension-release.$1"
	echo "$d"
}

c=$(cfg_tree web)
ext_file "$c" etc/web/site.conf "listen 80"
ext_file "$c" etc/web/run.sh "#!/bin/sh"
chmod +x "$c/etc/web/run.sh"
mk_erofs "$c" "$R/var/lib/confexts/web.raw"
s=$(ext_tree tool)
ext_file "$s" usr/share/tool/file tool
mk_erofs "$s" "$R/var/lib/extensions/tool.raw"

check "merge: /etc and /usr in one transaction, /etc nodev, nosuid, noexec, read-only"
run_sysextd merge
assert_ok merge
assert_file_content "$R/etc/web/site.conf" "listen 80"
assert_file_content "$R/etc/base/file" base
assert_file_content "$R/usr/share/tool/file" tool
opts=$(findmnt -n -o OPTIONS --mountpoint "$R/etc")
for o in ro nodev nosuid noexec; do
	[[ ",$opts," == *",$o,"* ]] || fail "/etc is not mounted $o: $opts"
done
opts_usr=$(findmnt -n -o OPTIONS --mountpoint "$R/usr")
[[ ",$opts_usr," != *",noexec,"* && ",$opts_usr," != *",nosuid,"* ]] || fail "/usr got the confext flags: $opts_usr"
! touch "$R/etc/new" 2>/dev/null || fail "/etc is writable"
run_sysextd --json status
assert_eq "$(json_q "$OUT" '[(h["hierarchy"], h["class"], h["merged"], h["extensions"]) for h in d["hierarchies"]]')" \
	'[["/usr", "sysext", true, ["tool"]], ["/opt", "sysext", false, []], ["/etc", "confext", true, ["web"]]]' "status"
gen=$(json_q "$OUT" 'd["generation"]')
assert_eq "$gen" 1 "one transaction for both classes"
run_sysextd --json list
assert_eq "$(json_q "$OUT" 'sorted((i["name"], i["class"], i["status"]) for i in d)')" \
	'[["tool", "sysext", "compatible"], ["web", "confext", "compatible"]]' "list"
run_sysextd list
assert_contains "$OUT" "confext" "list (text) shows the class"
run_sysextd status
assert_contains "$OUT" "confext" "status (text) shows the class"

check "--noexec=no lifts noexec on /etc, not nosuid or nodev"
run_sysextd --noexec=no refresh
assert_ok "refresh --noexec=no"
opts=$(findmnt -n -o OPTIONS --mountpoint "$R/etc")
[[ ",$opts," != *",noexec,"* ]] || fail "/etc still noexec after --noexec=no: $opts"
[[ ",$opts," == *",nosuid,"* && ",$opts," == *",nodev,"* ]] || fail "/etc lost nosuid or nodev: $opts"
run_sysextd refresh
assert_ok "refresh with the default noexec again"
opts=$(findmnt -n -o OPTIONS --mountpoint "$R/etc")
[[ ",$opts," == *",noexec,"* ]] || fail "/etc is not noexec again: $opts"

check "--class=: a command for one class leaves the other's trees alone"
usr_before=$(findmnt -n -o ID --mountpoint "$R/usr")
c2=$(cfg_tree web)
ext_file "$c2" etc/web/site.conf "listen 8080"
mk_erofs "$c2" "$WORK/web2.raw"
mv "$WORK/web2.raw" "$R/var/lib/confexts/web.raw"
run_sysextd --class=confext refresh
assert_ok "refresh --class=confext"
assert_file_content "$R/etc/web/site.conf" "listen 8080"
assert_eq "$(findmnt -n -o ID --mountpoint "$R/usr")" "$usr_before" "the /usr mount after a confext refresh"
run_sysextd --class=confext --json status
assert_eq "$(json_q "$OUT" '[h["hierarchy"] for h in d["hierarchies"]]')" '["/etc"]' "status --class=confext"
run_sysextd --class=sysext --json list
assert_eq "$(json_q "$OUT" '[i["name"] for i in d]')" '["tool"]' "list --class=sysext"
run_sysextd --class=sysext unmerge
assert_ok "unmerge --class=sysext"
assert_missing "$R/usr/share/tool/file"
assert_file_content "$R/etc/web/site.conf" "listen 8080"
run_sysextd --class=sysext refresh
assert_ok "refresh --class=sysext: merges the sysext again"
assert_file_content "$R/usr/share/tool/file" tool
assert_file_content "$R/etc/web/site.conf" "listen 8080"
run_sysextd --class=bogus status
assert_rc 1 "--class=bogus"

check "a mount below /etc survives refresh and unmerge"
mkdir -p "$WORK/child"
echo child >"$WORK/child/file"
mount --bind "$WORK/child" "$R/etc/base"
run_sysextd --always-refresh=yes refresh
assert_ok "refresh with a mount below /etc"
assert_file_content "$R/etc/base/file" child
run_sysextd unmerge
assert_ok "unmerge with a mount below /etc"
assert_file_content "$R/etc/base/file" child
assert_missing "$R/etc/web/site.conf"
umount "$R/etc/base"

check "search directories: run/confexts wins over var/lib/confexts, usr/local/lib over usr/lib"
for d in run var/lib usr/local/lib usr/lib; do
	c=$(cfg_tree prio)
	ext_file "$c" etc/prio/from "$d"
	mkdir -p "$R/$d/confexts"
	cp -a "$c" "$R/$d/confexts/prio"
done
run_sysextd --class=confext merge
assert_ok merge
assert_file_content "$R/etc/prio/from" run
run_sysextd unmerge
rm -rf "$R/run/confexts/prio" "$R/var/lib/confexts/prio"
run_sysextd --class=confext merge
assert_ok merge
assert_file_content "$R/etc/prio/from" usr/local/lib
run_sysextd unmerge
rm -rf "$R"/*/confexts/prio "$R"/*/*/confexts/prio "$R"/*/*/*/confexts/prio
[[ ! -e "$R/etc/confexts" ]] || fail "etc/confexts exists"

check "NAME.confext.raw is NAME; a sysext's release file does not make a confext"
c=$(cfg_tree suffixed)
ext_file "$c" etc/suffixed/file suffixed
mk_erofs "$c" "$R/var/lib/confexts/suffixed.confext.raw"
s2=$WORK/wrongplace
rm -rf "$s2"
mkdir -p "$s2/usr/lib/extension-release.d" "$s2/etc/wrong"
echo 'ID=sysextdtest' >"$s2/usr/lib/extension-release.d/extension-release.wrong"
echo wrong >"$s2/etc/wrong/file"
cp -a "$s2" "$R/var/lib/confexts/wrong"
run_sysextd --json --class=confext list
assert_eq "$(json_q "$OUT" '{i["name"]: i["status"] for i in d}')" \
	'{"suffixed": "compatible", "web": "compatible", "wrong": "incompatible"}' "confext list"
run_sysextd --class=confext merge
assert_ok merge
assert_file_content "$R/etc/suffixed/file" suffixed
assert_missing "$R/etc/wrong/file"
run_sysextd unmerge
rm -rf "$R/var/lib/confexts/wrong" "$R/var/lib/confexts/suffixed.confext.raw"

check "CONFEXT_LEVEL and CONFEXT_SCOPE decide, not SYSEXT_LEVEL or SYSEXT_SCOPE"
host_os_release 'ID=sysextdtest
VERSION_ID=1
CONFEXT_LEVEL=7'
for spec in "lvl7:ID=sysextdtest
CONFEXT_LEVEL=7:compatible" "lvl8:ID=sysextdtest
CONFEXT_LEVEL=8
VERSION_ID=1:incompatible" "sysextlevel:ID=sysextdtest
SYSEXT_LEVEL=7:incompatible" "portable:ID=sysextdtest
VERSION_ID=1
CONFEXT_SCOPE=portable:incompatible" "sysextscope:ID=sysextdtest
VERSION_ID=1
SYSEXT_SCOPE=portable:compatible"; do
	name=${spec%%:*}
	rest=${spec#*:}
	want=${rest##*:}
	c=$(cfg_tree "$name" "${rest%:*}")
	ext_file "$c" "etc/$name/f" x
	cp -a "$c" "$R/var/lib/confexts/$name"
done
run_sysextd --json --class=confext list
assert_eq "$(json_q "$OUT" '{i["name"]: i["status"] for i in d if i["name"] != "web"}')" \
	'{"lvl7": "compatible", "lvl8": "incompatible", "portable": "incompatible", "sysextlevel": "incompatible", "sysextscope": "compatible"}' \
	"verdicts by the CONFEXT_ keys"
rm -rf "$R/var/lib/confexts/"{lvl7,lvl8,sysextlevel,portable,sysextscope}
host_os_release 'ID=sysextdtest
VERSION_ID=1'

check "a refresh of /etc has no window: a reader never misses the confext's file"
run_sysextd merge
assert_ok merge
cat >"$WORK/reader.sh" <<EOF
miss=0; n=0
while [ ! -e "$WORK/stop" ]; do
	n=\$((n + 1))
	[ -e "$R/etc/web/site.conf" ] || miss=\$((miss + 1))
done
echo "\$n \$miss" >"$WORK/reader.out"
EOF
sh "$WORK/reader.sh" &
reader=$!
on_exit "touch '$WORK/stop'; kill $reader 2>/dev/null || true"
for i in $(seq 1 20); do
	run_sysextd --class=confext --always-refresh=yes refresh
	assert_ok "refresh $i"
done
touch "$WORK/stop"
wait "$reader"
read -r n miss <"$WORK/reader.out"
log "reader of /etc: $n reads, $miss without the confext's file"
assert_eq "$miss" 0 "reads of /etc that missed the confext's file (of $n)"
run_sysextd unmerge
assert_ok unmerge
assert_missing "$R/etc/web"
assert_file_content "$R/etc/base/file" base

check "installed as systemd-confext / systemd-sysext (a symlink), the command acts on that class only"
mkdir -p "$WORK/names"
ln -sf "$SYSEXTD" "$WORK/names/systemd-confext"
ln -sf "$SYSEXTD" "$WORK/names/systemd-sysext"
as_named() { local name=$1; shift; SYSEXTD=$WORK/names/$name run_sysextd "$@"; }
as_named systemd-confext merge
assert_ok "systemd-confext merge"
[[ -f "$R/etc/web/site.conf" ]] || fail "the confext is not merged on /etc"
assert_missing "$R/usr/share/tool/file"
as_named systemd-confext --json status
assert_eq "$(json_q "$OUT" '[h["hierarchy"] for h in d["hierarchies"]]')" '["/etc"]' "systemd-confext status shows /etc only"
as_named systemd-sysext merge
assert_ok "systemd-sysext merge next to the merged confext"
assert_file_content "$R/usr/share/tool/file" tool
as_named systemd-sysext --json list
assert_eq "$(json_q "$OUT" 'sorted(i["name"] for i in d)')" '["tool"]' "systemd-sysext list shows system extensions only"
as_named systemd-sysext unmerge
assert_ok "systemd-sysext unmerge"
assert_missing "$R/usr/share/tool/file"
[[ -f "$R/etc/web/site.conf" ]] || fail "the confext is not merged on /etc"
as_named systemd-confext --class=sysext --class=confext status
assert_ok "--class= still wins over the name"
assert_contains "$OUT" "/usr" "status with --class= naming both"
as_named systemd-confext unmerge
assert_ok "systemd-confext unmerge"
assert_missing "$R/etc/web/site.conf"
