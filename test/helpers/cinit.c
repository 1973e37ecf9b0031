/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* cinit NEWROOT [USRSRC] — the init of a test "container", run in a fresh private mount
 * namespace (unshare -m --propagation private): with USRSRC, NEWROOT is bound on itself and
 * USRSRC on NEWROOT/usr; then it pivots into NEWROOT, drops the old root, makes the new root
 * shared (a peer group of its own, as a container's root is), says "ready" on stdout and
 * waits for a signal.  Static: the container has no libc. */
#define _GNU_SOURCE
#include <stdio.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv) {
        char usr[4096];

        if (argc < 2 || argc > 3)
                return 2;
        if (argc == 3) {
                snprintf(usr, sizeof(usr), "%s/usr", argv[1]);
                if (mount(argv[1], argv[1], NULL, MS_BIND, NULL) < 0 || mount(argv[2], usr, NULL, MS_BIND, NULL) < 0) {
                        perror("cinit: bind");
                        return 1;
                }
        }
        if (chdir(argv[1]) < 0 || syscall(SYS_pivot_root, ".", ".") < 0 || umount2(".", MNT_DETACH) < 0 || chdir("/") < 0 ||
            mount(NULL, "/", NULL, MS_SHARED | MS_REC, NULL) < 0) {
                perror("cinit: pivot");
                return 1;
        }
        printf("ready\n");
        fflush(stdout);
        pause();
        return 0;
}
