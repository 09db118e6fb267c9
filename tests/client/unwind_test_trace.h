/* SPDX-License-Identifier: GPL-2.0 */
/* A bare tracepoint (no trace event): the baseline of the client's request benchmark. */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM unwind_test

#if !defined(_UNWIND_TEST_TRACE_H) || defined(TRACE_HEADER_MULTI_READ)
#define _UNWIND_TEST_TRACE_H

#include <linux/tracepoint.h>

/*
 * The tracepoint is unwind_test_bench on every kernel. From 6.15, DECLARE_TRACE() appends
 * _tp to the names it makes and DECLARE_TRACE_EVENT() makes the plain ones (6.12 has only
 * DECLARE_TRACE(), which makes the plain ones). The client uses no header of the module but
 * <linux/unwind_deferred.h>, so this one difference is handled here, not in src/compat.h.
 */
#ifdef DECLARE_TRACE_EVENT
DECLARE_TRACE_EVENT(unwind_test_bench,
	TP_PROTO(unsigned long i),
	TP_ARGS(i));
#else
DECLARE_TRACE(unwind_test_bench,
	TP_PROTO(unsigned long i),
	TP_ARGS(i));
#endif

#endif /* _UNWIND_TEST_TRACE_H */

#undef TRACE_INCLUDE_PATH
#define TRACE_INCLUDE_PATH .
#undef TRACE_INCLUDE_FILE
#define TRACE_INCLUDE_FILE unwind_test_trace
#include <trace/define_trace.h>
