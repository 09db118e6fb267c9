// SPDX-License-Identifier: GPL-2.0
/*
 * ftrace integration: options/userstacktrace_delay in every tracing instance, and the
 * unwind:user_unwind_cookie / user_unwind_stack / file_cache events.
 *
 * Why this is C: it works on struct trace_array, which only exists in kernel/trace/trace.h
 * (built against the kernel source tree, as the module is); Rust for Linux 6.12 has no
 * view of it. The decisions that need no kernel object are Rust (src/core/option.rs,
 * src/core/file_cache.rs, src/core/file_id.rs, called through ud_rs_*).
 *
 * Hooks (6.12 has no API for any of this): the kprobes, kretprobe, functions and variables
 * of src/hooks.h, which says what each is for and what is lost without an optional one:
 *   trace_buffer_unlock_commit_regs  kretprobe: after an event is committed into an
 *                                    instance (the same place where 6.12 records the
 *                                    synchronous <user stack trace>): request a deferred
 *                                    unwind and write user_unwind_cookie after the event.
 *   trace_set_options                kprobe: accept the option in trace_options too
 *                                    (what trace-cmd record -O writes).
 *   trace_array_create_dir           a new instance: add the option file to it
 *   (instance_mkdir)                 (the fallback when the first is missing or inlined).
 *   event_trace_del_tracer           an instance is being removed: forget it.
 *   ring_buffer_record_on/off,       reset the instance's file_cache record (tracing
 *   ring_buffer_reset_online_cpus    on/off, clock change, buffer cleared).
 * and one ftrace export (register_ftrace_export()), for the events that kprobe handlers
 * write: the commit probe cannot fire inside another kprobe's handler.
 */
#include <linux/buildid.h>
#include <linux/hash.h>
#include <linux/delay.h>
#include <linux/kprobes.h>
#include <linux/linkage.h>
#include <linux/objtool.h>
#include <linux/refcount.h>
#include <linux/seq_file.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/random.h>
#include <linux/siphash.h>
#include <linux/slab.h>
#include <linux/task_work.h>
#include <linux/tracefs.h>
#include <linux/unwind_deferred.h>
#include <linux/workqueue.h>

#include "trace.h"	/* kernel/trace/trace.h: struct trace_array */

#define CREATE_TRACE_POINTS
#include "trace_unwind.h"

#include "../rust-bindings/shim.h"
#include "ftrace.h"
#include "hooks.h"

/* The variables of src/hooks.h that kernel/trace/trace.h and kprobes.h declare: same types. */
static_assert(__same_type(ud_data_type_ftrace_trace_arrays, ftrace_trace_arrays));
static_assert(__same_type(ud_data_type_trace_types_lock, trace_types_lock));
static_assert(__same_type(ud_data_type_current_kprobe, current_kprobe));

#define UD_MAX_INSTANCES	64
#define UD_BUILD_ID_HEX		(BUILD_ID_SIZE_MAX * 2 + 1)

/*
 * One tracing instance (or the top-level one) as the module sees it.
 *
 * Lifetime: published in ud_instances[] (RCU: readers are kprobe handlers, which run with
 * preemption off) until the instance is removed or the module unloads; then unpublished,
 * ->tr cleared, and freed by a work item after unwind_deferred_cancel() (which waits for
 * running callbacks) and synchronize_rcu() (which waits for kprobe handlers).
 */
struct ud_instance {
	struct trace_array	*tr;		/* NULL once unpublished */
	struct unwind_work	work;
	struct dentry		*option;	/* NULL once removed */
	bool			enabled;
	atomic64_t		cache_gen;	/* bumped on every file_cache reset event */
	spinlock_t		cache_lock;
	void			*file_cache;	/* Rust FileCache, under cache_lock */
	struct work_struct	release;
	refcount_t		refs;		/* the table's, plus one per open option file */
};

static struct ud_instance __rcu *ud_instances[UD_MAX_INSTANCES];
/* Slots ever used (only grows, under trace_types_lock): scans on the event path stop there. */
static int ud_instance_slots;

/*
 * Every published instance, as (slot, instance). Readers are kprobe handlers (preemption
 * off: our RCU-sched read side) or hold rcu_read_lock_sched() or trace_types_lock.
 */
#define for_each_published_instance(i, inst)					\
	for ((i) = 0; (i) < READ_ONCE(ud_instance_slots); (i)++)		\
		if (((inst) = rcu_dereference_sched(ud_instances[i])))
static struct workqueue_struct *ud_wq;

/*
 * What the optional hooks allow (set at load): a cookie written from the commit probe's
 * entry, nested in the event (else always from its return), and cookies for the events of
 * kprobe handlers (the ftrace export).
 */
static bool ud_cookie_on_entry;
static bool ud_kprobe_cookies;

/* Per-CPU like the core's counters: the cookie counter is bumped for every event. */
struct ud_ftrace_counts {
	u64 cookies, cookies_lost, stacks, stacks_lost, stacks_truncated, files, errors;
	u64 build_id_reads, kprobe_cookies, kprobe_cookies_unsure;
};
static DEFINE_PER_CPU(struct ud_ftrace_counts, ud_ftrace_counts);
#define ud_count(field)	this_cpu_inc(ud_ftrace_counts.field)

/* --- Instance table ------------------------------------------------------------------- */

/* Kprobe handlers: preemption is off, which is our RCU read side. */
static struct ud_instance *ud_find_instance(const struct trace_array *tr)
{
	struct ud_instance *inst;
	int i;

	for_each_published_instance(i, inst)
		if (READ_ONCE(inst->tr) == tr)
			return inst;
	return NULL;
}

static void ud_reset_file_cache(struct ud_instance *inst)
{
	atomic64_inc(&inst->cache_gen);
}

/* --- Writing events ------------------------------------------------------------------- */

static unsigned int ud_trace_ctx(void)
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
	ent = ring_buffer_event_data(*event);
	tracing_generic_entry_update(ent, call->event.type, trace_ctx);
	return ent;
}

/* Fills the user_unwind_cookie event reserved as @event and commits it. */
static void ud_fill_cookie(struct trace_buffer *buffer, struct ring_buffer_event *event,
			   u64 cookie, unsigned int trace_ctx)
{
	struct trace_event_raw_user_unwind_cookie *entry = ring_buffer_event_data(event);

	tracing_generic_entry_update(&entry->ent, event_user_unwind_cookie.event.type, trace_ctx);
	entry->cookie = cookie;
	ring_buffer_unlock_commit(buffer);
}

static bool ud_write_cookie(struct trace_buffer *buffer, u64 cookie, unsigned int trace_ctx)
{
	struct ring_buffer_event *event;

	event = ring_buffer_lock_reserve(buffer, sizeof(struct trace_event_raw_user_unwind_cookie));
	if (!event)
		return false;
	ud_fill_cookie(buffer, event, cookie, trace_ctx);
	return true;
}

/* Fills the __data_loc field @loc of @entry with @len bytes of @src at @off; returns the
 * offset of the next dynamic field. */
static size_t ud_put_dynamic(void *entry, u32 *loc, size_t off, const void *src, size_t len)
{
	*loc = off | (len << 16);
	memcpy(entry + off, src, len);
	return off + len;
}

static bool ud_write_file(struct trace_buffer *buffer, u32 hash, const char *path,
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
static unsigned int ud_max_frames(struct trace_buffer *buffer)
{
	int room = ring_buffer_max_event_size(buffer) -
		   (int)sizeof(struct trace_event_raw_user_unwind_stack);

	return room > 0 ? room / (sizeof(u64) + sizeof(u32)) : 0;
}

static bool ud_write_stack(struct trace_buffer *buffer, u64 cookie, const u64 *offsets,
			   const u32 *hashes, unsigned int nr, unsigned int trace_ctx)
{
	struct trace_event_raw_user_unwind_stack *entry;
	struct ring_buffer_event *event;
	size_t off = sizeof(*entry), olen = nr * sizeof(u64), hlen = nr * sizeof(u32);

	entry = ud_reserve(buffer, &event_user_unwind_stack, off + olen + hlen, trace_ctx, &event);
	if (!entry)
		return false;
	entry->cookie = cookie;
	off = ud_put_dynamic(entry, &entry->__data_loc_offsets, off, offsets, olen);
	ud_put_dynamic(entry, &entry->__data_loc_hashes, off, hashes, hlen);
	ring_buffer_unlock_commit(buffer);
	return true;
}

/* `cat trace`: the cookie, then one line per frame (the print format is for tools). */
static enum print_line_t ud_stack_output(struct trace_iterator *iter, int flags,
					 struct trace_event *event)
{
	struct trace_event_raw_user_unwind_stack *field = (void *)iter->ent;
	struct trace_seq *s = &iter->seq;
	unsigned int i, nr = (field->__data_loc_offsets >> 16) / sizeof(u64);
	const u64 *offsets = (void *)field + (field->__data_loc_offsets & 0xffff);
	const u32 *hashes = (void *)field + (field->__data_loc_hashes & 0xffff);
	int ret;

	ret = trace_raw_output_prep(iter, event);
	if (ret != TRACE_TYPE_HANDLED)
		return ret;
	trace_seq_printf(s, "cookie=0x%llx nr=%u", field->cookie, nr);
	for (i = 0; i < nr; i++) {
		trace_seq_printf(s, "\n => 0x%016llx ", offsets[i]);
		if (hashes[i] == 0)
			trace_seq_puts(s, "[anon]");
		else if (hashes[i] == U32_MAX)
			trace_seq_puts(s, "[nomap]");
		else
			trace_seq_printf(s, "[%08x]", hashes[i]);
	}
	trace_seq_putc(s, '\n');
	return trace_handle_return(s);
}

/* --- The cookie after each event: kretprobe on trace_buffer_unlock_commit_regs --------- */

struct ud_commit_args {
	struct ud_instance	*inst;
	struct trace_buffer	*buffer;
	unsigned int		trace_ctx;
};

/* The cookie of the current kernel entry, written into @buffer (preemption is off). */
static void ud_commit_cookie(struct ud_instance *inst, struct trace_buffer *buffer,
			     unsigned int trace_ctx)
{
	u64 cookie;

	if (ud_rs_request(&inst->work, &cookie) < 0)
		return;	/* counted by the core (not a user task, table full, ...) */
	if (ud_write_cookie(buffer, cookie, trace_ctx))
		ud_count(cookies);
	else
		ud_count(cookies_lost);
}

static int ud_commit_entry(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	struct ud_commit_args *args = (void *)ri->data;
	struct ring_buffer_event *event;
	struct trace_buffer *buffer;
	struct ud_instance *inst;
	struct trace_array *tr;
	unsigned int trace_ctx;

	/* Kernel threads have no user stack; skip them before any other work. */
	if (current->flags & PF_KTHREAD)
		return 1;
	/* Not inst->tr below: the instance may be unpublished meanwhile (tr stays valid). */
	tr = (struct trace_array *)regs_get_kernel_argument(regs, 0);
	inst = ud_find_instance(tr);
	if (!inst || !READ_ONCE(inst->enabled))
		return 1;
	buffer = (struct trace_buffer *)regs_get_kernel_argument(regs, 1);
	event = (struct ring_buffer_event *)regs_get_kernel_argument(regs, 2);
	trace_ctx = regs_get_kernel_argument(regs, 3);

	/*
	 * The event is reserved in the ring buffer and about to be committed: an event
	 * reserved now, nested in it as ring_buffer_nest_start() allows, lands right after
	 * it. Writing here spares the return probe, which costs about as much as the cookie.
	 *
	 * Not so for an event built in this CPU's trace_buffered_event (a filtered or
	 * soft-disabled event file): the commit copies it into the ring buffer, so a cookie
	 * written now would precede it. Nor when the instance has options/stacktrace or
	 * userstacktrace set: the cookie comes after ftrace's own <stack trace> and <user
	 * stack trace> of the event, which are written after the commit. In both cases the
	 * cookie is written on return. (If an option flips between here and the function's
	 * own test, one event gets its cookie before its synchronous stack: readers treat
	 * those as parts of the event either way.)
	 */
	if (ud_cookie_on_entry && event != this_cpu_read(*ud_data(trace_buffered_event)) &&
	    !(READ_ONCE(tr->trace_flags) & (TRACE_ITER_STACKTRACE | TRACE_ITER_USERSTACKTRACE))) {
		ud_call(ring_buffer_nest_start)(buffer);
		ud_commit_cookie(inst, buffer, trace_ctx);
		ud_call(ring_buffer_nest_end)(buffer);
		return 1;
	}
	args->inst = inst;
	args->buffer = buffer;
	args->trace_ctx = trace_ctx;
	return 0;
}

static int ud_commit_return(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	struct ud_commit_args *args = (void *)ri->data;

	/*
	 * The buffered event is committed (copied into the ring buffer): the cookie lands
	 * right after it. The instance cannot have been freed in between (we are in the same
	 * preempt-off kprobe section).
	 */
	ud_commit_cookie(args->inst, args->buffer, args->trace_ctx);
	return 0;
}

static struct kretprobe ud_commit_probe = {
	.kp.symbol_name	= "trace_buffer_unlock_commit_regs",
	.kp.flags	= KPROBE_FLAG_DISABLED,	/* armed while an instance has the option */
	.entry_handler	= ud_commit_entry,
	.handler	= ud_commit_return,
	.data_size	= sizeof(struct ud_commit_args),
	/* maxactive: set at load, one per CPU and context (task, softirq, irq, NMI). */
};

/* --- The cookie after an event written in a kprobe handler: an ftrace export ---------- */

/*
 * The kprobe core runs no kprobe inside another kprobe's handler (it counts a miss), so
 * the commit probe never sees an event that a kprobe or kretprobe handler writes: the
 * dynamic kprobe events above all. ftrace calls its exports from
 * trace_event_buffer_commit() right before trace_buffer_unlock_commit_regs(), in that
 * same context, with the event's data but not its instance. The instance is found by
 * reserving the cookie, nested, in each instance with the option: in the event's own
 * buffer it lands after the event on the event's sub-buffer; in any other buffer it
 * cannot (a sub-buffer belongs to one buffer), and it is discarded there.
 *
 * When the cookie does not fit after the event, the event's buffer pads the rest of the
 * event's sub-buffer and puts the cookie at the start of the next one. So a reservation
 * that starts a sub-buffer is taken as the event's buffer only if the word at the event's
 * end has just turned into a padding header: memory of the event's buffer, which no other
 * buffer's reservation writes. Two cases stay undecided, and their cookie is not written
 * (counted as kprobe_cookies_unsure; some are other instances' events): the event ends
 * exactly at a page boundary (there is no room to pad, and the word beyond may be the end
 * of the memory), or the padding header was already there from an earlier lap.
 *
 * A tried buffer that is not the event's keeps no event, but it sees the attempt: one that
 * is full and does not overwrite counts it as a dropped event, and one whose sub-buffer
 * had no room left moves on to the next one (as its next event would have).
 */
#define UD_SUBBUF_HDR_SIZE	16	/* struct buffer_data_page: time_stamp, commit */

enum ud_follows { UD_NOT_AFTER, UD_AFTER, UD_UNSURE };

static bool ud_is_padding(u32 header)
{
	/* struct ring_buffer_event: type_len is the low 5 bits of the first word. */
	return (header & 0x1f) == RINGBUF_TYPE_PADDING;
}

/*
 * Whether @reserved, just reserved in @buffer, comes right after the event whose data is
 * [@entry, @end); @before is the word at @end before the reservation, if @end_readable.
 */
static enum ud_follows ud_follows_event(struct trace_buffer *buffer, unsigned long entry,
					unsigned long end, bool end_readable, u32 before,
					const struct ring_buffer_event *reserved)
{
	unsigned long mask = ~((unsigned long)ring_buffer_subbuf_size_get(buffer) - 1);
	unsigned long at = (unsigned long)reserved;
	u32 after;

	/* On the event's sub-buffer: sub-buffers are not shared, this is the event's buffer. */
	if ((at & mask) == (entry & mask))
		return UD_AFTER;
	if (at != (at & mask) + UD_SUBBUF_HDR_SIZE)
		return UD_NOT_AFTER;
	if (!end_readable)
		return UD_UNSURE;
	after = READ_ONCE(*(const u32 *)end);
	if (!ud_is_padding(after))
		return UD_NOT_AFTER;
	return after != before ? UD_AFTER : UD_UNSURE;
}

static void ud_export_write(struct trace_export *export, const void *entry, unsigned int size)
{
	unsigned long end = (unsigned long)entry + size;	/* 4-byte aligned */
	struct ring_buffer_event *buffered, *event;
	enum ud_follows follows;
	struct trace_buffer *buffer;
	struct ud_instance *inst;
	struct trace_array *tr;
	bool end_readable;
	u32 before = 0;
	u64 cookie;
	int i;

	/* Outside kprobe handlers the commit probe writes the cookie. */
	if (!this_cpu_read(*ud_data(current_kprobe)) || (current->flags & PF_KTHREAD))
		return;
	/*
	 * An event built in this CPU's trace_buffered_event (filtered or soft-disabled event
	 * file) is copied into the ring buffer by the commit, after us: no cookie can follow
	 * it from here (documented).
	 */
	buffered = this_cpu_read(*ud_data(trace_buffered_event));
	if (buffered && entry == ring_buffer_event_data(buffered))
		return;
	/* A word inside the event's page (a page boundary may be the end of the memory). */
	end_readable = end & (PAGE_SIZE - 1);
	if (end_readable)
		before = READ_ONCE(*(const u32 *)end);
	/* ftrace_exports() runs us with preemption off: our RCU read side (ud_instance). */
	for_each_published_instance(i, inst) {
		if (!READ_ONCE(inst->enabled))
			continue;
		tr = READ_ONCE(inst->tr);
		if (!tr)
			continue;
		buffer = READ_ONCE(tr->array_buffer.buffer);
		ud_call(ring_buffer_nest_start)(buffer);
		event = ring_buffer_lock_reserve(buffer,
						 sizeof(struct trace_event_raw_user_unwind_cookie));
		follows = UD_NOT_AFTER;
		if (event) {
			follows = ud_follows_event(buffer, (unsigned long)entry, end, end_readable,
						   before, event);
			if (follows == UD_AFTER && ud_rs_request(&inst->work, &cookie) >= 0) {
				ud_fill_cookie(buffer, event, cookie, ud_trace_ctx());
				ud_count(cookies);
				ud_count(kprobe_cookies);
			} else {
				/* Not the event's buffer (or no request): nothing is left behind. */
				ring_buffer_discard_commit(buffer, event);
			}
		}
		ud_call(ring_buffer_nest_end)(buffer);
		if (follows == UD_UNSURE)
			ud_count(kprobe_cookies_unsure);
		if (follows == UD_AFTER)
			return;
	}
}

static struct trace_export ud_export = {
	.write	= ud_export_write,
	.flags	= TRACE_EXPORT_EVENT,
};
static bool ud_export_registered;	/* under ud_commit_probe_lock */

/* --- The stack: the unwind callback (task context, once per cookie and instance) ------- */

/* A file to announce, found during the walk: described after the mmap lock is dropped. */
struct ud_file_pending {
	struct ud_file_pending	*next;
	struct file		*file;	/* a reference of ours */
	u32			hash;
};

struct ud_file_note {
	struct ud_file_note	*next;
	u32			hash;
	char			build_id[UD_BUILD_ID_HEX];
	char			path[];
};

/*
 * Build-ids of recently described files, so that reminders and other processes mapping the
 * same file do not read its ELF notes again (on a network or 9p file system each read is a
 * round trip). Keyed by super block and inode number, not by the struct inode: 9p without a
 * cache gives each open its own inode. The ctime check makes a file rewritten in place (or
 * a reused inode number) read again. Internal only: the trace never shows these numbers.
 * Bounded: direct-mapped, 64 entries.
 */
#define UD_BUILD_ID_CACHE_BITS	6
struct ud_build_id_entry {
	const struct super_block *sb;
	unsigned long		ino;
	struct timespec64	ctime;
	__u32			size;	/* 0: the file has no build-id */
	unsigned char		id[BUILD_ID_SIZE_MAX];
};
static struct ud_build_id_entry ud_build_ids[1 << UD_BUILD_ID_CACHE_BITS];
static DEFINE_SPINLOCK(ud_build_ids_lock);

static void ud_build_id_hex(struct file *file, char *hex)
{
	const struct inode *inode = file_inode(file);
	struct ud_build_id_entry *e = &ud_build_ids[hash_64((u64)(unsigned long)inode->i_sb ^
							     inode->i_ino, UD_BUILD_ID_CACHE_BITS)];
	struct timespec64 ctime = inode_get_ctime(inode);
	unsigned char id[BUILD_ID_SIZE_MAX];
	__u32 size = 0;
	bool hit;

	spin_lock(&ud_build_ids_lock);
	hit = e->sb == inode->i_sb && e->ino == inode->i_ino && timespec64_equal(&e->ctime, &ctime);
	if (hit) {
		size = e->size;
		memcpy(id, e->id, size);
	}
	spin_unlock(&ud_build_ids_lock);
	if (!hit) {
		ud_count(build_id_reads);
		if (!ud_hook_ok(UD_HOOK_build_id_parse_file) ||
		    ud_call(build_id_parse_file)(file, id, &size) || size > BUILD_ID_SIZE_MAX)
			size = 0;
		spin_lock(&ud_build_ids_lock);
		e->sb = inode->i_sb;
		e->ino = inode->i_ino;
		e->ctime = ctime;
		e->size = size;
		memcpy(e->id, id, size);
		spin_unlock(&ud_build_ids_lock);
	}
	*bin2hex(hex, id, size) = '\0';
}

/* Path and build-id of @file for a file_cache event (rare: first use and reminders). */
static struct ud_file_note *ud_describe_file(struct file *file, u32 hash)
{
	struct ud_file_note *note;
	char *pathbuf, *path;

	pathbuf = __getname();
	if (!pathbuf)
		return NULL;
	/*
	 * The path the task sees (as /proc/PID/maps shows it): a file mapped through
	 * overlayfs is mapped as the real file underneath, whose own f_path names a private
	 * mount of the lower layer (virtme-ng's /tmp is such an overlay).
	 */
	path = d_path(file_user_path(file), pathbuf, PATH_MAX);
	if (IS_ERR(path))
		path = "(unknown)";
	note = kzalloc(sizeof(*note) + strlen(path) + 1, GFP_KERNEL);
	if (!note) {
		__putname(pathbuf);
		return NULL;
	}
	note->hash = hash;
	strcpy(note->path, path);
	__putname(pathbuf);
	ud_build_id_hex(file, note->build_id);
	return note;
}

/*
 * The file's hash in the trace: its identity (super block, inode, ctime, keyed with this
 * load's secret), not its struct file, whose address a library loaded after another was
 * unloaded may reuse (the second would then be named by the first's file_cache).
 */
static u32 ud_file_hash(const struct file *file)
{
	return ud_rs_fold_file_hash(ud_file_identity(file));
}

/* The address space of a stack being resolved (ud_rs_resolve_stack()'s context). */
struct ud_stack_space {
	struct mm_struct	*mm;	/* mmap lock held for reading */
	struct ud_instance	*inst;
	u64			cache_gen;
	struct ud_file_pending	*pending;	/* files to announce */
	bool			error;
};

bool ud_stack_lookup(void *ctx, u64 addr, struct ud_mapping *m)
{
	struct ud_stack_space *space = ctx;
	struct vm_area_struct *vma = vma_lookup(space->mm, addr);

	if (!vma)
		return false;
	m->start = vma->vm_start;
	m->end = vma->vm_end;
	m->pgoff = vma->vm_pgoff;
	m->file = vma->vm_file;
	return true;
}

unsigned int ud_stack_file_run(void *ctx, void *file)
{
	struct ud_stack_space *space = ctx;
	struct ud_file_pending *p;
	u32 hash = ud_file_hash(file);
	bool announce;

	/*
	 * Announce the file if this instance has not (recently). A use is counted per run of
	 * frames in one file, not per frame, so that the reminder comes every so many stacks,
	 * whatever their depth.
	 */
	spin_lock(&space->inst->cache_lock);
	announce = ud_rs_file_cache_use(space->inst->file_cache, space->cache_gen, hash);
	spin_unlock(&space->inst->cache_lock);
	if (!announce)
		return hash;
	/*
	 * Not described here: reading the build-id takes the file's inode lock, which ranks
	 * above mmap_lock (a read that faults on its user buffer takes them in that order;
	 * lockdep saw the inversion on 9p). Keep a reference and describe it after the walk.
	 */
	p = kmalloc(sizeof(*p), GFP_KERNEL);
	if (!p) {
		space->error = true;
		return hash;
	}
	p->file = get_file(file);
	p->hash = hash;
	p->next = space->pending;
	space->pending = p;
	return hash;
}

static void ud_stack_callback(struct unwind_work *work, struct unwind_stacktrace *trace,
			      u64 cookie)
{
	struct ud_instance *inst = container_of(work, struct ud_instance, work);
	struct ud_stack_space space = { .mm = current->mm, .inst = inst };
	struct ud_file_note *notes = NULL, *note;
	struct ud_file_pending *pending, *p;
	struct trace_buffer *buffer;
	struct trace_array *tr;
	unsigned int nr = trace->nr, trace_ctx;
	u64 *offsets = NULL;
	u32 *hashes = NULL;

	if (!space.mm)
		nr = 0;
	nr = min_t(unsigned int, nr, UD_MAX_STACK_ENTRIES);

	if (nr) {
		/*
		 * Sized to the stack (12 bytes a frame, under 1 KiB for most): a fixed 6 KiB
		 * buffer would come from the page allocator on every stack with SLUB_TINY.
		 */
		offsets = kmalloc_array(nr, sizeof(*offsets) + sizeof(*hashes), GFP_KERNEL);
		if (!offsets) {
			ud_count(errors);
			return;
		}
		hashes = (u32 *)(offsets + nr);
		space.cache_gen = atomic64_read(&inst->cache_gen);
		mmap_read_lock(space.mm);
		ud_rs_resolve_stack(&space, (const u64 *)trace->entries, offsets, hashes, nr);
		mmap_read_unlock(space.mm);
		if (space.error)
			ud_count(errors);
	}

	/* Without the mmap lock: path and build-id of the files to announce. */
	pending = space.pending;
	while (pending) {
		p = pending;
		pending = p->next;
		note = ud_describe_file(p->file, p->hash);
		fput(p->file);
		kfree(p);
		if (note) {
			note->next = notes;	/* the walk's first file ends up first */
			notes = note;
		} else {
			ud_count(errors);
		}
	}

	/* Ring-buffer writes need preemption off; it also pins inst->tr (see ud_instance). */
	preempt_disable_notrace();
	tr = READ_ONCE(inst->tr);
	if (tr) {
		buffer = READ_ONCE(tr->array_buffer.buffer);
		trace_ctx = ud_trace_ctx();
		for (note = notes; note; note = note->next) {
			if (ud_write_file(buffer, note->hash, note->path, note->build_id, trace_ctx))
				ud_count(files);
		}
		if (nr > ud_max_frames(buffer)) {
			/* Keep the innermost frames. */
			nr = ud_max_frames(buffer);
			ud_count(stacks_truncated);
		}
		if (ud_write_stack(buffer, cookie, offsets, hashes, nr, trace_ctx))
			ud_count(stacks);
		else
			ud_count(stacks_lost);
	}
	preempt_enable_notrace();

	while (notes) {
		note = notes->next;
		kfree(notes);
		notes = note;
	}
	kfree(offsets);
}

/* --- Work a kprobe handler cannot do itself ---------------------------------------------- */

/*
 * A kprobe handler cannot sleep, and ours often run with trace_types_lock held. What they
 * need done in process context runs before the current task returns to user space (so the
 * mkdir or write that triggered it sees it done when it returns), or from our workqueue
 * for a kernel thread or a task that cannot take task works any more. @fn frees the
 * containing object. Unload waits until none is in flight: a task work or work item must
 * not outlive the module's text.
 */
struct ud_deferred {
	struct callback_head	twork;
	struct work_struct	work;
	void			(*fn)(struct ud_deferred *d);
};
static atomic_t ud_deferred_in_flight = ATOMIC_INIT(0);

static void ud_deferred_run(struct ud_deferred *d)
{
	d->fn(d);
	atomic_dec(&ud_deferred_in_flight);	/* last access to module data */
}

static void ud_deferred_twork(struct callback_head *head)
{
	ud_deferred_run(container_of(head, struct ud_deferred, twork));
}

static void ud_deferred_work(struct work_struct *w)
{
	ud_deferred_run(container_of(w, struct ud_deferred, work));
}

static void ud_defer(struct ud_deferred *d, void (*fn)(struct ud_deferred *d))
{
	d->fn = fn;
	atomic_inc(&ud_deferred_in_flight);
	init_task_work(&d->twork, ud_deferred_twork);
	if ((current->flags & PF_KTHREAD) || task_work_add(current, &d->twork, TWA_RESUME)) {
		INIT_WORK(&d->work, ud_deferred_work);
		queue_work(ud_wq, &d->work);
	}
}

static void ud_deferred_wait(void)
{
	while (atomic_read(&ud_deferred_in_flight))
		msleep(10);
}

/* --- Arming the commit probe ----------------------------------------------------------- */

/*
 * The commit probe costs every event of every instance (a kprobe hit and a lookup), so it
 * is armed only while some instance has the option set: loaded but unused, the module
 * costs trace events nothing. Arming and disarming patch kernel text and sleep; they are
 * serialised here and always follow the current state of the options, so concurrent
 * toggles end with the probe armed exactly when an option is set.
 */
static DEFINE_MUTEX(ud_commit_probe_lock);

static bool ud_commit_probe_armed(void)
{
	return !kprobe_disabled(&ud_commit_probe.kp);
}

static void ud_commit_probe_update(void)
{
	struct ud_instance *inst;
	bool want = false;
	int i, ret;

	mutex_lock(&ud_commit_probe_lock);
	rcu_read_lock_sched();
	for_each_published_instance(i, inst)
		want |= READ_ONCE(inst->enabled);
	rcu_read_unlock_sched();
	/*
	 * The probe is registered before any instance has the option file and unregistered
	 * (which leaves it disabled) after every instance is unpublished: outside that time
	 * there is nothing to want, so this never touches an unregistered probe.
	 */
	if (want != ud_commit_probe_armed()) {
		ret = want ? enable_kretprobe(&ud_commit_probe) : disable_kretprobe(&ud_commit_probe);
		if (ret)
			pr_warn_once("unwind_deferred: cannot %s the commit probe: %d\n",
				     want ? "arm" : "disarm", ret);
	}
	/* The export serves kprobe handlers' events: armed with the probe. */
	if ((want && ud_kprobe_cookies) != ud_export_registered) {
		if (!ud_export_registered)
			register_ftrace_export(&ud_export);
		else
			unregister_ftrace_export(&ud_export);
		ud_export_registered = !ud_export_registered;
	}
	mutex_unlock(&ud_commit_probe_lock);
}

static void ud_deferred_update(struct ud_deferred *d)
{
	ud_commit_probe_update();
	kfree(d);
}

/* From a kprobe handler (atomic context): done before the current task returns to user. */
static void ud_commit_probe_update_soon(void)
{
	struct ud_deferred *d = kzalloc(sizeof(*d), GFP_ATOMIC);

	if (!d) {
		pr_warn_once("unwind_deferred: out of memory: the commit probe may stay %s\n",
			     ud_commit_probe_armed() ? "armed" : "disarmed");
		return;
	}
	ud_defer(d, ud_deferred_update);
}

/* --- options/userstacktrace_delay ----------------------------------------------------- */

static ssize_t ud_option_read(struct file *filp, char __user *ubuf, size_t cnt, loff_t *ppos)
{
	struct ud_instance *inst = filp->private_data;
	const char *val = READ_ONCE(inst->enabled) ? "1\n" : "0\n";

	return simple_read_from_buffer(ubuf, cnt, ppos, val, 2);
}

static ssize_t ud_option_write(struct file *filp, const char __user *ubuf, size_t cnt,
			       loff_t *ppos)
{
	struct ud_instance *inst = filp->private_data;
	char buf[4];
	int val;

	if (cnt == 0 || cnt > sizeof(buf))
		return -EINVAL;
	if (copy_from_user(buf, ubuf, cnt))
		return -EFAULT;
	val = ud_rs_parse_bool_option(buf, cnt);
	if (val < 0)
		return -EINVAL;
	if (READ_ONCE(inst->enabled) != !!val) {
		WRITE_ONCE(inst->enabled, !!val);
		ud_reset_file_cache(inst);
	}
	ud_commit_probe_update();
	*ppos += cnt;
	return cnt;
}

static void ud_instance_put(struct ud_instance *inst);

/*
 * The option file's inode points to its ud_instance. The file can stay open after the
 * instance is removed (rmdir) or the module's table dropped it, so an open takes a
 * reference: it looks the instance up in the published table under RCU (the release work
 * unpublishes, then waits for RCU before dropping the table's reference), so it either
 * finds it with references left, or fails with -ENODEV.
 */
static int ud_option_open(struct inode *inode, struct file *filp)
{
	struct ud_instance *inst = NULL, *cand;
	int i;

	rcu_read_lock_sched();
	for_each_published_instance(i, cand) {
		if (cand == inode->i_private && refcount_inc_not_zero(&cand->refs)) {
			inst = cand;
			break;
		}
	}
	rcu_read_unlock_sched();
	if (!inst)
		return -ENODEV;
	filp->private_data = inst;
	return 0;
}

static int ud_option_release(struct inode *inode, struct file *filp)
{
	ud_instance_put(filp->private_data);
	return 0;
}

static const struct file_operations ud_option_fops = {
	.owner	= THIS_MODULE,
	.open	= ud_option_open,
	.release = ud_option_release,
	.read	= ud_option_read,
	.write	= ud_option_write,
	.llseek	= default_llseek,
};

/*
 * The same option through the instance's trace_options file ("userstacktrace_delay",
 * "nouserstacktrace_delay"), which is what `trace-cmd record -O` writes. The kernel's
 * trace_set_options() does not know the name and would fail with -EINVAL. A kprobe on its
 * entry recognises the name, sets the option and makes the function return 0 without
 * running it, the way the kernel's function error injection overrides a function (regs->ip
 * to a lone return). An entry probe has no per-call instance that concurrent callers
 * could run out of (a return probe has maxactive of them, and trace_set_options() sleeps
 * on event_mutex and trace_types_lock): any number of writers may be in it at once.
 * The name is the module's: a tracer option of that name could not be set through
 * trace_options while the module is loaded (no tracer of 6.12 has one).
 */
asmlinkage void ud_just_return(void);
asm(".text\n"
    ".type ud_just_return, @function\n"
    ASM_FUNC_ALIGN
    "ud_just_return:\n"
	ANNOTATE_NOENDBR	/* reached by a return, not an indirect branch */
	ASM_RET
    ".size ud_just_return, .-ud_just_return\n");

static int ud_set_option_pre(struct kprobe *p, struct pt_regs *regs)
{
	struct trace_array *tr = (void *)regs_get_kernel_argument(regs, 0);
	const char *opt = (const char *)regs_get_kernel_argument(regs, 1);
	static const char name[] = "userstacktrace_delay";
	struct ud_instance *inst;
	bool value = true;
	size_t len;

	opt = skip_spaces(opt);
	if (str_has_prefix(opt, "no")) {
		opt += 2;
		value = false;
	}
	if (strncmp(opt, name, sizeof(name) - 1))
		return 0;
	for (len = sizeof(name) - 1; opt[len]; len++)
		if (!isspace(opt[len]))
			return 0;
	inst = ud_find_instance(tr);
	if (!inst)
		return 0;	/* no option file there (too many instances): -EINVAL */
	if (READ_ONCE(inst->enabled) != value) {
		WRITE_ONCE(inst->enabled, value);
		ud_reset_file_cache(inst);
		/* A kprobe handler cannot sleep: arm or disarm before the writer returns. */
		ud_commit_probe_update_soon();
	}
	regs_set_return_value(regs, 0);
	regs->ip = (unsigned long)ud_just_return;
	return 1;	/* regs->ip changed: do not run the probed instruction */
}

/* A post handler keeps the probe from being jump-optimized, which would ignore regs->ip. */
static void ud_set_option_post(struct kprobe *p, struct pt_regs *regs, unsigned long flags)
{
}

static struct kprobe ud_set_option_probe = {
	.pre_handler	= ud_set_option_pre,
	.post_handler	= ud_set_option_post,
};

/* --- Adding and removing instances ------------------------------------------------------ */

static void ud_instance_put(struct ud_instance *inst)
{
	if (refcount_dec_and_test(&inst->refs)) {
		ud_rs_file_cache_free(inst->file_cache);
		kfree(inst);
	}
}

static void ud_instance_release(struct work_struct *w)
{
	struct ud_instance *inst = container_of(w, struct ud_instance, release);

	/* No callback runs after this, and no kprobe handler or opener holds the pointer
	 * without a reference after that. */
	unwind_deferred_cancel(&inst->work);
	synchronize_rcu();
	ud_instance_put(inst);
	/* The instance may have been the last one with the option set. */
	ud_commit_probe_update();
}

/* Called with trace_types_lock held. */
static int ud_add_instance(struct trace_array *tr)
{
	struct ud_instance *inst;
	int i, slot = -1, ret;

	for (i = 0; i < UD_MAX_INSTANCES; i++) {
		struct ud_instance *other = rcu_dereference_protected(ud_instances[i], 1);

		if (other && other->tr == tr)
			return 0;
		if (!other && slot < 0)
			slot = i;
	}
	if (slot < 0) {
		pr_warn_once("unwind_deferred: more than %d tracing instances: userstacktrace_delay not added to %s\n",
			     UD_MAX_INSTANCES, tr->name ?: "the top level");
		return -ENOSPC;
	}
	if (!tr->options) {
		pr_warn("unwind_deferred: instance %s has no options directory\n", tr->name);
		return -ENOENT;
	}
	inst = kzalloc(sizeof(*inst), GFP_KERNEL);
	if (!inst)
		return -ENOMEM;
	inst->file_cache = ud_rs_file_cache_new();
	if (!inst->file_cache) {
		kfree(inst);
		return -ENOMEM;
	}
	spin_lock_init(&inst->cache_lock);
	refcount_set(&inst->refs, 1);
	INIT_WORK(&inst->release, ud_instance_release);
	inst->tr = tr;
	ret = unwind_deferred_init(&inst->work, ud_stack_callback);
	if (ret) {
		pr_warn("unwind_deferred: no unwind work left for instance %s: %d\n",
			tr->name ?: "(top)", ret);
		goto free;
	}
	inst->option = ud_call(tracefs_create_file)("userstacktrace_delay", TRACE_MODE_WRITE,
						    tr->options, inst, &ud_option_fops);
	if (!inst->option) {
		ret = -ENOMEM;
		unwind_deferred_cancel(&inst->work);
		goto free;
	}
	rcu_assign_pointer(ud_instances[slot], inst);
	if (slot >= ud_instance_slots)
		WRITE_ONCE(ud_instance_slots, slot + 1);
	return 0;
free:
	ud_rs_file_cache_free(inst->file_cache);
	kfree(inst);
	return ret;
}

/* Unpublishes @inst; with trace_types_lock held. @remove_file: the file is still there. */
static void ud_drop_instance(int slot, bool remove_file)
{
	struct ud_instance *inst = rcu_dereference_protected(ud_instances[slot], 1);

	RCU_INIT_POINTER(ud_instances[slot], NULL);
	WRITE_ONCE(inst->tr, NULL);
	WRITE_ONCE(inst->enabled, false);
	if (remove_file && inst->option)
		ud_call(tracefs_remove)(inst->option);
	inst->option = NULL;
	queue_work(ud_wq, &inst->release);
}

/* event_trace_del_tracer(tr): __remove_instance() is past its -EBUSY check and will remove
 * the whole directory (our file with it), then free @tr after a tracepoint/RCU sync. */
static int ud_del_tracer_pre(struct kprobe *p, struct pt_regs *regs)
{
	struct trace_array *tr = (void *)regs_get_kernel_argument(regs, 0);
	struct ud_instance *inst;
	int i;

	for_each_published_instance(i, inst)
		if (inst->tr == tr)
			ud_drop_instance(i, false);
	return 0;
}

/* Every instance that has no option file yet gets one (those that can). */
static void ud_add_new_instances(struct ud_deferred *d)
{
	struct trace_array *tr;

	mutex_lock(ud_data(trace_types_lock));
	list_for_each_entry(tr, ud_data(ftrace_trace_arrays), list)
		ud_add_instance(tr);
	mutex_unlock(ud_data(trace_types_lock));
	kfree(d);
}

/*
 * A new instance: trace_array_create_dir(tr) runs for every instance, made by mkdir or in
 * the kernel (trace_array_get_by_name()), with trace_types_lock held and before the
 * instance's options directory exists. It is static, so a compiler may inline it: then
 * instance_mkdir(), whose address tracefs holds (it cannot be inlined away), serves
 * instances made by mkdir. Either way the instances are scanned once the creator has
 * dropped its locks, before it returns to user space (see ud_defer()).
 */
static int ud_new_instance_pre(struct kprobe *p, struct pt_regs *regs)
{
	struct ud_deferred *d = kzalloc(sizeof(*d), GFP_ATOMIC);

	if (!d) {
		pr_warn("unwind_deferred: out of memory: a new instance gets no userstacktrace_delay\n");
		return 0;
	}
	ud_defer(d, ud_add_new_instances);
	return 0;
}

static struct kprobe ud_create_dir_probe = { .pre_handler = ud_new_instance_pre };
static struct kprobe ud_mkdir_probe = { .pre_handler = ud_new_instance_pre };
static struct kprobe ud_del_tracer_probe = { .pre_handler = ud_del_tracer_pre };

/* --- file_cache resets ----------------------------------------------------------------- */

/*
 * The instance whose ring buffer is @buffer. The hooks below are on ring_buffer.c functions:
 * their trace.c callers (tracer_tracing_on/off, tracing_set_clock, tracing_reset_online_cpus)
 * may be inlined into their own callers, where a kprobe on their symbol would never fire.
 */
static struct ud_instance *ud_find_by_buffer(const struct trace_buffer *buffer)
{
	struct ud_instance *inst;
	struct trace_array *tr;
	int i;

	for_each_published_instance(i, inst) {
		tr = READ_ONCE(inst->tr);
		if (tr && READ_ONCE(tr->array_buffer.buffer) == buffer)
			return inst;
	}
	return NULL;
}

static int ud_reset_buffer_pre(struct kprobe *p, struct pt_regs *regs)
{
	struct ud_instance *inst = ud_find_by_buffer((void *)regs_get_kernel_argument(regs, 0));

	if (inst)
		ud_reset_file_cache(inst);
	return 0;
}

/* (A clock change resets the buffer: ring_buffer_reset_online_cpus sees it too.) */
static struct {
	enum ud_hook_id	id;
	struct kprobe	kp;
} ud_reset_probes[] = {
	{ UD_HOOK_ring_buffer_record_on,	 { .pre_handler = ud_reset_buffer_pre } },
	{ UD_HOOK_ring_buffer_record_off,	 { .pre_handler = ud_reset_buffer_pre } },
	{ UD_HOOK_ring_buffer_reset_online_cpus, { .pre_handler = ud_reset_buffer_pre } },
};

/* --- debugfs counters ------------------------------------------------------------------- */

void ud_ftrace_stats_show(struct seq_file *m)
{
	struct ud_ftrace_counts sum = {};
	int cpu;

	for_each_possible_cpu(cpu) {
		const struct ud_ftrace_counts *c = per_cpu_ptr(&ud_ftrace_counts, cpu);

#define S(f) sum.f += READ_ONCE(c->f)
		S(cookies); S(cookies_lost); S(stacks); S(stacks_lost); S(stacks_truncated);
		S(files); S(errors); S(build_id_reads); S(kprobe_cookies);
		S(kprobe_cookies_unsure);
#undef S
	}
#define P(f) seq_printf(m, "ftrace_%s: %llu\n", #f, sum.f)
	P(cookies); P(cookies_lost); P(stacks); P(stacks_lost); P(stacks_truncated); P(files);
	P(errors); P(build_id_reads); P(kprobe_cookies); P(kprobe_cookies_unsure);
#undef P
	/* Hits inside another kprobe's handler, and hits with no free return instance. */
	seq_printf(m, "ftrace_commit_probe_missed: %lu\n",
		   ud_commit_probe.kp.nmissed + ud_commit_probe.nmissed);
	seq_printf(m, "ftrace_commit_probe_armed: %d\n", ud_commit_probe_armed());
}

/* --- Set-up and tear-down --------------------------------------------------------------- */

/* The commit probe and the export, for good (no instance is published any more). */
static void ud_commit_hooks_unregister(void)
{
	mutex_lock(&ud_commit_probe_lock);
	ud_hook_unregister_kretprobe(UD_HOOK_trace_buffer_unlock_commit_regs, &ud_commit_probe);
	if (ud_export_registered) {
		unregister_ftrace_export(&ud_export);
		ud_export_registered = false;
	}
	mutex_unlock(&ud_commit_probe_lock);
	/* ftrace_exports() calls exports with preemption off: wait for the last one. */
	synchronize_rcu();
}

/* The probes that add instances or set the option (they queue deferred work). */
static void ud_unregister_instance_probes(void)
{
	ud_hook_unregister_kprobe(UD_HOOK_trace_array_create_dir, &ud_create_dir_probe);
	ud_hook_unregister_kprobe(UD_HOOK_instance_mkdir, &ud_mkdir_probe);
	ud_hook_unregister_kprobe(UD_HOOK_trace_set_options, &ud_set_option_probe);
}

static void ud_unregister_reset_probes(void)
{
	int i;

	for (i = 0; i < ARRAY_SIZE(ud_reset_probes); i++)
		ud_hook_unregister_kprobe(ud_reset_probes[i].id, &ud_reset_probes[i].kp);
}

int ud_ftrace_init(void)
{
	struct trace_array *tr;
	int i, ret;

	ud_cookie_on_entry = ud_hook_ok(UD_HOOK_ring_buffer_nest_start) &&
			     ud_hook_ok(UD_HOOK_ring_buffer_nest_end) &&
			     ud_hook_ok(UD_HOOK_trace_buffered_event);
	ud_kprobe_cookies = ud_hook_ok(UD_HOOK_ring_buffer_nest_start) &&
			    ud_hook_ok(UD_HOOK_ring_buffer_nest_end) &&
			    ud_hook_ok(UD_HOOK_current_kprobe);
	trace_event_type_funcs_user_unwind_stack.trace = ud_stack_output;

	ud_wq = alloc_workqueue("unwind_deferred", 0, 0);
	if (!ud_wq)
		return -ENOMEM;

	/* Without it an instance could be freed under us: required. */
	ret = ud_hook_register_kprobe(UD_HOOK_event_trace_del_tracer, &ud_del_tracer_probe);
	if (ret)
		goto err_wq;
	for (i = 0; i < ARRAY_SIZE(ud_reset_probes); i++)
		ud_hook_register_kprobe(ud_reset_probes[i].id, &ud_reset_probes[i].kp);

	/* Disarmed (KPROBE_FLAG_DISABLED) until an instance has the option set. */
	ud_commit_probe.maxactive = 4 * num_possible_cpus();
	ret = ud_hook_register_kretprobe(UD_HOOK_trace_buffer_unlock_commit_regs,
					 &ud_commit_probe);
	if (ret)
		goto err_probes;

	/* New instances: the primary hook, or the fallback when it is missing. */
	if (ud_hook_register_kprobe(UD_HOOK_trace_array_create_dir, &ud_create_dir_probe))
		ud_hook_register_kprobe(UD_HOOK_instance_mkdir, &ud_mkdir_probe);
	else
		ud_hook_unused(UD_HOOK_instance_mkdir);

	/* The top level and every existing instance; later ones through the probes above. */
	mutex_lock(ud_data(trace_types_lock));
	list_for_each_entry(tr, ud_data(ftrace_trace_arrays), list)
		ud_add_instance(tr);
	mutex_unlock(ud_data(trace_types_lock));

	ud_hook_register_kprobe(UD_HOOK_trace_set_options, &ud_set_option_probe);
	return 0;

err_probes:
	ud_unregister_reset_probes();
	ud_hook_unregister_kprobe(UD_HOOK_event_trace_del_tracer, &ud_del_tracer_probe);
err_wq:
	destroy_workqueue(ud_wq);
	return ret;
}

void ud_ftrace_exit_instances(void)
{
	int i;

	/* Holding trace_types_lock: no instance is being created or removed meanwhile. */
	mutex_lock(ud_data(trace_types_lock));
	for (i = 0; i < ud_instance_slots; i++) {
		if (rcu_access_pointer(ud_instances[i]))
			ud_drop_instance(i, true);
	}
	mutex_unlock(ud_data(trace_types_lock));
}

void ud_ftrace_exit(void)
{
	/* No new deferred work: stop the hooks that queue it and wait for what they queued. */
	ud_unregister_instance_probes();
	ud_deferred_wait();
	ud_ftrace_exit_instances();
	/* No instance is published any more: the release works below want them disarmed. */
	ud_commit_hooks_unregister();
	ud_unregister_reset_probes();
	ud_hook_unregister_kprobe(UD_HOOK_event_trace_del_tracer, &ud_del_tracer_probe);
	/* Runs every release work: cancels the unwind works and frees the instances. */
	destroy_workqueue(ud_wq);
}
