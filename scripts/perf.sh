#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Build (or reuse) perf from a cached kernel source tree and print the binary's path.
#
#   scripts/perf.sh [7.3]
#
# Debian 12's perf is 6.1: it has no `--call-graph fp,defer` (the kernel's own deferred
# unwinder, Linux 6.17+). Tests that run perf beside the module on a 7.x kernel use the
# perf of that kernel's tools/perf, built here without the optional libraries (no Python,
# Perl, libtraceevent, BPF skeletons, ...: record and script need none of them) and
# without its Rust test workloads (NO_RUST: rustc 1.95's archives break its `ar` step with
# "LLVM ERROR: Invalid encoding"). About 3 minutes; cached beside the kernels.
set -euo pipefail
series=${1:-${KERNEL:-7.3}}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${DEFERRED_UNWIND_CACHE:-$HOME/.cache/deferred-unwind}
src=$("$here/kernel.sh" source "$series")
version=$(make -s -C "$src" kernelversion)
out=$cache/perf-$version
if [ ! -x "$out/perf" ]; then
	echo "perf: building perf $version into $out" >&2
	mkdir -p "$out"
	make -s -C "$src/tools/perf" O="$out" -j"$(( $(nproc) + 1 ))" \
		NO_LIBPYTHON=1 NO_LIBPERL=1 NO_LIBTRACEEVENT=1 NO_JEVENTS=1 NO_LIBBPF=1 \
		NO_BPF_SKEL=1 NO_GTK2=1 NO_BABELTRACE=1 NO_LIBUNWIND=1 NO_SLANG=1 NO_LIBCAP=1 \
		NO_LIBNUMA=1 NO_LIBCRYPTO=1 NO_LIBLLVM=1 NO_SHELLCHECK=1 NO_RUST=1 >&2
fi
echo "$out/perf"
