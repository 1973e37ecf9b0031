#!/bin/bash
# Mutable modes as systemd-sysext has them (systemd-sysext(8), "Mutability"), case by case,
# through `sysextd --no-bus` on a throw-away root:
#   no, auto, yes, import, ephemeral, ephemeral-import; the mutable directory as a plain
#   directory, a symlink to another one (relative and absolute, inside the root), a symlink
#   to the hierarchy itself, a dangling symlink; the refusals (a mode that differs from the
#   hierarchy's, a read-only upper directory, an upper directory that is a mount point,
#   importing the hierarchy into itself); the precedence of --mutable=, the environment,
#   sysext.conf and sysextd.conf; the hierarchy's permissions through merge and unmerge; a
#   hierarchy that does not exist; and no change on disk or in the mount table after a refusal.
set -euo pipefail
# shellcheck source=test/lib.sh
. "$(dirname "$0")/../lib.sh"
enter_sandbox "$@"
require_fs overlay
make_root

M=$R/var/lib/extensions.mutable
t=$(ext_tree app)
ext_file "$t" opt/app/from-ext "from the extension"
ext_file "$t" usr/app/from-ext "from the extension"
mk_dir "$t" "$R/var/lib/extensions/app"

# reset — nothing merged, no mutable directory, no configuration.
reset() {
	run_sysextd unmerge
	assert_ok "unmerge (reset)"
	rm -rf "$M" "$R/etc/systemd" "$R/etc/sysextd"
	rm -f "$R/opt/"*.txt
}

writable() { touch "$1/.probe.$$" 2>/dev/null && rm -f "$1/.probe.$$"; }

# expect_ro HIERARCHY — merged, read-only.
expect_ro() {
	assert_file_content "$R/$1/app/from-ext" "from the extension"
	! writable "$R/$1" || fail "$R/$1 is writable, expected a read-only merge"
}

# expect_rw HIERARCHY UPPER — merged, a write lands in UPPER.
expect_rw() {
	assert_file_content "$R/$1/app/from-ext" "from the extension"
	echo "written $1" >"$R/$1/w.txt" || fail "$R/$1 is not writable"
	assert_file_content "$2/w.txt" "written $1"
}

# --------------------------------------------------------------------- no
check "no (the default): read-only, an existing mutable directory ignored"
mkdir -p "$M/opt"
run_sysextd merge
assert_ok merge
expect_ro opt
run_sysextd --mutable=no --always-refresh=yes refresh
assert_ok "refresh --mutable=no"
expect_ro opt
reset

# ------------------------------------------------------------------- auto
check "auto without a mutable directory: read-only"
run_sysextd --mutable=auto merge
assert_ok "merge --mutable=auto"
expect_ro opt
assert_missing "$M"
reset

check "auto with var/lib/extensions.mutable/opt: writes land there, /usr stays read-only"
mkdir -p "$M/opt"
run_sysextd --mutable=auto merge
assert_ok "merge --mutable=auto"
expect_rw opt "$M/opt"
expect_ro usr
run_sysextd unmerge
assert_ok unmerge
assert_missing "$R/opt/w.txt"
assert_file_content "$M/opt/w.txt" "written opt"
reset

check "auto with a dangling symlink: read-only"
mkdir -p "$M"
ln -s ../../../nowhere "$M/opt"
run_sysextd --mutable=auto merge
assert_ok "merge --mutable=auto, dangling symlink"
expect_ro opt
reset

check "auto: a mutable directory with another mode than the hierarchy's is refused, nothing changes"
mkdir -p "$M/opt"
chmod 0700 "$M/opt"
before=$(mountinfo_under "$R")
run_sysextd --mutable=auto merge
assert_failed "merge with a mutable directory of mode 0700"
assert_contains "$ERR" "has mode 0700, ought to have mode 0755" "the refusal"
assert_eq "$(mountinfo_under "$R")" "$before" "mount table after the refusal"
reset

# -------------------------------------------------------------------- yes
check "yes: the mutable directories are created with the hierarchies' modes"
chmod 0751 "$R/opt"
run_sysextd --mutable=yes merge
assert_ok "merge --mutable=yes"
[[ -d "$M/opt" && -d "$M/usr" ]] || fail "yes did not create var/lib/extensions.mutable/{opt,usr}"
assert_eq "$(stat -c %a "$M/opt")" 751 "mode of the created opt directory"
assert_eq "$(stat -c %a "$R/opt")" 751 "mode of /opt while merged"
expect_rw opt "$M/opt"
expect_rw usr "$M/usr"
assert_missing "$M/etc" # configuration extensions keep their own mode (no)
run_sysextd unmerge
assert_ok unmerge
assert_eq "$(stat -c %a "$R/opt")" 751 "mode of /opt after unmerge"
assert_missing "$R/usr/w.txt"
chmod 0755 "$R/opt"
reset

check "yes: the refresh keeps what was written, and the next tree writes to the same place"
run_sysextd --mutable=yes merge
assert_ok "merge --mutable=yes"
echo one >"$R/opt/one.txt"
run_sysextd --mutable=yes --always-refresh=yes refresh
assert_ok "refresh --mutable=yes"
assert_file_content "$R/opt/one.txt" one
echo two >"$R/opt/two.txt"
assert_file_content "$M/opt/two.txt" two
rm "$R/opt/one.txt"
assert_missing "$M/opt/one.txt"
reset

check "yes: a refresh with nothing changed keeps the tree (same mount), a mode change rebuilds"
run_sysextd --mutable=yes merge
assert_ok merge
id1=$(findmnt -n -o ID --mountpoint "$R/opt" 2>/dev/null || stat -c %i "$R/opt")
run_sysextd --mutable=yes refresh
assert_ok "refresh, unchanged"
assert_contains "$ERR" "no change was found" "the refresh skipped"
assert_eq "$(findmnt -n -o ID --mountpoint "$R/opt" 2>/dev/null || stat -c %i "$R/opt")" "$id1" "mount of /opt after the skipped refresh"
run_sysextd --mutable=no refresh
assert_ok "refresh --mutable=no"
expect_ro opt
reset

# --------------------------------------------------------- symlinked dirs
check "a relative symlink to another directory: writes land in its target"
mkdir -p "$R/srv/upper" "$M"
ln -s ../../../srv/upper "$M/opt"
run_sysextd --mutable=yes merge
assert_ok "merge, relative symlink"
expect_rw opt "$R/srv/upper"
reset
rm -rf "$R/srv/upper"

check "an absolute symlink is resolved inside the root"
mkdir -p "$R/srv/abs" "$M"
ln -s /srv/abs "$M/opt"
run_sysextd --mutable=yes merge
assert_ok "merge, absolute symlink"
expect_rw opt "$R/srv/abs"
[[ ! -e /srv/abs/w.txt ]] || fail "the write went to the host's /srv/abs"
reset
rm -rf "$R/srv/abs"

check "a symlink to the hierarchy itself: writes go to /opt's own directory and stay after unmerge"
mkdir -p "$M"
ln -s ../../../opt "$M/opt"
run_sysextd --mutable=auto merge
assert_ok "merge, the hierarchy as its own upper directory"
echo self >"$R/opt/self.txt"
run_sysextd unmerge
assert_ok unmerge
assert_file_content "$R/opt/self.txt" self
rm -f "$R/opt/self.txt"
reset

check "a symlink to the hierarchy itself on a read-only hierarchy is refused"
mkdir -p "$M"
ln -s ../../../opt "$M/opt"
mount --bind -o ro "$R/opt" "$R/opt"
before=$(mountinfo_under "$R")
for mode in auto yes; do
	run_sysextd --mutable=$mode merge
	assert_failed "merge --mutable=$mode, the read-only hierarchy as its own upper directory"
	assert_contains "$ERR" "read-only" "the refusal ($mode)"
	assert_eq "$(mountinfo_under "$R")" "$before" "mount table after the refusal ($mode)"
done
umount "$R/opt"
reset

check "import of a symlink to the hierarchy itself is refused"
mkdir -p "$M"
ln -s ../../../opt "$M/opt"
before=$(mountinfo_under "$R")
for mode in import ephemeral-import; do
	run_sysextd --mutable=$mode merge
	assert_failed "merge --mutable=$mode with the hierarchy as its mutable directory"
	assert_contains "$ERR" "points to the hierarchy itself" "the refusal ($mode)"
	assert_eq "$(mountinfo_under "$R")" "$before" "mount table after the refusal ($mode)"
done
reset

check "a read-only upper directory is refused"
mkdir -p "$M/opt"
mount --bind -o ro "$M" "$M"
before=$(mountinfo_under "$R")
run_sysextd --mutable=auto merge
assert_failed "merge with a read-only mutable directory"
assert_contains "$ERR" "read-only" "the refusal"
assert_eq "$(mountinfo_under "$R")" "$before" "mount table after the refusal"
umount "$M"
reset

check "an upper directory that is a mount point is refused (its work directory would be on another mount)"
mkdir -p "$M/opt"
mount -t tmpfs -o mode=0755 up "$M/opt"
run_sysextd --mutable=auto merge
assert_failed "merge with a mount point as mutable directory"
assert_contains "$ERR" "different filesystem" "the refusal"
umount "$M/opt"
reset

# ----------------------------------------------------------------- import
check "import: the mutable directory's content is seen, read-only"
mkdir -p "$M/opt"
echo imported >"$M/opt/imported.txt"
run_sysextd --mutable=import merge
assert_ok "merge --mutable=import"
assert_file_content "$R/opt/imported.txt" imported
expect_ro opt
reset

# -------------------------------------------------------------- ephemeral
check "ephemeral: writable, nothing written reaches the disk, gone after unmerge"
chmod 0751 "$R/opt"
run_sysextd --mutable=ephemeral merge
assert_ok "merge --mutable=ephemeral"
assert_eq "$(stat -c %a "$R/opt")" 751 "mode of /opt while merged (ephemeral)"
echo eph >"$R/opt/eph.txt" || fail "ephemeral /opt is not writable"
assert_missing "$M/opt/eph.txt"
run_sysextd unmerge
assert_ok unmerge
assert_missing "$R/opt/eph.txt"
assert_eq "$(stat -c %a "$R/opt")" 751 "mode of /opt after unmerge (ephemeral)"
chmod 0755 "$R/opt"
reset

check "ephemeral-import: the mutable directory seen, writes not into it"
mkdir -p "$M/opt"
echo imported >"$M/opt/imported.txt"
run_sysextd --mutable=ephemeral-import merge
assert_ok "merge --mutable=ephemeral-import"
assert_file_content "$R/opt/imported.txt" imported
echo new >"$R/opt/new.txt" || fail "ephemeral-import /opt is not writable"
assert_missing "$M/opt/new.txt"
reset

# -------------------------------------------------------------- precedence
check "precedence: --mutable= over \$SYSTEMD_SYSEXT_MUTABLE_MODE over sysext.conf"
SYSTEMD_SYSEXT_MUTABLE_MODE=yes run_sysextd merge
assert_ok "merge with SYSTEMD_SYSEXT_MUTABLE_MODE=yes"
expect_rw opt "$M/opt"
reset
SYSTEMD_SYSEXT_MUTABLE_MODE=yes run_sysextd --mutable=no merge
assert_ok "merge --mutable=no with SYSTEMD_SYSEXT_MUTABLE_MODE=yes"
expect_ro opt
reset
mkdir -p "$R/etc/systemd"
printf '[SysExt]\nMutable=yes\n' >"$R/etc/systemd/sysext.conf"
run_sysextd merge
assert_ok "merge with sysext.conf Mutable=yes"
expect_rw opt "$M/opt"
reset
mkdir -p "$R/etc/systemd"
printf '[SysExt]\nMutable=yes\n' >"$R/etc/systemd/sysext.conf"
SYSTEMD_SYSEXT_MUTABLE_MODE=no run_sysextd merge
assert_ok "merge with sysext.conf Mutable=yes and the environment's no"
expect_ro opt
reset
mkdir -p "$R/etc/systemd"
printf '[SysExt]\nMutable=yes\n' >"$R/etc/systemd/sysext.conf"
SYSTEMD_SYSEXT_MUTABLE_MODE=bogus run_sysextd merge
assert_ok "merge with an invalid SYSTEMD_SYSEXT_MUTABLE_MODE"
assert_contains "$ERR" "Failed to parse SYSTEMD_SYSEXT_MUTABLE_MODE environment variable value 'bogus'. Ignoring." "the warning"
expect_rw opt "$M/opt"
reset
mkdir -p "$R/etc/sysextd" "$R/etc/systemd"
printf '[SysExt]\nMutable=no\n' >"$R/etc/systemd/sysext.conf"
printf '[Extensions]\nMutable=auto\n' >"$R/etc/sysextd/sysextd.conf"
mkdir -p "$M/opt"
run_sysextd merge
assert_ok "merge with sysextd.conf Mutable=auto over sysext.conf"
expect_rw opt "$M/opt"
reset

check "--mutable= takes booleans and help; bad values exit 1"
run_sysextd --mutable=help
assert_ok "--mutable=help"
assert_eq "$OUT" "Known mutability modes:
no
yes
auto
import
ephemeral
ephemeral-import" "--mutable=help"
run_sysextd --no-legend --mutable=help
assert_eq "$(head -n1 <<<"$OUT")" no "--mutable=help --no-legend"
run_sysextd --mutable=bogus merge
assert_rc 1 "--mutable=bogus"
assert_contains "$ERR" "--mutable=" "the error"
run_sysextd --mutable=true merge
assert_ok "--mutable=true"
expect_rw opt "$M/opt"
reset

# ------------------------------------------------------- missing hierarchy
check "a hierarchy that does not exist is created for an extension that has content for it"
t2=$(ext_tree srvext)
ext_file "$t2" srv/data/file "in /srv"
mk_dir "$t2" "$R/var/lib/extensions/srvext"
SYSTEMD_SYSEXT_HIERARCHIES=/usr:/opt:/srv run_sysextd merge
assert_ok "merge with /srv missing"
assert_file_content "$R/srv/data/file" "in /srv"
SYSTEMD_SYSEXT_HIERARCHIES=/usr:/opt:/srv run_sysextd unmerge
assert_ok unmerge
[[ -d "$R/srv" ]] || fail "/srv went away with unmerge (it is left, as by systemd-sysext)"
assert_missing "$R/srv/data/file"
rmdir "$R/srv"

check "a missing hierarchy with a mutable directory (auto): created, writable"
mkdir -p "$M/srv"
SYSTEMD_SYSEXT_HIERARCHIES=/usr:/opt:/srv run_sysextd --mutable=auto merge
assert_ok "merge, /srv missing, auto"
assert_file_content "$R/srv/data/file" "in /srv"
echo w >"$R/srv/w.txt"
assert_file_content "$M/srv/w.txt" w
SYSTEMD_SYSEXT_HIERARCHIES=/usr:/opt:/srv run_sysextd unmerge
assert_ok unmerge
rm -rf "$R/var/lib/extensions/srvext" "$R/srv"
reset

check "the hierarchy's permissions are the same before, during and after, in every mode"
for mode in no yes auto import ephemeral ephemeral-import; do
	chmod 0750 "$R/opt"
	before=$(stat -c %A "$R/opt")
	run_sysextd --mutable=$mode merge
	assert_ok "merge --mutable=$mode"
	assert_eq "$(stat -c %A "$R/opt")" "$before" "mode of /opt merged with --mutable=$mode"
	run_sysextd unmerge
	assert_ok "unmerge ($mode)"
	assert_eq "$(stat -c %A "$R/opt")" "$before" "mode of /opt after unmerge ($mode)"
	rm -rf "$M"
done
chmod 0755 "$R/opt"
