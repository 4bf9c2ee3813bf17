#!/usr/bin/env bash
# hog-check: the tests with a timing threshold, COUNT times in a row
# (default 20), while stress-ng keeps every CPU busy beside them: a test
# that fails here would flake on a busy CI machine. Prints each
# package's result and the failures. Needs root for the testbed's and
# the web experiment's tests (they skip otherwise, and say so).
#   bash scripts/hog-check.sh [COUNT] [PACKAGE...]
set -uo pipefail
cd "$(dirname "$0")/.."
count=${1:-20}
shift || true
command -v stress-ng >/dev/null || { echo "hog-check: stress-ng missing: apt-get install stress-ng" >&2; exit 2; }
# The tests that assert on time, by package: every test that calls
# testutil.Scaled, ScaledMs or Timed, found by the code, not typed here.
declare -A tests=()
while read -r pkg run; do
	tests[$pkg]=$run
done < <(go run ./internal/testutil/timedtests .)
pkgs=("$@")
((${#pkgs[@]})) || pkgs=("${!tests[@]}")
for p in "${pkgs[@]}"; do
	[[ -n ${tests[$p]:-} ]] || { echo "hog-check: $p has no timed test (testutil.Scaled, ScaledMs or Timed)" >&2; exit 2; }
done
stress-ng --cpu 0 --cpu-method matrixprod --quiet &
hog=$!
trap 'kill $hog 2>/dev/null; wait $hog 2>/dev/null' EXIT
failed=()
for p in "${pkgs[@]}"; do
	start=$(date +%s)
	if CI=true go test -count="$count" -timeout 2h -run "${tests[$p]}" "$p" > "/tmp/hog-check.$(basename "$p").log" 2>&1; then
		echo "hog-check: $p ok, ${tests[$p]} $count times in $(($(date +%s) - start)) s"
	else
		echo "hog-check: $p FAILED after $(($(date +%s) - start)) s (/tmp/hog-check.$(basename "$p").log)"
		grep -- '--- FAIL' "/tmp/hog-check.$(basename "$p").log" | sort | uniq -c
		failed+=("$p")
	fi
done
((${#failed[@]} == 0)) || { echo "hog-check: failed: ${failed[*]}"; exit 1; }
