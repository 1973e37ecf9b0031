#!/bin/bash
# Namespaces that did not get the last swap (issue 17, section 3).
#
# Made after merging v1, each with a reader of usr and opt in it:
#   (a) a "service" in a private mount namespace (unshare -m --propagation
#       private, its /usr made private too): it receives nothing, and keeps a
#       copy of the v1 tree alone ("older")
#   (b) a slave namespace that mounts a tmpfs on a directory inside the merged
#       /usr (a child of our tree): the kernel keeps its copy of the v1 top
#       when the host drops it, v2 right beneath ("older-over-current"); its
#       /opt moves to v2 with the host
#   (c) a "container" (a peer group of its own, pivoted into its root, /usr
#       and /opt binds of the base made before the merge, as follow.sh makes
#       them), not followed: it shows the base ("base")
# Then refresh to v2:
#   - status --namespaces (--json and text) lists exactly (a), (b), (c), by
#     their first processes, with what each hierarchy shows
#   - commit --pid= of each brings it to v2; the readers there read v1, then
#     v2, never the base or an error
#   - status --namespaces lists none afterwards
#   - refusals with one line and nothing changed: a PID that does not exist;
#     a namespace showing an overlay from source "sysextd" that no record
#     proves ours ("not recorded; left alone")
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

# ------------------------------------------------------------ the reader (static: the container has no libc)
cat >"$WORK/reader.c" <<'C'
/* reader FILE OUT STOPFILE: read FILE in a tight loop; on stop, write to OUT
 * the sequence of distinct contents seen ("v1 v2"), then the count of reads
 * that were neither v1 nor v2 (base, errors). */
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
                if (strcmp(buf, "v1") && strcmp(buf, "v2")) {
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
cc -static -O2 -Wall -o "$WORK/cinit" "$(dirname "$0")/../helpers/cinit.c" || skip "cannot link a static binary (libc6-dev's libc.a)"
cc -static -O2 -Wall -o "$WORK/reader" "$WORK/reader.c" || fail "cannot compile the reader"

# ------------------------------------------------------------ images
mkdir -p "$R/usr/share/app" "$R/opt/app" "$R/usr/share/extra"
echo base >"$R/$file"
echo base >"$R/$ofile"
t=$(ext_tree app)
for v in v1 v2; do
	ext_file "$t" "$file" "$v"
	ext_file "$t" "$ofile" "$v"
	mk_erofs "$t" "$WORK/$v.raw"
done
cp "$WORK/v1.raw" "$ext/app.raw"
loops_before=$(loop_snapshot)

# ------------------------------------------------------------ namespaces
pids=()
ctrs=()
stop_all() {
	local p
	[[ -n "${WORK:-}" ]] && touch "$WORK/stop" 2>/dev/null
	for p in "${pids[@]}"; do
		kill "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	pids=()
	for p in "${ctrs[@]}"; do
		umount -l "$p" 2>/dev/null || true
	done
	ctrs=()
}
on_exit stop_all

our_ns=$(readlink /proc/$$/ns/mnt)
wait_ns() {
	local i ns
	for ((i = 0; i < 100; i++)); do
		ns=$(readlink "/proc/$1/ns/mnt" 2>/dev/null || true)
		[[ -n "$ns" && "$ns" != "$our_ns" ]] && [[ -e "$WORK/ready.$1" || -z "${2:-}" ]] && return 0
		sleep 0.05
	done
	fail "namespace of pid $1 did not come up"
}
ns_of() { # PID — the mount namespace's inode
	stat -L -c %i "/proc/$1/ns/mnt"
}

# In the namespace of PID, what a reader there reads at FILE (relative to the
# throw-away root, or to the container's root).
declare -A PREFIX
shows() {
	echo "$(cat "/proc/$1/root${PREFIX[$1]}/$file" 2>&1) $(cat "/proc/$1/root${PREFIX[$1]}/$ofile" 2>&1)"
}

run_sysextd merge
assert_ok merge
assert_file_content "$R/$file" v1

# (a) a private namespace with /usr private: it receives no propagation.
# shellcheck disable=SC2016 # sh -c expands its own arguments
unshare -m --propagation private sh -c 'mount --make-private "$1/usr" && touch "$2/ready.$$" && exec sleep 600' sh "$R" "$WORK" \
	</dev/null >/dev/null 2>&1 &
A=$!
pids+=("$A")
wait_ns "$A" ready
PREFIX[$A]=$R

# (b) a slave with a tmpfs of its own on a directory inside the merged /usr.
# shellcheck disable=SC2016 # sh -c expands its own arguments
unshare -m --propagation slave sh -c 'mount -t tmpfs own-b "$1/usr/share/extra" && echo b >"$1/usr/share/extra/file" && touch "$2/ready.$$" && exec sleep 600' \
	sh "$R" "$WORK" </dev/null >/dev/null 2>&1 &
B=$!
pids+=("$B")
wait_ns "$B" ready
PREFIX[$B]=$R

# (c) a container: a peer group of its own, binds of the base made before the
# merge (the base: below the merged trees, reached through a bind of the tmpfs).
c=$WORK/ctr
mkdir -p "$c" "$WORK/rootbind"
mount --bind "$R" "$WORK/rootbind"
mount --make-private "$WORK/rootbind"
mount -t tmpfs ctr-c "$c"
ctrs+=("$c" "$WORK/rootbind")
mkdir -p "$c/usr" "$c/opt" "$c/out"
cp "$WORK/reader" "$c/reader"
# A bind of the tmpfs itself has no overlay on it: its usr is the base.
mount --bind "$WORK/rootbind/usr" "$c/usr"
mount --make-private "$c/usr"
mount --bind "$WORK/rootbind/opt" "$c/opt"
mount --make-private "$c/opt"
unshare -m --propagation private "$WORK/cinit" "$c" >"$WORK/ctr.out" 2>&1 </dev/null &
C=$!
pids+=("$C")
for ((i = 0; i < 200; i++)); do
	grep -q ready "$WORK/ctr.out" 2>/dev/null && break
	sleep 0.05
done
grep -q ready "$WORK/ctr.out" || fail "the container did not come up: $(cat "$WORK/ctr.out")"
umount -l "$c/usr" "$c/opt" 2>/dev/null || true
PREFIX[$C]=
log "namespaces: (a) pid $A, (b) pid $B, (c) pid $C"

assert_eq "$(shows "$A")" "v1 v1" "(a) before the refresh"
assert_eq "$(shows "$B")" "v1 v1" "(b) before the refresh"
assert_eq "$(shows "$C")" "base base" "(c) before the refresh (not followed)"

run_sysextd status --namespaces --json
assert_ok "status --namespaces before the refresh"
assert_eq "$(json_q "$OUT" 'sorted(x["pid"] for x in d)')" "[$C]" "before the refresh only the container is behind"

# ------------------------------------------------------------ readers
readers=()
rm -f "$WORK/stop" "$WORK"/seen.*
for p in "$A" "$B"; do
	for f in "$file" "$ofile"; do
		nsenter -t "$p" -m -- "$WORK/reader" "$R/$f" "$WORK/seen.$p.${f//\//_}" "$WORK/stop" &
		readers+=("$!")
		pids+=("$!")
	done
done
sleep 0.2

# ------------------------------------------------------------ refresh
check "refresh to v2: (a), (b), (c) keep what they showed"
replace_image "$WORK/v2.raw" "$ext/app.raw"
run_sysextd refresh
assert_ok refresh
assert_file_content "$R/$file" v2
assert_eq "$(shows "$A")" "v1 v1" "(a) after the refresh"
assert_eq "$(shows "$B")" "v1 v2" "(b) after the refresh: usr kept by its own mount, opt moved"
assert_eq "$(cat "/proc/$B/root$R/usr/share/extra/file")" b "(b) its own mount"
assert_eq "$(shows "$C")" "base base" "(c) after the refresh"

check "status --namespaces lists exactly (a), (b), (c)"
run_sysextd status --namespaces --json
assert_ok "status --namespaces --json"
assert_eq "$(json_q "$OUT" 'sorted(x["namespace"] for x in d) == sorted(['"$(ns_of "$A"),$(ns_of "$B"),$(ns_of "$C")"'])')" true \
	"the three namespaces, each once"
state() { # PID HIERARCHY — what status says it shows there
	json_q "$OUT" '[h["shows"] for x in d if x["pid"] == '"$1"' for h in x["hierarchies"] if h["hierarchy"] == "'"$2"'"][0]'
}
assert_eq "$(state "$A" usr) $(state "$A" opt)" "older older" "(a): an older tree at usr and opt"
assert_eq "$(state "$B" usr) $(state "$B" opt)" "older-over-current current" "(b): the older tree over the current at usr"
assert_eq "$(state "$C" usr) $(state "$C" opt)" "base base" "(c): the base"
assert_eq "$(json_q "$OUT" '[x["own_root"] for x in d if x["pid"] == '"$C"'][0]')" true "(c) has a root of its own"
assert_eq "$(json_q "$OUT" '[x["processes"] for x in d if x["pid"] == '"$A"'][0] >= 3')" true "(a): sleep and two readers"
run_sysextd status --namespaces
assert_ok "status --namespaces (text)"
assert_contains "$OUT" "process $A" "text: (a)"
assert_contains "$OUT" "older tree, current beneath" "text: (b)'s usr"
assert_contains "$OUT" "process $C" "text: (c)"

# ------------------------------------------------------------ refusals
refused() { # WHAT — the last run failed with one line and changed nothing
	assert_failed "$1"
	assert_eq "$(wc -l <<<"$ERR")" 1 "$1: one line on stderr"
}
check "refusals"
sleep 100 &
dead=$!
kill "$dead"
wait "$dead" 2>/dev/null || true
run_sysextd commit --pid="$dead"
refused "commit --pid= of a process that is gone"
assert_contains "$ERR" "No such process" "says so"

# An overlay from source "sysextd" that sysextd never made: no record proves it ours.
mkdir -p "$WORK/l1/share/app" "$WORK/l2"
echo forged >"$WORK/l1/share/app/version"
# shellcheck disable=SC2016 # sh -c expands its own arguments
unshare -m --propagation private sh -c 'mount -t overlay sysextd -o "lowerdir=$2/l1:$2/l2" "$1/usr" && touch "$2/ready.$$" && exec sleep 600' \
	sh "$R" "$WORK" </dev/null >/dev/null 2>&1 &
D=$!
pids+=("$D")
wait_ns "$D" ready
PREFIX[$D]=$R
run_sysextd status --namespaces --json
assert_eq "$(state "$D" usr)" older-over-current "the forged overlay (on top of the current tree there) looks like an older tree"
run_sysextd commit --pid="$D"
refused "commit --pid= of a namespace with an unrecorded tree"
assert_contains "$ERR" "process $D" "names the namespace"
assert_contains "$ERR" "$R/usr" "names the hierarchy"
assert_contains "$ERR" "not recorded; left alone" "says why"
assert_eq "$(cat "/proc/$D/root$R/$file")" forged "the forged overlay is still there"
kill "$D"
wait "$D" 2>/dev/null || true

# ------------------------------------------------------------ commit --pid
check "commit --pid= of each brings it to v2"
run_sysextd commit --pid="$A"
assert_ok "commit --pid=(a)"
assert_eq "$(shows "$A")" "v2 v2" "(a) after its commit"
run_sysextd commit --pid="$B"
assert_ok "commit --pid=(b)"
assert_eq "$(shows "$B")" "v2 v2" "(b) after its commit"
run_sysextd commit --pid="$C"
assert_ok "commit --pid=(c)"
assert_eq "$(shows "$C")" "v2 v2" "(c) after its commit"
nsenter -t "$C" -m -r -- /reader "/$file" /out/seen "/out/stop" &
creader=$!
pids+=("$creader")
sleep 0.2
run_sysextd commit --pid="$C"
assert_ok "commit --pid=(c) again"
assert_contains "$ERR" "nothing to do" "nothing to do the second time"
run_sysextd status --namespaces --json
assert_ok "status --namespaces after the commits"
assert_eq "$(json_q "$OUT" 'len(d)')" 0 "none listed"

touch "$WORK/stop" "$c/out/stop"
for p in "${readers[@]}" "$creader"; do wait "$p" || fail "a reader failed"; done
for p in "$A" "$B"; do
	for f in "$file" "$ofile"; do
		s=$(cat "$WORK/seen.$p.${f//\//_}")
		[[ ${s#*|} == 0 ]] || fail "a reader in namespace $p saw the base or an error at $f ${s#*|} times (saw: ${s%|*})"
		if [[ $p == "$B" && $f == "$ofile" ]]; then
			assert_eq "${s%|*}" "v1 v2" "(b) read v1, then v2 at $f (with the host)"
		else
			assert_eq "${s%|*}" "v1 v2" "namespace $p read v1, then v2 at $f"
		fi
	done
done
s=$(cat "$c/out/seen")
assert_eq "$s" "v2|0" "(c) reads v2 after its commit"

# ------------------------------------------------------------ the end
run_sysextd unmerge
assert_ok unmerge
stop_all
assert_loops_as_before "$loops_before"
log "PASS"
