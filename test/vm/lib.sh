# SPDX-License-Identifier: LGPL-2.1-or-later
# Helpers for the guest-side scripts of the 'vm' tier (sourced inside the VM).
# Each check prints "ok - ..." or "not ok - ..."; `finish` exits 1 when any failed.

PROBE=/usr/share/vmtest/probe        # base: "base", image versions: "v1", "v2"
MARKER=/usr/local/share/vmtest-marker  # on the /usr/local tmpfs mounted by a unit
READERS=/run/vmtest/readers
IMGDIR=/var/lib/vmtest/img
EXTDIR=/var/lib/extensions
READER=$VMTEST_BIN/vmtest-reader

fails=0
ok() { echo "ok - $*"; }
not_ok() { echo "not ok - $*"; fails=$((fails + 1)); }
# check DESCRIPTION COMMAND...: passes when COMMAND succeeds.
check() {
	local d=$1; shift
	if "$@"; then ok "$d"; else not_ok "$d"; fi
}
# expect DESCRIPTION WANT GOT
expect() {
	if [[ $3 == "$2" ]]; then ok "$1 ($3)"; else not_ok "$1: want '$2', got '$3'"; fi
}
note() { echo "# $*"; }
finish() {
	if ((fails)); then echo "# $fails check(s) failed"; exit 1; fi
	echo "# all checks passed"; exit 0
}
die() { echo "not ok - $*"; exit 1; }

now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

# wait_for SECONDS COMMAND...: poll every 0.2 s until COMMAND succeeds.
wait_for() {
	local end=$(( $(date +%s) + $1 )); shift
	until "$@"; do
		(( $(date +%s) >= end )) && return 1
		sleep 0.2
	done
}

# The file seen by PID's mount namespace (or the host's when PID is empty).
probe_in() {
	if [[ -n ${1:-} ]]; then nsenter -t "$1" -m cat "$PROBE" 2>&1; else cat "$PROBE" 2>&1; fi
}
marker_in() {
	if [[ -n ${1:-} ]]; then nsenter -t "$1" -m cat "$MARKER" 2>&1; else cat "$MARKER" 2>&1; fi
}
# Number of overlay mounts stacked on /usr in PID's namespace (host's when empty).
usr_overlays_in() {
	local mi=/proc/self/mountinfo
	[[ -n ${1:-} ]] && mi=/proc/$1/mountinfo
	awk '$5 == "/usr" { for (i = 7; $i != "-"; i++); if ($(i + 1) == "overlay") n++ } END { print n + 0 }' "$mi"
}

# make_image VERSION [NAME]: an erofs sysext image NAME (default "ext") in $IMGDIR/VERSION.raw,
# whose $PROBE says VERSION (for "ext"), or which adds /usr/share/vmtest/NAME (otherwise).
make_image() {
	local v=$1 name=${2:-ext} t
	t=$(mktemp -d)
	mkdir -p "$t/usr/share/vmtest" "$t/usr/lib/extension-release.d"
	if [[ $name == ext ]]; then
		echo "$v" >"$t/usr/share/vmtest/probe"
	else
		echo "$v" >"$t/usr/share/vmtest/$name"
	fi
	printf 'ID=_any\n' >"$t/usr/lib/extension-release.d/extension-release.$name"
	mkdir -p "$IMGDIR"
	mkfs.erofs "$IMGDIR/$v.raw" "$t" >/dev/null || return 1
	rm -rf "$t"
}

# use_image VERSION [NAME]: make /var/lib/extensions/NAME.raw (default ext.raw) be that
# version (atomic rename of a hard link, so each version keeps its inode).
use_image() {
	local dst=$EXTDIR/${2:-ext}.raw
	mkdir -p "$EXTDIR"
	[[ "$IMGDIR/$1.raw" -ef "$dst" ]] && return 0
	ln -f "$IMGDIR/$1.raw" "$IMGDIR/.next" && mv -f "$IMGDIR/.next" "$dst"
}

# Base content, in the real /usr of the disk (never merged at this point).
setup_base() {
	mkdir -p /usr/share/vmtest
	echo base >"$PROBE"
}

# write_reader_unit UNIT SETTINGS...: a reader running as service UNIT (in /run, so only
# for this boot); daemon-reload before starting it.
write_reader_unit() {
	local unit=$1; shift
	mkdir -p "$READERS"
	{
		printf '[Unit]\nDescription=vmtest reader %s\n[Service]\n' "$unit"
		printf 'ExecStart=%s %s %s/%s.txt 1000\n' "$READER" "$PROBE" "$READERS" "$unit"
		printf '%s\n' "$@"
	} >"/run/systemd/system/$unit.service"
}
main_pid() { systemctl show -P MainPID "$1.service"; }

# Readers: service units by name, or "host" for a background reader in the host namespace.
host_reader_pid=
start_host_reader() {
	mkdir -p "$READERS"
	"$READER" "$PROBE" "$READERS/host.txt" 1000 &
	host_reader_pid=$!
}
reader_pid() { if [[ $1 == host ]]; then echo "$host_reader_pid"; else main_pid "$1"; fi; }
reset_reader() { kill -USR1 "$(reader_pid "$1")"; }
# dump_reader NAME: the reader's counter line on stdout.
dump_reader() {
	local f=$READERS/$1.txt
	rm -f "$f"
	kill -USR2 "$(reader_pid "$1")"
	wait_for 10 test -s "$f" || { echo "reader $1 did not answer"; return 1; }
	cat "$f"
}
# field LINE KEY
field() { sed -n "s/.*\\b$2=\\([^ ]*\\).*/\\1/p" <<<"$1"; }

# old_tree_holders: one line "PID COMM PATH" per process that holds a file (open, mapped,
# as cwd, root or executable) on a file system no mount of its own namespace shows: a tree
# that was detached lazily and lives on because of it.  Sockets, pipes, anonymous inodes
# and memfds are not files of a tree and are left out.
old_tree_holders() {
	local p l t d devs
	for p in /proc/[0-9]*; do
		devs=" $(awk '{print $3}' "$p/mountinfo" 2>/dev/null | tr '\n' ' ') "
		for l in "$p"/fd/* "$p"/cwd "$p"/root "$p"/exe "$p"/map_files/*; do
			t=$(readlink "$l" 2>/dev/null) || continue
			[[ $t == /* && $t != /memfd:* ]] || continue
			d=$(stat -L -c '%Hd:%Ld' "$l" 2>/dev/null) || continue
			[[ $devs == *" $d "* ]] && continue
			echo "${p#/proc/} $(cat "$p/comm" 2>/dev/null) $t"
			break
		done
	done
}
