#!/bin/bash
# The writable handover (issue 16, §1; swap.c's opening comment and outcome table).
#  (a) a write through the old tree while the new one is being built, in a directory above a
#      mount that is carried over (at depths 1 to 4 below the hierarchy, a file mount too): the
#      new tree lists it, opens it and can create beside it, at once;
#  (b) a refused refresh (a file held open for writing on /opt) changes nothing, not even
#      for a moment: a writer appending to /usr every millisecond meanwhile sees no failure;
#  (c) a kill after the new trees were placed and before the old ones were sealed, with a
#      file held open for writing: the next command does not detach a tree that can still
#      be written (the holder's writes stay visible on the live /opt), and the tree is
#      writable; a kill after the seal: the next command finishes, both writable; an unmerge
#      killed after the seal: the next command makes both writable again;
#  (d) the records of the live writable trees lost (corrupt): no work directory of a mounted
#      overlay is removed, and no writable tree is stacked over one that may share its upper
#      directory (refused, naming it); unmounted by hand, the next refresh goes on;
#  (e) views of the old tree that the handover cannot carry over (a bind of a directory of it,
#      a second mount of it, a process working in it, a namespace that receives no
#      propagation) are named in a warning before the swap; the rest of the tree is swapped.
# Needs test hooks.  PARTS="b c" runs only those parts.
set -euo pipefail
# shellcheck source=test/lib.sh
. "$(dirname "$0")/../lib.sh"
enter_sandbox "$@"
require_cmd mkfs.erofs python3
require_fs erofs overlay
require_test_hooks
make_root
loops_before=$(loop_snapshot)

E=$R/var/lib/extensions
M=$R/var/lib/extensions.mutable
CASES=(c1 c2/d c3/d/e c4/d/e/f)
for v in v1 v2; do
	t=$(ext_tree app "$WORK/src/app-$v")
	ext_file "$t" usr/share/app/version "$v"
	ext_file "$t" opt/app/version "$v"
	for c in "${CASES[@]}"; do
		ext_file "$t" "opt/$c/data/.keep" ""
		ext_file "$t" "opt/$c/shipped" "$v"
	done
	ext_file "$t" opt/f1/d/conf "from the image"
	mk_erofs "$t" "$WORK/app-$v.raw"
done
replace_image "$WORK/app-v1.raw" "$E/app.raw"
cur=v1
next_version() { [[ $cur == v1 ]] && echo v2 || echo v1; }
part() { [[ " ${PARTS:-a b c d e} " == *" $1 "* ]]; }


# ---------------------------------------------------------------- (a)
if part a; then
check "merge --mutable=yes"
run_sysextd --mutable=yes merge
assert_ok "merge --mutable=yes"
echo host >"$WORK/conf"
# Each case: a tmpfs on /opt/CASE/data, never looked at before, so every directory above it
# is in the image's layer only; a write through the old tree creates a file in each of
# them (copying it up) after the new tree was built.
i=0
for c in "${CASES[@]}" f1/d; do
	i=$((i + 1))
	if [[ $c == f1/d ]]; then
		mount --bind "$WORK/conf" "$R/opt/f1/d/conf"
	else
		mount -t tmpfs "case$i" "$R/opt/$c/data"
		echo below >"$R/opt/$c/data/below"
	fi
	dirs=() p=
	IFS=/ read -ra parts <<<"$c"
	for part in "${parts[@]}"; do
		p=${p:+$p/}$part
		dirs+=("$p")
	done
	hook=
	for d in "${dirs[@]}"; do
		hook+="echo written-$i >'$R/opt/$d/new-$i' && mkdir '$R/opt/$d/dir-$i' && echo in-dir >'$R/opt/$d/dir-$i/f' && "
	done
	hook+="true"
	to=$(next_version)
	check "(a) case $i: writes in /opt/${c} and the directories above it while the new tree waits: all in the new tree"
	replace_image "$WORK/app-$to.raw" "$E/app.raw"
	SYSEXTD_TEST_HOOK=before-swap SYSEXTD_TEST_HOOK_EXEC="$hook" run_sysextd --mutable=yes refresh
	assert_ok "refresh $i"
	assert_not_contains "$ERR" "test hook" "the hook's writes"
	cur=$to
	assert_file_content "$R/opt/app/version" "$cur"
	for d in "${dirs[@]}"; do
		assert_file_content "$R/opt/$d/new-$i" "written-$i"
		assert_file_content "$R/opt/$d/dir-$i/f" in-dir
		ls "$R/opt/$d" | grep -qx "new-$i" || fail "/opt/$d does not list new-$i: $(ls "$R/opt/$d" | tr '\n' ' ')"
		ls "$R/opt/$d" | grep -qx "dir-$i" || fail "/opt/$d does not list dir-$i"
		echo after >"$R/opt/$d/after-$i" || fail "cannot create a file in /opt/$d after the refresh"
		mkdir "$R/opt/$d/after-dir-$i" || fail "cannot create a directory in /opt/$d after the refresh"
		assert_file_content "$M/opt/$d/after-$i" after
	done
	if [[ $c == f1/d ]]; then
		assert_file_content "$R/opt/f1/d/conf" host
	else
		assert_file_content "$R/opt/$c/data/below" below
		assert_file_content "$R/opt/$c/shipped" "$cur"
	fi
done

check "(a) unmerge keeps every file in the upper directory"
for m in $(findmnt -rn -o TARGET | grep "^$R/opt/" | sort -r); do umount "$m"; done
run_sysextd unmerge
assert_ok unmerge
for ((k = 1; k <= i; k++)); do
	[[ $(find "$M/opt" -name "new-$k" | wc -l) -ge 1 ]] || fail "new-$k missing from the upper directory"
done
fi

# ---------------------------------------------------------------- (b)
if part b; then
cat >"$WORK/writer.py" <<'PY'
import os, sys, time
path, stop, out = sys.argv[1], sys.argv[2], sys.argv[3]
ok = failed = 0
while not os.path.exists(stop):
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, b"x\n")
        finally:
            os.close(fd)
        ok += 1
    except OSError:
        failed += 1
    time.sleep(0.001)
open(out, "w").write("%d %d\n" % (ok, failed))
PY
cat >"$WORK/holder.py" <<'PY'
import ctypes, os, sys, time
how, path, ready = sys.argv[1], sys.argv[2], sys.argv[3]
fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
if how == "mapping":
    # libc's mmap, not Python's (which keeps a duplicate of the fd): only the mapping holds it
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    os.ftruncate(fd, 4096)
    addr = libc.mmap(None, 4096, 3, 1, fd, 0)  # PROT_READ|PROT_WRITE, MAP_SHARED
    assert addr not in (None, ctypes.c_void_p(-1).value), "mmap failed"
    os.close(fd)
open(ready, "w").close()
time.sleep(120)
PY

run_sysextd --mutable=yes merge
assert_ok "merge --mutable=yes for (b)"
for how in fd other-namespace mapping; do
	check "(b) a refresh refused because of a holder on /opt ($how) leaves /usr writable all along"
	rm -f "$WORK/ready" "$WORK/stop" "$WORK/writer.out"
	case $how in
	fd) python3 "$WORK/holder.py" fd "$R/opt/held-$how" "$WORK/ready" & ;;
	other-namespace) unshare -m python3 "$WORK/holder.py" fd "$R/opt/held-$how" "$WORK/ready" & ;;
	mapping) python3 "$WORK/holder.py" mapping "$R/opt/held-$how" "$WORK/ready" & ;;
	esac
	holder=$!
	on_exit "kill $holder 2>/dev/null || true"
	for ((k = 0; k < 200; k++)); do [[ -e $WORK/ready ]] && break; sleep 0.05; done
	[[ -e $WORK/ready ]] || fail "the holder did not start"
	python3 "$WORK/writer.py" "$R/usr/log" "$WORK/stop" "$WORK/writer.out" &
	writer=$!
	on_exit "touch '$WORK/stop'; kill $writer 2>/dev/null || true"
	sleep 0.3
	ids_before="$(top_mount_id "$R/usr") $(top_mount_id "$R/opt")"
	run_sysextd --mutable=yes --always-refresh=yes refresh
	assert_failed "refresh with a holder on /opt ($how)"
	assert_contains "$ERR" "The writable tree on $R/opt stays" "the refusal ($how)"
	assert_contains "$ERR" "process $holder " "the refusal names the holder ($how)"
	if [[ $how == mapping ]]; then
		assert_contains "$ERR" "has $R/opt/held-$how mapped shared and writable" "the refusal ($how)"
	else
		assert_contains "$ERR" "holds $R/opt/held-$how open for writing" "the refusal ($how)"
	fi
	sleep 0.3
	touch "$WORK/stop"
	wait "$writer"
	read -r ok failed <"$WORK/writer.out"
	log "writer on /usr during the refused refresh ($how): $ok writes, $failed failed"
	(( ok > 100 )) || fail "the writer wrote only $ok times"
	assert_eq "$failed" 0 "writes on /usr that failed during the refused refresh ($how)"
	assert_eq "$(top_mount_id "$R/usr") $(top_mount_id "$R/opt")" "$ids_before" "the live trees after the refusal ($how)"
	echo more >>"$R/opt/after-$how" || fail "/opt is not writable after the refusal ($how)"
	kill "$holder"; wait "$holder" 2>/dev/null || true
	run_sysextd --mutable=yes --always-refresh=yes refresh
	assert_ok "the refresh once the holder is gone ($how)"
done
run_sysextd unmerge
assert_ok "unmerge after (b)"
fi

# ---------------------------------------------------------------- (c)
if part c; then
cat >"$WORK/cwd-holder.py" <<'PY'
import os, sys, time
opt, work = sys.argv[1], sys.argv[2]
os.chdir(opt)
held = os.open("held-c", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
os.write(held, b"before\n")
open(os.path.join(work, "ready-c"), "w").close()
while not os.path.exists(os.path.join(work, "go-c")):
    time.sleep(0.02)
res = "ok"
try:
    os.write(held, b"after\n")
    with open("created-after-c", "w") as f:   # through the tree its cwd is in
        f.write("created\n")
except OSError as e:
    res = "failed: %s" % e
open(os.path.join(work, "done-c"), "w").write(res)
time.sleep(120)
PY

run_sysextd --mutable=yes merge
assert_ok "merge --mutable=yes for (c)"
to=$(next_version)
check "(c) killed after the new trees were placed, a file held open for writing on /opt: no unsealed tree is detached"
rm -f "$WORK"/{ready,go,done}-c
python3 "$WORK/cwd-holder.py" "$R/opt" "$WORK" &
cholder=$!
on_exit "kill $cholder 2>/dev/null || true"
for ((k = 0; k < 200; k++)); do [[ -e $WORK/ready-c ]] && break; sleep 0.05; done
replace_image "$WORK/app-$to.raw" "$E/app.raw"
SYSEXTD_TEST_HOOK=swap-after-beneath run_sysextd --mutable=yes refresh
assert_rc 137 "refresh killed after the new trees were placed"
journal_has_pending || fail "no pending record after the kill"
echo usr-write >"$R/usr/usr-c" || fail "/usr is not writable after the kill"
run_sysextd status
assert_ok "status after the kill, the file still held"
assert_contains "$ERR" "cannot be finished yet" "status's warning"
assert_contains "$ERR" "process $cholder " "status's warning names the holder"
assert_file_content "$R/opt/app/version" "$cur"
echo usr-write-2 >"$R/usr/usr-c2" || fail "/usr is not writable after the recovery waited"
echo opt-write >"$R/opt/opt-c" || fail "/opt is not writable after the recovery waited"
touch "$WORK/go-c"
for ((k = 0; k < 200; k++)); do [[ -e $WORK/done-c ]] && break; sleep 0.05; done
assert_file_content "$WORK/done-c" ok
assert_file_content "$R/opt/held-c" "before
after"
assert_file_content "$R/opt/created-after-c" created
run_sysextd --mutable=yes refresh
assert_failed "a refresh while the interrupted transition waits"
assert_contains "$ERR" "cannot be finished yet" "the refusal"
assert_contains "$ERR" "Nothing was changed" "the refusal"

check "(c) once the file is closed, the next command finishes the transition: every write is in the new tree"
kill "$cholder"; wait "$cholder" 2>/dev/null || true
run_sysextd status
assert_ok "status after the holder is gone"
journal_has_pending && fail "the pending record is still there"
cur=$to
assert_file_content "$R/opt/app/version" "$cur"
assert_file_content "$R/usr/share/app/version" "$cur"
assert_file_content "$R/opt/held-c" "before
after"
assert_file_content "$R/opt/created-after-c" created
assert_file_content "$R/opt/opt-c" opt-write
assert_file_content "$R/usr/usr-c2" usr-write-2
echo again >"$R/opt/opt-c3" || fail "/opt is not writable after the transition was finished"
echo again >"$R/usr/usr-c3" || fail "/usr is not writable after the transition was finished"
assert_eq "$(ours_at "$R/opt") $(ours_at "$R/usr")" "1 1" "sysextd overlays on /opt and /usr"

check "(c) killed after the seal of the old trees: the next command finishes it, both writable"
to=$(next_version)
replace_image "$WORK/app-$to.raw" "$E/app.raw"
SYSEXTD_TEST_HOOK=swap-sealed run_sysextd --mutable=yes refresh
assert_rc 137 "refresh killed after the seal"
run_sysextd status
assert_ok "status after the kill"
cur=$to
assert_file_content "$R/opt/app/version" "$cur"
echo again >"$R/opt/opt-c4" || fail "/opt is not writable after the transition was finished"
echo again >"$R/usr/usr-c4" || fail "/usr is not writable after the transition was finished"
assert_file_content "$R/opt/opt-c3" again
check "(c) killed between the seals of /usr and /opt, then a file held open on /opt: the next command leaves both writable"
to=$(next_version)
replace_image "$WORK/app-$to.raw" "$E/app.raw"
# the hook's shell kills its parent (sysextd) right after the first seal
SYSEXTD_TEST_HOOK=swap-seal-one SYSEXTD_TEST_HOOK_EXEC='kill -9 $PPID; sleep 5' run_sysextd --mutable=yes refresh
assert_rc 137 "refresh killed after its first seal"
sealed=
echo x 2>/dev/null >"$R/usr/probe-c6" || sealed+=usr
echo x 2>/dev/null >"$R/opt/probe-c6" || sealed+=opt
assert_eq "$sealed" usr "the trees sealed at the kill"
rm -f "$WORK"/{ready,go,done}-c
python3 "$WORK/cwd-holder.py" "$R/opt" "$WORK" &
cholder=$!
on_exit "kill $cholder 2>/dev/null || true"
for ((k = 0; k < 200; k++)); do [[ -e $WORK/ready-c ]] && break; sleep 0.05; done
run_sysextd status
assert_ok "status with the file held on /opt"
assert_contains "$ERR" "cannot be finished yet" "status's warning"
echo again >"$R/usr/usr-c6" || fail "/usr stays read-only while the interrupted transition waits"
echo again >"$R/opt/opt-c6" || fail "/opt is not writable while the interrupted transition waits"
kill "$cholder"; wait "$cholder" 2>/dev/null || true
run_sysextd status
assert_ok "status once the holder is gone"
journal_has_pending && fail "the pending record is still there"
cur=$to
assert_file_content "$R/opt/app/version" "$cur"
assert_file_content "$R/usr/usr-c6" again
echo again >"$R/usr/usr-c7" || fail "/usr is not writable after the transition was finished"

check "(c) an unmerge killed after the seal: the next command makes the trees writable again, and status says so"
SYSEXTD_TEST_HOOK=swap-sealed run_sysextd unmerge
assert_rc 137 "unmerge killed after the seal"
echo x 2>/dev/null >"$R/opt/opt-c5" && fail "/opt was not sealed by the unmerge"
run_sysextd --json=short status
assert_ok "status after the kill"
echo again >"$R/opt/opt-c5" || fail "/opt is still read-only after the next command"
echo again >"$R/usr/usr-c5" || fail "/usr is still read-only after the next command"
assert_eq "$(json_q "$OUT" '[h.get("writable") for h in d if h["hierarchy"] in ("/usr", "/opt")]')" "[true, true]" "status's writable"
run_sysextd unmerge
assert_ok "unmerge after (c)"
fi

# ---------------------------------------------------------------- (d)
if part d; then
work_dirs() { find "$M" -maxdepth 1 -name '.sysextd-*-work.*' -printf '%f\n' | sort | tr '\n' ' '; }
for how in refresh refresh-import merge; do
	check "(d) the records of the live writable trees lost: $how neither removes their work directories nor stacks a writable tree on them"
	run_sysextd --mutable=yes merge
	assert_ok "merge --mutable=yes for (d)"
	echo kept >"$R/opt/kept-d"
	dirs_before=$(work_dirs)
	for f in "$R"/run/sysextd/trees/*.json; do echo garbage >"$f"; done
	to=$(next_version)
	replace_image "$WORK/app-$to.raw" "$E/app.raw"
	case $how in
	refresh) run_sysextd --mutable=yes refresh ;;
	refresh-import) run_sysextd --mutable=import refresh ;;
	merge) run_sysextd --mutable=yes merge ;;
	esac
	assert_failed "$how over writable trees without a record"
	[[ $how == merge ]] || assert_contains "$ERR" "no record of (its record was lost)" "the refusal"
	assert_eq "$(work_dirs)" "$dirs_before" "work directories after the refused $how"
	assert_eq "$(ours_at "$R/opt") $(ours_at "$R/usr")" "1 1" "sysextd overlays on /opt and /usr"
	echo copied-up >>"$R/opt/app/version" || fail "a copy-up on /opt fails after the refused $how"
	assert_file_content "$R/opt/kept-d" kept
	check "(d) unmounted by hand ($how): the next refresh builds writable trees, the old work directories go"
	umount -l "$R/opt"
	umount -l "$R/usr"
	run_sysextd --mutable=yes refresh
	assert_ok "refresh after the trees without a record were unmounted"
	cur=$to
	assert_file_content "$R/opt/kept-d" kept
	for d in $dirs_before; do
		[[ -e $M/$d ]] && fail "the work directory $d of the unmounted tree is still there"
	done
	echo more >"$R/opt/more-d" || fail "/opt is not writable"
	run_sysextd unmerge
	assert_ok "unmerge after (d)"
	rm -f "$M/opt/app/version"
done
fi

# ---------------------------------------------------------------- (e)
if part e; then
check "(e) views of the old writable tree that the handover leaves behind are named before it, and only they turn read-only"
run_sysextd --mutable=yes merge
assert_ok "merge --mutable=yes for (e)"
mkdir -p "$WORK/bind-e" "$WORK/whole-e"
mount --bind "$R/opt/app" "$WORK/bind-e"
mount --bind "$R/opt" "$WORK/whole-e"
(cd "$R/opt/c1" && exec sleep 120) &
cwd_pid=$!
unshare -m --propagation private sleep 120 &
ns_pid=$!
on_exit "kill $cwd_pid $ns_pid 2>/dev/null || true"
sleep 0.3
to=$(next_version)
replace_image "$WORK/app-$to.raw" "$E/app.raw"
run_sysextd --mutable=yes refresh
assert_ok "refresh with other views of /opt"
cur=$to
assert_contains "$ERR" "The previous writable tree of $R/opt stays in use elsewhere" "the warning"
assert_contains "$ERR" "its directory /app is mounted at $WORK/bind-e" "the warning names the bind"
assert_contains "$ERR" "it is mounted at $WORK/whole-e too" "the warning names the second mount"
assert_contains "$ERR" "process $cwd_pid (sleep) has its working directory in $R/opt/c1" "the warning names the process"
assert_contains "$ERR" "the mount namespace of process $ns_pid has it at $R/opt and receives no changes" "the warning names the namespace"
echo x >"$WORK/bind-e/x" 2>/dev/null && fail "the bind of the old tree is still writable"
echo x >"$R/opt/app/x-e" || fail "the live /opt is not writable"
check "(e) a handover with no other view warns of none"
umount "$WORK/bind-e" "$WORK/whole-e"
kill $cwd_pid $ns_pid; wait $cwd_pid $ns_pid 2>/dev/null || true
to=$(next_version)
replace_image "$WORK/app-$to.raw" "$E/app.raw"
run_sysextd --mutable=yes refresh
assert_ok "refresh with no other view"
cur=$to
assert_not_contains "$ERR" "stays in use elsewhere" "the refresh's output"
run_sysextd unmerge
assert_ok "unmerge after (e)"
fi

assert_loops_as_before "$loops_before"
