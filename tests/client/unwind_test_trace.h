/* SPDX-License-Identifier: GPL-2.0 */
/* A bare tracepoint (no trace event): the baseline of the client's request benchmark. */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM unwind_test

#if !defined(_UNWIND_TEST_TRACE_H) || defined(TRACE_HEADER_MULTI_READ)
#define _UNWIND_TEST_TRACE_H

#include <linux/tracepoint.h>

DECLARE_TRACE(unwind_test_bench,
	TP_PROTO(unsigned long i),
	TP_ARGS(i));

#endif /* _UNWIND_TEST_TRACE_H */

#undef TRACE_INCLUDE_PATH
#define TRACE_INCLUDE_PATH .
#undef TRACE_INCLUDE_FILE
#define TRACE_INCLUDE_FILE unwind_test_trace
#include <trace/define_trace.h>
