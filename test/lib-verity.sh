# shellcheck shell=bash
# Helpers for the verity tests (test/root/verity-*.sh, test/root/diskseq-race.sh).
# Source after test/lib.sh.

# require_verity_tools — skip unless veritysetup, openssl and mkfs.erofs exist.
require_verity_tools() {
	require_cmd veritysetup openssl mkfs.erofs
}

# set_policy POLICY [EXTRA-LINES] — write $R/etc/sysextd/sysextd.conf.
set_policy() {
	mkdir -p "$R/etc/sysextd"
	printf '[Extensions]\nImagePolicy=%s\n%s' "$1" "${2:-}" >"$R/etc/sysextd/sysextd.conf"
}

# verity_format IMG — veritysetup format IMG into IMG's NAME.verity (NAME = IMG without
# .raw), write the root hash (hex, no newline) to NAME.roothash and echo it.
verity_format() {
	local img=$1 base=${1%.raw} out rh
	out=$(veritysetup format "$img" "$base.verity") || fail "veritysetup format $img failed"
	rh=$(awk '/^Root hash:/ { print $3 }' <<<"$out")
	[[ "$rh" =~ ^[0-9a-f]{64}$ ]] || fail "no root hash from veritysetup for $img: $out"
	printf %s "$rh" >"$base.roothash"
	echo "$rh"
}

# mk_cert NAME — a self-signed certificate and key: $WORK/NAME.crt, $WORK/NAME.key.
mk_cert() {
	openssl req -new -x509 -nodes -newkey rsa:2048 -keyout "$WORK/$1.key" -out "$WORK/$1.crt" \
		-days 3 -subj "/CN=sysextd-test-$1" >/dev/null 2>&1 || fail "cannot make certificate $1"
}

# sign_file IN CERTNAME OUT — detached DER PKCS#7 over IN's bytes with $WORK/CERTNAME.*.
sign_file() {
	openssl smime -sign -nocerts -noattr -binary -in "$1" -inkey "$WORK/$2.key" \
		-signer "$WORK/$2.crt" -outform der -out "$3" || fail "cannot sign $1"
}

# trust CERTNAME — put $WORK/CERTNAME.crt into $R/etc/verity.d.
trust() {
	mkdir -p "$R/etc/verity.d"
	cp "$WORK/$1.crt" "$R/etc/verity.d/$1.crt"
}

# flip_byte FILE OFFSET — invert every bit of the byte at OFFSET (in place).
flip_byte() {
	python3 - "$1" "$2" <<'EOF' || fail "cannot flip byte $2 of $1"
import sys
path, off = sys.argv[1], int(sys.argv[2])
with open(path, "r+b") as f:
    f.seek(off)
    b = f.read(1)
    assert len(b) == 1, "offset beyond end of file"
    f.seek(off)
    f.write(bytes([b[0] ^ 0xff]))
EOF
}

# offset_of FILE STRING — byte offset of the first occurrence of STRING in FILE.
offset_of() {
	python3 - "$1" "$2" <<'EOF'
import sys
data = open(sys.argv[1], "rb").read()
i = data.find(sys.argv[2].encode())
if i < 0:
    sys.exit("not found")
print(i)
EOF
}

# marker_file TREE RELPATH MARKER — a 64 KiB file that starts with MARKER followed by
# random bytes (so that its data lies in full blocks of its own, not inlined).
marker_file() {
	mkdir -p "$(dirname "$1/$2")"
	{ printf '%s' "$3"; head -c 65536 /dev/urandom; } >"$1/$2"
}

# live_state — what a refused image must not change: the mount table at and below
# $R/usr and $R/opt, and every path under $R/usr and $R/opt with a checksum of its content.
live_state() {
	mountinfo_under "$R/usr"
	mountinfo_under "$R/opt"
	(cd "$R" && find usr opt -xdev -printf '%p %y\n' 2>/dev/null | sort)
	(cd "$R" && find usr opt -type f -exec md5sum {} + 2>/dev/null | sort -k2)
}

# assert_live_unchanged BEFORE [WHAT] — live_state equals BEFORE.
assert_live_unchanged() {
	local now
	now=$(live_state)
	if [[ "$now" != "$1" ]]; then
		fail "${2:-the live tree} changed:
$(diff <(echo "$1") <(echo "$now") || true)"
	fi
}

# list_reason NAME — the reason `list --json` gives for NAME (empty if none).
list_reason() {
	run_sysextd --json list >&2
	assert_ok "list --json"
	json_q "$OUT" '([e.get("reason") or "" for e in d if e["name"] == "'"$1"'"] + [""])[0]'
}

# list_field NAME FIELD — a field of NAME in `list --json`.
list_field() {
	run_sysextd --json list >&2
	assert_ok "list --json"
	json_q "$OUT" '[e.get("'"$2"'") for e in d if e["name"] == "'"$1"'"][0]'
}

# assert_refused NAME PATH NEEDLE... — after a transition that skipped NAME: stderr names
# PATH, and the list --json reason for NAME contains every NEEDLE (case-insensitive).
assert_refused() {
	local name=$1 path=$2 reason n
	shift 2
	assert_contains "$ERR" "$path" "stderr (warning about $name)"
	reason=$(list_reason "$name")
	[[ -n "$reason" ]] || fail "list --json gives no reason for $name"
	assert_eq "$(list_field "$name" compatible)" false "list --json compatible for $name"
	for n in "$@"; do
		assert_contains "${reason,,}" "${n,,}" "reason for $name"
	done
	log "$name refused: $reason"
}

# ddi_build OUT SRC_USR [SIG_CERT] [UUIDS] — a GPT disk image OUT with a usr partition
# (erofs of SRC_USR, which is the image's /usr tree), a usr verity partition, and, with
# SIG_CERT, a usr verity signature partition signed with $WORK/SIG_CERT.*. With UUIDS=uuids,
# the partition UUIDs are the halves of the root hash. Sets DDI_ROOTHASH, DDI_DATA_OFFSET
# (bytes) and DDI_DATA_SIZE.
ddi_build() {
	local out=$1 src=$2 cert=${3:-} uuids=${4:-} s ds hs ss u1 u2 sig_line=
	s=$(mktemp -d "$WORK/ddi.XXXXXX")
	mkfs.erofs --quiet --all-root "$s/data.img" "$src" >/dev/null || fail "mkfs.erofs for DDI failed"
	DDI_ROOTHASH=$(veritysetup format "$s/data.img" "$s/hash.img" | awk '/^Root hash:/ { print $3 }')
	[[ "$DDI_ROOTHASH" =~ ^[0-9a-f]{64}$ ]] || fail "no root hash for DDI"
	truncate -s %4096 "$s/data.img" "$s/hash.img"
	ds=$(($(stat -c %s "$s/data.img") / 512))
	hs=$(($(stat -c %s "$s/hash.img") / 512))
	ss=0
	if [[ -n "$cert" ]]; then
		printf %s "$DDI_ROOTHASH" >"$s/rh.txt"
		sign_file "$s/rh.txt" "$cert" "$s/sig.der"
		printf '{"rootHash":"%s","signature":"%s"}' "$DDI_ROOTHASH" "$(base64 -w0 "$s/sig.der")" >"$s/sig.img"
		truncate -s 16K "$s/sig.img"
		ss=$(($(stat -c %s "$s/sig.img") / 512))
		sig_line="size=$ss, type=E7BB33FB-06CF-4E81-8273-E543B413E2E2"
	fi
	u1='' u2=''
	if [[ "$uuids" == uuids ]]; then
		u1=$(sed -E 's/^(.{8})(.{4})(.{4})(.{4})(.{12}).*/\1-\2-\3-\4-\5/' <<<"${DDI_ROOTHASH:0:32}")
		u2=$(sed -E 's/^(.{8})(.{4})(.{4})(.{4})(.{12}).*/\1-\2-\3-\4-\5/' <<<"${DDI_ROOTHASH:32:32}")
		u1=", uuid=$u1" u2=", uuid=$u2"
	fi
	rm -f "$out"
	truncate -s $(((2048 + ds + hs + ss + 2048) * 512)) "$out"
	sfdisk -q "$out" >/dev/null <<EOT || fail "sfdisk $out failed"
label: gpt
start=2048, size=$ds, type=8484680C-9521-48C6-9C11-B0720656F69E$u1
size=$hs, type=77FF5F63-E7B6-4633-ACF4-1565B864C0E6$u2
${sig_line}
EOT
	dd if="$s/data.img" of="$out" bs=512 seek=2048 conv=notrunc status=none
	dd if="$s/hash.img" of="$out" bs=512 seek=$((2048 + ds)) conv=notrunc status=none
	if [[ -n "$cert" ]]; then
		dd if="$s/sig.img" of="$out" bs=512 seek=$((2048 + ds + hs)) conv=notrunc status=none
	fi
	DDI_DATA_OFFSET=$((2048 * 512))
	DDI_DATA_SIZE=$((ds * 512))
	rm -rf "$s"
}

# live_content — paths under $R/usr and $R/opt with checksums of file contents; no mount
# ids, and not usr/.sysextd (sysextd's marker of the tree, new with each generation).
live_content() {
	(cd "$R" && find usr opt -path usr/.sysextd -prune -o -printf '%p %y\n' 2>/dev/null | sort)
	(cd "$R" && find usr opt -path usr/.sysextd -prune -o -type f -exec md5sum {} + 2>/dev/null | sort -k2)
}

# try_refused NAME NEEDLE... — with the bad image NAME (and its sidecars) in place in
# $R/var/lib/extensions beside merged good ones (which use $LIVE_LOOPS loop devices,
# default 1): refresh --strict fails and changes nothing at all (mounts, files, loop
# devices); refresh skips NAME with a warning naming its path and a reason containing every
# NEEDLE, and keeps the same content. Then NAME and its sidecars are removed.
try_refused() {
	local name=$1 path before content loops ext=$R/var/lib/extensions
	shift
	path=$ext/$name.raw
	[[ -e "$path" ]] || path=$ext/$name
	before=$(live_state)
	content=$(live_content)
	loops=$(loop_ids)

	run_sysextd --strict refresh
	assert_failed "refresh --strict with $name"
	assert_contains "$ERR" "$path" "stderr of refresh --strict"
	assert_live_unchanged "$before" "live tree after refresh --strict with $name"
	assert_loop_ids_as_before "$loops"

	run_sysextd refresh
	assert_ok "refresh with $name"
	assert_refused "$name" "$path" "$@"
	assert_eq "$(live_content)" "$content" "content under \$R/usr and \$R/opt after refresh with $name"
	assert_missing "$R/usr/share/$name"
	assert_eq "$(ours_at "$R/usr")" 1 "sysextd overlays at \$R/usr"
	wait_loop_count "${LIVE_LOOPS:-1}"
	rm -rf "${ext:?}/$name" "$ext/$name".*
}

# bad_tree NAME — a staging tree for NAME: its release file, usr/share/NAME/f ("NAME") and
# a 64 KiB usr/share/NAME/blob whose data starts with "MARKER-NAME-"; echoes its path.
bad_tree() {
	local t
	t=$(ext_tree "$1")
	ext_file "$t" "usr/share/$1/f" "$1"
	marker_file "$t" "usr/share/$1/blob" "MARKER-$1-"
	echo "$t"
}
