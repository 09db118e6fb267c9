#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# `make mutants`: shows that tests can fail. Each tests/mutants/NAME.patch breaks the module
# in one way; its header names the test that must catch it ("Test: PATH") and says how
# ("What: ..."). For each, in a scratch worktree of HEAD: apply the patch, build, run that
# one test in the VM, and expect it to FAIL. A mutant the test does not catch (or a patch
# that no longer applies) fails this script.
#
#   scripts/mutants.sh [--kernel KDIR] [NAME...]
#   scripts/mutants.sh --apply-check   # only: does every patch still apply to the work tree?
#
# --apply-check costs no VM and runs in `make check` and `make check-host`: a change that
# moves a mutant's lines would otherwise make it rot silently.
set -uo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)

apply_check() {
	local p n=0 bad=0
	for p in "$REPO"/tests/mutants/*.patch; do
		if git -C "$REPO" apply --check "$p"; then n=$((n + 1)); else echo "does not apply: $p"; bad=$((bad + 1)); fi
	done
	echo "$n passed, $bad failed"
	[ $bad = 0 ]
}

kdir=
while [ $# -gt 0 ]; do
	case $1 in
	--apply-check) apply_check; exit ;;
	--kernel) kdir=$2; shift 2 ;;
	*) break ;;
	esac
done
[ -n "$kdir" ] || kdir=$("$REPO/scripts/kernel.sh" base 6.12 | tail -1)
names=("$@")
if [ ${#names[@]} = 0 ]; then
	mapfile -t names < <(cd "$REPO/tests/mutants" && ls *.patch | sed 's/\.patch$//')
fi

out=$REPO/out/mutants
mkdir -p "$out"
caught=0 missed=0 results=()
for name in "${names[@]}"; do
	patch=$REPO/tests/mutants/$name.patch
	test=$(sed -n 's/^Test: //p' "$patch" | head -1)
	what=$(sed -n 's/^What: //p' "$patch" | head -1)
	wt=/tmp/ud-mutant.$$.$name # a scratch worktree, removed below
	rm -rf "$wt"
	git -C "$REPO" worktree add --detach "$wt" HEAD >/dev/null 2>&1
	verdict=
	if ! git -C "$wt" apply "$patch"; then
		verdict="MISSED (the patch does not apply to HEAD)"
	elif ! make -s -C "$wt" KDIR="$kdir" all >"$out/$name.build.log" 2>&1; then
		verdict="MISSED (the mutant does not build: see $out/$name.build.log)"
	else
		"$wt/scripts/vm-test.sh" --kernel "$kdir" --timeout 900 --out "$out/$name" \
			"$wt/$test" >"$out/$name.log" 2>&1
		if grep -qE '^0 passed, 1 failed' "$out/$name.log"; then
			verdict="caught: $(grep -m1 -E 'FAIL: |kernel log reports' "$out/$name.log" | sed 's/.*FAIL: //' | cut -c1-120)"
		elif grep -qE '^1 passed, 0 failed' "$out/$name.log"; then
			verdict="MISSED (the test passed)"
		else
			verdict="MISSED (no verdict: see $out/$name.log)"
		fi
	fi
	git -C "$REPO" worktree remove --force "$wt" >/dev/null 2>&1
	case $verdict in
	caught*) caught=$((caught + 1)) ;;
	*) missed=$((missed + 1)) ;;
	esac
	results+=("$(printf '%-34s %-32s %s' "$name" "$test" "$verdict")")
	echo "mutant $name ($what): $verdict"
done
echo "=== mutants"
printf '%s\n' "${results[@]}"
echo "mutants: $caught caught, $missed missed"
[ "$missed" = 0 ]
