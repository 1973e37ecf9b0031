/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "journal-send.h"
#include "macro.h"

static bool key_valid(const char *k, size_t n) {
        if (n == 0 || n > 64 || k[0] == '_' || (k[0] >= '0' && k[0] <= '9'))
                return false;
        for (size_t i = 0; i < n; i++)
                if (!((k[i] >= 'A' && k[i] <= 'Z') || (k[i] >= '0' && k[i] <= '9') || k[i] == '_'))
                        return false;
        return true;
}

/* The entry in the protocol's form, in one buffer; NULL with errno set. */
static char *serialize(const char *const *fields, size_t *ret_size) {
        size_t size = 0;
        char *buf, *p;

        for (const char *const *f = fields; *f; f++) {
                const char *eq = strchr(*f, '=');

                if (!eq || !key_valid(*f, (size_t) (eq - *f))) {
                        errno = EINVAL;
                        return NULL;
                }
                /* KEY=value\n, or KEY\n + 8 bytes of size + value\n: at most 8 more. */
                size += strlen(*f) + 1 + 8;
        }
        buf = p = malloc(size ?: 1);
        if (!buf)
                return NULL;
        for (const char *const *f = fields; *f; f++) {
                const char *eq = strchr(*f, '='), *value = eq + 1;
                size_t klen = (size_t) (eq - *f), vlen = strlen(value);

                if (memchr(value, '\n', vlen)) {
                        uint64_t le = htole64(vlen);

                        p = mempcpy(p, *f, klen);
                        *p++ = '\n';
                        p = mempcpy(p, &le, sizeof(le));
                        p = mempcpy(p, value, vlen);
                } else
                        p = mempcpy(p, *f, klen + 1 + vlen);
                *p++ = '\n';
        }
        *ret_size = (size_t) (p - buf);
        return buf;
}

/* Too large for a datagram: the entry in a sealed memfd, passed as the message's only content
 * (journald takes a memfd only when it is sealed). */
static int send_memfd(int sock, const struct sockaddr_un *sa, socklen_t salen, const char *buf, size_t size) {
        union {
                struct cmsghdr h;
                char buf[CMSG_SPACE(sizeof(int))];
        } control = {};
        struct msghdr mh = {
                .msg_name = (void *) sa, .msg_namelen = salen,
                .msg_control = &control, .msg_controllen = sizeof(control),
        };
        _cleanup_close_ int fd = memfd_create("journal-entry", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        struct cmsghdr *c;

        if (fd < 0)
                return -errno;
        for (size_t done = 0; done < size;) {
                ssize_t k = write(fd, buf + done, size - done);

                if (k < 0)
                        return -errno;
                done += (size_t) k;
        }
        if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0)
                return -errno;
        c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof(int));
        return sendmsg(sock, &mh, MSG_NOSIGNAL) < 0 ? -errno : 0;
}

int journal_send_to(const char *socket_path, const char *const *fields) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        _cleanup_free_ char *buf = NULL;
        _cleanup_close_ int sock = -EBADF;
        struct iovec iov;
        struct msghdr mh = { .msg_name = &sa, .msg_namelen = sizeof(sa), .msg_iov = &iov, .msg_iovlen = 1 };
        size_t size = 0;

        if (strlen(socket_path) >= sizeof(sa.sun_path))
                return -EINVAL;
        strcpy(sa.sun_path, socket_path);
        buf = serialize(fields, &size);
        if (!buf)
                return -errno;
        sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (sock < 0)
                return -errno;
        iov = (struct iovec) { .iov_base = buf, .iov_len = size };
        if (sendmsg(sock, &mh, MSG_NOSIGNAL) >= 0)
                return 0;
        if (errno != EMSGSIZE && errno != ENOBUFS)
                return -errno;
        return send_memfd(sock, &sa, sizeof(sa), buf, size);
}
