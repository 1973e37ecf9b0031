#!/bin/bash
# Twenty images, five each of directory, erofs, squashfs and ext4: all are
# merged, `list --json` shows them all compatible with the right kind, and
# unmerge leaves the loop devices as they were.
set -euo pipefail
# shellcheck source=test/lib.sh
. "$(dirname "$0")/../lib.sh"
enter_sandbox "$@"
require_cmd mkfs.erofs mksquashfs mkfs.ext4
require_fs erofs squashfs ext4 overlay
make_root

kinds=(directory erofs squashfs ext4)
declare -A kind_of
names=()
for i in $(seq 1 20); do
	name=$(printf 'many-%02d' "$i")
	kind=${kinds[(i - 1) % 4]}
	t=$(ext_tree "$name")
	ext_file "$t" "usr/share/many/$name" "content of $name"
	mk_image "$kind" "$t" "$name" >/dev/null
	kind_of[$name]=$kind
	names+=("$name")
done
loops_before=$(loop_snapshot)

check "list --json shows 20 compatible images of the right kinds"
run_sysextd --json list
assert_ok "list --json"
assert_eq "$(json_q "$OUT" 'len(d)')" 20 "number of images in list --json"
assert_eq "$(json_q "$OUT" 'sum(1 for e in d if e["compatible"] is True and e["status"] == "compatible")')" \
	20 "number of compatible images"
for name in "${names[@]}"; do
	assert_eq "$(json_q "$OUT" "[e['kind'] for e in d if e['name'] == '$name']")" \
		"[\"${kind_of[$name]}\"]" "kind of $name"
done

check "merge of 20 images succeeds"
run_sysextd merge
assert_ok merge

check "every image's file is visible"
for name in "${names[@]}"; do
	assert_file_content "$R/usr/share/many/$name" "content of $name"
done
assert_file_content "$R/usr/share/base/file" base

check "status --json lists all 20 on /usr"
run_sysextd --json status
assert_ok "status --json"
assert_eq "$(json_q "$OUT" '[sorted(h["extensions"]) for h in d["hierarchies"] if h["hierarchy"] == "/usr"]')" \
	"$(python3 -c 'import json,sys; print(json.dumps([sorted(sys.argv[1:])]))' "${names[@]}")" \
	"/usr extensions"

check "unmerge removes them all and every loop device"
run_sysextd unmerge
assert_ok unmerge
for name in "${names[@]}"; do
	assert_missing "$R/usr/share/many/$name"
done
assert_file_content "$R/usr/share/base/file" base
assert_loops_as_before "$loops_before"

echo "PASS"
