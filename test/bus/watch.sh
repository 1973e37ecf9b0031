#!/bin/bash
# Layers watched while merged (sysextd(8), WATCHED LAYERS), through the daemon, on real loop
# devices:
#  (a) OnImageChange=report (the default): each of
#        - the live loop device's backing file swapped with LOOP_CHANGE_FD,
#        - an image written in place (same size),
#        - an image renamed over,
#        - an image deleted,
#      is reported in `sysextd status` (text and --json "changed", with the generation it
#      changed under), as an ImageChanged signal, and in the daemon's log; nothing is refreshed
#      by itself; a plain `sysextd refresh` then rebuilds (a swapped backing file is no
#      "unchanged", its layer is not reused) and status is clean again;
#  (b) a daemon that starts after a change still reports it (restart-proof);
#  (c) OnImageChange=refresh: each event is followed by a refresh by the daemon itself: the
#      generation moves on, the tree shows the new content, status is clean.
set -euo pipefail
# shellcheck source=test/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=test/bus/lib-bus.sh
. "$(dirname "$0")/lib-bus.sh"
enter_sandbox "$@"
bus_requirements
require_cmd python3 losetup dd
make_root
bus_setup_images
EXT=$R/var/lib/extensions

# loop_of FILE — the loop device backed by FILE (the live layer's), or fail.
loop_of() {
	local d
	d=$(losetup -n -O NAME -j "$1" 2>/dev/null | head -n1)
	[[ -n "$d" ]] || fail "no loop device is backed by $1:
$(losetup -a)"
	echo "$d"
}

# watches_now — "INSTANCES WATCHES": the daemon's inotify instances and the watches they hold
# (one per live image file, one per directory holding them).
watches_now() {
	local p fd n=0 w=0
	p=$(daemon_pid)
	[[ -n "$p" ]] || fail "no daemon"
	for fd in /proc/"$p"/fd/*; do
		[[ "$(readlink "$fd" 2>/dev/null)" == "anon_inode:inotify" ]] || continue
		n=$((n + 1))
		w=$((w + $(grep -c '^inotify wd:' "/proc/$p/fdinfo/${fd##*/}")))
	done
	echo "$n $w"
}
# watches EXPECTED — watches_now once the watch is rebuilt after the last job: the daemon
# rebuilds it after it answered the job, when no bus call waits (or, when a transition is
# queued by then, after that one); so after a refresh that changes nothing, up to 10 s until
# the count is EXPECTED (a refresh's own rebuild watches the same files again: it holds).
watches() {
	local i now=
	run_cli refresh
	assert_ok "a refresh that changes nothing"
	for ((i = 0; i < 100; i++)); do
		now=$(watches_now)
		[[ "$now" == "$1" ]] && break
		sleep 0.1
	done
	echo "$now"
}

# change_fd DEVICE NEWFILE — LOOP_CHANGE_FD (0x4C06). The kernel allows it only on a read-only
# device (sysextd attaches read-only) and for a file of the same size. Exit status 3: the kernel
# refused with EBUSY (a device held by a mounted file system cannot be changed there).
change_fd() {
	python3 - "$1" "$2" <<'PY'
import errno, fcntl, os, sys
dev = os.open(sys.argv[1], os.O_RDONLY | os.O_CLOEXEC)
new = os.open(sys.argv[2], os.O_RDONLY | os.O_CLOEXEC)
try:
    fcntl.ioctl(dev, 0x4C06, new)
except OSError as e:
    sys.stderr.write("LOOP_CHANGE_FD on %s: %s\n" % (sys.argv[1], e))
    sys.exit(3 if e.errno == errno.EBUSY else 1)
PY
}

# write_in_place FILE — rewrite the byte in the middle of FILE with itself: the same size and
# content, a real write (IN_MODIFY, a new mtime).
write_in_place() {
	python3 - "$1" <<'PY'
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
size = os.fstat(fd).st_size
b = os.pread(fd, 1, size // 2)
os.pwrite(fd, b, size // 2)
os.close(fd)
PY
}

# changed_how NAME — the "how" status --json gives for NAME ("" when it is not listed).
changed_how() {
	run_cli --json status
	assert_ok "status --json"
	json_q "$OUT" 'next((c["how"] for c in d.get("changed", []) if c["name"] == "'"$1"'"), "")'
}

# wait_changed NAME HOW — up to 15 s until status lists NAME as changed HOW.
wait_changed() {
	local i how=
	for ((i = 0; i < 75; i++)); do
		how=$(changed_how "$1")
		[[ "$how" == "$2" ]] && return 0
		sleep 0.2
	done
	fail "status does not list $1 as $2 (got '${how}'):
$OUT"
}

# wait_signal_for NAME HOW — up to 15 s until an ImageChanged signal for NAME with HOW was seen.
wait_signal_for() {
	local i
	for ((i = 0; i < 75; i++)); do
		monitor_signals ImageChanged | grep -q "^\[\"$1\",\"[^\"]*\",\"$2\"," && return 0
		sleep 0.2
	done
	fail "no ImageChanged signal for $1 ($2); signals seen:
$(monitor_signals ImageChanged)
--- log:
$(bus_log)"
}

# assert_clean — status lists no changed layer.
assert_clean() {
	run_cli --json status
	assert_ok "status --json"
	assert_eq "$(json_q "$OUT" 'd.get("changed", [])')" "[]" "${1:-status}: no layer changed"
}

# wait_generation_above N — up to 20 s until the Generation property is above N.
wait_generation_above() {
	local i g=0
	for ((i = 0; i < 100; i++)); do
		g=$(generation)
		((g > $1)) && return 0
		sleep 0.2
	done
	fail "the daemon did not refresh by itself (generation $g, was $1):
$(bus_log)"
}

# reported_modified NAME — NAME's image written in place is reported as modified (status and
# ImageChanged), with no refresh by the daemon itself; a plain refresh then leaves status clean.
reported_modified() {
	local g
	g=$(generation)
	write_in_place "$EXT/$1.raw"
	wait_signal_for "$1" modified
	wait_changed "$1" modified
	assert_eq "$(generation)" "$g" "report: no refresh by itself"
	run_cli refresh
	assert_ok "refresh after $1 was written in place"
	assert_clean "after the refresh"
}

# ext1 v2 and v3: other content, for rename over.
make_version() {
	local t
	t=$(ext_tree ext1 "$WORK/src/ext1-$1")
	ext_file "$t" usr/share/ext1/hello "hello from ext1 $1"
	mk_erofs "$t" "$WORK/ext1-$1.raw"
}
make_version v2
make_version v3

start_bus "$NOIDLE_CONF"
start_monitor

# ------------------------------------------------------------ (a)
check "(a) merge: two layers on loop devices, status lists no change"
run_cli merge
assert_ok merge
assert_file_content "$R/usr/share/ext1/hello" "hello from ext1"
assert_clean "after merge"
g0=$(generation)

check "(a) LOOP_CHANGE_FD under a live layer: reported (status, ImageChanged, log)"
dev=$(loop_of "$EXT/ext1.raw")
cp "$EXT/ext1.raw" "$WORK/ext1-copy.raw"
rc=0
change_fd "$dev" "$WORK/ext1-copy.raw" || rc=$?
if [[ $rc == 3 ]]; then
	log "SKIPPED PART: this kernel refuses LOOP_CHANGE_FD on a loop device held by a mounted file system (EBUSY); that path cannot be provoked here"
elif [[ $rc != 0 ]]; then
	fail "LOOP_CHANGE_FD on $dev failed (exit $rc)"
else
	wait_signal_for ext1 media-changed
	wait_changed ext1 media-changed
	run_cli --json status
	assert_eq "$(json_q "$OUT" '[c["generation"] for c in d["changed"] if c["name"] == "ext1"][0]')" "$g0" "changed under generation $g0"
	run_cli status
	assert_contains "$OUT" "ext1" "status text"
	assert_contains "$OUT" "changed under the live tree since generation $g0" "status text"
	assert_contains "$(bus_log)" "changed under the live tree since generation $g0" "the daemon's log"
	assert_eq "$(generation)" "$g0" "report: no refresh by itself"

	check "(a) a plain refresh rebuilds the swapped layer (not 'unchanged', not reused)"
	run_cli refresh
	assert_ok refresh
	assert_ne "$(generation)" "$g0" "a new generation"
	assert_ne "$(loop_of "$EXT/ext1.raw")" "$dev" "ext1 is on a new loop device"
	assert_file_content "$R/usr/share/ext1/hello" "hello from ext1"
	assert_clean "after the refresh"
fi

check "(a) an image written in place: reported as modified"
reported_modified ext2

check "(a) an image renamed over: reported as replaced; the live tree keeps the old content"
g=$(generation)
cp "$WORK/ext1-v2.raw" "$EXT/.ext1.new"
mv -f "$EXT/.ext1.new" "$EXT/ext1.raw"
wait_signal_for ext1 replaced
wait_changed ext1 replaced
assert_file_content "$R/usr/share/ext1/hello" "hello from ext1"

# ------------------------------------------------------------ (b)
check "(b) a daemon that starts after the change still reports it"
stop_bus
start_bus "$NOIDLE_CONF"
wait_changed ext1 replaced
run_cli --json status
assert_eq "$(json_q "$OUT" '[c["generation"] for c in d["changed"] if c["name"] == "ext1"][0]')" "$g" "changed under generation $g"
start_monitor
run_cli refresh
assert_ok refresh
assert_file_content "$R/usr/share/ext1/hello" "hello from ext1 v2"
assert_clean "after the refresh"
assert_eq "$(watches "1 3")" "1 3" "one inotify instance watching the two live image files and their directory"
for i in 1 2 3; do
	cp "$WORK/ext1-v2.raw" "$EXT/.ext1.new"
	mv -f "$EXT/.ext1.new" "$EXT/ext1.raw"
	run_cli refresh
	assert_ok "refresh $i after ext1 was renamed over"
done
assert_eq "$(watches "1 3")" "1 3" "after three refreshes onto new files: the replaced files are no longer watched"
mkdir -p "$R/var/lib/aside" # the same file system: the file keeps its inode
mv "$EXT/ext1.raw" "$R/var/lib/aside/ext1.raw"
run_cli refresh
assert_ok "refresh with ext1 moved out of the search path"
assert_missing "$R/usr/share/ext1/hello"
assert_eq "$(watches "1 2")" "1 2" "a file that is no longer a layer is no longer watched, though it still exists"
mv "$R/var/lib/aside/ext1.raw" "$EXT/ext1.raw"
run_cli refresh
assert_ok "refresh with ext1 back"
assert_eq "$(watches "1 3")" "1 3" "watched again"
assert_clean "after ext1 came back"

# A rebuild keeps the watch of each image file that stays a layer as recorded (the same path
# and inode) instead of watching it anew: what the kept watches and the new ones see.
check "(d) a file watch kept across refreshes still reports a write in place"
for i in 2 3 4; do
	cp "$WORK/ext1-v$((i % 2 + 2)).raw" "$EXT/.ext1.new"
	mv -f "$EXT/.ext1.new" "$EXT/ext1.raw"
	run_cli refresh
	assert_ok "refresh $i onto a new ext1 (ext2 kept)"
done
assert_file_content "$R/usr/share/ext1/hello" "hello from ext1 v2"
assert_clean "after the refreshes"
reported_modified ext2

check "(d) the file that replaced a layer is watched: a write in place and a rename over are reported"
reported_modified ext1
cp "$WORK/ext1-v3.raw" "$EXT/.ext1.new"
mv -f "$EXT/.ext1.new" "$EXT/ext1.raw"
wait_changed ext1 replaced
assert_file_content "$R/usr/share/ext1/hello" "hello from ext1 v2"
run_cli refresh
assert_ok "refresh onto ext1 v3"
assert_file_content "$R/usr/share/ext1/hello" "hello from ext1 v3"
assert_clean "after the refresh"
assert_eq "$(watches "1 3")" "1 3" "still the two live image files and their directory"

check "(d) refreshes queued behind each other: the watch is rebuilt after the last, and reports"
pids=()
for i in 1 2 3 4; do
	env DBUS_SYSTEM_BUS_ADDRESS="$BUS_ADDR" "$SYSEXTD" --root="$R" refresh --always-refresh=yes >"$WORK/bg-$i.out" 2>&1 &
	pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || fail "a queued refresh failed: $(cat "$WORK"/bg-*.out)"; done
assert_eq "$(watches "1 3")" "1 3" "after four queued refreshes"
reported_modified ext2

check "(a) an image deleted: reported as deleted; the live tree still reads it"
g=$(generation)
cp "$EXT/ext2.raw" "$WORK/ext2-saved.raw"
rm -f "$EXT/ext2.raw"
wait_signal_for ext2 deleted
wait_changed ext2 deleted
assert_file_content "$R/usr/share/ext2/hello" "hello from ext2"
assert_eq "$(generation)" "$g" "report: no refresh by itself"
run_cli refresh
assert_ok refresh
assert_missing "$R/usr/share/ext2/hello"
assert_clean "after the refresh"
cp "$WORK/ext2-saved.raw" "$EXT/ext2.raw"
run_cli refresh
assert_ok refresh
assert_file_content "$R/usr/share/ext2/hello" "hello from ext2"

# ------------------------------------------------------------ (c)
check "(c) OnImageChange=refresh: the daemon refreshes by itself"
printf '[Daemon]\nIdleTimeoutSec=0\n[Extensions]\nOnImageChange=refresh\n' >"$WORK/refresh.conf"
stop_bus
start_bus "$WORK/refresh.conf"
start_monitor
assert_clean "at the start"

check "(c) renamed over: refreshed, the tree shows the new content"
g=$(generation)
cp "$WORK/ext1-v3.raw" "$EXT/.ext1.new"
mv -f "$EXT/.ext1.new" "$EXT/ext1.raw"
wait_signal_for ext1 replaced
wait_generation_above "$g"
wait_signal TreeChanged 1
assert_file_content "$R/usr/share/ext1/hello" "hello from ext1 v3"
assert_clean "after the automatic refresh"

check "(c) written in place: refreshed"
g=$(generation)
write_in_place "$EXT/ext2.raw"
wait_signal_for ext2 modified
wait_generation_above "$g"
assert_file_content "$R/usr/share/ext2/hello" "hello from ext2"
assert_clean "after the automatic refresh"

check "(c) LOOP_CHANGE_FD: refreshed onto a new loop device"
g=$(generation)
dev=$(loop_of "$EXT/ext1.raw")
cp "$EXT/ext1.raw" "$WORK/ext1-copy2.raw"
rc=0
change_fd "$dev" "$WORK/ext1-copy2.raw" || rc=$?
if [[ $rc == 3 ]]; then
	log "SKIPPED PART: LOOP_CHANGE_FD refused with EBUSY (see above)"
elif [[ $rc != 0 ]]; then
	fail "LOOP_CHANGE_FD on $dev failed (exit $rc)"
else
	wait_signal_for ext1 media-changed
	wait_generation_above "$g"
	assert_ne "$(loop_of "$EXT/ext1.raw")" "$dev" "ext1 is on a new loop device"
	assert_file_content "$R/usr/share/ext1/hello" "hello from ext1 v3"
	assert_clean "after the automatic refresh"
fi

check "(c) deleted: refreshed, the layer is gone from the tree"
g=$(generation)
rm -f "$EXT/ext2.raw"
wait_signal_for ext2 deleted
wait_generation_above "$g"
assert_missing "$R/usr/share/ext2/hello"
assert_file_content "$R/usr/share/ext1/hello" "hello from ext1 v3"
assert_clean "after the automatic refresh"
assert_eq "$(watches "1 2")" "1 2" "the deleted image is no longer watched"

check "(c) one refresh per burst: nothing more happens when all is quiet"
g=$(generation)
sleep 3
assert_eq "$(generation)" "$g" "no further refresh"
assert_contains "$(bus_log)" "Refreshing by itself (OnImageChange=refresh)" "the daemon's log says why it refreshed"

run_cli unmerge
assert_ok unmerge
echo "PASS: watch"
