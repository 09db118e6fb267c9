#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Generate the Rust declarations of the C shim (src/shim.c) from rust-bindings/shim.h.
#   bindgen.sh <shim.h> <output.rs>
# shim.h includes no kernel header: kernel structs appear only as opaque pointers, so the
# declarations do not depend on the kernel's C flags or config.
set -e
in=$1
out=$2
mkdir -p "$(dirname "$out")"
${BINDGEN:-bindgen} "$in" \
	--use-core --ctypes-prefix kernel::ffi \
	--no-layout-tests --no-doc-comments \
	--allowlist-function 'ud_.*' --allowlist-type 'ud_.*' --allowlist-type 'unwind_callback_fn' --allowlist-var 'UD_.*' \
	--default-enum-style rust \
	-o "$out.tmp" -- -x c -std=gnu11 -ffreestanding -funsigned-char
mv "$out.tmp" "$out"
