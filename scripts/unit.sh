#!/usr/bin/env bash
# unit: every package's tests but test/e2e, each test once. The race
# lane's packages (RACE_PKGS) run their tests under -race there, so here
# they run only the tests -race would distort or skips: the timed ones
# (testutil.Scaled, ScaledMs or Timed, found by the code as hog-check
# finds them), RACE_SKIP's, and the model tests, of which the race lane
# walks one seed (testutil.Seeds). Running every test of those packages
# twice cost a third of the unit lane for nothing the race lane misses.
#   RACE_PKGS='./server ./transport' RACE_SKIP='TestA|TestB' bash scripts/unit.sh [pkgs|timed]
# With an argument it runs one half: the packages outside the race lane
# (pkgs), or the race lane's packages' tests it leaves to unit (timed), so
# that make test can run each beside the race lane.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
: "${RACE_PKGS:?set RACE_PKGS to the race lane packages}" "${RACE_SKIP:?set RACE_SKIP to the tests it skips}"
read -ra race <<< "$RACE_PKGS"
mapfile -t racepaths < <($GO list "${race[@]}")
mapfile -t others < <($GO list ./... | grep -v /test/e2e | grep -vxF -f <(printf '%s\n' "${racepaths[@]}"))
# The timed tests of the race lane's packages, one alternation.
run=$RACE_SKIP
while read -r pkg tests; do
	for r in "${race[@]}"; do
		[[ $pkg == "$r" ]] && run+="|$tests"
	done
done < <($GO run ./internal/testutil/timedtests -seeded .)
part=${1:-all}
status=0
if [[ $part == all || $part == pkgs ]]; then
	CI=true DOXLAB_TESTBED_WAIT=8m $GO test -count=1 "${others[@]}" || status=1
fi
if [[ $part == all || $part == timed ]]; then
	echo "unit: the race lane's packages, their timed and model tests and RACE_SKIP's without -race"
	CI=true DOXLAB_TESTBED_WAIT=8m $GO test -count=1 -run "$run" "${race[@]}" || status=1
fi
exit $status
