#!/bin/bash
# Mounts below a hierarchy survive every transition at every depth, with their flags, and
# unmerge gives back the base exactly as it was (issue 16, §2):
#   - nested mounts (a tmpfs on /opt/a with another on /opt/a/b, three levels under
#     /usr/local) are there after merge, each refresh and unmerge, in this namespace and in a
#     service's (a slave), with their content;
#   - after unmerge with mounts below (a /usr/local tmpfs, a file bind-mounted on
#     /etc/resolv.conf as container managers make) the hierarchy is the base: writable, exec
#     allowed, the same mount flags as before the first merge, and a second unmerge has
#     nothing to do;
#   - an extension that replaces a mount point (a directory where a file is bind-mounted, a
#     symlink, a file where a directory is mounted) is refused saying so, the live tree kept.
set -uo pipefail
# shellcheck source=test/lib.sh
. "$(dirname "$0")/../lib.sh"
enter_sandbox "$@"
require_cmd mkfs.erofs python3
require_fs erofs overlay
make_root
loops_before=$(loop_snapshot)

E=$R/var/lib/extensions
C=$R/var/lib/confexts
mkdir -p "$C"
t=$(ext_tree app)
ext_file "$t" usr/share/app/v 1
ext_file "$t" opt/app/v 1
mkdir -p "$t/opt/a" "$t/usr/local"
mk_erofs "$t" "$E/app.raw"

# A confext with a file in /etc.
c=$WORK/conf
mkdir -p "$c/etc/extension-release.d"
printf 'ID=_any\n' >"$c/etc/extension-release.d/extension-release.conf"
ext_file "$c" etc/conf.d/x conf
mk_dir "$c" "$C/conf"

# The mounts below, before anything is merged.
mkdir -p "$R/opt/a" "$R/usr/local" "$R/etc"
mount -t tmpfs a "$R/opt/a" && mkdir -p "$R/opt/a/b" && mount -t tmpfs b "$R/opt/a/b" || fail "tmpfs"
echo nested >"$R/opt/a/b/f"
mount -t tmpfs local "$R/usr/local" && mkdir -p "$R/usr/local/x" && mount -t tmpfs x "$R/usr/local/x" &&
	mkdir -p "$R/usr/local/x/y" && mount -t tmpfs y "$R/usr/local/x/y" || fail "tmpfs"
echo deep >"$R/usr/local/x/y/f"
echo 'nameserver 192.0.2.1' >"$WORK/resolv.conf"
touch "$R/etc/resolv.conf" && mount --bind "$WORK/resolv.conf" "$R/etc/resolv.conf" || fail "bind resolv.conf"
printf '#!/bin/sh\necho hook\n' >"$R/etc/hook.sh" && chmod +x "$R/etc/hook.sh"

flags_before_usr=$(findmnt -n -o VFS-OPTIONS -T "$R/usr" | tail -n1)
flags_before_etc=$(findmnt -n -o VFS-OPTIONS -T "$R/etc" | tail -n1)

# A service: a slave namespace of this one, holding on while we work.
mkfifo "$WORK/svc.in"
unshare -m --propagation slave sh -c "exec 3<'$WORK/svc.in'; while read -r cmd <&3; do sh -c \"\$cmd\"; done" &
SVC=$!
exec 4>"$WORK/svc.in"
on_exit "exec 4>&-; kill $SVC 2>/dev/null; wait $SVC 2>/dev/null"
in_service() { # CMD — run in the service namespace, its output in $WORK/svc.out
	rm -f "$WORK/svc.out"
	echo "($1) >'$WORK/svc.out' 2>&1; echo done >>'$WORK/svc.out'" >&4
	for _ in $(seq 100); do [[ -f "$WORK/svc.out" ]] && grep -q '^done$' "$WORK/svc.out" && break; sleep 0.1; done
	sed '$d' "$WORK/svc.out"
}

assert_below() { # WHAT — every mount below and its content, here and in the service
	assert_file_content "$R/opt/a/b/f" nested
	assert_file_content "$R/usr/local/x/y/f" deep
	assert_file_content "$R/etc/resolv.conf" 'nameserver 192.0.2.1'
	mountpoint -q "$R/opt/a/b" || fail "$1: /opt/a/b is no mount point"
	mountpoint -q "$R/usr/local/x/y" || fail "$1: /usr/local/x/y is no mount point"
	assert_eq "$(in_service "cat '$R/opt/a/b/f'")" nested "$1: /opt/a/b/f in the service"
	assert_eq "$(in_service "cat '$R/usr/local/x/y/f'")" deep "$1: /usr/local/x/y/f in the service"
	assert_eq "$(in_service "cat '$R/etc/resolv.conf'")" 'nameserver 192.0.2.1' "$1: resolv.conf in the service"
}

check "nested mounts below /opt, /usr and /etc after merge"
run_sysextd merge
assert_ok "merge"
assert_file_content "$R/usr/share/app/v" 1
assert_file_content "$R/etc/conf.d/x" conf
assert_below "after merge"

for i in 1 2 3; do
	check "nested mounts after refresh $i"
	ext_file "$t" usr/share/app/v "$((i + 1))"
	mk_erofs "$t" "$WORK/app.raw" && mv "$WORK/app.raw" "$E/app.raw"
	run_sysextd refresh
	assert_ok "refresh $i"
	assert_file_content "$R/usr/share/app/v" "$((i + 1))"
	assert_eq "$(in_service "cat '$R/usr/share/app/v'")" "$((i + 1))" "refresh $i in the service"
	assert_below "after refresh $i"
	run_sysextd refresh --always-refresh=yes
	assert_ok "forced rebuild $i"
	assert_below "after forced rebuild $i"
done

check "a file bind-mounted on /etc/resolv.conf where a confext ships a directory: refused saying so"
c2=$WORK/conf2
mkdir -p "$c2/etc/extension-release.d" "$c2/etc/resolv.conf"
printf 'ID=_any\n' >"$c2/etc/extension-release.d/extension-release.conf2"
ext_file "$c2" etc/resolv.conf/inside x
mk_dir "$c2" "$C/conf2"
run_sysextd refresh
assert_failed "refresh with a directory over a file mount"
assert_contains "$ERR" "/etc/resolv.conf is a mount of a file, but in the new tree it is a directory" "the refusal"
assert_not_contains "$ERR" "Invalid argument" "the refusal"
assert_below "after the refused refresh"
rm -rf "$C/conf2"

check "a symlink where a directory is mounted (or above it): refused saying so"
for shape in "opt/a:link" "usr/local:link" "opt/a:file"; do
	p=${shape%%:*} kind=${shape##*:}
	s=$WORK/hide
	rm -rf "$s" && s=$(ext_tree zhide "$s")
	mkdir -p "$s/$(dirname "$p")"
	if [[ $kind == link ]]; then ln -s /tmp "$s/$p"; else echo f >"$s/$p"; fi
	mk_erofs "$s" "$E/zhide.raw"
	run_sysextd refresh
	assert_failed "refresh with $p replaced by a $kind"
	if [[ $kind == link ]]; then
		assert_contains "$ERR" "symbolic link" "the refusal for $p"
	else
		assert_contains "$ERR" "is a mount of a directory, but in the new tree it is a file" "the refusal for $p"
	fi
	assert_below "after the refused refresh ($p, $kind)"
	assert_file_content "$R/usr/share/app/v" 4
	rm -f "$E/zhide.raw"
done

check "unmerge: the base as before, every mount below kept, writable, exec allowed"
run_sysextd unmerge
assert_ok "unmerge"
! is_overlay "$R/usr" || fail "/usr is still an overlay"
! is_overlay "$R/opt" || fail "/opt is still an overlay"
! is_overlay "$R/etc" || fail "/etc is still an overlay"
assert_missing "$R/usr/share/app/v"
assert_missing "$R/etc/conf.d/x"
assert_below "after unmerge"
touch "$R/usr/written" "$R/etc/written" "$R/opt/written" || fail "the base is not writable after unmerge"
assert_eq "$("$R/etc/hook.sh" 2>&1)" hook "a hook script in /etc after unmerge"
assert_eq "$(findmnt -n -o VFS-OPTIONS -T "$R/usr" | tail -n1)" "$flags_before_usr" "mount flags of /usr"
assert_eq "$(findmnt -n -o VFS-OPTIONS -T "$R/etc" | tail -n1)" "$flags_before_etc" "mount flags of /etc"
assert_eq "$(ours_at "$R/usr")$(ours_at "$R/opt")$(ours_at "$R/etc")" 000 "sysextd overlays left"
run_sysextd unmerge
assert_ok "a second unmerge"
assert_contains "$ERR" "nothing to do" "a second unmerge"

check "merge and unmerge again, five times: the same"
for i in 1 2 3 4 5; do
	run_sysextd merge
	assert_ok "merge $i"
	assert_below "after merge $i"
	run_sysextd unmerge
	assert_ok "unmerge $i"
	assert_below "after unmerge $i"
	touch "$R/usr/written" "$R/etc/written" || fail "the base is not writable after unmerge $i"
done
assert_loops_as_before "$loops_before"
echo PASS
