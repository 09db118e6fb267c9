#!/usr/bin/env bash
# Build (or reuse) a Linux 6.12 LTS kernel for the module and print its build directory.
#
#   scripts/kernel.sh base|debug
#
# Source: Debian's linux-source-6.12 package (whatever 6.12.y the registry serves). Config:
# `make tinyconfig` + scripts/config/base.config (+ debug.config for the debug flavour).
# Builds with LLVM=1 out of tree into $DEFERRED_UNWIND_CACHE (default ~/.cache/deferred-unwind),
# keyed by kernel version + the fragments' contents + the build recipe: an unchanged key reuses the
# build, any change builds a new tree (a config change rebuilds nearly everything anyway).
set -euo pipefail

# The whole script is one function, read before it runs: editing this file while a build is
# running cannot change what that build executes.
main() {

flavour=${1:-base}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${DEFERRED_UNWIND_CACHE:-$HOME/.cache/deferred-unwind}
jobs=${JOBS:-$(( $(nproc) + 1 ))}
log() { printf 'kernel: %s\n' "$*" >&2; }

case $flavour in
base) fragments=("$here/config/base.config") ;;
debug) fragments=("$here/config/base.config" "$here/config/debug.config") ;;
*) log "unknown flavour '$flavour' (base|debug)"; exit 2 ;;
esac

mkdir -p "$cache"
exec 9>"$cache/.source.lock"
flock 9 # one extraction at a time

# --- Source ---------------------------------------------------------------------------------
src=$(ls -d "$cache"/src/linux-source-6.12* 2>/dev/null | head -1 || true)
if [ -z "$src" ] || [ ! -e "$src/.extracted" ]; then
	log "fetching linux-source-6.12 from Debian"
	rm -rf "$cache/src" "$cache/deb"
	mkdir -p "$cache/deb" "$cache/src"
	(cd "$cache/deb" && apt-get download -q linux-source-6.12 >&2 ||
		{ apt-get update -qq && apt-get download -q linux-source-6.12 >&2; })
	dpkg-deb -x "$cache"/deb/linux-source-6.12_*.deb "$cache/deb/x"
	tarball=$(ls "$cache"/deb/x/usr/src/linux-source-6.12*.tar.xz)
	tar -C "$cache/src" -xf "$tarball"
	rm -rf "$cache/deb"
	src=$(ls -d "$cache"/src/linux-source-6.12* | head -1)
	touch "$src/.extracted"
fi
version=$(make -s -C "$src" kernelversion)
log "source: Linux $version ($src)"

# --- Build ----------------------------------------------------------------------------------
# Bump the recipe when the way the tree is configured or built changes (not for edits of
# this script that do not change the result, which would throw away a 10-minute build).
# LLVM=-19: clang/lld/llvm 19 (Debian 12's clang-19): 6.12 needs clang >= 19.1.3 for kCFI with
# KASAN and Rust (the debug kernel), 7.x needs LLVM >= 17; one toolchain for every kernel.
llvm=-19
recipe="tinyconfig+merge_config.sh -m+olddefconfig; make LLVM=$llvm all; v2"
key=$({ cat "${fragments[@]}"; echo "$recipe"; } | sha256sum | cut -c1-12)
out="$cache/build-$flavour-$version-$key"
flock -u 9
if [ -e "$out/.built" ]; then
	log "cached: $out"
	echo "$out"
	exit 0
fi
exec 8>"$out.lock"
flock 8 # one builder per tree; other flavours and cached trees stay usable
if [ -e "$out/.built" ]; then # built while we waited
	echo "$out"
	exit 0
fi

log "building $flavour kernel into $out (LLVM=$llvm, -j$jobs)"
start=$SECONDS
rm -rf "$out"
mkdir -p "$out"
# bindgen finds libclang through clang-sys: point it at the one of the compiler.
export LIBCLANG_PATH=/usr/lib/llvm$llvm/lib
kmake() { make -C "$src" O="$out" LLVM=$llvm "$@"; }
kmake -s tinyconfig >&2
"$src/scripts/kconfig/merge_config.sh" -m -O "$out" "$out/.config" "${fragments[@]}" >/dev/null
kmake -s olddefconfig >&2

# Every item of the fragments must have survived olddefconfig; a silently dropped dependency
# would otherwise surface much later as a confusing test failure. A later fragment overrides
# an earlier one (debug.config over base.config), so only the last setting of an item counts.
missing=0
while IFS= read -r line; do
	case $line in
	CONFIG_*=n) want="# ${line%=n} is not set" ;;
	*) want=$line ;;
	esac
	if ! grep -qxF "$want" "$out/.config"; then
		# "=n" may also be absent entirely when its menu is off.
		if [[ $line == *=n ]] && ! grep -q "^${line%=n}=" "$out/.config"; then continue; fi
		log "config item lost: $line (have: $(grep -E "(^|# )${line%%=*}[= ]" "$out/.config" || echo absent))"
		missing=1
	fi
done < <(cat "${fragments[@]}" | grep -E '^CONFIG_' | awk -F= '{ last[$1] = $0; order[$1] = NR } END { for (k in last) print order[k], last[k] }' | sort -n | cut -d' ' -f2-)
[ $missing = 0 ] || { log "fix the fragment (a dependency is missing)"; exit 1; }

kmake -s -j"$jobs" all >&2
# How to build modules against this tree (read by the Makefile: make -C KDIR $(cat ...)).
echo "LLVM=$llvm LIBCLANG_PATH=$LIBCLANG_PATH" >"$out/ud-kbuild-flags"
touch "$out/.built"
log "built in $((SECONDS - start)) s"
echo "$out"
}

main "$@"
