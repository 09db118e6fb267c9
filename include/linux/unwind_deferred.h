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

int unwind_deferred_init(struct unwind_work *work, unwind_callback_t func);
int unwind_deferred_request(struct unwind_work *work, u64 *cookie);
void unwind_deferred_cancel(struct unwind_work *work);

#endif /* _LINUX_UNWIND_DEFERRED_H */
