#!/bin/bash
# The daemon under hostile names, unprivileged floods, signals and idle exit (issue 11,
# sections 4 and 6):
#  (a) an image whose file name, or whose reason to be skipped, is not valid UTF-8: Merge,
#      ListImages and GetStatus are answered (for root and for nobody), with the strings escaped;
#  (b) 60 parallel ListImages from nobody: at most one listing runs, every caller gets the
#      answer, loop devices stay bounded; a repeated call is answered from the last listing;
#  (c) a transition result with hundreds of images (the image cache handed over) arrives;
#  (d) SIGTERM during a transition: it finishes, its caller gets the answer, queued callers
#      are told the daemon is going, then the daemon exits;
#  (e) idle exit: calls that arrive while the name is being given back are all answered.
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
ext=$R/var/lib/extensions

# ---------------------------------------------------------------- (a)
check "(a) a file name and a reason that are not valid UTF-8"
bad=$(printf 'bad\xffname')
t=$(ext_tree "$bad")
ext_file "$t" "usr/share/bad/file" bad
mk_erofs "$t" "$ext/$bad.raw"
t=$(EXT_RELEASE=$(printf 'ID=\xfe\xfe') ext_tree weirdid)
mk_erofs "$t" "$ext/weirdid.raw"
start_bus "$NOIDLE_CONF"
run_cli merge
assert_ok "Merge through the daemon with badly named images"
assert_file_content "$R/usr/share/ext1/hello" "hello from ext1"
run_bctl call org.sysextd1 /org/sysextd1 org.sysextd1.Manager ListImages
assert_ok "ListImages"
assert_contains "$OUT" 'bad\\xffname' "the escaped name"
for who in "" --unpriv; do
	run_bctl $who call org.sysextd1 /org/sysextd1 org.sysextd1.Manager GetStatus
	assert_ok "GetStatus ${who:-as root}"
	assert_contains "$OUT" 'xfe' "the escaped reason in GetStatus"
done
run_cli status
assert_ok "status"
run_cli unmerge
assert_ok unmerge
rm -f "$ext/$bad.raw" "$ext/weirdid.raw"

# ---------------------------------------------------------------- (b)
check "(b) 60 parallel ListImages from nobody, over 302 images, each listing held for 3 s"
mkdir -p "$WORK/many"
for i in $(seq -w 300); do
	t=$(ext_tree "m$i" "$WORK/many/m$i")
	ext_file "$t" "usr/share/many/m$i" "m$i"
	mk_erofs "$t" "$ext/m$i.raw"
done

stop_bus
start_bus "$NOIDLE_CONF" SYSEXTD_TEST_HOOK=list-probed SYSEXTD_TEST_HOOK_EXEC="sleep 3"
loops_before=$(loop_count)
sample() {
	local max_workers=0 max_loops=0 n l
	while [[ ! -e "$WORK/burst-done" ]]; do
		n=$(_our_daemons | wc -l)
		l=$(loop_count)
		((n > max_workers)) && max_workers=$n
		((l > max_loops)) && max_loops=$l
		sleep 0.02
	done
	echo "$max_workers $max_loops" >"$WORK/burst-max"
}
sample &
sampler=$!
pids=()
for i in $(seq 60); do
	as_nobody busctl --address="$BUS_ADDR" call org.sysextd1 /org/sysextd1 org.sysextd1.Manager ListImages \
		>"$WORK/list.$i" 2>&1 &
	pids+=($!)
done
failed=0
for p in "${pids[@]}"; do wait "$p" || failed=$((failed + 1)); done
touch "$WORK/burst-done"
wait "$sampler"
read -r max_workers max_loops <"$WORK/burst-max"
log "during the burst: at most $max_workers daemon processes, $max_loops loop devices of this test"
assert_eq "$failed" 0 "ListImages calls that failed"
for i in $(seq 60); do
	assert_contains "$(cat "$WORK/list.$i")" '"m300" "erofs"' "answer $i"
done
((max_workers <= 2)) || fail "$max_workers daemon processes at once (the daemon and one listing at most)"
((max_loops <= loops_before + 302)) || fail "$max_loops loop devices during the burst (302 images, one listing)"
((max_workers == 2)) || fail "no listing was seen running during the burst ($max_workers daemon processes)"
check "(b) a repeated listing is answered without a new worker (at once, not after the held 3 s)"
start=$SECONDS
run_bctl call org.sysextd1 /org/sysextd1 org.sysextd1.Manager ListImages
assert_ok "ListImages"
((SECONDS - start < 2)) || fail "the repeated listing was not answered from the last one"
stop_bus
start_bus "$NOIDLE_CONF"

# ---------------------------------------------------------------- (c)
check "(c) 302 images through the daemon"
run_cli merge
assert_ok "merge of 302 images through the daemon"
assert_file_content "$R/usr/share/many/m300" m300
run_cli --always-refresh=yes refresh
assert_ok "refresh --always-refresh=yes of 302 images (the cache of the first one handed over)"
assert_file_content "$R/usr/share/many/m001" m001
run_cli unmerge
assert_ok unmerge
rm -f "$ext"/m*.raw
stop_bus

# ---------------------------------------------------------------- (d)
check "(d) SIGTERM during a transition: it finishes and is answered, the queue is told, the daemon goes"
start_bus "$NOIDLE_CONF" SYSEXTD_TEST_HOOK=before-swap \
	"SYSEXTD_TEST_HOOK_EXEC=touch '$WORK/at-hook'; sleep 3"
rm -f "$WORK/at-hook"
run_cli merge >/dev/null 2>&1 &
merge_pid=$!
for _ in $(seq 100); do [[ -e "$WORK/at-hook" ]] && break; sleep 0.1; done
[[ -e "$WORK/at-hook" ]] || fail "the merge did not reach the hook"
( run_cli --always-refresh=yes refresh; echo "$RC|$ERR" >"$WORK/queued" ) &
queued_pid=$!
sleep 0.5
dpid=$(daemon_pid)
[[ -n "$dpid" ]] || fail "no daemon"
kill -TERM "$dpid"
wait "$merge_pid" || true
wait "$queued_pid" || true
assert_file_content "$R/usr/share/ext1/hello" "hello from ext1"
assert_contains "$(cat "$WORK/queued")" "shutting down" "the queued caller"
wait_daemon_gone 15 || fail "the daemon did not exit after the transition"
run_cli status
assert_ok "status (a new daemon)"
assert_contains "$OUT" "ext1" "status after the restart"
stop_bus

# ---------------------------------------------------------------- (e)
check "(e) calls while the name is given back at idle are answered"
printf '[Daemon]\nIdleTimeoutSec=1\n' >"$WORK/idle.conf"
start_bus "$WORK/idle.conf" SYSEXTD_TEST_HOOK=daemon-releasing \
	"SYSEXTD_TEST_HOOK_EXEC=touch '$WORK/releasing'; sleep 2"
rm -f "$WORK/releasing"
run_cli status
assert_ok "status activates the daemon"
for _ in $(seq 100); do [[ -e "$WORK/releasing" ]] && break; sleep 0.1; done
[[ -e "$WORK/releasing" ]] || fail "the daemon did not go idle"
pids=()
for i in $(seq 5); do
	busctl --address="$BUS_ADDR" call org.sysextd1 /org/sysextd1 org.sysextd1.Manager GetStatus >"$WORK/idle.$i" 2>&1 &
	pids+=($!)
done
failed=0
for p in "${pids[@]}"; do wait "$p" || failed=$((failed + 1)); done
assert_eq "$failed" 0 "calls that failed while the name was given back"
for i in $(seq 5); do
	assert_contains "$(cat "$WORK/idle.$i")" "sta(sbastb)" "answer $i"
done
run_cli unmerge
assert_ok unmerge
echo PASS
