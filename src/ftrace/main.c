// SPDX-License-Identifier: GPL-2.0
/*
 * The ftrace tracer: options/userstacktrace_delay in every tracing instance, and the
 * user_unwind_cookie / user_unwind_stack / file_cache events (system ftrace,
 * src/trace_unwind.h; Documentation/trace-events.rst is the contract).
 *
 * Why this is C: it works on struct trace_array, which only exists in kernel/trace/trace.h
 * (built against the kernel source tree, as the module is); Rust for Linux 6.12 has no
 * view of it. The decisions that need no kernel object are Rust (src/logic/option.rs,
 * src/logic/file_cache.rs, src/logic/file_id.rs, src/logic/resolve.rs, called through ud_rs_*).
 *
 * One concept per file (each says what it holds and why it is C):
 *   main.c       this file: set-up and tear-down of the tracer, and its debugfs counters
 *                (/sys/kernel/debug/unwind_deferred/ftrace).
 *   events.c     the events and how they are written straight into a ring buffer; the
 *                only file that expands TRACE_EVENT() (CREATE_TRACE_POINTS).
 *   cookie.c     cookie placement: the commit probe and the ftrace export write
 *                user_unwind_cookie right after each event and request the unwind; arming
 *                and disarming them; the deferred work of kprobe handlers.
 *   stack.c      stack writing: the unwind callback resolves the stack into file offsets
 *                and hashes and writes file_cache and user_unwind_stack.
 *   instances.c  the instance table, the option file and trace_options, and the hooks
 *                that follow instances and reset their file_cache record.
 *   internal.h   what they share. rust-bindings/shim.h declares ud_ftrace_init() and
 *                ud_ftrace_exit(), the tracer's interface to the module (src/c_boundary.rs).
 * One event's path: it commits -> cookie.c writes its cookie and requests an unwind
 * (unwind_deferred_request()) -> the task work walks the user stack before the task
 * returns to user space (src/deferred.rs, src/unwind.rs) -> stack.c's callback writes the
 * stack with the same cookie.
 *
 * Hooks (6.12 has no API for any of this): the kprobes, kretprobe, functions and variables
 * of src/hooks.h, which says what each is for and what is lost without an optional one:
 *   trace_buffer_unlock_commit_regs  kretprobe (cookie.c): after an event is committed into
 *                                    an instance (the same place where 6.12 records the
 *                                    synchronous <user stack trace>): request a deferred
 *                                    unwind and write user_unwind_cookie after the event.
 *   trace_set_options                kprobe (instances.c): accept the option in
 *                                    trace_options too (what trace-cmd record -O writes).
 *   trace_array_create_dir           (instances.c) a new instance: add the option file to it
 *   (instance_mkdir)                 (the fallback when the first is missing or inlined).
 *   event_trace_del_tracer           (instances.c) an instance is being removed: forget it.
 *   ring_buffer_record_on/off,       (instances.c) reset the instance's file_cache record
 *   ring_buffer_reset_online_cpus    (tracing on/off, clock change, buffer cleared).
 * and one ftrace export (register_ftrace_export(), cookie.c), for the events that kprobe
 * handlers write: the commit probe cannot fire inside another kprobe's handler.
 */
#include <linux/debugfs.h>
#include <linux/kprobes.h>
#include <linux/mutex.h>
#include <linux/seq_file.h>
#include <linux/workqueue.h>

#include "internal.h"
#include "../../rust-bindings/shim.h"	/* ud_ftrace_init/exit: called from src/main.rs */
#include "../hooks.h"

/* The variables of src/hooks.h that kernel/trace/trace.h and kprobes.h declare: same types. */
static_assert(__same_type(ud_data_type_ftrace_trace_arrays, ftrace_trace_arrays));
static_assert(__same_type(ud_data_type_trace_types_lock, trace_types_lock));
static_assert(__same_type(ud_data_type_current_kprobe, current_kprobe));

struct workqueue_struct *ud_wq;

DEFINE_PER_CPU(struct ud_ftrace_counts, ud_ftrace_counts);

/* --- debugfs counters ------------------------------------------------------------------- */

static struct dentry *ud_ftrace_debugfs;

static int ud_ftrace_stats_show(struct seq_file *m, void *v)
{
	struct ud_ftrace_counts sum = {};
	int cpu;

	for_each_possible_cpu(cpu) {
		const struct ud_ftrace_counts *c = per_cpu_ptr(&ud_ftrace_counts, cpu);

#define UD_COUNTER_SUM(name) sum.name += READ_ONCE(c->name);
		UD_FTRACE_COUNTERS(UD_COUNTER_SUM)
#undef UD_COUNTER_SUM
	}
#define UD_COUNTER_SHOW(name) seq_printf(m, "ftrace_%s: %llu\n", #name, sum.name);
	UD_FTRACE_COUNTERS(UD_COUNTER_SHOW)
#undef UD_COUNTER_SHOW
	/* Hits inside another kprobe's handler, and hits with no free return instance. */
	seq_printf(m, "ftrace_commit_probe_missed: %lu\n",
		   ud_commit_probe.kp.nmissed + ud_commit_probe.nmissed);
	seq_printf(m, "ftrace_commit_probe_armed: %d\n", ud_commit_probe_armed());
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(ud_ftrace_stats);

/* The counters go beside the core's, in the directory the core made (it is loaded first). */
static void ud_ftrace_debugfs_init(void)
{
	struct dentry *dir = debugfs_lookup("unwind_deferred", NULL);

	if (IS_ERR_OR_NULL(dir)) {
		pr_warn("unwind_deferred: no debugfs directory: the tracer's counters are not shown\n");
		return;
	}
	ud_ftrace_debugfs = debugfs_create_file("ftrace", 0444, dir, NULL, &ud_ftrace_stats_fops);
	dput(dir);
}

/* --- Set-up and tear-down --------------------------------------------------------------- */

/* The probes that add instances or set the option (they queue deferred work). */
static void ud_unregister_instance_probes(void)
{
	ud_hook_unregister_kprobe(UD_HOOK_trace_array_create_dir, &ud_create_dir_probe);
	ud_hook_unregister_kprobe(UD_HOOK_instance_mkdir, &ud_mkdir_probe);
	ud_hook_unregister_kprobe(UD_HOOK_trace_set_options, &ud_set_option_probe);
}

int ud_ftrace_init(void)
{
	struct trace_array *tr;
	int ret;

	get_random_bytes(&ud_file_hash_secret, sizeof(ud_file_hash_secret));
	ud_cookie_on_entry = ud_hook_ok(UD_HOOK_ring_buffer_nest_start) &&
			     ud_hook_ok(UD_HOOK_ring_buffer_nest_end) &&
			     ud_hook_ok(UD_HOOK_trace_buffered_event);
	ud_kprobe_cookies = ud_hook_ok(UD_HOOK_ring_buffer_nest_start) &&
			    ud_hook_ok(UD_HOOK_ring_buffer_nest_end) &&
			    ud_hook_ok(UD_HOOK_current_kprobe);
	ud_cookie_init();
	ud_events_init();
	ret = ud_stack_init();
	if (ret)
		return ret;

	ud_wq = alloc_workqueue("unwind_deferred", WQ_UNBOUND, 0);
	if (!ud_wq) {
		ret = -ENOMEM;
		goto err_stack;
	}
	ud_deferred_init();

	/* Without it an instance could be freed under us: required. */
	ret = ud_hook_register_kprobe(UD_HOOK_event_trace_del_tracer, &ud_del_tracer_probe);
	if (ret)
		goto err_wq;
	ud_register_reset_probes();

	/* Disarmed (KPROBE_FLAG_DISABLED) until an instance has the option set. */
	ud_commit_probe.maxactive = 4 * num_possible_cpus();
	ret = ud_hook_register_kretprobe(UD_HOOK_trace_buffer_unlock_commit_regs,
					 &ud_commit_probe);
	if (ret)
		goto err_probes;
	ud_commit_probe_own_entry();

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
	ud_ftrace_debugfs_init();
	return 0;

err_probes:
	ud_unregister_reset_probes();
	ud_hook_unregister_kprobe(UD_HOOK_event_trace_del_tracer, &ud_del_tracer_probe);
err_wq:
	destroy_workqueue(ud_wq);
err_stack:
	ud_stack_exit();
	return ret;
}

static void ud_ftrace_exit_instances(void)
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
	debugfs_remove(ud_ftrace_debugfs);
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
	ud_stack_exit();
}
