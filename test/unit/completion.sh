#!/bin/bash
# The bash completion of sysextd (shell-completion/bash/sysextd): commands, options, option
# values in both forms bash may hand over ("--class=sy" whole, or "--class" "=" "sy" split at
# COMP_WORDBREAKS), process IDs after follow; and the zsh one at least parses when zsh is
# there.  TAP.
set -u
src=$1
n=0 failed=0
t() { # NAME EXPECTED WORDS... (the last word is the one being completed)
	local name=$1 want=$2 got
	shift 2
	got=$(bash -c '
		source "$1"; shift
		COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
		_sysextd
		[[ ${#COMPREPLY[@]} -eq 0 ]] || printf "%s\n" "${COMPREPLY[@]}" | sort | tr "\n" " "' _ "$src/bash/sysextd" "$@")
	if [[ $want == pids:* ]]; then # every word a PID with that prefix, PID 1 among them
		local p=${want#pids:}
		[[ " $got" == *" 1 "* ]] && ! grep -qvE "^$p[0-9]*\$" <<<"$(tr ' ' '\n' <<<"$got" | sed '/^$/d')" && got=$want
	fi
	n=$((n + 1))
	if [[ "$got" == "$want" ]]; then
		echo "ok $n - $name"
	else
		echo "not ok $n - $name: got '$got', want '$want'"
		failed=$((failed + 1))
	fi
}
t "all commands" "commit confirm daemon follow list merge refresh rollback status unfollow unmerge " sysextd ""
t "commands by prefix" "unfollow unmerge " sysextd un
t "a command after an option" "refresh " sysextd --no-bus ref
t "options by prefix" "--no-bus --no-legend --no-pager --no-reload " sysextd refresh --no-
t "option with a value keeps its =" "--mutable= " sysextd --mut
t "--class= values (whole word)" "sysext " sysextd --class=sy
t "--class values (split at =)" "confext sysext " sysextd --class =
t "--class values (split, prefix)" "confext " sysextd --class = co
t "--mutable values" "ephemeral ephemeral-import " sysextd --mutable=eph
t "--json values" "off pretty short " sysextd status --json=
t "--image-policy values" "signed " sysextd --image-policy=s
t "--always-refresh values" "no yes " sysextd refresh --always-refresh=
t "nothing after a command that takes no arguments" "" sysextd merge ""
t "follow takes process IDs" "pids:1" sysextd follow 1
t "--pid= takes process IDs" "pids:1" sysextd commit --pid=1
t "rollback's options" "--unit= --unpin " sysextd rollback --un
t "nothing offered for --to=" "" sysextd rollback --to=
t "nothing after rollback" "" sysextd rollback ""
if command -v zsh >/dev/null; then
	n=$((n + 1))
	if zsh -n "$src/zsh/_sysextd"; then echo "ok $n - zsh completion parses"; else echo "not ok $n - zsh -n _sysextd"; failed=$((failed + 1)); fi
fi
echo "1..$n"
[[ $failed -eq 0 ]]
