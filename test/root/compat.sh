#!/bin/bash
# systemd-sysext's command line, environment and matching rules, as a script written for it
# sees them through `sysextd --no-bus`:
#   - exit status 0 or 1 in the same situations (no image, only incompatible ones, already
#     merged, nothing to unmerge, an unchanged refresh, bad options and arguments);
#   - --json=pretty|short|off|help, --no-legend, --no-pager, --always-refresh=, --force,
#     --image-policy= (systemd's syntax), options after the verb, help as a verb;
#   - $SYSTEMD_SYSEXT_HIERARCHIES;
#   - ID_LIKE both ways, .v directories (the newest version for this machine), NAME.sysext.raw,
#     an empty directory masking an image of a later search directory;
#   - a newest .v entry that is a symbolic link out of the root (absolute, or ../ escaping),
#     dangling, or to a directory where image files are: listed as refused naming the entry,
#     with the reason; no older version stands in; a refresh keeps the merged tree; a link
#     to an image inside the root is that image.
set -euo pipefail
# shellcheck source=test/lib.sh
. "$(dirname "$0")/../lib.sh"
enter_sandbox "$@"
require_cmd mkfs.erofs python3
require_fs erofs overlay
make_root

E=$R/var/lib/extensions

check "exit status: merge with no image at all is 0, 'No extensions found.'"
run_sysextd merge
assert_ok "merge without images"
assert_contains "$ERR" "No extensions found." "merge without images"
! is_overlay "$R/usr" || fail "/usr became an overlay"

check "exit status: only incompatible images is 0, with the count (as systemd-sysext 252, 257 and main)"
t=$(EXT_RELEASE='ID=otheros
VERSION_ID=9' ext_tree alien)
ext_file "$t" usr/share/alien/f alien
mk_dir "$t" "$E/alien"
run_sysextd merge
assert_rc 0 "merge with only an incompatible image"
assert_contains "$ERR" "No suitable extensions found (1 ignored due to incompatible image(s)); nothing was merged" "message"
assert_contains "$ERR" "alien" "the skipped image is named"
assert_missing "$R/usr/share/alien/f"
! is_overlay "$R/usr" || fail "/usr became an overlay"
for bad in 'ID=otheros' 'ID=otheros
ID_LIKE=alsoother' 'ID_LIKE=testos' "ID=_any
ARCHITECTURE=s390" "ID=$(. "$R/usr/lib/os-release"; echo "$ID")
VERSION_ID=0.0.0-no"; do
	printf '%s\n' "$bad" >"$E/alien/usr/lib/extension-release.d/extension-release.alien"
	run_sysextd merge
	assert_rc 0 "merge with only an image of release '${bad//$'\n'/ }'"
	! is_overlay "$R/usr" || fail "/usr became an overlay for '${bad//$'\n'/ }'"
	assert_contains "$ERR" "No suitable extensions found (1 ignored" "message for '${bad//$'\n'/ }'"
done
check "an incompatible image next to a compatible one is skipped, the merge succeeds"
t=$(ext_tree fine)
ext_file "$t" usr/share/fine/f fine
mk_dir "$t" "$E/fine"
run_sysextd merge
assert_ok "merge with one compatible and one incompatible image"
assert_file_content "$R/usr/share/fine/f" fine
assert_missing "$R/usr/share/alien/f"
run_sysextd unmerge
assert_ok "unmerge"
rm -rf "$E/fine"
printf 'ID=otheros\nVERSION_ID=9\n' >"$E/alien/usr/lib/extension-release.d/extension-release.alien"
check "refresh with only incompatible images is 0 and leaves nothing merged"
run_sysextd refresh
assert_ok "refresh with only an incompatible image"
assert_contains "$ERR" "No suitable extensions found (1 ignored due to incompatible image(s), 0 refused)" "refresh's message"
! is_overlay "$R/usr" || fail "/usr became an overlay"

check "--force merges it (release files not matched), and one without a release file"
mkdir -p "$E/norel/usr/share/norel"
echo norel >"$E/norel/usr/share/norel/f"
run_sysextd --force merge
assert_ok "merge --force"
assert_file_content "$R/usr/share/alien/f" alien
assert_file_content "$R/usr/share/norel/f" norel

check "exit status: merge when merged is 1; unmerge twice is 0 both times"
run_sysextd --force merge
assert_rc 1 "merge when already merged"
assert_contains "$ERR" "already merged" "message"
run_sysextd unmerge
assert_ok "unmerge"
run_sysextd unmerge
assert_ok "unmerge with nothing merged"
rm -rf "$E/alien" "$E/norel"

t=$(ext_tree app)
ext_file "$t" usr/share/app/f v1
mk_erofs "$t" "$E/app.raw"

check "exit status: an unchanged refresh is 0 and keeps the mount; --always-refresh=yes rebuilds"
run_sysextd merge
assert_ok merge
id1=$(findmnt -n -o ID --mountpoint "$R/usr")
run_sysextd refresh
assert_ok "unchanged refresh"
assert_contains "$ERR" "no change was found, use --always-refresh=yes" "message"
assert_eq "$(findmnt -n -o ID --mountpoint "$R/usr")" "$id1" "mount after the unchanged refresh"
run_sysextd refresh --always-refresh=yes
assert_ok "refresh --always-refresh=yes (after the verb)"
[[ $(findmnt -n -o ID --mountpoint "$R/usr") != "$id1" ]] || fail "--always-refresh=yes did not rebuild"
run_sysextd --always-refresh=no refresh
assert_ok "refresh --always-refresh=no"
assert_contains "$ERR" "no change was found" "message"

check "exit status 1 for bad options and arguments, 0 for the help texts"
for bad in "--bogus" "--json=bogus status" "--always-refresh=maybe refresh" "--noexec=maybe merge" \
	"--mutable=sometimes merge" "--image-policy=root=bogus merge" "frobnicate" "status extra" "--class=x status"; do
	# shellcheck disable=SC2086
	run_sysextd $bad
	assert_rc 1 "sysextd $bad"
done
for good in "--help" "help" "--version" "--json=help" "--mutable=help"; do
	# shellcheck disable=SC2086
	run_sysextd $good
	assert_ok "sysextd $good"
done
run_sysextd --json=help
assert_eq "$OUT" "pretty
short
off" "--json=help"

check "--json=short and --json=pretty: systemd-sysext's status and list"
run_sysextd --json=short status
assert_ok "status --json=short"
assert_eq "$(wc -l <<<"$OUT")" 1 "lines of --json=short"
assert_eq "$(json_q "$OUT" '[h["hierarchy"] for h in d]')" '["/etc", "/opt", "/usr"]' "hierarchies, sorted"
assert_eq "$(json_q "$OUT" '[h["extensions"] for h in d]')" '["none", "none", ["app"]]' "extensions"
assert_eq "$(json_q "$OUT" '[h["since"] is None for h in d]')" '[true, true, false]' "since"
[[ $(json_q "$OUT" 'd[2]["since"] > 1500000000 * 10**6') == true ]] || fail "since is not microseconds: $OUT"
run_sysextd --json=pretty status
assert_ok "status --json=pretty"
(( $(wc -l <<<"$OUT") > 3 )) || fail "--json=pretty is not indented: $OUT"
assert_eq "$(json_q "$OUT" 'd[2]["extensions"]')" '["app"]' "pretty"
run_sysextd --json=short list
assert_eq "$(json_q "$OUT" '[(i["name"], i["type"], i["path"]) for i in d]')" "[[\"app\", \"raw\", \"$E/app.raw\"]]" "list --json=short"
run_sysextd --json=off status
assert_contains "$OUT" "HIERARCHY" "--json=off is the table"

check "--no-legend: no header; --no-pager: accepted"
run_sysextd --no-legend --no-pager status
assert_ok "status --no-legend --no-pager"
assert_not_contains "$OUT" "HIERARCHY" "status --no-legend"
run_sysextd --no-legend list
assert_not_contains "$OUT" "NAME" "list --no-legend"
assert_contains "$OUT" "app" "list --no-legend"
run_sysextd unmerge
assert_ok unmerge

check "\$SYSTEMD_SYSEXT_HIERARCHIES: only the hierarchies it names; an invalid one is an error"
ext_file "$t" opt/app/f opt
mk_erofs "$t" "$E/app.raw"
SYSTEMD_SYSEXT_HIERARCHIES=/opt run_sysextd merge
assert_ok "merge with SYSTEMD_SYSEXT_HIERARCHIES=/opt"
assert_file_content "$R/opt/app/f" opt
assert_missing "$R/usr/share/app/f"
SYSTEMD_SYSEXT_HIERARCHIES=/opt run_sysextd unmerge
for bad in "relative" "/" "" "/usr:relative"; do
	SYSTEMD_SYSEXT_HIERARCHIES=$bad run_sysextd merge
	assert_rc 1 "SYSTEMD_SYSEXT_HIERARCHIES='$bad'"
	assert_contains "$ERR" "SYSTEMD_SYSEXT_HIERARCHIES" "the error names the variable"
done
! is_overlay "$R/usr" || fail "/usr merged despite the invalid variable"

check "--image-policy=: systemd's syntax; a policy the image does not pass fails the merge"
run_sysextd --image-policy=root=signed+absent:usr=signed+absent merge
assert_rc 1 "merge of an unsigned image under a signed-only policy"
assert_contains "$ERR" "app" "the error names the image"
! is_overlay "$R/usr" || fail "/usr merged under the refusing policy"
run_sysextd --image-policy='*' merge
assert_ok "merge --image-policy=*"
run_sysextd unmerge
run_sysextd --image-policy=- merge
assert_rc 1 "merge --image-policy=-"
run_sysextd --image-policy=root=verity+signed+encrypted+unprotected+absent:usr=verity+signed+encrypted+unprotected+absent merge
assert_ok "merge under systemd's default policy"
run_sysextd unmerge

check "ID_LIKE: the host like the extension's ID, the extension like the host's ID"
host_os_release 'ID=derived
ID_LIKE="sysextdtest other"
VERSION_ID=1'
t2=$(ext_tree likeext)
ext_file "$t2" usr/share/likeext/f like
mk_dir "$t2" "$E/likeext"
t3=$(EXT_RELEASE='ID=child
ID_LIKE=derived
VERSION_ID=1' ext_tree childext)
ext_file "$t3" usr/share/childext/f child
mk_dir "$t3" "$E/childext"
t4=$(EXT_RELEASE='ID=stranger
ID_LIKE=nobody
VERSION_ID=1' ext_tree strangerext)
mk_dir "$t4" "$E/strangerext"
run_sysextd --json list
assert_eq "$(json_q "$OUT" '{i["name"]: i["status"] for i in d}')" \
	'{"app": "compatible", "childext": "compatible", "likeext": "compatible", "strangerext": "incompatible"}' "verdicts"
run_sysextd merge
assert_ok merge
assert_file_content "$R/usr/share/likeext/f" like
assert_file_content "$R/usr/share/childext/f" child
run_sysextd unmerge
rm -rf "$E/likeext" "$E/childext" "$E/strangerext"
host_os_release 'ID=sysextdtest
VERSION_ID=1'

check ".v directories: the newest version for this machine; NAME.sysext.raw"
rm -f "$E/app.raw"
mkdir -p "$E/app.raw.v"
arch=$(python3 -c 'import platform; m = platform.machine(); print({"x86_64": "x86-64", "aarch64": "arm64"}.get(m, m))')
other=$([[ $arch == arm64 ]] && echo x86-64 || echo arm64)
for v in 1.2 1.10 1.9; do
	t=$(ext_tree app "$WORK/src/app-$v")
	ext_file "$t" usr/share/app/version "$v"
	mk_erofs "$t" "$E/app.raw.v/app_$v.raw"
done
t=$(ext_tree app "$WORK/src/app-9")
ext_file "$t" usr/share/app/version "9 for $other"
mk_erofs "$t" "$E/app.raw.v/app_9_$other.raw"
t=$(ext_tree app "$WORK/src/app-8")
ext_file "$t" usr/share/app/version "8 out of tries"
mk_erofs "$t" "$E/app.raw.v/app_8+0-3.raw"
t=$(ext_tree app "$WORK/src/app-1.10a")
ext_file "$t" usr/share/app/version "1.10 for $arch"
mk_erofs "$t" "$E/app.raw.v/app_1.10_$arch.raw"
mkdir -p "$E/dirext.v/dirext_1" "$E/dirext.v/dirext_2"
for v in 1 2; do
	t=$(ext_tree dirext "$WORK/src/dirext-$v")
	ext_file "$t" usr/share/dirext/version "$v"
	cp -a "$t/." "$E/dirext.v/dirext_$v/"
done
t=$(ext_tree suff)
ext_file "$t" usr/share/suff/f suffixed
mk_erofs "$t" "$E/suff.sysext.raw"
run_sysextd --json list
assert_eq "$(json_q "$OUT" 'sorted((i["name"], i["path"].rsplit("/", 2)[-2] + "/" + i["path"].rsplit("/", 1)[-1]) for i in d)')" \
	"[[\"app\", \"app.raw.v/app_1.10_$arch.raw\"], [\"dirext\", \"dirext.v/dirext_2\"], [\"suff\", \"extensions/suff.sysext.raw\"]]" \
	"the versions picked"
run_sysextd merge
assert_ok merge
assert_file_content "$R/usr/share/app/version" "1.10 for $arch"
assert_file_content "$R/usr/share/dirext/version" 2
assert_file_content "$R/usr/share/suff/f" suffixed
run_sysextd status
assert_contains "$OUT" "app" "status names the versioned image by its name"
run_sysextd unmerge
rm -rf "$E/dirext.v" "$E/suff.sysext.raw"

check "an empty directory of the same name in an earlier search directory masks an image"
mkdir -p "$R/etc/extensions/app"
t=$(ext_tree other)
ext_file "$t" usr/share/other/f other
mk_dir "$t" "$E/other"
run_sysextd merge
assert_ok "merge with app masked"
assert_missing "$R/usr/share/app/version"
assert_file_content "$R/usr/share/other/f" other
run_sysextd unmerge
rm -rf "$E/other"
run_sysextd merge
assert_rc 0 "merge with the only image masked (an incompatible image, as systemd-sysext)"
assert_contains "$ERR" "No suitable extensions found" "merge with the only image masked"
assert_contains "$ERR" "$R/etc/extensions/app" "the mask is named"
assert_missing "$R/usr/share/app/version"
rmdir "$R/etc/extensions/app"
run_sysextd merge
assert_ok "merge with the mask gone"
assert_file_content "$R/usr/share/app/version" "1.10 for $arch"
run_sysextd unmerge
assert_ok unmerge

check ".v directories: a newest entry that is a symbolic link out of the root, dangling or to no image is refused, naming it; no older version stands in and the merged tree stays"
outside=$(mktemp -d /tmp/sysextd-vdir.XXXXXX)
on_exit "rm -rf '$outside'"
t=$(ext_tree app "$WORK/src/app-escaped")
ext_file "$t" usr/share/app/version "escaped the root"
mk_erofs "$t" "$outside/app.raw"
mkdir -p "$R/srv/notimage/usr/share/app"
echo "not an image" >"$R/srv/notimage/usr/share/app/version"
t=$(ext_tree other)
ext_file "$t" usr/share/other/f other
mk_dir "$t" "$E/other"
v=$E/app.raw.v/app_20.raw
run_sysextd merge
assert_ok "merge before the links"
assert_file_content "$R/usr/share/app/version" "1.10 for $arch"
for c in absolute relative dangling directory; do
	case $c in
	absolute)
		ln -s "$outside/app.raw" "$v"
		want="cannot open app.raw.v/app_20.raw: it is a symbolic link to $outside/app.raw, which does not exist under the root (links are resolved inside it)" ;;
	relative)
		# From $E/app.raw.v on the host this reaches $outside/app.raw; inside the root ".."
		# stops at the root.
		ln -s "../../../../../../../../..$outside/app.raw" "$v"
		want="cannot open app.raw.v/app_20.raw: it is a symbolic link to ../../../../../../../../..$outside/app.raw, which does not exist inside the root" ;;
	dangling)
		ln -s app_gone.raw "$v"
		want="cannot open app.raw.v/app_20.raw: it is a symbolic link to app_gone.raw, which does not exist inside the root" ;;
	directory)
		ln -s /srv/notimage "$v"
		want="app.raw.v/app_20.raw is a symbolic link to /srv/notimage, which is a directory, not an image file (the versions in app.raw.v are image files)" ;;
	esac
	id=$(findmnt -n -o ID --mountpoint "$R/usr")

	run_sysextd --json list
	assert_ok "list ($c link)"
	assert_eq "$(json_q "$OUT" '[(i["status"], i["path"], i.get("reason")) for i in d if i["name"] == "app"]')" \
		"$(python3 -c 'import json, sys; print(json.dumps([["refused", sys.argv[1], sys.argv[2]]]))' "$v" "$want")" \
		"app with app_20.raw a $c link: refused, the entry and the reason named"
	run_sysextd list
	assert_ok "list ($c link)"
	assert_contains "$OUT" "$v" "list names the entry ($c link)"
	assert_contains "$OUT" "refused: $want" "list gives the reason ($c link)"

	# Merged: a refresh keeps the current tree (a broken update of a live extension).
	run_sysextd refresh
	assert_failed "refresh with app_20.raw a $c link"
	assert_contains "$ERR" "$want" "refresh gives the reason ($c link)"
	assert_contains "$ERR" "the current tree stays" "refresh ($c link)"
	assert_eq "$(findmnt -n -o ID --mountpoint "$R/usr")" "$id" "the merged /usr after the refresh ($c link)"
	assert_file_content "$R/usr/share/app/version" "1.10 for $arch"
	assert_file_content "$R/usr/share/other/f" other

	# Not merged: app is skipped, app_1.10 does not stand in for it, nothing escapes.
	run_sysextd unmerge
	assert_ok "unmerge ($c link)"
	run_sysextd merge
	assert_ok "merge next to app_20.raw a $c link"
	assert_contains "$ERR" "$want" "merge gives the reason ($c link)"
	assert_file_content "$R/usr/share/other/f" other
	assert_missing "$R/usr/share/app/version"
	run_sysextd unmerge
	assert_ok "unmerge ($c link)"

	rm "$v"
	run_sysextd merge
	assert_ok "merge with the $c link gone"
	assert_file_content "$R/usr/share/app/version" "1.10 for $arch"
done

check ".v directories: a newest entry that links to an image inside the root is that image"
t=$(ext_tree app "$WORK/src/app-20")
ext_file "$t" usr/share/app/version "20 through a link"
mk_erofs "$t" "$R/srv/app-20.raw"
ln -s /srv/app-20.raw "$v"
run_sysextd --json list
assert_eq "$(json_q "$OUT" '[(i["status"], i["path"]) for i in d if i["name"] == "app"]')" "[[\"compatible\", \"$v\"]]" \
	"app with app_20.raw a link inside the root"
run_sysextd refresh
assert_ok "refresh to the linked app_20.raw"
assert_file_content "$R/usr/share/app/version" "20 through a link"
assert_file_content "$R/usr/share/other/f" other
run_sysextd unmerge
assert_ok unmerge
rm -rf "$v" "$E/other" "$R/srv/notimage" "$R/srv/app-20.raw"
