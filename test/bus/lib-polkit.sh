# shellcheck shell=bash
# A real polkitd on a test's private bus, for the tests of authorization (source after
# lib-bus.sh, inside the test's private mount namespace):
#
#   polkit_requirements       skip (77) without polkitd, its user or its bus policy
#   polkit_files [RULE]       our action file next to the installed ones and RULE (JavaScript)
#                             as the only rule, bind-mounted where polkitd reads them, for
#                             this namespace only
#   start_polkit, stop_polkit polkitd on $BUS_ADDR (start_bus first), waited for
#   use_rule RULE             RULE as the only rule, polkitd restarted to read it
#   call_as USER [--interactive] METHOD [N KEY TYPE VALUE...]
#                             a mutating method through busctl as USER, options as busctl's
#                             a{sv} arguments (none: 0); sets OUT, ERR, RC

polkit_requirements() {
	[[ -x /usr/lib/polkit-1/polkitd ]] || skip "polkitd is not installed (run tools/deps)"
	id polkitd >/dev/null 2>&1 || skip "no user polkitd"
	BUS_EXTRA_POLICY=/usr/share/dbus-1/system.d/org.freedesktop.PolicyKit1.conf
	[[ -r $BUS_EXTRA_POLICY ]] || skip "no bus policy for polkit ($BUS_EXTRA_POLICY)"
	export BUS_EXTRA_POLICY
}

polkit_files() {
	POLKIT_ACTIONS=$WORK/polkit-actions POLKIT_RULES=$WORK/polkit-rules
	mkdir -p "$POLKIT_ACTIONS" "$POLKIT_RULES"
	cp -a /usr/share/polkit-1/actions/. "$POLKIT_ACTIONS/" 2>/dev/null || true
	cp "$BUS_SRCDIR/conf/org.sysextd1.policy" "$POLKIT_ACTIONS/"
	[[ -z ${1:-} ]] || printf '%s\n' "$1" >"$POLKIT_RULES/50-sysextd-test.rules"
	chmod -R a+rX "$POLKIT_ACTIONS" "$POLKIT_RULES" "$WORK"
	mkdir -p /usr/share/polkit-1/actions /etc/polkit-1/rules.d
	mount --bind "$POLKIT_ACTIONS" /usr/share/polkit-1/actions
	mount --bind "$POLKIT_RULES" /etc/polkit-1/rules.d
	if [[ -d /usr/share/polkit-1/rules.d ]]; then
		mkdir -p "$WORK/empty-rules"
		mount --bind "$WORK/empty-rules" /usr/share/polkit-1/rules.d
	fi
}

POLKIT_PID=
start_polkit() {
	DBUS_SYSTEM_BUS_ADDRESS=$BUS_ADDR /usr/lib/polkit-1/polkitd --no-debug >>"$BUS_LOG" 2>&1 &
	POLKIT_PID=$!
	on_exit "kill $POLKIT_PID 2>/dev/null || true"
	for _ in $(seq 100); do
		bctl --auto-start=no status org.freedesktop.PolicyKit1 >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	fail "polkitd did not come up on the private bus:
$(bus_log)"
}

stop_polkit() {
	[[ -n "$POLKIT_PID" ]] || return 0
	kill "$POLKIT_PID" 2>/dev/null || true
	wait "$POLKIT_PID" 2>/dev/null || true
	POLKIT_PID=
	for _ in $(seq 100); do
		bctl --auto-start=no status org.freedesktop.PolicyKit1 >/dev/null 2>&1 || return 0
		sleep 0.1
	done
	fail "org.freedesktop.PolicyKit1 still has an owner"
}

use_rule() {
	stop_polkit
	printf '%s\n' "$1" >"$POLKIT_RULES/50-sysextd-test.rules"
	chmod a+r "$POLKIT_RULES/50-sysextd-test.rules"
	start_polkit
}

call_as() {
	local u=$1 inter=no method
	shift
	if [[ $1 == --interactive ]]; then
		inter=yes
		shift
	fi
	method=$1
	shift
	(($# > 0)) || set -- 0
	_capture setpriv --reuid="$u" --regid="$(id -g "$u")" --clear-groups -- \
		busctl --address="$BUS_ADDR" --allow-interactive-authorization="$inter" \
		call org.sysextd1 /org/sysextd1 org.sysextd1.Manager "$method" 'a{sv}' "$@"
}
