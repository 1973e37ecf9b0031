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
#      writable;
#  (d) the journal lost (a corrupt record of the live writable trees): no work directory of a
#      mounted overlay is removed, and no second writable overlay is stacked on the same
#      upper directory.
# Needs test hooks.
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

check "merge --mutable=yes"
run_sysextd --mutable=yes merge
assert_ok "merge --mutable=yes"
echo host >"$WORK/conf"

# ---------------------------------------------------------------- (a)
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
	assert_not_contains "$ERR" "failed" "the hook's writes"
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
assert_loops_as_before "$loops_before"
