#!/bin/bash
# A mount is sysextd's only by its recorded identity, never by what the merged tree shows
# (issue 10, section 2).
#  (a) an admin hardens the merged usr with a read-only bind of itself: unmerge and refresh
#      refuse and leave the bind; status says usr is merged, under a foreign mount;
#  (b) a bind of our overlay made elsewhere is no reason to touch anything;
#  (c) an overlay of another tool on usr whose layer carries .sysextd/id (also one from
#      source "sysextd", and with a journal that names it): never detached by unmerge or
#      merge; status reports an unrecorded overlay;
#  (d) an image that ships usr/.sysextd/id (a file, a FIFO, a symlink, a directory) is refused
#      with the reason in list; nothing blocks; the other images merge and status is true;
#  (e) the same with the proof of kernels before 6.8 (32-bit mount id, device, source):
#      status names it, and (a) holds.
set -euo pipefail
# shellcheck source=test/lib.sh
. "$(dirname "$0")/../lib.sh"
enter_sandbox "$@"
require_cmd mkfs.erofs timeout
require_fs erofs overlay
make_root

SYSEXTD_TIMEOUT=30
ext=$R/var/lib/extensions
t=$(ext_tree app)
ext_file "$t" usr/share/app/version v1
ext_file "$t" opt/app/version v1
mk_erofs "$t" "$ext/app.raw"
loops_before=$(loop_snapshot)

# status_json — `status --json` into $ST.
status_json() {
	run_sysextd status --json
	assert_ok "status --json"
	ST=$OUT
}

hardening_case() {
	local what=$1 st
	check "($what) merge, then an admin binds usr onto itself read-only"
	run_sysextd merge
	assert_ok merge
	assert_file_content "$R/usr/share/app/version" v1
	mount --bind "$R/usr" "$R/usr"
	mount -o remount,bind,ro "$R/usr"
	snapshot=$(mountinfo_under "$R")

	check "($what) unmerge refuses and leaves the admin's bind and the extensions"
	run_sysextd unmerge
	assert_failed "unmerge under a bind of our overlay"
	assert_contains "$ERR" "foreign" "stderr of unmerge"
	assert_eq "$(mountinfo_under "$R")" "$snapshot" "mounts after the refused unmerge"
	assert_file_content "$R/usr/share/app/version" v1

	check "($what) refresh --always-refresh=yes refuses too"
	run_sysextd --always-refresh=yes refresh
	assert_failed "refresh under a bind of our overlay"
	assert_eq "$(mountinfo_under "$R")" "$snapshot" "mounts after the refused refresh"

	check "($what) status: usr merged with app, covered by a foreign mount (not 'none')"
	status_json; st=$ST
	assert_eq "$(json_q "$st" '[h["extensions"] for h in d["hierarchies"] if h["hierarchy"] == "/usr"][0]')" '["app"]' "usr extensions"
	assert_eq "$(json_q "$st" '[h.get("foreign_mount_on_top", False) for h in d["hierarchies"] if h["hierarchy"] == "/usr"][0]')" true "usr covered"
	run_sysextd status
	assert_contains "$OUT" "covered by a foreign mount" "status text"
	assert_not_contains "$(grep '^/usr' <<<"$OUT")" "none" "usr line of status"

	check "($what) once the bind is gone, unmerge works"
	umount "$R/usr"
	run_sysextd unmerge
	assert_ok "unmerge after the bind is gone"
	assert_eq "$(ours_at "$R/usr") $(ours_at "$R/opt")" "0 0" "our overlays after unmerge"
	assert_loops_as_before "$loops_before"
}

# ---------------------------------------------------------------- (a)
hardening_case a
status_json; st=$ST
assert_eq "$(json_q "$st" 'd["ownership_proof"]')" "unique mount id" "proof on this kernel"

# ---------------------------------------------------------------- (b)
check "(b) a bind of our overlay elsewhere changes nothing"
run_sysextd merge
assert_ok merge
mkdir -p "$R/srv/usr-copy"
mount --bind "$R/usr" "$R/srv/usr-copy"
run_sysextd --always-refresh=yes refresh
assert_ok "refresh with a bind of our overlay elsewhere"
assert_eq "$(ours_at "$R/usr")" 1 "our overlays at usr"
run_sysextd unmerge
assert_ok unmerge
assert_eq "$(ours_at "$R/usr")" 0 "our overlays at usr after unmerge"
assert_file_content "$R/srv/usr-copy/share/app/version" v1
umount "$R/srv/usr-copy"
assert_loops_as_before "$loops_before"

# ---------------------------------------------------------------- (c)
for source in other-tool sysextd; do
	check "(c) an overlay from source '$source' on usr with .sysextd/id in a layer"
	mkdir -p "$WORK/fl/.sysextd" "$WORK/fl/share/foreign" "$WORK/fl2"
	echo deadbeef >"$WORK/fl/.sysextd/id"
	printf 'app\n' >"$WORK/fl/.sysextd/extensions"
	echo foreign >"$WORK/fl/share/foreign/file"
	mount -t overlay "$source" -o "ro,lowerdir=$WORK/fl:$WORK/fl2:$R/usr" "$R/usr"
	snapshot=$(mountinfo_under "$R/usr")

	check "(c/$source) unmerge leaves it alone, and says nothing is merged"
	run_sysextd unmerge
	assert_ok "unmerge with a foreign overlay"
	assert_eq "$(mountinfo_under "$R/usr")" "$snapshot" "mounts at usr after unmerge"
	assert_file_content "$R/usr/share/foreign/file" foreign

	check "(c/$source) a journal that names its marker id changes nothing"
	mkdir -p "$R/run/sysextd"
	cat >"$R/run/sysextd/state.json" <<EOF
{"generation":3,"hierarchies":[{"hierarchy":"usr","merged":true,"id":"deadbeef","extensions":["app"],"since":1}],"images":[]}
EOF
	run_sysextd unmerge
	assert_ok "unmerge with a journal naming the foreign overlay"
	assert_eq "$(mountinfo_under "$R/usr")" "$snapshot" "mounts at usr after unmerge"
	assert_file_content "$R/usr/share/foreign/file" foreign
	if [[ $source == sysextd ]]; then
		run_sysextd status --json
		assert_eq "$(json_q "$OUT" '[h.get("unrecorded_overlays", 0) for h in d["hierarchies"] if h["hierarchy"] == "/usr"][0]')" 1 "unrecorded overlays reported"
	fi

	check "(c/$source) merge goes on top of it, and unmerge takes only ours"
	run_sysextd merge
	assert_ok "merge over the foreign overlay"
	assert_file_content "$R/usr/share/app/version" v1
	assert_file_content "$R/usr/share/foreign/file" foreign
	run_sysextd unmerge
	assert_ok "unmerge"
	assert_eq "$(mountinfo_under "$R/usr")" "$snapshot" "mounts at usr after merge and unmerge"
	umount "$R/usr"
	rm -rf "$WORK/fl" "$WORK/fl2"
	assert_loops_as_before "$loops_before"
done

# ---------------------------------------------------------------- (d)
for kind in file fifo symlink dir; do
	check "(d) an image shipping usr/.sysextd ($kind) is refused, nothing blocks"
	m=$(ext_tree marker)
	mkdir -p "$m/usr/.sysextd" "$m/usr/share/marker"
	echo m >"$m/usr/share/marker/file"
	case $kind in
	file) echo cafe >"$m/usr/.sysextd/id" ;;
	fifo) mkfifo "$m/usr/.sysextd/id" ;;
	symlink) rmdir "$m/usr/.sysextd" && ln -s /etc "$m/usr/.sysextd" ;;
	dir) mkdir -p "$m/usr/.sysextd/other" ;;
	esac
	mk_dir "$m" "$ext/marker"
	run_sysextd list --json
	assert_ok "list with a marker-shipping image ($kind)"
	assert_eq "$(json_q "$OUT" '[i["status"] for i in d if i["name"] == "marker"][0]')" refused "status of the marker image"
	assert_contains "$(json_q "$OUT" '[i["reason"] for i in d if i["name"] == "marker"][0]')" ".sysextd" "reason"
	run_sysextd merge
	assert_ok "merge next to a marker-shipping image ($kind)"
	assert_file_content "$R/usr/share/app/version" v1
	assert_missing "$R/usr/share/marker/file"
	status_json; st=$ST
	assert_eq "$(json_q "$st" '[h["merged"] for h in d["hierarchies"] if h["hierarchy"] == "/usr"][0]')" true "usr merged"
	run_sysextd --always-refresh=yes refresh
	assert_ok "refresh next to it"
	run_sysextd unmerge
	assert_ok "unmerge next to it"
	assert_eq "$(ours_at "$R/usr")" 0 "our overlays after unmerge"
	rm -rf "$ext/marker" "$m"
done
assert_loops_as_before "$loops_before"

# ---------------------------------------------------------------- (e)
if "$SYSEXTD" --version | grep -q '+test-hooks'; then
	export SYSEXTD_TEST_KERNEL=no-unique-mount-id
	hardening_case e
	status_json; st=$ST
	assert_eq "$(json_q "$st" 'd["ownership_proof"]')" "mount id, device and source" "proof without unique ids"
	run_sysextd merge
	assert_ok "merge with the fallback proof"
	run_sysextd --always-refresh=yes refresh
	assert_ok "refresh with the fallback proof"
	assert_eq "$(ours_at "$R/usr")" 1 "our overlays at usr"
	run_sysextd unmerge
	assert_ok "unmerge with the fallback proof"
	assert_eq "$(ours_at "$R/usr")" 0 "our overlays at usr after unmerge"
	unset SYSEXTD_TEST_KERNEL
else
	log "(e) skipped: $SYSEXTD was built without test hooks"
fi
assert_loops_as_before "$loops_before"
echo PASS
