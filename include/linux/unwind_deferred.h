/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Deferred user-space stack unwinding: the interface of the unwind_deferred module.
 *
 * Source-compatible with <linux/unwind_deferred.h> as merged in Linux 6.17: a tracer
 * written against it builds against this module by adding this directory's parent to the
 * include path (ccflags-y += -I<repo>/include) and KBUILD_EXTRA_SYMBOLS=<repo>/Module.symvers.
 * See Documentation/unwind-deferred.rst for the semantics.
 */
#ifndef _LINUX_UNWIND_DEFERRED_H
#define _LINUX_UNWIND_DEFERRED_H

#include <linux/list.h>
#include <linux/types.h>

/**
 * struct unwind_stacktrace - a user stack trace handed to a callback
 * @nr:      number of entries
 * @entries: user instruction pointer at kernel entry, then return addresses, innermost
 *           first; valid only during the callback
 */
struct unwind_stacktrace {
	unsigned int	nr;
	unsigned long	*entries;
};

struct unwind_work;

typedef void (*unwind_callback_t)(struct unwind_work *work,
				  struct unwind_stacktrace *trace,
				  u64 cookie);

/**
 * struct unwind_work - one user of deferred unwinding (e.g. one tracing instance)
 * @list: unused by this module; kept for source compatibility
 * @func: the callback
 * @bit:  the work's bit in the per-task request mask; -1 after cancel
 *
 * Owned by the caller, initialised by unwind_deferred_init().
 */
struct unwind_work {
	struct list_head	list;
	unwind_callback_t	func;
	int			bit;
};

/* Works that can be registered at once: BITS_PER_LONG minus the reserved PENDING bit. */
#define UNWIND_DEFERRED_MAX_WORKS	(BITS_PER_LONG - 1)

/**
 * unwind_deferred_init - register a user of deferred unwinding
 * @work: the caller's work, which must stay valid until unwind_deferred_cancel() returns
 * @func: called back with the user stack of each kernel entry in which @work requested
 *
 * Gives @work the lowest free bit of the per-task request mask.
 *
 * Context: sleepable.
 * Return: 0; -EBUSY when %UNWIND_DEFERRED_MAX_WORKS works are registered; -EINVAL for a
 * NULL @work or @func.
 */
int unwind_deferred_init(struct unwind_work *work, unwind_callback_t func);

/**
 * unwind_deferred_request - ask for the current task's user stack
 * @work: a work registered with unwind_deferred_init()
 * @cookie: where the cookie of the current kernel entry is written (0 on error); every
 *          request of one entry, by any work, gets the same cookie, and its callback the
 *          same stack
 *
 * The stack is walked once, in task context, before the task returns to user space;
 * @work's callback then runs once with it and the cookie. Takes no lock and allocates
 * nothing.
 *
 * Context: any, NMI included.
 * Return: 0 when the callback was queued; 1 when @work had already requested in this
 * kernel entry (no second callback); -EINVAL for kernel threads, user workers, exiting or
 * 32-bit (compat) tasks, registers not from user mode, or a cancelled @work; -ENOSPC when
 * the per-task table is full (module parameter max_tasks).
 */
int unwind_deferred_request(struct unwind_work *work, u64 *cookie);

/**
 * unwind_deferred_cancel - unregister a user of deferred unwinding
 * @work: a work registered with unwind_deferred_init(), or one already cancelled
 *
 * When it returns, @work's callback is not running and never runs again, its requests
 * fail with -EINVAL, and its bit is clear in every task and free for a later
 * unwind_deferred_init().
 *
 * Context: sleepable; not from @work's own callback (it waits for running callbacks).
 */
void unwind_deferred_cancel(struct unwind_work *work);

#endif /* _LINUX_UNWIND_DEFERRED_H */
