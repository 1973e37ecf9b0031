#!/bin/bash
# Where an upper directory may be (issue 16, §1 and §6), each refusal with the live trees
# exactly as they were:
#   - owned by, or writable by, someone other than root — the directory itself or any
#     ancestor up to the root — is refused, naming the unsafe path (that user could plant
#     files into the merged /usr);
#   - one directory for two hierarchies (extensions.mutable/usr -> opt, etc -> usr across the
#     classes, usr and opt both -> one directory) is refused: two writable overlays would
#     share an upper directory;
#   - inside a hierarchy (extensions.mutable/usr -> ../../../usr/share) or inside a search
#     directory is refused: the merged tree would contain its own upper directory.
set -uo pipefail
# shellcheck source=test/lib.sh
. "$(dirname "$0")/../lib.sh"
enter_sandbox "$@"
require_cmd mkfs.erofs python3
require_fs erofs overlay
make_root
loops_before=$(loop_snapshot)

E=$R/var/lib/extensions
M=$R/var/lib/extensions.mutable
t=$(ext_tree app)
ext_file "$t" usr/share/app/v 1
ext_file "$t" opt/app/v 1
mk_erofs "$t" "$E/app.raw"
mkdir -p "$R/var/lib/confexts/conf/etc/extension-release.d" "$R/etc"
printf 'ID=_any\n' >"$R/var/lib/confexts/conf/etc/extension-release.d/extension-release.conf"
echo conf >"$R/var/lib/confexts/conf/etc/conf"

state() { # what a reader sees: the trees' mount ids and the files
	echo "$(top_mount_id "$R/usr") $(top_mount_id "$R/opt") $(top_mount_id "$R/etc")"
	cat "$R/usr/share/app/v" "$R/etc/conf" 2>/dev/null
}

# refused WHAT NEEDLE ARGS... — the transition is refused with NEEDLE in its message and
# nothing changes.
refused() {
	local what=$1 needle=$2 before
	shift 2
	before=$(state)
	# --mutable= is the sysext class's; configuration extensions take the same mode here
	local a mode=no
	for a in "$@"; do [[ $a == --mutable=* ]] && mode=${a#--mutable=}; done
	SYSTEMD_CONFEXT_MUTABLE_MODE=$mode run_sysextd "$@"
	assert_failed "$what"
	assert_contains "$ERR" "$needle" "the refusal of $what"
	assert_contains "$ERR" "Nothing was changed" "the refusal of $what"
	assert_eq "$(state)" "$before" "the live trees after the refusal of $what"
}

check "a read-only merge is the starting point"
run_sysextd merge
assert_ok "merge"

check "an upper directory owned or writable by someone else, or an ancestor that is, is refused"
mkdir -p "$M/usr" "$M/opt" "$M/etc"
# (a mode other than the hierarchy's on the upper directory itself is refused first, in
# systemd-sysext's words)
for c in "chown nobody $M/usr|other than root" "chmod 0775 $M/usr|ought to have mode" "chmod 0757 $M/usr|ought to have mode" \
	"chown nobody $M|other than root" "chmod 0777 $M|other than root" "chmod 1777 $R/var/lib|other than root" \
	"chown nobody:nogroup $R/var|other than root" "chmod g+w $M/opt|ought to have mode" "chown nobody $M/etc|other than root" \
	"chown 0:100 $M/usr|" "chmod 0775 $R/var|other than root"; do
	how=${c%%|*} needle=${c#*|}
	eval "$how"
	if [[ -z $needle ]]; then
		# a group that may not write is fine
		run_sysextd --mutable=yes refresh
		assert_ok "--mutable=yes refresh after '$how'"
		run_sysextd refresh
		assert_ok "back to read-only"
	else
		refused "--mutable=yes refresh after '$how'" "$needle" --mutable=yes refresh
		for mode in auto import ephemeral-import; do
			[[ $needle == "ought to have mode" && $mode == *import ]] && continue
			refused "--mutable=$mode refresh after '$how'" "$needle" --mutable=$mode refresh
		done
	fi
	chown -R root:root "$R/var" && chmod 0755 "$R/var" "$R/var/lib" "$M" "$M/usr" "$M/opt" "$M/etc"
done
check "the same refusal for a merge onto nothing merged"
run_sysextd unmerge
assert_ok "unmerge"
chown nobody "$M/opt"
refused "--mutable=yes merge with an unsafe /opt upper" "'$M/opt' is owned by or writable by a user other than root" --mutable=yes merge
chown root "$M/opt"
run_sysextd merge
assert_ok "merge"

check "one upper directory for two hierarchies is refused (nothing merged: every hierarchy writable)"
run_sysextd unmerge
assert_ok "unmerge"
shape() { # NAME -> TARGET, the others plain directories
	rm -rf "$M" && mkdir -p "$M/usr" "$M/opt" "$M/etc"
	rm -rf "${M:?}/$1" && ln -s "$2" "$M/$1"
}
for s in "usr:../../../opt" "opt:../../../usr" "etc:../../../usr" "usr:../../../etc" "usr:/opt" "etc:/opt"; do
	shape "${s%%:*}" "${s#*:}"
	refused "extensions.mutable/${s%%:*} -> ${s#*:}" "two hierarchies cannot share one upper directory" --mutable=yes refresh
done
mkdir -p "$R/data/up"
for pair in "usr opt" "usr etc" "opt etc"; do
	rm -rf "$M" && mkdir -p "$M"
	for h in $pair; do ln -s /data/up "$M/$h"; done
	refused "extensions.mutable/{${pair// /,}} -> /data/up" "two hierarchies cannot share one upper directory" --mutable=yes refresh
done

check "an upper directory inside a hierarchy or a search directory is refused"
for s in "usr:../../../usr/share" "opt:../../../usr/lib" "etc:../../../opt/app" "usr:/etc/x" "opt:../extensions/app.d" \
	"usr:/run/extensions" "etc:../confexts/conf"; do
	shape "${s%%:*}" "${s#*:}"
	mkdir -p "$R/var/lib/extensions/app.d" "$R/run/extensions" "$R/etc/x" "$R/usr/lib" "$R/opt/app"
	refused "extensions.mutable/${s%%:*} -> ${s#*:}" "lies inside" --mutable=yes refresh
	rmdir "$R/var/lib/extensions/app.d" 2>/dev/null
done

check "a proper upper directory still works, and the hierarchy as its own upper too"
rm -rf "$M" && mkdir -p "$M/usr" "$M/opt" "$M/etc"
run_sysextd --mutable=yes refresh
assert_ok "--mutable=yes refresh with root's upper directories"
echo w >"$R/usr/share/written" || fail "the merged /usr is not writable"
assert_file_content "$M/usr/share/written" w
run_sysextd unmerge
assert_ok "unmerge"
rm -rf "$M/usr" && ln -s ../../../usr "$M/usr"
run_sysextd --mutable=yes merge
assert_ok "--mutable=yes merge with /usr as its own upper directory"
run_sysextd unmerge
assert_ok "unmerge"
assert_loops_as_before "$loops_before"
echo PASS
