/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* journal_send_to(): an entry as journald's native protocol reads it, on a datagram socket of
 * the test's own: plain fields, a value with newlines in the binary form, an entry too large
 * for a datagram in a sealed memfd, and the refusals. */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "journal-send.h"
#include "macro.h"
#include "tests.h"

static char dir[] = "/tmp/test-journal-send-XXXXXX";
static char path[sizeof(dir) + 16];

static int listener(void) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);

        strcpy(sa.sun_path, path);
        if (fd < 0 || bind(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0)
                abort();
        return fd;
}

/* The next entry on the socket, from the datagram or from the memfd it carries; *ret_memfd
 * says which, *ret_sealed whether the memfd could not be written any more. */
static char *receive(int fd, size_t *ret_size, bool *ret_memfd, bool *ret_sealed) {
        static char buf[1 << 20];
        union {
                struct cmsghdr h;
                char buf[CMSG_SPACE(sizeof(int))];
        } control = {};
        struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = &control, .msg_controllen = sizeof(control) };
        struct cmsghdr *c;
        ssize_t n = recvmsg(fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        char *data;

        *ret_memfd = *ret_sealed = false;
        if (n < 0)
                return NULL;
        c = CMSG_FIRSTHDR(&mh);
        if (c && c->cmsg_type == SCM_RIGHTS) {
                int mfd;
                struct stat st;

                memcpy(&mfd, CMSG_DATA(c), sizeof(int));
                *ret_memfd = true;
                *ret_sealed = fcntl(mfd, F_GET_SEALS) == (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
                if (fstat(mfd, &st) < 0 || !(data = malloc(st.st_size + 1)) || pread(mfd, data, st.st_size, 0) != st.st_size)
                        abort();
                close(mfd);
                *ret_size = (size_t) st.st_size;
                return data;
        }
        data = malloc(n + 1);
        memcpy(data, buf, n);
        *ret_size = (size_t) n;
        return data;
}

static void test_plain_and_binary(int fd) {
        const char *fields[] = { "MESSAGE=Merged extensions", "SYSEXTD_IMAGE=alpha /x/alpha.raw\nbeta /x/beta.raw",
                           "PRIORITY=6", "EMPTY=", NULL };
        const char want_head[] = "MESSAGE=Merged extensions\nSYSEXTD_IMAGE\n";
        const char *value = "alpha /x/alpha.raw\nbeta /x/beta.raw";
        _cleanup_free_ char *got = NULL;
        size_t size = 0;
        bool memfd, sealed;
        uint64_t le;

        CHECK(journal_send_to(path, fields) == 0);
        got = receive(fd, &size, &memfd, &sealed);
        CHECK(got && !memfd);
        if (!got)
                return;
        CHECK(size == strlen(want_head) + 8 + strlen(value) + 1 + strlen("PRIORITY=6\nEMPTY=\n"));
        CHECK(memcmp(got, want_head, strlen(want_head)) == 0);
        memcpy(&le, got + strlen(want_head), 8);
        CHECK(le64toh(le) == strlen(value));
        CHECK(memcmp(got + strlen(want_head) + 8, value, strlen(value)) == 0);
        CHECK(memcmp(got + strlen(want_head) + 8 + strlen(value), "\nPRIORITY=6\nEMPTY=\n", 19) == 0);
}

static void test_large(int fd) {
        /* Larger than any datagram the socket takes (its send buffer is about 208 KiB). */
        size_t vlen = 600 * 1024;
        _cleanup_free_ char *big = malloc(strlen("MESSAGE=") + vlen + 1), *got = NULL;
        const char *fields[] = { "MESSAGE_ID=0a89d217eccc4447b65d40cf2c08122d", big, NULL };
        size_t size = 0;
        bool memfd, sealed;

        strcpy(big, "MESSAGE=");
        memset(big + strlen("MESSAGE="), 'x', vlen);
        big[strlen("MESSAGE=") + vlen] = 0;
        CHECK(journal_send_to(path, fields) == 0);
        got = receive(fd, &size, &memfd, &sealed);
        CHECK(got && memfd && sealed);
        CHECK(size == strlen(fields[0]) + 1 + strlen(big) + 1);
        CHECK(got && memcmp(got, "MESSAGE_ID=0a89d217eccc4447b65d40cf2c08122d\nMESSAGE=xxx", 55) == 0);
        CHECK(got && got[size - 1] == '\n' && got[size - 2] == 'x');
}

static void test_refused(int fd) {
        const char *no_eq[] = { "MESSAGE=fine", "NOVALUE", NULL };
        const char *lower[] = { "message=lower case", NULL };
        const char *under[] = { "_PID=1", NULL };
        const char *digit[] = { "1ST=x", NULL };
        const char *empty_key[] = { "=x", NULL };
        const char *ok[] = { "A_B9=x", NULL };
        _cleanup_free_ char *got = NULL;
        size_t size;
        bool memfd, sealed;

        CHECK(journal_send_to(path, no_eq) == -EINVAL);
        CHECK(journal_send_to(path, lower) == -EINVAL);
        CHECK(journal_send_to(path, under) == -EINVAL);
        CHECK(journal_send_to(path, digit) == -EINVAL);
        CHECK(journal_send_to(path, empty_key) == -EINVAL);
        /* Nothing of a refused entry was sent. */
        CHECK(receive(fd, &size, &memfd, &sealed) == NULL && errno == EAGAIN);
        CHECK(journal_send_to(path, ok) == 0);
        got = receive(fd, &size, &memfd, &sealed);
        CHECK(got && size == 7 && memcmp(got, "A_B9=x\n", 7) == 0);
}

static void test_no_journal(void) {
        const char *fields[] = { "MESSAGE=x", NULL };
        char missing[sizeof(dir) + 16];

        snprintf(missing, sizeof(missing), "%s/none", dir);
        CHECK(journal_send_to(missing, fields) == -ENOENT);
}

int main(void) {
        int fd;

        if (!mkdtemp(dir))
                abort();
        snprintf(path, sizeof(path), "%s/socket", dir);
        fd = listener();
        test_plain_and_binary(fd);
        test_large(fd);
        test_refused(fd);
        test_no_journal();
        close(fd);
        unlink(path);
        rmdir(dir);
        return tap_finish();
}
