// SPDX-License-Identifier: GPL-2.0
/*
 * unwind_test_client: a user of the deferred-unwind API (<linux/unwind_deferred.h> only),
 * driven from user space for the VM tests (tests/core/).
 *
 * /sys/kernel/debug/unwind_test/
 *   ctl     commands, one per line (a write is one kernel entry of the writer):
 *             init K | cancel K | init_until_busy
 *             request K                 request for work K from this write's entry
 *             request_and_wait K        request, then sleep until "wake" (at most 60 s)
 *             wake                      wake the writer of request_and_wait
 *             request_kthread K         request from a kernel thread (a kworker)
 *             cb_request A B            once: the next callback of A requests A and B
 *             nmi K [TGID] | nmi off    request for K from the NMI handler (user tasks)
 *             exit_request K [COMM] | exit_request off
 *                                       request for K at do_exit() of every user task
 *                                       (named COMM): the request is pending at exit
 *             quiet 0|1                 stop/resume logging callbacks (they are counted)
 *             bench K N                 time N requests against N bare tracepoint hits
 *                                       (fastest of interleaved rounds, scaled to N)
 *             bench_first K             time the first request of this entry (queues)
 *             clear | warn
 *   log     "init ...", "req ...", "cb ..." records (bounded; "status" counts drops)
 *   nmi     one line per request made in NMI: "nmi work=K pid=P ret=R cookie=0x..."
 *   status  callback counts per work and buffer counters
 *
 * K is a slot 0..63 of this client (struct unwind_work works[K]), not the module's bit.
 */
#include <linux/atomic.h>
#include <linux/completion.h>
#include <linux/debugfs.h>
#include <linux/delay.h>
#include <linux/kernel.h>
#include <linux/kprobes.h>
#include <linux/ktime.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/sched.h>
#include <linux/sched/task_stack.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/string.h>
#include <linux/uaccess.h>
#include <linux/unwind_deferred.h>
#include <linux/vmalloc.h>
#include <linux/workqueue.h>
#include <asm/nmi.h>
#include <asm/ptrace.h>

#define CREATE_TRACE_POINTS
#include "unwind_test_trace.h"

#define NR_SLOTS	64
#define LOG_SIZE	(16UL << 20)
#define CB_MAX_ENTRIES	256
#define NMI_RING_SIZE	32768

static struct unwind_work works[NR_SLOTS];
static bool inited[NR_SLOTS];		/* under ctl_mutex */
static DEFINE_MUTEX(ctl_mutex);		/* init and cancel */
static atomic_long_t cb_count[NR_SLOTS];
static DECLARE_COMPLETION(wake_writer);	/* request_and_wait / wake */
static atomic_long_t cb_empty[NR_SLOTS];	/* callbacks with an empty trace */
static bool quiet;

/* One-shot re-request from a callback: when work cb_req_a calls back, request a and b. */
static atomic_t cb_req_a = ATOMIC_INIT(-1);
static atomic_t cb_req_b = ATOMIC_INIT(-1);

/* --- Log: text records, appended in task context under a spinlock ----------------------- */

static DEFINE_SPINLOCK(log_lock);
static char *log_buf;			/* LOG_SIZE bytes */
static size_t log_len;
static unsigned long log_dropped;

static __printf(1, 2) void log_printf(const char *fmt, ...)
{
	unsigned long flags;
	va_list ap;
	int n;

	spin_lock_irqsave(&log_lock, flags);
	va_start(ap, fmt);
	n = vsnprintf(log_buf + log_len, LOG_SIZE - log_len, fmt, ap);
	va_end(ap);
	if (log_len + n >= LOG_SIZE) {
		log_buf[log_len] = '\0';	/* drop the truncated record */
		log_dropped++;
	} else {
		log_len += n;
	}
	spin_unlock_irqrestore(&log_lock, flags);
}

static void log_stack(int k, const struct unwind_stacktrace *trace, u64 cookie)
{
	unsigned int i, nr = min_t(unsigned int, trace->nr, CB_MAX_ENTRIES);
	/* "cb work=63 pid=4194304 cookie=0x<16> nr=<10>" plus " <16 hex>" per entry, "\n" */
	size_t need = 80 + 17 * nr + 1;
	unsigned long flags;
	char *p, *end;

	spin_lock_irqsave(&log_lock, flags);
	if (log_len + need >= LOG_SIZE) {
		log_dropped++;
		goto out;
	}
	p = log_buf + log_len;
	end = log_buf + LOG_SIZE;
	p += scnprintf(p, end - p, "cb work=%d pid=%d cookie=0x%llx nr=%u", k,
		       task_pid_nr(current), cookie, trace->nr);
	for (i = 0; i < nr; i++)
		p += scnprintf(p, end - p, " %lx", trace->entries[i]);
	p += scnprintf(p, end - p, "\n");
	log_len = p - log_buf;
out:
	spin_unlock_irqrestore(&log_lock, flags);
}

static ssize_t log_read(struct file *file, char __user *ubuf, size_t count, loff_t *ppos)
{
	size_t n = 0;
	char *tmp;

	count = min_t(size_t, count, PAGE_SIZE);
	tmp = kmalloc(PAGE_SIZE, GFP_KERNEL);
	if (!tmp)
		return -ENOMEM;
	spin_lock_irq(&log_lock);
	if (*ppos < log_len) {
		n = min_t(size_t, count, log_len - *ppos);
		memcpy(tmp, log_buf + *ppos, n);
	}
	spin_unlock_irq(&log_lock);
	if (n && copy_to_user(ubuf, tmp, n)) {
		kfree(tmp);
		return -EFAULT;
	}
	kfree(tmp);
	*ppos += n;
	return n;
}

static const struct file_operations log_fops = {
	.owner	= THIS_MODULE,
	.read	= log_read,
	.llseek	= default_llseek,
};

/* --- Requests and callbacks ------------------------------------------------------------ */

static int slot_of(struct unwind_work *work)
{
	return work - works;
}

static int do_request(int k, const char *from)
{
	u64 cookie = 0;
	int ret;

	ret = unwind_deferred_request(&works[k], &cookie);
	log_printf("req work=%d pid=%d ret=%d cookie=0x%llx from=%s\n", k,
		   task_pid_nr(current), ret, cookie, from);
	return ret;
}

static void client_callback(struct unwind_work *work, struct unwind_stacktrace *trace,
			    u64 cookie)
{
	int k = slot_of(work);

	atomic_long_inc(&cb_count[k]);
	if (!trace->nr)
		atomic_long_inc(&cb_empty[k]);
	if (!READ_ONCE(quiet))
		log_stack(k, trace, cookie);
	if (atomic_cmpxchg(&cb_req_a, k, -1) == k) {
		int b = atomic_xchg(&cb_req_b, -1);

		do_request(k, "cb");
		if (b >= 0)
			do_request(b, "cb");
	}
}

/* A request from a kernel thread: must fail with -EINVAL. */
struct kthread_request {
	struct work_struct work;
	int k;
	int ret;
	int pid;
	u64 cookie;
};

static void kthread_request_fn(struct work_struct *w)
{
	struct kthread_request *r = container_of(w, struct kthread_request, work);

	r->pid = task_pid_nr(current);
	r->ret = unwind_deferred_request(&works[r->k], &r->cookie);
}

static void request_kthread(int k)
{
	struct kthread_request r = { .k = k };

	INIT_WORK_ONSTACK(&r.work, kthread_request_fn);
	schedule_work(&r.work);
	flush_work(&r.work);
	destroy_work_on_stack(&r.work);
	log_printf("req work=%d pid=%d ret=%d cookie=0x%llx from=kthread\n", k, r.pid, r.ret,
		   r.cookie);
}

static int init_slot(int k)
{
	int ret;

	lockdep_assert_held(&ctl_mutex);
	if (inited[k])
		return -EEXIST;
	ret = unwind_deferred_init(&works[k], client_callback);
	if (!ret)
		inited[k] = true;
	return ret;
}

/* --- NMI: requests from the NMI handler, recorded in a fill-once lock-free array ------- */

struct nmi_record {
	int pid;
	int ret;
	u64 cookie;
	int work;
	int valid;
};

static struct nmi_record *nmi_ring;	/* NMI_RING_SIZE records */
static atomic_t nmi_work = ATOMIC_INIT(-1);
static atomic_t nmi_tgid = ATOMIC_INIT(0);
static atomic_long_t nmi_next;		/* next free record; may exceed the size */
static atomic_long_t nmi_hits;		/* NMIs seen */
static atomic_long_t nmi_user;		/* NMIs that hit a user task while armed */

static int client_nmi(unsigned int type, struct pt_regs *regs)
{
	int k = atomic_read(&nmi_work);
	int tgid = atomic_read(&nmi_tgid);
	struct nmi_record *r;
	u64 cookie;
	long i;
	int ret;

	atomic_long_inc(&nmi_hits);
	if (k < 0 || (current->flags & PF_KTHREAD) || !user_mode(task_pt_regs(current)))
		return NMI_HANDLED;
	if (tgid && current->tgid != tgid)
		return NMI_HANDLED;
	atomic_long_inc(&nmi_user);
	ret = unwind_deferred_request(&works[k], &cookie);
	i = atomic_long_inc_return(&nmi_next) - 1;
	if (i < NMI_RING_SIZE) {
		r = &nmi_ring[i];
		r->pid = task_pid_nr(current);
		r->ret = ret;
		r->cookie = cookie;
		r->work = k;
		smp_store_release(&r->valid, 1);
	}
	/* Injected NMIs have no other owner: claim them so the kernel does not complain. */
	return NMI_HANDLED;
}

static int nmi_show(struct seq_file *m, void *v)
{
	long i, n = min_t(long, atomic_long_read(&nmi_next), NMI_RING_SIZE);

	for (i = 0; i < n; i++) {
		struct nmi_record *r = &nmi_ring[i];

		if (smp_load_acquire(&r->valid))
			seq_printf(m, "nmi work=%d pid=%d ret=%d cookie=0x%llx\n", r->work,
				   r->pid, r->ret, r->cookie);
	}
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(nmi);

/*
 * --- Exit: requests from do_exit() -------------------------------------------------------
 *
 * A kprobe on do_exit() requests before exit_signals() sets PF_EXITING, so the task work is
 * still pending when the task exits: exit_task_work() runs it after exit_mm().
 */
static atomic_t exit_work = ATOMIC_INIT(-1);
static char exit_comm[TASK_COMM_LEN];	/* written under ctl_mutex while exit_work < 0 */
static atomic_long_t exit_ok, exit_err;	/* requests at exit: returned 0 / anything else */
static bool exit_probe_on;		/* under ctl_mutex */

static int exit_pre(struct kprobe *p, struct pt_regs *regs)
{
	int k = atomic_read(&exit_work);
	u64 cookie;
	int ret;

	if (k < 0 || (current->flags & PF_KTHREAD))
		return 0;
	/* Pairs with the release in exit_request(): exit_comm is complete. */
	smp_rmb();
	if (exit_comm[0] && strncmp(current->comm, exit_comm, TASK_COMM_LEN))
		return 0;
	ret = unwind_deferred_request(&works[k], &cookie);
	atomic_long_inc(ret ? &exit_err : &exit_ok);
	if (!READ_ONCE(quiet))
		log_printf("req work=%d pid=%d ret=%d cookie=0x%llx from=exit\n", k,
			   task_pid_nr(current), ret, cookie);
	return 0;
}

static struct kprobe exit_kprobe = {
	.symbol_name	= "do_exit",
	.pre_handler	= exit_pre,
};

static int exit_request(int k, const char *comm)
{
	int ret = 0;

	mutex_lock(&ctl_mutex);
	atomic_set(&exit_work, -1);
	if (k >= 0 && !exit_probe_on) {
		ret = register_kprobe(&exit_kprobe);
		exit_probe_on = !ret;
	}
	if (!ret && k >= 0) {
		/* Handlers that saw the old work may still read exit_comm: wait for them. */
		synchronize_rcu();
		strscpy(exit_comm, comm ?: "", sizeof(exit_comm));
		smp_wmb();
		atomic_set(&exit_work, k);
	}
	mutex_unlock(&ctl_mutex);
	return ret;
}

/* --- Benchmark: request path against a bare tracepoint hit ------------------------------ */

static unsigned long bench_sink;

static void bench_probe(void *data, unsigned long i)
{
	WRITE_ONCE(bench_sink, i);
}

/*
 * Rounds of a bench: each times n / BENCH_ROUNDS tracepoint hits, then as many repeated
 * requests, and the fastest round of each counts (scaled to n). Under -icount the guest
 * clock counts the instructions of both vCPUs: whatever the other one does during a loop
 * (a timer, the shell, a 9p reply) lands in it; the fastest of interleaved rounds leaves
 * that out of both figures alike.
 */
#define BENCH_ROUNDS	10

static void bench(int k, unsigned long n)
{
	u64 t0, t1, t2, cookie, best_tp = U64_MAX, best_rq = U64_MAX, first_ns;
	unsigned long i, m = max(n / BENCH_ROUNDS, 1UL);
	int ret = 1, first, r;

	if (register_trace_unwind_test_bench(bench_probe, NULL))
		return;
	/* The first request of the entry queues the task work; the others find their bit. */
	t0 = ktime_get_ns();
	first = unwind_deferred_request(&works[k], &cookie);
	first_ns = ktime_get_ns() - t0;
	for (r = 0; r < BENCH_ROUNDS && ret == 1; r++) {
		t0 = ktime_get_ns();
		for (i = 0; i < m; i++)
			trace_unwind_test_bench(i);
		t1 = ktime_get_ns();
		for (i = 0; i < m; i++) {
			ret = unwind_deferred_request(&works[k], &cookie);
			if (ret != 1)
				break;
		}
		t2 = ktime_get_ns();
		best_tp = min(best_tp, t1 - t0);
		best_rq = min(best_rq, t2 - t1);
	}
	unregister_trace_unwind_test_bench(bench_probe, NULL);
	tracepoint_synchronize_unregister();
	/* (n as timed: the rounds' loops, m calls each.) */
	log_printf("bench work=%d n=%lu rounds=%d tracepoint_ns=%llu first_request_ns=%llu first_ret=%d request_ns=%llu repeat_ret=%d\n",
		   k, m * BENCH_ROUNDS, BENCH_ROUNDS, best_tp * BENCH_ROUNDS, first_ns, first,
		   best_rq * BENCH_ROUNDS, ret);
}

/* The first request of an entry: the path that queues the task work. */
static void bench_first(int k)
{
	u64 t0, t1, cookie;
	int ret;

	t0 = ktime_get_ns();
	ret = unwind_deferred_request(&works[k], &cookie);
	t1 = ktime_get_ns();
	log_printf("bench_first work=%d ns=%llu ret=%d\n", k, t1 - t0, ret);
}

/* --- ctl ------------------------------------------------------------------------------ */

static int parse_slot(const char *s, int *k)
{
	if (kstrtoint(s, 0, k) || *k < 0 || *k >= NR_SLOTS)
		return -EINVAL;
	return 0;
}

static int run_command(char *line)
{
	char *argv[4] = {};
	int argc = 0, k, b, ret;
	unsigned long n;
	char *tok;

	while ((tok = strsep(&line, " \t")) && argc < ARRAY_SIZE(argv))
		if (*tok)
			argv[argc++] = tok;
	if (!argc)
		return 0;

	if (!strcmp(argv[0], "init") && argc == 2) {
		if (parse_slot(argv[1], &k))
			return -EINVAL;
		mutex_lock(&ctl_mutex);
		ret = init_slot(k);
		log_printf("init work=%d ret=%d bit=%d\n", k, ret, works[k].bit);
		mutex_unlock(&ctl_mutex);
	} else if (!strcmp(argv[0], "cancel") && argc == 2) {
		if (parse_slot(argv[1], &k))
			return -EINVAL;
		mutex_lock(&ctl_mutex);
		unwind_deferred_cancel(&works[k]);
		inited[k] = false;
		log_printf("cancel work=%d bit=%d\n", k, works[k].bit);
		mutex_unlock(&ctl_mutex);
	} else if (!strcmp(argv[0], "init_until_busy") && argc == 1) {
		int done = 0;

		ret = 0;
		mutex_lock(&ctl_mutex);
		for (k = 0; k < NR_SLOTS && ret != -EBUSY; k++) {
			if (inited[k])
				continue;
			ret = init_slot(k);
			if (!ret)
				done++;
		}
		log_printf("init_until_busy n=%d ret=%d\n", done, ret);
		mutex_unlock(&ctl_mutex);
	} else if (!strcmp(argv[0], "request") && argc == 2) {
		if (parse_slot(argv[1], &k))
			return -EINVAL;
		do_request(k, "sys");
	} else if (!strcmp(argv[0], "request_and_wait") && argc == 2) {
		if (parse_slot(argv[1], &k))
			return -EINVAL;
		reinit_completion(&wake_writer);
		do_request(k, "sys");
		ret = wait_for_completion_killable_timeout(&wake_writer, 60 * HZ);
		log_printf("woke work=%d pid=%d %s\n", k, task_pid_nr(current),
			   ret > 0 ? "by=wake" : "by=timeout");
	} else if (!strcmp(argv[0], "wake") && argc == 1) {
		complete(&wake_writer);
	} else if (!strcmp(argv[0], "request_kthread") && argc == 2) {
		if (parse_slot(argv[1], &k))
			return -EINVAL;
		request_kthread(k);
	} else if (!strcmp(argv[0], "cb_request") && argc == 3) {
		if (parse_slot(argv[1], &k) || parse_slot(argv[2], &b))
			return -EINVAL;
		atomic_set(&cb_req_b, b);
		atomic_set(&cb_req_a, k);
	} else if (!strcmp(argv[0], "nmi") && argc >= 2) {
		if (!strcmp(argv[1], "off")) {
			atomic_set(&nmi_work, -1);
			return 0;
		}
		if (parse_slot(argv[1], &k))
			return -EINVAL;
		if (argc == 3 && kstrtoint(argv[2], 0, &b))
			return -EINVAL;
		atomic_set(&nmi_tgid, argc == 3 ? b : 0);
		atomic_set(&nmi_work, k);
	} else if (!strcmp(argv[0], "exit_request") && argc >= 2) {
		if (!strcmp(argv[1], "off"))
			return exit_request(-1, NULL);
		if (parse_slot(argv[1], &k))
			return -EINVAL;
		return exit_request(k, argc == 3 ? argv[2] : NULL);
	} else if (!strcmp(argv[0], "quiet") && argc == 2) {
		if (kstrtoint(argv[1], 0, &b))
			return -EINVAL;
		WRITE_ONCE(quiet, !!b);
	} else if (!strcmp(argv[0], "bench") && argc == 3) {
		if (parse_slot(argv[1], &k) || kstrtoul(argv[2], 0, &n) || !n)
			return -EINVAL;
		bench(k, n);
	} else if (!strcmp(argv[0], "bench_first") && argc == 2) {
		if (parse_slot(argv[1], &k))
			return -EINVAL;
		bench_first(k);
	} else if (!strcmp(argv[0], "clear") && argc == 1) {
		spin_lock_irq(&log_lock);
		log_len = 0;
		log_buf[0] = '\0';
		log_dropped = 0;
		spin_unlock_irq(&log_lock);
		for (k = 0; k < NR_SLOTS; k++) {
			atomic_long_set(&cb_count[k], 0);
			atomic_long_set(&cb_empty[k], 0);
		}
		atomic_long_set(&exit_ok, 0);
		atomic_long_set(&exit_err, 0);
		/* Only while no NMI records: "nmi off" first. */
		if (atomic_read(&nmi_work) < 0) {
			memset(nmi_ring, 0, NMI_RING_SIZE * sizeof(*nmi_ring));
			atomic_long_set(&nmi_next, 0);
			atomic_long_set(&nmi_user, 0);
		}
	} else if (!strcmp(argv[0], "warn") && argc == 1) {
		WARN(1, "unwind_test_client: warning on request");
	} else {
		return -EINVAL;
	}
	return 0;
}

static ssize_t ctl_write(struct file *file, const char __user *ubuf, size_t count,
			 loff_t *ppos)
{
	char *buf, *p, *line;
	int ret = 0;

	if (count >= PAGE_SIZE)
		return -E2BIG;
	buf = memdup_user_nul(ubuf, count);
	if (IS_ERR(buf))
		return PTR_ERR(buf);
	p = buf;
	while (!ret && (line = strsep(&p, "\n")))
		ret = run_command(line);
	kfree(buf);
	return ret ? ret : count;
}

static const struct file_operations ctl_fops = {
	.owner	= THIS_MODULE,
	.write	= ctl_write,
	.llseek	= noop_llseek,
};

static int status_show(struct seq_file *m, void *v)
{
	int k;

	for (k = 0; k < NR_SLOTS; k++)
		if (inited[k] || atomic_long_read(&cb_count[k]))
			seq_printf(m, "callbacks %d %ld bit=%d empty=%ld\n", k,
				   atomic_long_read(&cb_count[k]), READ_ONCE(works[k].bit),
				   atomic_long_read(&cb_empty[k]));
	seq_printf(m, "log_len %zu\nlog_dropped %lu\n", READ_ONCE(log_len),
		   READ_ONCE(log_dropped));
	seq_printf(m, "nmi_hits %ld\nnmi_user %ld\nnmi_records %ld\n",
		   atomic_long_read(&nmi_hits), atomic_long_read(&nmi_user),
		   atomic_long_read(&nmi_next));
	seq_printf(m, "exit_requests_ok %ld\nexit_requests_err %ld\n",
		   atomic_long_read(&exit_ok), atomic_long_read(&exit_err));
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(status);

/* --- Module ---------------------------------------------------------------------------- */

static struct dentry *dir;

static int __init client_init(void)
{
	int ret;

	log_buf = vzalloc(LOG_SIZE);
	nmi_ring = vzalloc(NMI_RING_SIZE * sizeof(*nmi_ring));
	if (!log_buf || !nmi_ring) {
		ret = -ENOMEM;
		goto err_free;
	}
	ret = register_nmi_handler(NMI_LOCAL, client_nmi, 0, "unwind_test");
	if (ret)
		goto err_free;
	dir = debugfs_create_dir("unwind_test", NULL);
	debugfs_create_file("ctl", 0200, dir, NULL, &ctl_fops);
	debugfs_create_file("log", 0444, dir, NULL, &log_fops);
	debugfs_create_file("nmi", 0444, dir, NULL, &nmi_fops);
	debugfs_create_file("status", 0444, dir, NULL, &status_fops);
	return 0;

err_free:
	vfree(nmi_ring);
	vfree(log_buf);
	return ret;
}

static void __exit client_exit(void)
{
	int k;

	debugfs_remove_recursive(dir);
	atomic_set(&nmi_work, -1);
	atomic_set(&exit_work, -1);
	if (exit_probe_on)
		unregister_kprobe(&exit_kprobe);	/* waits for running handlers */
	/* Waits for running handlers. */
	unregister_nmi_handler(NMI_LOCAL, "unwind_test");
	/* Callbacks may run until each cancel returns; they use the log. */
	for (k = 0; k < NR_SLOTS; k++)
		if (inited[k])
			unwind_deferred_cancel(&works[k]);
	tracepoint_synchronize_unregister();
	vfree(nmi_ring);
	vfree(log_buf);
}

module_init(client_init);
module_exit(client_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("Test client of the deferred user-stack unwinding API");
