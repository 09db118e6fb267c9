# SPDX-License-Identifier: GPL-2.0
# Helpers of the tests/core tests (sourced after tests/lib.sh): the test client's files.
CLIENT=/sys/kernel/debug/unwind_test

# ctl CMD: one command, one write.
ctl() { echo "$*" > $CLIENT/ctl; }
client_log() { cat $CLIENT/log; }
# client_status KEY [FIELD]: a value from the client's status file.
client_status() { awk -v k="$1" -v f="${2:-2}" '$1 == k { print $f }' $CLIENT/status; }
# callbacks K: callbacks of client slot K since the last "clear".
callbacks() { awk -v k="$1" '$1 == "callbacks" && $2 == k { print $3 }' $CLIENT/status; }
# empty K: callbacks of client slot K with an empty trace since the last "clear".
empty() { awk -v k="$1" '$1 == "callbacks" && $2 == k { sub("empty=", "", $5); print $5 }' $CLIENT/status; }
# bit_of K: the module's bit of client slot K.
bit_of() { awk -v k="$1" '$1 == "callbacks" && $2 == k { sub("bit=", "", $4); print $4 }' $CLIENT/status; }
# field NAME: the value of NAME=... on each line of stdin.
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p"; }
# wait_until SECONDS CMD...: poll until CMD succeeds; fails the test on timeout.
wait_until() {
	local end
	end=$(($(now) + $1))
	shift
	until "$@"; do
		[ "$(now)" -lt $end ] || fail "timed out waiting for: $*"
		sleep 0.1
	done
}

# reload_cycles N [nmi]: N cycles of loading unwind_deferred and the client, registering
# works 1 and 2 (and arming the NMI handler for work 1 with "nmi"), letting the requests
# of the running programs flow for a moment, and unloading both. Prints progress; sets
# CALLBACKS_SEEN to the number of cycles in which work 1 was called back.
rmmod_retry() {
	local i
	for i in $(seq 500); do
		rmmod "$1" 2>/dev/null && return 0
		sleep 0.01
	done
	fail "cannot unload $1"
}
reload_cycles() {
	local c n start
	start=$(now)
	CALLBACKS_SEEN=0
	for c in $(seq "$1"); do
		grep -q '^unwind_deferred ' /proc/modules || insmod "$UD_KO"
		insmod "$UD_CLIENT_KO"
		ctl init 1
		ctl init 2
		[ "${2:-}" = nmi ] && ctl nmi 1
		sleep 0.05
		n=$(($(callbacks 1) + 0))
		[ "$n" -gt 0 ] && CALLBACKS_SEEN=$((CALLBACKS_SEEN + 1))
		rmmod_retry unwind_test_client
		rmmod_retry unwind_deferred
		[ $((c % 20)) != 0 ] || echo "cycle $c at $(($(now) - start)) s"
	done
	return 0
}
