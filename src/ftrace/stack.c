// SPDX-License-Identifier: GPL-2.0
/*
 * Stack writing: the unwind callback (task context, once per cookie and instance) turns the
 * walked user stack into file offsets and file hashes (ud_rs_resolve_stack(), Rust, calling
 * back ud_stack_lookup() and ud_stack_file_run() here for the address space), announces the
 * files the instance has not seen recently (file_cache: path and build-id, with a small
 * build-id cache) and writes user_unwind_stack with the cookie of the request.
 *
 * Why this is C: it works under the mmap lock on struct vm_area_struct (vma_lookup()),
 * takes paths and build-ids from struct file (d_path(), build_id_parse_file()), and writes
 * into the ring buffer of the instance's struct trace_array (kernel/trace/trace.h). The
 * decisions (which frame is in which file, when to announce a file) are Rust
 * (src/logic/resolve.rs, src/logic/file_cache.rs).
 */
#include <linux/buildid.h>
#include <linux/fs.h>
#include <linux/hash.h>
#include <linux/hex.h>
#include <linux/mm.h>
#include <linux/slab.h>

#include "internal.h"
#include "../../rust-bindings/shim.h"
#include "../file_identity.h"
#include "../hooks.h"

#define UD_BUILD_ID_HEX		(BUILD_ID_SIZE_MAX * 2 + 1)

/* --- The stack: the unwind callback (task context, once per cookie and instance) ------- */

/* A file to announce, found during the walk: described after the mmap lock is dropped. */
struct ud_file_pending {
	struct ud_file_pending	*next;
	struct file		*file;	/* a reference of ours */
	u32			hash;
};

struct ud_file_note {
	struct ud_file_note	*next;
	u32			hash;
	char			build_id[UD_BUILD_ID_HEX];
	char			path[];
};

/*
 * Build-ids of recently described files, so that reminders and other processes mapping the
 * same file do not read its ELF notes again: the policy (key, bound) is
 * src/logic/build_id_cache.rs; the lock is here.
 */
static struct ud_build_id_cache *ud_build_ids;
static DEFINE_SPINLOCK(ud_build_ids_lock);

int ud_stack_init(void)
{
	static_assert(BUILD_ID_SIZE_MAX == 20);	/* the size the Rust side keeps */
	ud_build_ids = ud_rs_build_id_cache_new();
	return ud_build_ids ? 0 : -ENOMEM;
}

void ud_stack_exit(void)
{
	ud_rs_build_id_cache_free(ud_build_ids);
	ud_build_ids = NULL;
}

static void ud_build_id_hex(struct file *file, char *hex)
{
	const struct inode *inode = file_inode(file);
	struct timespec64 ctime = inode_get_ctime(inode);
	struct ud_file_key key = {
		.sb = (u64)(unsigned long)inode->i_sb,
		.ino = inode->i_ino,
		.ctime_sec = ctime.tv_sec,
		.ctime_nsec = ctime.tv_nsec,
	};
	unsigned char id[BUILD_ID_SIZE_MAX];
	__u32 size = 0;
	int kept;

	spin_lock(&ud_build_ids_lock);
	kept = ud_rs_build_id_lookup(ud_build_ids, &key, id);
	spin_unlock(&ud_build_ids_lock);
	if (kept >= 0) {
		size = kept;
	} else {
		ud_count(build_id_reads);
		if (!ud_hook_ok(UD_HOOK_build_id_parse_file) ||
		    ud_call(build_id_parse_file)(file, id, &size) || size > BUILD_ID_SIZE_MAX)
			size = 0;
		spin_lock(&ud_build_ids_lock);
		ud_rs_build_id_store(ud_build_ids, &key, id, size);
		spin_unlock(&ud_build_ids_lock);
	}
	*bin2hex(hex, id, size) = '\0';
}

/* Path and build-id of @file for a file_cache event (rare: first use and reminders). */
static struct ud_file_note *ud_describe_file(struct file *file, u32 hash)
{
	struct ud_file_note *note;
	char *pathbuf, *path;

	pathbuf = __getname();
	if (!pathbuf)
		return NULL;
	/*
	 * The path the task sees (as /proc/PID/maps shows it): a file mapped through
	 * overlayfs is mapped as the real file underneath, whose own f_path names a private
	 * mount of the lower layer (virtme-ng's /tmp is such an overlay).
	 */
	path = d_path(file_user_path(file), pathbuf, PATH_MAX);
	if (IS_ERR(path))
		path = "(unknown)";
	note = kzalloc(sizeof(*note) + strlen(path) + 1, GFP_KERNEL);
	if (!note) {
		__putname(pathbuf);
		return NULL;
	}
	note->hash = hash;
	strcpy(note->path, path);
	__putname(pathbuf);
	ud_build_id_hex(file, note->build_id);
	return note;
}

/*
 * The file's hash in the trace: its identity (super block, inode, ctime, keyed with this
 * load's secret), not its struct file, whose address a library loaded after another was
 * unloaded may reuse (the second would then be named by the first's file_cache).
 */
siphash_key_t ud_file_hash_secret;

/*
 * The hashes of the files met last on this CPU, by identity: a stack of an interpreter
 * alternates between a few files (the program, its libraries, the C library), and the keyed
 * hash of a file costs about as much as a dozen frames. An entry holds the identity's
 * fields, not the struct file, so a file opened after another was closed is not taken for
 * it; the fields are compared whole, so an entry is never wrong, only evicted.
 */
#define UD_HASH_MEMO 16
struct ud_hash_memo {
	struct {
		const struct super_block *sb;
		unsigned long ino;
		time64_t sec;
		long nsec;
		u32 hash;
	} e[UD_HASH_MEMO];
};
static DEFINE_PER_CPU(struct ud_hash_memo, ud_hash_memo);

static u32 ud_file_hash(const struct file *file)
{
	const struct inode *inode = file_inode(file);
	struct timespec64 ctime = inode_get_ctime(inode);
	unsigned int i = hash_long(inode->i_ino ^ (unsigned long)inode->i_sb, ilog2(UD_HASH_MEMO));
	struct ud_hash_memo *memo = get_cpu_ptr(&ud_hash_memo);
	u32 hash;

	if (memo->e[i].sb == inode->i_sb && memo->e[i].ino == inode->i_ino &&
	    memo->e[i].sec == ctime.tv_sec && memo->e[i].nsec == ctime.tv_nsec) {
		hash = memo->e[i].hash;
		put_cpu_ptr(&ud_hash_memo);
		return hash;
	}
	put_cpu_ptr(&ud_hash_memo);
	/* (Computed with preemption on: a migration only fills another CPU's entry.) */
	hash = ud_rs_fold_file_hash(ud_file_identity(file, &ud_file_hash_secret));
	memo = get_cpu_ptr(&ud_hash_memo);
	memo->e[i].sb = inode->i_sb;
	memo->e[i].ino = inode->i_ino;
	memo->e[i].sec = ctime.tv_sec;
	memo->e[i].nsec = ctime.tv_nsec;
	memo->e[i].hash = hash;
	put_cpu_ptr(&ud_hash_memo);
	return hash;
}

/* The address space of a stack being resolved (ud_rs_resolve_stack()'s context). */
struct ud_stack_space {
	struct mm_struct	*mm;	/* mmap lock held for reading */
	struct ud_instance	*inst;
	u64			cache_gen;
	struct ud_file_pending	*pending;	/* files to announce */
	bool			error;
};

bool ud_stack_lookup(void *ctx, u64 addr, struct ud_mapping *m)
{
	struct ud_stack_space *space = ctx;
	struct vm_area_struct *vma = vma_lookup(space->mm, addr);

	if (!vma)
		return false;
	m->start = vma->vm_start;
	m->end = vma->vm_end;
	m->pgoff = vma->vm_pgoff;
	m->file = vma->vm_file;
	return true;
}

unsigned int ud_stack_file_run(void *ctx, void *file)
{
	struct ud_stack_space *space = ctx;
	struct ud_file_pending *p;
	u32 hash = ud_file_hash(file);
	bool announce;

	/*
	 * Announce the file if this instance has not (recently). A use is counted per stack
	 * that meets the file (the resolver asks once per stack and file), not per frame, so
	 * that the reminder comes every so many stacks, whatever their depth.
	 */
	spin_lock(&space->inst->cache_lock);
	announce = ud_rs_file_cache_use(space->inst->file_cache, space->cache_gen, hash);
	spin_unlock(&space->inst->cache_lock);
	if (!announce)
		return hash;
	/*
	 * Not described here: reading the build-id takes the file's inode lock, which ranks
	 * above mmap_lock (a read that faults on its user buffer takes them in that order;
	 * lockdep saw the inversion on 9p). Keep a reference and describe it after the walk.
	 */
	p = kmalloc(sizeof(*p), GFP_KERNEL);
	if (!p) {
		space->error = true;
		return hash;
	}
	p->file = get_file(file);
	p->hash = hash;
	p->next = space->pending;
	space->pending = p;
	return hash;
}

bool ud_stack_files_use(void *ctx, const unsigned int *hashes, unsigned int nr)
{
	struct ud_stack_space *space = ctx;
	bool used;

	spin_lock(&space->inst->cache_lock);
	used = ud_rs_file_cache_use_all(space->inst->file_cache, space->cache_gen, hashes, nr);
	spin_unlock(&space->inst->cache_lock);
	return used;
}

/*
 * The stack's frames as runs of frames recorded alike (src/logic/resolve.rs): the event is
 * written from them, so the frames are not copied on the way. From the task's known
 * mappings if they hold every frame and no file needs an announcement; otherwise under the
 * mmap lock, leaving the files the instance must be told about in space->pending.
 */
static void ud_resolve_frames(struct ud_stack_space *space, struct ud_known_mappings *known,
			      const u64 *frames, unsigned int nr, struct ud_runs *runs)
{
	space->cache_gen = atomic64_read(&space->inst->cache_gen);
	if (known && ud_rs_resolve_known(space, known, frames, nr, runs)) {
		ud_count(stacks_known);
		return;
	}
	mmap_read_lock(space->mm);
	ud_rs_resolve_stack(space, known, frames, nr, runs);
	mmap_read_unlock(space->mm);
}

/*
 * Without the mmap lock: path and build-id of each file to announce, as a list in walk
 * order (the walk's first file first). Drops the pending list's file references.
 */
static struct ud_file_note *ud_describe_pending(struct ud_file_pending *pending)
{
	struct ud_file_note *notes = NULL, *note;
	struct ud_file_pending *p;

	while (pending) {
		p = pending;
		pending = p->next;
		note = ud_describe_file(p->file, p->hash);
		fput(p->file);
		kfree(p);
		if (note) {
			note->next = notes;
			notes = note;
		} else {
			ud_count(errors);
		}
	}
	return notes;
}

/* Writes the file_cache events of `notes`, then the stack, into the instance's buffer. */
static void ud_write_records(struct ud_instance *inst, struct ud_file_note *notes, u64 cookie,
			     const u64 *frames, const struct ud_runs *runs, unsigned int nr)
{
	struct trace_buffer *buffer;
	struct trace_array *tr;
	unsigned int trace_ctx;

	/* Ring-buffer writes need preemption off; it also pins inst->tr (see ud_instance). */
	preempt_disable_notrace();
	tr = READ_ONCE(inst->tr);
	if (tr) {
		buffer = READ_ONCE(tr->array_buffer.buffer);
		trace_ctx = ud_trace_ctx();
		for (; notes; notes = notes->next) {
			if (ud_write_file(buffer, notes->hash, notes->path, notes->build_id, trace_ctx))
				ud_count(files);
		}
		if (nr > UD_FRAMES_FIT_ANY_BUFFER && nr > ud_max_frames(buffer)) {
			/* Keep the innermost frames. */
			nr = ud_max_frames(buffer);
			ud_count(stacks_truncated);
		}
		if (ud_write_stack(buffer, cookie, frames, runs, nr, trace_ctx))
			ud_count(stacks);
		else
			ud_count(stacks_lost);
	}
	preempt_enable_notrace();
}

void ud_stack_callback(struct unwind_work *work, struct unwind_stacktrace *trace, u64 cookie)
{
	/* Only the task work calls us, with the trace of a struct ud_stacktrace. */
	struct ud_known_mappings *known = container_of(trace, struct ud_stacktrace, trace)->known;
	struct ud_instance *inst = container_of(work, struct ud_instance, work);
	struct ud_stack_space space = { .mm = current->mm, .inst = inst };
	const u64 *frames = (const u64 *)trace->entries;
	struct ud_file_note *notes, *note;
	unsigned int nr = space.mm ? min_t(unsigned int, trace->nr, UD_MAX_STACK_ENTRIES) : 0;
	/*
	 * Not zeroed (INIT_STACK_ALL_ZERO would clear 280 bytes per stack): what is read of it
	 * is written first, the counts below and the runs by ud_rs_resolve_stack().
	 */
	struct ud_runs runs __uninitialized;

	runs.nr_small = 0;
	runs.nr_heap = 0;
	runs.heap_cap = 0;
	runs.covered = 0;
	if (nr) {
		ud_resolve_frames(&space, known, frames, nr, &runs);
		/* Out of memory for a stack of many runs: the frames resolved so far. */
		if (runs.covered < nr || space.error)
			ud_count(errors);
		nr = runs.covered;
	}
	notes = ud_describe_pending(space.pending);
	ud_write_records(inst, notes, cookie, frames, &runs, nr);
	while (notes) {
		note = notes->next;
		kfree(notes);
		notes = note;
	}
	ud_rs_runs_free(&runs);
}
