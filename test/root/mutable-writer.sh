#!/bin/bash
# A writable /opt (--mutable=yes) refreshed 50 times while a writer appends a numbered line to
# a file under it every millisecond and a reader reads an extension's file: no line whose
# write() returned success is lost, the reader never sees the base (the extension's file
# missing), and after unmerge the upper directory holds every line.  Every refresh takes over
# the upper directory with no window: the old tree is made read-only (sealed) before it is
# detached (swap.c), so a write through it fails instead of going astray.
#
# Then: a writer that holds the file open for writing makes the refresh wait and, when it does
# not close it, refuses with the process named; the tree stays writable and in place.
#
# Three writers: /opt/log, /opt/app/deep/log (in a directory of the tree above a mount carried
# over: /opt/app/data, a tmpfs with another tmpfs nested at /opt/app/data/inner) and
# /opt/app/data/inner/log (in the nested mount itself).
#
# Prints "writer W: N lines written, M write failures, L lost; reader: R reads, B of the base"
# and the read-only window of the handovers (the log line of each refresh): median and longest.
set -euo pipefail
# shellcheck source=test/lib.sh
. "$(dirname "$0")/../lib.sh"
enter_sandbox "$@"
require_cmd mkfs.erofs python3
require_fs erofs overlay
make_root

REFRESHES=${REFRESHES:-50}

for v in v1 v2; do
	t=$(ext_tree app "$WORK/src/app-$v")
	ext_file "$t" opt/app/ext-file "from the extension"
	ext_file "$t" opt/app/version "$v"
	ext_file "$t" usr/share/app/version "$v"
	mk_erofs "$t" "$WORK/app-$v.raw"
done
cp "$WORK/app-v1.raw" "$R/var/lib/extensions/app.raw"

check "merge --mutable=yes: /opt and /usr writable, the upper directories created"
perm_opt=$(stat -c %A "$R/opt")
run_sysextd --mutable=yes merge
assert_ok "merge --mutable=yes"
[[ -d "$R/var/lib/extensions.mutable/opt" ]] || fail "var/lib/extensions.mutable/opt was not created"
assert_eq "$(stat -c %A "$R/opt")" "$perm_opt" "mode of /opt after merge"
echo first >"$R/opt/first" || fail "cannot write to the mutable /opt"
assert_file_content "$R/var/lib/extensions.mutable/opt/first" first

cat >"$WORK/writer.py" <<'EOF'
import os, sys, time
path, stop, out = sys.argv[1], sys.argv[2], sys.argv[3]
acked, failed, i = [], 0, 0
while not os.path.exists(stop):
    i += 1
    line = ("%d\n" % i).encode()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            n = os.write(fd, line)
        finally:
            os.close(fd)
        if n == len(line):
            acked.append(i)
        else:
            failed += 1
    except OSError:
        failed += 1
    time.sleep(0.001)
with open(out, "w") as f:
    f.write("%d\n" % failed)
    f.write("".join("%d\n" % a for a in acked))
EOF
cat >"$WORK/reader.py" <<'EOF'
import os, sys
path, stop, out = sys.argv[1], sys.argv[2], sys.argv[3]
reads = base = 0
while not os.path.exists(stop):
    reads += 1
    try:
        with open(path) as f:
            if f.read() != "from the extension\n":
                base += 1
    except OSError:
        base += 1
with open(out, "w") as f:
    f.write("%d %d\n" % (reads, base))
EOF

check "$REFRESHES refreshes while three writers append every millisecond and a reader reads"
mkdir -p "$R/opt/app/data"
mount -t tmpfs writer-data "$R/opt/app/data"
mkdir -p "$R/opt/app/data/inner"
mount -t tmpfs writer-inner "$R/opt/app/data/inner"
mkdir -p "$R/opt/app/deep"
logs=("$R/opt/log" "$R/opt/app/deep/log" "$R/opt/app/data/inner/log")
writers=()
for w in 0 1 2; do
	python3 "$WORK/writer.py" "${logs[$w]}" "$WORK/stop" "$WORK/writer$w.out" &
	writers+=($!)
done
python3 "$WORK/reader.py" "$R/opt/app/ext-file" "$WORK/stop" "$WORK/reader.out" &
reader=$!
on_exit "touch '$WORK/stop'; kill ${writers[*]} $reader 2>/dev/null || true"
sleep 0.2
: >"$WORK/windows"
for ((i = 1; i <= REFRESHES; i++)); do
	v=v$((i % 2 + 1))
	cp "$WORK/app-$v.raw" "$R/var/lib/extensions/app.raw.new"
	mv "$R/var/lib/extensions/app.raw.new" "$R/var/lib/extensions/app.raw"
	run_sysextd --mutable=yes refresh
	assert_ok "refresh $i"
	assert_file_content "$R/opt/app/version" "$v"
	sed -n 's/.*writes to them failed (read-only) for \([0-9.]*\) ms.*/\1/p' <<<"$ERR" >>"$WORK/windows"
done
sleep 0.2
touch "$WORK/stop"
wait "${writers[@]}" "$reader"

read -r reads base_reads <"$WORK/reader.out"
assert_eq "$base_reads" 0 "reads that saw the base (of $reads)"
check "every acknowledged line is in its file, through the tree and in the upper directory or the mount"
for w in 0 1 2; do
	failed=$(head -n1 "$WORK/writer$w.out")
	written=$(($(wc -l <"$WORK/writer$w.out") - 1))
	(( written > REFRESHES * 5 )) || fail "writer $w wrote only $written lines"
	tail -n +2 "$WORK/writer$w.out" | sort -n >"$WORK/acked$w"
	sort -n "${logs[$w]}" >"$WORK/seen$w"
	lost=$(comm -23 "$WORK/acked$w" "$WORK/seen$w" | wc -l)
	log "writer ${logs[$w]#"$R"}: $written lines written, $failed write failures, $lost lost"
	assert_eq "$lost" 0 "lines acknowledged but missing from ${logs[$w]#"$R"}"
done
assert_eq "$(wc -l <"$WORK/windows")" "$REFRESHES" "handovers that logged their read-only window"
log "reader: $reads reads, $base_reads of the base; read-only window per handover: $(sort -n "$WORK/windows" | awk '{a[NR] = $1} END {printf "median %s ms, longest %s ms", a[int((NR + 1) / 2)], a[NR]}')"
cp "$WORK/acked0" "$WORK/acked"
umount "$R/opt/app/data/inner" "$R/opt/app/data"

check "unmerge: the base again, every line kept in the upper directory, /opt's mode as before"
run_sysextd unmerge
assert_ok unmerge
assert_missing "$R/opt/log"
assert_missing "$R/opt/app/ext-file"
sort -n "$R/var/lib/extensions.mutable/opt/log" >"$WORK/upper"
assert_eq "$(comm -23 "$WORK/acked" "$WORK/upper" | wc -l)" 0 "acknowledged lines missing from the upper directory"
assert_eq "$(stat -c %A "$R/opt")" "$perm_opt" "mode of /opt after unmerge"
leftover=$(find "$R/var/lib/extensions.mutable" -maxdepth 1 -name '.sysextd-*-work.*' | wc -l)
assert_eq "$leftover" 0 "work directories left after unmerge"

check "a file held open for writing: the refresh waits, then refuses naming the process; the tree stays"
run_sysextd --mutable=yes merge
assert_ok "merge again"
# The holder is a process of its own: an fd of this shell would be inherited by every command
# it runs (timeout, sysextd), and the refusal names whichever holder it finds first.
cat >"$WORK/holder.py" <<'EOF'
import os, sys, time
path, work = sys.argv[1], sys.argv[2]
fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
open(os.path.join(work, "held-ready"), "w").close()
while not os.path.exists(os.path.join(work, "held-go")):
    time.sleep(0.02)
try:
    os.write(fd, b"still writable\n")
    res = "ok"
except OSError as e:
    res = str(e)
open(os.path.join(work, "held-done"), "w").write(res)
os.close(fd)
EOF
python3 "$WORK/holder.py" "$R/opt/held" "$WORK" &
holder=$!
on_exit "kill $holder 2>/dev/null || true"
for ((k = 0; k < 200; k++)); do [[ -e $WORK/held-ready ]] && break; sleep 0.05; done
gen_before=$(json_q "$(run_sysextd --json status >/dev/null; echo "$OUT")" 'd["generation"]')
run_sysextd --mutable=yes --always-refresh=yes refresh
assert_failed "refresh with a file held open for writing"
assert_contains "$ERR" "open for writing" "the refusal"
assert_contains "$ERR" "process $holder (python3) holds $R/opt/held open for writing" "the refusal names the process"
touch "$WORK/held-go"
wait "$holder"
assert_file_content "$WORK/held-done" ok
echo more >"$R/opt/more" || fail "/opt is no longer writable after the refused refresh"
run_sysextd --json status
assert_eq "$(json_q "$OUT" 'd["generation"]')" "$gen_before" "generation after the refused refresh"
run_sysextd --mutable=yes --always-refresh=yes refresh
assert_ok "refresh once the file is closed"
assert_file_content "$R/opt/held" "still writable"
assert_file_content "$R/opt/more" more
run_sysextd unmerge
assert_ok unmerge
