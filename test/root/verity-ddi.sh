#!/bin/bash
# GPT disk images (Discoverable Partitions Specification) built here with sfdisk,
# veritysetup and openssl: usr + usr-verity + usr-verity-sig merges under
# ImagePolicy=signed (kind "ddi", its usr partition appears under $R/usr); a tampered data
# partition is refused; usr + usr-verity with the root hash in the partition UUIDs merges
# under ImagePolicy=verity and is refused under signed; the same layout with UUIDs that are
# not the root hash is refused. Refusals leave the live tree as it was.
set -euo pipefail
# shellcheck source=test/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=test/lib-verity.sh
. "$(dirname "$0")/../lib-verity.sh"
enter_sandbox "$@"
require_verity_tools
require_cmd sfdisk base64
require_fs erofs overlay
[[ $(uname -m) == x86_64 || $(uname -m) == aarch64 ]] || skip "no DPS partition types for $(uname -m) in sysextd"
make_root

ext=$R/var/lib/extensions
set_policy signed
mk_cert trusted
mk_cert other
trust trusted

# usr_tree NAME — a staging tree that is an image's /usr (the usr partition's content).
usr_tree() {
	local u=$WORK/usr-$1
	mkdir -p "$u/lib/extension-release.d" "$u/share/$1"
	printf 'ID=sysextdtest\nVERSION_ID=1\n' >"$u/lib/extension-release.d/extension-release.$1"
	echo "$1 from a disk image" >"$u/share/$1/f"
	marker_file "$u" "share/$1/blob" "MARKER-$1-"
	echo "$u"
}

ddi_build "$ext/ddi.raw" "$(usr_tree ddi)" trusted
log "ddi.raw: $(sfdisk -d "$ext/ddi.raw" | grep -c '^/') partitions, root hash $DDI_ROOTHASH"
loops_before=$(loop_snapshot)

check "a signed DDI (usr, usr-verity, usr-verity-sig) merges under ImagePolicy=signed"
run_sysextd merge
assert_ok merge
assert_file_content "$R/usr/share/ddi/f" "ddi from a disk image"
cmp -s "$R/usr/share/ddi/blob" "$WORK/usr-ddi/share/ddi/blob" || fail "usr/share/ddi/blob differs from the source"
assert_file_content "$R/usr/share/base/file" base
assert_eq "$(list_field ddi kind)" ddi "list --json kind"
assert_eq "$(list_field ddi signed)" true "list --json signed"
mode=$(list_field ddi verity)
[[ "$mode" == userspace || "$mode" == dm ]] || fail "list --json verity for ddi: $mode"
run_sysextd status
assert_ok status
assert_contains "$OUT" "Image ddi ($ext/ddi.raw): verity=$mode, signed" "status"

check "a signed DDI whose data partition is tampered: refused"
ddi_build "$ext/tddi.raw" "$(usr_tree tddi)" trusted
off=$(offset_of "$ext/tddi.raw" "MARKER-tddi-") || fail "marker not found in tddi.raw"
((off > DDI_DATA_OFFSET && off < DDI_DATA_OFFSET + DDI_DATA_SIZE)) || fail "marker outside the data partition"
flip_byte "$ext/tddi.raw" $((off + 1000))
# The tamper is real: the usr partition still mounts without verity, the file differs.
mkdir -p "$WORK/mnt"
mount -t erofs -o ro,loop,offset=$DDI_DATA_OFFSET,sizelimit=$DDI_DATA_SIZE "$ext/tddi.raw" "$WORK/mnt" ||
	fail "the tampered usr partition does not mount without verity"
assert_file_content "$WORK/mnt/share/tddi/f" "tddi from a disk image"
if cmp -s "$WORK/mnt/share/tddi/blob" "$WORK/usr-tddi/share/tddi/blob"; then
	fail "the flipped byte did not change share/tddi/blob"
fi
umount "$WORK/mnt"
try_refused tddi verity

check "a DDI signed by an untrusted certificate: refused"
ddi_build "$ext/uddi.raw" "$(usr_tree uddi)" other
try_refused uddi signature

check "a DDI without signature partition (root hash in the partition UUIDs): refused under signed"
ddi_build "$WORK/nsddi.raw" "$(usr_tree nsddi)" "" uuids
nsddi_rh=$DDI_ROOTHASH
uuids=$(sfdisk -d "$WORK/nsddi.raw" | grep -o 'uuid=[0-9A-Fa-f-]*' | tr -d '-' | cut -d= -f2 | tr -d '\n' | tr A-F a-f)
assert_eq "$uuids" "$nsddi_rh" "partition UUIDs of nsddi.raw"
cp "$WORK/nsddi.raw" "$ext/nsddi.raw"
try_refused nsddi "requires a root hash signature"

check "... and merges under ImagePolicy=verity, checked against the root hash from the UUIDs"
set_policy verity
cp "$WORK/nsddi.raw" "$ext/nsddi.raw"
run_sysextd refresh
assert_ok refresh
assert_file_content "$R/usr/share/nsddi/f" "nsddi from a disk image"
assert_file_content "$R/usr/share/ddi/f" "ddi from a disk image"
assert_eq "$(list_field nsddi kind)" ddi "list --json kind of nsddi"
assert_eq "$(list_field nsddi verity)" "$mode" "list --json verity of nsddi"
assert_eq "$(list_field nsddi signed)" false "list --json signed of nsddi"
wait_loop_count 2

check "a DDI whose partition UUIDs are not its root hash: refused under ImagePolicy=verity"
ddi_build "$ext/rddi.raw" "$(usr_tree rddi)"
LIVE_LOOPS=2 try_refused rddi verity

check "a DDI without a verity partition: refused under ImagePolicy=verity"
s=$(usr_tree pddi)
mkfs.erofs --quiet --all-root "$WORK/pddi.img" "$s" >/dev/null
truncate -s %4096 "$WORK/pddi.img"
n=$(($(stat -c %s "$WORK/pddi.img") / 512))
truncate -s $(((2048 + n + 2048) * 512)) "$ext/pddi.raw"
echo "start=2048, size=$n, type=8484680C-9521-48C6-9C11-B0720656F69E" | sfdisk -q -X gpt "$ext/pddi.raw" >/dev/null
dd if="$WORK/pddi.img" of="$ext/pddi.raw" bs=512 seek=2048 conv=notrunc status=none
LIVE_LOOPS=2 try_refused pddi "requires verity data"

run_sysextd unmerge
assert_ok unmerge
assert_missing "$R/usr/share/ddi"
assert_loops_as_before "$loops_before"

echo "PASS"
