/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * FollowMachines=: the machines of systemd-machined follow the host, in the bus process.
 *
 *   1. watch:  MachineNew and MachineRemoved of org.freedesktop.machine1, and NameOwnerChanged
 *              of that name (machined is started on demand, often after us): matches added
 *              before anything is asked, so that no machine falls between a listing and the
 *              signals
 *   2. list:   ListMachines() when the daemon starts and whenever machined gets an owner (not
 *              activating it: without machined there is no machine)
 *   3. look:   per machine, GetAll() of org.freedesktop.machine1.Machine at its object path:
 *              its Class and its Leader.  Class "host" (machined's ".host") is skipped.  A
 *              pidfd of the leader is opened as soon as the answer arrives: from then on the
 *              PID cannot name another process (a leader that has already gone is skipped)
 *   4. queue:  a follow of the leader with the machine's name, in the queue of transitions,
 *              as Follow() queues one, in the machine mode of follow_add_machine(): a machine
 *              whose namespace is sysextd's, or whose hierarchies show its own OS, is not
 *              followed (no record; one line at info level for the second)
 *   5. gone:   MachineRemoved cancels a lookup of that machine still in flight and queues the
 *              drop of its records (follow_forget_machine()): status stops listing it
 * Every call is asynchronous: machined that hangs or is absent never holds the bus loop, and a
 * lookup that fails is logged at debug level and forgotten.  The same machine listed twice (a
 * signal and a listing) is looked up once at a time; following a namespace again only updates it.
 */
#include <errno.h>
#include <string.h>

#include "fd-util.h"
#include "log.h"
#include "machines.h"
#include "missing.h"
#include "util.h"

#define MACHINED_NAME "org.freedesktop.machine1"
#define MACHINED_PATH "/org/freedesktop/machine1"
#define MACHINED_MANAGER "org.freedesktop.machine1.Manager"
#define MACHINED_MACHINE "org.freedesktop.machine1.Machine"
#define MACHINE_NAME_MAX 255

/* A machine's Class and Leader being asked for. */
struct MachineLookup {
        Manager *manager;
        char *name;
        sd_bus_slot *slot;
        MachineLookup *next;
};

static MachineLookup *lookup_free(MachineLookup *l) {
        MachineLookup *next;

        if (!l)
                return NULL;
        next = l->next;
        sd_bus_slot_unref(l->slot);
        free(l->name);
        free(l);
        return next;
}

/* Takes l out of the manager's list (it is not freed). */
static void lookup_unlink(Manager *m, MachineLookup *l) {
        for (MachineLookup **p = &m->machine_lookups; *p; p = &(*p)->next)
                if (*p == l) {
                        *p = l->next;
                        l->next = NULL;
                        return;
                }
}

static MachineLookup *lookup_find(Manager *m, const char *name) {
        for (MachineLookup *l = m->machine_lookups; l; l = l->next)
                if (streq(l->name, name))
                        return l;
        return NULL;
}

/* Machine names come from machined; still, only short, printable UTF-8 goes into records. */
static bool machine_name_ok(const char *name) {
        return name && !isempty(name) && strlen(name) <= MACHINE_NAME_MAX && utf8_is_valid(name) && !string_has_control(name);
}

/* GetAll() of the Machine interface: Class (s) and Leader (u). */
static int read_machine_properties(sd_bus_message *reply, const char **ret_class, uint32_t *ret_leader) {
        const char *klass = NULL;
        uint32_t leader = 0;
        int r;

        r = sd_bus_message_enter_container(reply, 'a', "{sv}");
        if (r < 0)
                return r;
        while ((r = sd_bus_message_enter_container(reply, 'e', "sv")) > 0) {
                const char *key;

                r = sd_bus_message_read(reply, "s", &key);
                if (r < 0)
                        return r;
                if (streq(key, "Class"))
                        r = sd_bus_message_read(reply, "v", "s", &klass);
                else if (streq(key, "Leader"))
                        r = sd_bus_message_read(reply, "v", "u", &leader);
                else
                        r = sd_bus_message_skip(reply, "v");
                if (r < 0)
                        return r;
                r = sd_bus_message_exit_container(reply);
                if (r < 0)
                        return r;
        }
        if (r < 0)
                return r;
        r = sd_bus_message_exit_container(reply);
        if (r < 0)
                return r;
        *ret_class = klass;
        *ret_leader = leader;
        return 0;
}

static int on_machine_properties(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        MachineLookup *l = userdata;
        Manager *m = l->manager;
        _cleanup_free_ char *safe = NULL;
        const sd_bus_error *e = sd_bus_message_get_error(reply);
        const char *klass = NULL;
        uint32_t leader = 0;
        pid_t pid = 0;
        int pidfd, r;

        lookup_unlink(m, l);
        if (e) {
                log_debug("Machine %s could not be looked up: %s", string_safe(l->name, &safe), e->message ?: e->name);
                goto finish;
        }
        r = read_machine_properties(reply, &klass, &leader);
        if (r < 0) {
                log_debug("Machine %s: unexpected answer of systemd-machined: %s", string_safe(l->name, &safe), strerror(-r));
                goto finish;
        }
        if (streq_ptr(klass, "host") || leader == 0 || leader > INT32_MAX)
                goto finish; /* the host itself, or no leader to follow */
        /* The leader right away: from here on its PID names no other process. */
        pidfd = sys_pidfd_open((pid_t) leader, 0);
        if (pidfd < 0) {
                log_debug("Machine %s: its leader %u has gone: %s", string_safe(l->name, &safe), leader, strerror(errno));
                goto finish;
        }
        /* Alive still (a pidfd of a process that has exited answers ESRCH). */
        if (pidfd_get_pid(pidfd, &pid) < 0 || pid != (pid_t) leader) {
                safe_close(pidfd);
                goto finish;
        }
        r = m->ops->queue_machine(m, l->name, pidfd, pid);
        if (r < 0)
                log_warning("Failed to queue the follow of machine %s: %s", string_safe(l->name, &safe), strerror(-r));
finish:
        lookup_free(l);
        return 0;
}

/* Step 3 for one machine. */
static void machine_look_up(Manager *m, const char *name, const char *path) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *q = NULL;
        _cleanup_free_ char *safe = NULL;
        MachineLookup *l;
        int r;

        if (!machine_name_ok(name) || !sd_bus_object_path_is_valid(path)) {
                log_debug("systemd-machined named a machine %s (%s) that is not followed.", string_safe(strna(name), &safe),
                          strna(path));
                return;
        }
        if (m->exiting || lookup_find(m, name))
                return;
        l = calloc(1, sizeof(MachineLookup));
        if (!l || !(l->name = strdup(name))) {
                free(l);
                log_warning("Out of memory: machine %s is not followed.", string_safe(name, &safe));
                return;
        }
        l->manager = m;
        r = sd_bus_message_new_method_call(m->bus, &q, MACHINED_NAME, path, "org.freedesktop.DBus.Properties", "GetAll");
        if (r >= 0)
                r = sd_bus_message_append(q, "s", MACHINED_MACHINE);
        if (r >= 0)
                r = sd_bus_message_set_auto_start(q, false);
        if (r >= 0)
                r = sd_bus_call_async(m->bus, &l->slot, q, on_machine_properties, l, 0);
        if (r < 0) {
                log_warning("Failed to look up machine %s: %s", string_safe(name, &safe), strerror(-r));
                lookup_free(l);
                return;
        }
        l->next = m->machine_lookups;
        m->machine_lookups = l;
}

static int on_machine_new(sd_bus_message *message, void *userdata, sd_bus_error *ret_error) {
        Manager *m = userdata;
        const char *name, *path;

        if (sd_bus_message_read(message, "so", &name, &path) < 0)
                return 0;
        machine_look_up(m, name, path);
        return 0;
}

static int on_machine_removed(sd_bus_message *message, void *userdata, sd_bus_error *ret_error) {
        Manager *m = userdata;
        _cleanup_free_ char *safe = NULL;
        const char *name, *path;
        MachineLookup *l;
        int r;

        if (sd_bus_message_read(message, "so", &name, &path) < 0 || !machine_name_ok(name))
                return 0;
        /* An answer still on its way would name a leader that may have gone, its PID reused. */
        l = lookup_find(m, name);
        if (l) {
                lookup_unlink(m, l);
                lookup_free(l);
        }
        if (m->exiting)
                return 0;
        r = m->ops->queue_machine(m, name, -EBADF, 0);
        if (r < 0)
                log_warning("Failed to queue forgetting machine %s: %s", string_safe(name, &safe), strerror(-r));
        return 0;
}

static int on_list_machines(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        Manager *m = userdata;
        const sd_bus_error *e = sd_bus_message_get_error(reply);
        const char *name, *klass, *service, *path;
        int r;

        m->list_machines_slot = sd_bus_slot_unref(m->list_machines_slot);
        if (e) {
                /* No machined running: no machine yet; its NameOwnerChanged lists them. */
                log_debug("systemd-machined was not asked for its machines: %s", e->message ?: e->name);
                return 0;
        }
        r = sd_bus_message_enter_container(reply, 'a', "(ssso)");
        if (r < 0)
                goto fail;
        while ((r = sd_bus_message_read(reply, "(ssso)", &name, &klass, &service, &path)) > 0)
                if (!streq(klass, "host"))
                        machine_look_up(m, name, path);
        if (r >= 0)
                r = sd_bus_message_exit_container(reply);
        if (r >= 0)
                return 0;
fail:
        log_warning("Failed to read the machines of systemd-machined: %s", strerror(-r));
        return 0;
}

/* Step 2. */
static void machines_list(Manager *m) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *q = NULL;
        int r;

        m->list_machines_slot = sd_bus_slot_unref(m->list_machines_slot);
        r = sd_bus_message_new_method_call(m->bus, &q, MACHINED_NAME, MACHINED_PATH, MACHINED_MANAGER, "ListMachines");
        if (r >= 0)
                r = sd_bus_message_set_auto_start(q, false);
        if (r >= 0)
                r = sd_bus_call_async(m->bus, &m->list_machines_slot, q, on_list_machines, m, 0);
        if (r < 0)
                log_warning("Failed to ask systemd-machined for its machines: %s", strerror(-r));
}

static int on_machined_owner(sd_bus_message *message, void *userdata, sd_bus_error *ret_error) {
        Manager *m = userdata;
        const char *name, *old_owner, *new_owner;

        if (sd_bus_message_read(message, "sss", &name, &old_owner, &new_owner) < 0 || !streq(name, MACHINED_NAME))
                return 0;
        if (!isempty(new_owner))
                machines_list(m);
        return 0;
}

static int on_match_installed(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        const sd_bus_error *e = sd_bus_message_get_error(reply);

        if (e)
                log_warning("Failed to subscribe to systemd-machined's signals, machines started from now on may not be followed: %s",
                            e->message ?: e->name);
        return 0;
}

void machines_watch(Manager *m) {
        int r;

        if (!m->dconfig.follow_machines)
                return;
        if (!streq(m->engine->root, "/")) {
                log_warning("FollowMachines=yes is ignored with --root=: the machines are the host's.");
                return;
        }
        r = sd_bus_match_signal_async(m->bus, &m->machine_new_slot, MACHINED_NAME, MACHINED_PATH, MACHINED_MANAGER,
                                      "MachineNew", on_machine_new, on_match_installed, m);
        if (r >= 0)
                r = sd_bus_match_signal_async(m->bus, &m->machine_removed_slot, MACHINED_NAME, MACHINED_PATH,
                                              MACHINED_MANAGER, "MachineRemoved", on_machine_removed, on_match_installed, m);
        if (r >= 0)
                r = sd_bus_add_match_async(m->bus, &m->machined_owner_slot,
                                           "type='signal',sender='org.freedesktop.DBus',path='/org/freedesktop/DBus',"
                                           "interface='org.freedesktop.DBus',member='NameOwnerChanged',"
                                           "arg0='" MACHINED_NAME "'",
                                           on_machined_owner, on_match_installed, m);
        if (r < 0) {
                log_warning("Failed to watch systemd-machined; FollowMachines=yes has no effect: %s", strerror(-r));
                machines_done(m);
                return;
        }
        /* After the matches: the bus handles our messages in order, so a machine registered
         * from now on is either listed or signalled. */
        machines_list(m);
        log_info("Following the machines of systemd-machined (FollowMachines=yes).");
}

void machines_done(Manager *m) {
        m->machine_new_slot = sd_bus_slot_unref(m->machine_new_slot);
        m->machine_removed_slot = sd_bus_slot_unref(m->machine_removed_slot);
        m->machined_owner_slot = sd_bus_slot_unref(m->machined_owner_slot);
        m->list_machines_slot = sd_bus_slot_unref(m->list_machines_slot);
        while (m->machine_lookups)
                m->machine_lookups = lookup_free(m->machine_lookups);
}
