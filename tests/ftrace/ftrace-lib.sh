# SPDX-License-Identifier: GPL-2.0
# Helpers for tests/ftrace/*.tc (sourced after tests/lib.sh; cwd is the tracing directory).

DEMO=$UD_REPO/tools/ustack/demo/demo
USTRESS=$UD_BIN/ustress

# ft_start DIR EVENT...: clear DIR (a tracing dir), enable the option and EVENTs, tracing on.
ft_start() {
	local dir ev
	dir=$1
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
# The program headers and symbols of each ELF are read once per guest (keyed by its path,
# size, mtime and inode: a rebuilt file is read again); under TCG readelf and nm cost a
# second or more each, and tests look up every frame of every stack.
func_at() {
	_fa_key=$(stat -c '%n %s %Y %i' "$1" | cksum | cut -d' ' -f1)
	_fa_syms=/tmp/ud-func-at.$_fa_key
	if [ ! -s "$_fa_syms" ]; then
		{ readelf -lW "$1"; echo "--- symbols"; nm -S --defined-only "$1"; } > "$_fa_syms.$$"
		mv "$_fa_syms.$$" "$_fa_syms"
	fi
	awk -v off=$(($2)) '
	function hex(s,  i, n) { # mawk has no strtonum
		n = 0; s = tolower(s); sub(/^0x/, "", s)
		for (i = 1; i <= length(s); i++) n = n * 16 + index("0123456789abcdef", substr(s, i, 1)) - 1
		return n
	}
	$0 == "--- symbols" { syms = 1; next }
	!syms && $1 == "LOAD" && vaddr == "" {
		o = hex($2); z = hex($5)
		if (off >= o && off < o + z) vaddr = hex($3) + off - o
	}
	syms && vaddr != "" && ($3 == "t" || $3 == "T") && vaddr >= hex($1) && vaddr < hex($1) + hex($2) {
		name = $4; exit
	}
	END { print (name == "" ? "?" : name) }' "$_fa_syms"
}

build_id_of() { readelf -n "$1" | awk '/Build ID/ { print $3 }'; }
