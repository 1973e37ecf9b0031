/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The GPT / Discoverable Partitions parser (libblkid under it) and the superblock size
 * checks, on any bytes as the content of an image file. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "disk.h"
#include "util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_free_ char *reason = NULL, *type = NULL;
        _cleanup_close_ int fd = -EBADF;
        DiskLayout l;
        uint64_t need;

        for (ImageKind k = 0; k < _IMAGE_KIND_MAX; k++)
                (void) superblock_needed_size(k, data, size, &need);
        (void) disk_fast_type(data, size);

        fd = memfd_create("fuzz-disk", MFD_CLOEXEC);
        if (fd < 0 || write(fd, data, size) != (ssize_t) size)
                return 0;
        (void) disk_probe_type(fd, 0, 0, true, &type);
        if (disk_layout(fd, size, &l, &reason) >= 0) {
                if (l.data.offset > size || l.data.size > size - l.data.offset)
                        abort(); /* a partition outside the file must never be accepted */
                free(type);
                type = NULL;
                (void) disk_probe_type(fd, l.data.offset, l.data.size, false, &type);
                free(reason);
                reason = NULL;
                (void) disk_check_size(fd, l.data.offset, IMAGE_EXT4, l.data.size, &reason);
        }
        return 0;
}
