/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sysextd.conf: the syntax, long lines, errors with their line numbers, configurations that
 * cannot work, and files that are not regular files. */
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "settings.h"
#include "tests.h"
#include "util.h"

static int parse(const char *text, EngineConfig *c, DaemonConfig *d, char **msg) {
        free(*msg);
        *msg = NULL;
        engine_config_done(c);
        return config_parse_string("test.conf", text, c, d, msg);
}

int main(void) {
        _cleanup_(engine_config_done) EngineConfig c = {};
        _cleanup_free_ char *msg = NULL, *long_line = NULL;
        DaemonConfig d = {};

        CHECK(parse("", &c, &d, &msg) == 0);
        CHECK(strv_length(c.classes[IMAGE_CLASS_SYSEXT].hierarchies) == 2 && streq(c.classes[IMAGE_CLASS_SYSEXT].hierarchies[0], "usr") && streq(c.classes[IMAGE_CLASS_SYSEXT].hierarchies[1], "opt"));
        CHECK(d.idle_timeout_usec == CONFIG_DEFAULT_IDLE_TIMEOUT_USEC);

        CHECK(parse("# comment\n; also\n\n[Extensions]\nHierarchies = /usr  /srv/app/ \nStrict=yes\n[Daemon]\nIdleTimeoutSec=infinity\n",
                    &c, &d, &msg) == 0);
        CHECK(strv_length(c.classes[IMAGE_CLASS_SYSEXT].hierarchies) == 2 && streq(c.classes[IMAGE_CLASS_SYSEXT].hierarchies[1], "srv/app"));
        CHECK(c.strict && d.idle_timeout_usec == 0);

        /* Continuation lines, and an empty value resets to the default. */
        CHECK(parse("[Extensions]\nSearchPaths=/a \\\n  /b\nStrict=yes\nStrict=\n", &c, &d, &msg) == 0);
        CHECK(strv_length(c.classes[IMAGE_CLASS_SYSEXT].search_dirs) == 2 && streq(c.classes[IMAGE_CLASS_SYSEXT].search_dirs[1], "b") && !c.strict);

        /* A line of any length: 280 bytes and 100000 bytes. */
        long_line = malloc(100100);
        strcpy(long_line, "[Extensions]\nSearchPaths=");
        for (int i = 0; i < 12; i++)
                strcat(long_line, "/var/lib/extensions-long ");
        CHECK(strlen(long_line) > 280);
        CHECK(parse(long_line, &c, &d, &msg) == 0 && strv_length(c.classes[IMAGE_CLASS_SYSEXT].search_dirs) == 12);
        for (int i = 0; i < 4000; i++)
                strcat(long_line, "/x/y ");
        CHECK(parse(long_line, &c, &d, &msg) == 0 && strv_length(c.classes[IMAGE_CLASS_SYSEXT].search_dirs) == 4012);

        /* Delay=: whole seconds up to a year, empty for the default (0), and what --delay alone
         * and the bus take from it. */
        CHECK(parse("[Extensions]\nDelay=60\n", &c, &d, &msg) == 0 && c.delay_usec == 60ULL * 1000000ULL);
        {
                EngineOptions o = ENGINE_OPTIONS_INIT;

                CHECK(engine_delay_usec(&c, &o) == 60ULL * 1000000ULL);
                o.delay_usec = ENGINE_DELAY_DEFAULT;
                CHECK(engine_delay_usec(&c, &o) == 60ULL * 1000000ULL);
                o.delay_usec = 0;
                CHECK(engine_delay_usec(&c, &o) == 0);
                CHECK(parse("[Extensions]\nDelay=60\nDelay=\n", &c, &d, &msg) == 0 && c.delay_usec == 0);
                o.delay_usec = ENGINE_DELAY_DEFAULT;
                CHECK(engine_delay_usec(&c, &o) == ENGINE_DELAY_FALLBACK_USEC);
                o.delay_usec = ENGINE_DELAY_CONFIG;
                CHECK(engine_delay_usec(&c, &o) == 0);
        }
        CHECK(parse("[Extensions]\nDelay=31536000\n", &c, &d, &msg) == 0);
        CHECK(parse("[Extensions]\nDelay=31536001\n", &c, &d, &msg) == -EINVAL && strstr(msg, "Delay="));
        CHECK(parse("[Extensions]\nDelay=-1\n", &c, &d, &msg) == -EINVAL);
        CHECK(parse("[Extensions]\nDelay=5min\n", &c, &d, &msg) == -EINVAL);
        CHECK(parse("[Extensions]\nDelay= 5\n", &c, &d, &msg) == 0 && c.delay_usec == 5ULL * 1000000ULL);
        CHECK(parse("[Daemon]\nDelay=5\n", &c, &d, &msg) == -EINVAL && strstr(msg, "unknown setting"));

        /* FollowMachines=: a boolean of [Extensions], no by default, empty for the default. */
        CHECK(parse("", &c, &d, &msg) == 0 && !d.follow_machines);
        CHECK(parse("[Extensions]\nFollowMachines=yes\n", &c, &d, &msg) == 0 && d.follow_machines);
        CHECK(parse("[Extensions]\nFollowMachines=yes\nFollowMachines=\n", &c, &d, &msg) == 0 && !d.follow_machines);
        CHECK(parse("[Extensions]\nFollowMachines=sometimes\n", &c, &d, &msg) == -EINVAL && strstr(msg, "FollowMachines="));
        CHECK(parse("[Daemon]\nFollowMachines=yes\n", &c, &d, &msg) == -EINVAL && strstr(msg, "unknown setting"));
        /* OnImageChange=: report (the default) or refresh, in [Extensions]. */
        CHECK(parse("", &c, &d, &msg) == 0 && !d.refresh_on_change);
        CHECK(parse("[Extensions]\nOnImageChange=refresh\n", &c, &d, &msg) == 0 && d.refresh_on_change);
        CHECK(parse("[Extensions]\nOnImageChange=refresh\nOnImageChange=report\n", &c, &d, &msg) == 0 && !d.refresh_on_change);
        CHECK(parse("[Extensions]\nOnImageChange=refresh\nOnImageChange=\n", &c, &d, &msg) == 0 && !d.refresh_on_change);
        CHECK(parse("[Extensions]\nOnImageChange=reboot\n", &c, &d, &msg) == -EINVAL && strstr(msg, "OnImageChange="));
        CHECK(parse("[Daemon]\nOnImageChange=refresh\n", &c, &d, &msg) == -EINVAL && strstr(msg, "unknown setting"));

        /* Errors name the line. */
        CHECK(parse("[Extensions]\nStrict=maybe\n", &c, &d, &msg) == -EINVAL);
        CHECK(msg && strstr(msg, "test.conf:2:") && strstr(msg, "Strict="));
        CHECK(parse("[Extensions]\n\n\nStrikt=yes\n", &c, &d, &msg) == -EINVAL);
        CHECK(msg && strstr(msg, "test.conf:4:") && strstr(msg, "unknown setting Strikt="));
        CHECK(parse("[Extension]\n", &c, &d, &msg) == -EINVAL && strstr(msg, "unknown section [Extension]"));
        CHECK(parse("Strict=yes\n", &c, &d, &msg) == -EINVAL && strstr(msg, "outside of any section"));
        CHECK(parse("[Extensions]\njust words\n", &c, &d, &msg) == -EINVAL && strstr(msg, ":2:"));
        CHECK(parse("[Extensions\n", &c, &d, &msg) == -EINVAL && strstr(msg, "section header"));
        CHECK(parse("[Extensions]\nSearchPaths=/a \\\n/b\nStrict=x\n", &c, &d, &msg) == -EINVAL && strstr(msg, ":4:"));
        CHECK(parse("[Extensions]\nSearchPaths=relative\n", &c, &d, &msg) == -EINVAL);
        CHECK(parse("[Extensions]\nSearchPaths=/a/../b\n", &c, &d, &msg) == -EINVAL);
        CHECK(parse("[Extensions]\nImagePolicy=closed\n", &c, &d, &msg) == -EINVAL && strstr(msg, "'open', 'verity', 'signed' or a systemd image policy"));
        CHECK(parse("[Daemon]\nIdleTimeoutSec=-5\n", &c, &d, &msg) == -EINVAL);
        CHECK(parse("[Extensions]\nStrict=\xff\n", &c, &d, &msg) == -EINVAL && strstr(msg, "UTF-8"));

        /* Configurations that cannot work. */
        CHECK(parse("[Extensions]\nHierarchies=/.\n", &c, &d, &msg) == -EINVAL && strstr(msg, "/ itself"));
        CHECK(parse("[Extensions]\nHierarchies=/\n", &c, &d, &msg) == -EINVAL && strstr(msg, "/ itself"));
        CHECK(parse("[Extensions]\nHierarchies=/run\n", &c, &d, &msg) == -EINVAL && strstr(msg, "/run/sysextd"));
        CHECK(parse("[Extensions]\nHierarchies=/run/sysextd/x\n", &c, &d, &msg) == -EINVAL);
        CHECK(parse("[Extensions]\nHierarchies=/usr /usr\n", &c, &d, &msg) == -EINVAL && strstr(msg, "twice"));
        CHECK(parse("[Extensions]\nHierarchies=/usr //usr/\n", &c, &d, &msg) == -EINVAL && strstr(msg, "twice"));
        CHECK(parse("[Extensions]\nHierarchies=/usr /usr/local\n", &c, &d, &msg) == -EINVAL && strstr(msg, "inside"));
        CHECK(parse("[Extensions]\nHierarchies=/usr/local /usr\n", &c, &d, &msg) == -EINVAL && strstr(msg, "inside"));
        CHECK(parse("[Extensions]\nHierarchies=/a /b /c /d /e /f /g /h /i\n", &c, &d, &msg) == -EINVAL);
        CHECK(parse("[Extensions]\nHierarchies=/usr /usrlocal\n", &c, &d, &msg) == 0); /* not nested */
        CHECK(parse("[Extensions]\nHierarchies=/runner\n", &c, &d, &msg) == 0);

        /* Files that are not regular files are refused, without blocking. */
        {
                char dir[] = "/tmp/sysextd-unit-conf.XXXXXX", fifo[128], plain[128];
                EngineConfig e = {};

                CHECK(mkdtemp(dir) != NULL);
                snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
                snprintf(plain, sizeof(plain), "%s/plain", dir);
                CHECK(mkfifo(fifo, 0600) == 0);
                CHECK(config_load(AT_FDCWD, "/", fifo, &e, &d, &msg) < 0 && strstr(msg, "FIFO"));
                CHECK(config_load(AT_FDCWD, "/", "/dev/zero", &e, &d, &msg) < 0 && strstr(msg, "character device"));
                CHECK(config_load(AT_FDCWD, "/", dir, &e, &d, &msg) < 0 && strstr(msg, "directory"));
                CHECK(config_load(AT_FDCWD, "/", "/nonexistent/sysextd.conf", &e, &d, &msg) < 0);
                {
                        int fd = open(plain, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
                        CHECK(fd >= 0 && write(fd, "[Kernel]\nDegradedMode=unmount-mount\n", 36) == 36);
                        close(fd);
                }
                CHECK(config_load(AT_FDCWD, "/", plain, &e, &d, &msg) == 0 && e.allow_degraded);
                engine_config_done(&e);
                unlink(fifo);
                unlink(plain);
                rmdir(dir);
        }
        return tap_finish();
}
