/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fd-util.h"
#include "tests.h"
#include "util.h"

/* openat_walk() is what runs where seccomp refuses openat2(): it must never be less strict
 * than RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS. */
int main(void) {
        char tmpl[] = "/tmp/sysextd-unit.XXXXXX";
        char *dir = mkdtemp(tmpl);
        _cleanup_close_ int dfd = -EBADF;
        int fd;

        if (!dir)
                return 1;
        dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0 || mkdirat(dfd, "a", 0755) < 0 || mkdirat(dfd, "a/b", 0755) < 0)
                return 1;
        fd = openat(dfd, "a/b/file", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0 || write(fd, "x", 1) != 1)
                return 1;
        close(fd);
        if (symlinkat("b", dfd, "a/link") < 0 || symlinkat("/etc/passwd", dfd, "a/abs") < 0)
                return 1;

        fd = openat_walk(dfd, "a/b/file", O_RDONLY);
        CHECK(fd >= 0);
        safe_close(fd);
        fd = openat_walk(dfd, "a//b/file", O_RDONLY);
        CHECK(fd >= 0);
        safe_close(fd);
        CHECK(openat_walk(dfd, "a/link/file", O_RDONLY) == -ELOOP);
        CHECK(openat_walk(dfd, "a/abs", O_RDONLY) == -ELOOP);
        CHECK(openat_walk(dfd, "a/../a/b/file", O_RDONLY) == -EXDEV);
        CHECK(openat_walk(dfd, "/etc/passwd", O_RDONLY) == -EXDEV);
        CHECK(openat_walk(dfd, "a/missing", O_RDONLY) == -ENOENT);

        /* The openat2() path agrees where both apply. */
        fd = openat_resolve(dfd, "a/b/file", O_RDONLY, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS);
        CHECK(fd >= 0);
        safe_close(fd);
        CHECK(openat_resolve(dfd, "a/link/file", O_RDONLY, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS) == -ELOOP);
        CHECK(openat_resolve(dfd, "a/../../etc/passwd", O_RDONLY, RESOLVE_BENEATH) == -EXDEV);

        (void) unlinkat(dfd, "a/b/file", 0);
        (void) unlinkat(dfd, "a/link", 0);
        (void) unlinkat(dfd, "a/abs", 0);
        (void) unlinkat(dfd, "a/b", AT_REMOVEDIR);
        (void) unlinkat(dfd, "a", AT_REMOVEDIR);
        (void) rmdir(dir);
        return tap_finish();
}
