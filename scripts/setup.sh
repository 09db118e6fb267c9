#!/usr/bin/env bash
# Install everything the build, the VM and the tests need on a fresh Debian 12 machine.
# Idempotent: each step checks first, so a warm run costs seconds. Must run as root.
set -euo pipefail

log() { printf 'setup: %s\n' "$*"; }

need_apt=()
# clang/lld/llvm 19 build every kernel (see scripts/kernel.sh); gcc-multilib builds the
# 32-bit (compat) test program.
for pkg in clang-19 lld-19 llvm-19 libclang-19-dev gcc-multilib flex bison bc libelf-dev libssl-dev cpio kmod udev \
           busybox-static qemu-system-x86 trace-cmd linux-perf make gcc g++ python3-pip pahole xz-utils \
           binutils file socat; do
	dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' ||
		need_apt+=("$pkg")
done
if [ ${#need_apt[@]} -gt 0 ]; then
	log "apt-get install ${need_apt[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

if ! rustup component list --installed 2>/dev/null | grep -q '^rust-src'; then
	log "rustup component add rust-src"
	rustup component add rust-src
fi
# make check's format phase (cargo fmt --check).
if ! rustup component list --installed 2>/dev/null | grep -q '^rustfmt'; then
	log "rustup component add rustfmt"
	rustup component add rustfmt
fi

# Linux 6.12 needs bindgen >= 0.65.1; 0.69.5 is what was checked here.
if ! bindgen --version 2>/dev/null | grep -q '0\.69\.5'; then
	log "cargo install bindgen-cli 0.69.5"
	cargo install bindgen-cli --version 0.69.5 --locked
fi

# Linux 7.x needs bindgen >= 0.71.1 (scripts/min-tool-version.sh of 7.3). It goes beside
# 0.69.5, under its own root, and scripts/kernel.sh passes it as BINDGEN= for 7.x trees only.
bindgen_71=/opt/deferred-unwind/bindgen-0.71.1
if ! "$bindgen_71/bin/bindgen" --version 2>/dev/null | grep -q '0\.71\.1'; then
	log "cargo install bindgen-cli 0.71.1 --root $bindgen_71"
	cargo install bindgen-cli --version 0.71.1 --locked --root "$bindgen_71"
fi

if ! command -v vng >/dev/null 2>&1; then
	log "pip install virtme-ng"
	pip install --quiet virtme-ng
fi

log "ok ($(rustc --version), $(bindgen --version), $("$bindgen_71/bin/bindgen" --version) for 7.x, vng $(vng --version 2>/dev/null | head -1))"
