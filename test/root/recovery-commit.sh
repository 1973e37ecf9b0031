#!/bin/bash
# Finishing forward is a commit (issue 10, section 5).  Needs test hooks.
#  (a) a kill after every new tree went beneath its old top, or after the old tops were
#      detached but before the commit: the next command puts the new tree in place and
#      advances the generation by one, exactly like the interrupted commit would have;
#  (b) a commit that cannot be written (run/ full): the command says the new tree is live and
#      that it is recorded at the next start; once there is room, status shows the new
#      generation and no pending record;
#  (c) a pending record for a hierarchy that no longer exists does not make commands fail.
set -euo pipefail
# shellcheck source=test/lib.sh
. "$(dirname "$0")/../lib.sh"
enter_sandbox "$@"
require_cmd mkfs.erofs
require_fs erofs overlay
require_test_hooks
make_root

ext=$R/var/lib/extensions
t=$(ext_tree app)
for v in v1 v2; do
	ext_file "$t" usr/share/app/version "$v"
	ext_file "$t" opt/app/version "$v"
	mk_erofs "$t" "$WORK/$v.raw"
done

shows() {
	echo "$(cat "$R/usr/share/app/version" 2>/dev/null || echo base) $(cat "$R/opt/app/version" 2>/dev/null || echo base)"
}

journal_generation() {
	python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["generation"])' "$R/run/sysextd/state.json"
}

# status_generation — runs status, sets STATUS_GEN.
status_generation() {
	run_sysextd status --json
	assert_ok "status"
	STATUS_GEN=$(json_q "$OUT" 'd["generation"]')
}

# A small file system for the journal, filled up on demand.
mkdir -p "$R/run/sysextd"
mount -t tmpfs -o size=512k journal "$R/run/sysextd"

replace_image "$WORK/v1.raw" "$ext/app.raw"
run_sysextd merge
assert_ok merge
loops_merged=$(loop_ids)

# ---------------------------------------------------------------- (a)
for point in swap-after-beneath after-swap; do
	from=v$(($(cat "$R/usr/share/app/version" | tr -d v)))
	to=$([[ $from == v1 ]] && echo v2 || echo v1)
	check "(a) killed at $point during a refresh from $from to $to: the next command commits it"
	gen=$(journal_generation)
	replace_image "$WORK/$to.raw" "$ext/app.raw"
	SYSEXTD_TEST_HOOK=$point run_sysextd refresh
	assert_rc 137 "refresh killed at $point"
	journal_has_pending || fail "no pending record after the kill at $point"
	status_generation
	assert_eq "$STATUS_GEN" "$((gen + 1))" "generation after the next command"
	assert_eq "$(shows)" "$to $to" "versions after the next command"
	! journal_has_pending || fail "the pending record is still there"
	assert_eq "$(ours_at "$R/usr") $(ours_at "$R/opt")" "1 1" "one overlay each"
	assert_eq "$(journal_generation)" "$((gen + 1))" "generation in the journal"
	run_sysextd refresh
	assert_ok "refresh after the recovery"
	assert_contains "$ERR" "unchanged" "nothing left to do after the recovery"
done

# ---------------------------------------------------------------- (b)
check "(b) a commit that cannot be written: the message says the tree is live; it is recorded at the next start"
from=$(cat "$R/usr/share/app/version")
to=$([[ $from == v1 ]] && echo v2 || echo v1)
gen=$(journal_generation)
replace_image "$WORK/$to.raw" "$ext/app.raw"
SYSEXTD_TEST_HOOK=after-swap SYSEXTD_TEST_HOOK_EXEC="dd if=/dev/zero of='$R/run/sysextd/fill' bs=4k 2>/dev/null; true" \
	run_sysextd refresh
assert_rc 1 "refresh whose commit cannot be written"
assert_contains "$ERR" "live" "the message says the new tree is live"
assert_contains "$ERR" "next start" "the message says when it is recorded"
assert_contains "$ERR" "No space left on device" "the message says why"
assert_eq "$(shows)" "$to $to" "versions: the new tree is live"
rm -f "$R/run/sysextd/fill"
status_generation
assert_eq "$STATUS_GEN" "$((gen + 1))" "generation once there is room"
! journal_has_pending || fail "a pending record after the next start"
assert_eq "$(ours_at "$R/usr") $(ours_at "$R/opt")" "1 1" "one overlay each"

# ---------------------------------------------------------------- (d)
check "(d) killed between the hierarchies (usr's tree beneath, opt's not yet): what is live is recorded, marked incomplete, and the next refresh completes it"
from=$(cat "$R/usr/share/app/version")
to=$([[ $from == v1 ]] && echo v2 || echo v1)
gen=$(journal_generation)
replace_image "$WORK/$to.raw" "$ext/app.raw"
SYSEXTD_TEST_HOOK=swap-placed run_sysextd refresh
assert_rc 137 "refresh killed after usr's tree was placed"
status_generation
assert_eq "$STATUS_GEN" "$((gen + 1))" "generation: usr changed"
assert_eq "$(shows)" "$to $from" "versions: usr finished forward, opt as it was"
assert_eq "$(json_q "$OUT" 'd.get("incomplete", False)')" true "status says the transition is incomplete"
run_sysextd refresh
assert_ok "refresh completing it"
assert_eq "$(shows)" "$to $to" "versions after the refresh"
status_generation
assert_eq "$(json_q "$OUT" 'd.get("incomplete", False)')" false "complete again"
assert_eq "$(ours_at "$R/usr") $(ours_at "$R/opt")" "1 1" "one overlay each"

# ---------------------------------------------------------------- (c)
check "(c) a pending record for a hierarchy that no longer exists is dropped with a warning"
python3 - "$R/run/sysextd/state.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
j["pending"] = {"generation": j["generation"] + 1,
                "transitions": [{"hierarchy": "no/such/dir", "old_tree": None, "new_tree": "0123456789abcdef0123456789abcdef"}]}
j["hierarchies"].append({"hierarchy": "no/such/dir", "tree": None})
json.dump(j, open(sys.argv[1], "w"))
PY
printf '[Extensions]\nHierarchies=/usr /opt /no/such/dir\n' >"$WORK/more.conf"
run_sysextd --config="$WORK/more.conf" status
assert_ok "status with a pending record for a missing hierarchy"
assert_contains "$ERR" "no/such/dir" "the warning names it"
! journal_has_pending || fail "the pending record is still there"
run_sysextd --config="$WORK/more.conf" refresh
assert_ok "refresh"
run_sysextd unmerge
assert_ok "unmerge"
assert_eq "$(shows)" "base base" "versions after unmerge"
echo PASS
