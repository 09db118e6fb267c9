/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Plain types shared by the C shim and Rust (through bindgen). No kernel header here.
 */
#ifndef UD_SHIM_TYPES_H
#define UD_SHIM_TYPES_H

#ifndef __KERNEL__
#include <stdbool.h>
#endif

typedef unsigned long long ud_u64;

/* Frames kept per user stack (the per-task cache: 4 KiB of them). */
#define UD_MAX_STACK_ENTRIES 510

struct task_struct;
struct unwind_work;
struct unwind_stacktrace;
typedef void (*unwind_callback_fn)(struct unwind_work *work, struct unwind_stacktrace *trace,
				   ud_u64 cookie);

/* Per-CPU event counters (src/stats.rs numbers them): room for this many. A power of two,
 * so that a CPU's block (1 KiB) is found with a shift on the request path. */
#define UD_NR_COUNTERS 128

/* User registers in DWARF order (rax, rdx, rcx, rbx, rsi, rdi, rbp, rsp, r8-r15, rip). */
#define UD_USER_REGS 17

/* The key of the vDSO in the per-file caches (file keys are never this or 0). */
#define UD_VDSO_KEY 1

/* Why a task cannot get a deferred user unwind (UD_OK if it can). */
enum ud_unwindable {
	UD_OK = 0,
	UD_KTHREAD,
	UD_USER_WORKER,
	UD_EXITING,
	UD_NOT_USER_REGS,
	UD_COMPAT,
};

/* Module parameter unwinder=. */
enum ud_unwinder_mode {
	UD_UNWINDER_AUTO = 0,
	UD_UNWINDER_CFI,
	UD_UNWINDER_FP,
};

/* A mapping of the current task (ud_current_vma()). */
struct ud_vma {
	ud_u64 start;
	ud_u64 end;
	ud_u64 file_offset;	/* vm_pgoff in bytes */
	ud_u64 key;		/* the file's identity, UD_VDSO_KEY, or 0 (anonymous) */
	void *file;		/* struct file *, referenced (if asked for): ud_file_put() it */
	bool exec;		/* VM_EXEC */
};

/* A mapping of the task's address space, for the stack resolver (src/logic/resolve.rs). */
struct ud_mapping {
	ud_u64 start;
	ud_u64 end;
	ud_u64 pgoff;
	void *file;	/* struct file *, or NULL for anonymous memory */
};

/*
 * Consecutive frames of a stack recorded alike: each as its address + @bias, with @hash
 * (src/logic/resolve.rs: Run, the same layout).
 */
struct ud_run {
	ud_u64 bias;
	unsigned int len;
	unsigned int hash;
};

/* Runs kept in struct ud_runs itself: most stacks are a few. */
#define UD_SMALL_RUNS 16

/*
 * The runs of one stack (ud_rs_resolve_stack()): the first @nr_small in @small, the next
 * @nr_heap in @heap, an array of @heap_cap runs that ud_rs_runs_free() frees. Only the
 * counts need be set beforehand (to 0) when ud_rs_resolve_stack() is not called.
 */
struct ud_runs {
	struct ud_run *heap;
	unsigned int nr_small;
	unsigned int nr_heap;
	unsigned int heap_cap;	/* 0: no @heap */
	unsigned int covered;	/* the frames all runs cover */
	struct ud_run small[UD_SMALL_RUNS];
};


/* A file's contents as the tracer's build-id cache knows them (src/logic/build_id_cache.rs). */
struct ud_file_key {
	ud_u64 sb;		/* the super block's address, only compared */
	ud_u64 ino;
	long long ctime_sec;
	unsigned int ctime_nsec;
};

#endif /* UD_SHIM_TYPES_H */
