#!/bin/bash
# Many followed namespaces stay flat (issue 17 §1, the kernel change's own
# figure: "a system with 1000 containers and five updates has 5000 mount
# entries" when each update is mounted on top).
#
# N_NS container namespaces (default 1000), each its own peer group, pivoted
# into its own root, /usr a bind of the throw-away root's base, are followed
# through five refreshes. After each, every one of them holds exactly one
# sysextd overlay at /usr, showing the host's version; readers in a sample of
# them never see the base or an error. The time of each refresh is logged
# (the benchmark, tools/bench, gives the cost per namespace).
set -euo pipefail
# shellcheck source=test/lib.sh
. "$(dirname "$0")/../lib.sh"
enter_sandbox "$@"
require_cmd mkfs.erofs nsenter cc timeout
require_fs erofs overlay
make_root

N_NS=${N_NS:-1000}
N_REFRESH=5
N_SAMPLE=4
ext=$R/var/lib/extensions
file=usr/share/app/version

cat >"$WORK/reader.c" <<'C'
/* reader FILE OUT STOPFILE: read FILE in a tight loop; count "base" and
 * errors; stop when STOPFILE exists; write "reads base errors first" to OUT;
 * create OUT.started once running. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
int main(int argc, char **argv) {
        unsigned long n = 0, base = 0, err = 0;
        char buf[64], first[160] = "-", started[4096];
        FILE *out;
        if (argc != 4)
                return 2;
        for (;; n++) {
                int fd;
                ssize_t k;
                if ((n & 255) == 0) {
                        if (n == 256) {
                                snprintf(started, sizeof(started), "%s.started", argv[2]);
                                close(open(started, O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
                        }
                        if (access(argv[3], F_OK) == 0)
                                break;
                }
                fd = open(argv[1], O_RDONLY | O_CLOEXEC);
                k = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
                if (fd >= 0)
                        close(fd);
                if (k < 0) {
                        if (!err++)
                                snprintf(first, sizeof(first), "%s", strerror(errno));
                        continue;
                }
                buf[k] = 0;
                if (strcmp(buf, "base\n") == 0)
                        base++;
                else if (buf[0] != 'v' && !err++)
                        snprintf(first, sizeof(first), "content '%.60s'", buf);
        }
        out = fopen(argv[2], "we");
        if (!out)
                return 1;
        fprintf(out, "%lu %lu %lu %s\n", n, base, err, first);
        return fclose(out) == 0 ? 0 : 1;
}
C
cc -static -O2 -Wall -o "$WORK/cinit" "$(dirname "$0")/../helpers/cinit.c" || skip "cannot link a static binary (libc6-dev's libc.a)"
cc -static -O2 -Wall -o "$WORK/reader" "$WORK/reader.c" || fail "cannot compile the reader"

mkdir -p "$R/usr/share/app"
echo base >"$R/$file"
t=$(ext_tree app)
for v in 1 2 3 4 5 6; do
	ext_file "$t" "$file" "v$v"
	mk_erofs "$t" "$WORK/v$v.raw"
done
cp "$WORK/v1.raw" "$ext/app.raw"

# ------------------------------------------------------------ containers
pids=() readers=()
stop_all() {
	local p
	touch "$WORK/stop" 2>/dev/null || true
	for p in "${readers[@]}" "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${readers[@]}" "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	pids=() readers=()
}
on_exit stop_all
mkdir -p "$WORK/ct"
mount -t tmpfs ct "$WORK/ct"
on_exit 'umount -l "$WORK/ct" 2>/dev/null || true'
start=$(date +%s%N)
for ((i = 0; i < N_NS; i++)); do
	c=$WORK/ct/$i
	mkdir -p "$c/usr" "$c/out"
	unshare -m --propagation private "$WORK/cinit" "$c" "$R/usr" >"$c.out" 2>&1 </dev/null &
	pids+=($!)
done
for ((i = 0; i < N_NS; i++)); do
	for ((k = 0; k < 400; k++)); do
		grep -q ready "$WORK/ct/$i.out" 2>/dev/null && break
		sleep 0.05
	done
	grep -q ready "$WORK/ct/$i.out" || fail "container $i did not come up: $(cat "$WORK/ct/$i.out")"
done
log "$N_NS containers up in $((($(date +%s%N) - start) / 1000000)) ms"

run_sysextd merge
assert_ok merge
start=$(date +%s%N)
# One call for all of them: one pass of one worker through every namespace.
run_sysextd follow "${pids[@]}" >/dev/null
assert_ok "follow of $N_NS namespaces in one call"
assert_eq "$(grep -c 'follows the host' <<<"$ERR")" "$N_NS" "one line per namespace followed"
log "followed $N_NS namespaces in $((($(date +%s%N) - start) / 1000000)) ms"

in_ct() { cat "/proc/${pids[$1]}/root/$2" 2>&1 || true; }
overlays() { # the count of sysextd overlays at /usr in each container, as "COUNT xN" lines
	local p
	for p in "${pids[@]}"; do
		awk '$5 == "/usr" && / - overlay sysextd / { n++ } END { print n + 0 }' "/proc/$p/mountinfo"
	done | sort | uniq -c | awk '{ printf "%s x%s\n", $2, $1 }'
}
assert_eq "$(overlays)" "1 x$N_NS" "sysextd overlays per container after follow"

# Readers in a sample: the first, the last and two in between.
sample=(0 $((N_NS / 3)) $((2 * N_NS / 3)) $((N_NS - 1)))
for s in "${sample[@]}"; do
	cp "$WORK/reader" "/proc/${pids[$s]}/root/out/reader"
	nsenter -t "${pids[$s]}" -m -r -- /out/reader "/$file" /out/reads /out/stop &
	readers+=($!)
done
for s in "${sample[@]}"; do
	for ((k = 0; k < 200; k++)); do
		[[ -e /proc/${pids[$s]}/root/out/reads.started ]] && break
		sleep 0.05
	done
	[[ -e /proc/${pids[$s]}/root/out/reads.started ]] || fail "the reader in container $s did not start"
done

check "$N_REFRESH refreshes reach all $N_NS namespaces, one overlay each"
for ((r = 2; r < 2 + N_REFRESH; r++)); do
	cp "$WORK/v$r.raw" "$ext/app.raw.new"
	mv "$ext/app.raw.new" "$ext/app.raw"
	start=$(date +%s%N)
	run_sysextd refresh >/dev/null
	assert_ok "refresh to v$r"
	log "refresh to v$r with $N_NS followed namespaces: $((($(date +%s%N) - start) / 1000000)) ms"
	assert_eq "$(overlays)" "1 x$N_NS" "sysextd overlays per container after the refresh to v$r"
	for s in "${sample[@]}"; do
		assert_eq "$(in_ct "$s" "$file")" "v$r" "container $s after the refresh to v$r"
	done
done
bad=0
for ((i = 0; i < N_NS; i++)); do
	[[ $(in_ct "$i" "$file") == "v$((N_REFRESH + 1))" ]] || bad=$((bad + 1))
done
assert_eq "$bad" 0 "containers not showing v$((N_REFRESH + 1))"

check "readers in the sample never saw the base or an error"
for s in "${sample[@]}"; do touch "/proc/${pids[$s]}/root/out/stop"; done
for p in "${readers[@]}"; do wait "$p" || fail "a reader failed"; done
for s in "${sample[@]}"; do
	read -r n base err first <"/proc/${pids[$s]}/root/out/reads"
	log "reader in container $s: $n reads, base=$base errors=$err ($first)"
	assert_eq "$base $err" "0 0" "reads of the base and errors in container $s"
done

run_sysextd unmerge >/dev/null
assert_ok unmerge
assert_eq "$(overlays)" "0 x$N_NS" "sysextd overlays per container after unmerge"
assert_eq "$(in_ct 0 "$file")" base "container 0 after unmerge"
stop_all
