#!/bin/bash
# What the daemon serves is what org.sysextd1(5) documents, both ways: the
# `node /org/sysextd1 { ... }` block of man/org.sysextd1.5.in (methods with
# their in/out arguments, signals, properties with their types) against
# `busctl introspect` of the running daemon — nothing missing, nothing extra,
# same signatures and argument names. The object has no other interface than
# org.sysextd1.Manager and the standard ones.
set -euo pipefail
# shellcheck source=test/lib.sh
. "$(dirname "$0")/../lib.sh"
# shellcheck source=test/bus/lib-bus.sh
. "$(dirname "$0")/lib-bus.sh"
enter_sandbox "$@"
bus_requirements
make_root
noidle_config
start_bus "$NOIDLE_CONF"

# SYSEXTD_MAN_PAGE overrides the page (to check that this test can fail).
MAN=${SYSEXTD_MAN_PAGE:-$BUS_SRCDIR/man/org.sysextd1.5.in}
[[ -r "$MAN" ]] || fail "cannot read $MAN"

check "busctl introspect (table) and --xml-interface work"
run_bctl introspect org.sysextd1 /org/sysextd1 org.sysextd1.Manager
assert_ok "busctl introspect"
table=$OUT
run_bctl introspect --xml-interface org.sysextd1 /org/sysextd1
assert_ok "busctl introspect --xml-interface"
xml=$OUT

check "the documented API and the served API are the same, both ways"
python3 - "$MAN" "$xml" "$table" <<'PY'
import re
import sys
import xml.etree.ElementTree as ET

man_path, xml_text, table = sys.argv[1], sys.argv[2], sys.argv[3]
errors = []

# ---- the man page: the node block
src = open(man_path).read()
m = re.search(r"^node /org/sysextd1 \{\n(.*?)^\};", src, re.M | re.S)
if not m:
    sys.exit("FAIL: no 'node /org/sysextd1 { ... };' block in " + man_path)
block = m.group(1)
# roff escapes that could appear in a .nf block
block = block.replace("\\-", "-").replace("\\&", "")
im = re.search(r"interface org\.sysextd1\.Manager \{(.*)\};", block, re.S)
if not im:
    sys.exit("FAIL: no 'interface org.sysextd1.Manager { ... };' in the node block")
body = im.group(1)
sections = {}
for name, text in re.findall(r"(methods|signals|properties):(.*?)(?=(?:methods|signals|properties):|\Z)", body, re.S):
    sections[name] = text

def parse_args(text, with_direction):
    args = []
    text = " ".join(text.split())
    if not text:
        return args
    for a in text.split(","):
        words = a.split()
        if with_direction:
            if len(words) != 3 or words[0] not in ("in", "out"):
                errors.append("man: cannot parse method argument %r" % a)
                continue
            args.append(tuple(words))
        else:
            if len(words) != 2:
                errors.append("man: cannot parse signal argument %r" % a)
                continue
            args.append(("out", words[0], words[1]))
    return args

doc = {"methods": {}, "signals": {}, "properties": {}}
for name, args in re.findall(r"(\w+)\((.*?)\);", sections.get("methods", ""), re.S):
    doc["methods"][name] = parse_args(args, True)
for name, args in re.findall(r"(\w+)\((.*?)\);", sections.get("signals", ""), re.S):
    doc["signals"][name] = parse_args(args, False)
for access, typ, name in re.findall(r"(readonly|readwrite)?\s*(\S+)\s+(\w+)\s*=\s*[^;]*;", sections.get("properties", "")):
    doc["properties"][name] = (typ, "read" if access == "readonly" else "readwrite")
if not doc["methods"] or not doc["signals"] or not doc["properties"]:
    errors.append("man: parsed nothing for some section: %r" % doc)

# ---- the daemon: introspection XML
root = ET.fromstring(re.sub(r"<!DOCTYPE[^>]*>", "", xml_text))
ifaces = [i.get("name") for i in root.findall("interface")]
std = {"org.freedesktop.DBus.Peer", "org.freedesktop.DBus.Introspectable", "org.freedesktop.DBus.Properties"}
extra_ifaces = set(ifaces) - std - {"org.sysextd1.Manager"}
if extra_ifaces:
    errors.append("the object serves undocumented interfaces: %s" % sorted(extra_ifaces))
mgr = [i for i in root.findall("interface") if i.get("name") == "org.sysextd1.Manager"]
if not mgr:
    sys.exit("FAIL: the object has no org.sysextd1.Manager interface; it has %s" % ifaces)
mgr = mgr[0]
live = {"methods": {}, "signals": {}, "properties": {}}
for e in mgr.findall("method"):
    live["methods"][e.get("name")] = [(a.get("direction", "in"), a.get("type"), a.get("name")) for a in e.findall("arg")]
for e in mgr.findall("signal"):
    live["signals"][e.get("name")] = [("out", a.get("type"), a.get("name")) for a in e.findall("arg")]
for e in mgr.findall("property"):
    live["properties"][e.get("name")] = (e.get("type"), e.get("access"))

for kind in ("methods", "signals", "properties"):
    d, l = doc[kind], live[kind]
    for n in sorted(set(d) - set(l)):
        errors.append("%s: %s is documented but not served" % (kind, n))
    for n in sorted(set(l) - set(d)):
        errors.append("%s: %s is served but not documented" % (kind, n))
    for n in sorted(set(d) & set(l)):
        if d[n] != l[n]:
            errors.append("%s: %s is documented as %r but served as %r" % (kind, n, d[n], l[n]))

# ---- the daemon: busctl's table (NAME TYPE SIGNATURE RESULT/VALUE FLAGS)
rows = {}
for line in table.splitlines():
    if not line.startswith("."):
        continue
    w = line.split()
    rows[w[0][1:]] = (w[1], w[2], w[3])
def sig(args, direction):
    s = "".join(t for dr, t, _ in args if dr == direction)
    return s or "-"
expect = {}
for n, a in doc["methods"].items():
    expect[n] = ("method", sig(a, "in"), sig(a, "out"))
for n, a in doc["signals"].items():
    expect[n] = ("signal", sig(a, "out"), "-")
for n, (t, _) in doc["properties"].items():
    expect[n] = ("property", t, None)
for n in sorted(set(expect) - set(rows)):
    errors.append("busctl introspect: %s is documented but not listed" % n)
for n in sorted(set(rows) - set(expect)):
    errors.append("busctl introspect: %s is listed but not documented" % n)
for n in sorted(set(rows) & set(expect)):
    e, r = expect[n], rows[n]
    if e[0] != r[0] or e[1] != r[1] or (e[2] is not None and e[2] != r[2]):
        errors.append("busctl introspect: %s documented as %r, listed as %r" % (n, e, r))

print("documented: %d methods, %d signals, %d properties" % tuple(len(doc[k]) for k in ("methods", "signals", "properties")))
for n, a in sorted(doc["methods"].items()):
    print("  method %s(%s) -> (%s)" % (n, sig(a, "in"), sig(a, "out")))
for n, a in sorted(doc["signals"].items()):
    print("  signal %s(%s)" % (n, sig(a, "out")))
for n, (t, acc) in sorted(doc["properties"].items()):
    print("  property %s %s %s" % (acc, t, n))
if errors:
    print("FAIL: the served API differs from org.sysextd1(5):\n  " + "\n  ".join(errors), file=sys.stderr)
    sys.exit(1)
PY

check "the documented error names are the ones the daemon uses"
# Every org.sysextd1.Error.* the daemon's interface header defines is
# documented, and every documented one is defined.
documented=$(grep -o 'org\\\?\.sysextd1\\\?\.Error\\\?\.[A-Za-z]*' "$MAN" | sed 's/\\//g' | sort -u)
defined=$(grep -o '"org\.sysextd1\.Error\.[A-Za-z]*"' "$BUS_SRCDIR/src/daemon/bus-api.h" | tr -d '"' | sort -u)
[[ -n "$documented" && -n "$defined" ]] || fail "found no error names (documented: '$documented', defined: '$defined')"
assert_eq "$documented" "$defined" "documented vs defined error names"

echo "PASS"
