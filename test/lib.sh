# shellcheck shell=bash
# Helpers for sysextd's root tests. Source it, then:
#
#   enter_sandbox "$@"   re-exec in a private mount namespace (or skip, 77)
#   make_root            build a throw-away root in $R (tmpfs, made shared)
#
# Nothing here mounts outside the test's own mount namespace, and nothing
# touches this machine's /usr or /opt. Loop devices are only ever detached by
# device name, and only those backed by files under this test's $R or $WORK
# (attached by the sysextd under test, during this test).
#
# Environment:
#   SYSEXTD   path of the binary under test (meson sets it); defaults to the
#             build directory of this checkout for manual runs.

: "${SYSEXTD:=$(cd "$(dirname "$0")/../.." && pwd)/build/sysextd}"
export SYSEXTD

SYSEXTD_TIMEOUT=${SYSEXTD_TIMEOUT:-120}

# ---------------------------------------------------------------- reporting

log() {
	echo "# $*"
}

# Announce a check (shows up in the test log).
check() {
	echo "CHECK: $*"
}

fail() {
	echo "FAIL: $*" >&2
	exit 1
}

skip() {
	echo "SKIP: $*"
	echo "SKIP: $*" >&2
	exit 77
}

# ---------------------------------------------------------------- asserts

# assert_eq ACTUAL EXPECTED [WHAT]
assert_eq() {
	if [[ "$1" != "$2" ]]; then
		fail "${3:-value}: expected '$2', got '$1'"
	fi
}

# assert_ne ACTUAL UNEXPECTED [WHAT]
assert_ne() {
	if [[ "$1" == "$2" ]]; then
		fail "${3:-value}: did not expect '$2'"
	fi
}

# assert_contains HAYSTACK NEEDLE [WHAT]
assert_contains() {
	if [[ "$1" != *"$2"* ]]; then
		fail "${3:-text} does not contain '$2'; it is:
$1"
	fi
}

# assert_not_contains HAYSTACK NEEDLE [WHAT]
assert_not_contains() {
	if [[ "$1" == *"$2"* ]]; then
		fail "${3:-text} contains '$2' but should not; it is:
$1"
	fi
}

# assert_file_content PATH EXPECTED
assert_file_content() {
	local got
	[[ -e "$1" ]] || fail "$1 does not exist"
	got=$(cat -- "$1") || fail "cannot read $1"
	assert_eq "$got" "$2" "content of $1"
}

# assert_missing PATH
assert_missing() {
	if [[ -e "$1" || -L "$1" ]]; then
		fail "$1 exists but should not"
	fi
}

# assert_rc EXPECTED [WHAT] — checks $RC from the last run_sysextd.
assert_rc() {
	if [[ "$RC" != "$1" ]]; then
		fail "${2:-sysextd} exited $RC, expected $1
--- stdout:
$OUT
--- stderr:
$ERR"
	fi
}

# assert_ok [WHAT] / assert_failed [WHAT] — for the last run_sysextd.
assert_ok() {
	assert_rc 0 "${1:-sysextd}"
}

assert_failed() {
	if [[ "$RC" == 0 ]]; then
		fail "${1:-sysextd} succeeded but should have failed
--- stdout:
$OUT
--- stderr:
$ERR"
	fi
}

# json_q JSON EXPR — evaluate the Python expression EXPR with `d` bound to the
# parsed JSON. Strings print as they are, everything else as JSON
# (true/false/null). Fails the test if JSON does not parse.
json_q() {
	python3 -c '
import json, sys
try:
    d = json.loads(sys.argv[1])
except ValueError as e:
    sys.stderr.write("FAIL: not valid JSON (%s):\n%s\n" % (e, sys.argv[1]))
    sys.exit(1)
try:
    r = eval(sys.argv[2], {"d": d})
except Exception as e:
    sys.stderr.write("FAIL: %s: %r on:\n%s\n" % (sys.argv[2], e, json.dumps(d, indent=1)))
    sys.exit(1)
print(r if isinstance(r, str) else json.dumps(r))
' "$1" "$2" || fail "JSON query '$2' failed"
}

# ---------------------------------------------------------------- sandbox

# require_cmd CMD... — skip when a tool the test needs is missing.
require_cmd() {
	local c
	for c in "$@"; do
		command -v "$c" >/dev/null 2>&1 || skip "$c is not installed (run tools/deps)"
	done
}

# require_fs FSTYPE... — skip when the kernel cannot mount a filesystem type.
require_fs() {
	local f
	for f in "$@"; do
		if ! grep -qw "$f" /proc/filesystems; then
			modprobe -q "$f" 2>/dev/null || true
			grep -qw "$f" /proc/filesystems || skip "kernel has no $f support"
		fi
	done
}

# enter_sandbox "$@" — re-exec this script in its own private mount namespace.
enter_sandbox() {
	if [[ -n "${SYSEXTD_SANDBOX:-}" ]]; then
		# Belt and braces: we must not share propagation with the host.
		if findmnt -n -o PROPAGATION --mountpoint / 2>/dev/null | grep -q shared; then
			fail "sandbox root mount is still shared with the host"
		fi
		return 0
	fi
	[[ $(id -u) -eq 0 ]] || skip "needs root (mounts, loop devices)"
	require_cmd unshare findmnt losetup mount umount python3
	[[ -x "$SYSEXTD" ]] || skip "sysextd binary not found at $SYSEXTD (build it, or set SYSEXTD)"
	if ! unshare -m --propagation private true 2>/dev/null; then
		skip "cannot create a private mount namespace (unshare -m failed)"
	fi
	exec unshare -m --propagation private env SYSEXTD_SANDBOX=1 "$BASH" "$0" "$@"
}

# ---------------------------------------------------------------- cleanup

_cleanups=()

# on_exit CMD — run CMD (a string, eval'd) at exit, last registered first,
# before the throw-away root is unmounted.
on_exit() {
	_cleanups+=("$1")
}

# Loop devices whose backing file lives under $R or $WORK, as
# "NAME MAJ:MIN INODE" of the backing file. They were attached by the sysextd
# under test, in this test.
_our_loops() {
	local prefix
	for prefix in ${R:+"$R/"} ${WORK:+"$WORK/"}; do
		losetup -n -O NAME,BACK-MAJ:MIN,BACK-INO,BACK-FILE -l 2>/dev/null |
			awk -v p="$prefix" 'index($4, p) == 1 { print $1, $2, $3 }'
	done | sort -u
}

# Detach loop device NAME only if it is still backed by the same file (the
# name may have been freed and reused by someone else meanwhile).
_detach_if_same() {
	local now
	now=$(losetup -n -O BACK-MAJ:MIN,BACK-INO -l "$1" 2>/dev/null) || return 0
	read -r -a now <<<"$now"
	[[ "${now[0]:-} ${now[1]:-}" == "$2 $3" ]] || return 0
	echo "# cleanup: detaching loop device $1, left attached to a file under $R" >&2
	losetup -d "$1"
}

_exit_handler() {
	local rc=$? i dev majmin ino leaked
	set +e
	for ((i = ${#_cleanups[@]} - 1; i >= 0; i--)); do
		eval "${_cleanups[i]}"
	done
	if [[ -n "${R:-}" && -d "$R" ]]; then
		# Look the loop devices up while their backing files still have
		# paths under $R; detach them once their mounts are gone.
		leaked=$(_our_loops)
		# umount -R gives up on a stack with covered mounts (e.g. the
		# original usr/local below an overlay at usr: "not mounted");
		# a lazy detach of $R itself takes its whole subtree.
		umount -R "$R" 2>/dev/null || umount -R -l "$R" 2>/dev/null || umount -l "$R" 2>/dev/null
		while read -r dev majmin ino; do
			[[ -n "$dev" ]] && _detach_if_same "$dev" "$majmin" "$ino"
		done <<<"$leaked"
		if ! mountpoint -q "$R"; then
			rm -rf --one-file-system "$R"
		fi
	fi
	if [[ -n "${WORK:-}" && -d "$WORK" ]]; then
		rm -rf --one-file-system "$WORK"
	fi
	exit "$rc"
}

# make_root — create the throw-away root $R:
#   $R                  tmpfs, mount --make-shared
#   $R/usr/lib/os-release   ID=sysextdtest VERSION_ID=1
#   $R/usr/share/base/file  "base"
#   $R/usr/bin $R/usr/local $R/opt/app/data
#   $R/etc/extensions $R/run/extensions $R/var/lib/extensions
# and $WORK, a scratch directory for staging trees.
make_root() {
	[[ -n "${SYSEXTD_SANDBOX:-}" ]] || fail "make_root called outside enter_sandbox"
	trap _exit_handler EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM

	R=$(mktemp -d /tmp/sysextd-test.XXXXXX)
	export R
	WORK=$(mktemp -d /tmp/sysextd-work.XXXXXX)
	export WORK

	mount -t tmpfs -o mode=0755 sysextd-test "$R" || fail "cannot mount tmpfs on $R"
	mount --make-shared "$R" || fail "cannot make $R shared"

	mkdir -p "$R/usr/lib" "$R/usr/share/base" "$R/usr/bin" "$R/usr/local" \
		"$R/opt/app/data" "$R/etc/extensions" "$R/run/extensions" \
		"$R/var/lib/extensions" "$R/run"
	host_os_release 'ID=sysextdtest
VERSION_ID=1'
	echo base >"$R/usr/share/base/file"
	log "throw-away root: $R (work: $WORK)"
}

# host_os_release CONTENT — replace the throw-away root's os-release.
host_os_release() {
	printf '%s\n' "$1" >"$R/usr/lib/os-release"
}

# ---------------------------------------------------------------- images

# ext_tree NAME [DIR] — create a staging tree for extension NAME (default
# $WORK/src/NAME) with its extension-release file and echo its path. The
# release file says ID=sysextdtest, VERSION_ID=1 unless EXT_RELEASE is set,
# in which case EXT_RELEASE is its whole content.
ext_tree() {
	local name=$1 dir=${2:-}
	if [[ -z "$dir" ]]; then
		if [[ -z "${WORK:-}" ]]; then
			WORK=$(mktemp -d /tmp/sysextd-work.XXXXXX)
			export WORK
		fi
		dir=$WORK/src/$name
	fi
	mkdir -p "$dir/usr/lib/extension-release.d"
	printf '%s\n' "${EXT_RELEASE:-ID=sysextdtest
VERSION_ID=1}" >"$dir/usr/lib/extension-release.d/extension-release.$name"
	echo "$dir"
}

# ext_file TREE RELPATH CONTENT — add a file to a staging tree.
ext_file() {
	mkdir -p "$(dirname "$1/$2")"
	printf '%s\n' "$3" >"$1/$2"
}

mk_erofs() {
	mkfs.erofs --quiet --all-root "$2" "$1" >/dev/null ||
		fail "mkfs.erofs $2 from $1 failed"
}

mk_squashfs() {
	mksquashfs "$1" "$2" -noappend -quiet -all-root >/dev/null ||
		fail "mksquashfs $2 from $1 failed"
}

mk_ext4() {
	local src=$1 out=$2 kib files
	kib=$(du -sk --apparent-size "$src" | cut -f1)
	files=$(find "$src" | wc -l)
	# Twice the data, 4 KiB per inode, 1 MiB for metadata; at least 2 MiB.
	kib=$((kib * 2 + files * 4 + 1024))
	((kib >= 2048)) || kib=2048
	rm -f "$out"
	truncate -s "${kib}K" "$out" || fail "cannot create $out"
	mkfs.ext4 -q -F -O ^has_journal -E root_owner=0:0 -d "$src" "$out" >/dev/null ||
		fail "mkfs.ext4 $out from $src failed"
}

mk_dir() {
	rm -rf "$2"
	cp -a "$1" "$2" || fail "cannot copy $1 to $2"
}

# mk_ext2 SRC OUT — an ext2 image (no journal, no extents).
mk_ext2() {
	local kib
	kib=$(($(du -sk --apparent-size "$1" | cut -f1) * 2 + $(find "$1" | wc -l) * 4 + 1024))
	((kib >= 2048)) || kib=2048
	rm -f "$2"
	truncate -s "${kib}K" "$2" || fail "cannot create $2"
	mkfs.ext2 -q -F -E root_owner=0:0 -d "$1" "$2" >/dev/null || fail "mkfs.ext2 $2 from $1 failed"
}

# mk_btrfs SRC OUT — a btrfs image made the way Flatcar's sysext bakery makes them.
mk_btrfs() {
	rm -f "$2"
	truncate -s 128M "$2" || fail "cannot create $2"
	mkfs.btrfs -q -f --rootdir "$1" "$2" >/dev/null || fail "mkfs.btrfs $2 from $1 failed"
}

# mk_xfs SRC OUT — an xfs image (300 MiB sparse, xfs' smallest), filled from a protofile.
mk_xfs() {
	python3 - "$1" "$WORK/xfs.proto" <<'PY' || fail "cannot write the xfs protofile for $1"
import os, stat, sys
src, out = sys.argv[1], sys.argv[2]
lines = ["/dev/null", "0 0", "d--755 0 0"]
def walk(d, depth):
    for name in sorted(os.listdir(d)):
        p = os.path.join(d, name)
        st = os.lstat(p)
        mode = "%03o" % (st.st_mode & 0o777)
        ind = " " * depth
        if stat.S_ISDIR(st.st_mode):
            lines.append("%s%s d--%s 0 0" % (ind, name, mode))
            walk(p, depth + 1)
            lines.append("%s$" % ind)
        elif stat.S_ISREG(st.st_mode):
            lines.append("%s%s ---%s 0 0 %s" % (ind, name, mode, p))
walk(src, 1)
lines.append("$")
open(out, "w").write("\n".join(lines) + "\n")
PY
	rm -f "$2"
	truncate -s 300M "$2" || fail "cannot create $2"
	mkfs.xfs -q -f -p "$WORK/xfs.proto" "$2" >/dev/null || fail "mkfs.xfs $2 from $1 failed"
}

# mk_image KIND SRC NAME — build extension NAME from SRC as KIND (directory,
# erofs, squashfs, ext4, ext2, btrfs, xfs) in $R/var/lib/extensions and echo its path.
mk_image() {
	local kind=$1 src=$2 name=$3 dst=$R/var/lib/extensions
	case $kind in
	directory | dir) mk_dir "$src" "$dst/$name" && echo "$dst/$name" ;;
	erofs) mk_erofs "$src" "$dst/$name.raw" && echo "$dst/$name.raw" ;;
	squashfs) mk_squashfs "$src" "$dst/$name.raw" && echo "$dst/$name.raw" ;;
	ext4) mk_ext4 "$src" "$dst/$name.raw" && echo "$dst/$name.raw" ;;
	ext2) mk_ext2 "$src" "$dst/$name.raw" && echo "$dst/$name.raw" ;;
	btrfs) mk_btrfs "$src" "$dst/$name.raw" && echo "$dst/$name.raw" ;;
	xfs) mk_xfs "$src" "$dst/$name.raw" && echo "$dst/$name.raw" ;;
	*) fail "mk_image: unknown kind $kind" ;;
	esac
}

# ---------------------------------------------------------------- state

# loop_snapshot — `losetup -a`, sorted, limited to devices backed by files
# under this test's $R or $WORK, so that loop devices used by anything else
# on the machine at the same time cannot make a before/after comparison flaky.
loop_snapshot() {
	local prefix
	{
		for prefix in ${R:+"$R/"} ${WORK:+"$WORK/"}; do
			losetup -a 2>/dev/null | grep -F -- "($prefix" || true
		done
	} | sort -u
}

# assert_loops_as_before SNAPSHOT — the loop devices are back to SNAPSHOT.
# Auto-clearing loop devices go away when their last user does, which can
# lag a lazy unmount a little: wait up to 5 s.
assert_loops_as_before() {
	_assert_back_to loop_snapshot "$1"
}

# _assert_back_to CMD SNAPSHOT [EXTRA_CMD] — waits up to 5 s for CMD's output to
# equal SNAPSHOT; fails showing both (and EXTRA_CMD's output) otherwise.
_assert_back_to() {
	local now i
	for ((i = 0; i < 50; i++)); do
		now=$("$1")
		[[ "$now" == "$2" ]] && return 0
		sleep 0.1
	done
	fail "loop devices differ from before:
--- before:
$2
--- now:
$now${3:+
$("$3")}"
}

# fstype PATH — type of the filesystem actually visible at PATH (the top of
# any stack of mounts there), e.g. overlayfs, tmpfs.
fstype() {
	stat -f -c %T "$1"
}

# mounts_at PATH — FSTYPEs of all mounts whose mount point is PATH.
mounts_at() {
	findmnt -n -o FSTYPE --mountpoint "$1" 2>/dev/null || true
}

# is_overlay PATH — true if what is visible at PATH is an overlay mount.
is_overlay() {
	[[ $(fstype "$1") == overlayfs ]]
}

# has_overlay_mount PATH — true if any mount at PATH (visible or covered) is
# an overlay.
has_overlay_mount() {
	mounts_at "$1" | grep -qx overlay
}

# mountinfo_under PATH — lines of /proc/self/mountinfo for PATH and below.
mountinfo_under() {
	awk -v p="$1" '$5 == p || index($5, p "/") == 1' /proc/self/mountinfo
}

# ---------------------------------------------------------------- sysextd

# run_sysextd ARGS... — run the binary under test on $R, in this process's
# namespace, without D-Bus. Sets OUT, ERR and RC; never exits the test.
run_sysextd() {
	local o e
	o=$(mktemp) e=$(mktemp)
	RC=0
	timeout "$SYSEXTD_TIMEOUT" "$SYSEXTD" --root="$R" --no-bus "$@" >"$o" 2>"$e" || RC=$?
	OUT=$(cat "$o")
	ERR=$(cat "$e")
	rm -f "$o" "$e"
	echo "+ sysextd --root=$R --no-bus $* -> rc=$RC"
	[[ -z "$OUT" ]] || sed 's/^/  out| /' <<<"$OUT"
	[[ -z "$ERR" ]] || sed 's/^/  err| /' <<<"$ERR"
	if [[ $RC -eq 124 ]]; then
		echo "  (timed out after ${SYSEXTD_TIMEOUT}s)"
	fi
	return 0
}

# ---------------------------------------------------------------- refresh tests

# require_test_hooks — skip unless the binary under test was built with
# -Dtest-hooks=true (its --version then says "+test-hooks").
require_test_hooks() {
	local v
	v=$("$SYSEXTD" --version 2>/dev/null || true)
	[[ "$v" == *"+test-hooks"* ]] ||
		skip "$SYSEXTD was built without test hooks (--version: '$v'); configure with -Dtest-hooks=true"
}

# ours_at PATH — how many sysextd overlays (fstype overlay, source "sysextd")
# are mounted at PATH in this namespace, covered or not.
ours_at() {
	awk -v p="$1" '$5 == p {
		for (i = 7; $i != "-"; i++) ;
		if ($(i + 1) == "overlay" && $(i + 2) == "sysextd") n++
	} END { print n + 0 }' /proc/self/mountinfo
}

# top_mount_id PATH — mount id of the mount visible at PATH (top of the stack).
top_mount_id() {
	python3 -c '
import os, sys
fd = os.open(sys.argv[1], os.O_PATH | os.O_DIRECTORY)
for line in open("/proc/self/fdinfo/%d" % fd):
    if line.startswith("mnt_id:"):
        print(line.split()[1])
' "$1"
}

# replace_image SRC DST — put a copy of SRC at DST as a new file (new inode,
# new mtime): written to a temporary name in DST's directory, then renamed
# over DST, the way an update tool replaces an image.
replace_image() {
	local tmp
	tmp=$(dirname "$2")/.$(basename "$2").new
	cp -- "$1" "$tmp" || fail "cannot copy $1 to $tmp"
	mv -f -- "$tmp" "$2" || fail "cannot rename $tmp to $2"
}

# journal_has_pending — true if the journal still has a "pending" key.
journal_has_pending() {
	python3 -c '
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except FileNotFoundError:
    sys.exit(1)
sys.exit(0 if "pending" in d else 1)
' "$R/run/sysextd/state.json"
}

# loop_count — number of loop devices backed by files under $R or $WORK.
loop_count() {
	local s
	s=$(loop_snapshot)
	if [[ -z "$s" ]]; then echo 0; else wc -l <<<"$s"; fi
}

# wait_loop_count N — wait up to 5 s for loop_count to become N.
wait_loop_count() {
	local i n
	for ((i = 0; i < 50; i++)); do
		n=$(loop_count)
		[[ "$n" == "$1" ]] && return 0
		sleep 0.1
	done
	fail "expected $1 loop device(s) backed by test files, found $n:
$(loop_snapshot)"
}

# loop_ids — our loop devices (see _our_loops) as "NAME MAJ:MIN INODE" of the
# backing file: unlike loop_snapshot, unaffected by the backing file having
# been renamed over or deleted since (as when an image is replaced).
loop_ids() {
	_our_loops
}

# assert_loop_ids_as_before SNAPSHOT — loop_ids is back to SNAPSHOT (waits up
# to 5 s, like assert_loops_as_before).
assert_loop_ids_as_before() {
	_assert_back_to loop_ids "$1" _losetup_list
}

_losetup_list() {
	losetup -l 2>/dev/null
}
