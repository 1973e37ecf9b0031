/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The json-c varlink server (varlink-jsonc.c) over a real socket, in one process: the test is
 * the client, the event loop is run between its writes and reads.  Hostile input closes the
 * connection and leaves the server serving. */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "json-util.h"
#include "tests.h"
#include "util.h"
#include "varlink.h"

static sd_event *event;
static char sock_path[108];
static VarlinkCall *held; /* a call answered later */

static const VarlinkInterface interfaces[] = {
        { "io.test.Echo", "interface io.test.Echo\nmethod Echo(x: ?string) -> (x: ?string)\n" },
        {},
};

static int handler(VarlinkServer *s, VarlinkCall *call, const char *method, json_object *parameters, unsigned flags,
                   void *userdata) {
        if (streq(method, "io.test.Echo.Echo"))
                return varlink_call_reply(call, json_object_get(parameters), false);
        if (streq(method, "io.test.Echo.Stream")) {
                for (int i = 0; i < 3; i++) {
                        json_object *o = json_object_new_object();
                        json_object_object_add(o, "i", json_object_new_int(i));
                        (void) varlink_call_reply(call, o, i < 2);
                }
                return 0;
        }
        if (streq(method, "io.test.Echo.Later")) {
                held = varlink_call_ref(call);
                return 0;
        }
        if (streq(method, "io.test.Echo.Fail"))
                return -EBUSY;
        return varlink_call_error(call, VARLINK_ERROR_METHOD_NOT_FOUND, NULL);
}

static int client(void) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

        strcpy(sa.sun_path, sock_path);
        if (connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0) {
                close(fd);
                return -1;
        }
        return fd;
}

static void run_loop(int ms) {
        for (int i = 0; i < ms; i++)
                (void) sd_event_run(event, 1000);
}

/* Runs the loop until the handler holds a call (up to 2 s). */
static void run_until_held(void) {
        for (int i = 0; i < 2000 && !held; i++)
                (void) sd_event_run(event, 1000);
}

static void send_all(int fd, const char *buf, size_t n) {
        while (n > 0) {
                ssize_t k = send(fd, buf, n, MSG_DONTWAIT | MSG_NOSIGNAL);
                if (k < 0 && errno == EAGAIN) {
                        run_loop(1);
                        continue;
                }
                if (k <= 0)
                        return;
                buf += k;
                n -= (size_t) k;
        }
}

/* One reply (without its NUL), NULL at EOF; runs the loop while waiting. */
static char *recv_reply(int fd) {
        static char buf[1 << 16];
        static size_t have = 0;
        static int have_fd = -1;

        if (have_fd != fd)
                have = 0, have_fd = fd;
        for (int tries = 0; tries < 2000; tries++) {
                char *nul = memchr(buf, 0, have);
                struct pollfd p = { .fd = fd, .events = POLLIN };
                ssize_t k;

                if (nul) {
                        char *r = strndup(buf, (size_t) (nul - buf));
                        size_t used = (size_t) (nul - buf) + 1;
                        memmove(buf, buf + used, have - used);
                        have -= used;
                        return r;
                }
                (void) sd_event_run(event, 1000);
                if (poll(&p, 1, 0) <= 0)
                        continue;
                k = recv(fd, buf + have, sizeof(buf) - have, MSG_DONTWAIT);
                if (k == 0)
                        return NULL;
                if (k > 0)
                        have += (size_t) k;
        }
        return NULL;
}

static void call(int fd, const char *msg) {
        send_all(fd, msg, strlen(msg) + 1);
}

static void expect(int fd, const char *msg, const char *want) {
        _cleanup_free_ char *r = NULL;
        call(fd, msg);
        r = recv_reply(fd);
        CHECK_STREQ(r, want);
}

int main(void) {
        VarlinkServer *s = NULL;
        int fd, fd2;
        _cleanup_free_ char *r = NULL;

        snprintf(sock_path, sizeof(sock_path), "/tmp/sysextd-test-varlink.%i", (int) getpid());
        /* The server calls libsystemd's event loop through the pointers dlopen_libsystemd() fills. */
        CHECK(dlopen_libsystemd(NULL) == 0);
        CHECK(sd_event_new(&event) >= 0);
        CHECK(varlink_server_new(event, interfaces, handler, NULL, &s) == 0);
        CHECK(varlink_server_listen_path(s, sock_path) == 0);

        fd = client();
        CHECK(fd >= 0);
        expect(fd, "{\"method\":\"io.test.Echo.Echo\",\"parameters\":{\"x\":\"y\"}}", "{\"parameters\":{\"x\":\"y\"}}");
        expect(fd, "{\"method\":\"io.test.Echo.Nope\"}", "{\"error\":\"org.varlink.service.MethodNotFound\",\"parameters\":{}}");
        expect(fd, "{\"method\":\"io.other.Foo\"}",
               "{\"error\":\"org.varlink.service.InterfaceNotFound\",\"parameters\":{\"interface\":\"io.other\"}}");
        expect(fd, "{\"method\":\"io.test.Echo.Fail\"}",
               "{\"error\":\"io.systemd.System\",\"parameters\":{\"errno\":16,\"errnoName\":\"EBUSY\"}}");
        expect(fd, "{\"method\":\"org.varlink.service.GetInterfaceDescription\",\"parameters\":{\"interface\":\"io.test.Echo\"}}",
               "{\"parameters\":{\"description\":\"interface io.test.Echo\\nmethod Echo(x: ?string) -> (x: ?string)\\n\"}}");
        expect(fd, "{\"method\":\"org.varlink.service.GetInterfaceDescription\",\"parameters\":{\"interface\":1}}",
               "{\"error\":\"org.varlink.service.InvalidParameter\",\"parameters\":{\"parameter\":\"interface\"}}");
        call(fd, "{\"method\":\"org.varlink.service.GetInfo\"}");
        r = recv_reply(fd);
        CHECK(r && strstr(r, "\"interfaces\":[\"org.varlink.service\",\"io.test.Echo\"]"));
        free(r);
        /* Streaming with more; pipelined calls answered in order. */
        call(fd, "{\"method\":\"io.test.Echo.Stream\",\"more\":true}");
        call(fd, "{\"method\":\"io.test.Echo.Echo\",\"parameters\":{\"x\":\"after\"}}");
        r = recv_reply(fd);
        CHECK_STREQ(r, "{\"parameters\":{\"i\":0},\"continues\":true}");
        free(r);
        r = recv_reply(fd);
        CHECK_STREQ(r, "{\"parameters\":{\"i\":1},\"continues\":true}");
        free(r);
        r = recv_reply(fd);
        CHECK_STREQ(r, "{\"parameters\":{\"i\":2}}");
        free(r);
        r = recv_reply(fd);
        CHECK_STREQ(r, "{\"parameters\":{\"x\":\"after\"}}");
        free(r);
        /* A call answered later; the next one waits for it. */
        call(fd, "{\"method\":\"io.test.Echo.Later\"}");
        call(fd, "{\"method\":\"io.test.Echo.Echo\",\"parameters\":{\"x\":\"2nd\"}}");
        run_until_held();
        CHECK(held != NULL);
        if (!held)
                return tap_finish();
        CHECK(varlink_server_n_pending(s) == 1);
        CHECK(varlink_call_reply(held, NULL, false) == 0);
        CHECK(varlink_call_reply(held, NULL, false) == -EALREADY);
        held = varlink_call_unref(held);
        r = recv_reply(fd);
        CHECK_STREQ(r, "{\"parameters\":{}}");
        free(r);
        r = recv_reply(fd);
        CHECK_STREQ(r, "{\"parameters\":{\"x\":\"2nd\"}}");
        free(r);
        /* Garbage: closed. */
        call(fd, "{\"method\":");
        r = recv_reply(fd);
        CHECK(r == NULL);
        close(fd);
        r = NULL;

        /* A message that never ends: closed after VARLINK_MESSAGE_MAX bytes. */
        fd = client();
        {
                char *big = malloc(VARLINK_MESSAGE_MAX + 4096);
                memset(big, ' ', VARLINK_MESSAGE_MAX + 4096);
                send_all(fd, big, VARLINK_MESSAGE_MAX + 4096);
                free(big);
        }
        r = recv_reply(fd);
        CHECK(r == NULL);
        close(fd);

        /* A client that goes while its call is held: the call can still be answered, into the void. */
        fd = client();
        call(fd, "{\"method\":\"io.test.Echo.Later\"}");
        run_until_held();
        CHECK(held != NULL);
        if (!held)
                return tap_finish();
        close(fd);
        run_loop(20);
        CHECK(!varlink_call_connected(held));
        (void) varlink_call_reply(held, NULL, false);
        held = varlink_call_unref(held);
        run_loop(5);
        CHECK(varlink_server_n_connections(s) == 0);
        CHECK(varlink_server_n_pending(s) == 0);

        /* Still serving. */
        fd2 = client();
        call(fd2, "{\"method\":\"io.test.Echo.Echo\",\"oneway\":true}");
        expect(fd2, "{\"method\":\"io.test.Echo.Echo\",\"parameters\":{\"x\":\"z\"}}", "{\"parameters\":{\"x\":\"z\"}}");
        close(fd2);
        run_loop(5);

        s = varlink_server_free(s);
        CHECK(access(sock_path, F_OK) < 0);
        sd_event_unref(event);
        return tap_finish();
}
