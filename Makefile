# SPDX-License-Identifier: GPL-2.0
#
# Entry points (see README.md):
#   make            build the module, the test client module and the test programs
#   make check      host tests + build + the whole VM suite on the base kernels 6.12 and 7.3
#                   (KERNEL=7.3: on 7.3 only)
#   make check-debug  the same on the 6.12 debug kernel (kCFI, lockdep, KASAN, kmemleak, ...)
#   make soak       the same on the base kernel with the full stress sizes
#   make soak-debug the full stress sizes on the debug kernel (hours under TCG)
#   make demo       build, boot, trace the bundled workload, leave a report and a flame graph
#   make KERNEL=7.3 ...  the same against Linux 7.3 instead of 6.12 (cached kernels)
#   make KDIR=/path/to/kernel/build   build against your own 6.12 or 7.x kernel built with CONFIG_RUST

# Inside kbuild (make -C $KDIR M=...) only the Kbuild file matters.
ifneq ($(KERNELRELEASE),)
include $(src)/Kbuild
else

REPO := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))
FLAVOUR ?= base
# The kernel series of the cached kernels: 6.12 (LTS, the default for building) or 7.3;
# `make check` runs both, `make check KERNEL=7.3` 7.3 only.
export KERNEL
# Resolved lazily: scripts/kernel.sh builds the cached kernel when it is missing.
KDIR ?= $(eval KDIR := $$(shell $(REPO)/scripts/kernel.sh $(FLAVOUR) $(firstword $(KERNEL) 6.12)))$(KDIR)
# The toolchain a cached kernel was built with (scripts/kernel.sh writes it beside the tree);
# for your own kernel, LLVM=1 unless you say otherwise (make KDIR=... LLVM=-19).
KFLAGS ?= $(or $(shell cat $(KDIR)/ud-kbuild-flags 2>/dev/null),LLVM=$(or $(LLVM),1))
KMAKE = $(MAKE) -C $(KDIR) $(KFLAGS)
OUT ?= $(REPO)/out

.PHONY: all module client progs setup check check-debug soak soak-debug check-host vm-test mutants \
	harness-selftest frame-sizes demo clean clean-kbuild

all: module client progs

setup:
	@$(REPO)/scripts/setup.sh

module:
	$(KMAKE) M=$(REPO) modules

client: module
	$(KMAKE) M=$(REPO)/tests/client KBUILD_EXTRA_SYMBOLS=$(REPO)/Module.symvers \
		UD_INCLUDE=$(REPO)/include modules

progs:
	$(MAKE) -C $(REPO)/tests/progs
	$(MAKE) -C $(REPO)/tests/ftrace/progs
	$(MAKE) -C $(REPO)/tools/ustack/demo

check-host:
	cargo fmt --all -- --check
	cargo test --workspace --quiet
	$(REPO)/scripts/mutants.sh --apply-check

vm-test: all
	$(REPO)/scripts/vm-test.sh --kernel $(KDIR) $(TESTS)

# No stack frame over 2 KiB in the built modules (also a phase of make check).
frame-sizes: all
	$(REPO)/scripts/frame-sizes.sh $(REPO)/unwind_deferred.ko $(REPO)/tests/client/*.ko

harness-selftest: all
	$(REPO)/scripts/harness-selftest.sh --kernel $(KDIR)

check:
	@$(REPO)/scripts/check.sh base

check-debug:
	@$(REPO)/scripts/check.sh debug

soak-debug:
	@$(REPO)/scripts/check.sh debug --full

soak:
	@$(REPO)/scripts/check.sh base --full

demo:
	@$(REPO)/scripts/demo.sh

# Each tests/mutants/*.patch breaks the module; the test it names must fail.
mutants:
	@$(REPO)/scripts/mutants.sh --kernel $(KDIR)

# What kbuild built for one kernel (the module and the test client), before building for another.
clean-kbuild:
	-$(KMAKE) M=$(REPO) clean 2>/dev/null
	-$(KMAKE) M=$(REPO)/tests/client clean 2>/dev/null

clean: clean-kbuild
	-$(MAKE) -C $(REPO)/tests/progs clean
	-$(MAKE) -C $(REPO)/tests/ftrace/progs clean
	-$(MAKE) -C $(REPO)/tools/ustack/demo clean
	rm -rf $(REPO)/src/generated $(OUT)

endif
