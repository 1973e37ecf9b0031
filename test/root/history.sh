#!/bin/bash
# The update history in the journal: every transition that changes what is live sends one
# structured entry to the system journal (journald's native protocol, journal-send.c:
# /run/systemd/journal/socket),
# with a MESSAGE_ID per kind and the generation and images as fields; a transition that
# changes nothing sends none.  The journal here is a stand-in in this private namespace: a
# datagram socket at that path read by a small receiver that decodes journald's native
# protocol (KEY=VALUE lines, and KEY\n<le64 size><data>\n for values with a newline, from a
# memfd when the entry is larger than a datagram).
set -euo pipefail
# shellcheck source=test/lib.sh
. "$(dirname "$0")/../lib.sh"
enter_sandbox "$@"
require_cmd mkfs.erofs python3
require_fs erofs overlay
make_root

MERGE=616a4a8c1bfe496390e35a295053c91e
REFRESH=0a89d217eccc4447b65d40cf2c08122d
UNMERGE=4bf710652f274fa791c053089297d0ec
COMMIT=d9cca3544a7845289b5a7a43253aeed9

# /run of this namespace only: the stand-in journal.
mount -t tmpfs history-run /run
mkdir -p /run/systemd/journal
ENTRIES=$WORK/entries.jsonl
: >"$ENTRIES"
python3 - "$ENTRIES" >"$WORK/receiver.log" 2>&1 <<'PY' &
import array, json, os, socket, struct, sys
out = open(sys.argv[1], "a", buffering=1)
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind("/run/systemd/journal/socket")
open("/run/systemd/journal/ready", "w").close()
def parse(b):
    fields, i = [], 0
    while i < len(b):
        nl = b.index(b"\n", i)
        line = b[i:nl]
        if b"=" in line:
            k, v = line.split(b"=", 1)
            i = nl + 1
        else:
            k = line
            (n,) = struct.unpack_from("<Q", b, nl + 1)
            v = b[nl + 9:nl + 9 + n]
            i = nl + 9 + n + 1
        fields.append([k.decode(), v.decode("utf-8", "replace")])
    return fields
while True:
    fds = array.array("i")
    data, anc, _, _ = s.recvmsg(1 << 20, socket.CMSG_SPACE(4 * fds.itemsize))
    for level, kind, payload in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[:len(payload) - len(payload) % fds.itemsize])
    if fds:
        with os.fdopen(fds[0], "rb") as f:
            data = f.read()
    out.write(json.dumps(parse(data)) + "\n")
PY
RECEIVER=$!
on_exit "kill $RECEIVER 2>/dev/null || true"
for _ in $(seq 100); do [[ -e /run/systemd/journal/ready ]] && break; sleep 0.05; done
[[ -e /run/systemd/journal/ready ]] || fail "the stand-in journal did not come up: $(cat "$WORK/receiver.log")"

# entries ID — how many entries with MESSAGE_ID=ID were received.
entries() { python3 -c '
import json, sys
print(sum(1 for l in open(sys.argv[1]) if ["MESSAGE_ID", sys.argv[2]] in json.loads(l)))' "$ENTRIES" "$1"; }
# last_field ID KEY — the values of KEY in the last entry with MESSAGE_ID=ID, one per line.
last_field() { python3 -c '
import json, sys
e = [json.loads(l) for l in open(sys.argv[1])]
e = [x for x in e if ["MESSAGE_ID", sys.argv[2]] in x]
print("\n".join(v for k, v in (e[-1] if e else []) if k == sys.argv[3]))' "$ENTRIES" "$1" "$2"; }
total() { wc -l <"$ENTRIES"; }
wait_entries() { # N: the receiver has written N entries (it runs beside us)
	local i
	for ((i = 0; i < 50; i++)); do [[ $(total) -ge $1 ]] && return 0; sleep 0.05; done
	return 0
}

build() { # NAME VERSION
	local t
	t=$(ext_tree "$1" "$WORK/src/$1-$2")
	ext_file "$t" "usr/share/hist/$1" "$2"
	mk_image erofs "$t" "$1" >/dev/null
}
build alpha v1
build beta v1

check "merge: one entry, MESSAGE_ID of a merge, generation 1, both images"
run_sysextd merge
assert_ok merge
wait_entries 1
assert_eq "$(entries $MERGE)" 1 "merge entries"
assert_eq "$(last_field $MERGE SYSEXTD_VERB)" merge "SYSEXTD_VERB"
assert_eq "$(last_field $MERGE SYSEXTD_GENERATION)" 1 "SYSEXTD_GENERATION"
assert_eq "$(last_field $MERGE SYSEXTD_IMAGES)" "alpha beta" "SYSEXTD_IMAGES"
assert_eq "$(last_field $MERGE SYSEXTD_IMAGE)" "alpha $R/var/lib/extensions/alpha.raw
beta $R/var/lib/extensions/beta.raw" "one SYSEXTD_IMAGE per image"
assert_eq "$(last_field $MERGE SYSEXTD_ROOT)" "$R" "SYSEXTD_ROOT"
assert_eq "$(last_field $MERGE PRIORITY)" 6 "PRIORITY"
assert_contains "$(last_field $MERGE MESSAGE)" "Merged extensions under $R: generation 1 with alpha beta" "MESSAGE"

check "refresh with nothing changed: no entry"
run_sysextd refresh
assert_ok "refresh, nothing changed"
sleep 0.3
assert_eq "$(total)" 1 "entries after a refresh that changed nothing"

check "refresh after beta changed: a refresh entry, generation 2"
build beta v2
run_sysextd refresh
assert_ok refresh
wait_entries 2
assert_eq "$(entries $REFRESH)" 1 "refresh entries"
assert_eq "$(last_field $REFRESH SYSEXTD_GENERATION)" 2 "refresh generation"
assert_eq "$(last_field $REFRESH SYSEXTD_DELAYED)" 0 "not delayed"

check "a refresh that adds an image: its name in the entry"
build gamma v1
run_sysextd refresh
assert_ok "refresh with gamma"
wait_entries 3
assert_eq "$(last_field $REFRESH SYSEXTD_IMAGES)" "alpha beta gamma" "images after adding gamma"
assert_eq "$(last_field $REFRESH SYSEXTD_GENERATION)" 3 "generation 3"

check "a delayed refresh, then its commit: SYSEXTD_DELAYED=1, then a commit entry"
build alpha v2
run_sysextd refresh --delay=600
assert_ok "delayed refresh"
wait_entries 4
assert_eq "$(entries $REFRESH)" 3 "refresh entries"
assert_eq "$(last_field $REFRESH SYSEXTD_DELAYED)" 1 "the delayed refresh says so"
assert_contains "$(last_field $REFRESH MESSAGE)" "delayed" "MESSAGE of the delayed refresh"
run_sysextd commit
assert_ok commit
wait_entries 5
assert_eq "$(entries $COMMIT)" 1 "commit entries"
assert_eq "$(last_field $COMMIT SYSEXTD_GENERATION)" 4 "the commit names the delayed generation"
assert_eq "$(last_field $COMMIT SYSEXTD_VERB)" commit "SYSEXTD_VERB of the commit"

check "a refresh that is refused sends nothing"
before=$(total)
build beta v3
# Writable trees cannot be delayed: refused before anything changes (sysextd(8)).
run_sysextd refresh --mutable=yes --delay=60
assert_failed "delayed refresh of writable trees"
sleep 0.3
assert_eq "$(total)" "$before" "entries after a refused refresh"

check "unmerge: an unmerge entry with no images"
run_sysextd unmerge
assert_ok unmerge
wait_entries $(( $(total) ))
assert_eq "$(entries $UNMERGE)" 1 "unmerge entries"
assert_eq "$(last_field $UNMERGE SYSEXTD_IMAGES)" "" "no images after unmerge"
run_sysextd unmerge
assert_ok "unmerge again"
sleep 0.3
assert_eq "$(entries $UNMERGE)" 1 "a second unmerge that changes nothing sends nothing"

check "no newline and no control character in any received value"
assert_eq "$(python3 -c '
import json, sys
bad = [v for l in open(sys.argv[1]) for k, v in json.loads(l) if any(ord(c) < 32 for c in v)]
print(len(bad))' "$ENTRIES")" 0 "values with control characters"
