/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What differs between the kernels the module builds for, in one place (as LTTng-modules
 * keeps such differences in wrapper/): Linux 6.12 LTS and Linux 7.x (checked on 7.3). The
 * rest of the module uses the names defined here and carries no version test of its own.
 * Documentation/linux-7.3.rst says how each difference was found.
 *
 * Included by every C file of the module after the kernel headers it needs; the part about
 * struct trace_array needs kernel/trace/trace.h first (src/ftrace/internal.h does that).
 */
#ifndef UD_COMPAT_H
#define UD_COMPAT_H

#include <linux/build_bug.h>
#include <linux/ring_buffer.h>

/*
 * <linux/unwind_deferred.h>: from 6.17 the kernel has a header of that name for its own
 * deferred unwinder (which it does not export), and kbuild searches the kernel's include/
 * before the module's: on 7.x every file of the module, and every client, reads the
 * kernel's header, on 6.12 the module's include/linux/unwind_deferred.h. Both declare the
 * 6.17 API with the same prototypes and struct layouts, and src/shim.c defines the API
 * against whichever was read, so a difference fails the build there. (On a 7.x kernel
 * without CONFIG_UNWIND_USER the kernel's header has static inline stubs instead: the
 * definitions in src/shim.c then collide with them, and the build fails rather than the
 * module silently exporting nothing a client can reach.)
 */

/*
 * The header of a ring-buffer sub-buffer (struct buffer_data_page: time_stamp, commit):
 * private to kernel/trace/ring_buffer.c in 6.12, public as BUF_PAGE_HDR_SIZE in 7.x.
 */
#define UD_SUBBUF_HDR_SIZE	16
#ifdef BUF_PAGE_HDR_SIZE
static_assert(BUF_PAGE_HDR_SIZE == UD_SUBBUF_HDR_SIZE);
#endif

#ifdef _LINUX_KERNEL_TRACE_H
/*
 * trace_array::trace_flags: an unsigned int tested with TRACE_ITER_<flag> masks in 6.12; a
 * u64 tested with TRACE_ITER(<flag>) in 7.x, where only the TRACE_ITER_<flag>_BIT values
 * are left. UD_TRACE_ITER(flag) is the mask on either.
 */
#ifdef TRACE_ITER
#define UD_TRACE_ITER(flag)	TRACE_ITER(flag)
#else
#define UD_TRACE_ITER(flag)	TRACE_ITER_##flag
#endif
#endif /* _LINUX_KERNEL_TRACE_H */

#endif /* UD_COMPAT_H */
