/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the task work gives a stack's callbacks (src/shim.c: ud_work_call()): every callback
 * gets a pointer to `trace`; the module's own callback (src/ftrace/stack.c) knows it is in a
 * struct ud_stacktrace and reads the task's known mappings from it (container_of), lent to
 * it for the call by the task work, which runs the callbacks one at a time.
 */
#ifndef UD_STACKTRACE_H
#define UD_STACKTRACE_H

#include <linux/unwind_deferred.h>

struct ud_known_mappings;

struct ud_stacktrace {
	struct unwind_stacktrace	trace;
	struct ud_known_mappings	*known;	/* NULL if the task has none (out of memory) */
};

#endif
