/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The unwind trace events (Documentation/trace-events.rst is the contract).
 *
 * They are not emitted through their tracepoints: src/ftrace/events.c (the one file that
 * expands this header with CREATE_TRACE_POINTS) writes them straight into the ring buffer
 * of each instance that has options/userstacktrace_delay set, as the kernel's own <user
 * stack trace> is. TRACE_EVENT() gives them their type ids, format files (so trace-cmd and
 * libtraceevent parse them) and text output.
 *
 * System "ftrace", beside the kernel's own <user stack trace> (events/ftrace/user_stack),
 * as in the seeds' patches: trace-cmd record saves the formats of the ftrace system
 * always, of other systems only when an event of theirs is named, so a trace recorded
 * with just -O userstacktrace_delay can be read.
 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM ftrace

#if !defined(_TRACE_UNWIND_H) || defined(TRACE_HEADER_MULTI_READ)
#define _TRACE_UNWIND_H

#include <linux/tracepoint.h>

TRACE_EVENT(user_unwind_cookie,
	TP_PROTO(u64 cookie),
	TP_ARGS(cookie),
	TP_STRUCT__entry(
		__field(u64, cookie)
	),
	TP_fast_assign(
		__entry->cookie = cookie;
	),
	TP_printk("cookie=0x%llx", __entry->cookie)
);

/* 12 bytes per frame: a u64 offset and a u32 file hash. */
TRACE_EVENT(user_unwind_stack,
	TP_PROTO(u64 cookie, const u64 *offsets, const u32 *hashes, unsigned int nr),
	TP_ARGS(cookie, offsets, hashes, nr),
	TP_STRUCT__entry(
		__field(u64, cookie)
		__dynamic_array(u64, offsets, nr)
		__dynamic_array(u32, hashes, nr)
	),
	TP_fast_assign(
		__entry->cookie = cookie;
		memcpy(__get_dynamic_array(offsets), offsets, nr * sizeof(u64));
		memcpy(__get_dynamic_array(hashes), hashes, nr * sizeof(u32));
	),
	TP_printk("cookie=0x%llx nr=%u offsets=%s hashes=%s", __entry->cookie,
		  __get_dynamic_array_len(offsets) / 8,
		  __print_array(__get_dynamic_array(offsets),
				__get_dynamic_array_len(offsets) / 8, 8),
		  __print_array(__get_dynamic_array(hashes),
				__get_dynamic_array_len(hashes) / 4, 4))
);

TRACE_EVENT(file_cache,
	TP_PROTO(u32 hash, const char *path, const char *build_id),
	TP_ARGS(hash, path, build_id),
	TP_STRUCT__entry(
		__field(u32, hash)
		__string(path, path)
		__string(build_id, build_id)
	),
	TP_fast_assign(
		__entry->hash = hash;
		__assign_str(path);
		__assign_str(build_id);
	),
	TP_printk("hash=0x%08x path=%s build_id=%s", __entry->hash, __get_str(path),
		  __get_str(build_id))
);

#endif /* _TRACE_UNWIND_H */

#undef TRACE_INCLUDE_PATH
#define TRACE_INCLUDE_PATH .
#undef TRACE_INCLUDE_FILE
#define TRACE_INCLUDE_FILE trace_unwind
#include <trace/define_trace.h>
