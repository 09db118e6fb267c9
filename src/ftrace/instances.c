// SPDX-License-Identifier: GPL-2.0
/*
 * Instances and the option: the table of tracing instances the module serves (published
 * under RCU, unpublished when an instance is removed or at unload, released by a work
 * item), options/userstacktrace_delay in each, and the kernel hooks that follow them:
 *
 *   trace_set_options                kprobe: accept the option in trace_options too
 *                                    (what trace-cmd record -O writes).
 *   trace_array_create_dir           a new instance: add the option file to it
 *   (instance_mkdir)                 (the fallback when the first is missing or inlined).
 *   event_trace_del_tracer           an instance is being removed: forget it.
 *   ring_buffer_record_on/off,       reset the instance's file_cache record (tracing
 *   ring_buffer_reset_online_cpus    on/off, clock change, buffer cleared).
 *
 * Why this is C: an instance is a struct trace_array (kernel/trace/trace.h: its options
 * directory, its ring buffer, the list and lock of all instances), the option is a tracefs
 * file with its file_operations, and the hooks are kprobe handlers on pt_regs (one of them
 * returns through a two-instruction assembly stub). Parsing what is written to the option
 * and to trace_options is Rust (src/logic/option.rs).
 */
#include <linux/fs.h>
#include <linux/kprobes.h>
#include <linux/linkage.h>
#include <linux/module.h>
#include <linux/objtool.h>
#include <linux/refcount.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/tracefs.h>

#include "internal.h"
#include "../../rust-bindings/shim.h"
#include "../hooks.h"

/* --- Instance table ------------------------------------------------------------------- */

struct ud_instance __rcu *ud_instances[UD_MAX_INSTANCES];
/* Slots ever used (only grows, under trace_types_lock): scans on the event path stop there. */
int ud_instance_slots;

/* (ud_find_instance(): internal.h) */

static void ud_reset_file_cache(struct ud_instance *inst)
{
	atomic64_inc(&inst->cache_gen);
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
	ANNOTATE_NOENDBR "\n\t"	/* reached by a return, not an indirect branch */
	ASM_RET
    ".size ud_just_return, .-ud_just_return\n");

static int ud_set_option_pre(struct kprobe *p, struct pt_regs *regs)
{
	struct trace_array *tr = (void *)regs_get_kernel_argument(regs, 0);
	const char *opt = (const char *)regs_get_kernel_argument(regs, 1);
	int value = ud_rs_parse_trace_option(opt, strlen(opt));
	struct ud_instance *inst;

	if (value < 0)
		return 0;	/* another option: the kernel's */
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

struct kprobe ud_set_option_probe = {
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
int ud_add_instance(struct trace_array *tr)
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
void ud_drop_instance(int slot, bool remove_file)
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
static void ud_add_new_instances(void)
{
	struct trace_array *tr;

	mutex_lock(ud_data(trace_types_lock));
	list_for_each_entry(tr, ud_data(ftrace_trace_arrays), list)
		ud_add_instance(tr);
	mutex_unlock(ud_data(trace_types_lock));
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
	ud_defer(UD_DEFERRED_ADD_INSTANCES, ud_add_new_instances);
	return 0;
}

struct kprobe ud_create_dir_probe = { .pre_handler = ud_new_instance_pre };
struct kprobe ud_mkdir_probe = { .pre_handler = ud_new_instance_pre };
struct kprobe ud_del_tracer_probe = { .pre_handler = ud_del_tracer_pre };

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

/* At load and unload (main.c): the probes of the table above, those the kernel has. */
void ud_register_reset_probes(void)
{
	int i;

	for (i = 0; i < ARRAY_SIZE(ud_reset_probes); i++)
		ud_hook_register_kprobe(ud_reset_probes[i].id, &ud_reset_probes[i].kp);
}

void ud_unregister_reset_probes(void)
{
	int i;

	for (i = 0; i < ARRAY_SIZE(ud_reset_probes); i++)
		ud_hook_unregister_kprobe(ud_reset_probes[i].id, &ud_reset_probes[i].kp);
}
