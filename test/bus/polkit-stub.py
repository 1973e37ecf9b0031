#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""A polkit that never answers, for test/bus/polkit-unsafe.sh.

Usage: polkit-stub.py ADDRESS LOG

Connects to the bus at ADDRESS (unix:path=...), takes the name org.freedesktop.PolicyKit1
and then reads every message and answers none.  Appends one line per method call it receives
to LOG ("CALL <member>"), and "READY" once it owns the name.  Speaks the D-Bus wire protocol
itself (SASL EXTERNAL, little-endian messages): no Python D-Bus module needed.  Runs until it
is killed.
"""
import os
import socket
import struct
import sys


def align(buf, n):
    while len(buf) % n:
        buf.append(0)


def put_string(buf, s, sig=False):
    b = s.encode()
    if sig:
        buf.append(len(b))
    else:
        align(buf, 4)
        buf += struct.pack("<I", len(b))
    buf += b + b"\0"


def method_call(serial, dest, path, iface, member, sig="", body=b""):
    fields = bytearray()

    def field(code, typ, value):
        # Offsets count from the message's start: the fields array starts at 16.
        while (16 + len(fields)) % 8:
            fields.append(0)
        fields.append(code)
        put_string(fields, typ, sig=True)
        if typ == "g":
            put_string(fields, value, sig=True)
        else:
            while (16 + len(fields)) % 4:
                fields.append(0)
            b = value.encode()
            fields.extend(struct.pack("<I", len(b)) + b + b"\0")

    field(1, "o", path)
    field(2, "s", iface)
    field(3, "s", member)
    field(6, "s", dest)
    if sig:
        field(8, "g", sig)
    msg = bytearray(b"l\x01\x00\x01")
    msg += struct.pack("<III", len(body), serial, len(fields))
    msg += fields
    align(msg, 8)
    msg += body
    return bytes(msg)


def read_exact(sock, n):
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            sys.exit(0)
        data += chunk
    return data


def read_message(sock):
    """Returns (type, reply_serial, member, body)."""
    head = read_exact(sock, 16)
    endian = "<" if head[0:1] == b"l" else ">"
    mtype = head[1]
    body_len, _serial, fields_len = struct.unpack(endian + "III", head[4:16])
    pad = (8 - (16 + fields_len) % 8) % 8
    rest = read_exact(sock, fields_len + pad + body_len)
    fields = rest[:fields_len]
    member, reply_serial = None, None
    off = 0
    while off < len(fields):
        while (16 + off) % 8:
            off += 1
        if off >= len(fields):
            break
        code = fields[off]
        siglen = fields[off + 1]
        typ = fields[off + 2:off + 2 + siglen].decode()
        off += 3 + siglen
        if typ in ("s", "o"):
            while (16 + off) % 4:
                off += 1
            (n,) = struct.unpack(endian + "I", fields[off:off + 4])
            value = fields[off + 4:off + 4 + n].decode(errors="replace")
            off += 4 + n + 1
        elif typ == "g":
            n = fields[off]
            value = fields[off + 1:off + 1 + n].decode()
            off += 1 + n + 1
        elif typ == "u":
            while (16 + off) % 4:
                off += 1
            (value,) = struct.unpack(endian + "I", fields[off:off + 4])
            off += 4
        else:
            raise SystemExit("unexpected header field type " + typ)
        if code == 3:
            member = value
        elif code == 5:
            reply_serial = value
    return mtype, reply_serial, member, rest[fields_len + pad:]


def main():
    address, log_path = sys.argv[1], sys.argv[2]
    assert address.startswith("unix:path="), address
    path = address[len("unix:path="):].split(",")[0]

    log = open(log_path, "a", buffering=1)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(path)
    sock.sendall(b"\0AUTH EXTERNAL " + str(os.getuid()).encode().hex().encode() + b"\r\n")
    line = b""
    while not line.endswith(b"\r\n"):
        line += read_exact(sock, 1)
    if not line.startswith(b"OK"):
        raise SystemExit("authentication refused: %r" % line)
    sock.sendall(b"BEGIN\r\n")

    sock.sendall(method_call(1, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "Hello"))
    body = bytearray()
    put_string(body, "org.freedesktop.PolicyKit1")
    align(body, 4)
    body += struct.pack("<I", 4)  # DBUS_NAME_FLAG_DO_NOT_QUEUE
    sock.sendall(method_call(2, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                             "RequestName", "su", bytes(body)))
    while True:
        mtype, reply_serial, member, body = read_message(sock)
        if mtype == 3 and reply_serial == 2:  # error
            raise SystemExit("RequestName failed: %r" % body)
        if mtype == 2 and reply_serial == 2:
            (result,) = struct.unpack("<I", body[:4])
            if result != 1:
                raise SystemExit("not the primary owner of org.freedesktop.PolicyKit1 (%d)" % result)
            log.write("READY\n")
            break
    while True:
        mtype, _, member, _ = read_message(sock)
        if mtype == 1:
            log.write("CALL %s\n" % member)


if __name__ == "__main__":
    main()
