/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The ftrace tracer (src/ftrace/, whose main.c says what each file holds) as the rest of
 * the module sees it: src/shim.c sets it up and tears it down, and shows its counters.
 */
#ifndef UD_FTRACE_H
#define UD_FTRACE_H

struct seq_file;
struct file;

int ud_ftrace_init(void);
void ud_ftrace_exit(void);
void ud_ftrace_exit_instances(void);
void ud_ftrace_stats_show(struct seq_file *m);
/* The identity of a file's contents (src/shim.c), for the file hash. */
u64 ud_file_identity(const struct file *file);

#endif
