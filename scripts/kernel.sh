#!/usr/bin/env bash
# Build (or reuse) a Linux 6.12 LTS kernel for the module and print its build directory.
#
#   scripts/kernel.sh base|debug
#
# Source: Debian's linux-source-6.12 package (whatever 6.12.y the registry serves). Config:
# `make tinyconfig` + scripts/config/base.config (+ debug.config for the debug flavour).
# Builds with LLVM=1 out of tree into $DEFERRED_UNWIND_CACHE (default ~/.cache/deferred-unwind),
# keyed by kernel version + the fragments' contents + this script: an unchanged key reuses the
# build, any change builds a new tree (a config change rebuilds nearly everything anyway).
set -euo pipefail

flavour=${1:-base}
here=$(cd "$(dirname "$0")" && pwd)
cache=${DEFERRED_UNWIND_CACHE:-$HOME/.cache/deferred-unwind}
jobs=${JOBS:-$(( $(nproc) + 1 ))}
log() { printf 'kernel: %s\n' "$*" >&2; }

case $flavour in
base) fragments=("$here/config/base.config") ;;
debug) fragments=("$here/config/base.config" "$here/config/debug.config") ;;
*) log "unknown flavour '$flavour' (base|debug)"; exit 2 ;;
esac

mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9 # one builder per cache at a time

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
key=$(cat "${fragments[@]}" "$0" | sha256sum | cut -c1-12)
out="$cache/build-$flavour-$version-$key"
if [ -e "$out/.built" ]; then
	log "cached: $out"
	echo "$out"
	exit 0
fi

log "building $flavour kernel into $out (LLVM=1, -j$jobs)"
start=$SECONDS
rm -rf "$out"
mkdir -p "$out"
kmake() { make -C "$src" O="$out" LLVM=1 "$@"; }
kmake -s tinyconfig >&2
"$src/scripts/kconfig/merge_config.sh" -m -O "$out" "$out/.config" "${fragments[@]}" >/dev/null
kmake -s olddefconfig >&2

# Every item of the fragments must have survived olddefconfig; a silently dropped dependency
# would otherwise surface much later as a confusing test failure.
missing=0
for frag in "${fragments[@]}"; do
	while IFS= read -r line; do
		case $line in
		CONFIG_*=n) want="# ${line%=n} is not set" ;;
		CONFIG_*) want=$line ;;
		*) continue ;;
		esac
		if ! grep -qxF "$want" "$out/.config"; then
			# "=n" may also be absent entirely when its menu is off.
			if [[ $line == *=n ]] && ! grep -q "^${line%=n}=" "$out/.config"; then continue; fi
			log "config item lost: $line (have: $(grep -E "(^|# )${line%%=*}[= ]" "$out/.config" || echo absent))"
			missing=1
		fi
	done <"$frag"
done
[ $missing = 0 ] || { log "fix the fragment (a dependency is missing)"; exit 1; }

kmake -s -j"$jobs" all >&2
touch "$out/.built"
log "built in $((SECONDS - start)) s"
echo "$out"
