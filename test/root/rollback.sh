#!/bin/bash
# Generations and rollback (issue 18, section 1), with the versions kept in a
# version directory as systemd-sysupdate leaves them (app.raw.v/app_N.raw):
#
#  A. merge v1, refresh to v2, then 21 plain rollbacks while readers in the
#     root namespace and in a service namespace (a slave) read a file in a
#     tight loop: each rollback goes to the generation before, so they
#     alternate v1 and v2; no reader ever sees the base or an error
#     (windows=0), the content goes back each time, the mount table stays flat;
#  B. rollback --to=GENERATION;
#  C. a rollback pins the version it went back to: a later plain refresh (what
#     the path unit runs) keeps it, status and list show the pin; a version
#     newer than the one rolled back from unpins it;
#  D. rollback --unpin: the pins go, the newest is merged;
#  E. refused when an image of the generation is gone, or is another file
#     now: one clear line naming the image, the live tree unchanged (same top
#     mount, same content, same generation); with the file back it works;
#  F. Generations= limits what the journal keeps: an older one is refused as
#     not kept;
#  G. a generation with writable trees or --force is gone back to only when
#     the caller says so;
#  H. the history is generations/N.json, each the state.json that recorded
#     generation N (a hard link), nothing of it in state.json (read by every
#     status); the history of an older sysextd (generations.json, or carried
#     in state.json) is read where it is by status, still rolls back, and
#     moves to generations/ with the next transition; a damaged, FIFO or
#     symlinked generations/N.json is left by status (with a warning, the
#     rest of the history listed) and moved aside by the next transition; so
#     is a damaged generations.json; the record of a generation is written
#     with the commit that makes it live (killed right after it, it is there).
set -euo pipefail
# shellcheck source=test/lib.sh
. "$(dirname "$0")/../lib.sh"
enter_sandbox "$@"
require_cmd mkfs.erofs nsenter cc timeout python3
require_fs erofs overlay
make_root

N_ROLLBACK=${N_ROLLBACK:-21} # odd: ends on v1
READER_LIMIT=150
vdir=$R/var/lib/extensions/app.raw.v
file=usr/share/app/version

# ------------------------------------------------------------ the reader
cat >"$WORK/reader.c" <<'C'
/* reader FILE OUT STOPFILE SECONDS: read FILE in a tight loop and count what
 * comes back: "v1", "v2", "base", errors. Stops when STOPFILE exists or after
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

# ------------------------------------------------------------ root and images
mkdir -p "$R/usr/share/app" "$vdir"
echo base >"$R/$file"
echo "base opt" >"$R/opt/app/version"

t=$(ext_tree app)
for v in 1 2 3 4; do
	ext_file "$t" "$file" "v$v"
	ext_file "$t" opt/app/version "v$v opt"
	mk_erofs "$t" "$WORK/v$v.raw"
done
loops_before=$(loop_snapshot)

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
unshare -m --propagation slave sleep 600 </dev/null >/dev/null 2>&1 &
svc=$!
pids+=("$svc")
for ((i = 0; i < 100; i++)); do
	ns=$(readlink "/proc/$svc/ns/mnt" 2>/dev/null || true)
	[[ -n "$ns" && "$ns" != "$our_ns" ]] && break
	sleep 0.05
done
[[ "$ns" != "$our_ns" ]] || fail "the service namespace did not come up"

# content [svc] — usr and opt versions as one line, "v1/v1 opt".
content() {
	if [[ ${1:-} == svc ]]; then
		nsenter -t "$svc" -m -- cat "$R/$file" "$R/opt/app/version" 2>&1 | paste -sd/ || true
	else
		cat "$R/$file" "$R/opt/app/version" 2>&1 | paste -sd/ || true
	fi
}
expect() { # VERSION WHAT
	assert_eq "$(content)" "$1/$1 opt" "$2 (root namespace)"
	assert_eq "$(content svc)" "$1/$1 opt" "$2 (service namespace)"
}
# status_json — sets STATUS (status --json) and GEN (its generation).
status_json() {
	run_sysextd status --json >/dev/null
	assert_ok "status --json"
	STATUS=$OUT
	GEN=$(json_q "$STATUS" 'd["generation"]')
}

# ------------------------------------------------------------ A
check "merge v1, refresh to v2: two generations"
cp "$WORK/v1.raw" "$vdir/app_1.raw"
run_sysextd merge
assert_ok merge
expect v1 "after merge"
cp "$WORK/v2.raw" "$vdir/app_2.raw"
run_sysextd refresh
assert_ok refresh
expect v2 "after refresh"
status_json
g=$GEN
assert_eq "$(json_q "$STATUS" '[x["generation"] for x in d["generations"]][-2:] == [int(d["generation"]) - 1, int(d["generation"])]')" true \
	"the last two generations are kept"
assert_eq "$(json_q "$STATUS" '[[i["name"], i["version"]] for i in d["generations"][-1]["images"]]')" '[["app", "2"]]' \
	"the live generation records app version 2"
mounts_before=$(wc -l </proc/self/mountinfo)

rm -f "$WORK/stop"
"$WORK/reader" "$R/$file" "$WORK/reads.root" "$WORK/stop" "$READER_LIMIT" &
r_root=$!
pids+=("$r_root")
nsenter -t "$svc" -m -- "$WORK/reader" "$R/$file" "$WORK/reads.svc" "$WORK/stop" "$READER_LIMIT" &
r_svc=$!
pids+=("$r_svc")
for out in "$WORK/reads.root" "$WORK/reads.svc"; do
	for ((i = 0; i < 200; i++)); do
		[[ -e "$out.started" ]] && break
		sleep 0.05
	done
	[[ -e "$out.started" ]] || fail "reader $out did not start"
done

check "$N_ROLLBACK rollbacks to the generation before, with readers: v1 and v2 alternate"
want=v2
for ((n = 1; n <= N_ROLLBACK; n++)); do
	if [[ $want == v2 ]]; then want=v1; else want=v2; fi
	run_sysextd rollback >/dev/null
	assert_ok "rollback $n"
	assert_eq "$(content)" "$want/$want opt" "rollback $n (root namespace)"
	if ((n % 5 == 0)); then
		assert_eq "$(content svc)" "$want/$want opt" "rollback $n (service namespace)"
	fi
done
touch "$WORK/stop"
wait "$r_root" || fail "the root reader failed"
wait "$r_svc" || fail "the service reader failed"

check "no reader saw the base or an error (windows=0), both saw both versions"
bad=
for name in root svc; do
	read -r c1 c2 cb ce first <"$WORK/reads.$name" || fail "no counts from the $name reader"
	log "reader $name: v1=$c1 v2=$c2 base=$cb errors=$ce first-error=$first"
	echo "# windows=$cb ($name reader)"
	((cb == 0)) || bad+="$name reader saw the base $cb times; "
	((ce == 0)) || bad+="$name reader had $ce errors (first: $first); "
	((c1 > 0 && c2 > 0)) || bad+="$name reader did not see both versions (v1=$c1 v2=$c2); "
done
[[ -z "$bad" ]] || fail "$bad"
expect v1 "after the rollbacks"
assert_eq "$(wc -l </proc/self/mountinfo)" "$mounts_before" "mountinfo lines after the rollbacks"
assert_eq "$(ours_at "$R/usr")" 1 "sysextd overlays at usr"
assert_eq "$(ours_at "$R/opt")" 1 "sysextd overlays at opt"
status_json
g=$GEN
assert_eq "$g" "$((2 + N_ROLLBACK))" "each rollback is a new generation"
assert_eq "$(json_q "$STATUS" 'd["last_rollback"]["reason"]')" command "status: the last rollback was asked for"
assert_eq "$(json_q "$STATUS" 'd["last_rollback"]["to"]')" "$((g - 2))" "status: the last rollback went to the generation before"

# ------------------------------------------------------------ B
check "rollback --to=GENERATION"
# Kept (Generations=3): g-2 (v1), g-1 (v2), g (v1).
run_sysextd rollback --to=$((g - 1))
assert_ok "rollback --to=$((g - 1))"
expect v2 "after rollback --to=$((g - 1))"
status_json
assert_eq "$GEN" "$((g + 1))" "generation after rollback --to"
assert_eq "$(json_q "$STATUS" 'd["last_rollback"]["to"]')" "$((g - 1))" "status: rolled back to"
run_sysextd rollback --to=$((g + 1))
assert_failed "rollback --to= the live generation"
assert_contains "$ERR" "is the live one"

# ------------------------------------------------------------ C
check "a rollback pins what it went back to; a plain refresh keeps it"
run_sysextd rollback
assert_ok "rollback to v1"
expect v1 "after the rollback to v1"
status_json
assert_eq "$(json_q "$STATUS" '[[p["name"], p["version"], p["from_version"]] for p in d["pins"]]')" '[["app", "1", "2"]]' \
	"status --json: app pinned at 1, rolled back from 2"
run_sysextd status
assert_ok status
assert_contains "$OUT" "Pinned: app at version 1"
status_json
g=$GEN
run_sysextd refresh
assert_ok "plain refresh with a pin"
expect v1 "a plain refresh keeps the pinned version"
status_json
assert_eq "$GEN" "$g" "the plain refresh changed nothing"
run_sysextd refresh --always-refresh=yes
assert_ok "refresh --always-refresh=yes with a pin"
expect v1 "a forced refresh keeps the pinned version too"
run_sysextd list --json
assert_ok "list --json"
assert_eq "$(json_q "$OUT" '[[i["name"], i.get("version"), i["pinned"]] for i in d]')" '[["app", "1", true]]' \
	"list --json: the pinned version, marked pinned"
run_sysextd list
assert_ok list
assert_contains "$OUT" "pinned"

check "a version newer than the one rolled back from unpins"
cp "$WORK/v3.raw" "$vdir/app_3.raw"
# v3's content is "v3": the readers are gone, check by content.
run_sysextd refresh
assert_ok "refresh with app 3"
assert_eq "$(content)" "v3/v3 opt" "app 3 is merged"
status_json
assert_eq "$(json_q "$STATUS" 'd["pins"]')" '[]' "no pin left"

# ------------------------------------------------------------ D
check "rollback --unpin"
run_sysextd rollback
assert_ok "rollback from v3"
expect v1 "after the rollback from v3 (the generation before had v1)"
run_sysextd refresh
assert_ok "refresh with the pin"
expect v1 "still pinned"
run_sysextd rollback --unpin
assert_ok "rollback --unpin"
assert_eq "$(content)" "v3/v3 opt" "unpinned: the newest is merged"
status_json
assert_eq "$(json_q "$STATUS" 'd["pins"]')" '[]' "no pin after --unpin"

# ------------------------------------------------------------ E
check "refused when an image of the generation is gone; the live tree unchanged"
# Kept: v1 (g-1) and v3 (g), the one before them v3.
status_json
g=$GEN
top_before=$(top_mount_id "$R/usr")
mv "$vdir/app_1.raw" "$R/app_1.aside"  # same file system: the very inode comes back
run_sysextd rollback
assert_failed "rollback to a generation whose image is gone"
assert_eq "$(wc -l <<<"$ERR")" 1 "one line of error"
assert_contains "$ERR" "Cannot roll back to generation $((g - 1)): image app version 1 ($vdir/app_1.raw,"
assert_contains "$ERR" "is gone or changed; put it back or roll back to another generation."
assert_eq "$(content)" "v3/v3 opt" "the live tree is unchanged"
assert_eq "$(top_mount_id "$R/usr")" "$top_before" "the same tree is live"
status_json
assert_eq "$GEN" "$g" "no new generation"

check "refused when the image is another file of the same name"
cp "$WORK/v1.raw" "$vdir/app_1.raw"
run_sysextd rollback
assert_failed "rollback to a generation whose image was replaced"
assert_contains "$ERR" "image app version 1"
assert_eq "$(content)" "v3/v3 opt" "the live tree is unchanged"
assert_eq "$(top_mount_id "$R/usr")" "$top_before" "the same tree is live"

check "with the very file back, the rollback works"
mv -f "$R/app_1.aside" "$vdir/app_1.raw"
run_sysextd rollback
assert_ok "rollback with the image back"
expect v1 "after the rollback"

# ------------------------------------------------------------ F
check "Generations= limits what is kept"
mkdir -p "$R/etc/sysextd"
printf '[Extensions]\nGenerations=2\n' >"$R/etc/sysextd/sysextd.conf"
cp "$WORK/v4.raw" "$vdir/app_4.raw"
run_sysextd refresh
assert_ok "refresh to app 4 (newer than 3: unpinned)"
assert_eq "$(content)" "v4/v4 opt" "app 4 is merged"
status_json
g=$GEN
assert_eq "$(json_q "$STATUS" '[x["generation"] for x in d["generations"]]')" "[$((g - 1)), $g]" "two generations kept"
run_sysextd rollback --to=$((g - 2))
assert_failed "rollback to a generation no longer kept"
assert_contains "$ERR" "Cannot roll back to generation $((g - 2)): it is not kept"
assert_eq "$(content)" "v4/v4 opt" "the live tree is unchanged"
run_sysextd rollback
assert_ok "rollback to the one kept before"
expect v1 "after the rollback"

# ------------------------------------------------------------ G
check "a generation with writable trees or --force is gone back to only when asked for"
# v1 is live (pinned); a refresh with --mutable=yes, then one without.
run_sysextd rollback --unpin
assert_ok "rollback --unpin"
run_sysextd refresh --mutable=yes --always-refresh=yes
assert_ok "refresh with --mutable=yes"
status_json
g_mut=$GEN
run_sysextd refresh --always-refresh=yes
assert_ok "refresh with the configured mode"
status_json
top_before=$(top_mount_id "$R/usr")
run_sysextd rollback --to=$g_mut
assert_failed "rollback to a generation with writable trees, without --mutable"
assert_eq "$(wc -l <<<"$ERR")" 1 "one line of error"
assert_contains "$ERR" "Generation $g_mut had its sysext trees merged with --mutable=yes, which sysextd.conf does not say now: roll back to it with --mutable=yes"
assert_eq "$(top_mount_id "$R/usr")" "$top_before" "the same tree is live"
run_sysextd rollback --to=$g_mut --mutable=yes
assert_ok "rollback --mutable=yes to it"
run_sysextd refresh --force --always-refresh=yes
assert_ok "refresh --force"
status_json
g_force=$GEN
run_sysextd refresh --always-refresh=yes
assert_ok "refresh without --force"
top_before=$(top_mount_id "$R/usr")
run_sysextd rollback --to=$g_force
assert_failed "rollback to a generation merged with --force, without --force"
assert_contains "$ERR" "Generation $g_force was merged with --force: roll back to it with --force, or to another generation."
assert_eq "$(top_mount_id "$R/usr")" "$top_before" "the same tree is live"
run_sysextd rollback --to=$g_force --force
assert_ok "rollback --force to it"

# ------------------------------------------------------------ H
check "the history is generations/N.json, the state.json that recorded N: nothing of it in state.json"
J=$R/run/sysextd
assert_eq "$(json_q "$(cat "$J/state.json")" '"generations" in d')" false "state.json without the history"
status_json
g=$GEN
kept=$(json_q "$STATUS" '[x["generation"] for x in d["generations"]]')
assert_eq "$kept" "[$((g - 1)), $g]" "status lists the history of generations/"
assert_eq "$(ls "$J/generations" | tr '\n' ' ')" "$((g - 1)).json $g.json " "one file per generation kept"
# The record is the state.json the commit saved (a hard link); the rollback saved its pins
# after it, in a new state.json: the same generation, time, modes and images.
assert_eq "$(python3 -c '
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
print([a[k] == b[k] for k in ("generation", "when", "mutable", "images")])' "$J/generations/$g.json" "$J/state.json")" \
	"[True, True, True, True]" "generations/$g.json is the live generation as its commit saved it"
assert_eq "$(json_q "$(cat "$J/generations/$g.json")" '[d["generation"], "when" in d, "mutable" in d]')" "[$g, true, true]" \
	"with the generation's time and modes"

# The history as an earlier sysextd kept it: one entry per generation, compatible images only.
legacy_history() {
	python3 - "$J" "$1" <<'PY'
import json, os, sys
d, where = sys.argv[1:3]
gens = []
for n in sorted(int(f[:-5]) for f in os.listdir(d + "/generations") if f.endswith(".json")):
    s = json.load(open(f"{d}/generations/{n}.json"))
    gens.append({"generation": n, "when": s["when"], "forced": s["forced"], "mutable": s["mutable"],
                 "images": [i for i in s["images"] if i["status"] == "compatible"]})
    os.unlink(f"{d}/generations/{n}.json")
os.rmdir(d + "/generations")
if where == "file":
    json.dump({"generations": gens}, open(d + "/generations.json", "w"), indent=2)
else:
    state = json.load(open(d + "/state.json"))
    for k in ("when", "mutable"):
        state.pop(k, None)
    state["generations"] = gens
    json.dump(state, open(d + "/state.json.new", "w"), indent=2)
    os.rename(d + "/state.json.new", d + "/state.json")
PY
}

check "generations.json of an older sysextd: read where it is by status, moved to generations/ by the next transition"
legacy_history file
status_json
assert_eq "$(json_q "$STATUS" '[x["generation"] for x in d["generations"]]')" "$kept" "the history read from generations.json"
[[ -f $J/generations.json && ! -e $J/generations ]] || fail "status wrote: $(ls "$J")"
run_sysextd refresh --always-refresh=yes
assert_ok "a refresh records the next generation"
[[ ! -e $J/generations.json ]] || fail "generations.json still there"
assert_eq "$(ls "$J/generations" | tr '\n' ' ')" "$g.json $((g + 1)).json " "moved to generations/, the oldest pruned (Generations=2)"
# Once more: generation g was merged with --force (G), and what follows rolls back to the
# generation before the live one.
run_sysextd refresh --always-refresh=yes
assert_ok "a refresh"
g=$((g + 2))
kept="[$((g - 1)), $g]"

check "a state.json of an older sysextd, carrying the history: read from there, moved by the next save"
legacy_history state
status_json
assert_eq "$(json_q "$STATUS" '[x["generation"] for x in d["generations"]]')" "$kept" "the history read from the old state.json"
top_before=$(top_mount_id "$R/usr")
run_sysextd rollback
assert_ok "rollback with the history in the old state.json"
assert_contains "$ERR" "Rolled back to the images of generation $((g - 1))" "the rollback's target"
status_json
assert_eq "$GEN" "$((g + 1))" "a new generation"
assert_eq "$(json_q "$STATUS" '[x["generation"] for x in d["generations"]]')" "[$g, $((g + 1))]" "the history goes on"
assert_eq "$(json_q "$(cat "$J/state.json")" '"generations" in d')" false "moved out of state.json"
assert_eq "$(ls "$J/generations" | tr '\n' ' ')" "$g.json $((g + 1)).json " "moved to generations/"

check "a generations/N.json that fails validation: status leaves it and lists the rest, the next transition moves it aside"
status_json
old=$((GEN - 1))
cp -p "$J/generations/$old.json" "$R/good.json"
for bad in '{"generation":"x"}' '{}' "$(head -c 2000 /dev/urandom | base64 -w0)" another fifo symlink; do
	rm -f "$J/generations/$old.json" "$J/generations/$old.json.corrupt"
	case $bad in
	fifo) mkfifo "$J/generations/$old.json" ;;
	symlink) ln -s /dev/zero "$J/generations/$old.json" ;;
	another) cp "$J/generations/$GEN.json" "$J/generations/$old.json" ;;
	*) printf '%s' "$bad" >"$J/generations/$old.json" ;;
	esac
	run_sysextd status --json
	assert_ok "status with a bad generations/$old.json ($bad)"
	assert_contains "$ERR" "1 file(s) of the history in $J/ could not be read; the generations they held are not listed"
	assert_eq "$(json_q "$OUT" '[x["generation"] for x in d["generations"]]')" "[$GEN]" "the rest of the history"
	[[ -e $J/generations/$old.json || -L $J/generations/$old.json ]] || fail "status moved it"
	[[ ! -e $J/generations/$old.json.corrupt && ! -L $J/generations/$old.json.corrupt ]] || fail "status moved it"
done
top_before=$(top_mount_id "$R/usr")
content_before=$(content)
run_sysextd rollback
assert_failed "rollback with no older generation kept"
assert_contains "$ERR" "1 file(s) of the history in $J/ could not be read and were moved aside (.corrupt appended)"
assert_eq "$(grep -c "Cannot roll back" <<<"$ERR")" 1 "one line of error"
[[ -L $J/generations/$old.json.corrupt && ! -e $J/generations/$old.json && ! -L $J/generations/$old.json ]] ||
	fail "the rollback did not move it aside"
assert_eq "$(top_mount_id "$R/usr")" "$top_before" "the same tree is live"
assert_eq "$(content)" "$content_before" "the same content"
rm -f "$J/generations/$old.json.corrupt"
mv "$R/good.json" "$J/generations/$old.json"
status_json
assert_eq "$(json_q "$STATUS" '[x["generation"] for x in d["generations"]]')" "[$old, $GEN]" "the file back: kept again"

check "a damaged generations.json of an older sysextd: counted, generations/ stays; the next transition moves it aside"
printf '{"generations":' >"$J/generations.json"
run_sysextd status --json
assert_ok "status with a bad generations.json"
assert_contains "$ERR" "1 file(s) of the history in $J/ could not be read"
assert_eq "$(json_q "$OUT" '[x["generation"] for x in d["generations"]]')" "[$old, $GEN]" "the history stays"
[[ -e $J/generations.json && ! -e $J/generations.json.corrupt ]] || fail "status moved it"
run_sysextd refresh --always-refresh=yes
assert_ok "a refresh records the next generation"
[[ -e $J/generations.json.corrupt && ! -e $J/generations.json ]] || fail "not moved aside"
rm -f "$J/generations.json.corrupt"
status_json
assert_eq "$(json_q "$STATUS" '[x["generation"] for x in d["generations"]]')" "[$((GEN - 1)), $GEN]" "the newest two kept (Generations=2)"
assert_eq "$(ls "$J/generations" | tr '\n' ' ')" "$((GEN - 1)).json $GEN.json " "the oldest file removed"
assert_eq "$(stat -c %i "$J/generations/$GEN.json")" "$(stat -c %i "$J/state.json")" \
	"after a plain refresh the record is the live state.json itself"

check "killed right after the commit that made a generation live: its record is there"
SYSEXTD_TEST_HOOK=after-commit run_sysextd refresh --always-refresh=yes
assert_rc 137 "refresh killed after its commit"
assert_eq "$(json_q "$(cat "$J/state.json")" 'd["generation"]')" "$((GEN + 1))" "the generation is live"
[[ -f $J/generations/$((GEN + 1)).json ]] || fail "generation $((GEN + 1)) is missing from the history"
status_json
assert_eq "$(json_q "$STATUS" '[x["generation"] for x in d["generations"]]')" "[$((GEN - 1)), $GEN]" "listed"

# ------------------------------------------------------------ end
check "unmerge: the base, and the loop devices as before"
run_sysextd unmerge
assert_ok unmerge
expect base "after unmerge"
stop_all
assert_loops_as_before "$loops_before"

echo "PASS"
