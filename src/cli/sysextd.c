/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * sysextd: the command line.  Verbs call the engine in this process (--no-bus) or, without
 * it, the daemon over D-Bus.  The options and the environment are systemd-sysext's, so that a
 * script written for it works with the command name changed; sysextd(8) lists what differs.
 * Every failure exits 1, as with systemd-sysext.
 */
#include <fcntl.h>
#include <getopt.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "client.h"
#include "settings.h"
#include "daemon.h"
#include "engine.h"
#include "journal.h"
#include "json-util.h"
#include "log.h"
#include "output.h"
#include "util.h"

#ifdef SYSEXTD_TEST_HOOKS
#include "testhook.h"
#endif

typedef struct Args {
        const char *root;
        const char *config;
        const char *verb;
        char **pids; /* follow, unfollow */
        pid_t commit_pid;      /* commit --pid= */
        const char *commit_unit; /* commit --unit= */
        bool no_bus;
        EngineOptions options;
        OutputOptions output;
        bool no_reload;
        bool namespaces; /* status --namespaces */
} Args;

static void help(void) {
        printf("sysextd [OPTIONS...] COMMAND\n\n"
               "Merge system extension images into /usr and /opt and configuration extension images\n"
               "into /etc, and replace them atomically.\n\n"
               "Commands:\n"
               "  status                  Show the merged hierarchies (default)\n"
               "  list                    List the images found and whether they can be merged\n"
               "  merge                   Merge the extensions into the hierarchies\n"
               "  refresh                 Replace the merged trees with ones built from the current images\n"
               "  unmerge                 Remove the merged extensions\n"
               "  follow PID...           Make the mount namespaces of these processes follow the host\n"
               "  unfollow PID...         Stop that; the base shows there again\n"
               "  commit                  Commit a delayed transition in every mount namespace\n"
               "  rollback                Go back to the images of an earlier generation\n"
               "  confirm                 Confirm a refresh made with --confirm-within=\n"
               "  daemon                  Run the D-Bus service org.sysextd1\n\n"
               "Options:\n"
               "  -h --help               Show this help\n"
               "     --version            Show the version\n"
               "     --root=PATH          Operate on the tree below PATH instead of /\n"
               "     --config=FILE        Read the configuration from FILE\n"
               "     --no-bus             Run in this process instead of asking the daemon\n"
               "     --class=CLASS        Only sysext or confext images and hierarchies\n"
               "     --mutable=MODE       no, yes, auto, import, ephemeral, ephemeral-import (or help)\n"
               "     --image-policy=POLICY\n"
               "                          open, verity, signed, or a systemd image policy\n"
               "     --noexec=BOOL        Mount the merged trees noexec (confext: yes)\n"
               "     --force              Ignore version incompatibilities\n"
               "     --always-refresh=BOOL\n"
               "                          Do not skip a refresh when nothing changed\n"
               "     --strict             Fail when any image is refused instead of skipping it\n"
               "     --no-reload          Do not reload the service manager or restart units\n"
               "     --delay[=SECONDS]    Delay the switch: every namespace keeps the old trees\n"
               "                          until it commits or the delay ends (default: Delay=,\n"
               "                          else 300)\n"
               "     --confirm-within=SECONDS\n"
               "                          refresh: roll back by itself unless confirmed in time\n"
               "     --to=GENERATION      rollback: to this generation (default: the one before)\n"
               "     --unpin              rollback: drop the pins of the last rollback and refresh\n"
               "     --pid=PID            commit: only the mount namespace of this process\n"
               "     --unit=UNIT          commit: only the mount namespaces of this unit's processes\n"
               "     --namespaces         status: the mount namespaces that did not get the last swap\n"
               "     --json=FORMAT        pretty, short (systemd-sysext's form) or off; --json alone:\n"
               "                          sysextd's documents\n"
               "     --no-pager           Do not pipe output into a pager (there is none)\n"
               "     --no-legend          Do not show the headers\n\n"
               "See sysextd(8) for details.\n");
}

static int parse_args(int argc, char **argv, Args *a) {
        enum {
                ARG_VERSION = 0x100,
                ARG_ROOT,
                ARG_CONFIG,
                ARG_JSON,
                ARG_NO_BUS,
                ARG_FORCE,
                ARG_STRICT,
                ARG_NOEXEC,
                ARG_MUTABLE,
                ARG_CLASS,
                ARG_ALWAYS_REFRESH,
                ARG_NO_RELOAD,
                ARG_NO_PAGER,
                ARG_NO_LEGEND,
                ARG_IMAGE_POLICY,
                ARG_DELAY,
                ARG_PID,
                ARG_UNIT,
                ARG_NAMESPACES,
                ARG_CONFIRM_WITHIN,
                ARG_TO,
                ARG_UNPIN,
        };
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, ARG_VERSION },
                { "root", required_argument, NULL, ARG_ROOT },
                { "config", required_argument, NULL, ARG_CONFIG },
                { "json", optional_argument, NULL, ARG_JSON },
                { "no-bus", no_argument, NULL, ARG_NO_BUS },
                { "force", no_argument, NULL, ARG_FORCE },
                { "strict", no_argument, NULL, ARG_STRICT },
                { "noexec", optional_argument, NULL, ARG_NOEXEC },
                { "mutable", required_argument, NULL, ARG_MUTABLE },
                { "class", required_argument, NULL, ARG_CLASS },
                { "always-refresh", required_argument, NULL, ARG_ALWAYS_REFRESH },
                { "no-reload", no_argument, NULL, ARG_NO_RELOAD },
                { "no-pager", no_argument, NULL, ARG_NO_PAGER },
                { "no-legend", no_argument, NULL, ARG_NO_LEGEND },
                { "image-policy", required_argument, NULL, ARG_IMAGE_POLICY },
                { "delay", optional_argument, NULL, ARG_DELAY },
                { "pid", required_argument, NULL, ARG_PID },
                { "unit", required_argument, NULL, ARG_UNIT },
                { "namespaces", no_argument, NULL, ARG_NAMESPACES },
                { "confirm-within", required_argument, NULL, ARG_CONFIRM_WITHIN },
                { "to", required_argument, NULL, ARG_TO },
                { "unpin", no_argument, NULL, ARG_UNPIN },
                {},
        };
        bool mutable_help = false;
        int c, k, mutable = -1;

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
                        a->root = isempty(optarg) ? NULL : optarg;
                        break;
                case ARG_CONFIG:
                        a->config = optarg;
                        break;
                case ARG_JSON:
                        if (!optarg)
                                a->output.format = OUTPUT_JSON;
                        else if (streq(optarg, "pretty"))
                                a->output.format = OUTPUT_JSON_PRETTY;
                        else if (streq(optarg, "short"))
                                a->output.format = OUTPUT_JSON_SHORT;
                        else if (streq(optarg, "off"))
                                a->output.format = OUTPUT_TEXT;
                        else if (streq(optarg, "help")) {
                                printf("pretty\nshort\noff\n");
                                return 0;
                        } else {
                                log_error("Unknown argument to --json= switch: %s", optarg);
                                return -EINVAL;
                        }
                        break;
                case ARG_NO_BUS:
                        a->no_bus = true;
                        break;
                case ARG_FORCE:
                        a->options.force = true;
                        break;
                case ARG_STRICT:
                        a->options.strict = true;
                        break;
                case ARG_NOEXEC:
                        k = optarg ? parse_boolean(optarg) : 1;
                        if (k < 0) {
                                log_error("Failed to parse boolean argument to '--noexec': %s", optarg);
                                return -EINVAL;
                        }
                        a->options.noexec = k;
                        break;
                case ARG_ALWAYS_REFRESH:
                        k = parse_boolean(optarg);
                        if (k < 0) {
                                log_error("Failed to parse argument to --always-refresh=: %s", optarg);
                                return -EINVAL;
                        }
                        a->options.always_refresh = k;
                        break;
                case ARG_MUTABLE:
                        if (streq(optarg, "help")) {
                                mutable_help = true;
                                break;
                        }
                        k = mutable_mode_from_string(optarg);
                        if (k < 0) {
                                log_error("Failed to parse argument to --mutable=: %s", optarg);
                                return -EINVAL;
                        }
                        mutable = k;
                        break;
                case ARG_CLASS:
                        k = image_class_from_string(optarg);
                        if (k < 0) {
                                log_error("Unknown class '%s': sysext or confext.", optarg);
                                return -EINVAL;
                        }
                        a->options.classes |= 1u << k;
                        break;
                case ARG_NO_RELOAD:
                        a->no_reload = true;
                        break;
                case ARG_NO_PAGER:
                        break;
                case ARG_NO_LEGEND:
                        a->output.legend = false;
                        break;
                case ARG_IMAGE_POLICY:
                        k = image_policy_parse(optarg);
                        if (k < 0) {
                                log_error("Failed to parse image policy '%s' (open, verity, signed, or a systemd image policy).",
                                          optarg);
                                return -EINVAL;
                        }
                        a->options.policy = k;
                        break;
                case ARG_DELAY:
                        if (!optarg)
                                a->options.delay_usec = ENGINE_DELAY_DEFAULT;
                        else if (parse_seconds(optarg, JOURNAL_DELAY_MAX_USEC, &a->options.delay_usec) < 0) {
                                _cleanup_free_ char *safe = NULL;
                                log_error("Failed to parse argument to --delay=: %s (a number of seconds, at most a year; 0: no delay).",
                                          string_safe(optarg, &safe));
                                return -EINVAL;
                        }
                        break;
                case ARG_PID: {
                        char *end;
                        long pid;

                        errno = 0;
                        pid = strtol(optarg, &end, 10);
                        if (errno || *end || end == optarg || pid <= 0 || pid > INT32_MAX) {
                                _cleanup_free_ char *safe = NULL;
                                log_error("'%s' is not a process ID.", string_safe(optarg, &safe));
                                return -EINVAL;
                        }
                        a->commit_pid = (pid_t) pid;
                        break;
                }
                case ARG_UNIT:
                        if (isempty(optarg) || strchr(optarg, '/') || !utf8_is_valid(optarg) || string_has_control(optarg) ||
                            strlen(optarg) > 255) {
                                _cleanup_free_ char *safe = NULL;
                                log_error("'%s' is not a unit name.", string_safe(optarg, &safe));
                                return -EINVAL;
                        }
                        a->commit_unit = optarg;
                        break;
                case ARG_NAMESPACES:
                        a->namespaces = true;
                        break;
                case ARG_CONFIRM_WITHIN:
                        if (parse_seconds(optarg, JOURNAL_CONFIRM_MAX_USEC, &a->options.confirm_within_usec) < 0 ||
                            a->options.confirm_within_usec == 0) {
                                _cleanup_free_ char *safe = NULL;
                                log_error("Failed to parse argument to --confirm-within=: %s (a number of seconds, 1 to a year).",
                                          string_safe(optarg, &safe));
                                return -EINVAL;
                        }
                        break;
                case ARG_TO: {
                        char *end;
                        unsigned long long g;

                        errno = 0;
                        g = strtoull(optarg, &end, 10);
                        if (errno || *end || end == optarg || optarg[0] == '-' || g == 0) {
                                _cleanup_free_ char *safe = NULL;
                                log_error("'%s' is not a generation (a positive number, see sysextd status).", string_safe(optarg, &safe));
                                return -EINVAL;
                        }
                        a->options.rollback_to = g;
                        break;
                }
                case ARG_UNPIN:
                        a->options.unpin = true;
                        break;
                default:
                        return -EINVAL;
                }

        if (mutable_help) {
                if (a->output.legend)
                        printf("Known mutability modes:\n");
                for (int m = 0; m < _MUTABLE_MAX; m++)
                        printf("%s\n", mutable_mode_to_string(m));
                return 0;
        }

        a->verb = optind < argc ? argv[optind++] : "status";
        if (streq(a->verb, "help")) {
                help();
                return 0;
        }
        if (!STR_IN_SET(a->verb, "merge", "refresh", "unmerge", "list", "status", "daemon", "follow", "unfollow", "commit",
                       "rollback", "confirm")) {
                log_error("Unknown command '%s'. See 'sysextd --help'.", a->verb);
                return -EINVAL;
        }
        if (STR_IN_SET(a->verb, "follow", "unfollow")) {
                if (optind >= argc) {
                        log_error("'%s' needs the PID of a process in each mount namespace.", a->verb);
                        return -EINVAL;
                }
                for (; optind < argc; optind++) {
                        char *end;
                        long pid;

                        errno = 0;
                        pid = strtol(argv[optind], &end, 10);
                        if (errno || *end || end == argv[optind] || pid <= 0 || pid > INT32_MAX) {
                                _cleanup_free_ char *safe = NULL;
                                log_error("'%s' is not a process ID.", string_safe(argv[optind], &safe));
                                return -EINVAL;
                        }
                        if (strv_extend(&a->pids, argv[optind]) < 0)
                                return log_oom();
                }
        }
        if (optind < argc) {
                log_error("Too many arguments: '%s' after '%s'.", argv[optind], a->verb);
                return -EINVAL;
        }
        if ((a->commit_pid > 0 || a->commit_unit) && !streq(a->verb, "commit")) {
                log_error("--pid= and --unit= go with 'commit'.");
                return -EINVAL;
        }
        if (a->options.confirm_within_usec > 0 && !streq(a->verb, "refresh")) {
                log_error("--confirm-within= goes with 'refresh'.");
                return -EINVAL;
        }
        if ((a->options.rollback_to > 0 || a->options.unpin) && !streq(a->verb, "rollback")) {
                log_error("--to= and --unpin go with 'rollback'.");
                return -EINVAL;
        }
        if (a->options.rollback_to > 0 && a->options.unpin) {
                log_error("--to= and --unpin exclude each other.");
                return -EINVAL;
        }
        if (a->namespaces && !streq(a->verb, "status")) {
                log_error("--namespaces goes with 'status'.");
                return -EINVAL;
        }
        if (a->commit_pid > 0 && a->commit_unit) {
                log_error("--pid= and --unit= exclude each other.");
                return -EINVAL;
        }
        if (a->options.delay_usec != ENGINE_DELAY_CONFIG && !STR_IN_SET(a->verb, "merge", "refresh", "unmerge")) {
                log_error("--delay goes with merge, refresh and unmerge.");
                return -EINVAL;
        }
        /* Installed under systemd's names (a symlink systemd-confext -> sysextd), the command
         * acts on that class only, as those commands do, unless --class= says otherwise. */
        if (a->options.classes == 0) {
                if (endswith(program_invocation_short_name, "confext"))
                        a->options.classes = 1u << IMAGE_CLASS_CONFEXT;
                else if (endswith(program_invocation_short_name, "sysext"))
                        a->options.classes = 1u << IMAGE_CLASS_SYSEXT;
        }
        /* --mutable= is systemd-sysext's: for system extensions, or for the classes --class=
         * names. */
        if (mutable >= 0)
                for (k = 0; k < _IMAGE_CLASS_MAX; k++)
                        if (a->options.classes ? (a->options.classes & (1u << k)) : k == IMAGE_CLASS_SYSEXT)
                                a->options.mutable[k] = mutable;
        /* As systemd-sysext: another root is no running system to reload. */
        if (a->root)
                a->no_reload = true;
        a->options.no_reload = a->no_reload;
        return 1;
}

static int local_transition(Engine *e, EngineVerb verb, const EngineOptions *o, const OutputOptions *out) {
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
        if (r >= 0 && out->format == OUTPUT_JSON)
                printf("{\"generation\":%llu,\"changed\":%s%s}\n", (unsigned long long) e->result.generation,
                       e->result.changed ? "true" : "false", e->result.delayed ? ",\"delayed\":true" : "");
        fflush(stdout);
        (void) sigprocmask(SIG_SETMASK, &old, NULL);

        return r < 0 ? r : 0;
}

static int run_local(const Args *a, EngineConfig *config, int *base_fd, JournalCache *journal) {
        _cleanup_(engine_freep) Engine *e = NULL;
        int r;

        r = engine_new(a->root, config, &e);
        if (r < 0)
                return log_error_errno(r, "Failed to open the root %s: %m", a->root ?: "/");
        /* The root below the trees, reached for the configuration: the facts of the one
         * transition (or listing) this process runs, without a second helper to reach it
         * again.  Other verbs read no facts: the copy of the mount tree goes now. */
        if (*base_fd >= 0 && STR_IN_SET(a->verb, "merge", "refresh", "rollback", "list"))
                engine_adopt_facts(e, TAKE_FD(*base_fd));
        *base_fd = safe_close(*base_fd);
        engine_adopt_journal_cache(e, journal);
        /* This process ends with its run: the image mounts are kept for the next (layers.h). */
        engine_keep_layers(e);

        if (streq(a->verb, "merge"))
                return local_transition(e, ENGINE_MERGE, &a->options, &a->output);
        if (streq(a->verb, "refresh"))
                return local_transition(e, ENGINE_REFRESH, &a->options, &a->output);
        if (streq(a->verb, "unmerge"))
                return local_transition(e, ENGINE_UNMERGE, &a->options, &a->output);
        if (streq(a->verb, "rollback"))
                return local_transition(e, ENGINE_ROLLBACK, &a->options, &a->output);
        if (streq(a->verb, "confirm")) {
                r = engine_confirm(e);
                if (r >= 0 && a->output.format == OUTPUT_JSON)
                        printf("{\"generation\":%llu,\"changed\":%s}\n", (unsigned long long) e->result.generation,
                               r > 0 ? "true" : "false");
                return r < 0 ? r : 0;
        }
        if (streq(a->verb, "follow") && strv_length(a->pids) > 1) {
                /* All at once: one pass through the namespaces, not one per process. */
                size_t n = strv_length(a->pids), i = 0;
                _cleanup_free_ pid_t *pids = calloc(n, sizeof(pid_t));

                if (!pids)
                        return log_oom();
                STRV_FOREACH(p, a->pids)
                        pids[i++] = (pid_t) atoi(*p);
                return engine_follow_many(e, pids, n);
        }
        if (STR_IN_SET(a->verb, "follow", "unfollow")) {
                int ret = 0;

                STRV_FOREACH(p, a->pids) {
                        r = engine_follow(e, (pid_t) atoi(*p), streq(a->verb, "follow"), NULL);
                        if (r < 0 && ret == 0)
                                ret = r;
                }
                return ret;
        }
        if (streq(a->verb, "commit")) {
                sigset_t ss, old;

                /* As a transition: never cut in the middle. */
                sigemptyset(&ss);
                sigaddset(&ss, SIGINT);
                sigaddset(&ss, SIGTERM);
                sigaddset(&ss, SIGHUP);
                (void) sigprocmask(SIG_BLOCK, &ss, &old);
                r = engine_commit(e, a->commit_pid, a->commit_unit, false);
                if (r >= 0 && a->output.format == OUTPUT_JSON)
                        printf("{\"generation\":%llu,\"changed\":%s}\n", (unsigned long long) e->result.generation,
                               r > 0 ? "true" : "false");
                fflush(stdout);
                (void) sigprocmask(SIG_SETMASK, &old, NULL);
                return r < 0 ? r : 0;
        }
        if (streq(a->verb, "list")) {
                _cleanup_image_list_ ImageList l = {};
                _cleanup_json_ json_object *j = NULL;

                _cleanup_journal_ Journal history = {};

                r = engine_list(e, &a->options, &l);
                if (r < 0)
                        return r;
                j = output_list_json(&l);
                if (engine_history(e, false, &history) >= 0)
                        output_list_pins(j, &history.pins);
                output_list(j, &a->output);
                return 0;
        }
        if (streq(a->verb, "status") && a->namespaces) {
                _cleanup_(stale_namespace_list_done) StaleNamespaceList l = {};
                _cleanup_json_ json_object *j = NULL;

                r = engine_namespaces(e, &l);
                if (r < 0)
                        return r;
                j = output_namespaces_json(&l, e->hierarchies);
                output_namespaces(j, &a->output);
                return 0;
        }
        if (streq(a->verb, "status")) {
                _cleanup_(engine_status_done) EngineStatus s = {};
                _cleanup_json_ json_object *j = NULL;

                r = engine_recover(e);
                if (r < 0 && r != -EACCES && r != -EROFS)
                        return r;
                r = engine_status(e, &a->options, &s);
                if (r < 0)
                        return r;
                r = engine_history_generations(e, &s.journal);
                if (r < 0)
                        return log_error_errno(r, "Failed to read %s/%s/%s/: %m", e->root, JOURNAL_DIR, JOURNAL_GENERATIONS);
                j = output_status_json(&s);
                output_status(j, &a->output);
                return 0;
        }
        log_error("The command '%s' is not available with --no-bus.", a->verb);
        return -EINVAL;
}

/* The environment's mutable modes for a call to the daemon, below the options. */
static void mutable_from_environment(EngineOptions *o) {
        static const char *const names[_IMAGE_CLASS_MAX] = { "SYSTEMD_SYSEXT_MUTABLE_MODE", "SYSTEMD_CONFEXT_MUTABLE_MODE" };

        for (int k = 0; k < _IMAGE_CLASS_MAX; k++) {
                const char *v = getenv(names[k]);
                _cleanup_free_ char *safe = NULL;
                int m;

                if (!v || o->mutable[k] >= 0)
                        continue;
                m = mutable_mode_from_string(v);
                if (m < 0)
                        log_warning("Failed to parse %s environment variable value '%s'. Ignoring.", names[k], string_safe(v, &safe));
                else
                        o->mutable[k] = m;
        }
}

int main(int argc, char **argv) {
        Args a = { .options = ENGINE_OPTIONS_INIT, .output = { .legend = true } };
        _cleanup_strv_free_ char **pids = NULL;
        int r;

        /* One malloc arena for all threads (the base's helper, image probes, the release of
         * old layers): they allocate little and seldom at once, and a thread's own arena is a
         * heap mapped and touched for it, pages a daemon would keep resident. */
        (void) mallopt(M_ARENA_MAX, 1);
        r = parse_args(argc, argv, &a);
        pids = a.pids;
        if (r <= 0)
                return r < 0 ? 1 : 0;

        if (streq(a.verb, "daemon") || a.no_bus) {
                _cleanup_free_ char *msg = NULL;
                EngineConfig config = {};
                DaemonConfig dconfig = {};

                _cleanup_close_ int root_fd = open(a.root ?: "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC), base_fd = -EBADF;
                _cleanup_free_ char *canonical = NULL;
                /* Its helper (a thread) is joined when its answer is taken, or when this block
                 * ends. */
                _cleanup_(base_open_cancel) BaseOpen helper = BASE_OPEN_INIT;
                _cleanup_(journal_cache_done) JournalCache journal = {};

                if (root_fd < 0) {
                        log_error_errno(errno, "Failed to open the root %s: %m", a.root ?: "/");
                        return 1;
                }
                /* The configuration is the host's: read below sysextd's trees (base.h), so that
                 * no image supplies it.  (A file named with --config= is read as named.) */
                canonical = realpath(a.root ?: "/", NULL);
                r = canonical ? base_root_open_start(root_fd, canonical, &helper) : -errno;
                /* While the helper strips and clones: state.json parsed for the transition,
                 * which uses it if the bytes are the same under the lock. */
                if (r >= 0 && STR_IN_SET(a.verb, "merge", "refresh", "unmerge", "rollback"))
                        journal_cache_prefetch(root_fd, &journal);
                if (r >= 0)
                        r = base_root_open_finish(&helper, &base_fd);
                if (streq(a.verb, "daemon"))
                        base_open_cancel(&helper);
                if (r == -EPERM)
                        base_fd = fcntl(root_fd, F_DUPFD_CLOEXEC, 3);
                else if (r < 0) {
                        log_error_errno(r, "Failed to reach %s below sysextd's trees to read the configuration there: %m",
                                        a.root ?: "/");
                        return 1;
                }
                r = base_fd < 0 ? -errno : config_load(base_fd, a.root, a.config, &config, &dconfig, &msg);
                /* The daemon lets the copy of the mount tree go at once: held, it would keep
                 * every file system below the root busy for as long as it lives.  A merge,
                 * refresh, rollback or list run here keeps it for the host's facts
                 * (run_local()). */
                if (streq(a.verb, "daemon"))
                        base_fd = safe_close(base_fd);
                if (r >= 0)
                        r = config_apply_environment(&config, &msg);
                if (r < 0) {
                        log_error("%s", msg ?: "Failed to load the configuration.");
                        engine_config_done(&config);
                        return 1;
                }
#ifdef SYSEXTD_TEST_HOOKS
                testhook_point("config-read", 0);
#endif
                if (streq(a.verb, "daemon"))
                        r = daemon_run(a.root, &config, &dconfig);
                else
                        r = run_local(&a, &config, &base_fd, &journal);
                engine_config_done(&config);
                return r < 0 ? 1 : 0;
        }

        if (a.config)
                log_warning("--config= is read by the daemon or with --no-bus; ignoring it for this call.");
        {
                static const char *const daemon_env[] = { "SYSTEMD_SYSEXT_HIERARCHIES", "SYSTEMD_CONFEXT_HIERARCHIES",
                                                          "SYSTEMD_SYSEXT_OVERLAYFS_MOUNT_OPTIONS",
                                                          "SYSTEMD_CONFEXT_OVERLAYFS_MOUNT_OPTIONS" };
                for (size_t i = 0; i < ELEMENTSOF(daemon_env); i++)
                        if (getenv(daemon_env[i]))
                                log_warning("$%s applies to the daemon's own environment (or use --no-bus); ignoring it for this call.",
                                            daemon_env[i]);
        }
        mutable_from_environment(&a.options);
        r = client_run(a.namespaces && streq(a.verb, "status") ? "namespaces" : a.verb, a.root, a.pids,
                       &(ClientCommit) { .pid = a.commit_pid, .unit = a.commit_unit }, &a.options, &a.output);
        return r < 0 ? 1 : 0;
}
