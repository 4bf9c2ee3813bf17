#!/usr/bin/env bash
# lanes: runs make targets one after another, every one even when one
# fails, and reports each apart with its time, then the ones that failed:
# make test runs its five lanes (lint, vet, unit, race, e2e) through it, so a
# red CI says which part broke.
set -uo pipefail
cd "$(dirname "$0")/.."
failed=()
for lane in "$@"; do
	echo "::: lane $lane"
	start=$(date +%s)
	if make --no-print-directory "$lane"; then
		echo "::: lane $lane ok in $(($(date +%s) - start)) s"
	else
		echo "::: lane $lane FAILED after $(($(date +%s) - start)) s"
		failed+=("$lane")
	fi
done
if ((${#failed[@]})); then
	echo "::: failed: ${failed[*]}"
	exit 1
fi
echo "::: passed: $*"
