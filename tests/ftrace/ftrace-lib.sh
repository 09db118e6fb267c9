# SPDX-License-Identifier: GPL-2.0
# Helpers for tests/ftrace/*.tc (sourced after tests/lib.sh; cwd is the tracing directory).

DEMO=$UD_REPO/tools/ustack/demo/demo
USTRESS=$UD_BIN/ustress

# ft_start DIR EVENT...: clear DIR (a tracing dir), enable the option and EVENTs, tracing on.
ft_start() {
	local dir=$1 ev
	shift
	echo 0 > "$dir/tracing_on"
	echo > "$dir/trace"
	echo 1 > "$dir/options/userstacktrace_delay"
	for ev in "$@"; do echo 1 > "$dir/events/$ev/enable"; done
	echo 1 > "$dir/tracing_on"
}

# stacks_of FILE COMM: one line per user_unwind_stack of COMM in a `cat trace` text:
# "cookie off:hash off:hash ...".
stacks_of() {
	awk -v comm="$2" '
	/user_unwind_stack: cookie=/ {
		if (cur != "") print cur
		cur = ""
		if (index($1, comm "-") != 1) next
		for (i = 1; i <= NF; i++) if ($i ~ /^cookie=/) cur = substr($i, 8)
		next
	}
	cur != "" && /^ => 0x/ { h = $3; gsub(/[\[\]]/, "", h); cur = cur " " $2 ":" h; next }
	{ if (cur != "") print cur; cur = "" }
	END { if (cur != "") print cur }' "$1"
}

# func_at ELF FILE_OFFSET: the function whose code holds FILE_OFFSET (via PT_LOAD + nm).
func_at() {
	local elf=$1 off=$(($2)) o v s vaddr= a z t name
	while read -r o v s; do
		if ((off >= 16#$o && off < 16#$o + 16#$s)); then
			vaddr=$((16#$v + off - 16#$o))
			break
		fi
	done < <(readelf -lW "$elf" | awk '$1 == "LOAD" { print $2, $3, $5 }' | sed 's/0x//g')
	[ -n "$vaddr" ] || { echo "?"; return; }
	while read -r a z t name; do
		case $t in t | T) ;; *) continue ;; esac
		if ((vaddr >= 16#$a && vaddr < 16#$a + 16#$z)); then
			echo "$name"
			return
		fi
	done < <(nm -S --defined-only "$elf")
	echo "?"
}

build_id_of() { readelf -n "$1" | awk '/Build ID/ { print $3 }'; }
