#!/usr/bin/env bash
# Build (or reuse) a kernel for the module and print its build directory.
#
#   scripts/kernel.sh base|debug [6.12|7.3]      (or KERNEL=6.12|7.3 in the environment)
#   scripts/kernel.sh source [6.12|7.3]          fetch and unpack the source only; print its path
#
# Series 6.12 (the default): Debian's linux-source-6.12 from the machine's own apt sources
# (bookworm-security serves whatever 6.12.y is current). Series 7.3: linux-source-7.3 from
# trixie-backports, fetched through a private apt configuration under the cache (the
# system's sources are not touched), signatures checked with debian-archive-keyring.
# Config: `make tinyconfig` + scripts/config/base.config (+ debug.config for the debug
# flavour) + the series' own fragments (linux-7.3*.config: what 7.x renamed or removed).
# Builds with LLVM=-19 out of tree into $DEFERRED_UNWIND_CACHE (default
# ~/.cache/deferred-unwind), keyed by kernel version + the fragments' contents + the build
# recipe: an unchanged key reuses the build, any change builds a new tree (a config change
# rebuilds nearly everything anyway).
set -euo pipefail

# The whole script is one function, read before it runs: editing this file while a build is
# running cannot change what that build executes.
main() {

flavour=${1:-base}
series=${2:-${KERNEL:-6.12}}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${DEFERRED_UNWIND_CACHE:-$HOME/.cache/deferred-unwind}
jobs=${JOBS:-$(( $(nproc) + 1 ))}
log() { printf 'kernel: %s\n' "$*" >&2; }

# Per series: the apt suite that serves its source package (empty: the system's sources),
# bindgen (7.x needs >= 0.71.1, installed beside the system's 0.69.5 by scripts/setup.sh),
# and the fragments applied after base.config and after debug.config.
case $series in
6.12) suite= bindgen=bindgen series_base=() series_debug=() ;;
7.3)
	suite=trixie-backports bindgen=/opt/deferred-unwind/bindgen-0.71.1/bin/bindgen
	series_base=("$here/config/linux-7.3.config")
	series_debug=("$here/config/linux-7.3-debug.config")
	;;
*) log "unknown kernel series '$series' (6.12|7.3)"; exit 2 ;;
esac
case $flavour in
source | base) fragments=("$here/config/base.config" "${series_base[@]}") ;;
debug) fragments=("$here/config/base.config" "${series_base[@]}" "$here/config/debug.config" "${series_debug[@]}") ;;
*) log "unknown flavour '$flavour' (base|debug|source)"; exit 2 ;;
esac
[ "$flavour" = source ] || command -v "$bindgen" >/dev/null ||
	{ log "no $bindgen: run scripts/setup.sh"; exit 1; }

mkdir -p "$cache"
exec 9>"$cache/.source.lock"
flock 9 # one extraction at a time

# --- Source ---------------------------------------------------------------------------------
pkg=linux-source-$series
src=$cache/src/$pkg
if [ ! -e "$src/.extracted" ]; then
	rm -rf "$src" "$cache/deb"
	mkdir -p "$cache/deb" "$cache/src"
	apt_opts=()
	if [ -n "$suite" ]; then
		# A private apt configuration for this one download: its own sources.list, lists and
		# archives directory; the system's configuration and its package lists stay as they are.
		aptdir=$cache/apt-$suite
		mkdir -p "$aptdir/lists/partial" "$aptdir/archives/partial"
		echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $suite main" \
			>"$aptdir/sources.list"
		apt_opts=(-o "Dir::Etc::SourceList=$aptdir/sources.list" -o Dir::Etc::SourceParts=/dev/null
			-o "Dir::State::Lists=$aptdir/lists" -o "Dir::Cache::Archives=$aptdir/archives")
		apt-get "${apt_opts[@]}" update -qq >&2
	fi
	log "fetching $pkg $(apt-cache "${apt_opts[@]}" policy "$pkg" | awk '/Candidate:/ {print $2}') from Debian${suite:+ ($suite)}"
	(cd "$cache/deb" && apt-get "${apt_opts[@]}" download -q "$pkg" >&2 ||
		{ apt-get "${apt_opts[@]}" update -qq && apt-get "${apt_opts[@]}" download -q "$pkg" >&2; })
	dpkg-deb --fsys-tarfile "$cache"/deb/"$pkg"_*.deb | tar -C "$cache/deb" -x "./usr/src/$pkg.tar.xz"
	tar -C "$cache/src" -xf "$cache/deb/usr/src/$pkg.tar.xz"
	rm -rf "$cache/deb"
	touch "$src/.extracted"
fi
version=$(make -s -C "$src" kernelversion)
log "source: Linux $version ($src)"
if [ "$flavour" = source ]; then
	echo "$src"
	exit 0
fi

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
kmake() { make -C "$src" O="$out" LLVM=$llvm BINDGEN="$bindgen" "$@"; }
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
echo "LLVM=$llvm LIBCLANG_PATH=$LIBCLANG_PATH BINDGEN=$bindgen" >"$out/ud-kbuild-flags"
touch "$out/.built"
log "built in $((SECONDS - start)) s"
echo "$out"
}

main "$@"
