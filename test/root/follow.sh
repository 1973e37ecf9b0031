#!/bin/bash
# Namespaces that follow the host (issue 17 §1).
#
# "Containers" as a distribution makes them: a mount namespace of their own
# whose root is a shared mount in a peer group of its own (nothing the host
# mounts reaches it), pivoted into its own root, /usr and /opt binds of the
# throw-away root's base made before the first merge.
#   (a) followed: merge, refresh and unmerge reach the container; a reader
#       inside (a static binary run in the container's root) never sees the
#       base or an error during refreshes; one sysextd overlay per hierarchy
#       there after every refresh; a mount of its own below /usr is carried;
#       status lists it with its process and generation
#   (b) a container whose /opt is a mount of its own: /usr follows, /opt is
#       left alone and reported
#   (c) unfollow puts the base back there; follow of a gone process or of
#       sysextd's own namespace is refused with one line
#   (d) the namespace, not the PID: the process followed exits, another one in
#       the namespace keeps it alive, and it is still followed
#   (e) the namespace vanishes while the host's transition runs: the host's
#       refresh succeeds and the record goes without a warning
#   (f) delayed refreshes: the new trees go beneath ours in the container too
#       (two overlays per hierarchy there, the old version read); commit --pid
#       of the container moves it alone; the host's commit moves it; unfollow
#       while a tree waits there is refused; a reader there never sees the base
set -euo pipefail
# shellcheck source=test/lib.sh
. "$(dirname "$0")/../lib.sh"
enter_sandbox "$@"
require_cmd mkfs.erofs nsenter cc timeout
require_fs erofs overlay
require_test_hooks
make_root

N_REFRESH=${N_REFRESH:-40}
READER_LIMIT=200
ext=$R/var/lib/extensions
file=usr/share/app/version
PARTS=${PARTS:-abcdef}
part() { [[ $PARTS == *$1* ]]; }

# ------------------------------------------------------------ helpers (static: the containers have no libc)
cat >"$WORK/reader.c" <<'C'
/* reader FILE OUT STOPFILE SECONDS: read FILE in a tight loop and count
 * "v1", "v2", "base" and errors; stop when STOPFILE exists or after SECONDS;
 * write the counts to OUT; create OUT.started once running. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
int main(int argc, char **argv) {
        unsigned long v1 = 0, v2 = 0, base = 0, err = 0, n = 0;
        char buf[64], first_err[160] = "", started[4096];
        time_t end;
        FILE *out;
        if (argc != 5)
                return 2;
        end = time(NULL) + atoi(argv[4]);
        for (;; n++) {
                int fd;
                ssize_t k;
                if ((n & 255) == 0) {
                        if (n == 256) {
                                snprintf(started, sizeof(started), "%s.started", argv[2]);
                                close(open(started, O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
                        }
                        if (access(argv[3], F_OK) == 0 || time(NULL) >= end)
                                break;
                }
                fd = open(argv[1], O_RDONLY | O_CLOEXEC);
                if (fd < 0) {
                        if (!err++)
                                snprintf(first_err, sizeof(first_err), "open: %s", strerror(errno));
                        continue;
                }
                k = read(fd, buf, sizeof(buf) - 1);
                close(fd);
                if (k < 0) {
                        if (!err++)
                                snprintf(first_err, sizeof(first_err), "read: %s", strerror(errno));
                        continue;
                }
                buf[k] = 0;
                if (strcmp(buf, "v1\n") == 0)
                        v1++;
                else if (strcmp(buf, "v2\n") == 0)
                        v2++;
                else if (strcmp(buf, "base\n") == 0)
                        base++;
                else if (!err++)
                        snprintf(first_err, sizeof(first_err), "content '%.60s'", buf);
        }
        out = fopen(argv[2], "we");
        if (!out)
                return 1;
        fprintf(out, "%lu %lu %lu %lu %s\n", v1, v2, base, err, first_err[0] ? first_err : "-");
        return fclose(out) == 0 ? 0 : 1;
}
C
cc -static -O2 -Wall -o "$WORK/cinit" "$(dirname "$0")/../helpers/cinit.c" || skip "cannot link a static binary (libc6-dev's libc.a)"
cc -static -O2 -Wall -o "$WORK/reader" "$WORK/reader.c" || fail "cannot compile the reader"

# ------------------------------------------------------------ the root and images
mkdir -p "$R/usr/share/app" "$R/opt/app"
echo base >"$R/$file"
echo "base opt" >"$R/opt/app/version"
t=$(ext_tree app)
ext_file "$t" "$file" v1
ext_file "$t" opt/app/version "v1 opt"
mk_erofs "$t" "$WORK/v1.raw"
ext_file "$t" "$file" v2
ext_file "$t" opt/app/version "v2 opt"
mk_erofs "$t" "$WORK/v2.raw"
cp "$WORK/v1.raw" "$ext/app.raw"

# ------------------------------------------------------------ containers
declare -A cpid
bg_pids=()
stop_all() {
	local p
	[[ -n "${WORK:-}" ]] && touch "$WORK/stop" 2>/dev/null
	for p in "${bg_pids[@]}"; do
		kill "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	bg_pids=()
	for p in "${!cpid[@]}"; do
		umount -l "$WORK/$p" 2>/dev/null || true
	done
}
on_exit stop_all

# container NAME [own-opt]: its root $WORK/NAME (a tmpfs), /usr and /opt binds
# of the base (made now, before any merge), a tmpfs of its own on usr/local.
container() {
	local name=$1 c=$WORK/$1 p i
	mkdir -p "$c"
	mount -t tmpfs "ctr-$name" "$c"
	mkdir -p "$c/usr" "$c/opt" "$c/out"
	cp "$WORK/reader" "$c/reader"
	# Private at once: a bind of a shared mount joins its peer group, and the
	# tmpfs below would propagate back to $R/usr/local.
	mount --bind "$R/usr" "$c/usr"
	mount --make-private "$c/usr"
	if [[ ${2:-} == own-opt ]]; then
		mount -t tmpfs "opt-$name" "$c/opt"
		mkdir -p "$c/opt/app"
		echo "own opt" >"$c/opt/app/version"
	else
		mount --bind "$R/opt" "$c/opt"
		mount --make-private "$c/opt"
	fi
	mount -t tmpfs "local-$name" "$c/usr/local"
	echo "local $name" >"$c/usr/local/file"
	unshare -m --propagation private "$WORK/cinit" "$c" >"$WORK/$name.out" 2>&1 </dev/null &
	p=$!
	bg_pids+=("$p")
	for ((i = 0; i < 200; i++)); do
		grep -q ready "$WORK/$name.out" 2>/dev/null && break
		sleep 0.05
	done
	grep -q ready "$WORK/$name.out" || fail "container $name did not come up: $(cat "$WORK/$name.out")"
	# Ours only through the container now.
	umount -l "$c/usr/local" "$c/usr" "$c/opt" 2>/dev/null || true
	cpid[$name]=$p
	log "container $name: pid $p, $(readlink "/proc/$p/ns/mnt")"
}

in_ct() { # in_ct NAME FILE — what a reader in the container sees
	cat "/proc/${cpid[$1]}/root/$2" 2>&1 || true
}
overlays_in() { # overlays_in NAME MOUNTPOINT
	awk -v m="$2" '$5 == m && $0 ~ / - overlay sysextd / { n++ } END { print n + 0 }' "/proc/${cpid[$1]}/mountinfo"
}

container c1
container c2 own-opt
container c3
container c4

run_sysextd merge
assert_ok merge
assert_file_content "$R/$file" v1
assert_eq "$(in_ct c1 $file)" base "c1 before follow (its own peer group: the merge did not reach it)"

if part a; then
	check "(a) follow: the container gets the host's trees at once, its usr/local carried"
	run_sysextd follow "${cpid[c1]}"
	assert_ok "follow c1"
	assert_eq "$(in_ct c1 $file)" v1 "c1 /usr after follow"
	assert_eq "$(in_ct c1 opt/app/version)" "v1 opt" "c1 /opt after follow"
	assert_eq "$(in_ct c1 usr/local/file)" "local c1" "c1 usr/local after follow"
	assert_eq "$(in_ct c3 $file)" base "c3 (not followed) after c1's follow"
	run_sysextd status
	assert_contains "$OUT" "process ${cpid[c1]}" "status lists c1"
	run_sysextd status --json
	assert_eq "$(json_q "$OUT" '[f["pid"] for f in d["followed"]]')" "[${cpid[c1]}]" "followed pids in status --json"

	check "(a) $N_REFRESH refreshes: a reader in the container sees v1 or v2, never the base"
	nsenter -t "${cpid[c1]}" -m -r -- /reader "/$file" /out/reader "/out/stop" "$READER_LIMIT" &
	rpid=$!
	bg_pids+=("$rpid")
	for ((i = 0; i < 200; i++)); do
		[[ -e $WORK/c1.started ]] || [[ -e /proc/${cpid[c1]}/root/out/reader.started ]] && break
		sleep 0.05
	done
	[[ -e /proc/${cpid[c1]}/root/out/reader.started ]] || fail "the reader in c1 did not start"
	for ((i = 0; i < N_REFRESH; i++)); do
		if ((i % 2 == 0)); then cp "$WORK/v2.raw" "$ext/app.raw.new"; want=v2; else cp "$WORK/v1.raw" "$ext/app.raw.new"; want=v1; fi
		mv "$ext/app.raw.new" "$ext/app.raw"
		run_sysextd refresh >"$WORK/last-refresh"
		assert_ok "refresh $i"
		got=$(in_ct c1 $file)
		[[ $got == "$want" ]] || fail "after refresh $i c1 shows '$got', not $want"
		[[ $(overlays_in c1 /usr) == 1 && $(overlays_in c1 /opt) == 1 ]] ||
			fail "after refresh $i c1 has $(overlays_in c1 /usr) sysextd overlays at /usr, $(overlays_in c1 /opt) at /opt (want 1 each)"
		[[ $(in_ct c1 usr/local/file) == "local c1" ]] || fail "after refresh $i c1's usr/local is gone: $(cat "$WORK/last-refresh"; cat /proc/${cpid[c1]}/mountinfo)"
	done
	touch "/proc/${cpid[c1]}/root/out/stop"
	wait "$rpid" || fail "the reader in c1 failed"
	read -r v1 v2 base err first <"/proc/${cpid[c1]}/root/out/reader"
	log "reader in c1: v1=$v1 v2=$v2 base=$base errors=$err ($first)"
	assert_eq "$base $err" "0 0" "reads of the base and errors in c1 during $N_REFRESH refreshes"
	((v1 > 0 && v2 > 0)) || fail "the reader in c1 did not see both versions (v1=$v1 v2=$v2)"
	run_sysextd status --json
	assert_eq "$(json_q "$OUT" '[f["generation"] for f in d["followed"]]')" "[$(json_q "$OUT" 'd["generation"]')]" "c1's generation is the host's"
fi

if part b; then
	check "(b) a container whose /opt is its own: /usr follows, /opt is left alone and reported"
	run_sysextd follow "${cpid[c2]}"
	assert_ok "follow c2"
	assert_eq "$(in_ct c2 $file)" "$(cat "$R/$file")" "c2 /usr"
	assert_eq "$(in_ct c2 opt/app/version)" "own opt" "c2's own /opt"
	run_sysextd status
	assert_contains "$OUT" "opt shows tmpfs from 'opt-c2'; left alone" "status reports c2's /opt"
fi

if part c; then
	check "(c) unmerge reaches the followers; merge again too; unfollow puts the base back"
	run_sysextd follow "${cpid[c3]}"
	assert_ok "follow c3"
	run_sysextd unmerge
	assert_ok unmerge
	assert_eq "$(in_ct c3 $file)" base "c3 after unmerge"
	assert_eq "$(overlays_in c3 /usr)" 0 "sysextd overlays at c3's /usr after unmerge"
	assert_eq "$(in_ct c3 usr/local/file)" "local c3" "c3's usr/local after unmerge"
	run_sysextd merge
	assert_ok "merge again"
	assert_eq "$(in_ct c3 $file)" "$(cat "$R/$file")" "c3 after merging again"
	run_sysextd unfollow "${cpid[c3]}"
	assert_ok "unfollow c3"
	assert_eq "$(in_ct c3 $file)" base "c3 after unfollow"
	assert_eq "$(overlays_in c3 /usr)$(overlays_in c3 /opt)" 00 "sysextd overlays in c3 after unfollow"
	run_sysextd refresh --always-refresh=yes
	assert_ok refresh
	assert_eq "$(in_ct c3 $file)" base "c3 after a refresh (no longer followed)"
	run_sysextd status --json
	[[ $(json_q "$OUT" "[f['pid'] for f in d['followed'] if f['pid'] == ${cpid[c3]}]") == "[]" ]] || fail "c3 is still listed after unfollow"

	check "(c) refusals: a gone process, sysextd's own namespace, not a PID"
	run_sysextd follow 999999999
	assert_failed "follow of no process"
	assert_contains "$ERR" "999999999" "the error names the PID"
	assert_eq "$(wc -l <<<"$ERR")" 1 "one line"
	run_sysextd follow $$
	assert_failed "follow of our own namespace"
	assert_contains "$ERR" "own mount namespace" "the error says why"
	run_sysextd follow abc
	assert_failed "follow abc"
	assert_contains "$ERR" "'abc' is not a process ID" "the error"
	run_sysextd unfollow "${cpid[c3]}"
	assert_failed "unfollow of a namespace not followed"
	assert_contains "$ERR" "not followed" "the error"

	check "(c) follow of many at once: the good ones followed, each bad one in its own line"
	run_sysextd follow "${cpid[c3]}" 999999999 "${cpid[c3]}" $$
	assert_failed "follow of c3, no process, c3 again and our own namespace"
	assert_eq "$(grep -c 'follows the host' <<<"$ERR")" 1 "c3 followed once"
	assert_contains "$ERR" "Process 999999999 cannot be followed: no such process." "the gone PID in its line"
	assert_contains "$ERR" "Process $$ is in sysextd's own mount namespace" "our own namespace in its line"
	assert_contains "$ERR" "2 of 4 processes could not be followed" "the summary"
	assert_eq "$(in_ct c3 $file)" "$(cat "$R/$file")" "c3 shows the host's version"
	run_sysextd status --json
	assert_eq "$(json_q "$OUT" "len([f for f in d['followed'] if f['pid'] == ${cpid[c3]}])")" 1 "status lists c3 once"
	run_sysextd unfollow "${cpid[c3]}"
	assert_ok "unfollow c3 after the batch"
	assert_eq "$(in_ct c3 $file)" base "c3 shows its base again"
fi

if part d; then
	check "(d) the namespace is followed, not the PID: its first process exits, another keeps it"
	run_sysextd follow "${cpid[c3]}"
	assert_ok "follow c3"
	nsenter -t "${cpid[c3]}" -m -r -- /reader /nonexistent /out/keeper /out/stop-keeper 600 &
	keeper=$!
	bg_pids+=("$keeper")
	sleep 0.5
	kill "${cpid[c3]}"
	wait "${cpid[c3]}" 2>/dev/null || true
	cpid[c3]=$keeper
	[[ -e /proc/$keeper/root/usr ]] || fail "the keeper process did not keep c3's namespace"
	before=$(cat "$R/$file")
	if [[ $before == v1 ]]; then cp "$WORK/v2.raw" "$ext/app.raw"; want=v2; else cp "$WORK/v1.raw" "$ext/app.raw"; want=v1; fi
	run_sysextd refresh
	assert_ok refresh
	assert_eq "$(in_ct c3 $file)" "$want" "c3 (kept by another process) after refresh"
	run_sysextd status --json
	assert_eq "$(json_q "$OUT" "[f['pid'] for f in d['followed'] if f['pid'] == $keeper]")" "[$keeper]" "status names the process found in the namespace"
fi

if part e; then
	check "(e) a followed namespace vanishes during the host's transition"
	run_sysextd follow "${cpid[c4]}"
	assert_ok "follow c4"
	if [[ $(cat "$R/$file") == v1 ]]; then cp "$WORK/v2.raw" "$ext/app.raw"; want=v2; else cp "$WORK/v1.raw" "$ext/app.raw"; want=v1; fi
	SYSEXTD_TEST_HOOK=follow-enter SYSEXTD_TEST_HOOK_EXEC="[ \"\$SYSEXTD_TEST_HOOK_ARG\" = ${cpid[c4]} ] && kill ${cpid[c4]} && while [ -e /proc/${cpid[c4]}/ns ]; do sleep 0.01; done; true" run_sysextd refresh
	assert_ok "refresh while c4 vanishes"
	assert_file_content "$R/$file" "$want"
	assert_not_contains "$ERR" "warning" "no warning about the namespace that went"
	assert_not_contains "$ERR" "could not be updated" "no failure reported for it"
	run_sysextd status --json
	[[ $(json_q "$OUT" "[f['pid'] for f in d['followed'] if f['pid'] == ${cpid[c4]}]") == "[]" ]] || fail "c4 is still listed after it vanished"
	part a && assert_eq "$(in_ct c1 $file)" "$want" "c1 was updated all the same"
fi

if part f; then
	check "(f) a delayed refresh reaches a followed container beneath it; the container commits like a service"
	run_sysextd follow "${cpid[c1]}"
	assert_ok "follow c1 (again)"
	c1ns=$(stat -L -c %i "/proc/${cpid[c1]}/ns/mnt")
	rm -f "/proc/${cpid[c1]}/root/out/stop-f"
	nsenter -t "${cpid[c1]}" -m -r -- /reader "/$file" /out/reader-f "/out/stop-f" "$READER_LIMIT" &
	bg_pids+=("$!")
	for ((i = 0; i < 200; i++)); do
		[[ -e /proc/${cpid[c1]}/root/out/reader-f.started ]] && break
		sleep 0.05
	done
	[[ -e /proc/${cpid[c1]}/root/out/reader-f.started ]] || fail "the reader in c1 did not start"
	# flip — the other version into place; sets CUR (shown now) and NEXT
	flip() {
		CUR=$(cat "$R/$file")
		if [[ $CUR == v1 ]]; then NEXT=v2; else NEXT=v1; fi
		cp "$WORK/$NEXT.raw" "$ext/app.raw.new"
		mv "$ext/app.raw.new" "$ext/app.raw"
	}
	for round in pid host; do
		flip
		run_sysextd refresh --delay=60
		assert_ok "refresh --delay=60 ($round)"
		assert_file_content "$R/$file" "$CUR"
		assert_eq "$(in_ct c1 $file)" "$CUR" "c1 during the delay ($round)"
		assert_eq "$(overlays_in c1 /usr) $(overlays_in c1 /opt)" "2 2" "sysextd overlays in c1 during the delay ($round)"
		assert_eq "$(in_ct c1 usr/local/file)" "local c1" "c1's usr/local during the delay ($round)"
		run_sysextd status --json
		assert_eq "$(json_q "$OUT" "$c1ns in [x['namespace'] for x in d['delayed']['old']]")" true "status: c1 on the old trees ($round)"
		assert_not_contains "$(json_q "$OUT" "[f['error'] for f in d['followed'] if f['namespace'] == $c1ns]")" "'" "no error for c1 ($round)"
		if [[ $round == pid ]]; then
			run_sysextd commit --pid="${cpid[c1]}"
			assert_ok "commit --pid=c1"
			assert_eq "$(in_ct c1 $file)" "$NEXT" "c1 after its own commit"
			assert_eq "$(overlays_in c1 /usr) $(overlays_in c1 /opt)" "1 1" "sysextd overlays in c1 after its own commit"
			assert_file_content "$R/$file" "$CUR"
			run_sysextd status --json
			assert_eq "$(json_q "$OUT" "$c1ns in [x['namespace'] for x in d['delayed']['new']]")" true "status: c1 on the new trees"
		fi
		run_sysextd commit
		assert_ok "commit ($round)"
		assert_file_content "$R/$file" "$NEXT"
		assert_eq "$(in_ct c1 $file)" "$NEXT" "c1 after the host's commit ($round)"
		assert_eq "$(overlays_in c1 /usr) $(overlays_in c1 /opt)" "1 1" "sysextd overlays in c1 after the host's commit ($round)"
		assert_eq "$(in_ct c1 usr/local/file)" "local c1" "c1's usr/local after the host's commit ($round)"
		run_sysextd status --json
		assert_eq "$(json_q "$OUT" "[f['generation'] for f in d['followed'] if f['namespace'] == $c1ns] == [d['generation']]")" true \
			"c1's record: the host's generation ($round)"
	done

	check "(f) unfollow while a delayed transition waits there is refused; nothing changes"
	flip
	run_sysextd refresh --delay=60
	assert_ok "refresh --delay=60"
	run_sysextd unfollow "${cpid[c1]}"
	assert_failed "unfollow during the delay"
	assert_contains "$ERR" "commit it first" "says what to do"
	assert_eq "$(in_ct c1 $file) $(overlays_in c1 /usr)" "$CUR 2" "c1 unchanged"
	run_sysextd commit
	assert_ok commit
	assert_eq "$(in_ct c1 $file) $(overlays_in c1 /usr)" "$NEXT 1" "c1 after the commit"

	touch "/proc/${cpid[c1]}/root/out/stop-f"
	for ((i = 0; i < 200; i++)); do
		[[ -s /proc/${cpid[c1]}/root/out/reader-f ]] && break
		sleep 0.05
	done
	read -r v1 v2 base err first <"/proc/${cpid[c1]}/root/out/reader-f"
	log "(f) reader in c1: v1=$v1 v2=$v2 base=$base errors=$err ${first:-}"
	assert_eq "$base $err" "0 0" "the reader in c1 never saw the base or an error"
	((v1 > 0 && v2 > 0)) || fail "the reader in c1 did not see both versions (v1=$v1 v2=$v2)"

	check "(f) after its own commit a container can be unfollowed; followed again during a delay it gets the live tree"
	flip
	run_sysextd refresh --delay=60
	assert_ok "refresh --delay=60"
	run_sysextd commit --pid="${cpid[c1]}"
	assert_ok "commit --pid=c1"
	run_sysextd unfollow "${cpid[c1]}"
	assert_ok "unfollow c1 after its own commit (nothing waits there any more)"
	assert_eq "$(in_ct c1 $file) $(overlays_in c1 /usr) $(overlays_in c1 /opt)" "base 0 0" "c1 after unfollow"
	run_sysextd follow "${cpid[c1]}"
	assert_ok "follow c1 again"
	assert_eq "$(in_ct c1 $file) $(overlays_in c1 /usr)" "$CUR 1" "c1 followed again during the delay: the host's live tree"
	run_sysextd commit
	assert_ok commit
	assert_eq "$(in_ct c1 $file) $(overlays_in c1 /usr) $(overlays_in c1 /opt)" "$NEXT 1 1" "c1 after the host's commit"
fi

run_sysextd unmerge
assert_ok "final unmerge"
stop_all
