#!/usr/bin/env python3
# getstatus-burst.py N — open N connections to the bus in $DBUS_SYSTEM_BUS_ADDRESS
# (libsystemd's sd-bus, through ctypes), send one org.sysextd1.Manager.GetStatus
# on each at the same time, and wait for the N replies. Prints one JSON object:
#   {"latency_ms": [...], "errors": [...], "generations": [...], "merged": [...]}
# latency_ms: per call, from its send to its reply, without any process start.
# Used by status-during-refresh.sh next to its busctl burst.
import ctypes
import json
import sys
import time

N = int(sys.argv[1])
TIMEOUT_USEC = 10 * 1000 * 1000

lib = ctypes.CDLL("libsystemd.so.0")
c_p = ctypes.c_void_p


class SdBusError(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("message", ctypes.c_char_p), ("_need_free", ctypes.c_int)]


HANDLER = ctypes.CFUNCTYPE(ctypes.c_int, c_p, c_p, ctypes.POINTER(SdBusError))

lib.sd_bus_open_system.argtypes = [ctypes.POINTER(c_p)]
lib.sd_bus_message_new_method_call.argtypes = [c_p, ctypes.POINTER(c_p)] + [ctypes.c_char_p] * 4
lib.sd_bus_call_async.argtypes = [c_p, ctypes.POINTER(c_p), c_p, HANDLER, c_p, ctypes.c_uint64]
lib.sd_bus_get_unique_name.argtypes = [c_p, ctypes.POINTER(ctypes.c_char_p)]
lib.sd_bus_process.argtypes = [c_p, ctypes.POINTER(c_p)]
lib.sd_bus_wait.argtypes = [c_p, ctypes.c_uint64]
lib.sd_bus_message_is_method_error.argtypes = [c_p, ctypes.c_char_p]
lib.sd_bus_message_get_error.argtypes = [c_p]
lib.sd_bus_message_get_error.restype = ctypes.POINTER(SdBusError)
lib.sd_bus_message_read.argtypes = [c_p, ctypes.c_char_p]
lib.sd_bus_message_enter_container.argtypes = [c_p, ctypes.c_char, ctypes.c_char_p]
lib.sd_bus_message_read_basic.argtypes = [c_p, ctypes.c_char, c_p]
lib.sd_bus_message_skip.argtypes = [c_p, ctypes.c_char_p]
lib.sd_bus_message_exit_container.argtypes = [c_p]

buses = []
for i in range(N):
    b = c_p()
    r = lib.sd_bus_open_system(ctypes.byref(b))
    if r < 0:
        sys.exit("sd_bus_open_system: %d" % r)
    # Blocks until the connection is authenticated and has its name, so that
    # the timing below is of the call alone.
    name = ctypes.c_char_p()
    r = lib.sd_bus_get_unique_name(b, ctypes.byref(name))
    if r < 0:
        sys.exit("sd_bus_get_unique_name: %d" % r)
    buses.append(b)

sent = [0.0] * N
done = [None] * N
errors = []
generations = [None] * N
merged = [None] * N


def make_handler(i):
    def handler(m, userdata, ret_error):
        done[i] = time.monotonic()
        if lib.sd_bus_message_is_method_error(m, None):
            e = lib.sd_bus_message_get_error(m).contents
            errors.append("%s: %s" % (e.name and e.name.decode(), e.message and e.message.decode()))
            return 0
        mode = ctypes.c_char_p()
        gen = ctypes.c_uint64()
        lib.sd_bus_message_read_basic(m, b"s", ctypes.byref(mode))
        lib.sd_bus_message_read_basic(m, b"t", ctypes.byref(gen))
        generations[i] = gen.value
        hs = []
        if lib.sd_bus_message_enter_container(m, b"a", b"(sbastb)") > 0:
            while lib.sd_bus_message_enter_container(m, b"r", b"sbastb") > 0:
                path = ctypes.c_char_p()
                b = ctypes.c_int()
                lib.sd_bus_message_read_basic(m, b"s", ctypes.byref(path))
                lib.sd_bus_message_read_basic(m, b"b", ctypes.byref(b))
                lib.sd_bus_message_skip(m, b"astb")
                lib.sd_bus_message_exit_container(m)
                hs.append([path.value.decode(), bool(b.value)])
        merged[i] = hs
        return 0
    return HANDLER(handler)


handlers = [make_handler(i) for i in range(N)]
msgs = []
for i, b in enumerate(buses):
    m = c_p()
    r = lib.sd_bus_message_new_method_call(b, ctypes.byref(m), b"org.sysextd1", b"/org/sysextd1",
                                           b"org.sysextd1.Manager", b"GetStatus")
    if r < 0:
        sys.exit("sd_bus_message_new_method_call: %d" % r)
    msgs.append(m)
# Every call sent back to back.
for i, b in enumerate(buses):
    sent[i] = time.monotonic()
    r = lib.sd_bus_call_async(b, None, msgs[i], handlers[i], None, TIMEOUT_USEC)
    if r < 0:
        sys.exit("sd_bus_call_async: %d" % r)

deadline = time.monotonic() + 15
while any(d is None for d in done) and time.monotonic() < deadline:
    progress = False
    for i, b in enumerate(buses):
        if done[i] is None:
            while lib.sd_bus_process(b, None) > 0:
                progress = True
    if not progress and any(d is None for d in done):
        # Wait on one pending bus a little; the others are polled next round.
        pending = next(b for i, b in enumerate(buses) if done[i] is None)
        lib.sd_bus_wait(pending, 2000)

lat = [round((d - s) * 1000, 2) if d is not None else None for s, d in zip(sent, done)]
print(json.dumps({"latency_ms": lat, "errors": errors, "generations": generations, "merged": merged}))
