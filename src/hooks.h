/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Every piece of the kernel that the module reaches without an exported interface: the one
 * declared table (Documentation/unwind-deferred.rst, "Kernel hooks", lists it; a host test
 * checks the two agree).
 *
 *   FUNC(name, need, purpose, without)        a function, called through a static call
 *   DATA(name, type, need, purpose, without)  a variable, read through its address
 *   PROBE(kind, name, need, purpose, without) a kprobe, kretprobe or tracepoint
 *
 * need: REQUIRED (the load fails, naming it) or OPTIONAL (the load goes on without the
 * feature; one line at load names every missing optional hook and what it costs: @without).
 *
 * Functions and variables are found by name (kallsyms_lookup_name(), itself found through a
 * kprobe, as LTTng-modules does), so data needs CONFIG_KALLSYMS_ALL. A function found that
 * way is never called through a pointer: with CONFIG_X86_KERNEL_IBT the kernel removes the
 * ENDBR64 of every function whose address it never takes ("sealing"), and an indirect call
 * to such a function is a #CP fault on CPUs that enforce IBT; with CONFIG_CFI_CLANG an
 * indirect call through a mistyped pointer traps. Each function gets a static call instead
 * (DEFINE_STATIC_CALL_RET0 with the kernel's own prototype, so a prototype change breaks the
 * build), updated at load to the resolved address: on x86-64 the call sites become direct
 * calls, which neither IBT nor kCFI checks. Until then (and when an optional one is
 * missing) a call returns 0.
 */
#ifndef UD_HOOKS_H
#define UD_HOOKS_H

#include <linux/buildid.h>
#include <linux/kallsyms.h>
#include <linux/rethook.h>
#include <linux/ring_buffer.h>
#include <linux/static_call.h>
#include <linux/task_work.h>
#include <linux/trace_events.h>
#include <linux/tracefs.h>
#include <linux/types.h>

#define UD_HOOKS(FUNC, DATA, PROBE)						\
	FUNC(kallsyms_lookup_name, REQUIRED,					\
	     "finds the functions and variables of this table (found itself through a kprobe)", \
	     NULL)								\
	FUNC(task_work_cancel, REQUIRED,					\
	     "unload: takes back the task works still queued", NULL)		\
	FUNC(tracefs_create_file, REQUIRED,					\
	     "options/userstacktrace_delay in every tracing instance", NULL)	\
	FUNC(tracefs_remove, REQUIRED,						\
	     "removes the option files at unload", NULL)			\
	FUNC(tracing_gen_ctx_irq_test, REQUIRED,				\
	     "the common fields (flags, preempt count) of the module's events", NULL) \
	FUNC(ring_buffer_nest_start, OPTIONAL,					\
	     "writes a cookie nested in the event it follows, before its commit", \
	     "every cookie costs a return probe; events of kprobe handlers get no cookie") \
	FUNC(ring_buffer_nest_end, OPTIONAL,					\
	     "ends the nested write of ring_buffer_nest_start",			\
	     "as without ring_buffer_nest_start")				\
	FUNC(build_id_parse_file, OPTIONAL,					\
	     "the GNU build-id in file_cache events",				\
	     "file_cache events carry an empty build_id")			\
	FUNC(rethook_try_get, OPTIONAL,						\
	     "takes a return hook only for the cookies written on return",	\
	     "every cookie takes a return hook and gives it back (about 100 instructions)") \
	FUNC(rethook_hook, OPTIONAL,						\
	     "hooks the return for a cookie written on return",		\
	     "as without rethook_try_get")					\
	DATA(ftrace_trace_arrays, struct list_head, REQUIRED,			\
	     "the tracing instances that exist at load", NULL)			\
	DATA(trace_types_lock, struct mutex, REQUIRED,				\
	     "serialises instance creation and removal with the module", NULL)	\
	DATA(trace_buffered_event, struct ring_buffer_event * __percpu, OPTIONAL, \
	     "tells events that the commit copies in (filtered event files)",	\
	     "every cookie costs a return probe")				\
	DATA(current_kprobe, struct kprobe * __percpu, OPTIONAL,		\
	     "tells events written by kprobe handlers (kprobe_running() is inline)", \
	     "events of kprobe handlers (kprobe events) get no cookie")		\
	PROBE(KRETPROBE, trace_buffer_unlock_commit_regs, REQUIRED,		\
	     "requests the unwind and writes the cookie after each event", NULL) \
	PROBE(KPROBE, event_trace_del_tracer, REQUIRED,				\
	     "an instance is being removed: forget it before it is freed", NULL) \
	PROBE(KPROBE, trace_array_create_dir, OPTIONAL,				\
	     "a new instance (mkdir or in-kernel): add its option file",	\
	     "the instance_mkdir fallback: instances created in the kernel after load get no option file") \
	PROBE(KPROBE, instance_mkdir, OPTIONAL,					\
	     "fallback for trace_array_create_dir (used only without it): instances made by mkdir", \
	     "instances created after load get no option file")			\
	PROBE(KPROBE, trace_set_options, OPTIONAL,				\
	     "accepts the option in trace_options (trace-cmd record -O)",	\
	     "trace_options does not accept userstacktrace_delay (the option file does)") \
	PROBE(KPROBE, ring_buffer_record_on, OPTIONAL,				\
	     "tracing_on: file_cache announcements start again",		\
	     "after tracing_on goes back to 1, files announced before are not announced again") \
	PROBE(KPROBE, ring_buffer_record_off, OPTIONAL,				\
	     "tracing_on 0: file_cache announcements start again",		\
	     "as without ring_buffer_record_on")				\
	PROBE(KPROBE, ring_buffer_reset_online_cpus, OPTIONAL,			\
	     "the buffer is cleared or its clock changed: file_cache announcements start again", \
	     "after the trace file is cleared, files announced before are not announced again") \
	PROBE(TRACEPOINT, sched_process_free, REQUIRED,				\
	     "a task is freed: its slot of the per-task table is given back", NULL)

#define UD_HOOK_ID(name, ...)		UD_HOOK_##name,
#define UD_HOOK_ID_PROBE(kind, name, ...) UD_HOOK_##name,
enum ud_hook_id {
	UD_HOOKS(UD_HOOK_ID, UD_HOOK_ID, UD_HOOK_ID_PROBE)
	UD_NR_HOOKS
};
#undef UD_HOOK_ID
#undef UD_HOOK_ID_PROBE

/* The static calls of the functions: ud_call(task_work_cancel)(task, head). */
#define UD_HOOK_DECLARE_CALL(name, ...) DECLARE_STATIC_CALL(ud_call_##name, name);
#define UD_HOOK_NONE(...)
UD_HOOKS(UD_HOOK_DECLARE_CALL, UD_HOOK_NONE, UD_HOOK_NONE)
#undef UD_HOOK_DECLARE_CALL
#define ud_call(name)	static_call(ud_call_##name)

/* The address of a variable of the table (NULL if an optional one is missing). */
#define UD_HOOK_DATA_TYPE(name, type, ...) typedef type ud_data_type_##name;
UD_HOOKS(UD_HOOK_NONE, UD_HOOK_DATA_TYPE, UD_HOOK_NONE)
#undef UD_HOOK_DATA_TYPE
#undef UD_HOOK_NONE
#define ud_data(name)	((ud_data_type_##name *)ud_hook_addr(UD_HOOK_##name))

struct kprobe;
struct kretprobe;
struct tracepoint;

int ud_hooks_init(void);
/* Whether a hook of the table is there (resolved or registered, and not forced missing). */
bool ud_hook_ok(enum ud_hook_id id);
void *ud_hook_addr(enum ud_hook_id id);
/*
 * Registers @kp (or @rp) for the table's hook @id (its symbol_name is set here). Returns 0,
 * or a negative errno after recording it: the caller fails its load for a REQUIRED hook
 * (ud_hook_required_missing() printed why) and goes on without the feature otherwise.
 */
int ud_hook_register_kprobe(enum ud_hook_id id, struct kprobe *kp);
int ud_hook_register_kretprobe(enum ud_hook_id id, struct kretprobe *rp);
int ud_hook_register_tracepoint(enum ud_hook_id id, void *probe, void *data);
/* Unregister what the above registered (nothing if it failed or was not tried). */
void ud_hook_unregister_kprobe(enum ud_hook_id id, struct kprobe *kp);
void ud_hook_unregister_kretprobe(enum ud_hook_id id, struct kretprobe *rp);
void ud_hook_unregister_tracepoint(enum ud_hook_id id, void *probe, void *data);
/* Marks an optional fallback hook as not needed (its primary is there). */
void ud_hook_unused(enum ud_hook_id id);
/* One line naming every missing optional hook and what it costs. */
void ud_hooks_report(void);
struct seq_file;
void ud_hooks_show(struct seq_file *m);

#endif /* UD_HOOKS_H */
