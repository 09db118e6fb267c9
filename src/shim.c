// SPDX-License-Identifier: GPL-2.0
/*
 * C shim of the unwind_deferred module: only what Rust for Linux 6.12 cannot reach
 * (static inline helpers, per-CPU data, task_work, SRCU, tracepoint probes, debugfs) and
 * the exported C API. The logic is in Rust (src/ and src/logic/);
 * rust-bindings/shim.h is the contract between the two.
 */
#include <linux/cpuhotplug.h>
#include <linux/debugfs.h>
#include <linux/delay.h>
#include <linux/fs.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/sched.h>
#include <linux/sched/task.h>
#include <linux/sched/task_stack.h>
#include <linux/percpu.h>
#include <linux/seq_file.h>
#include <linux/siphash.h>

#include "file_identity.h"
#include <linux/slab.h>
#include <linux/srcu.h>
#include <linux/task_work.h>
#include <linux/tracepoint.h>
#include <linux/uaccess.h>
#include <linux/unwind_deferred.h>
#include <linux/vmalloc.h>
#include <asm/ptrace.h>

#include "../rust-bindings/shim.h"
#include "compat.h"
#include "hooks.h"
#include "stacktrace.h"

#define UD_VERSION "0.1.0"
MODULE_VERSION(UD_VERSION);
/* Here, not in the Rust module! macro, whose author key differs between kernel versions. */
MODULE_AUTHOR("deferred-unwind developers");

static unsigned int max_tasks = 4096;
module_param(max_tasks, uint, 0444);
MODULE_PARM_DESC(max_tasks, "TaskSlots that can have deferred-unwind state at once (default 4096)");

/* unwinder=auto|cfi|fp, also writable at run time (the next walk uses it). */
static const char *const ud_unwinder_names[] = {
	[UD_UNWINDER_AUTO] = "auto", [UD_UNWINDER_CFI] = "cfi", [UD_UNWINDER_FP] = "fp",
};
static int ud_unwinder = UD_UNWINDER_AUTO;

static int ud_unwinder_set(const char *val, const struct kernel_param *kp)
{
	int mode = sysfs_match_string(ud_unwinder_names, val);

	if (mode < 0) {
		pr_warn("unwind_deferred: unwinder must be auto, cfi or fp\n");
		return -EINVAL;
	}
	WRITE_ONCE(ud_unwinder, mode);
	return 0;
}

static int ud_unwinder_get(char *buf, const struct kernel_param *kp)
{
	return sysfs_emit(buf, "%s\n", ud_unwinder_names[READ_ONCE(ud_unwinder)]);
}

static const struct kernel_param_ops ud_unwinder_ops = {
	.set	= ud_unwinder_set,
	.get	= ud_unwinder_get,
};
module_param_cb(unwinder, &ud_unwinder_ops, NULL, 0644);
MODULE_PARM_DESC(unwinder,
		 "User-stack unwinder: auto (CFI where .eh_frame covers the code, frame pointers elsewhere; default), cfi, fp");

const char *ud_version(void)
{
	return UD_VERSION;
}

unsigned int ud_param_max_tasks(void)
{
	return max_tasks;
}

/* --- Context of the current task ------------------------------------------------------ */

/* Why current, which failed the test of ud_current_unwindable(), cannot be unwound. */
static noinline enum ud_unwindable ud_current_refusal(void)
{
	if (current->flags & PF_KTHREAD)
		return UD_KTHREAD;
	if (current->flags & PF_USER_WORKER)
		return UD_USER_WORKER;
	if (current->flags & PF_EXITING)
		return UD_EXITING;
	if (!user_mode(task_pt_regs(current)))
		return UD_NOT_USER_REGS;
	/* The walker reads 8-byte frame records: a 32-bit task has 4-byte ones. */
	return UD_COMPAT;
}

/*
 * Why current cannot get a deferred user unwind (UD_OK if it can): one test for the common
 * case, a user task in 64-bit mode (user_64bit_mode() implies user_mode()); which refusal
 * it is, out of line.
 */
static __always_inline enum ud_unwindable ud_current_unwindable(void)
{
	if (likely(!(current->flags & (PF_KTHREAD | PF_USER_WORKER | PF_EXITING)) &&
		   user_64bit_mode(task_pt_regs(current))))
		return UD_OK;
	return ud_current_refusal();
}

unsigned int ud_smp_processor_id(void) { return raw_smp_processor_id(); }
unsigned int ud_nr_cpu_ids(void) { return nr_cpu_ids; }

void ud_current_walk_start(struct ud_walk_start *out)
{
	const struct pt_regs *regs = task_pt_regs(current);
	struct mm_struct *mm = current->mm;

	out->ip = regs->ip;
	out->sp = regs->sp;
	out->bp = regs->bp;
	/*
	 * Set by exec (the initial stack pointer, where argc lies). prctl(PR_SET_MM) may move
	 * it (checkpoint/restore), under the mmap lock we do not take: whatever value is read
	 * only bounds how far the stack windows read ahead, never what a walk may read.
	 */
	out->stack_top = mm ? READ_ONCE(mm->start_stack) : U64_MAX;
	out->user_end = TASK_SIZE_MAX;
	out->unwinder = READ_ONCE(ud_unwinder);
	out->has_mm = mm != NULL;
}

unsigned long ud_local_irq_save(void)
{
	unsigned long flags;

	local_irq_save(flags);
	return flags;
}

void ud_local_irq_restore(unsigned long flags)
{
	local_irq_restore(flags);
}

void ud_current_user_regs_dwarf(ud_u64 *out)
{
	const struct pt_regs *regs = task_pt_regs(current);

	/*
	 * Each register stored as it is loaded (built in a local array and copied, the
	 * registers were loaded first, six of them spilled, and copied twice).
	 */
	static_assert(UD_USER_REGS == 17);
	out[0] = regs->ax;
	out[1] = regs->dx;
	out[2] = regs->cx;
	out[3] = regs->bx;
	out[4] = regs->si;
	out[5] = regs->di;
	out[6] = regs->bp;
	out[7] = regs->sp;
	out[8] = regs->r8;
	out[9] = regs->r9;
	out[10] = regs->r10;
	out[11] = regs->r11;
	out[12] = regs->r12;
	out[13] = regs->r13;
	out[14] = regs->r14;
	out[15] = regs->r15;
	out[16] = regs->ip;
}

bool ud_copy_from_user(void *dst, ud_u64 src, unsigned long len)
{
	return !copy_from_user(dst, (const void __user *)(unsigned long)src, len);
}

unsigned long ud_read_user_words(ud_u64 addr, ud_u64 *words, unsigned long n)
{
	const u64 __user *p = (const u64 __user *)(unsigned long)addr;
	unsigned long i = 0;

	/*
	 * One user-access section for the whole window: opening one per frame (or per word,
	 * as get_user() does) costs more than the loads. A fault is handled (and may sleep)
	 * as for get_user(); the AC flag is restored with the registers when it returns.
	 */
	might_fault();
	if (!user_access_begin(p, n * sizeof(u64)))
		return 0;
	/*
	 * Eight words an iteration (a window is up to 32): a third of the instructions a word
	 * of the plain loop. A fault in a group (not expected: a window lies in one page, unless
	 * it is a frame record's two words across a page end, which the plain loop reads) goes
	 * back to the plain loop at the group's first word, which stops at the exact word.
	 */
	for (; i + 8 <= n; i += 8) {
		unsafe_get_user(words[i], &p[i], word_at_a_time);
		unsafe_get_user(words[i + 1], &p[i + 1], word_at_a_time);
		unsafe_get_user(words[i + 2], &p[i + 2], word_at_a_time);
		unsafe_get_user(words[i + 3], &p[i + 3], word_at_a_time);
		unsafe_get_user(words[i + 4], &p[i + 4], word_at_a_time);
		unsafe_get_user(words[i + 5], &p[i + 5], word_at_a_time);
		unsafe_get_user(words[i + 6], &p[i + 6], word_at_a_time);
		unsafe_get_user(words[i + 7], &p[i + 7], word_at_a_time);
	}
word_at_a_time:
	for (; i < n; i++)
		unsafe_get_user(words[i], &p[i], out);
out:
	user_access_end();
	return i;
}

/* --- The mappings of the current task, for the CFI unwinder ------------------------------ */

static siphash_key_t ud_file_key_secret;

/* A file's key in the per-file caches: its identity (src/file_identity.h), never 0 or UD_VDSO_KEY. */
static u64 ud_file_key(const struct file *file)
{
	u64 key = ud_file_identity(file, &ud_file_key_secret);

	return key > UD_VDSO_KEY ? key : key + UD_VDSO_KEY + 1;
}

bool ud_current_maps_stamp(ud_u64 *exec_id, ud_u64 *seq)
{
#ifdef CONFIG_PER_VMA_LOCK
	/* Every mmap write lock makes the count odd, then even again, one step further. */
	unsigned int count = raw_read_seqcount(&current->mm->mm_lock_seq);

	if (count & 1)
		return false;	/* a writer is changing the mappings right now */
	*exec_id = current->self_exec_id;
	*seq = count;
	return true;
#else
	return false;
#endif
}

bool ud_current_vma(ud_u64 addr, struct ud_vma *out, bool want_file)
{
	struct mm_struct *mm = current->mm;
	struct vm_area_struct *vma;
	bool found = false;

	if (!mm || mmap_read_lock_killable(mm))
		return false;
	vma = vma_lookup(mm, addr);
	if (vma) {
		found = true;
		out->start = vma->vm_start;
		out->end = vma->vm_end;
		out->file_offset = (u64)vma->vm_pgoff << PAGE_SHIFT;
		out->exec = vma->vm_flags & VM_EXEC;
		out->file = NULL;
		out->key = 0;
		if (vma->vm_start == (unsigned long)mm->context.vdso) {
			out->key = UD_VDSO_KEY;
		} else if (vma->vm_file) {
			/* Read after the lock is dropped (reading may sleep on the inode). */
			if (want_file)
				out->file = get_file(vma->vm_file);
			out->key = ud_file_key(vma->vm_file);
		}
	}
	mmap_read_unlock(mm);
	return found;
}

long ud_file_read(void *file, ud_u64 pos, void *buf, unsigned long len)
{
	loff_t off = pos;

	if (off < 0)
		return -EINVAL;
	return kernel_read(file, buf, len, &off);
}

void ud_file_put(void *file)
{
	fput(file);
}

/* shim.h has no __percpu: the pointers cross the boundary as plain ones. */
void *ud_percpu_alloc(unsigned long size, unsigned long align)
{
	return (void __force *)__alloc_percpu(size, align);
}

void ud_percpu_free(void *ptr)
{
	free_percpu((void __percpu __force *)ptr);
}

void *ud_percpu_get(void *ptr)
{
	return get_cpu_ptr((void __percpu __force *)ptr);
}

void ud_percpu_put(void *ptr)
{
	put_cpu_ptr((void __percpu __force *)ptr);
}

/* --- Counters --------------------------------------------------------------------------- */

/* --- task_work ------------------------------------------------------------------------ */

static_assert(sizeof(struct callback_head) == UD_CALLBACK_HEAD_SIZE);

static void ud_task_work_fn(struct callback_head *head)
{
	ud_rs_task_work(head);
}

int ud_task_work_add(struct callback_head *head, bool nmi)
{
	init_task_work(head, ud_task_work_fn);
	return task_work_add(current, head, nmi ? TWA_NMI_CURRENT : TWA_RESUME);
}

bool ud_task_work_cancel(struct task_struct *task, struct callback_head *head)
{
	return ud_call(task_work_cancel)(task, head);
}

/* --- Callback registry ---------------------------------------------------------------- */

static DEFINE_MUTEX(ud_registry_mutex);
DEFINE_STATIC_SRCU(ud_srcu);

void ud_registry_lock(void) { mutex_lock(&ud_registry_mutex); }
void ud_registry_unlock(void) { mutex_unlock(&ud_registry_mutex); }
int ud_srcu_read_lock(void) { return srcu_read_lock(&ud_srcu); }
void ud_srcu_read_unlock(int idx) { srcu_read_unlock(&ud_srcu, idx); }
void ud_synchronize_srcu(void) { synchronize_srcu(&ud_srcu); }

int ud_work_bit(const struct unwind_work *work)
{
	return READ_ONCE(work->bit);
}

void ud_work_init(struct unwind_work *work, unwind_callback_fn func, int bit)
{
	memset(work, 0, sizeof(*work));
	INIT_LIST_HEAD(&work->list);
	work->func = (unwind_callback_t)func;
	WRITE_ONCE(work->bit, bit);
}

void ud_work_set_bit(struct unwind_work *work, int bit)
{
	WRITE_ONCE(work->bit, bit);
}

void ud_work_call(struct unwind_work *work, unsigned long *entries, unsigned int nr,
		  ud_u64 cookie, struct ud_known_mappings *known)
{
	struct ud_stacktrace stack = { .trace = { .nr = nr, .entries = entries }, .known = known };

	work->func(work, &stack.trace, cookie);
}

/* The exported API: thin forwards to Rust (src/deferred.rs documents the semantics). */

int unwind_deferred_init(struct unwind_work *work, unwind_callback_t func)
{
	return ud_rs_init_work(work, (unwind_callback_fn)func);
}
EXPORT_SYMBOL_GPL(unwind_deferred_init);

/*
 * The half of the request that static inlines answer (who is asking, from where), here so
 * that the Rust half (table, state, cookie, counters) needs no call back into C on its
 * common path: a repeated request of an entry.
 */
/* A request from a task that cannot be unwound (@why): the Rust half counts it, -EINVAL. */
static noinline int ud_request_refused(enum ud_unwindable why)
{
	unsigned long flags;
	int ret;

	local_irq_save(flags);
	ret = ud_rs_request_refused(why, in_nmi(), raw_smp_processor_id());
	local_irq_restore(flags);
	return ret;
}

int unwind_deferred_request(struct unwind_work *work, u64 *cookie)
{
	enum ud_unwindable why;
	int ret;

	if (!cookie)
		return -EINVAL;
	*cookie = 0;
	if (!work)
		return -EINVAL;
	why = ud_current_unwindable();
	if (unlikely(why != UD_OK))
		return ud_request_refused(why);
	/*
	 * With preemption off the CPU number holds and cancel's synchronize_rcu() waits for
	 * us. Interrupts stay on for the common path, a repeated request of the entry: it only
	 * reads the table and the task's state, which are written for an NMI to interleave
	 * anywhere, so an interrupt's request may interleave with those reads too. The writes
	 * (an entry's first request) turn interrupts off (request_slow() in src/deferred.rs):
	 * only an NMI interleaves with them. (Interrupts off here cost the repeated request
	 * 13 of its 94.5 instructions: bench-request.tc.)
	 */
	preempt_disable_notrace();
	ret = ud_rs_request(current, READ_ONCE(work->bit), in_nmi(), raw_smp_processor_id(),
			    (ud_u64 *)cookie);
	preempt_enable_notrace();
	return ret;
}
EXPORT_SYMBOL_GPL(unwind_deferred_request);

void unwind_deferred_cancel(struct unwind_work *work)
{
	if (work)
		ud_rs_cancel(work);
}
EXPORT_SYMBOL_GPL(unwind_deferred_cancel);

/* --- Misc ----------------------------------------------------------------------------- */

void ud_msleep(unsigned int ms) { msleep(ms); }

void ud_pr_warn_table_full(void)
{
	pr_warn_once("unwind_deferred: per-task table full (max_tasks=%u): requests fail with -ENOSPC\n",
		     max_tasks);
}

/* --- Task lifetime: sched_process_free ------------------------------------------------ */

/*
 * The per-task slot is released when the task_struct is about to be freed. Task works
 * have all run by then (exit_task_work() runs them and refuses new ones before the task
 * dies), so nothing can still reach the slot.
 */
static void ud_probe_process_free(void *data, struct task_struct *task)
{
	ud_rs_task_free(task);
}

/* --- debugfs ---------------------------------------------------------------------------- */

static struct dentry *ud_debugfs;

/* The core's counters (named in Rust, src/stats.rs); the tracer has its own file. */
static int ud_stats_show(struct seq_file *m, void *v)
{
	char *buf = kmalloc(PAGE_SIZE, GFP_KERNEL);

	if (!buf)
		return -ENOMEM;
	seq_write(m, buf, ud_rs_stats(buf, PAGE_SIZE));
	kfree(buf);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(ud_stats);

/* The unwinder's counters: per method, per stop reason (named in Rust, src/stats.rs). */
static int ud_unwinder_stats_show(struct seq_file *m, void *v)
{
	char *buf = kmalloc(PAGE_SIZE, GFP_KERNEL);

	if (!buf)
		return -ENOMEM;
	seq_write(m, buf, ud_rs_unwinder_stats(buf, PAGE_SIZE));
	kfree(buf);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(ud_unwinder_stats);

static int ud_hooks_table_show(struct seq_file *m, void *v)
{
	ud_hooks_show(m);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(ud_hooks_table);

/* --- Set-up and tear-down ------------------------------------------------------------- */

int ud_c_init(void)
{
	int ret;

	get_random_bytes(&ud_file_key_secret, sizeof(ud_file_key_secret));
	ret = ud_hooks_init();
	if (ret)
		return ret;
	ret = ud_hook_register_tracepoint(UD_HOOK_sched_process_free, ud_probe_process_free, NULL);
	if (ret)
		return ret;

	ud_debugfs = debugfs_create_dir("unwind_deferred", NULL);
	debugfs_create_file("stats", 0444, ud_debugfs, NULL, &ud_stats_fops);
	debugfs_create_file("hooks", 0444, ud_debugfs, NULL, &ud_hooks_table_fops);
	debugfs_create_file("unwinder", 0444, ud_debugfs, NULL, &ud_unwinder_stats_fops);
	return 0;
}

void ud_c_exit(void)
{
	debugfs_remove_recursive(ud_debugfs);
	ud_hook_unregister_tracepoint(UD_HOOK_sched_process_free, ud_probe_process_free, NULL);
}
