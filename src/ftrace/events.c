// SPDX-License-Identifier: GPL-2.0
/*
 * The tracer's events (src/trace_unwind.h: user_unwind_cookie, user_unwind_stack and
 * file_cache) and how they are written: straight into the ring buffer of an instance, as
 * the kernel's own <user stack trace> is, not through their tracepoints. Also the `cat
 * trace` output of user_unwind_stack.
 *
 * Why this is C: TRACE_EVENT() is a C macro; expanded here (CREATE_TRACE_POINTS, in this
 * file only) it defines each event's type, format file and record layout (struct
 * trace_event_raw_*), which exist in this file only: everything that touches a record's
 * fields is here, and the other files write through the functions below.
 */
#include <linux/ring_buffer.h>
#include <linux/trace_events.h>
#include <linux/trace_seq.h>

#include "internal.h"
#include "../../rust-bindings/shim.h"

/* Found through -I$(src)/src, as trace/define_trace.h finds it again (TRACE_INCLUDE_PATH). */
#define CREATE_TRACE_POINTS
#include "trace_unwind.h"

#include "../hooks.h"

/* --- Writing events ------------------------------------------------------------------- */

unsigned int ud_trace_ctx(void)
{
	unsigned long irqflags;

	local_save_flags(irqflags);
	return ud_call(tracing_gen_ctx_irq_test)(irqs_disabled_flags(irqflags) ?
						 TRACE_FLAG_IRQS_OFF : 0);
}

static void *ud_reserve(struct trace_buffer *buffer, struct trace_event_call *call,
			unsigned long len, unsigned int trace_ctx,
			struct ring_buffer_event **event)
{
	struct trace_entry *ent;

	*event = ring_buffer_lock_reserve(buffer, len);
	if (!*event)
		return NULL;
	ent = ud_event_body(*event);
	tracing_generic_entry_update(ent, call->event.type, trace_ctx);
	return ent;
}

/* Fills the user_unwind_cookie event reserved as @event and commits it. */
static __always_inline void ud_commit_cookie_event(struct trace_buffer *buffer,
						   struct ring_buffer_event *event, u64 cookie,
						   unsigned int trace_ctx)
{
	struct trace_event_raw_user_unwind_cookie *entry = ud_event_body(event);

	tracing_generic_entry_update(&entry->ent, event_user_unwind_cookie.event.type, trace_ctx);
	entry->cookie = cookie;
	ring_buffer_unlock_commit(buffer);
}

/* The same for the export (cookie.c), which reserved @event with ud_reserve_cookie(). */
void ud_fill_cookie(struct trace_buffer *buffer, struct ring_buffer_event *event,
		    u64 cookie, unsigned int trace_ctx)
{
	ud_commit_cookie_event(buffer, event, cookie, trace_ctx);
}

/*
 * Reserves a user_unwind_cookie event in @buffer, for ud_fill_cookie() (the export, cookie.c,
 * reserves first and decides after whether to keep it).
 */
struct ring_buffer_event *ud_reserve_cookie(struct trace_buffer *buffer)
{
	return ring_buffer_lock_reserve(buffer, sizeof(struct trace_event_raw_user_unwind_cookie));
}

/*
 * The commit probe's cookie (cookie.c): the unwind of the current kernel entry requested
 * for @work, and its cookie written into @buffer (preemption is off). One function from
 * the request to the commit, since every event of an instance with the option pays it.
 */
void ud_write_cookie(struct unwind_work *work, struct trace_buffer *buffer,
		     unsigned int trace_ctx)
{
	struct ring_buffer_event *event;
	u64 cookie;

	if (unwind_deferred_request(work, &cookie) < 0)
		return;	/* counted by the core (not a user task, table full, ...) */
	event = ud_reserve_cookie(buffer);
	if (!event) {
		ud_count(cookies_lost);
		return;
	}
	ud_commit_cookie_event(buffer, event, cookie, trace_ctx);
	ud_count(cookies);
}

/* Points the __data_loc field @loc of @entry at @len bytes at @off; returns their place. */
static void *ud_dynamic(void *entry, u32 *loc, size_t off, size_t len)
{
	*loc = off | (len << 16);
	return entry + off;
}

/* Fills the __data_loc field @loc of @entry with @len bytes of @src at @off; returns the
 * offset of the next dynamic field. */
static size_t ud_put_dynamic(void *entry, u32 *loc, size_t off, const void *src, size_t len)
{
	memcpy(ud_dynamic(entry, loc, off, len), src, len);
	return off + len;
}

bool ud_write_file(struct trace_buffer *buffer, u32 hash, const char *path,
		   const char *build_id, unsigned int trace_ctx)
{
	struct trace_event_raw_file_cache *entry;
	struct ring_buffer_event *event;
	size_t plen = strlen(path) + 1, blen = strlen(build_id) + 1;
	size_t off = sizeof(*entry);

	entry = ud_reserve(buffer, &event_file_cache, off + plen + blen, trace_ctx, &event);
	if (!entry)
		return false;
	entry->hash = hash;
	off = ud_put_dynamic(entry, &entry->__data_loc_path, off, path, plen);
	ud_put_dynamic(entry, &entry->__data_loc_build_id, off, build_id, blen);
	ring_buffer_unlock_commit(buffer);
	return true;
}

/* Frames that fit in one ring-buffer event (a stack is at most one sub-buffer). */
unsigned int ud_max_frames(struct trace_buffer *buffer)
{
	/*
	 * A one-page sub-buffer holds its header (16 bytes), the event's (4), a time extend
	 * (8) and the largest event (the rest): 64 bytes are more than the three.
	 */
	static_assert(sizeof(struct trace_event_raw_user_unwind_stack) +
		      UD_FRAMES_FIT_ANY_BUFFER * (sizeof(u64) + sizeof(u32)) + 64 <= PAGE_SIZE);
	int room = ring_buffer_max_event_size(buffer) -
		   (int)sizeof(struct trace_event_raw_user_unwind_stack);

	return room > 0 ? room / (sizeof(u64) + sizeof(u32)) : 0;
}

/* The first @nr frames of @frames (at most runs->covered), written from their runs. */
bool ud_write_stack(struct trace_buffer *buffer, u64 cookie, const u64 *frames,
		    const struct ud_runs *runs, unsigned int nr, unsigned int trace_ctx)
{
	struct trace_event_raw_user_unwind_stack *entry;
	struct ring_buffer_event *event;
	size_t off = sizeof(*entry), olen = nr * sizeof(u64), hlen = nr * sizeof(u32);

	entry = ud_reserve(buffer, &event_user_unwind_stack, off + olen + hlen, trace_ctx, &event);
	if (!entry)
		return false;
	entry->cookie = cookie;
	/* Straight into the event: no copy of the arrays on the way. */
	ud_rs_fill_stack(frames, runs, ud_dynamic(entry, &entry->__data_loc_offsets, off, olen),
			 ud_dynamic(entry, &entry->__data_loc_hashes, off + olen, hlen), nr);
	ring_buffer_unlock_commit(buffer);
	return true;
}

/*
 * The frame lines the text of one stack shows. An event's text must fit in one trace_seq
 * (TRACE_SEQ_BUFFER_SIZE, about 8 KiB): a longer one is cut off mid-line in `cat trace`,
 * and trace_pipe prints "[LINE TOO BIG]" in place of the whole event. A frame line is at
 * most 34 bytes (" => 0x%016llx [%08x]" and its newline); 512 are left for the context
 * columns, the header and the line that says how many frames are not shown. So 224
 * of a stack's frames are shown; the binary record (trace_pipe_raw, trace-cmd) has all.
 */
#define UD_FRAME_LINE_MAX	34
#define UD_TEXT_FRAMES		((TRACE_SEQ_BUFFER_SIZE - 512) / UD_FRAME_LINE_MAX)

/* `cat trace`: the cookie, then one line per frame (the print format is for tools). */
static enum print_line_t ud_stack_output(struct trace_iterator *iter, int flags,
					 struct trace_event *event)
{
	struct trace_event_raw_user_unwind_stack *field = (void *)iter->ent;
	struct trace_seq *s = &iter->seq;
	unsigned int i, nr = (field->__data_loc_offsets >> 16) / sizeof(u64);
	unsigned int shown = min_t(unsigned int, nr, UD_TEXT_FRAMES);
	const u64 *offsets = (void *)field + (field->__data_loc_offsets & 0xffff);
	const u32 *hashes = (void *)field + (field->__data_loc_hashes & 0xffff);
	int ret;

	ret = trace_raw_output_prep(iter, event);
	if (ret != TRACE_TYPE_HANDLED)
		return ret;
	trace_seq_printf(s, "cookie=0x%llx nr=%u", field->cookie, nr);
	for (i = 0; i < shown; i++) {
		trace_seq_printf(s, "\n => 0x%016llx ", offsets[i]);
		if (hashes[i] == 0)
			trace_seq_puts(s, "[anon]");
		else if (hashes[i] == U32_MAX)
			trace_seq_puts(s, "[nomap]");
		else
			trace_seq_printf(s, "[%08x]", hashes[i]);
	}
	if (shown < nr)
		trace_seq_printf(s, "\n (%u more frames, in the binary record only)", nr - shown);
	trace_seq_putc(s, '\n');
	return trace_handle_return(s);
}

/*
 * At load (before any instance gets the option): `cat trace` prints user_unwind_stack with
 * ud_stack_output(). The event's functions are static to the file that expands
 * TRACE_EVENT(): this one.
 */
void ud_events_init(void)
{
	trace_event_type_funcs_user_unwind_stack.trace = ud_stack_output;
}
