// SPDX-License-Identifier: GPL-2.0
/*
 * Cookie placement: a user_unwind_cookie right after each event committed into an instance
 * that has options/userstacktrace_delay set, with the unwind requested for it
 * (unwind_deferred_request()); its stack comes later (stack.c).
 *
 *   trace_buffer_unlock_commit_regs  kretprobe: as an event is committed into an
 *                                    instance (the same place where 6.12 records the
 *                                    synchronous <user stack trace>); its return hook
 *                                    taken only for cookies written after the commit.
 *   an ftrace export                 the events that kprobe handlers write: the commit
 *                                    probe cannot fire inside another kprobe's handler.
 *
 * Both are armed only while some instance has the option set (below, "Arming the commit
 * probe"), and arming from a kprobe handler goes through the deferred work here, which
 * instances.c uses too.
 *
 * Why this is C: the probe reads struct trace_array (its trace_flags) and the ring-buffer
 * internals of kernel/trace/trace.h (trace_buffered_event), the export is a struct
 * trace_export, and both run as kprobe handlers on pt_regs; Rust for Linux 6.12 has none
 * of them. The request itself is Rust.
 */
#include <linux/delay.h>
#include <linux/kprobes.h>
#include <linux/mutex.h>
#include <linux/slab.h>
#include <linux/task_work.h>
#include <linux/workqueue.h>

#include "internal.h"
#include "../../rust-bindings/shim.h"
#include "../hooks.h"

/*
 * What the optional hooks allow (set at load): a cookie written from the commit probe's
 * entry, nested in the event (else always from its return), and cookies for the events of
 * kprobe handlers (the ftrace export). Set by ud_ftrace_init() (main.c).
 */
bool ud_cookie_on_entry;
bool ud_kprobe_cookies;

/*
 * The per-CPU variables the probes read for every event, from the hook table once (its
 * lookup is a call): NULL when missing. ud_cookie_on_entry implies trace_buffered_event,
 * ud_kprobe_cookies current_kprobe; the export uses trace_buffered_event only if it is
 * there. Set by ud_cookie_init() before any probe is armed.
 */
static struct ring_buffer_event * __percpu *ud_buffered_event_var;
static struct kprobe * __percpu *ud_current_kprobe_var;

void ud_cookie_init(void)
{
	ud_buffered_event_var = ud_data(trace_buffered_event);
	ud_current_kprobe_var = ud_data(current_kprobe);
}

/* --- The cookie after each event: kretprobe on trace_buffer_unlock_commit_regs --------- */

struct ud_commit_args {
	struct ud_instance	*inst;
	struct trace_buffer	*buffer;
	unsigned int		trace_ctx;
};

/*
 * At the entry of trace_buffer_unlock_commit_regs(): writes the cookie of the event now
 * and returns false, or returns true with @args filled when it must be written on return.
 */
static __always_inline bool ud_commit_decide(struct pt_regs *regs, struct ud_commit_args *args)
{
	struct ring_buffer_event *event;
	struct trace_buffer *buffer;
	struct ud_instance *inst;
	struct trace_array *tr;
	unsigned int trace_ctx;

	/* Kernel threads have no user stack; skip them before any other work. */
	if (current->flags & PF_KTHREAD)
		return false;
	/* Not inst->tr below: the instance may be unpublished meanwhile (tr stays valid). */
	tr = (struct trace_array *)regs_get_kernel_argument(regs, 0);
	inst = ud_find_instance(tr);
	if (!inst || !READ_ONCE(inst->enabled))
		return false;
	buffer = (struct trace_buffer *)regs_get_kernel_argument(regs, 1);
	event = (struct ring_buffer_event *)regs_get_kernel_argument(regs, 2);
	trace_ctx = regs_get_kernel_argument(regs, 3);

	/*
	 * The event is reserved in the ring buffer and about to be committed: an event
	 * reserved now, nested in it as ring_buffer_nest_start() allows, lands right after
	 * it. Writing here spares the return hook, which costs about as much as the cookie.
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
	if (ud_cookie_on_entry && event != this_cpu_read(*ud_buffered_event_var) &&
	    !(READ_ONCE(tr->trace_flags) & (UD_TRACE_ITER(STACKTRACE) | UD_TRACE_ITER(USERSTACKTRACE)))) {
		ud_call(ring_buffer_nest_start)(buffer);
		ud_write_cookie(&inst->work, buffer, trace_ctx);
		ud_call(ring_buffer_nest_end)(buffer);
		return false;
	}
	args->inst = inst;
	args->buffer = buffer;
	args->trace_ctx = trace_ctx;
	return true;
}

/* The kretprobe's entry handler where the probe is left as the kprobe core made it. */
static int ud_commit_entry(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	return ud_commit_decide(regs, (struct ud_commit_args *)ri->data) ? 0 : 1;
}

static int ud_commit_return(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	struct ud_commit_args *args = (void *)ri->data;

	/*
	 * The buffered event is committed (copied into the ring buffer): the cookie lands
	 * right after it. The instance cannot have been freed in between (we are in the same
	 * preempt-off kprobe section).
	 */
	ud_write_cookie(&args->inst->work, args->buffer, args->trace_ctx);
	return 0;
}

struct kretprobe ud_commit_probe = {
	.kp.symbol_name	= "trace_buffer_unlock_commit_regs",
	.kp.flags	= KPROBE_FLAG_DISABLED,	/* armed while an instance has the option */
	.entry_handler	= ud_commit_entry,
	.handler	= ud_commit_return,
	.data_size	= sizeof(struct ud_commit_args),
	/* maxactive: set at load, one per CPU and context (task, softirq, irq, NMI). */
};

#ifdef CONFIG_KRETPROBE_ON_RETHOOK
/*
 * The kretprobe's own pre-handler takes a return instance from its pool for every hit and
 * gives it back when the entry handler wants no return: about 100 instructions for each
 * cookie written on entry, the common case. This one, put in its place at load (before the
 * probe is first armed), takes an instance only for a cookie that must be written on
 * return, and then does what the kretprobe's does: the instance, its data, the return
 * hook, through the same rethook, so the kprobe core still owns the instances, their
 * handler (ud_commit_return() through the kretprobe's) and their release at unregister.
 */
static int ud_commit_pre(struct kprobe *p, struct pt_regs *regs)
{
	struct kretprobe *rp = container_of(p, struct kretprobe, kp);
	struct ud_commit_args args;
	struct kretprobe_instance *ri;
	struct rethook_node *node;

	if (!ud_commit_decide(regs, &args))
		return 0;
	node = ud_call(rethook_try_get)(rp->rh);
	if (!node) {
		/* Every instance in use (or the probe going away): as the kretprobe counts it. */
		rp->nmissed++;
		return 0;
	}
	ri = container_of(node, struct kretprobe_instance, node);
	*(struct ud_commit_args *)ri->data = args;
	ud_call(rethook_hook)(node, regs, kprobe_ftrace(p));
	return 0;
}

/* Once, after the commit probe is registered and before it is first armed. */
void ud_commit_probe_own_entry(void)
{
	if (ud_hook_ok(UD_HOOK_rethook_try_get) && ud_hook_ok(UD_HOOK_rethook_hook))
		ud_commit_probe.kp.pre_handler = ud_commit_pre;
}
#else
void ud_commit_probe_own_entry(void) { }
#endif

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

/* ud_rs_cookie_follows_event()'s answers (enum Follows in src/logic/cookie_placement.rs). */
enum ud_follows { UD_NOT_AFTER, UD_AFTER, UD_UNSURE };
static_assert(RINGBUF_TYPE_PADDING == 29);	/* cookie_placement::RINGBUF_TYPE_PADDING */

/*
 * Whether @reserved, just reserved in @buffer, comes right after the event whose data is
 * [@entry, @end); @before is the word at @end before the reservation, if @end_readable.
 */
static enum ud_follows ud_follows_event(struct trace_buffer *buffer, unsigned long entry,
					unsigned long end, bool end_readable, u32 before,
					const struct ring_buffer_event *reserved)
{
	u32 after = end_readable ? READ_ONCE(*(const u32 *)end) : 0;

	return ud_rs_cookie_follows_event(ring_buffer_subbuf_size_get(buffer),
					  UD_SUBBUF_HDR_SIZE, entry, (unsigned long)reserved,
					  end_readable, before, after);
}

/*
 * The trace_ctx @entry was written with, as tracing_generic_entry_update() keeps it in the
 * common fields (its low byte and its flags): the cookie's own, since it is written in the
 * same context, and cheaper than computing it again (tracing_gen_ctx_irq_test()).
 */
static unsigned int ud_trace_ctx_of(const struct trace_entry *entry)
{
	return (unsigned int)entry->flags << 16 | entry->preempt_count;
}

static noinline void ud_export_cookie(const void *entry, unsigned int size)
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

	/*
	 * An event built in this CPU's trace_buffered_event (filtered or soft-disabled event
	 * file) is copied into the ring buffer by the commit, after us: no cookie can follow
	 * it from here (documented). Without the variable, the placement test below refuses
	 * it (the reservation does not follow the event's data, which is not in the buffer).
	 */
	buffered = ud_buffered_event_var ? this_cpu_read(*ud_buffered_event_var) : NULL;
	if (buffered && entry == ud_event_body(buffered))
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
		event = ud_reserve_cookie(buffer);
		follows = UD_NOT_AFTER;
		if (event) {
			follows = ud_follows_event(buffer, (unsigned long)entry, end, end_readable,
						   before, event);
			if (follows == UD_AFTER && unwind_deferred_request(&inst->work, &cookie) >= 0) {
				ud_fill_cookie(buffer, event, cookie, ud_trace_ctx_of(entry));
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

/* Called for every event while registered: only those of kprobe handlers go further. */
static void ud_export_write(struct trace_export *export, const void *entry, unsigned int size)
{
	/* Outside kprobe handlers the commit probe writes the cookie. */
	if (likely(!this_cpu_read(*ud_current_kprobe_var)) || (current->flags & PF_KTHREAD))
		return;
	ud_export_cookie(entry, size);
}

static struct trace_export ud_export = {
	.write	= ud_export_write,
	.flags	= TRACE_EXPORT_EVENT,
};
static bool ud_export_registered;	/* under ud_commit_probe_lock */

/* --- Work a kprobe handler cannot do itself ---------------------------------------------- */

/*
 * The module's kprobes sit in kernel/trace/, which is built without ftrace hooks: they are
 * int3 probes, and on x86 the handler of an int3 in the kernel runs as an NMI (in_nmi()).
 * There nothing may be allocated, and work may be handed on only through task_work's
 * TWA_NMI_CURRENT or an irq_work. Both jobs handed on rescan everything (the options, the
 * instances), so one pending job of a kind per CPU serves every request made meanwhile:
 * the slots are static, per CPU and per kind, and a request finding its slot pending adds
 * nothing. Race: a request on a CPU whose slot another task queued is served when that
 * task's task work runs, which may be after the requester returns to user space; the
 * state is right once every writer has returned or exited.
 */
static atomic_t ud_deferred_in_flight = ATOMIC_INIT(0);

static void ud_deferred_run(struct ud_deferred *d)
{
	/* Cleared first: a request from now on queues again and sees what fn() did not. */
	atomic_set(&d->pending, 0);
	d->fn();
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

/* From NMI: work queues take locks, an irq_work does not. */
static void ud_deferred_irq_work(struct irq_work *w)
{
	queue_work(ud_wq, &container_of(w, struct ud_deferred, irq_work)->work);
}

static DEFINE_PER_CPU(struct ud_deferred, ud_deferred_slots[UD_NR_DEFERRED]);

/*
 * Once, at load: a slot's work item may be queued again while its last run is still
 * executing (pending is cleared as the run starts), which queue_work() allows and
 * INIT_WORK() would not.
 */
void ud_deferred_init(void)
{
	int cpu, kind;

	for_each_possible_cpu(cpu) {
		for (kind = 0; kind < UD_NR_DEFERRED; kind++) {
			struct ud_deferred *d = &per_cpu(ud_deferred_slots[kind], cpu);

			INIT_WORK(&d->work, ud_deferred_work);
			init_irq_work(&d->irq_work, ud_deferred_irq_work);
		}
	}
}

void ud_defer(enum ud_deferred_kind kind, void (*fn)(void))
{
	struct ud_deferred *d = this_cpu_ptr(&ud_deferred_slots[kind]);
	bool nmi = in_nmi();

	if (atomic_xchg(&d->pending, 1))
		return;		/* queued and not started: it will see this request too */
	d->fn = fn;
	atomic_inc(&ud_deferred_in_flight);
	init_task_work(&d->twork, ud_deferred_twork);
	/* Before the task returns to user space; kernel threads never do: a work item. */
	if (!(current->flags & PF_KTHREAD) &&
	    !task_work_add(current, &d->twork, nmi ? TWA_NMI_CURRENT : TWA_RESUME))
		return;
	if (nmi) {
		irq_work_queue(&d->irq_work);
	} else {
		queue_work(ud_wq, &d->work);
	}
}

void ud_deferred_wait(void)
{
	int cpu, kind;

	while (atomic_read(&ud_deferred_in_flight))
		msleep(10);
	/* An irq_work touches its struct after its function returned. */
	for_each_possible_cpu(cpu)
		for (kind = 0; kind < UD_NR_DEFERRED; kind++)
			irq_work_sync(&per_cpu(ud_deferred_slots[kind], cpu).irq_work);
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

bool ud_commit_probe_armed(void)
{
	return !kprobe_disabled(&ud_commit_probe.kp);
}

void ud_commit_probe_update(void)
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

/* From a kprobe handler (NMI): done before the current task returns to user space. */
void ud_commit_probe_update_soon(void)
{
	ud_defer(UD_DEFERRED_PROBE_UPDATE, ud_commit_probe_update);
}

/* The commit probe and the export, for good (no instance is published any more). */
void ud_commit_hooks_unregister(void)
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
