// SPDX-License-Identifier: GPL-2.0
/*
 * Runs the snapshot instruction of tools/qprof (a no-op anywhere else): under
 * scripts/vm-test.sh --qprof the host writes the guest's instruction counts so far.
 */
int main(void)
{
	/* nopl 0x51707266(%rax): tools/qprof's MARK. */
	asm volatile(".byte 0x0f, 0x1f, 0x80, 0x66, 0x72, 0x70, 0x51");
	return 0;
}
