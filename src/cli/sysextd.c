/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * sysextd: the command line.  Verbs call the engine in this process (--no-bus) or, without
 * it, the daemon over D-Bus.
 */
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "client.h"
#include "settings.h"
#include "daemon.h"
#include "engine.h"
#include "json-util.h"
#include "log.h"
#include "output.h"
#include "util.h"

typedef struct Args {
        const char *root;
        const char *config;
        bool json, no_bus, force, strict, noexec;
        const char *verb;
} Args;

static void help(void) {
        printf("sysextd [OPTIONS...] COMMAND\n\n"
               "Merge system extension images into /usr and /opt, and replace them atomically.\n\n"
               "Commands:\n"
               "  status         Show the merged hierarchies (default)\n"
               "  list           List the images found and whether they can be merged\n"
               "  merge          Merge the extensions into the hierarchies\n"
               "  refresh        Replace the merged tree with one built from the current images\n"
               "  unmerge        Remove the merged extensions\n"
               "  daemon         Run the D-Bus service org.sysextd1\n\n"
               "Options:\n"
               "  -h --help          Show this help\n"
               "     --version       Show the version\n"
               "     --root=DIR      Operate on the tree below DIR instead of /\n"
               "     --config=FILE   Read the configuration from FILE\n"
               "     --no-bus        Run in this process instead of asking the daemon\n"
               "     --json          Print JSON (status, list)\n"
               "     --force         refresh: rebuild even when nothing changed\n"
               "     --strict        Fail when any image is refused instead of skipping it\n"
               "     --noexec        Mount the merged tree noexec\n\n"
               "See sysextd(8) for details.\n");
}

static int parse_args(int argc, char **argv, Args *a) {
        enum { ARG_VERSION = 0x100, ARG_ROOT, ARG_CONFIG, ARG_JSON, ARG_NO_BUS, ARG_FORCE, ARG_STRICT, ARG_NOEXEC };
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },           { "version", no_argument, NULL, ARG_VERSION },
                { "root", required_argument, NULL, ARG_ROOT }, { "config", required_argument, NULL, ARG_CONFIG },
                { "json", no_argument, NULL, ARG_JSON },       { "no-bus", no_argument, NULL, ARG_NO_BUS },
                { "force", no_argument, NULL, ARG_FORCE },     { "strict", no_argument, NULL, ARG_STRICT },
                { "noexec", no_argument, NULL, ARG_NOEXEC },   {},
        };
        int c;

        while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0)
                switch (c) {
                case 'h':
                        help();
                        return 0;
                case ARG_VERSION:
                        printf("sysextd %s%s\n", PACKAGE_VERSION,
#ifdef SYSEXTD_TEST_HOOKS
                               " +test-hooks"
#else
                               ""
#endif
                        );
                        return 0;
                case ARG_ROOT:
                        a->root = optarg;
                        break;
                case ARG_CONFIG:
                        a->config = optarg;
                        break;
                case ARG_JSON:
                        a->json = true;
                        break;
                case ARG_NO_BUS:
                        a->no_bus = true;
                        break;
                case ARG_FORCE:
                        a->force = true;
                        break;
                case ARG_STRICT:
                        a->strict = true;
                        break;
                case ARG_NOEXEC:
                        a->noexec = true;
                        break;
                default:
                        return -EINVAL;
                }

        a->verb = optind < argc ? argv[optind++] : "status";
        if (!STR_IN_SET(a->verb, "merge", "refresh", "unmerge", "list", "status", "daemon")) {
                log_error("Unknown command '%s'. See 'sysextd --help'.", a->verb);
                return -EINVAL;
        }
        if (optind < argc) {
                log_error("Too many arguments: '%s' after '%s'.", argv[optind], a->verb);
                return -EINVAL;
        }
        return 1;
}

static int local_transition(Engine *e, EngineVerb verb, const EngineOptions *o, bool json) {
        sigset_t ss, old;
        int r;

        /* Ctrl-C, SIGTERM and SIGHUP wait: the engine stops at the last point where nothing has
         * changed, or runs to its commit; then they take effect as usual.  The old tree or the
         * new one, never one cut in the middle. */
        sigemptyset(&ss);
        sigaddset(&ss, SIGINT);
        sigaddset(&ss, SIGTERM);
        sigaddset(&ss, SIGHUP);
        (void) sigprocmask(SIG_BLOCK, &ss, &old);
        r = engine_transition(e, verb, o);
        if (r >= 0 && json)
                printf("{\"generation\":%llu,\"changed\":%s}\n", (unsigned long long) e->result.generation,
                       e->result.changed ? "true" : "false");
        fflush(stdout);
        (void) sigprocmask(SIG_SETMASK, &old, NULL);

        return r < 0 ? r : 0;
}

static int run_local(const Args *a, EngineConfig *config) {
        _cleanup_(engine_freep) Engine *e = NULL;
        EngineOptions o = { .force = a->force, .strict = a->strict, .noexec = a->noexec };
        int r;

        r = engine_new(a->root, config, &e);
        if (r < 0)
                return log_error_errno(r, "Failed to open the root %s: %m", a->root ?: "/");

        if (streq(a->verb, "merge"))
                return local_transition(e, ENGINE_MERGE, &o, a->json);
        if (streq(a->verb, "refresh"))
                return local_transition(e, ENGINE_REFRESH, &o, a->json);
        if (streq(a->verb, "unmerge"))
                return local_transition(e, ENGINE_UNMERGE, &o, a->json);
        if (streq(a->verb, "list")) {
                _cleanup_image_list_ ImageList l = {};
                _cleanup_json_ json_object *j = NULL;

                r = engine_list(e, &l);
                if (r < 0)
                        return r;
                j = output_list_json(&l);
                if (a->json)
                        output_json(j);
                else
                        output_list_text(j);
                return 0;
        }
        if (streq(a->verb, "status")) {
                _cleanup_(engine_status_done) EngineStatus s = {};
                _cleanup_json_ json_object *j = NULL;

                r = engine_recover(e);
                if (r < 0 && r != -EACCES && r != -EROFS)
                        return r;
                r = engine_status(e, &s);
                if (r < 0)
                        return r;
                j = output_status_json(&s);
                if (a->json)
                        output_json(j);
                else
                        output_status_text(j);
                return 0;
        }
        log_error("The command '%s' is not available with --no-bus.", a->verb);
        return -EINVAL;
}

int main(int argc, char **argv) {
        Args a = {};
        int r;

        r = parse_args(argc, argv, &a);
        if (r <= 0)
                return r < 0 ? 2 : 0;

        if (streq(a.verb, "daemon") || a.no_bus) {
                _cleanup_free_ char *msg = NULL;
                EngineConfig config = {};
                DaemonConfig dconfig = {};

                _cleanup_close_ int root_fd = open(a.root ?: "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

                if (root_fd < 0) {
                        log_error_errno(errno, "Failed to open the root %s: %m", a.root ?: "/");
                        return 1;
                }
                r = config_load(root_fd, a.root, a.config, &config, &dconfig, &msg);
                if (r < 0) {
                        log_error("%s", msg ?: "Failed to load the configuration.");
                        return 1;
                }
                if (streq(a.verb, "daemon"))
                        r = daemon_run(a.root, &config, &dconfig);
                else
                        r = run_local(&a, &config);
                engine_config_done(&config);
                return r < 0 ? 1 : 0;
        }

        {
                EngineOptions o = { .force = a.force, .strict = a.strict, .noexec = a.noexec };
                if (a.config)
                        log_warning("--config= is read by the daemon or with --no-bus; ignoring it for this call.");
                r = client_run(a.verb, a.root, &o, a.json);
        }
        return r < 0 ? 1 : 0;
}
