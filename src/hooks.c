// SPDX-License-Identifier: GPL-2.0
/*
 * The kernel hooks of src/hooks.h: resolving the table at load, the static calls of its
 * functions, registering its probes, and telling the user what is missing.
 */
#include <linux/kprobes.h>
#include <linux/moduleparam.h>
#include <linux/printk.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/tracepoint.h>
#include <linux/uaccess.h>

#include <asm/ibt.h>

#include "hooks.h"

/* A static call is a patched direct call on x86-64; without them it would be indirect. */
static_assert(IS_ENABLED(CONFIG_HAVE_STATIC_CALL));

enum ud_hook_kind { UD_FUNC, UD_DATA, UD_KPROBE, UD_KRETPROBE, UD_TRACEPOINT };
enum ud_hook_need { REQUIRED, OPTIONAL };

enum ud_hook_state {
	UD_HOOK_UNSEEN,		/* not resolved or registered (yet) */
	UD_HOOK_PRESENT,
	UD_HOOK_MISSING,	/* ->err says why */
	UD_HOOK_UNUSED,		/* a fallback whose primary is present */
};

struct ud_hook {
	const char		*name;
	enum ud_hook_kind	kind;
	enum ud_hook_need	need;
	const char		*purpose;
	const char		*without;
	enum ud_hook_state	state;
	int			err;
	bool			forced_missing;	/* the missing_hooks parameter names it */
	bool			endbr;		/* UD_FUNC: starts with ENDBR64 */
	void			*addr;		/* UD_FUNC, UD_DATA */
	struct tracepoint	*tp;		/* UD_TRACEPOINT */
};

#define UD_HOOK_ENTRY_FUNC(name_, need_, purpose_, without_)			\
	[UD_HOOK_##name_] = { .name = #name_, .kind = UD_FUNC, .need = need_,	\
			      .purpose = purpose_, .without = without_ },
#define UD_HOOK_ENTRY_DATA(name_, type_, need_, purpose_, without_)		\
	[UD_HOOK_##name_] = { .name = #name_, .kind = UD_DATA, .need = need_,	\
			      .purpose = purpose_, .without = without_ },
#define UD_HOOK_ENTRY_PROBE(kind_, name_, need_, purpose_, without_)		\
	[UD_HOOK_##name_] = { .name = #name_, .kind = UD_##kind_, .need = need_, \
			      .purpose = purpose_, .without = without_ },
static struct ud_hook ud_hooks[UD_NR_HOOKS] = {
	UD_HOOKS(UD_HOOK_ENTRY_FUNC, UD_HOOK_ENTRY_DATA, UD_HOOK_ENTRY_PROBE)
};

/* The static calls: each has the kernel's own prototype of its function. */
#define UD_HOOK_DEFINE_CALL(name, ...) DEFINE_STATIC_CALL_RET0(ud_call_##name, name);
#define UD_HOOK_NONE(...)
UD_HOOKS(UD_HOOK_DEFINE_CALL, UD_HOOK_NONE, UD_HOOK_NONE)

static void ud_hook_set_call(enum ud_hook_id id, void *addr)
{
	switch (id) {
#define UD_HOOK_UPDATE_CALL(name, ...)						\
	case UD_HOOK_##name:							\
		static_call_update(ud_call_##name, (typeof(&name))addr);	\
		break;
	UD_HOOKS(UD_HOOK_UPDATE_CALL, UD_HOOK_NONE, UD_HOOK_NONE)
	default:
		break;
	}
}

/*
 * For tests: hooks to treat as missing (comma-separated names), so that every fallback and
 * every failed load can be exercised on a kernel that has them all.
 */
static char *missing_hooks = "";
module_param(missing_hooks, charp, 0444);
MODULE_PARM_DESC(missing_hooks,
		 "For tests: comma-separated kernel hooks to treat as missing (see Documentation)");

static const char *const ud_kind_names[] = {
	[UD_FUNC] = "function", [UD_DATA] = "variable", [UD_KPROBE] = "kprobe",
	[UD_KRETPROBE] = "kretprobe", [UD_TRACEPOINT] = "tracepoint",
};

static int ud_hook_missing(enum ud_hook_id id, int err)
{
	struct ud_hook *h = &ud_hooks[id];

	h->state = UD_HOOK_MISSING;
	h->err = err;
	if (h->need == REQUIRED)
		pr_err("unwind_deferred: required kernel %s %s is missing (%s%d): not loading; it %s\n",
		       ud_kind_names[h->kind], h->name,
		       h->forced_missing ? "missing_hooks, " : "", err, h->purpose);
	return err;
}

static int ud_parse_missing_hooks(void)
{
	char *list, *cur, *name;
	int i, ret = 0;

	list = kstrdup(missing_hooks, GFP_KERNEL);
	if (!list)
		return -ENOMEM;
	cur = list;
	while ((name = strsep(&cur, ",")) != NULL) {
		name = strim(name);
		if (!*name)
			continue;
		for (i = 0; i < UD_NR_HOOKS; i++)
			if (!strcmp(ud_hooks[i].name, name))
				break;
		if (i == UD_NR_HOOKS) {
			pr_err("unwind_deferred: missing_hooks: no kernel hook is called %s\n", name);
			ret = -EINVAL;
			break;
		}
		ud_hooks[i].forced_missing = true;
	}
	kfree(list);
	return ret;
}

/*
 * ENDBR64 (f3 0f 1e fa): an IBT kernel keeps it only where the function's address is taken.
 * Sealing overwrites the others with an instruction unique to former ENDBR64 sites, which
 * the kernel names (gen_endbr_poison(), arch/x86/include/asm/ibt.h: 66 0f 1f 00 in 6.12;
 * later kernels changed it). Without IBT nothing is sealed.
 */
#define UD_ENDBR64		0xfa1e0ff3
#ifdef CONFIG_X86_KERNEL_IBT
#define UD_ENDBR64_POISON	gen_endbr_poison()
#else
#define UD_ENDBR64_POISON	0x001f0f66
#endif

static u32 ud_first_insn(unsigned long addr)
{
	u32 insn;

	return copy_from_kernel_nofault(&insn, (void *)addr, sizeof(insn)) ? 0 : insn;
}

static bool ud_starts_with_endbr(unsigned long addr)
{
	return ud_first_insn(addr) == UD_ENDBR64;
}

/*
 * kallsyms_lookup_name() is not exported: a kprobe on it resolves its address (the kprobe
 * core looks the name up).
 */
static int ud_find_kallsyms_lookup_name(void)
{
	struct ud_hook *h = &ud_hooks[UD_HOOK_kallsyms_lookup_name];
	struct kprobe kp = { .symbol_name = h->name };
	unsigned long addr;
	int ret;

	if (h->forced_missing)
		return ud_hook_missing(UD_HOOK_kallsyms_lookup_name, -ENOENT);
	ret = register_kprobe(&kp);
	if (ret < 0)
		return ud_hook_missing(UD_HOOK_kallsyms_lookup_name, ret);
	addr = (unsigned long)kp.addr;
	unregister_kprobe(&kp);
	/* The kprobe sits after an ENDBR64, or after the nop of a sealed one. */
	if (ud_first_insn(addr - 4) == UD_ENDBR64 || ud_first_insn(addr - 4) == UD_ENDBR64_POISON)
		addr -= 4;
	h->addr = (void *)addr;
	h->endbr = ud_starts_with_endbr(addr);
	ud_hook_set_call(UD_HOOK_kallsyms_lookup_name, h->addr);
	/* Cross-check: the function finds itself at the address we call. */
	if (ud_call(kallsyms_lookup_name)(h->name) != addr) {
		ud_hook_set_call(UD_HOOK_kallsyms_lookup_name, __static_call_return0);
		return ud_hook_missing(UD_HOOK_kallsyms_lookup_name, -EFAULT);
	}
	h->state = UD_HOOK_PRESENT;
	return 0;
}

int ud_hooks_init(void)
{
	int i, ret;

	ret = ud_parse_missing_hooks();
	if (ret)
		return ret;
	ret = ud_find_kallsyms_lookup_name();
	if (ret)
		return ret;
	for (i = 0; i < UD_NR_HOOKS; i++) {
		struct ud_hook *h = &ud_hooks[i];
		unsigned long addr;

		if ((h->kind != UD_FUNC && h->kind != UD_DATA) || h->state != UD_HOOK_UNSEEN)
			continue;
		addr = h->forced_missing ? 0 : ud_call(kallsyms_lookup_name)(h->name);
		if (!addr) {
			/* Variables are in kallsyms only with CONFIG_KALLSYMS_ALL (Kconfig). */
			ret = ud_hook_missing(i, -ENOENT);
			if (h->need == REQUIRED)
				return ret;
			continue;
		}
		h->addr = (void *)addr;
		if (h->kind == UD_FUNC) {
			h->endbr = ud_starts_with_endbr(addr);
			ud_hook_set_call(i, h->addr);
		}
		h->state = UD_HOOK_PRESENT;
	}
	return 0;
}

bool ud_hook_ok(enum ud_hook_id id)
{
	return ud_hooks[id].state == UD_HOOK_PRESENT;
}

void *ud_hook_addr(enum ud_hook_id id)
{
	return ud_hook_ok(id) ? ud_hooks[id].addr : NULL;
}

void ud_hook_unused(enum ud_hook_id id)
{
	ud_hooks[id].state = UD_HOOK_UNUSED;
}

static int ud_hook_registered(enum ud_hook_id id, int ret)
{
	if (ret)
		return ud_hook_missing(id, ret);
	ud_hooks[id].state = UD_HOOK_PRESENT;
	return 0;
}

int ud_hook_register_kprobe(enum ud_hook_id id, struct kprobe *kp)
{
	struct ud_hook *h = &ud_hooks[id];

	if (WARN_ON_ONCE(h->kind != UD_KPROBE))
		return -EINVAL;
	kp->symbol_name = h->name;
	return ud_hook_registered(id, h->forced_missing ? -ENOENT : register_kprobe(kp));
}

int ud_hook_register_kretprobe(enum ud_hook_id id, struct kretprobe *rp)
{
	struct ud_hook *h = &ud_hooks[id];

	if (WARN_ON_ONCE(h->kind != UD_KRETPROBE))
		return -EINVAL;
	rp->kp.symbol_name = h->name;
	return ud_hook_registered(id, h->forced_missing ? -ENOENT : register_kretprobe(rp));
}

void ud_hook_unregister_kprobe(enum ud_hook_id id, struct kprobe *kp)
{
	if (ud_hooks[id].state != UD_HOOK_PRESENT)
		return;
	unregister_kprobe(kp);
	ud_hooks[id].state = UD_HOOK_UNSEEN;
}

void ud_hook_unregister_kretprobe(enum ud_hook_id id, struct kretprobe *rp)
{
	if (ud_hooks[id].state != UD_HOOK_PRESENT)
		return;
	unregister_kretprobe(rp);
	ud_hooks[id].state = UD_HOOK_UNSEEN;
}

static void ud_find_tracepoint(struct tracepoint *tp, void *priv)
{
	struct ud_hook *h = priv;

	if (!strcmp(tp->name, h->name))
		h->tp = tp;
}

int ud_hook_register_tracepoint(enum ud_hook_id id, void *probe, void *data)
{
	struct ud_hook *h = &ud_hooks[id];

	if (WARN_ON_ONCE(h->kind != UD_TRACEPOINT))
		return -EINVAL;
	/* Tracepoints of the kernel are not exported as symbols: found by name. */
	if (!h->forced_missing)
		for_each_kernel_tracepoint(ud_find_tracepoint, h);
	if (!h->tp)
		return ud_hook_missing(id, -ENOENT);
	return ud_hook_registered(id, tracepoint_probe_register(h->tp, probe, data));
}

void ud_hook_unregister_tracepoint(enum ud_hook_id id, void *probe, void *data)
{
	struct ud_hook *h = &ud_hooks[id];

	if (h->state != UD_HOOK_PRESENT)
		return;
	tracepoint_probe_unregister(h->tp, probe, data);
	tracepoint_synchronize_unregister();
	h->state = UD_HOOK_UNSEEN;
}

void ud_hooks_report(void)
{
	char *line;
	size_t len = 0, size = 1024;
	int i;

	line = kzalloc(size, GFP_KERNEL);
	if (!line)
		return;
	for (i = 0; i < UD_NR_HOOKS; i++) {
		const struct ud_hook *h = &ud_hooks[i];

		if (h->state != UD_HOOK_MISSING || h->need != OPTIONAL)
			continue;
		len += scnprintf(line + len, size - len, "%s%s %s (%s%d): %s", len ? "; " : "",
				 ud_kind_names[h->kind], h->name,
				 h->forced_missing ? "missing_hooks, " : "", h->err, h->without);
	}
	if (len)
		pr_warn("unwind_deferred: running without %s\n", line);
	kfree(line);
}

/* debugfs unwind_deferred/hooks: the table and what the load found. */
void ud_hooks_show(struct seq_file *m)
{
	static const char *const states[] = {
		[UD_HOOK_UNSEEN] = "not-registered", [UD_HOOK_PRESENT] = "present",
		[UD_HOOK_MISSING] = "missing", [UD_HOOK_UNUSED] = "unused",
	};
	int i;

	seq_printf(m, "# ibt %s; functions are called through static calls (direct calls)\n",
		   IS_ENABLED(CONFIG_X86_KERNEL_IBT) ? "on" : "off");
	seq_puts(m, "# name kind need state call entry\n");
	for (i = 0; i < UD_NR_HOOKS; i++) {
		const struct ud_hook *h = &ud_hooks[i];

		seq_printf(m, "%s %s %s %s", h->name, ud_kind_names[h->kind],
			   h->need == REQUIRED ? "required" : "optional", states[h->state]);
		if (h->kind == UD_FUNC && h->state == UD_HOOK_PRESENT)
			seq_printf(m, " direct %s", h->endbr ? "endbr64" : "no-endbr64");
		seq_putc(m, '\n');
	}
}
