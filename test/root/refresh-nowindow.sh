#!/bin/bash
# No window, flat mount table, children survive (issue 3, item 5).
#
# A throw-away root laid out like a distribution: its root mount shared; three
# "service" namespaces made as slaves of it and one "container" namespace in
# its own peer group that receives only a slave of run/host/incoming, all made
# before the first merge; a tmpfs on usr/local and a bind on opt/app/data.
# The base and two versions of extension "app" all contain
# usr/share/app/version ("base", "v1", "v2"). While a reader in each service
# namespace and one in the root namespace read that file in a tight loop, 200
# refreshes alternate v1 and v2. Every read must return v1 or v2: never the
# base, never an error. Every namespace has as many mountinfo lines after the
# 200 refreshes as after the first merge, and usr/local and opt/app/data keep
# their content everywhere, after each refresh and after unmerge, and a merge
# after that unmerge works (the overlay of the base alone that unmerge leaves
# to keep the children is not a merged extension).
set -euo pipefail
# shellcheck source=test/lib.sh
. "$(dirname "$0")/../lib.sh"
enter_sandbox "$@"
require_cmd mkfs.erofs nsenter cc timeout
require_fs erofs overlay
make_root

N_REFRESH=${N_REFRESH:-200}
READER_LIMIT=150 # seconds: a reader stops by itself after this long
ext=$R/var/lib/extensions
file=usr/share/app/version

# ------------------------------------------------------------ the reader
cat >"$WORK/reader.c" <<'C'
/* reader FILE OUT STOPFILE SECONDS: read FILE in a tight loop (open, read,
 * close) and count what comes back: "v1", "v2", "base", errors (open/read
 * failures and any other content). Stops when STOPFILE exists or after
 * SECONDS, then writes the counts to OUT. Creates OUT.started once it runs. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
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
cc -O2 -Wall -o "$WORK/reader" "$WORK/reader.c" || fail "cannot compile the reader"

# ------------------------------------------------------------ the root
mkdir -p "$R/usr/share/app" "$R/var/appdata" "$R/run/host/incoming/x"
echo base >"$R/$file"
echo "base opt" >"$R/opt/app/version"

# Children, before the first merge.
mount -t tmpfs usr-local "$R/usr/local" || fail "cannot mount a tmpfs on usr/local"
echo "local content" >"$R/usr/local/file"
echo "app data" >"$R/var/appdata/file"
mount --bind "$R/var/appdata" "$R/opt/app/data" || fail "cannot bind opt/app/data"

# run/host/incoming: its own shared peer group, as a host sets it up for containers.
mount --bind "$R/run/host/incoming" "$R/run/host/incoming"
mount --make-private "$R/run/host/incoming"
mount --make-shared "$R/run/host/incoming"

# Extension images.
t=$(ext_tree app)
ext_file "$t" "$file" v1
ext_file "$t" opt/app/version "v1 opt"
ext_file "$t" opt/app/v1-only v1
mk_erofs "$t" "$WORK/v1.raw"
rm "$t/opt/app/v1-only"
ext_file "$t" "$file" v2
ext_file "$t" opt/app/version "v2 opt"
ext_file "$t" opt/app/v2-only v2
mk_erofs "$t" "$WORK/v2.raw"
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
wait_ns() { # PID — wait until PID runs in a mount namespace other than ours
	local i ns
	for ((i = 0; i < 100; i++)); do
		ns=$(readlink "/proc/$1/ns/mnt" 2>/dev/null || true)
		[[ -n "$ns" && "$ns" != "$our_ns" ]] && return 0
		sleep 0.05
	done
	fail "namespace of pid $1 did not come up"
}

svc=()
for i in 1 2 3; do
	unshare -m --propagation slave sleep 600 </dev/null >/dev/null 2>&1 &
	svc+=("$!")
	pids+=("$!")
	wait_ns "$!"
done
log "service namespaces (slaves of the root): pids ${svc[*]}"

# The container: everything it got from the root is made private (it must not
# see /usr change); its own root is a tmpfs in its own peer group; it receives
# only a slave of run/host/incoming.
C=$WORK/container
mkdir -p "$C"
# shellcheck disable=SC2016 # expanded by the inner bash
R=$R C=$C unshare -m --propagation unchanged bash -c '
	set -e
	mount -t tmpfs container "$C"
	mount --make-shared "$C"
	mkdir -p "$C/usr/share/app" "$C/run/host/incoming"
	echo container >"$C/usr/share/app/version"
	mount --bind "$R/run/host/incoming" "$C/run/host/incoming"
	mount --make-slave "$C/run/host/incoming"
	mount --make-rprivate "$R"
	touch "$C.ready"
	exec sleep 600' </dev/null >"$WORK/container.log" 2>&1 &
ctr=$!
pids+=("$ctr")
for ((i = 0; i < 100; i++)); do
	[[ -e "$C.ready" ]] && break
	kill -0 "$ctr" 2>/dev/null || fail "container setup failed: $(cat "$WORK/container.log")"
	sleep 0.05
done
[[ -e "$C.ready" ]] || fail "container namespace did not come up"
log "container namespace: pid $ctr"

in_ns() { # PID CMD... — run CMD in the mount namespace of PID
	nsenter -t "$1" -m -- "${@:2}"
}

check "the container receives mounts under run/host/incoming (and only there)"
mount -t tmpfs incoming-x "$R/run/host/incoming/x"
echo delivered >"$R/run/host/incoming/x/file"
assert_eq "$(in_ns "$ctr" cat "$C/run/host/incoming/x/file" 2>&1)" delivered "file under the container's run/host/incoming"
umount "$R/run/host/incoming/x"
! in_ns "$ctr" mountpoint -q "$C/run/host/incoming/x" || fail "unmount under run/host/incoming did not reach the container"

all_ns=(root "${svc[@]}" "$ctr")
ns_name() { # PID|root
	local i
	case $1 in
	root) echo "root" ;;
	"$ctr") echo "container" ;;
	*) for i in 0 1 2; do if [[ "${svc[i]}" == "$1" ]]; then echo "service$((i + 1))"; fi; done ;;
	esac
}
mountinfo_lines() { # PID|root
	if [[ $1 == root ]]; then
		wc -l </proc/self/mountinfo
	else
		in_ns "$1" cat /proc/self/mountinfo | wc -l
	fi
}

# check_children WHERE(PID|root) — usr/local and opt/app/data have their content.
check_children() {
	local got want
	want=$'local content\napp data'
	if [[ $1 == root ]]; then
		got=$(cat "$R/usr/local/file" "$R/opt/app/data/file" 2>&1) || true
	else
		got=$(in_ns "$1" cat "$R/usr/local/file" "$R/opt/app/data/file" 2>&1) || true
	fi
	[[ "$got" == "$want" ]] || fail "$2: children lost their content in the $(ns_name "$1") namespace: got:
$got
mountinfo there:
$(if [[ $1 == root ]]; then mountinfo_under "$R"; else in_ns "$1" cat /proc/self/mountinfo | grep -F " $R"; fi)"
}

# check_version WHERE VERSION WHAT — the file shows VERSION in namespace WHERE.
check_version() {
	local got
	if [[ $1 == root ]]; then
		got=$(cat "$R/$file" "$R/opt/app/version" 2>&1) || true
	else
		got=$(in_ns "$1" cat "$R/$file" "$R/opt/app/version" 2>&1) || true
	fi
	assert_eq "$got" "$2"$'\n'"$2 opt" "$3: usr and opt versions in the $(ns_name "$1") namespace"
}

# ------------------------------------------------------------ first merge
replace_image "$WORK/v1.raw" "$ext/app.raw"
run_sysextd merge
assert_ok merge
for ns in root "${svc[@]}"; do
	check_version "$ns" v1 "after merge"
	check_children "$ns" "after merge"
done

check "the container does not see the merged tree"
assert_eq "$(in_ns "$ctr" cat "$R/$file")" base "the root's usr as seen from the container"
assert_eq "$(in_ns "$ctr" cat "$C/$file")" container "the container's own usr"
! in_ns "$ctr" test -e "$R/opt/app/v1-only" || fail "the container sees the merged /opt"

declare -A lines_before lines_after
for ns in "${all_ns[@]}"; do
	lines_before[$ns]=$(mountinfo_lines "$ns")
done

# ------------------------------------------------------------ readers
rm -f "$WORK/stop"
readers=(root "${svc[@]}")
declare -A reader_pid
for ns in "${readers[@]}"; do
	out=$WORK/reads.$(ns_name "$ns")
	if [[ $ns == root ]]; then
		"$WORK/reader" "$R/$file" "$out" "$WORK/stop" "$READER_LIMIT" &
	else
		nsenter -t "$ns" -m -- "$WORK/reader" "$R/$file" "$out" "$WORK/stop" "$READER_LIMIT" &
	fi
	reader_pid[$ns]=$!
	pids+=("$!")
done
for ns in "${readers[@]}"; do
	out=$WORK/reads.$(ns_name "$ns")
	for ((i = 0; i < 200; i++)); do
		[[ -e "$out.started" ]] && break
		sleep 0.05
	done
	[[ -e "$out.started" ]] || fail "reader in the $(ns_name "$ns") namespace did not start"
done
log "readers running: ${reader_pid[*]}"

# ------------------------------------------------------------ 200 refreshes
check "$N_REFRESH refreshes alternating v2 and v1, with readers in 4 namespaces"
times=()
start=$(date +%s%N)
for ((n = 1; n <= N_REFRESH; n++)); do
	if ((n % 2)); then v=v2; else v=v1; fi
	replace_image "$WORK/$v.raw" "$ext/app.raw"
	t0=$(date +%s%N)
	run_sysextd refresh >/dev/null
	t1=$(date +%s%N)
	times+=($(((t1 - t0) / 1000)))
	assert_ok "refresh $n (to $v)"
	check_version root "$v" "refresh $n"
	check_children root "refresh $n"
	if ((n % 20 == 0)); then
		for ns in "${svc[@]}"; do
			check_version "$ns" "$v" "refresh $n"
			check_children "$ns" "refresh $n"
		done
		log "refresh $n done"
	fi
done
end=$(date +%s%N)
median=$(printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}')
log "$N_REFRESH refreshes in $(((end - start) / 1000000)) ms, median $((median / 1000)).$(((median % 1000) / 100)) ms per refresh (sysextd process, incl. fork/exec)"

touch "$WORK/stop"
for ns in "${readers[@]}"; do
	wait "${reader_pid[$ns]}" || fail "reader in the $(ns_name "$ns") namespace failed"
done

# ------------------------------------------------------------ results
check "no reader saw the base or an error, and every reader saw both versions"
bad=
printf '# %-10s %10s %10s %6s %6s  %s\n' reader v1 v2 base errors first-error
for ns in "${readers[@]}"; do
	name=$(ns_name "$ns")
	read -r c1 c2 cb ce first <"$WORK/reads.$name" || fail "no counts from the $name reader"
	printf '# %-10s %10s %10s %6s %6s  %s\n' "$name" "$c1" "$c2" "$cb" "$ce" "$first"
	((cb == 0)) || bad+="$name reader saw the base $cb times; "
	((ce == 0)) || bad+="$name reader had $ce errors (first: $first); "
	((c1 > 0 && c2 > 0)) || bad+="$name reader did not see both versions (v1=$c1 v2=$c2); "
done
[[ -z "$bad" ]] || fail "$bad"

check "every namespace has as many mountinfo lines as after the first merge"
for ns in "${all_ns[@]}"; do
	lines_after[$ns]=$(mountinfo_lines "$ns")
	log "mountinfo lines $(ns_name "$ns"): after first merge ${lines_before[$ns]}, after $N_REFRESH refreshes ${lines_after[$ns]}"
done
for ns in "${all_ns[@]}"; do
	[[ "${lines_after[$ns]}" == "${lines_before[$ns]}" ]] ||
		fail "mountinfo of the $(ns_name "$ns") namespace grew from ${lines_before[$ns]} to ${lines_after[$ns]} lines:
$(if [[ $ns == root ]]; then mountinfo_under "$R"; else in_ns "$ns" cat /proc/self/mountinfo | grep -F " $R"; fi)"
done
assert_eq "$(ours_at "$R/usr")" 1 "sysextd overlays at usr"
assert_eq "$(ours_at "$R/opt")" 1 "sysextd overlays at opt"

check "the container still does not see the merged tree"
assert_eq "$(in_ns "$ctr" cat "$R/$file")" base "the root's usr as seen from the container"
assert_eq "$(in_ns "$ctr" cat "$C/$file")" container "the container's own usr"
check_children "$ctr" "after the refreshes"

# ------------------------------------------------------------ unmerge
check "after unmerge: base everywhere, children keep their content in every namespace"
run_sysextd unmerge
assert_ok unmerge
for ns in root "${svc[@]}"; do
	check_version "$ns" base "after unmerge"
	check_children "$ns" "after unmerge"
done
check_children "$ctr" "after unmerge"
assert_eq "$(mountinfo_lines "$ctr")" "${lines_before[$ctr]}" "mountinfo lines of the container after unmerge"

check "merge again after unmerge: the extension everywhere, children still there"
run_sysextd merge
assert_ok "merge after unmerge"
for ns in root "${svc[@]}"; do
	check_version "$ns" v1 "merge after unmerge"
	check_children "$ns" "merge after unmerge"
done
run_sysextd unmerge
assert_ok "second unmerge"
for ns in root "${svc[@]}"; do
	check_version "$ns" base "second unmerge"
	check_children "$ns" "second unmerge"
done

stop_all
assert_loops_as_before "$loops_before"

echo "PASS"
