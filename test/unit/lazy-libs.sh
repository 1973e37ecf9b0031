#!/bin/bash
# The sysextd binary does not load libcryptsetup or libcrypto when it starts (they and their
# dependencies were most of its start-up time): src/core/dlopen-crypto.c loads them when an
# image needs verity or a signature check; nor libblkid (loaded when an image is not erofs),
# nor libmount, which it does not use at all (src/core/mounts.c reads mountinfo): both were
# resident memory of the daemon, which never probes an image; nor libsystemd (with libgcrypt,
# liblzma, libzstd, liblz4, libcap: half a millisecond of every start), which
# src/core/dlopen-systemd.c loads for the daemon, the client and a reload of the service
# manager, and which a transition in process does without.  TAP.
set -euo pipefail
bin=$1
echo "1..5"
needed=$(readelf -d "$bin" | awk '/\(NEEDED\)/ { gsub(/[][]/, "", $5); print $5 }')
n=0
for lib in libcryptsetup libcrypto libblkid libmount libsystemd; do
	n=$((n + 1))
	if grep -q "^$lib\.so" <<<"$needed"; then
		echo "not ok $n - $bin links $lib at start: $(tr '\n' ' ' <<<"$needed")"
	else
		echo "ok $n - $lib is not among the libraries loaded at start"
	fi
done
