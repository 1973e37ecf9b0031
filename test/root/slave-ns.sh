#!/bin/bash
# A "service" namespace made as a slave of the throw-away root before the
# merge sees the extension after merge and stops seeing it after unmerge.
set -euo pipefail
# shellcheck source=test/lib.sh
. "$(dirname "$0")/../lib.sh"
enter_sandbox "$@"
require_cmd mkfs.erofs nsenter
require_fs erofs overlay
make_root

t=$(ext_tree svc); ext_file "$t" usr/share/svc/hello "hello service"
mk_image erofs "$t" svc >/dev/null
loops_before=$(loop_snapshot)

unshare -m --propagation slave sleep 600 </dev/null >/dev/null 2>&1 &
pid=$!
# Kill it by PID, once, while it is still our child (no PID reuse possible
# before we reap it).
stop_slave() {
	if [[ -n "${pid:-}" ]]; then
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
		pid=
	fi
}
on_exit stop_slave
our_ns=$(readlink /proc/$$/ns/mnt)
for ((i = 0; i < 100; i++)); do
	ns=$(readlink "/proc/$pid/ns/mnt" 2>/dev/null || true)
	[[ -n "$ns" && "$ns" != "$our_ns" ]] && break
	sleep 0.05
done
[[ -n "$ns" && "$ns" != "$our_ns" ]] || fail "slave namespace (pid $pid) did not come up"
log "slave namespace: pid $pid, $ns"

in_slave() {
	nsenter -t "$pid" -m -- "$@"
}

in_slave test -e "$R/usr/share/base/file" || fail "slave namespace does not see the base"
! in_slave test -e "$R/usr/share/svc/hello" || fail "slave namespace sees the extension before merge"

run_sysextd merge
assert_ok merge
assert_file_content "$R/usr/share/svc/hello" "hello service"

check "the slave namespace sees the extension after merge"
got=$(in_slave cat "$R/usr/share/svc/hello" 2>&1) || fail "cannot read the extension in the slave namespace: $got"
assert_eq "$got" "hello service" "file in slave namespace"
assert_eq "$(in_slave cat "$R/usr/share/base/file")" base "base in slave namespace"

run_sysextd unmerge
assert_ok unmerge

check "the slave namespace no longer sees it after unmerge"
! in_slave test -e "$R/usr/share/svc/hello" || fail "slave namespace still sees the extension after unmerge"
assert_eq "$(in_slave cat "$R/usr/share/base/file")" base "base in slave namespace"
assert_missing "$R/usr/share/svc/hello"

stop_slave
assert_loops_as_before "$loops_before"

echo "PASS"
