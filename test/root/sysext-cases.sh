#!/bin/bash
# systemd-sysext's documented behaviour, case by case, as systemd's own test suite
# (TEST-50-DISSECT) exercises it, run through `sysextd --no-bus` exactly as a script written
# for systemd-sysext would run it: one fresh root per case (os-release ID=testtest with no
# VERSION_ID, one directory extension "test-extension" with ID=_any shipping a file in /opt),
# the hierarchy read-only (a read-only bind of itself), writable, empty or missing, a mutable
# directory that exists, is a symlink elsewhere, to the hierarchy itself or dangling; every
# mutable mode from the option and from $SYSTEMD_SYSEXT_MUTABLE_MODE, the option winning; the
# hierarchy's permissions through merge and unmerge; a mutable directory of other permissions;
# ID, ID_LIKE and a non-matching ID.  Each case checks which of the three marker files
# (image, hierarchy, mutable directory) are visible after merge and after unmerge, whether
# the merged tree is writable and where a write lands.  The same cases run again for
# configuration extensions (`--class=confext`, /etc, var/lib/confexts, etc/extension-release.d,
# $SYSTEMD_CONFEXT_MUTABLE_MODE), as systemd-confext takes them.
set -uo pipefail
# shellcheck source=test/lib.sh
. "$(dirname "$0")/../lib.sh"
enter_sandbox "$@"
require_fs overlay
make_root

# set_class sysext|confext — the hierarchy, search directory, release file and variable
set_class() {
	CLASS=$1
	if [[ $CLASS == sysext ]]; then
		H=/opt SEARCH=var/lib/extensions REL=usr/lib/extension-release.d ENV=SYSTEMD_SYSEXT_MUTABLE_MODE
	else
		H=/etc SEARCH=var/lib/confexts REL=etc/extension-release.d ENV=SYSTEMD_CONFEXT_MUTABLE_MODE
	fi
}
# menv MODE COMMAND... — COMMAND with the class's mutable-mode variable set to MODE
menv() { local mode=$1; shift; (export "$ENV=$mode"; "$@"); }
IMG=preexisting-file-in-extension-image
HIER=preexisting-file-in-hierarchy
MUT=preexisting-file-in-extensions-mutable

# sx ROOT ARGS... — what systemd-sysext ROOT ARGS... (or systemd-confext) is for sysextd
sx() {
	local root=$1; shift
	if [[ $CLASS == sysext ]]; then
		"$SYSEXTD" --no-bus --root="$root" "$@"
	else
		"$SYSEXTD" --no-bus --class=confext --root="$root" "$@"
	fi
}
new_root() { # ROOT — the hierarchy, /usr/lib with os-release, the search and mutable dirs
	mkdir -p "$1$H" "$1/usr/lib" "$1/$SEARCH" "$1/var/lib/extensions.mutable"
	printf 'ID=testtest\nVERSION=1.2.3\n' >"$1/usr/lib/os-release"
}
new_ext() { # ROOT [RELEASE] — the extension, with a file in the hierarchy
	local d=$1/$SEARCH/test-extension
	mkdir -p "$d/$REL" "$d$H"
	printf '%b\n' "${2:-ID=_any}" >"$d/$REL/extension-release.test-extension"
	touch "$d$H/$IMG"
}
new_mutable() { mkdir -p "$1"; touch "$1/$MUT"; }
read_only() { mount -o bind,ro "$1$H" "$1$H"; }
with_file() { touch "$1$H/$HIER"; }
ro_hierarchy() { with_file "$1"; read_only "$1"; }
writable() { touch "$1$H/.probe-$$" 2>/dev/null && rm -f "$1$H/.probe-$$"; }
# seen ROOT LETTERS — exactly the marker files named by LETTERS (e, h, u) are visible
seen() {
	local want f
	for f in e:$IMG h:$HIER u:$MUT; do
		want=0; [[ $2 == *"${f%%:*}"* ]] && want=1
		if [[ $want == 1 && ! -f "$1$H/${f#*:}" ]]; then echo "missing ${f#*:} in $1$H"; return 1; fi
		if [[ $want == 0 && -f "$1$H/${f#*:}" ]]; then echo "unexpected ${f#*:} in $1$H"; return 1; fi
	done
}
# merged_rw ROOT MARK — a write lands; merged_ro ROOT — none does
merged_rw() { touch "$1$H/$2"; }
merged_ro() { ! writable "$1"; }
# fails COMMAND... — COMMAND must fail (a bare `! COMMAND` would not stop a case under set -e)
fails() { if "$@"; then echo "expected to fail, but succeeded: $*"; return 1; fi; }

# ro_with_mutable ROOT — the common shape: a mutable directory with a file, a R/O hierarchy
ro_with_mutable() { new_root "$1"; new_ext "$1"; new_mutable "$1/var/lib/extensions.mutable$H"; ro_hierarchy "$1"; }

case_ro_default() { new_root "$1"; new_ext "$1"; ro_hierarchy "$1"; merged_ro "$1"
	sx "$1" merge; merged_ro "$1"; seen "$1" eh; sx "$1" unmerge; seen "$1" h; merged_ro "$1"; }
case_rw_hierarchy_default() { new_root "$1"; new_ext "$1"; with_file "$1"; writable "$1"
	sx "$1" merge; merged_ro "$1"; seen "$1" eh; sx "$1" unmerge; seen "$1" h; writable "$1"; }
case_missing_hierarchy() { new_root "$1"; rmdir "$1$H"; new_ext "$1"
	sx "$1" merge; merged_ro "$1"; seen "$1" e; sx "$1" unmerge; seen "$1" ""; }
case_empty_hierarchy() { new_root "$1"; new_ext "$1"; read_only "$1"
	sx "$1" merge; merged_ro "$1"; seen "$1" e; sx "$1" unmerge; seen "$1" ""; }
case_mutable_dir_ignored_by_default() { ro_with_mutable "$1"
	sx "$1" merge; merged_ro "$1"; seen "$1" eh; sx "$1" unmerge; seen "$1" h; }
auto_shape() { # ROOT MUTDIR SEEN-AFTER-MERGE SEEN-AFTER-UNMERGE MERGE-COMMAND...
	local r=$1 m=$2 a=$3 b=$4; shift 4
	"$@"; merged_rw "$r" now-is-mutable; seen "$r" "$a"; test -f "$m/now-is-mutable"
	sx "$r" unmerge; seen "$r" "$b"; test -f "$m/now-is-mutable"; test ! -f "$r$H/now-is-mutable"; }
case_auto_ro_hierarchy() { local m=$1/var/lib/extensions.mutable$H; ro_with_mutable "$1"
	auto_shape "$1" "$m" ehu h sx "$1" --mutable=auto merge; }
case_auto_missing_hierarchy() { local m=$1/var/lib/extensions.mutable$H; new_root "$1"; rmdir "$1$H"; new_ext "$1"; new_mutable "$m"
	auto_shape "$1" "$m" eu "" sx "$1" --mutable=auto merge; }
case_auto_empty_hierarchy() { local m=$1/var/lib/extensions.mutable$H; new_root "$1"; new_ext "$1"; new_mutable "$m"; read_only "$1"
	auto_shape "$1" "$m" eu "" sx "$1" --mutable=auto merge; }
case_auto_symlink_elsewhere() { local m=$1/var/lib/extensions.mutable$H u=$1/upperdir; new_root "$1"; new_ext "$1"; new_mutable "$u"
	ln -sfTr "$u" "$m"; ro_hierarchy "$1"
	auto_shape "$1" "$u" ehu h sx "$1" --mutable=auto merge; }
case_auto_symlink_to_rw_hierarchy() { local m=$1/var/lib/extensions.mutable$H; new_root "$1"; new_ext "$1"; new_mutable "$1$H"
	ln -sfTr "$1$H" "$m"; with_file "$1"
	sx "$1" --mutable=auto merge; merged_rw "$1" now-is-mutable; seen "$1" ehu; test -f "$m/now-is-mutable"
	sx "$1" unmerge; seen "$1" hu; test -f "$1$H/now-is-mutable"; }
case_auto_symlink_to_ro_hierarchy_fails() { new_root "$1"; new_ext "$1"; new_mutable "$1$H"
	ln -sfTr "$1$H" "$1/var/lib/extensions.mutable$H"; ro_hierarchy "$1"
	fails sx "$1" --mutable=auto merge; }
case_auto_dangling_symlink() { new_root "$1"; new_ext "$1"; ln -sfTr /should/not/exist/ "$1/var/lib/extensions.mutable$H"; ro_hierarchy "$1"
	sx "$1" --mutable=auto merge; merged_ro "$1"; seen "$1" eh; sx "$1" unmerge; seen "$1" h; }
case_no() { ro_with_mutable "$1"; sx "$1" --mutable=no merge; merged_ro "$1"; seen "$1" eh; sx "$1" unmerge; seen "$1" h; }
case_import() { ro_with_mutable "$1"; sx "$1" --mutable=import merge; merged_ro "$1"; seen "$1" ehu; sx "$1" unmerge; seen "$1" h; }
case_yes_creates() { local m=$1/var/lib/extensions.mutable$H; new_root "$1"; new_ext "$1"; ro_hierarchy "$1"; test ! -d "$m"
	sx "$1" --mutable=yes merge; test -d "$m"; merged_rw "$1" now-is-mutable; seen "$1" eh; test -f "$m/now-is-mutable"
	sx "$1" unmerge; seen "$1" h; test -f "$m/now-is-mutable"; test ! -f "$1$H/now-is-mutable"; }
case_auto_without_dir() { new_root "$1"; new_ext "$1"; ro_hierarchy "$1"
	sx "$1" --mutable=auto merge; merged_ro "$1"; seen "$1" eh; sx "$1" unmerge; seen "$1" h; }
case_env_yes() { local m=$1/var/lib/extensions.mutable$H; new_root "$1"; new_ext "$1"; ro_hierarchy "$1"; test ! -d "$m"
	menv yes sx "$1" merge; test -d "$m"; merged_rw "$1" now-is-mutable; seen "$1" eh
	test -f "$m/now-is-mutable"; menv yes sx "$1" unmerge; seen "$1" h
	test -f "$m/now-is-mutable"; test ! -f "$1$H/now-is-mutable"; }
case_env_auto_without_dir() { new_root "$1"; new_ext "$1"; ro_hierarchy "$1"
	menv auto sx "$1" --mutable=auto merge; merged_ro "$1"; seen "$1" eh
	menv auto sx "$1" unmerge; seen "$1" h; }
case_env_auto() { local m=$1/var/lib/extensions.mutable$H; ro_with_mutable "$1"
	auto_shape "$1" "$m" ehu h menv auto sx "$1" merge; }
case_env_no() { ro_with_mutable "$1"; menv no sx "$1" merge; merged_ro "$1"; seen "$1" eh
	menv no sx "$1" unmerge; seen "$1" h; }
case_env_import() { ro_with_mutable "$1"; menv import sx "$1" merge; merged_ro "$1"; seen "$1" ehu
	menv import sx "$1" unmerge; seen "$1" h; }
case_option_beats_env() { ro_with_mutable "$1"; menv yes sx "$1" --mutable=no merge; merged_ro "$1"
	seen "$1" eh; menv yes sx "$1" unmerge; seen "$1" h; }
ephemeral_shape() { # ROOT SEEN-AFTER-MERGE MERGE-COMMAND...
	local r=$1 a=$2 m=$1/var/lib/extensions.mutable$H; shift 2
	"$@"; merged_rw "$r" now-is-mutable; seen "$r" "$a"; test ! -f "$m/now-is-mutable"
	sx "$r" unmerge; seen "$r" h; test ! -f "$m/now-is-mutable"; test ! -f "$r$H/now-is-mutable"; }
case_ephemeral() { ro_with_mutable "$1"; ephemeral_shape "$1" eh sx "$1" --mutable=ephemeral merge; }
case_env_ephemeral() { ro_with_mutable "$1"; ephemeral_shape "$1" eh menv ephemeral sx "$1" merge; }
case_ephemeral_import() { ro_with_mutable "$1"; ephemeral_shape "$1" ehu sx "$1" --mutable=ephemeral-import merge; }
case_env_ephemeral_import() { ro_with_mutable "$1"; ephemeral_shape "$1" ehu menv ephemeral-import sx "$1" merge; }
self_import() { new_root "$1"; new_ext "$1"; new_mutable "$1$H"; ln -sfTr "$1$H" "$1/var/lib/extensions.mutable$H"; with_file "$1"; }
case_ephemeral_import_self_fails() { self_import "$1"; fails sx "$1" --mutable=ephemeral-import merge; seen "$1" hu; }
case_import_self_fails() { self_import "$1"; fails sx "$1" --mutable=import merge; seen "$1" hu; }
perms() { # ROOT MODE
	local before after_merge after_unmerge
	ro_with_mutable "$1"; before=$(stat -c %A "$1$H")
	sx "$1" --mutable="$2" merge; after_merge=$(stat -c %A "$1$H")
	sx "$1" unmerge; after_unmerge=$(stat -c %A "$1$H")
	[[ $before == "$after_merge" && $before == "$after_unmerge" ]] || { echo "permissions $before → $after_merge → $after_unmerge"; return 1; }
}
case_perms_no() { perms "$1" no; }
case_perms_yes() { perms "$1" yes; }
case_perms_ephemeral() { perms "$1" ephemeral; }
case_mutable_dir_wrong_permissions_fails() { local m=$1/var/lib/extensions.mutable$H
	new_root "$1"; new_ext "$1"; new_mutable "$m"; with_file "$1"; chmod 0755 "$1$H"; chmod 0700 "$m"
	fails sx "$1" --mutable=yes merge; }
case_matching_id() { new_root "$1"; new_ext "$1" ID=testtest; with_file "$1"; sx "$1" merge; seen "$1" eh; }
# Only incompatible images: nothing is merged, and (as systemd-sysext 252, 257 and main) exit 0.
case_non_matching_id() { new_root "$1"; new_ext "$1" ID=something_else; with_file "$1"; sx "$1" merge 2>"$1.err"; seen "$1" h
	grep -q "No suitable extensions found (1 ignored" "$1.err"; }
case_matching_id_like() { new_root "$1"; new_ext "$1" 'ID=something_else\nID_LIKE=testtest'; with_file "$1"; sx "$1" merge; seen "$1" eh; }
case_matching_id_like_list() { new_root "$1"; new_ext "$1" 'ID=something_else\nID_LIKE=foobar testtest'; with_file "$1"; sx "$1" merge; seen "$1" eh; }

cases=$(declare -F | awk '$3 ~ /^case_/ {print $3}')
failed=()
n=0
for class in sysext confext; do
	set_class "$class"
	for c in $cases; do
		n=$((n + 1))
		root=$R/cases/$class/${c#case_}
		check "$class: ${c#case_}"
		# not inside a condition: there, bash would ignore set -e in the case's body
		(set -e; "$c" "$root") >"$WORK/$class-$c.log" 2>&1
		rc=$?
		if [[ $rc -ne 0 ]]; then
			failed+=("$class:${c#case_}")
			sed 's/^/  | /' "$WORK/$class-$c.log" >&2
		fi
		# whatever the case left mounted goes, innermost first
		findmnt -rn -o TARGET | grep "^$root" | sort -r | while read -r m; do umount -l "$m"; done
	done
done
log "$((n - ${#failed[@]})) of $n cases pass"
[[ ${#failed[@]} -eq 0 ]] || fail "cases that fail: ${failed[*]}"
