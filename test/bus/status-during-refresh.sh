#!/bin/bash
# The daemon's bus loop never waits for mount work (invariant 8): while a
# refresh is held in its worker just before the swap (test hook before-swap;
# the hook waits until this test releases it, at most 60 s, so that "while the
# refresh runs" holds however slow the machine is), 50 concurrent GetStatus
# calls all answer, and they report the tree as it is (the old tree, still
# live: old generation, merged).
#
# Two bursts, each of 50 calls at once:
#  - from one process, one sd-bus connection per call (getstatus-burst.py):
#    each call must be answered within 1 s of being sent;
#  - 50 busctl processes: each must answer (while the refresh is held); its
#    wall clock includes starting busctl and connecting, which on a small
#    loaded machine alone can approach 1 s, so it is reported, not limited.
# Latencies are printed as median / p99 / max, next to the same bursts with
# the daemon idle.
set -euo pipefail
# shellcheck source=test/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=test/bus/lib-bus.sh
. "$(dirname "$0")/lib-bus.sh"
enter_sandbox "$@"
bus_requirements
require_test_hooks
make_root
bus_setup_images

N=50
LIMIT_MS=1000
# While $WORK/slow exists, the hook says when it starts, waits for
# $WORK/release (at most 60 s) and says when it ends.
HOOK="if [ -e $WORK/slow ]; then date +%s%N > $WORK/hook-start; i=0; \
while [ ! -e $WORK/release ] && [ \$i -lt 600 ]; do sleep 0.1; i=\$((i + 1)); done; \
date +%s%N > $WORK/hook-end; fi"
start_bus "$NOIDLE_CONF" SYSEXTD_TEST_HOOK=before-swap "SYSEXTD_TEST_HOOK_EXEC=$HOOK"
# Whatever happens, let a held transition go before the daemon is stopped.
on_exit 'touch "$WORK/release"'

# burst DIR — N concurrent GetStatus calls; DIR/I.{out,err} and DIR/I.lat
# ("RC START_NS END_NS").
burst() {
	local dir=$1 i
	local -a pids=()
	mkdir -p "$dir"
	for ((i = 1; i <= N; i++)); do
		(
			s=$(date +%s%N)
			rc=0
			timeout 30 busctl --address="$BUS_ADDR" --timeout=20 --json=short call org.sysextd1 /org/sysextd1 \
				org.sysextd1.Manager GetStatus >"$dir/$i.out" 2>"$dir/$i.err" || rc=$?
			echo "$rc $s $(date +%s%N)" >"$dir/$i.lat"
		) &
		pids+=($!)
	done
	for i in "${pids[@]}"; do
		wait "$i" || true
	done
}

# stats DIR — "median p99 max" in ms of the latencies in DIR.
stats() {
	python3 - "$1" "$N" <<'PY'
import math, sys
d, n = sys.argv[1], int(sys.argv[2])
lat = sorted((int(e) - int(s)) / 1e6 for rc, s, e in (open("%s/%d.lat" % (d, i)).read().split() for i in range(1, n + 1)))
med = (lat[(n - 1) // 2] + lat[n // 2]) / 2
p99 = lat[max(0, math.ceil(0.99 * n) - 1)]
print("%.1f %.1f %.1f" % (med, p99, lat[-1]))
PY
}

# inproc_stats JSON — "median / p99 / max" of getstatus-burst.py's latencies.
inproc_stats() {
	python3 -c '
import json, math, sys
lat = sorted(x for x in json.loads(sys.argv[1])["latency_ms"] if x is not None)
n = len(lat)
print("%.1f / %.1f / %.1f" % ((lat[(n - 1) // 2] + lat[n // 2]) / 2, lat[max(0, math.ceil(0.99 * n) - 1)], lat[-1]))
' "$1"
}

check "merge through the daemon (fast: the hook is idle)"
run_cli merge
assert_ok merge
gen0=$(generation)

check "baseline: $N concurrent GetStatus with the daemon idle"
burst "$WORK/idle"
read -r idle_med idle_p99 idle_max <<<"$(stats "$WORK/idle")"
inproc_idle=$(python3 "$BUS_SRCDIR/test/bus/getstatus-burst.py" "$N") || fail "getstatus-burst.py failed"

check "a slow refresh --always-refresh=yes through the CLI, held before the swap"
touch "$WORK/slow"
env DBUS_SYSTEM_BUS_ADDRESS="$BUS_ADDR" "$SYSEXTD" --root="$R" --json refresh --always-refresh=yes \
	>"$WORK/refresh.out" 2>"$WORK/refresh.err" &
refresh_pid=$!
on_exit 'kill "$refresh_pid" 2>/dev/null; wait "$refresh_pid" 2>/dev/null'
for ((i = 0; i < 200; i++)); do
	[[ -e "$WORK/hook-start" ]] && break
	kill -0 "$refresh_pid" 2>/dev/null || fail "refresh ended before reaching the hook: $(cat "$WORK/refresh.err")"
	sleep 0.05
done
[[ -e "$WORK/hook-start" ]] || fail "the refresh did not reach the before-swap hook within 10 s"

check "$N concurrent GetStatus calls while the refresh runs"
burst "$WORK/busy"
[[ ! -e "$WORK/hook-end" ]] || fail "the hook gave up waiting (60 s) before the $N GetStatus calls were done"
kill -0 "$refresh_pid" 2>/dev/null || fail "the refresh client returned before the GetStatus calls did"

check "and $N concurrent GetStatus calls from one process (sd-bus, one connection each)"
inproc_busy=$(python3 "$BUS_SRCDIR/test/bus/getstatus-burst.py" "$N") || fail "getstatus-burst.py failed"

check "every call answered; each in-process call within ${LIMIT_MS} ms"
for ((i = 1; i <= N; i++)); do
	read -r rc s e <"$WORK/busy/$i.lat"
	[[ "$rc" == 0 ]] || fail "GetStatus call $i (busctl) failed (rc $rc): $(cat "$WORK/busy/$i.err")"
done
assert_eq "$(json_q "$inproc_busy" 'd["errors"]')" '[]' "errors of the in-process GetStatus calls"
assert_eq "$(json_q "$inproc_busy" 'all(x is not None and x <= '"$LIMIT_MS"' for x in d["latency_ms"])')" true \
	"every in-process GetStatus call answered within $LIMIT_MS ms ($(json_q "$inproc_busy" 'd["latency_ms"]'))"
read -r busy_med busy_p99 busy_max <<<"$(stats "$WORK/busy")"
hook_start=$(cat "$WORK/hook-start")
first_start=$(awk '{print $2}' "$WORK"/busy/*.lat | sort -n | head -n1)
echo "GetStatus latency, $N concurrent calls from one process, no process start (ms, median / p99 / max):"
echo "  daemon idle:             $(inproc_stats "$inproc_idle")"
echo "  during a held refresh:   $(inproc_stats "$inproc_busy")"
echo "GetStatus latency, $N concurrent busctl processes, start to exit (ms, median / p99 / max):"
echo "  daemon idle:             $idle_med / $idle_p99 / $idle_max"
echo "  during a held refresh:   $busy_med / $busy_p99 / $busy_max"
echo "  (calls started $(((first_start - hook_start) / 1000000)) ms after the refresh reached the hook)"

check "the properties read during the held refresh describe the live (old) tree"
merged_during=$(prop Merged)
extensions_during=$(prop Extensions)
[[ ! -e "$WORK/hook-end" ]] || fail "the hook gave up waiting before the properties were read"

check "the answers describe the live tree: the old generation, /usr and /opt merged with ext1, ext2"
# The old tree stays live until the swap, after the hook: a status that says
# "not merged" here is wrong (what a monitoring tool would see for the
# duration of every swap).
for ((i = 1; i <= N; i++)); do
	out=$(cat "$WORK/busy/$i.out")
	assert_eq "$(json_q "$out" 'd["type"]')" "sta(sbastb)a(ssss)sa(sssb)a(ssb)" "GetStatus $i reply type"
	assert_eq "$(json_q "$out" 'd["data"][1]')" "$gen0" "GetStatus $i generation during the refresh"
	assert_eq "$(json_q "$out" '[[h[0], h[1], h[2]] for h in d["data"][2]]')" \
		'[["/usr", true, ["ext1", "ext2"]], ["/opt", true, ["ext2"]], ["/etc", false, []]]' \
		"GetStatus $i hierarchies during the refresh (the old tree is still live)"
done
assert_eq "$(json_q "$inproc_busy" 'sorted(set(d["generations"]))')" "[$gen0]" "in-process GetStatus generations during the refresh"
assert_eq "$(json_q "$inproc_busy" 'all(m == [["/usr", True], ["/opt", True], ["/etc", False]] for m in d["merged"])')" true \
	"in-process GetStatus: /usr and /opt merged during the refresh ($(json_q "$inproc_busy" 'd["merged"][0]'))"
assert_eq "$merged_during" "b true" "Merged property during the refresh"
assert_eq "$extensions_during" 'as 2 "ext1" "ext2"' "Extensions property during the refresh"

check "released, the refresh completes: generation $((gen0 + 1))"
touch "$WORK/release"
rc=0
wait "$refresh_pid" || rc=$?
assert_eq "$rc" 0 "refresh rc ($(cat "$WORK/refresh.err"))"
assert_eq "$(json_q "$(cat "$WORK/refresh.out")" 'd')" "{\"generation\": $((gen0 + 1)), \"changed\": true}" "refresh reply"
assert_eq "$(generation)" $((gen0 + 1)) "Generation after the refresh"
rm -f "$WORK/slow" "$WORK/release"

echo "PASS"
