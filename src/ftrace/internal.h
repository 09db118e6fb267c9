/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the files of the ftrace tracer (src/ftrace/, see main.c for the map) share: the
 * instance as the module sees it and the table that publishes it, the tracer's per-CPU
 * counters, the settings of the load, and the functions one file calls in another. Private
 * to src/ftrace/; rust-bindings/shim.h declares its interface to the rest of the module.
 *
 * Every file of the tracer includes kernel/trace/trace.h (struct trace_array) through this
 * header, so each is built with -I$(srctree)/kernel/trace (Kbuild).
 */
#ifndef UD_FTRACE_INTERNAL_H
#define UD_FTRACE_INTERNAL_H

#include <linux/irq_work.h>
#include <linux/kprobes.h>
#include <linux/percpu.h>
#include <linux/rcupdate.h>
#include <linux/random.h>
#include <linux/refcount.h>
#include <linux/ring_buffer.h>
#include <linux/siphash.h>
#include <linux/spinlock.h>
#include <linux/task_work.h>
#include <linux/types.h>
#include <linux/unwind_deferred.h>
#include <linux/workqueue.h>

#include "trace.h"	/* kernel/trace/trace.h: struct trace_array */
#include "../compat.h"	/* after trace.h: UD_TRACE_ITER() */
#include "../stacktrace.h"

#define UD_MAX_INSTANCES	64

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
	struct ud_file_cache	*file_cache;	/* Rust FileCache, under cache_lock */
	struct work_struct	release;
	refcount_t		refs;		/* the table's, plus one per open option file */
};

/* The instance table (instances.c). */
extern struct ud_instance __rcu *ud_instances[UD_MAX_INSTANCES];
extern int ud_instance_slots;

/*
 * Every published instance, as (slot, instance). Readers are kprobe handlers (preemption
 * off: our RCU-sched read side) or hold rcu_read_lock_sched() or trace_types_lock.
 */
#define for_each_published_instance(i, inst)					\
	for ((i) = 0; (i) < READ_ONCE(ud_instance_slots); (i)++)		\
		if (((inst) = rcu_dereference_sched(ud_instances[i])))

/*
 * Kprobe handlers: preemption is off, which is our RCU read side. Inline: the commit probe
 * (cookie.c) looks the instance up on every event, as it did when this was one file.
 */
static inline struct ud_instance *ud_find_instance(const struct trace_array *tr)
{
	struct ud_instance *inst;
	int i;

	for_each_published_instance(i, inst)
		if (READ_ONCE(inst->tr) == tr)
			return inst;
	return NULL;
}

/* Instance releases and deferred work (main.c allocates it at load). */
extern struct workqueue_struct *ud_wq;

/*
 * What the optional hooks allow (set at load): a cookie written from the commit probe's
 * entry, nested in the event (else always from its return), and cookies for the events of
 * kprobe handlers (the ftrace export). Defined in cookie.c, set by main.c.
 */
/* The secret of the file hashes in this load's traces (stack.c; set by main.c). */
extern siphash_key_t ud_file_hash_secret;
extern bool ud_cookie_on_entry;
extern bool ud_kprobe_cookies;
void ud_cookie_init(void);	/* after the two above are set */

/*
 * The tracer's counters (debugfs stats, as ftrace_<name>; Documentation/unwind-deferred.rst
 * says what each counts), listed once: the struct, the sum and the printout are made from
 * this list. Per-CPU like the core's counters: the cookie counter is bumped for every event.
 */
#define UD_FTRACE_COUNTERS(X) \
	X(cookies) X(cookies_lost) X(stacks) X(stacks_lost) X(stacks_truncated) X(files) \
	X(errors) X(build_id_reads) X(kprobe_cookies) X(kprobe_cookies_unsure) X(stacks_known)

struct ud_ftrace_counts {
#define UD_COUNTER_FIELD(name) u64 name;
	UD_FTRACE_COUNTERS(UD_COUNTER_FIELD)
#undef UD_COUNTER_FIELD
};
DECLARE_PER_CPU(struct ud_ftrace_counts, ud_ftrace_counts);	/* main.c */
#define ud_count(field)	this_cpu_inc(ud_ftrace_counts.field)

/*
 * A kprobe handler cannot sleep, runs as an NMI (int3 on x86: nothing may be allocated),
 * and ours often run with trace_types_lock held. What they need done in process context
 * runs before the current task returns to user space (so the mkdir or write that
 * triggered it sees it done when it returns), or from our workqueue for a kernel thread or
 * a task that cannot take task works any more. Each kind of job rescans everything, so a
 * static slot per CPU and kind holds it (cookie.c). Unload waits until none is in flight:
 * a task work or work item must not outlive the module's text.
 */
enum ud_deferred_kind {
	UD_DEFERRED_PROBE_UPDATE,	/* arm or disarm the commit probe (ud_commit_probe_update) */
	UD_DEFERRED_ADD_INSTANCES,	/* option files for new instances */
	UD_NR_DEFERRED
};

struct ud_deferred {
	struct callback_head	twork;
	struct irq_work		irq_work;	/* from NMI, to the work queue */
	struct work_struct	work;
	atomic_t		pending;	/* queued and fn() not started yet */
	void			(*fn)(void);
};

/* --- events.c: the events, written straight into a ring buffer ----------------------- */

/*
 * ring_buffer_event_data() of an event reserved (or of trace_buffered_event), without its
 * call (about 17 instructions, paid by every cookie). The layout is the one that
 * include/linux/ring_buffer.h documents and events/header_event gives the raw readers
 * (trace-cmd, libtraceevent): a reservation may start with an 8-byte time extend or
 * absolute stamp; a data event's length is in type_len (its data in array[0]), or, when
 * type_len is 0, in array[0] with the data after it.
 */
static __always_inline void *ud_event_body(struct ring_buffer_event *event)
{
	if (event->type_len >= RINGBUF_TYPE_TIME_EXTEND)
		event = (struct ring_buffer_event *)((char *)event + 8);
	return event->type_len ? (void *)&event->array[0] : (void *)&event->array[1];
}

unsigned int ud_trace_ctx(void);
void ud_fill_cookie(struct trace_buffer *buffer, struct ring_buffer_event *event,
		    u64 cookie, unsigned int trace_ctx);
struct ring_buffer_event *ud_reserve_cookie(struct trace_buffer *buffer);
void ud_write_cookie(struct unwind_work *work, struct trace_buffer *buffer,
		     unsigned int trace_ctx);
bool ud_write_file(struct trace_buffer *buffer, u32 hash, const char *path,
		   const char *build_id, unsigned int trace_ctx);
unsigned int ud_max_frames(struct trace_buffer *buffer);
/*
 * Frames that fit in a stack event of any buffer (the smallest sub-buffer is a page): a
 * stack of at most as many needs no ud_max_frames() (checked in events.c).
 */
#define UD_FRAMES_FIT_ANY_BUFFER 320
struct ud_runs;
bool ud_write_stack(struct trace_buffer *buffer, u64 cookie, const u64 *frames,
		    const struct ud_runs *runs, unsigned int nr, unsigned int trace_ctx);
void ud_events_init(void);

/* --- cookie.c: the cookie after each event, the deferred work, arming ----------------- */

extern struct kretprobe ud_commit_probe;
void ud_deferred_init(void);
void ud_defer(enum ud_deferred_kind kind, void (*fn)(void));
void ud_deferred_wait(void);
void ud_commit_probe_own_entry(void);
bool ud_commit_probe_armed(void);
void ud_commit_probe_update(void);
void ud_commit_probe_update_soon(void);
void ud_commit_hooks_unregister(void);

/* --- stack.c: the unwind callback -------------------------------------------------------- */

void ud_stack_callback(struct unwind_work *work, struct unwind_stacktrace *trace, u64 cookie);
/* The build-id cache: set up first, freed last (after every callback). */
int ud_stack_init(void);
void ud_stack_exit(void);

/* --- instances.c: the instance table, the option, the hooks that follow instances ------- */

extern struct kprobe ud_set_option_probe;
extern struct kprobe ud_create_dir_probe;
extern struct kprobe ud_mkdir_probe;
extern struct kprobe ud_del_tracer_probe;
int ud_add_instance(struct trace_array *tr);
void ud_drop_instance(int slot, bool remove_file);
void ud_register_reset_probes(void);
void ud_unregister_reset_probes(void);

#endif /* UD_FTRACE_INTERNAL_H */
