/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The C shim (src/shim.c, src/hooks.c, src/ftrace/) as Rust sees it. bindgen turns this
 * file into src/generated/shim_bindings.rs at build time (rust-bindings/bindgen.sh).
 *
 * No kernel header is included: kernel objects cross the boundary only as opaque pointers,
 * and functions take and return plain integers. Everything here exists because Rust for
 * Linux 6.12 cannot reach it directly: static inline helpers, per-CPU data, task_work,
 * SRCU, tracepoint probes, debugfs, symbols that are not
 * exported. The functions named ud_rs_* are implemented in Rust and called from C.
 */
#ifndef UD_SHIM_H
#define UD_SHIM_H

#include "shim_types.h"

struct task_struct;
struct callback_head;
struct unwind_work;

/* --- Module ------------------------------------------------------------------------- */

/* Version string of the module. */
const char *ud_version(void);
/* Module parameter max_tasks: slots of the per-task table (rounded up to a power of two). */
unsigned int ud_param_max_tasks(void);
/* Sets up the C side of the core (kernel hooks, the task-free tracepoint probe, debugfs).
 * Returns 0 or a negative errno, after printing what is missing. */
int ud_c_init(void);
/* Undoes ud_c_init(). After it returns no C hook of the core calls into Rust any more. */
void ud_c_exit(void);

/* --- The ftrace tracer (src/ftrace/): a client of the API, set up after the core ------ */

/* Sets up the tracer: its hooks, the option in every instance, its debugfs counters.
 * Returns 0 or a negative errno. */
int ud_ftrace_init(void);
/* Undoes ud_ftrace_init(): cancels the tracer's unwind works (waiting for callbacks). */
void ud_ftrace_exit(void);

/* One line naming every optional hook (src/hooks.h) that is missing, if any: after the
 * core and the tracer have registered theirs. */
void ud_hooks_report(void);

/* --- Context of the current task -------------------------------------------------- */

/* The CPU we run on; CPU ids; interrupts. */
unsigned int ud_smp_processor_id(void);
unsigned int ud_nr_cpu_ids(void);
unsigned long ud_local_irq_save(void);
void ud_local_irq_restore(unsigned long flags);
/*
 * What a walk of current's user stack starts from, read in one call (a call each cost more
 * than the reads): the saved user ip, sp and bp; the top of the main thread's stack, its
 * initial stack pointer (mm->start_stack: above it lie the arguments and environment),
 * U64_MAX without an mm; the end of the user address space (TASK_SIZE_MAX); module
 * parameter unwinder (enum ud_unwinder_mode); whether current has an mm (false once
 * exit_mm() ran).
 */
struct ud_walk_start {
	ud_u64 ip;
	ud_u64 sp;
	ud_u64 bp;
	ud_u64 stack_top;
	ud_u64 user_end;
	unsigned int unwinder;
	bool has_mm;
};
void ud_current_walk_start(struct ud_walk_start *out);
/*
 * Reads up to @n words of current's user memory from @addr into @words, in one user-access
 * section, faulting pages in; stops at the first word that cannot be read. Returns how
 * many were read. Task context only.
 */
unsigned long ud_read_user_words(ud_u64 addr, ud_u64 *words, unsigned long n);

/* The saved user registers of current, in DWARF order (UD_USER_REGS of them). */
void ud_current_user_regs_dwarf(ud_u64 *out);
/* copy_from_user() of @len bytes at @src: true if all were read. Task context. */
bool ud_copy_from_user(void *dst, ud_u64 src, unsigned long len);
/*
 * Where current's address space stands: its mm's mm_lock_seq and the task's
 * self_exec_id. False while a writer changes the mappings (or without per-VMA locks).
 */
bool ud_current_maps_stamp(ud_u64 *exec_id, ud_u64 *seq);
/*
 * The mapping of current's address space that holds @addr (under the mmap lock, which is
 * dropped before returning): false if none (or a fatal signal is pending). With
 * @want_file, @out->file holds a reference to the mapped file: ud_file_put() it.
 */
bool ud_current_vma(ud_u64 addr, struct ud_vma *out, bool want_file);
/* kernel_read() of @len bytes of @file from offset @pos: bytes read or a negative errno. */
long ud_file_read(void *file, ud_u64 pos, void *buf, unsigned long len);
void ud_file_put(void *file);
/* Per-CPU memory: zeroed; get pins the CPU (preemption off) until put. */
void *ud_percpu_alloc(unsigned long size, unsigned long align);
void ud_percpu_free(void *ptr);
void *ud_percpu_get(void *ptr);
void ud_percpu_put(void *ptr);

/* --- task_work ------------------------------------------------------------------------ */

/* Bytes and alignment of struct callback_head, so that Rust can embed one. */
#define UD_CALLBACK_HEAD_SIZE 16
/* Queues ud_rs_task_work(head) on current: TWA_NMI_CURRENT in NMI, TWA_RESUME otherwise. */
int ud_task_work_add(struct callback_head *head, bool nmi);
/* task_work_cancel() (resolved through kallsyms): true if @head was dequeued. */
bool ud_task_work_cancel(struct task_struct *task, struct callback_head *head);

/* --- Callback registry -------------------------------------------------------------- */

/* A task's known mappings (opaque: src/logic/resolve.rs KnownMappings). */
struct ud_known_mappings;

void ud_registry_lock(void);
void ud_registry_unlock(void);
int ud_srcu_read_lock(void);
void ud_srcu_read_unlock(int idx);
void ud_synchronize_srcu(void);
/* Field access to struct unwind_work. */
int ud_work_bit(const struct unwind_work *work);
void ud_work_init(struct unwind_work *work, unwind_callback_fn func, int bit);
void ud_work_set_bit(struct unwind_work *work, int bit);
/*
 * Calls work->func(work, {nr, entries}, cookie); the trace is the first member of a
 * struct ud_stacktrace carrying @known (the task's known mappings, lent for the call; may
 * be NULL), which the module's own callbacks read (src/ftrace/stack.c).
 */
void ud_work_call(struct unwind_work *work, unsigned long *entries, unsigned int nr,
		  ud_u64 cookie, struct ud_known_mappings *known);

/* --- Misc kernel services ----------------------------------------------------------- */

void ud_msleep(unsigned int ms);
void ud_pr_warn_table_full(void);

/* --- The address space of a stack being resolved (src/ftrace/stack.c) ---------------- */

/* The mapping of @ctx's address space that contains @addr: false if none. */
bool ud_stack_lookup(void *ctx, ud_u64 addr, struct ud_mapping *mapping);
/* A run of frames in @file starts: its hash (and the file's announcement, if due). */
unsigned int ud_stack_file_run(void *ctx, void *file);
/*
 * A stack resolved without lookups meets the files of @hashes (@nr of them, as often as
 * ud_stack_file_run() would have been called for them): counts those uses in @ctx's
 * instance and returns true if none of them needs an announcement; otherwise changes
 * nothing and returns false.
 */
bool ud_stack_files_use(void *ctx, const unsigned int *hashes, unsigned int nr);

/* --- Implemented in Rust, called from C --------------------------------------------- */

void ud_rs_task_work(struct callback_head *head);
void ud_rs_task_free(struct task_struct *task);
int ud_rs_init_work(struct unwind_work *work, unwind_callback_fn func);
/*
 * unwind_deferred_request() once shim.c found out who asks (@task, current, able to be
 * unwound, on CPU @cpu; @bit, the work's bit as read, not checked yet; @nmi, in_nmi()), with
 * preemption off (the entry's first request turns interrupts off itself). @cookie is 0 and
 * is set on success.
 */
int ud_rs_request(struct task_struct *task, int bit, unsigned long nmi, unsigned int cpu,
		  ud_u64 *cookie);
/* unwind_deferred_request() from a task that cannot be unwound (@why, not UD_OK): counted,
 * -EINVAL. Interrupts off, as above. */
int ud_rs_request_refused(enum ud_unwindable why, unsigned long nmi, unsigned int cpu);
void ud_rs_cancel(struct unwind_work *work);
/* The core's counters and gauges as "name: value" lines into @buf: bytes written. */
unsigned long ud_rs_stats(char *buf, unsigned long len);
/* The unwinder's counters as "name value" lines into @buf: bytes written. */
unsigned long ud_rs_unwinder_stats(char *buf, unsigned long len);
/* ftrace integration (src/ftrace.rs): the pure decisions of the tracer, src/ftrace/. */
int ud_rs_parse_bool_option(const char *buf, unsigned long len);
/* A token written to trace_options: 1 (userstacktrace_delay), 0 (nouserstacktrace_delay),
 * or -1 (another option). */
int ud_rs_parse_trace_option(const char *token, unsigned long len);
unsigned int ud_rs_fold_file_hash(ud_u64 hash);
/*
 * Whether a cookie reserved at @reserved (its struct ring_buffer_event) follows the event
 * whose data is at @entry, in a buffer of @subbuf_size-byte sub-buffers with
 * @subbuf_header-byte headers; @before and @after are the word at the event's end before
 * and after the reservation, read only if @end_readable. 0: it does not, 1: it does,
 * 2: cannot be told (src/logic/cookie_placement.rs).
 */
int ud_rs_cookie_follows_event(ud_u64 subbuf_size, ud_u64 subbuf_header, ud_u64 entry,
			       ud_u64 reserved, bool end_readable, unsigned int before,
			       unsigned int after);
/*
 * Resolves @nr user addresses @frames into @runs (for the arrays of a user_unwind_stack
 * event), calling back ud_stack_lookup() when a frame leaves the mappings met last and
 * ud_stack_file_run() when a run of frames in a file starts. @runs needs no initialisation;
 * free it with ud_rs_runs_free(). runs->covered < @nr only when out of memory.
 */
void ud_rs_resolve_stack(void *ctx, struct ud_known_mappings *known, const ud_u64 *frames,
			 unsigned int nr, struct ud_runs *runs);
/*
 * The task's known mappings (opaque: src/logic/resolve.rs), lent to a stack's callbacks by
 * the task work; ud_rs_resolve_stack() records into them (if not NULL) what it looks up.
 * ud_rs_resolve_known() resolves a stack from them alone, without the mmap lock: true if it
 * did (every frame in a known mapping, the address space unchanged since, the uses counted
 * through ud_stack_files_use()); false leaves @runs as if empty (call ud_rs_resolve_stack()).
 */
bool ud_rs_resolve_known(void *ctx, struct ud_known_mappings *known, const ud_u64 *frames,
			 unsigned int nr, struct ud_runs *runs);
/* Frees what ud_rs_resolve_stack() allocated for @runs (if anything). */
void ud_rs_runs_free(struct ud_runs *runs);
/*
 * A user_unwind_stack event's arrays for the first @nr frames (at most runs->covered):
 * @offsets (@nr u64) and @hashes (@nr u32), native byte order, 4-byte aligned at least.
 */
void ud_rs_fill_stack(const ud_u64 *frames, const struct ud_runs *runs, void *offsets,
		      void *hashes, unsigned int nr);
/* An instance's record of the files announced (opaque: a Rust FileCache). */
struct ud_file_cache;
struct ud_file_cache *ud_rs_file_cache_new(void);
void ud_rs_file_cache_free(struct ud_file_cache *cache);
bool ud_rs_file_cache_use(struct ud_file_cache *cache, ud_u64 generation, unsigned int hash);
/* The uses of ud_stack_files_use(), in the cache (its caller holds the instance's lock). */
bool ud_rs_file_cache_use_all(struct ud_file_cache *cache, ud_u64 generation,
			      const unsigned int *hashes, unsigned int nr);
/* The tracer's build-id cache (src/logic/build_id_cache.rs); the caller serialises its use. */
struct ud_build_id_cache;
struct ud_build_id_cache *ud_rs_build_id_cache_new(void);
void ud_rs_build_id_cache_free(struct ud_build_id_cache *cache);
/* The build-id kept for @key, copied to @id (20 bytes): its size (0: none), or -1 (read it). */
int ud_rs_build_id_lookup(const struct ud_build_id_cache *cache, const struct ud_file_key *key,
			  unsigned char *id);
/* Keeps @id (@size bytes, 0: the file has none) as the build-id of @key. */
void ud_rs_build_id_store(struct ud_build_id_cache *cache, const struct ud_file_key *key,
			  const unsigned char *id, unsigned int size);

#endif /* UD_SHIM_H */
