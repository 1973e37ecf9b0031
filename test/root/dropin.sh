#!/bin/bash
# Where systemd's current test of systemd-sysext and a hostile-input corpus found sysextd
# differing from the tool it replaces, each difference as a user meets it (issue 16, §5-6):
#   - $SYSTEMD_SYSEXT_OVERLAYFS_MOUNT_OPTIONS replaces sysextd's default for each key it
#     names (metacopy=on merges on a read-only hierarchy); an option naming a layer is
#     refused with the variable and the option named, the live tree untouched;
#   - xfs images that share a UUID (copies of one template) are live together: refresh v1->v2;
#   - a btrfs spanning two devices is refused as such, not as "truncated";
#   - an erofs whose data needs an extra (blob) device is refused as such, --force too.
set -uo pipefail
# shellcheck source=test/lib.sh
. "$(dirname "$0")/../lib.sh"
enter_sandbox "$@"
require_cmd mkfs.erofs python3
require_fs erofs overlay
make_root
loops_before=$(loop_snapshot)

E=$R/var/lib/extensions
t=$(ext_tree app)
ext_file "$t" usr/share/app/version 1
ext_file "$t" usr/share/app/data "data 1"
mk_erofs "$t" "$E/app.raw"

# ------------------------------------------------------------ overlay options
check "SYSTEMD_SYSEXT_OVERLAYFS_MOUNT_OPTIONS: each given key replaces sysextd's default"
for opts in metacopy=on 'metacopy=on,xino=off' 'redirect_dir=follow,metacopy=on' 'metacopy=on,noexec' \
	'redirect_dir=off' 'metacopy=off,redirect_dir=nofollow' 'xino=off'; do
	SYSTEMD_SYSEXT_OVERLAYFS_MOUNT_OPTIONS=$opts run_sysextd merge
	assert_ok "merge with SYSTEMD_SYSEXT_OVERLAYFS_MOUNT_OPTIONS=$opts"
	assert_file_content "$R/usr/share/app/version" 1
	o=$(findmnt -n -o OPTIONS --mountpoint "$R/usr" | tail -n1)
	case $opts in *metacopy=on*) assert_contains "$o" "metacopy=on" "options of /usr with $opts" ;; esac
	case $opts in *noexec*) assert_contains "$o" "noexec" "options of /usr with $opts" ;; esac
	n=$(grep -o 'redirect_dir=[a-z]*' <<<"$o" | wc -l)
	((n <= 1)) || fail "redirect_dir given twice with $opts: $o"
	run_sysextd unmerge
	assert_ok "unmerge after $opts"
	! is_overlay "$R/usr" || fail "/usr still an overlay after unmerge ($opts)"
done

check "an option that names a layer is refused naming the variable and the option; the live tree stays"
run_sysextd merge
assert_ok "merge"
before=$(top_mount_id "$R/usr")
for bad in lowerdir=/ upperdir=/tmp workdir=/tmp 'xino=off,lowerdir+=/' datadir+=/ source=x '=x'; do
	for var in SYSTEMD_SYSEXT_OVERLAYFS_MOUNT_OPTIONS SYSTEMD_CONFEXT_OVERLAYFS_MOUNT_OPTIONS; do
		env "$var=$bad" "$SYSEXTD" --root="$R" --no-bus refresh --always-refresh=yes >/dev/null 2>"$WORK/err" && rc=0 || rc=$?
		err=$(cat "$WORK/err")
		[[ $rc != 0 ]] || fail "refresh with $var=$bad succeeded"
		assert_contains "$err" "$var" "the refusal of $var=$bad"
		bad_opt=${bad#xino=off,}
		assert_contains "$err" "'$bad_opt'" "the refusal of $var=$bad names the option"
		assert_not_contains "$err" "Invalid argument" "the refusal of $var=$bad"
		assert_eq "$(top_mount_id "$R/usr")" "$before" "the live /usr after $var=$bad"
	done
done
run_sysextd unmerge
assert_ok "unmerge"

# ------------------------------------------------------------ refresh --force
check "refresh --force merges an incompatible image next to a merged one; a plain refresh keeps it"
a=$(EXT_RELEASE='ID=otheros
VERSION_ID=9' ext_tree alien "$WORK/alien")
ext_file "$a" usr/share/alien/f alien
mk_dir "$a" "$E/alien"
run_sysextd merge
assert_ok "merge"
assert_file_content "$R/usr/share/app/version" 1
assert_missing "$R/usr/share/alien/f"
run_sysextd refresh
assert_ok "plain refresh"
assert_contains "$ERR" "unchanged" "a plain refresh with nothing changed"
run_sysextd refresh --force
assert_ok "refresh --force"
assert_not_contains "$ERR" "unchanged" "refresh --force with an incompatible image not merged"
assert_file_content "$R/usr/share/alien/f" alien
assert_file_content "$R/usr/share/app/version" 1
for i in 1 2; do
	run_sysextd refresh
	assert_ok "plain refresh $i after a forced one"
	assert_contains "$ERR" "unchanged" "plain refresh $i after a forced one"
	assert_file_content "$R/usr/share/alien/f" alien
done
run_sysextd refresh --force
assert_ok "a second refresh --force"
assert_contains "$ERR" "unchanged" "refresh --force of trees built with --force"
assert_file_content "$R/usr/share/alien/f" alien
check "a changed image rebuilds a forced tree without --force: the incompatible image goes"
ext_file "$t" usr/share/app/version 2
mk_erofs "$t" "$WORK/app2.raw" && mv "$WORK/app2.raw" "$E/app.raw"
run_sysextd refresh
assert_ok "refresh after app changed"
assert_file_content "$R/usr/share/app/version" 2
assert_missing "$R/usr/share/alien/f"
run_sysextd unmerge
assert_ok "unmerge"
rm -rf "$E/alien"

# ------------------------------------------------------------ sysext.conf, confext.conf
check "ImagePolicy= in systemd's sysext.conf and confext.conf applies to its class; sysextd.conf has the last word"
c=$(EXT_RELEASE='ID=_any' ext_tree conf1 "$WORK/conf1")
mkdir -p "$c/etc/extension-release.d" && mv "$c/usr/lib/extension-release.d/extension-release.conf1" "$c/etc/extension-release.d/"
rm -rf "$c/usr"; ext_file "$c" etc/conf1.conf conf1
mkdir -p "$R/var/lib/confexts" "$R/etc/systemd"
mk_dir "$c" "$R/var/lib/confexts/conf1"
d=$(ext_tree dirext "$WORK/dirext")
ext_file "$d" usr/share/dirext/f dirext
mk_dir "$d" "$E/dirext"
for pol in verity signed 'root=verity+signed:usr=verity+signed' '~' '-'; do
	printf '[SysExt]\nImagePolicy=%s\n' "$pol" >"$R/etc/systemd/sysext.conf"
	rm -f "$R/etc/systemd/confext.conf"
	run_sysextd merge
	assert_ok "merge with sysext.conf ImagePolicy=$pol"
	assert_missing "$R/usr/share/dirext/f"
	assert_contains "$ERR" "dirext" "the refused directory image under ImagePolicy=$pol"
	assert_file_content "$R/etc/conf1.conf" conf1
	run_sysextd unmerge
	assert_ok "unmerge"
	rm -f "$R/etc/systemd/sysext.conf"
	printf '[ConfExt]\nImagePolicy=%s\n' "$pol" >"$R/etc/systemd/confext.conf"
	run_sysextd merge
	assert_ok "merge with confext.conf ImagePolicy=$pol"
	assert_file_content "$R/usr/share/dirext/f" dirext
	[[ ! -e "$R/etc/conf1.conf" ]] || fail "confext.conf ImagePolicy=$pol did not keep the directory confext out"
	run_sysextd unmerge
	assert_ok "unmerge"
done
printf '[SysExt]\nImagePolicy=signed\n' >"$R/etc/systemd/sysext.conf"
mkdir -p "$R/etc/sysextd"
printf '[Extensions]\nImagePolicy=open\n' >"$R/etc/sysextd/sysextd.conf"
run_sysextd merge
assert_ok "merge with sysext.conf signed and sysextd.conf open"
assert_file_content "$R/usr/share/dirext/f" dirext
run_sysextd unmerge
printf '[SysExt]\nImagePolicy=\n' >"$R/etc/systemd/sysext.conf"
rm -f "$R/etc/sysextd/sysextd.conf"
run_sysextd merge
assert_ok "merge with an empty ImagePolicy= in sysext.conf"
assert_file_content "$R/usr/share/dirext/f" dirext
run_sysextd unmerge
rm -rf "$R/etc/systemd" "$R/var/lib/confexts/conf1" "$E/dirext"

# ------------------------------------------------------------ release file values
check "EXTENSION_RELOAD_MANAGER= that is no boolean is ignored with a warning naming the image"
r=$(EXT_RELEASE='ID=_any' ext_tree rel "$WORK/rel")
ext_file "$r" usr/share/rel/f rel
for v in garbage auto 2 '' 'yes please'; do
	printf 'ID=_any\nEXTENSION_RELOAD_MANAGER=%s\n' "$v" >"$r/usr/lib/extension-release.d/extension-release.rel"
	mk_dir "$r" "$E/rel"
	run_sysextd merge
	assert_ok "merge with EXTENSION_RELOAD_MANAGER=$v"
	assert_contains "$ERR" "EXTENSION_RELOAD_MANAGER= in the extension-release file of $E/rel is not a boolean" "EXTENSION_RELOAD_MANAGER=$v"
	assert_file_content "$R/usr/share/rel/f" rel
	run_sysextd unmerge
done
for v in 1 0 yes no true false on off; do
	printf 'ID=_any\nEXTENSION_RELOAD_MANAGER=%s\n' "$v" >"$r/usr/lib/extension-release.d/extension-release.rel"
	mk_dir "$r" "$E/rel"
	run_sysextd merge
	assert_ok "merge with EXTENSION_RELOAD_MANAGER=$v"
	assert_not_contains "$ERR" "not a boolean" "EXTENSION_RELOAD_MANAGER=$v"
	run_sysextd unmerge
done
rm -rf "$E/rel"

# ------------------------------------------------------------ file systems
if command -v mkfs.xfs >/dev/null && grep -qw xfs /proc/filesystems; then
	check "xfs images with one UUID (copies of a template) replace each other: refresh v1 -> v2"
	rm -f "$E/app.raw"
	x=$(ext_tree xapp "$WORK/xsrc")
	ext_file "$x" usr/share/xapp/version 1
	mk_xfs "$x" "$E/xapp.raw"
	uuid=$(blkid -o value -s UUID "$E/xapp.raw")
	run_sysextd merge
	assert_ok "merge of xfs v1"
	assert_file_content "$R/usr/share/xapp/version" 1
	for v in 2 3; do
		ext_file "$x" usr/share/xapp/version "$v"
		mk_xfs "$x" "$WORK/xapp-$v.raw"
		xfs_admin -U "$uuid" "$WORK/xapp-$v.raw" >/dev/null 2>&1 || fail "xfs_admin -U failed"
		assert_eq "$(blkid -o value -s UUID "$WORK/xapp-$v.raw")" "$uuid" "UUID of v$v"
		mv "$WORK/xapp-$v.raw" "$E/xapp.raw"
		run_sysextd refresh
		assert_ok "refresh of xfs to v$v with the same UUID"
		assert_file_content "$R/usr/share/xapp/version" "$v"
	done
	run_sysextd unmerge
	assert_ok "unmerge xfs"
	rm -f "$E/xapp.raw"
else
	log "no xfs here: the xfs UUID case is not run"
fi

if command -v mkfs.btrfs >/dev/null && grep -qw btrfs /proc/filesystems; then
	check "a btrfs spanning two devices is refused as such"
	# mkfs.btrfs fills only one device from a directory (--rootdir); the refusal comes from
	# the superblock, before anything is read from the file system.
	truncate -s 128M "$E/bapp.raw" "$WORK/bapp-2.raw"
	mkfs.btrfs -q -f -d single -m single "$E/bapp.raw" "$WORK/bapp-2.raw" >/dev/null ||
		fail "mkfs.btrfs with two devices failed"
	run_sysextd list
	assert_contains "$OUT$ERR" "spans 2 devices" "list of a two-device btrfs"
	assert_not_contains "$OUT$ERR" "truncated" "list of a two-device btrfs"
	for force in "" --force; do
		run_sysextd merge $force
		assert_contains "$ERR" "spans 2 devices" "merge $force of a two-device btrfs"
		! is_overlay "$R/usr" || fail "a two-device btrfs was merged ($force)"
		assert_missing "$R/usr/share/bapp/f"
	done
	rm -f "$E/bapp.raw" "$WORK/bapp-2.raw"
else
	log "no btrfs here: the two-device case is not run"
fi

check "an erofs that keeps data on an extra (blob) device is refused as such, with --force too"
e=$(ext_tree eapp "$WORK/esrc")
ext_file "$e" usr/share/eapp/big "$(head -c 200000 /dev/urandom | base64)"
mkfs.erofs --quiet --all-root --chunksize=4096 --blobdev="$WORK/eapp.blob" "$E/eapp.raw" "$e" >/dev/null 2>&1 ||
	fail "mkfs.erofs --blobdev failed"
run_sysextd list
assert_contains "$OUT$ERR" "extra device" "list of an erofs with a blob device"
for force in "" --force; do
	run_sysextd merge $force
	assert_contains "$ERR" "extra device" "merge $force of an erofs with a blob device"
	assert_not_contains "$ERR" "use --force" "merge $force of an erofs with a blob device"
	! is_overlay "$R/usr" || fail "an erofs with a blob device was merged ($force)"
done
rm -f "$E/eapp.raw" "$WORK/eapp.blob"

check "no loop device is left attached"
assert_loops_as_before "$loops_before"

echo "PASS"
