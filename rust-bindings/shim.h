/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The C shim (src/shim.c) as Rust sees it. bindgen turns this file into
 * src/generated/shim_bindings.rs at build time (rust-bindings/bindgen.sh).
 *
 * No kernel header is included: kernel objects cross the boundary only as opaque pointers,
 * and the functions take and return plain integers. Everything here exists because Rust
 * for Linux 6.12 cannot reach it directly: static inline helpers, per-CPU data, task_work,
 * SRCU, trace events, symbols that are not exported.
 */
#ifndef UD_SHIM_H
#define UD_SHIM_H

struct task_struct;
struct callback_head;
struct unwind_work;
struct ud_stats;

typedef unsigned long long ud_u64;

/* Version string of the module (from the build). */
const char *ud_version(void);

#endif /* UD_SHIM_H */
