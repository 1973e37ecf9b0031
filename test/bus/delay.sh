#!/bin/bash
# Delayed updates through the daemon: Commit(), GetDelay() and the deadline timer.
#
# Two "service" namespaces, slaves of the throw-away root (made before the first merge), and
# readers in the root namespace and in each service that read usr and opt in a tight loop
# through all of it.  Extension "app" in three versions.
#   (a) refresh --delay=60 through the daemon: every namespace reads v1; status (through the
#       daemon, from GetDelay) lists the three namespaces on the old trees, with the deadline
#   (b) a cooperative service: a process in S1, running as nobody, calls Commit() with no
#       option: S1 reads v2, S2 and the root v1; again: nothing moved
#   (c) `sysextd commit --pid=S2` through the daemon: S2 reads v2, the root still v1
#   (d) refusals, each with nothing changed: Commit() from the daemon's own namespace with no
#       option; an unknown option; two options; a unit name with a slash; a process that does
#       not exist; "pid" and "all" from a caller other than root (no polkit on this bus)
#   (e) `sysextd commit` through the daemon: everyone reads v2, one overlay per hierarchy
#   (f) the deadline: refresh --delay=4 and nothing else: the daemon commits by itself; with
#       IdleTimeoutSec=1 it stays until then and exits after
#   (g) a private namespace that missed a (not delayed) refresh: status --namespaces through
#       the daemon (ListNamespaces()) lists it as in process; its own Commit() changes nothing
#       (a delayed transition only); commit --pid= through the daemon brings it up to date
# Readers never see the base or an error; each namespace reads v1, then v2, then v3.
set -euo pipefail
# shellcheck source=test/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=test/bus/lib-bus.sh
. "$(dirname "$0")/lib-bus.sh"
enter_sandbox "$@"
bus_requirements
require_cmd mkfs.erofs nsenter cc setpriv
require_fs erofs overlay
make_root
noidle_config
id nobody >/dev/null 2>&1 || skip "no user nobody"
getent group nogroup >/dev/null || skip "no group nogroup"

ext=$R/var/lib/extensions
file=usr/share/app/version
ofile=opt/app/version

cat >"$WORK/reader.c" <<'C'
/* reader FILE OUT STOPFILE: read FILE in a tight loop; on stop, write to OUT the sequence of
 * distinct contents seen ("v1 v2"), then the count of reads that were neither v1, v2 nor v3. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
        char buf[64], last[64] = "", seq[4096] = "";
        unsigned long bad = 0, n = 0;
        time_t end = time(NULL) + 280;
        FILE *out;

        if (argc != 4)
                return 2;
        for (;; n++) {
                int fd;
                ssize_t k;

                if ((n & 255) == 0 && (access(argv[3], F_OK) == 0 || time(NULL) >= end))
                        break;
                fd = open(argv[1], O_RDONLY | O_CLOEXEC);
                if (fd < 0) {
                        bad++;
                        continue;
                }
                k = read(fd, buf, sizeof(buf) - 1);
                close(fd);
                if (k <= 0) {
                        bad++;
                        continue;
                }
                buf[k] = 0;
                buf[strcspn(buf, "\n")] = 0;
                if (strcmp(buf, "v1") && strcmp(buf, "v2") && strcmp(buf, "v3")) {
                        bad++;
                        continue;
                }
                if (strcmp(buf, last)) {
                        snprintf(last, sizeof(last), "%s", buf);
                        if (strlen(seq) + strlen(buf) + 2 < sizeof(seq)) {
                                strcat(seq, seq[0] ? " " : "");
                                strcat(seq, buf);
                        }
                }
        }
        out = fopen(argv[2], "we");
        if (!out)
                return 1;
        fprintf(out, "%s|%lu\n", seq, bad);
        return fclose(out) == 0 ? 0 : 1;
}
C
cc -O2 -Wall -o "$WORK/reader" "$WORK/reader.c" || fail "cannot compile the reader"

mkdir -p "$R/usr/share/app" "$R/opt/app"
echo base >"$R/$file"
echo base >"$R/$ofile"
t=$(ext_tree app)
for v in v1 v2 v3; do
	ext_file "$t" "$file" "$v"
	ext_file "$t" "$ofile" "$v"
	mk_erofs "$t" "$WORK/$v.raw"
done
cp "$WORK/v1.raw" "$ext/app.raw"

pids=()
stop_all() {
	local p
	[[ -n "${WORK:-}" ]] && touch "$WORK/stop" 2>/dev/null
	for p in "${pids[@]}"; do
		kill "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	pids=()
}
on_exit stop_all

our_ns=$(readlink /proc/$$/ns/mnt)
wait_ns() {
	local i ns
	for ((i = 0; i < 100; i++)); do
		ns=$(readlink "/proc/$1/ns/mnt" 2>/dev/null || true)
		[[ -n "$ns" && "$ns" != "$our_ns" ]] && return 0
		sleep 0.05
	done
	fail "namespace of pid $1 did not come up"
}
svc=()
for i in 1 2; do
	unshare -m --propagation slave sleep 600 </dev/null >/dev/null 2>&1 &
	svc+=("$!")
	pids+=("$!")
	wait_ns "$!"
done
S1=${svc[0]} S2=${svc[1]}
log "service namespaces: S1 pid $S1, S2 pid $S2"

in_ns() { # PID|root CMD...
	if [[ $1 == root ]]; then "${@:2}"; else nsenter -t "$1" -m -- "${@:2}"; fi
}
shows() {
	echo "$(in_ns "$1" cat "$R/$file" 2>&1) $(in_ns "$1" cat "$R/$ofile" 2>&1)"
}
all_show() {
	echo "$(shows root)|$(shows "$S1")|$(shows "$S2")"
}
ours_in() {
	# shellcheck disable=SC2016 # awk's
	in_ns "$1" awk -v p="$2" '$5 == p {
		for (i = 7; $i != "-"; i++) ;
		if ($(i + 1) == "overlay" && $(i + 2) == "sysextd") n++
	} END { print n + 0 }' /proc/self/mountinfo
}
ns_of() {
	local p=$1
	[[ $p == root ]] && p=$$
	stat -L -c %i "/proc/$p/ns/mnt"
}
journal_delay() {
	python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
p = d.get("pending") or {}
print("delayed" if "delay_deadline" in p else "pending" if p else "none")
' "$R/run/sysextd/state.json"
}
# commit_in NS [setpriv...] — Commit() with no option, called by busctl in that namespace.
commit_in() {
	local ns=$1
	shift
	_capture nsenter -t "$ns" -m -- "$@" busctl --address="$BUS_ADDR" call org.sysextd1 /org/sysextd1 \
		org.sysextd1.Manager Commit 'a{sv}' 0
}

readers=()
start_readers() {
	local ns f
	rm -f "$WORK/stop" "$WORK"/seen.*
	readers=()
	for ns in root "$S1" "$S2"; do
		for f in "$file" "$ofile"; do
			in_ns "$ns" "$WORK/reader" "$R/$f" "$WORK/seen.$ns.${f//\//_}" "$WORK/stop" &
			readers+=("$!")
			pids+=("$!")
		done
	done
	sleep 0.2
}
declare -A READ
stop_readers() {
	local p ns f s
	touch "$WORK/stop"
	for p in "${readers[@]}"; do wait "$p" || fail "a reader failed"; done
	for ns in root "$S1" "$S2"; do
		READ[$ns]=
		for f in "$file" "$ofile"; do
			s=$(cat "$WORK/seen.$ns.${f//\//_}")
			[[ ${s#*|} == 0 ]] || fail "a reader in namespace $ns saw the base or an error at $f ${s#*|} times (saw: ${s%|*})"
			READ[$ns]+="${s%|*};"
		done
	done
}

start_bus "$NOIDLE_CONF"

run_cli merge
assert_ok merge
assert_eq "$(all_show)" "v1 v1|v1 v1|v1 v1" "after merge"
start_readers

# ------------------------------------------------------------ (a)
check "(a) refresh --delay=60 through the daemon: every namespace on v1"
replace_image "$WORK/v2.raw" "$ext/app.raw"
run_cli refresh --delay=60
assert_ok "refresh --delay=60"
assert_eq "$(all_show)" "v1 v1|v1 v1|v1 v1" "during the delay"
assert_eq "$(journal_delay)" delayed "state.json records the delay"
run_cli status --json
assert_ok "status --json through the daemon"
assert_eq "$(json_q "$OUT" 'sorted(x["namespace"] for x in d["delayed"]["old"]) == sorted(['"$(ns_of root),$(ns_of "$S1"),$(ns_of "$S2")"'])')" \
	true "status: every namespace on the old trees"
assert_eq "$(json_q "$OUT" 'd["delayed"]["deadline_usec"] - d["delayed"]["since_usec"]')" 60000000 "deadline 60 s after since"
assert_eq "$(json_q "$OUT" 'd["delayed"]["generation"]')" 2 "the delayed generation"
run_cli status
assert_contains "$OUT" "Delayed:" "the text status through the daemon says delayed"
run_bctl call org.sysextd1 /org/sysextd1 org.sysextd1.Manager GetDelay
assert_ok "GetDelay"
assert_contains "$OUT" "ttta(tis)a(tis) 2 " "GetDelay: generation 2"

# ------------------------------------------------------------ (b)
check "(b) a cooperative service commits its own namespace, as nobody"
commit_in "$S1" setpriv --reuid=nobody --regid=nogroup --clear-groups --
assert_ok "Commit() from S1 as nobody"
assert_contains "$OUT" "tba(us) 1 true" "Commit() says a namespace moved (the host still on generation 1)"
assert_eq "$(all_show)" "v1 v1|v2 v2|v1 v1" "after S1's commit"
assert_eq "$(ours_in "$S1" "$R/usr") $(ours_in "$S1" "$R/opt")" "1 1" "one overlay each in S1"
assert_eq "$(ours_in root "$R/usr") $(ours_in root "$R/opt")" "2 2" "two in the root namespace"
run_cli status --json
assert_eq "$(json_q "$OUT" "$(ns_of "$S1") in [x['namespace'] for x in d['delayed']['new']]")" true "status: S1 on the new trees"
commit_in "$S1"
assert_ok "Commit() from S1 again"
assert_contains "$OUT" "tba(us) 1 false" "nothing moved the second time"
assert_eq "$(all_show)" "v1 v1|v2 v2|v1 v1" "after S1's second commit"

# ------------------------------------------------------------ (c)
check "(c) commit --pid=S2 through the daemon"
run_cli commit --pid="$S2"
assert_ok "commit --pid=S2"
assert_eq "$(all_show)" "v1 v1|v2 v2|v2 v2" "after commit --pid=S2"
assert_eq "$(journal_delay)" delayed "still delayed for the root namespace"

# ------------------------------------------------------------ (d)
check "(d) refusals change nothing"
before=$(all_show)
run_bctl call org.sysextd1 /org/sysextd1 org.sysextd1.Manager Commit 'a{sv}' 0
assert_failed "Commit() from the daemon's own namespace"
assert_contains "$ERR" "own mount namespace" "names the reason"
assert_contains "$ERR" "option all" "says what to do"
run_bctl call org.sysextd1 /org/sysextd1 org.sysextd1.Manager Commit 'a{sv}' 1 force b true
assert_failed "Commit with an unknown option"
assert_contains "$ERR" "Unknown option 'force' of Commit" "names the option"
run_bctl call org.sysextd1 /org/sysextd1 org.sysextd1.Manager Commit 'a{sv}' 2 all b true pid u "$S1"
assert_failed "Commit with two options"
assert_contains "$ERR" "one of the options" "says one"
run_bctl call org.sysextd1 /org/sysextd1 org.sysextd1.Manager Commit 'a{sv}' 1 unit s "../x.service"
assert_failed "Commit with a unit name with a slash"
assert_contains "$ERR" "is a unit name" "says why"
run_bctl call org.sysextd1 /org/sysextd1 org.sysextd1.Manager Commit 'a{sv}' 1 pid s "$S1"
assert_failed "Commit with pid of the wrong type"
assert_contains "$ERR" "takes type 'u'" "says the type"
dead=$( (sleep 0 & echo $!) )
sleep 0.1
run_cli commit --pid="$dead"
assert_failed "commit --pid of a process that does not exist"
assert_contains "$ERR" "No such process: $dead" "names the PID"
run_bctl --unpriv call org.sysextd1 /org/sysextd1 org.sysextd1.Manager Commit 'a{sv}' 1 all b true
assert_failed "Commit all as nobody"
assert_contains "$ERR" "polkit" "refused: only root without polkit"
run_bctl --unpriv call org.sysextd1 /org/sysextd1 org.sysextd1.Manager Commit 'a{sv}' 1 pid u "$S2"
assert_failed "Commit pid as nobody"
assert_eq "$(all_show)" "$before" "nothing changed by the refusals"
assert_eq "$(journal_delay)" delayed "still delayed"

# ------------------------------------------------------------ (e)
check "(e) commit through the daemon: everyone"
run_cli --json commit
assert_ok "commit"
assert_eq "$(json_q "$OUT" 'd["changed"]')" true "the reply says it moved"
assert_eq "$(all_show)" "v2 v2|v2 v2|v2 v2" "after commit"
for ns in root "$S1" "$S2"; do
	assert_eq "$(ours_in "$ns" "$R/usr") $(ours_in "$ns" "$R/opt")" "1 1" "one overlay each in namespace $ns"
done
assert_eq "$(journal_delay)" none "no pending record"
run_cli --json commit
assert_ok "commit with nothing delayed"
assert_eq "$(json_q "$OUT" 'd["changed"]')" false "nothing moved"
assert_contains "$ERR" "nothing to commit" "says so"
run_bctl call org.sysextd1 /org/sysextd1 org.sysextd1.Manager GetDelay
assert_eq "$OUT" "ttta(tis)a(tis) 0 0 0 0 0" "GetDelay: nothing delayed"

# ------------------------------------------------------------ (f)
check "(f) the deadline: the daemon commits by itself, and stays until then"
printf '[Daemon]\nIdleTimeoutSec=1\n' >"$WORK/idle.conf"
stop_bus
start_bus "$WORK/idle.conf"
replace_image "$WORK/v3.raw" "$ext/app.raw"
run_cli refresh --delay=4
assert_ok "refresh --delay=4"
dpid=$(daemon_pid)
[[ -n "$dpid" ]] || fail "no daemon after the refresh"
assert_eq "$(all_show)" "v2 v2|v2 v2|v2 v2" "during the short delay"
sleep 2.5
assert_eq "$(daemon_pid)" "$dpid" "the daemon stays while the transition is delayed (idle timeout 1 s)"
for ((i = 0; i < 100; i++)); do
	[[ "$(journal_delay)" == none ]] && break
	sleep 0.1
done
assert_eq "$(journal_delay)" none "the daemon committed at the deadline"
assert_eq "$(all_show)" "v3 v3|v3 v3|v3 v3" "after the deadline"
for ns in root "$S1" "$S2"; do
	assert_eq "$(ours_in "$ns" "$R/usr") $(ours_in "$ns" "$R/opt")" "1 1" "one overlay each in namespace $ns after the deadline"
done
wait_daemon_gone 20 || fail "the daemon did not exit when idle after the deadline"
grep -q "The delay of the pending transition has ended" "$BUS_LOG" || fail "the daemon's log does not say the delay ended:
$(bus_log)"

stop_readers
assert_eq "${READ[root]}" "v1 v2 v3;v1 v2 v3;" "the root namespace read v1, v2, v3"
assert_eq "${READ[$S1]}" "v1 v2 v3;v1 v2 v3;" "S1 read v1, v2, v3"
assert_eq "${READ[$S2]}" "v1 v2 v3;v1 v2 v3;" "S2 read v1, v2, v3"

# ------------------------------------------------------------ (g)
check "(g) a namespace that missed a swap: ListNamespaces(), Commit() of its own changes nothing, commit --pid brings it up"
unshare -m --propagation private sleep 600 </dev/null >/dev/null 2>&1 &
P=$!
pids+=("$P")
wait_ns "$P"
replace_image "$WORK/v1.raw" "$ext/app.raw"
run_cli refresh
assert_ok "refresh to v1 (not delayed)"
assert_eq "$(shows root) $(shows "$P")" "v1 v1 v3 v3" "the private namespace keeps v3"
run_cli --json status --namespaces
assert_ok "status --namespaces through the daemon"
assert_eq "$(json_q "$OUT" '[[h["hierarchy"] + ":" + h["shows"] for h in x["hierarchies"] if h["hierarchy"] != "etc"] for x in d if x["namespace"] == '"$(ns_of "$P")"']')" \
	'[["usr:older", "opt:older"]]' "ListNamespaces: the private namespace on an older tree"
bus_ns=$(json_q "$OUT" '[x["namespace"] for x in d]')
run_sysextd --json status --namespaces
assert_ok "status --namespaces --no-bus"
assert_eq "$(json_q "$OUT" '[x["namespace"] for x in d]')" "$bus_ns" "the same namespaces through the daemon and in process"
commit_in "$P" setpriv --reuid=nobody --regid=nogroup --clear-groups --
assert_ok "Commit() from the private namespace, nothing delayed"
assert_contains "$OUT" "tba(us) 4 false" "nothing moved"
assert_eq "$(shows "$P")" "v3 v3" "Commit() of its own namespace does not bring it up to date unasked"
run_cli commit --pid="$P"
assert_ok "commit --pid=P through the daemon"
assert_eq "$(shows "$P")" "v1 v1" "commit --pid brought it up to date"
assert_eq "$(ours_in "$P" "$R/usr") $(ours_in "$P" "$R/opt")" "1 1" "one overlay each there"
run_cli --json status --namespaces
assert_eq "$(json_q "$OUT" "$(ns_of "$P") in [x['namespace'] for x in d]")" false "no longer listed"

run_cli unmerge
assert_ok unmerge
echo "PASS"
