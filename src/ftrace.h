/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The ftrace tracer (src/ftrace/, whose main.c says what each file holds) as the rest of
 * the module sees it: src/main.rs sets it up after the core and tears it down before it
 * (declared for Rust in rust-bindings/shim.h); it reaches the core through the exported
 * API of <linux/unwind_deferred.h>, plus the core's file identity below.
 */
#ifndef UD_FTRACE_H
#define UD_FTRACE_H

struct seq_file;
struct file;

int ud_ftrace_init(void);
void ud_ftrace_exit(void);
void ud_ftrace_exit_instances(void);
/* The identity of a file's contents (src/shim.c), for the file hash. */
u64 ud_file_identity(const struct file *file);

#endif
