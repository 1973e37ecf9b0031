#!/bin/bash
# Nothing found under the root, or named by an option, can block sysextd, crash it, exhaust
# it, or lead it out of the root (issue 11, sections 1-5).  Every command runs under a short
# timeout: a hang fails the test.
#  (a) FIFOs, devices, sockets, directories and oversized files where files are read: image
#      release files (directory and erofs images), sidecars, NAME.raw itself, the journal, the
#      lock, the configuration, certificates, the host's os-release;
#  (b) journal content: garbled and wrongly typed state.json and tree records;
#  (c) --root confines every path: symlinked images, directory images, search directories,
#      sidecars and certificates pointing out of the root stay inside it; an absolute symlink
#      meant inside the root works; a hierarchy that is a symlink is refused, saying so;
#  (d) names: invalid UTF-8, control characters; refused with the reason, never printed raw;
#  (e) configuration: a hierarchy of several components works.
set -euo pipefail
# shellcheck source=test/lib.sh
. "$(dirname "$0")/../lib.sh"
enter_sandbox "$@"
require_cmd mkfs.erofs python3 mkfifo
require_fs erofs overlay
make_root

SYSEXTD_TIMEOUT=20
ext=$R/var/lib/extensions
good=$(ext_tree good)
ext_file "$good" usr/share/good/file good
mk_erofs "$good" "$ext/good.raw"

no_hang() {
	[[ $RC != 124 ]] || fail "$1 hung (killed after ${SYSEXTD_TIMEOUT}s)"
}

# list_image NAME — `list --json`; sets STATUS and REASON of image NAME.
list_image() {
	run_sysextd list --json
	no_hang "list"
	assert_ok "list"
	STATUS=$(json_q "$OUT" "([i['status'] for i in d if i['name'] == '$1'] + [''])[0]")
	REASON=$(json_q "$OUT" "([i.get('reason') or '' for i in d if i['name'] == '$1'] + [''])[0]")
}

merge_good_only() {
	run_sysextd merge
	no_hang "merge ($1)"
	assert_ok "merge next to $1"
	assert_file_content "$R/usr/share/good/file" good
	run_sysextd unmerge
	assert_ok "unmerge"
}

# ---------------------------------------------------------------- (a)
for kind in fifo dir big devnull; do
	check "(a) a directory image whose extension-release is a $kind"
	t=$WORK/rel-$kind
	rm -rf "$t" "$ext/rel$kind"
	mkdir -p "$t/usr/lib/extension-release.d" "$t/usr/share/rel"
	f=$t/usr/lib/extension-release.d/extension-release.rel$kind
	case $kind in
	fifo) mkfifo "$f" ;;
	dir) mkdir "$f" ;;
	big) { echo ID=sysextdtest; head -c 200000 /dev/zero | tr '\0' '#'; echo; } >"$f" ;;
	devnull) ln -s /dev/null "$f" ;;
	esac
	cp -a "$t" "$ext/rel$kind"
	list_image "rel$kind"
reason=$REASON
	assert_eq "$STATUS" refused "status"
	case $kind in
	fifo) assert_contains "$reason" "FIFO" "reason" ;;
	dir) assert_contains "$reason" "directory" "reason" ;;
	big) assert_contains "$reason" "larger than" "reason" ;;
	devnull) assert_contains "$reason" "extension-release" "reason" ;;
	esac
	merge_good_only "a $kind release file"
	rm -rf "$ext/rel$kind"
done

check "(a) an erofs image whose extension-release is a FIFO"
t=$WORK/erofs-fifo
mkdir -p "$t/usr/lib/extension-release.d" "$t/usr/share/x"
mkfifo "$t/usr/lib/extension-release.d/extension-release.efifo"
mk_erofs "$t" "$ext/efifo.raw"
list_image efifo
assert_contains "$REASON" "FIFO" "reason"
merge_good_only "an erofs image with a FIFO release file"
rm -f "$ext/efifo.raw"

for kind in fifo chardev socket; do
	check "(a) NAME.raw that is a $kind is listed and refused with the reason"
	case $kind in
	fifo) mkfifo "$ext/weird.raw" ;;
	chardev) mknod "$ext/weird.raw" c 1 3 ;;
	socket) python3 -c 'import socket, sys; s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])' "$ext/weird.raw" ;;
	esac
	list_image "weird"
reason=$REASON
	assert_eq "$STATUS" refused "status"
	assert_contains "$reason" "$([[ $kind == chardev ]] && echo "character device" || echo "$kind" | sed 's/fifo/FIFO/')" "reason"
	run_sysextd merge
	no_hang "merge"
	assert_ok "merge next to a $kind named NAME.raw"
	assert_contains "$ERR" "weird" "merge names the refused entry"
	run_sysextd status
	assert_contains "$OUT" "Skipped weird" "status lists it as skipped"
	run_sysextd unmerge
	rm -f "$ext/weird.raw"
done

for side in roothash verity roothash.p7s; do
	check "(a) a sidecar NAME.$side that is a FIFO"
	mkfifo "$ext/good.$side"
	[[ $side == roothash.p7s ]] && echo 00 >"$ext/good.roothash" && : >"$ext/good.verity"
	[[ $side == verity ]] && echo 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef >"$ext/good.roothash"
	[[ $side == roothash ]] && : >"$ext/good.verity"
	list_image "good"
reason=$REASON
	assert_eq "$STATUS" refused "status of an image with a FIFO sidecar"
	rm -f "$ext/good.roothash" "$ext/good.verity" "$ext/good.roothash.p7s"
done

for where in config-fifo config-dev config-dir; do
	check "(a) --config= on a $where is refused at once"
	case $where in
	config-fifo) mkfifo "$WORK/conf.fifo"; conf=$WORK/conf.fifo ;;
	config-dev) conf=/dev/zero ;;
	config-dir) conf=$WORK ;;
	esac
	run_sysextd --config="$conf" status
	no_hang "status with --config=$conf"
	assert_failed "status with --config=$conf"
	assert_eq "$(wc -l <<<"$ERR")" 1 "lines of the error"
	assert_contains "$ERR" "$conf" "the error names the file"
done
check "(a) the default configuration as a FIFO"
mkdir -p "$R/etc/sysextd"
mkfifo "$R/etc/sysextd/sysextd.conf"
run_sysextd status
no_hang "status with a FIFO configuration"
assert_failed "status with a FIFO configuration"
assert_contains "$ERR" "FIFO" "error"
rm "$R/etc/sysextd/sysextd.conf"

check "(a) state.json as a FIFO: status does not block, the journal is moved aside"
mkdir -p "$R/run/sysextd"
rm -f "$R/run/sysextd/state.json"
mkfifo "$R/run/sysextd/state.json"
run_sysextd status
no_hang "status with a FIFO journal"
assert_ok "status with a FIFO journal"
assert_contains "$ERR" "moved" "warning"
[[ -p "$R/run/sysextd/state.json.corrupt" ]] || fail "the FIFO was not moved aside"
rm -f "$R/run/sysextd/state.json.corrupt"
check "(a) state.json as a symlink to /dev/zero"
rm -f "$R/run/sysextd/state.json"
ln -s /dev/zero "$R/run/sysextd/state.json"
run_sysextd status
no_hang "status"
assert_ok "status with a symlinked journal"
rm -f "$R/run/sysextd/state.json.corrupt"
check "(a) the lock as a FIFO"
rm -f "$R/run/sysextd/lock"
mkfifo "$R/run/sysextd/lock"
run_sysextd merge
no_hang "merge with a FIFO lock"
assert_failed "merge with a FIFO lock"
assert_contains "$ERR" "lock" "error"
rm "$R/run/sysextd/lock"

check "(a) a FIFO among the trusted certificates is skipped"
mkdir -p "$R/etc/verity.d"
mkfifo "$R/etc/verity.d/fifo.crt"
run_sysextd merge
no_hang "merge with a FIFO certificate"
assert_ok "merge"
run_sysextd unmerge
rm -rf "$R/etc/verity.d"

check "(a) the host's os-release as a FIFO: a clear error, no hang"
mv "$R/usr/lib/os-release" "$WORK/os-release"
mkfifo "$R/usr/lib/os-release"
run_sysextd merge
no_hang "merge with a FIFO os-release"
assert_failed "merge with a FIFO os-release"
assert_contains "$ERR" "os-release" "error"
rm "$R/usr/lib/os-release"
mv "$WORK/os-release" "$R/usr/lib/os-release"

# ---------------------------------------------------------------- (b)
check "(b) journals that fail validation are moved aside; commands go on"
run_sysextd merge
assert_ok merge
for bad in '{"version":2,"generation":null}' '{"version":2,"generation":1,"config_stamp":1,"mount_namespace":1,"incomplete":false,"hierarchies":[{"hierarchy":null}],"images":[]}' \
	'{"generation":3,"hierarchies":[{"hierarchy":"usr","merged":true,"id":"x","extensions":[null],"since":1}],"images":[]}' \
	'[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]' \
	"$(head -c 3000 /dev/urandom | base64 -w0)"; do
	printf '%s' "$bad" >"$R/run/sysextd/state.json"
	run_sysextd status
	no_hang "status"
	assert_ok "status with a bad journal"
	assert_contains "$ERR" "moved" "warning"
	run_sysextd refresh
	assert_ok "refresh after a bad journal"
	assert_eq "$(ours_at "$R/usr")" 1 "our overlays"
done
check "(b) a garbled tree record is moved aside; its mount is then not touched"
rec=$(ls "$R/run/sysextd/trees/"*.json | head -n1)
echo '{"id":null}' >"$rec"
run_sysextd status
assert_ok "status with a garbled tree record"
assert_contains "$ERR" "tree record" "warning"
run_sysextd unmerge
assert_ok "unmerge"
run_sysextd status --json
# The tree whose record was lost is not provably ours: it stays (as an unrecorded overlay).
umount -l "$R/usr" 2>/dev/null || true
umount -l "$R/opt" 2>/dev/null || true

# ---------------------------------------------------------------- (c)
check "(c) image symlinks out of the root stay inside it"
outside=$(mktemp -d /tmp/sysextd-outside.XXXXXX)
on_exit "rm -rf '$outside'"
o=$(ext_tree evil "$outside/src")
ext_file "$o" usr/share/evil/file evil
mk_erofs "$o" "$outside/evil.raw"
mkdir -p "$outside/evildir" && cp -a "$o/." "$outside/evildir/"
mv "$outside/evildir/usr/lib/extension-release.d/extension-release.evil" "$outside/evildir/usr/lib/extension-release.d/extension-release.evildir"
ln -s "$outside/evil.raw" "$ext/evil.raw"
ln -s "../../../../../../../../..$outside/evil.raw" "$ext/evil2.raw"
sed -i 's/evil$/evil2/' "$o/usr/lib/extension-release.d/extension-release.evil" 2>/dev/null || true
ln -s "$outside/evildir" "$ext/evildir"
for n in evil evil2 evildir; do
	list_image "$n"
	assert_eq "$STATUS" refused "status of $n (a symlink out of the root)"
	assert_contains "$REASON" "symbolic link to " "reason for $n"
	assert_contains "$REASON" "does not exist" "reason for $n"
done
assert_contains "$REASON" "symbolic link to $outside/evildir, which does not exist under the root" "the reason names the target"
run_sysextd merge
assert_ok "merge"
assert_missing "$R/usr/share/evil/file"
run_sysextd unmerge
rm -f "$ext/evil.raw" "$ext/evil2.raw" "$ext/evildir"

check "(c) an absolute symlink meant inside the root is followed inside it"
mkdir -p "$R/srv"
inside=$(ext_tree inside)
ext_file "$inside" usr/share/inside/file inside
mk_erofs "$inside" "$R/srv/inside.raw"
ln -s /srv/inside.raw "$ext/inside.raw"
run_sysextd merge
assert_ok "merge with an absolute symlink inside the root"
assert_file_content "$R/usr/share/inside/file" inside
run_sysextd unmerge
rm -f "$ext/inside.raw"

check "(c) a search directory symlinked out of the root"
mkdir -p "$outside/searchdir"
cp "$outside/evil.raw" "$outside/searchdir/evil.raw"
rmdir "$R/run/extensions"
ln -s "$outside/searchdir" "$R/run/extensions"
run_sysextd list --json
assert_ok list
assert_eq "$(json_q "$OUT" '[i["name"] for i in d if i["name"] == "evil"]')" "[]" "images from outside the root"
rm "$R/run/extensions"
mkdir "$R/run/extensions"

check "(c) sidecars and certificates symlinked out of the root"
echo 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef >"$outside/good.roothash"
: >"$outside/good.verity"
ln -s "$outside/good.roothash" "$ext/good.roothash"
ln -s "$outside/good.verity" "$ext/good.verity"
list_image "good"
# Resolved inside the root they lead nowhere: the image has no sidecars there.
assert_eq "$STATUS" compatible "status with sidecars out of the root"
assert_eq "$(json_q "$OUT" '[i["verity"] for i in d if i["name"] == "good"][0]')" none "verity from sidecars out of the root"
rm -f "$ext/good.roothash" "$ext/good.verity"

check "(c) a hierarchy that is a symlink is refused, saying so"
mv "$R/opt" "$R/opt.real"
ln -s opt.real "$R/opt"
run_sysextd merge
assert_failed "merge with a symlinked hierarchy"
assert_contains "$ERR" "$R/opt is a symbolic link" "error"
assert_not_contains "$ERR" "propagat" "error"
rm "$R/opt"
mv "$R/opt.real" "$R/opt"

# ---------------------------------------------------------------- (d)
check "(d) names that are not valid UTF-8 or carry control characters"
bad_utf8=$(printf 'bad\xff\xfename')
ctrl=$(printf 'ctl\033[31mred')
for n in "$bad_utf8" "$ctrl"; do
	mkdir -p "$ext/$n/usr/lib/extension-release.d"
	echo ID=sysextdtest >"$ext/$n/usr/lib/extension-release.d/extension-release.$n"
done
run_sysextd list
assert_ok list
[[ "$OUT" != *$'\033'* ]] || fail "an escape character reached the terminal"
[[ "$OUT" != *$'\xff'* ]] || fail "an invalid byte reached the terminal"
assert_contains "$OUT" 'bad\xff\xfename' "the escaped name"
assert_contains "$OUT" "not valid UTF-8" "the reason"
assert_contains "$OUT" "control characters" "the reason"
run_sysextd list --json
python3 -c 'import json, sys; json.loads(sys.stdin.buffer.read().decode("utf-8"))' <<<"$OUT" || fail "list --json is not valid UTF-8 JSON"
run_sysextd merge
assert_ok "merge next to badly named images"
[[ "$ERR" != *$'\033'* ]] || fail "an escape character reached the terminal in merge"
run_sysextd status
[[ "$OUT$ERR" != *$'\033'* ]] || fail "an escape character reached the terminal in status"
run_sysextd unmerge
rm -rf "$ext/$bad_utf8" "$ext/$ctrl"

# ---------------------------------------------------------------- (e)
check "(e) a hierarchy of several components"
mkdir -p "$R/srv/app"
echo base >"$R/srv/app/base-file"
multi=$(ext_tree multi)
ext_file "$multi" srv/app/file multi
mk_erofs "$multi" "$ext/multi.raw"
printf '[Extensions]\nHierarchies=/usr /srv/app\n' >"$WORK/multi.conf"
run_sysextd --config="$WORK/multi.conf" merge
assert_ok "merge into /srv/app"
assert_file_content "$R/srv/app/file" multi
assert_file_content "$R/srv/app/base-file" base
run_sysextd --config="$WORK/multi.conf" --always-refresh=yes refresh
assert_ok "refresh of /srv/app"
assert_eq "$(ours_at "$R/srv/app")" 1 "our overlays at /srv/app"
run_sysextd --config="$WORK/multi.conf" unmerge
assert_ok "unmerge of /srv/app"
assert_missing "$R/srv/app/file"
echo PASS
