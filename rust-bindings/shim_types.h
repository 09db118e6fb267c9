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

struct unwind_work;
struct unwind_stacktrace;
typedef void (*unwind_callback_fn)(struct unwind_work *work, struct unwind_stacktrace *trace,
				   ud_u64 cookie);

/* Per-CPU event counters (src/stats.rs numbers them): room for this many. */
#define UD_NR_COUNTERS 96

/* User registers in DWARF order (rax, rdx, rcx, rbx, rsi, rdi, rbp, rsp, r8-r15, rip). */
#define UD_USER_REGS 17

/* The key of the vDSO in the per-file caches (file keys are never this or 0). */
#define UD_VDSO_KEY 1

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

/* Counters shown in debugfs (unwind_deferred/stats). Keep in sync with ud_stats_show(). */
/* A mapping of the task's address space, for the stack resolver (src/core/resolve.rs). */
struct ud_mapping {
	ud_u64 start;
	ud_u64 end;
	ud_u64 pgoff;
	void *file;	/* struct file *, or NULL for anonymous memory */
};

struct ud_stats {
	ud_u64 requests;
	ud_u64 requests_nmi;
	ud_u64 queued;
	ud_u64 already;
	ud_u64 task_works;
	ud_u64 unwinds;
	ud_u64 unwind_frames;
	ud_u64 unwind_cached;
	ud_u64 unwind_empty;
	ud_u64 callbacks;
	ud_u64 resets;
	ud_u64 err_kthread;
	ud_u64 err_user_worker;
	ud_u64 err_exiting;
	ud_u64 err_not_user;
	ud_u64 err_compat;
	ud_u64 err_cancelled;
	ud_u64 err_table_full;
	ud_u64 err_task_work;
	ud_u64 err_nomem;
	ud_u64 tasks_freed;
	ud_u64 table_used;
	ud_u64 table_size;
	ud_u64 works_registered;
	ud_u64 task_works_in_flight;
};

#endif /* UD_SHIM_TYPES_H */
