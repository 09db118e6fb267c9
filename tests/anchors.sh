# SPDX-License-Identifier: GPL-2.0
# Suite anchors (sourced by tests/run-guest.sh, tests/run-ftracetest.sh and tests/lib.sh).
#
# Documentation/testing.rst, "Oops: int3": the base kernels under TCG have died with
# "Oops: int3" where a tracepoint's call sites were re-patched while another CPU ran them
# (sys_enter, sched_switch). They are re-patched only when the tracepoint's probes go
# between none, one and two (kernel/tracepoint.c: tracepoint_update_call()), and each
# instance with a syscall event is one probe on sys_enter (sys_exit), each with
# sched_switch one on it. Two instances, tracing off, that keep those events enabled for
# the whole run keep two probes on each: what the tests enable and disable then patches
# nothing. The runners make them before the first test and no reset removes them:
# run-guest.sh's reset_tracing() and lib.sh's cleanup under ftracetest skip them, and
# ftracetest's own initialize_ftrace resets the top level only.
SUITE_ANCHORS="ud_suite_anchor1 ud_suite_anchor2"

# make_anchors TRACING_DIR: make the anchors; fails when one cannot be made.
make_anchors() {
	for anchor in $SUITE_ANCHORS; do
		mkdir "$1/instances/$anchor" || return 1
		echo 0 > "$1/instances/$anchor/tracing_on"
		for anchor_event in syscalls/sys_enter_getppid syscalls/sys_exit_getppid sched/sched_switch; do
			echo 1 > "$1/instances/$anchor/events/$anchor_event/enable" || return 1
		done
	done
}

# is_suite_anchor DIR: DIR (an instance's directory) is one of the anchors.
is_suite_anchor() {
	case " $SUITE_ANCHORS " in *" $(basename "$1") "*) return 0 ;; esac
	return 1
}
