#!/bin/bash
# A daemon that never idles out ([Daemon] IdleTimeoutSec=0) still exits when
# its bus goes away: with no connection it serves nobody, and a later bus
# would activate a second one for the same tree.
set -euo pipefail
# shellcheck source=test/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=test/bus/lib-bus.sh
. "$(dirname "$0")/lib-bus.sh"
enter_sandbox "$@"
bus_requirements
make_root
bus_setup_images
start_bus "$NOIDLE_CONF"

check "the daemon is activated and merges"
run_cli merge
assert_ok merge
p=$(daemon_pid)
[[ -n "$p" ]] || fail "no daemon after merge"

check "the bus exits: the daemon exits within 10 s, the merged tree stays"
bus=$BUS_PID
kill -TERM "$bus"
wait "$bus" 2>/dev/null || true
for ((i = 0; i < 100; i++)); do
	kill -0 "$p" 2>/dev/null || break
	sleep 0.1
done
if kill -0 "$p" 2>/dev/null; then
	fail "the daemon (PID $p, IdleTimeoutSec=0) still runs 10 s after its bus (dbus-daemon PID $bus) exited"
fi
assert_file_content "$R/usr/share/ext1/hello" "hello from ext1"

echo "PASS"
