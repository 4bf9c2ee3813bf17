#!/usr/bin/env bash
# lanes: runs make targets one after another, every one even when one
# fails, and reports each apart with its time, then the ones that failed:
# make test runs its lanes (lint, vet, unit, race, e2e, ...) through it, so
# a red CI says which part broke. Each lane's CPU time (its processes'
# user and system time) is printed beside its wall time: a lane whose CPU
# time is near twice its wall time is bound by this machine's two cores,
# one far below it waits (on emulated links, on Chromium, on disks).
set -uo pipefail
cd "$(dirname "$0")/.."
# cpu sets c to the CPU seconds the shell's children have used so far
# (times runs in this shell: in a $(...) it would count the subshell's).
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
cpu() {
	times > "$tmp"
	c=$(awk 'NR==2 {
		s = 0
		for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); s += a[1] * 60 + a[2] }
		printf "%d\n", s
	}' "$tmp")
}
failed=()
for lane in "$@"; do
	echo "::: lane $lane"
	start=$(date +%s)
	cpu
	c0=$c
	if make --no-print-directory "$lane"; then
		result=ok
	else
		result=FAILED
		failed+=("$lane")
	fi
	cpu
	echo "::: lane $lane $result in $(($(date +%s) - start)) s (cpu $((c - c0)) s)"
done
if ((${#failed[@]})); then
	echo "::: failed: ${failed[*]}"
	exit 1
fi
echo "::: passed: $*"
