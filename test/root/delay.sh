#!/bin/bash
# Delayed, cooperative updates (issue 17, section 2).
#
# Two "service" namespaces, slaves of the throw-away root, made before the first
# merge; readers in the root namespace and in each service read usr and opt in a
# tight loop during all of it. Extension "app" in three versions.
#   (a) refresh --delay=60: the new trees wait beneath the old tops everywhere:
#       every namespace still reads v1, two sysextd overlays per hierarchy, no
#       more; status lists every namespace on the old trees; state.json has the
#       delay; a second status before the deadline does not commit.
#   (b) commit --pid=S1: S1 reads v2, S2 and the root v1; again: nothing to do.
#   (c) S2 drops its old tops itself (umount -l in its namespace): S2 reads v2,
#       status sees it on the new trees; commit --pid=S2: nothing to do.
#   (d) commit: the root reads v2, one overlay per hierarchy everywhere; status
#       has no delay; commit again: nothing to commit.
#   (e) the deadline: refresh --delay=2, 3 s later status commits it.
#   (f) a new transition while one is delayed commits the delayed one first.
#   (g) a delayed unmerge: the extension stays until committed, per namespace.
#   (h) crash during a delay (test hook after the swap; and a kill before the
#       swap): the state on disk keeps it delayed, a status before the deadline
#       does not commit it; one killed before anything was placed is discarded.
#   (i) refusals, each with one line and nothing changed: --delay with
#       --mutable=yes, a delayed refresh of a writable tree, --delay=junk,
#       --delay with status, --pid= without commit, commit of a process that
#       does not exist or whose namespace does not show our trees.
#   (j) commit --pid of a process in sysextd's own namespace is a full commit;
#       --unit= (when this machine lets the test make a cgroup).
# Readers never see the base or an error while extensions are merged.
set -euo pipefail
# shellcheck source=test/lib.sh
. "$(dirname "$0")/../lib.sh"
enter_sandbox "$@"
require_cmd mkfs.erofs nsenter cc timeout
require_fs erofs overlay
make_root

ext=$R/var/lib/extensions
file=usr/share/app/version
ofile=opt/app/version

# ------------------------------------------------------------ the reader
cat >"$WORK/reader.c" <<'C'
/* reader FILE OUT STOPFILE: read FILE in a tight loop; on stop, write to OUT
 * the sequence of distinct contents seen ("v1 v2"), then the count of reads
 * that were neither v1, v2 nor v3 (base, errors). */
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

# ------------------------------------------------------------ images
mkdir -p "$R/usr/share/app"
echo base >"$R/$file"
echo base >"$R/$ofile"
t=$(ext_tree app)
for v in v1 v2 v3; do
	ext_file "$t" "$file" "$v"
	ext_file "$t" "$ofile" "$v"
	mk_erofs "$t" "$WORK/$v.raw"
done
cp "$WORK/v1.raw" "$ext/app.raw"
loops_before=$(loop_snapshot)

# ------------------------------------------------------------ namespaces
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
# shows NS — "USR OPT" as read in that namespace
shows() {
	echo "$(in_ns "$1" cat "$R/$file" 2>&1) $(in_ns "$1" cat "$R/$ofile" 2>&1)"
}
# all_show — "ROOT|S1|S2"
all_show() {
	echo "$(shows root)|$(shows "$S1")|$(shows "$S2")"
}
# ours_in NS PATH — sysextd overlays at PATH in that namespace
ours_in() {
	# shellcheck disable=SC2016 # awk's
	in_ns "$1" awk -v p="$2" '$5 == p {
		for (i = 7; $i != "-"; i++) ;
		if ($(i + 1) == "overlay" && $(i + 2) == "sysextd") n++
	} END { print n + 0 }' /proc/self/mountinfo
}
ns_of() { # PID|root — the mount namespace's inode
	local p=$1
	[[ $p == root ]] && p=$$
	stat -L -c %i "/proc/$p/ns/mnt"
}
# delayed_where NS — "old", "new" or "none": where status puts that namespace
delayed_where() {
	run_sysextd status --json >/dev/null
	assert_ok status
	json_q "$OUT" "'old' if $(ns_of "$1") in [x['namespace'] for x in d.get('delayed', {}).get('old', [])] else 'new' if $(ns_of "$1") in [x['namespace'] for x in d.get('delayed', {}).get('new', [])] else 'none'"
}
journal_delay() {
	python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
p = d.get("pending") or {}
print("delayed" if "delay_deadline" in p else "pending" if p else "none")
' "$R/run/sysextd/state.json"
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
# stop_readers — READ["NS"]="usr-sequence opt-sequence" checked for no bad reads
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

# ------------------------------------------------------------ (a)
run_sysextd merge
assert_ok merge
assert_eq "$(all_show)" "v1 v1|v1 v1|v1 v1" "after merge"

start_readers
check "(a) refresh --delay=60: the new trees wait beneath, every namespace on v1"
replace_image "$WORK/v2.raw" "$ext/app.raw"
run_sysextd refresh --delay=60 --json
assert_ok "refresh --delay=60"
assert_eq "$(json_q "$OUT" 'd.get("delayed")')" true "the reply says delayed"
assert_contains "$ERR" "delayed until" "the log says until when"
assert_eq "$(all_show)" "v1 v1|v1 v1|v1 v1" "during the delay"
for ns in root "$S1" "$S2"; do
	assert_eq "$(ours_in "$ns" "$R/usr") $(ours_in "$ns" "$R/opt")" "2 2" "overlays in namespace $ns during the delay"
done
assert_eq "$(journal_delay)" delayed "state.json records the delay"
run_sysextd status --json
assert_ok status
assert_eq "$(json_q "$OUT" 'sorted(x["namespace"] for x in d["delayed"]["old"]) == sorted(['"$(ns_of root),$(ns_of "$S1"),$(ns_of "$S2")"'])')" \
	true "status: every namespace on the old trees"
assert_eq "$(json_q "$OUT" 'len(d["delayed"]["new"])')" 0 "status: none on the new"
assert_eq "$(json_q "$OUT" 'd["delayed"]["deadline_usec"] - d["delayed"]["since_usec"]')" 60000000 "deadline 60 s after since"
assert_eq "$(json_q "$OUT" '[x["pid"] for x in d["delayed"]["old"] if x["namespace"] == '"$(ns_of "$S1")"'][0]')" "$S1" "status names S1 by its first process"
run_sysextd status
assert_ok "status (text)"
assert_contains "$OUT" "Delayed:" "the text status says delayed"
assert_eq "$(all_show)" "v1 v1|v1 v1|v1 v1" "status before the deadline did not commit"
assert_eq "$(journal_delay)" delayed "still delayed after status"

# ------------------------------------------------------------ (b)
check "(b) commit --pid=S1: only S1 moves"
run_sysextd commit --pid="$S1"
assert_ok "commit --pid=S1"
assert_eq "$(all_show)" "v1 v1|v2 v2|v1 v1" "after commit --pid=S1"
assert_eq "$(ours_in "$S1" "$R/usr") $(ours_in "$S1" "$R/opt")" "1 1" "one overlay each in S1"
assert_eq "$(ours_in root "$R/usr") $(ours_in root "$R/opt")" "2 2" "two in the root namespace"
assert_eq "$(delayed_where "$S1")" new "status: S1 on the new trees"
assert_eq "$(delayed_where root)" old "status: the root namespace on the old trees"
run_sysextd commit --pid="$S1"
assert_ok "commit --pid=S1 again"
assert_contains "$ERR" "already shows the new trees" "nothing to do"
assert_eq "$(all_show)" "v1 v1|v2 v2|v1 v1" "after commit --pid=S1 again"

# ------------------------------------------------------------ (c)
check "(c) S2 drops its old tops itself"
in_ns "$S2" umount -l "$R/usr"
in_ns "$S2" umount -l "$R/opt"
assert_eq "$(all_show)" "v1 v1|v2 v2|v2 v2" "after umount -l in S2"
assert_eq "$(delayed_where "$S2")" new "status: S2 on the new trees"
run_sysextd commit --pid="$S2"
assert_ok "commit --pid=S2"
assert_contains "$ERR" "already shows the new trees" "nothing to do in S2"

# ------------------------------------------------------------ (d)
check "(d) commit: the root namespace and everyone left"
run_sysextd commit
assert_ok commit
assert_eq "$(all_show)" "v2 v2|v2 v2|v2 v2" "after commit"
for ns in root "$S1" "$S2"; do
	assert_eq "$(ours_in "$ns" "$R/usr") $(ours_in "$ns" "$R/opt")" "1 1" "one overlay each in namespace $ns"
done
assert_eq "$(journal_delay)" none "no pending record"
run_sysextd status --json
assert_eq "$(json_q "$OUT" '"delayed" in d')" false "status: no delay"
assert_eq "$(json_q "$OUT" 'd["generation"]')" 2 "generation"
run_sysextd commit
assert_ok "commit with nothing delayed"
assert_contains "$ERR" "nothing to commit" "says so"
stop_readers
assert_eq "${READ[root]}" "v1 v2;v1 v2;" "the root namespace read v1, then v2"
assert_eq "${READ[$S1]}" "v1 v2;v1 v2;" "S1 read v1, then v2"
assert_eq "${READ[$S2]}" "v1 v2;v1 v2;" "S2 read v1, then v2"

# ------------------------------------------------------------ (e)
start_readers
check "(e) the deadline: a status after it commits"
replace_image "$WORK/v3.raw" "$ext/app.raw"
run_sysextd refresh --delay=2
assert_ok "refresh --delay=2"
assert_eq "$(all_show)" "v2 v2|v2 v2|v2 v2" "during the short delay"
sleep 3
assert_eq "$(all_show)" "v2 v2|v2 v2|v2 v2" "the deadline passed, nobody ran sysextd"
run_sysextd status --json
assert_ok "status after the deadline"
assert_contains "$ERR" "has ended; committed it" "status says it committed"
assert_eq "$(json_q "$OUT" '"delayed" in d')" false "status: no delay"
assert_eq "$(all_show)" "v3 v3|v3 v3|v3 v3" "after the deadline"
for ns in root "$S1" "$S2"; do
	assert_eq "$(ours_in "$ns" "$R/usr") $(ours_in "$ns" "$R/opt")" "1 1" "one overlay each in namespace $ns"
done

# ------------------------------------------------------------ (f)
check "(f) a new transition commits the delayed one first"
replace_image "$WORK/v1.raw" "$ext/app.raw"
run_sysextd refresh --delay=60
assert_ok "refresh --delay=60 to v1"
run_sysextd commit --pid="$S1"
assert_ok "commit --pid=S1"
assert_eq "$(all_show)" "v3 v3|v1 v1|v3 v3" "S1 on v1"
replace_image "$WORK/v2.raw" "$ext/app.raw"
run_sysextd refresh
assert_ok "refresh while delayed"
assert_contains "$ERR" "Committed the delayed transition of generation" "says it committed first"
assert_contains "$ERR" "first." "says first"
assert_eq "$(all_show)" "v2 v2|v2 v2|v2 v2" "after the refresh"
for ns in root "$S1" "$S2"; do
	assert_eq "$(ours_in "$ns" "$R/usr") $(ours_in "$ns" "$R/opt")" "1 1" "one overlay each in namespace $ns"
done
check "(f) a delayed refresh over a delayed refresh: at most two trees of ours"
replace_image "$WORK/v3.raw" "$ext/app.raw"
run_sysextd refresh --delay=60
assert_ok "refresh --delay=60 to v3"
replace_image "$WORK/v1.raw" "$ext/app.raw"
run_sysextd refresh --delay=60
assert_ok "refresh --delay=60 to v1 while delayed"
assert_contains "$ERR" "first." "the first delay committed first"
assert_eq "$(all_show)" "v3 v3|v3 v3|v3 v3" "on v3, v1 waits beneath"
for ns in root "$S1" "$S2"; do
	assert_eq "$(ours_in "$ns" "$R/usr") $(ours_in "$ns" "$R/opt")" "2 2" "two overlays each in namespace $ns"
done
run_sysextd commit
assert_ok commit
assert_eq "$(all_show)" "v1 v1|v1 v1|v1 v1" "after commit"
stop_readers
# The v1 committed first in (f) lasts only until the refresh after it swaps in v2: each
# reader (one per file) may or may not catch it.
for ns in root "$S1" "$S2"; do
	IFS=';' read -r -a seqs <<<"${READ[$ns]}"
	for seq in "${seqs[@]}"; do
		[[ $seq == "v2 v3 v1 v2 v3 v1" || $seq == "v2 v3 v2 v3 v1" ]] || fail "namespace $ns read ${READ[$ns]}"
	done
done

# ------------------------------------------------------------ (g)
check "(g) a delayed unmerge"
run_sysextd unmerge --delay=60
assert_ok "unmerge --delay=60"
assert_eq "$(all_show)" "v1 v1|v1 v1|v1 v1" "the extension stays during the delay"
run_sysextd commit --pid="$S2"
assert_ok "commit --pid=S2"
assert_eq "$(all_show)" "v1 v1|v1 v1|base base" "S2 on the base"
run_sysextd commit
assert_ok commit
assert_eq "$(all_show)" "base base|base base|base base" "after commit"
for ns in root "$S1" "$S2"; do
	assert_eq "$(ours_in "$ns" "$R/usr") $(ours_in "$ns" "$R/opt")" "0 0" "no overlay in namespace $ns"
done
check "(g) a delayed merge with nothing merged is a merge"
run_sysextd merge --delay=60 --json
assert_ok "merge --delay=60"
assert_eq "$(json_q "$OUT" 'd.get("delayed", False)')" false "not delayed: nothing to wait for"
assert_eq "$(all_show)" "v1 v1|v1 v1|v1 v1" "merged at once"
assert_eq "$(journal_delay)" none "no pending record"

# ------------------------------------------------------------ (h)
check "(h) crash during a delay: it stays delayed"
if "$SYSEXTD" --version | grep -q +test-hooks; then
	replace_image "$WORK/v2.raw" "$ext/app.raw"
	SYSEXTD_TEST_HOOK=after-swap run_sysextd refresh --delay=60
	assert_failed "refresh killed after the swap"
	assert_eq "$(journal_delay)" delayed "state.json keeps the delay"
	assert_eq "$(all_show)" "v1 v1|v1 v1|v1 v1" "everyone on v1"
	run_sysextd status --json
	assert_ok "status after the crash"
	assert_eq "$(json_q "$OUT" '"delayed" in d')" true "status: still delayed"
	assert_eq "$(all_show)" "v1 v1|v1 v1|v1 v1" "status did not commit"
	assert_eq "$(ours_in root "$R/usr") $(ours_in root "$R/opt")" "2 2" "two overlays each"
	run_sysextd commit --pid="$S1"
	assert_ok "commit --pid=S1 after the crash"
	assert_eq "$(all_show)" "v1 v1|v2 v2|v1 v1" "S1 on v2"
	run_sysextd commit
	assert_ok commit
	assert_eq "$(all_show)" "v2 v2|v2 v2|v2 v2" "after commit"

	check "(h) crash before the swap of a delayed refresh: discarded"
	replace_image "$WORK/v3.raw" "$ext/app.raw"
	SYSEXTD_TEST_HOOK=before-swap run_sysextd refresh --delay=60
	assert_failed "refresh killed before the swap"
	run_sysextd status
	assert_ok status
	assert_eq "$(journal_delay)" none "the record is discarded"
	assert_eq "$(all_show)" "v2 v2|v2 v2|v2 v2" "still v2"
	assert_eq "$(ours_in root "$R/usr") $(ours_in root "$R/opt")" "1 1" "one overlay each"
else
	log "(h) with hooks skipped: $SYSEXTD was built without -Dtest-hooks=true"
	replace_image "$WORK/v2.raw" "$ext/app.raw"
	run_sysextd refresh
	assert_ok refresh
fi
check "(h) killed after a delayed refresh returned: the state on disk keeps it delayed"
replace_image "$WORK/v3.raw" "$ext/app.raw"
run_sysextd refresh --delay=60
assert_ok "refresh --delay=60"
cp "$R/run/sysextd/state.json" "$WORK/state.delayed"
run_sysextd status
run_sysextd status
assert_eq "$(journal_delay)" delayed "two statuses later: still delayed"
assert_eq "$(all_show)" "v2 v2|v2 v2|v2 v2" "still v2"
run_sysextd commit
assert_ok commit
assert_eq "$(all_show)" "v3 v3|v3 v3|v3 v3" "after commit"

# ------------------------------------------------------------ (i)
refused() { # WHAT — the last run failed with one line and changed nothing
	assert_failed "$1"
	assert_eq "$(wc -l <<<"$ERR")" 1 "$1: one line on stderr"
	assert_eq "$(mountinfo_under "$R")" "$before" "$1: the mount table is as before"
}
check "(i) refusals"
before=$(mountinfo_under "$R")
replace_image "$WORK/v1.raw" "$ext/app.raw"
run_sysextd refresh --delay=60 --mutable=yes
refused "--delay with --mutable=yes"
assert_contains "$ERR" "$R/usr" "names the hierarchy"
assert_contains "$ERR" "writable" "says why"
assert_eq "$(journal_delay)" none "no pending record"
[[ ! -e "$R/var/lib/extensions.mutable" ]] || fail "the refusal created the mutable directory"
run_sysextd refresh --delay=junk
refused "--delay=junk"
run_sysextd refresh --delay=-5
refused "--delay=-5"
run_sysextd status --delay=5
refused "--delay with status"
run_sysextd refresh --pid=1
refused "--pid= with refresh"
run_sysextd commit --pid="$S1" --unit=x.service
refused "--pid= and --unit="
run_sysextd refresh --delay=60
assert_ok "refresh --delay=60"
before=$(mountinfo_under "$R")
sleep 100 &
dead=$!
kill "$dead"
wait "$dead" 2>/dev/null || true
run_sysextd commit --pid="$dead"
refused "commit of a process that is gone"
assert_contains "$ERR" "No such process" "says so"
# PID 1 is outside the sandbox: its namespace does not show our trees.
run_sysextd commit --pid=1
refused "commit of a namespace without our trees"
assert_eq "$(journal_delay)" delayed "still delayed"
run_sysextd commit --unit=sysextd-test-no-such.service
refused "commit of a unit without processes"
assert_eq "$(all_show)" "v3 v3|v3 v3|v3 v3" "nobody moved"
run_sysextd commit
assert_ok commit
assert_eq "$(all_show)" "v1 v1|v1 v1|v1 v1" "after commit"
check "(i) a writable tree cannot be delayed"
run_sysextd unmerge
assert_ok unmerge
run_sysextd merge --mutable=yes
assert_ok "merge --mutable=yes"
before=$(mountinfo_under "$R")
run_sysextd refresh --delay=60 --mutable=no --always-refresh=yes
refused "a delayed refresh of a writable tree"
assert_contains "$ERR" "writable" "says why"
run_sysextd unmerge --delay=60
refused "a delayed unmerge of a writable tree"
run_sysextd unmerge
assert_ok "unmerge of the writable tree"
run_sysextd merge
assert_ok merge

# ------------------------------------------------------------ (j)
check "(j) commit --pid of a process in sysextd's own namespace commits everywhere"
replace_image "$WORK/v2.raw" "$ext/app.raw"
run_sysextd refresh --delay=60
assert_ok "refresh --delay=60"
sleep 100 &
own=$!
pids+=("$own")
run_sysextd commit --pid="$own"
assert_ok "commit --pid= of our own namespace"
assert_eq "$(all_show)" "v2 v2|v2 v2|v2 v2" "everyone on v2"
assert_eq "$(journal_delay)" none "no pending record"

check "(j) commit --unit="
cg=$(awk -F: '$1 == "0" { print $3 }' /proc/self/cgroup)
unitdir=/sys/fs/cgroup${cg%/}/sysextd-test-$$.service
# Only on a unified cgroup file system: elsewhere (a tmpfs with v1 hierarchies below) mkdir and
# the write would only make a directory and a file there.
if [[ $(stat -f -c %T "/sys/fs/cgroup${cg%/}" 2>/dev/null) == cgroup2fs ]] &&
	mkdir "$unitdir" 2>/dev/null && echo "$S1" >"$unitdir/cgroup.procs" 2>/dev/null &&
	grep -q "^0::.*/sysextd-test-$$.service$" "/proc/$S1/cgroup"; then
	on_exit "echo $S1 >/sys/fs/cgroup${cg%/}/cgroup.procs 2>/dev/null; rmdir '$unitdir' 2>/dev/null"
	replace_image "$WORK/v3.raw" "$ext/app.raw"
	run_sysextd refresh --delay=60
	assert_ok "refresh --delay=60"
	run_sysextd status --json
	assert_eq "$(json_q "$OUT" '[x["unit"] for x in d["delayed"]["old"] if x["namespace"] == '"$(ns_of "$S1")"'][0]')" \
		"sysextd-test-$$.service" "status names S1's unit"
	run_sysextd commit --unit="sysextd-test-$$.service"
	assert_ok "commit --unit="
	assert_eq "$(all_show)" "v2 v2|v3 v3|v2 v2" "only S1 moved"
	run_sysextd commit
	assert_ok commit
	assert_eq "$(all_show)" "v3 v3|v3 v3|v3 v3" "after commit"
else
	if [[ -d $unitdir ]]; then
		echo "$S1" >"/sys/fs/cgroup${cg%/}/cgroup.procs" 2>/dev/null || true
		rmdir "$unitdir" 2>/dev/null || true
	fi
	log "(j) --unit= not tested: this machine does not put a process in a unified cgroup made under /sys/fs/cgroup$cg"
fi

# ------------------------------------------------------------ the end
run_sysextd unmerge
assert_ok unmerge
assert_eq "$(all_show)" "base base|base base|base base" "after unmerge"
stop_all
assert_loops_as_before "$loops_before"
log "PASS"
