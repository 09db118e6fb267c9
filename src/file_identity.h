/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The identity of a file's contents, keyed with a secret: super block, inode number and
 * ctime (a rewrite in place changes the ctime; 9p without a cache gives every open its own
 * struct inode, so not the inode's address; and not the struct file's address, which a
 * file opened after another was closed may reuse). The core keys its per-file caches with
 * it (src/shim.c), the tracer folds it into the file hash of its trace (src/ftrace/), each
 * with its own secret of this load: neither depends on the other.
 */
#ifndef UD_FILE_IDENTITY_H
#define UD_FILE_IDENTITY_H

#include <linux/fs.h>
#include <linux/siphash.h>

static inline u64 ud_file_identity(const struct file *file, const siphash_key_t *secret)
{
	const struct inode *inode = file_inode(file);
	struct timespec64 ctime = inode_get_ctime(inode);

	return siphash_3u64((u64)(unsigned long)inode->i_sb ^ inode->i_ino, ctime.tv_sec,
			    ctime.tv_nsec, secret);
}

#endif
