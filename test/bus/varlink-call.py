#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""A tiny varlink client for the tests (varlinkctl is not in Debian 12).

  varlink-call.py SOCKET METHOD [PARAMETERS-JSON] [--more] [--oneway]
      sends one call and prints each reply as one line of compact JSON
      ({"parameters": ...} or {"error": ..., "parameters": ...}); exit 0 when the
      last reply is not an error, 1 when it is, 2 when the connection closed
      before the last reply (prints EOF), 3 on a timeout.
  varlink-call.py SOCKET --raw TEXT          sends TEXT and a NUL as they are
  varlink-call.py SOCKET --huge BYTES        sends BYTES bytes of an unterminated message
      then prints the replies, or EOF when the server closes the connection
      (exit 2), as above.
"""
import json
import socket
import sys


def main():
    args = sys.argv[1:]
    if len(args) < 2:
        print(__doc__, file=sys.stderr)
        return 64
    path = args.pop(0)
    more = "--more" in args
    oneway = "--oneway" in args
    args = [a for a in args if a not in ("--more", "--oneway")]

    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(float(__import__("os").environ.get("VARLINK_TIMEOUT", "120")))
    s.connect(path)

    if args[0] == "--raw":
        payload = args[1].encode() + b"\0"
    elif args[0] == "--huge":
        payload = b'{"method":"io.systemd.sysext.List","parameters":{"x":"' + b"A" * int(args[1])
    else:
        call = {"method": args[0]}
        if len(args) > 1:
            call["parameters"] = json.loads(args[1])
        if more:
            call["more"] = True
        if oneway:
            call["oneway"] = True
        payload = json.dumps(call).encode() + b"\0"
    try:
        s.sendall(payload)
    except (BrokenPipeError, ConnectionResetError):
        print("EOF")
        return 2
    if oneway:
        return 0

    buf = b""
    while True:
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            print("TIMEOUT")
            return 3
        except ConnectionResetError:
            chunk = b""
        if not chunk:
            print("EOF")
            return 2
        buf += chunk
        while b"\0" in buf:
            msg, buf = buf.split(b"\0", 1)
            reply = json.loads(msg)
            print(json.dumps(reply, separators=(",", ":"), sort_keys=True))
            sys.stdout.flush()
            if "error" in reply:
                return 1
            if not reply.get("continues"):
                return 0


if __name__ == "__main__":
    sys.exit(main())
