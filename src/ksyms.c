// SPDX-License-Identifier: GPL-2.0
/*
 * The one place where the module reaches kernel symbols that are not exported.
 *
 * Linux 6.12 does not export kallsyms_lookup_name(). As LTTng-modules does, we find its
 * address by registering a kprobe on it (the kprobe core resolves the name) and reading
 * kp.addr, then call it for the few symbols the module needs. Each user checks the result
 * and fails its feature (or the load) with one clear message naming the symbol.
 *
 * Symbols resolved this way (Linux 6.12):
 *   task_work_cancel            unload: take back a queued task work
 *   tracefs_create_file         options/userstacktrace_delay in each instance
 *   tracefs_remove
 *   build_id_parse_file         the GNU build-id of a mapped file for file_cache
 *   tracing_gen_ctx_irq_test    the flags of the events the module writes
 *   global_trace, ftrace_trace_arrays, trace_types_lock
 *                               the tracing instances (kernel/trace/trace.c)
 *   ring_buffer_nest_start/end  the cookie, written nested in the event it follows
 *   trace_buffered_event        (per-CPU) events that are copied in at commit
 *   current_kprobe              (per-CPU) whether a kprobe handler runs (kprobe_running()
 *                               is inline): the commit probe cannot fire there
 *
 * Calling through such a pointer is an indirect call: with CONFIG_X86_KERNEL_IBT the
 * target must start with ENDBR, which every function whose address is taken in the
 * kernel does (and kallsyms_lookup_name is address-taken). The test kernel leaves IBT off.
 */
#include <linux/kprobes.h>
#include <linux/printk.h>

#include "ksyms.h"

typedef unsigned long (*kallsyms_lookup_name_t)(const char *name);
static kallsyms_lookup_name_t ud_kallsyms_lookup_name;

int ud_ksyms_init(void)
{
	struct kprobe kp = { .symbol_name = "kallsyms_lookup_name" };
	int ret;

	ret = register_kprobe(&kp);
	if (ret < 0) {
		pr_err("unwind_deferred: cannot resolve kallsyms_lookup_name (kprobe: %d); "
		       "the kernel needs CONFIG_KPROBES and CONFIG_KALLSYMS\n", ret);
		return ret;
	}
	ud_kallsyms_lookup_name = (kallsyms_lookup_name_t)kp.addr;
	unregister_kprobe(&kp);
	return 0;
}

void *ud_ksym(const char *name)
{
	unsigned long addr = ud_kallsyms_lookup_name ? ud_kallsyms_lookup_name(name) : 0;

	if (!addr)
		pr_err("unwind_deferred: kernel symbol %s not found\n", name);
	return (void *)addr;
}
