# shellcheck shell=bash
# Helpers for sysextd's bus tests. Source it after test/lib.sh, call
# enter_sandbox and make_root, then:
#
#   start_bus [CONFIG_FILE] [ENV=VAL...]
#       start a private dbus-daemon with a system-bus-like configuration
#       (Debian's system.conf, default-deny) that includes the project's bus
#       policy (conf/org.sysextd1.conf) and activates org.sysextd1 as
#       `sysextd daemon --root=$R [--config=CONFIG_FILE]`. ENV=VAL pairs go
#       into dbus-daemon's environment, which the activated daemon inherits
#       (test hooks, for instance). Exports DBUS_SYSTEM_BUS_ADDRESS.
#       Set BUS_EXTRA_POLICY to a second policy file to include it after the
#       project's (a later rule wins in D-Bus policy).
#   stop_bus     stop the daemon (if any) and the bus; start_bus registers it
#                to run at exit.
#   bctl ARGS    busctl on the private bus
#   daemon_pid   PID of the connection owning org.sysextd1, or empty
#   wait_daemon_gone [SECONDS]   wait for org.sysextd1 to lose its owner
#   gcall [--unpriv] METHOD ARGS...   call an org.sysextd1.Manager method
#                with gdbus (which, unlike busctl, prints the D-Bus error
#                name). Sets OUT, ERR, RC like run_sysextd.
#   run_cli ARGS...   the CLI against the daemon (no --no-bus), on $R.
#                Sets OUT, ERR, RC.
#   run_bctl [--unpriv] ARGS...   busctl on the private bus (as nobody with
#                --unpriv). Sets OUT, ERR, RC.
#   as_nobody CMD...  run CMD as nobody:nogroup, no supplementary groups.
#   prop NAME, generation   a property of the manager; Generation as a number
#   tree_snapshot   files, contents and mounts of $R/usr and $R/opt
#   start_monitor, monitor_signals MEMBER, wait_signal MEMBER N
#                watch org.sysextd1's signals with busctl monitor
#   bus_setup_images, noidle_config   two erofs images; $NOIDLE_CONF
#   bus_log      the bus's and the daemon's stderr so far (printed on failure)
#
# Only processes this test started are ever signalled, each by PID: the
# dbus-daemon, what it spawned, and the processes running exactly the
# command line of this test's activation file (the daemon it activated and
# the daemon's workers; dbus-daemon double-forks them, so they are not its
# descendants).

BUS_SRCDIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUS_POLICY=${BUS_POLICY:-$BUS_SRCDIR/conf/org.sysextd1.conf}
BUS_DIR=
BUS_PID=
BUS_ADDR=
BUS_LOG=
BUS_EXTRA_POLICY=${BUS_EXTRA_POLICY:-}
_bus_cleanup_registered=

bctl() {
	busctl --address="$BUS_ADDR" "$@"
}

# daemon_pid — PID of the owner of org.sysextd1 (empty when there is none).
# Never activates the daemon.
daemon_pid() {
	local p
	p=$(busctl --address="$BUS_ADDR" --auto-start=no call org.freedesktop.DBus /org/freedesktop/DBus \
		org.freedesktop.DBus GetConnectionUnixProcessID s org.sysextd1 2>/dev/null | awk '{print $2}') || true
	echo "$p"
}

# wait_daemon_gone [SECONDS] — true once nobody owns org.sysextd1.
wait_daemon_gone() {
	local i n=$((${1:-10} * 10))
	for ((i = 0; i < n; i++)); do
		[[ -z "$(daemon_pid)" ]] && return 0
		sleep 0.1
	done
	return 1
}

# _descendants PID — all processes descended from PID (not PID itself),
# parents before children.
_descendants() {
	local kids k
	kids=$(ps -o pid= --ppid "$1" 2>/dev/null) || true
	for k in $kids; do
		echo "$k"
		_descendants "$k"
	done
}

# _our_daemons — PIDs of processes running this test's activation file's
# command line exactly (`$SYSEXTD daemon --root=$R [--config=...]`; $R is
# unique to this test): the daemons our bus activated, and their workers
# (forked, same command line). dbus-daemon double-forks what it activates,
# so they are not its descendants.
_our_daemons() {
	local -a exec_argv
	read -r -a exec_argv <<<"$(sed -n 's/^Exec=//p' "$BUS_DIR/services/org.sysextd1.service" 2>/dev/null)"
	((${#exec_argv[@]} > 0)) || return 0
	python3 - "${exec_argv[@]}" <<'PY'
import os, sys
want = sys.argv[1:]
for pid in sorted((p for p in os.listdir("/proc") if p.isdigit()), key=int):
    try:
        argv = open("/proc/%s/cmdline" % pid, "rb").read().split(b"\0")[:-1]
    except OSError:
        continue
    if [a.decode(errors="replace") for a in argv] == want:
        print(pid)
PY
}

# _bus_kill_wait PID SECONDS — SIGTERM PID, wait for it to go, SIGKILL after
# SECONDS.
_bus_kill_wait() {
	local pid=$1 i
	kill -0 "$pid" 2>/dev/null || return 0
	kill -TERM "$pid" 2>/dev/null || return 0
	for ((i = 0; i < $2 * 10; i++)); do
		kill -0 "$pid" 2>/dev/null || return 0
		# A zombie child of ours counts as gone.
		[[ $(ps -o stat= -p "$pid" 2>/dev/null) == Z* ]] && return 0
		sleep 0.1
	done
	echo "# cleanup: PID $pid did not exit on SIGTERM, killing it" >&2
	kill -KILL "$pid" 2>/dev/null || true
}

stop_bus() {
	local p d
	[[ -n "$BUS_PID" ]] || return 0
	# The daemon first, while the bus can still tell us its PID (it must
	# also be running our activation file's command line); it answers
	# SIGTERM after a running transition is done.
	p=$(daemon_pid)
	if [[ -n "$p" ]] && grep -qx "$p" <<<"$(_our_daemons)"; then
		_bus_kill_wait "$p" 20
	fi
	# Then whatever else runs that command line (a daemon that lost its
	# name, an orphaned worker), and whatever the bus itself spawned.
	for d in $(_our_daemons) $(_descendants "$BUS_PID"); do
		_bus_kill_wait "$d" 5
	done
	_bus_kill_wait "$BUS_PID" 5
	wait "$BUS_PID" 2>/dev/null || true
	BUS_PID=
	unset DBUS_SYSTEM_BUS_ADDRESS
}

# bus_log — the bus's (and the daemon's) stderr so far.
bus_log() {
	[[ -n "$BUS_LOG" && -e "$BUS_LOG" ]] && cat "$BUS_LOG"
}

_bus_exit() {
	# Runs from lib.sh's exit handler, whose local `rc` (bash scoping is
	# dynamic) is the test's exit status.
	local status=${rc:-0}
	if [[ $status -ne 0 && $status -ne 77 && -n "$BUS_LOG" && -e "$BUS_LOG" ]]; then
		echo "--- dbus-daemon and sysextd daemon log ($BUS_LOG):" >&2
		sed 's/^/  bus| /' "$BUS_LOG" >&2
	fi
	stop_bus
	[[ -n "$BUS_DIR" && -d "$BUS_DIR" ]] && rm -rf --one-file-system "$BUS_DIR"
	BUS_DIR=
	return 0
}

# write_activation_file [CONFIG_FILE] — (re)write the activation file.
write_activation_file() {
	local exec="$SYSEXTD daemon --root=$R"
	[[ -n "${1:-}" ]] && exec+=" --config=$1"
	printf '[D-BUS Service]\nName=org.sysextd1\nExec=%s\nUser=root\n' "$exec" \
		>"$BUS_DIR/services/org.sysextd1.service"
}

start_bus() {
	local config='' i policy
	local -a envs=()
	if [[ $# -gt 0 && "$1" != *=* ]]; then
		config=$1
		shift
	fi
	envs=("$@")
	require_cmd dbus-daemon busctl
	[[ -r /usr/share/dbus-1/system.conf ]] || skip "no /usr/share/dbus-1/system.conf (install dbus)"
	[[ -n "${R:-}" ]] || fail "start_bus called before make_root"

	BUS_DIR=$(mktemp -d /tmp/sysextd-bus.XXXXXX)
	chmod 0755 "$BUS_DIR"
	mkdir "$BUS_DIR/services"
	BUS_LOG=$BUS_DIR/log
	BUS_ADDR=unix:path=$BUS_DIR/bus
	write_activation_file "$config"
	"$BUS_SRCDIR/test/bus/make-bus-config" "$BUS_DIR" "$BUS_POLICY" "$BUS_DIR/services" ||
		fail "make-bus-config failed"
	if [[ -n "$BUS_EXTRA_POLICY" ]]; then
		policy=$BUS_EXTRA_POLICY
		sed -i "s|</busconfig>|  <include>$policy</include>\n</busconfig>|" "$BUS_DIR/system.conf"
	fi
	if [[ -z "$_bus_cleanup_registered" ]]; then
		on_exit _bus_exit
		_bus_cleanup_registered=1
	fi

	export DBUS_SYSTEM_BUS_ADDRESS=$BUS_ADDR
	env "${envs[@]}" dbus-daemon --config-file="$BUS_DIR/system.conf" --nofork --nopidfile \
		</dev/null >>"$BUS_LOG" 2>&1 &
	BUS_PID=$!
	for ((i = 0; i < 100; i++)); do
		[[ -S "$BUS_DIR/bus" ]] && break
		kill -0 "$BUS_PID" 2>/dev/null || fail "dbus-daemon exited at start:
$(bus_log)"
		sleep 0.05
	done
	[[ -S "$BUS_DIR/bus" ]] || fail "dbus-daemon did not create $BUS_DIR/bus"
	# The socket exists just before the bus accepts; ask it something.
	for ((i = 0; i < 100; i++)); do
		bctl --auto-start=no call org.freedesktop.DBus /org/freedesktop/DBus org.freedesktop.DBus GetId \
			>/dev/null 2>&1 && break
		sleep 0.05
	done
	log "private system bus: $BUS_ADDR (dbus-daemon PID $BUS_PID)${config:+, daemon config $config}${envs[*]:+, env ${envs[*]}}"
}

# as_nobody CMD... — run CMD as nobody:nogroup without supplementary groups.
as_nobody() {
	setpriv --reuid=nobody --regid=nogroup --clear-groups -- "$@"
}

# _capture CMD... — run CMD, set OUT, ERR, RC, echo them to the log (stderr,
# so that helpers using it can be called in $(...)).
_capture() {
	local o e
	o=$(mktemp) e=$(mktemp)
	RC=0
	timeout "$SYSEXTD_TIMEOUT" "$@" >"$o" 2>"$e" || RC=$?
	OUT=$(cat "$o")
	ERR=$(cat "$e")
	rm -f "$o" "$e"
	{
		echo "+ $* -> rc=$RC"
		[[ -z "$OUT" ]] || sed 's/^/  out| /' <<<"$OUT"
		[[ -z "$ERR" ]] || sed 's/^/  err| /' <<<"$ERR"
	} >&2
	return 0
}

# run_cli [--unpriv] ARGS... — the CLI, as a client of the daemon on the
# private bus, on $R. Sets OUT, ERR, RC.
run_cli() {
	local -a pre=()
	if [[ "${1:-}" == --unpriv ]]; then
		pre=(setpriv --reuid=nobody --regid=nogroup --clear-groups --)
		shift
	fi
	_capture env DBUS_SYSTEM_BUS_ADDRESS="$BUS_ADDR" "${pre[@]}" "$SYSEXTD" --root="$R" "$@"
}

# field JSON-LINE PATH... — a field of a varlink reply ("error", "parameters" "errno", ...).
field() {
	python3 -c '
import json, sys
v = json.loads(sys.argv[1])
for k in sys.argv[2:]:
    v = v.get(k) if isinstance(v, dict) else None
print("" if v is None else v)
' "$@"
}

# run_bctl [--unpriv] ARGS... — busctl on the private bus. Sets OUT, ERR, RC.
run_bctl() {
	local -a pre=()
	if [[ "${1:-}" == --unpriv ]]; then
		pre=(setpriv --reuid=nobody --regid=nogroup --clear-groups --)
		shift
	fi
	_capture "${pre[@]}" busctl --address="$BUS_ADDR" "$@"
}

# gcall [--unpriv] METHOD [GVARIANT ARGS...] — call org.sysextd1.Manager.METHOD
# with gdbus, which prints the error name ("GDBus.Error:NAME: message").
# Sets OUT, ERR, RC; gdbus_error_name and gdbus_error_message parse ERR.
gcall() {
	local -a pre=()
	if [[ "${1:-}" == --unpriv ]]; then
		pre=(setpriv --reuid=nobody --regid=nogroup --clear-groups --)
		shift
	fi
	require_cmd gdbus
	local method=$1
	shift
	_capture env DBUS_SYSTEM_BUS_ADDRESS="$BUS_ADDR" "${pre[@]}" gdbus call --system --dest org.sysextd1 \
		--object-path /org/sysextd1 --method "org.sysextd1.Manager.$method" "$@"
}

gdbus_error_name() {
	sed -n 's/^Error: GDBus\.Error:\([^:]*\): .*/\1/p' <<<"$ERR" | head -n1
}

gdbus_error_message() {
	sed -n 's/^Error: GDBus\.Error:[^:]*: //p' <<<"$ERR" | head -n1
}

# prop NAME — a property of the manager, as busctl prints it ("t 3").
prop() {
	bctl get-property org.sysextd1 /org/sysextd1 org.sysextd1.Manager "$1"
}

# generation — the Generation property, as a number.
generation() {
	local g
	g=$(prop Generation) || fail "cannot read the Generation property"
	echo "${g#t }"
}

# tree_snapshot — what the merged hierarchies look like now: the file list
# and contents under $R/usr and $R/opt, plus the sysextd overlays mounted
# there (mount ids and all), so that any change to the tree shows.
tree_snapshot() {
	(cd "$R" && find usr opt -xdev -printf '%p %y %s\n' 2>/dev/null | sort)
	(cd "$R" && find usr opt -xdev -type f -exec md5sum {} + 2>/dev/null | sort)
	mountinfo_under "$R/usr"
	mountinfo_under "$R/opt"
}

# bus_setup_images — two erofs extensions, ext1 and ext2 (ext2 also in opt/),
# and noidle_config.
bus_setup_images() {
	local t
	t=$(ext_tree ext1)
	ext_file "$t" usr/share/ext1/hello "hello from ext1"
	mk_erofs "$t" "$R/var/lib/extensions/ext1.raw"
	t=$(ext_tree ext2)
	ext_file "$t" usr/share/ext2/hello "hello from ext2"
	ext_file "$t" opt/app/ext2 "ext2 in opt"
	mk_erofs "$t" "$R/var/lib/extensions/ext2.raw"
	noidle_config
}

# noidle_config — write $WORK/noidle.conf ([Daemon] IdleTimeoutSec=0: the
# daemon never exits on idle) and set NOIDLE_CONF to its path.
noidle_config() {
	printf '[Daemon]\nIdleTimeoutSec=0\n' >"$WORK/noidle.conf"
	export NOIDLE_CONF=$WORK/noidle.conf
}

# ---------------------------------------------------------------- monitor

MON_PID=
MON_OUT=

# start_monitor — watch the signals of org.sysextd1.Manager and the
# PropertiesChanged signals of /org/sysextd1 (busctl monitor --json=short, one
# message per line, in $MON_OUT); returns once the monitor demonstrably sees
# traffic (a probe signal it is also subscribed to has come through).
start_monitor() {
	local i
	MON_OUT=$(mktemp "$BUS_DIR/monitor.XXXXXX")
	timeout 240 busctl --address="$BUS_ADDR" monitor --json=short \
		--match="type='signal',interface='org.sysextd1.Manager'" \
		--match="type='signal',path='/org/sysextd1',interface='org.freedesktop.DBus.Properties'" \
		--match="type='signal',interface='org.sysextd1.TestProbe'" \
		>"$MON_OUT" 2>"$MON_OUT.err" &
	MON_PID=$!
	on_exit stop_monitor
	for ((i = 0; i < 100; i++)); do
		bctl emit /org/sysextd1/probe org.sysextd1.TestProbe Probe 2>/dev/null || true
		grep -q '"member":"Probe"' "$MON_OUT" && return 0
		sleep 0.1
	done
	fail "busctl monitor did not see the probe signal:
$(cat "$MON_OUT" "$MON_OUT.err")"
}

stop_monitor() {
	[[ -n "$MON_PID" ]] || return 0
	kill "$MON_PID" 2>/dev/null
	wait "$MON_PID" 2>/dev/null
	MON_PID=
	return 0
}

# monitor_signals MEMBER — the payloads (JSON "data") of the MEMBER signals
# seen so far, one per line.
monitor_signals() {
	python3 -c '
import json, sys
for line in open(sys.argv[1]):
    line = line.strip()
    if not line.startswith("{"):
        continue
    m = json.loads(line)
    if m.get("type") == "signal" and m.get("member") == sys.argv[2]:
        print(json.dumps(m["payload"]["data"], separators=(",", ":")))
' "$MON_OUT" "$1"
}

# wait_signal MEMBER N — wait up to 10 s until N MEMBER signals were seen.
wait_signal() {
	local i n
	for ((i = 0; i < 100; i++)); do
		n=$(monitor_signals "$1" | wc -l)
		((n >= $2)) && return 0
		sleep 0.1
	done
	fail "expected $2 $1 signal(s), saw $n; monitor output:
$(cat "$MON_OUT")"
}

# bus_requirements — the tools every bus test needs.
bus_requirements() {
	require_cmd dbus-daemon busctl setpriv mkfs.erofs
	require_fs erofs overlay
}
