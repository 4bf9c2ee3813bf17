#!/usr/bin/env bash
# tests: the go test lanes but e2e. Every test runs once without -race,
# in unit or timed, and each test of the race lane's packages (RACE_PKGS)
# once under -race too, in race or timed:
#
#   unit   every package's tests but test/e2e's and the timed ones; of
#          RACE_PKGS only those -race would break (RACE_SKIP), the
#          model tests, of which race walks one seed (testutil.Seeds),
#          and the leak tests, of which it repeats two rounds
#          (testutil.Rounds): their other tests run under -race there.
#   race   RACE_PKGS under -race, but RACE_SKIP's and the timed tests.
#   timed  the tests whose verdict rests on time (those calling
#          testutil.Scaled, ScaledMs or Timed, found by the code as
#          hog-check finds them: internal/testutil/timedtests -lane),
#          without -race, then RACE_PKGS' under -race.
#
# make test runs unit, race and e2e side by side, then timed alone: the
# timed tests hold beside one another, as they did when every lane ran in
# turn, and not beside three lanes of tests (TestDoxlabEngineBesideChromium
# went past its bound in two CIs of five).
#   RACE_PKGS='./server ./transport' RACE_SKIP='TestA|TestB' bash scripts/tests.sh unit|race|timed
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
TRIM=${TRIM:-} # -trimpath (Makefile's TRIM says why)
# The test binaries are linked without DWARF (-w): no test reads it (stack
# traces, the race detector's reports and the build ID come from other
# sections), and the lanes link some 150 binaries. Linking server's tests
# took 1.5 s of CPU with it, 1.0 without; store's under -race 2.5, 2.0;
# their binaries shrink by a fifth.
LINK=-ldflags=-w
: "${RACE_PKGS:?set RACE_PKGS to the race lane packages}" "${RACE_SKIP:?set RACE_SKIP to the tests it skips}"
export CI=true DOXLAB_TESTBED_WAIT=8m # a testbed another lane holds is waited for
read -ra race <<< "$RACE_PKGS"
mapfile -t racepaths < <($GO list "${race[@]}")
# The timed tests' regexp, then the packages holding them.
mapfile -t lane < <($GO run ./internal/testutil/timedtests -lane .)
timed=${lane[0]}
timedpkgs=("${lane[@]:1}")

case ${1:?unit, race or timed} in
unit)
	mapfile -t others < <($GO list ./... | grep -v /test/e2e | grep -vxF -f <(printf '%s\n' "${racepaths[@]}"))
	# The race lane's packages' model and leak tests, which it walks one
	# seed or two rounds of.
	seeded=()
	while read -r pkg tests; do
		for r in "${race[@]}"; do
			[[ $pkg == "$r" ]] && seeded+=("$tests")
		done
	done < <($GO run ./internal/testutil/timedtests -seeded .)
	run=$RACE_SKIP
	((${#seeded[@]})) && run+="|^($(IFS='|'; echo "${seeded[*]}"))$"
	# buildinfo's test finds the source tree through its binary's own
	# file paths, which -trimpath takes away: it keeps them.
	paths=$($GO list ./internal/buildinfo)
	status=0
	$GO test -count=1 $TRIM $LINK -skip "$timed" $(printf '%s\n' "${others[@]}" | grep -vxF "$paths") || status=1
	$GO test -count=1 $LINK -skip "$timed" "$paths" || status=1
	echo "unit: the race lane's packages' model and leak tests and RACE_SKIP's, without -race"
	$GO test -count=1 $TRIM $LINK -run "$run" -skip "$timed" "${race[@]}" || status=1
	exit $status
	;;
race)
	exec $GO test -count=1 -race $TRIM $LINK -skip "$RACE_SKIP|$timed" "${race[@]}"
	;;
timed)
	status=0
	$GO test -count=1 $TRIM $LINK -run "$timed" "${timedpkgs[@]}" || status=1
	both=()
	for p in "${timedpkgs[@]}"; do
		[[ " ${race[*]} " == *" $p "* ]] && both+=("$p")
	done
	echo "timed: the race lane's packages' timed tests under -race"
	$GO test -count=1 -race $TRIM $LINK -run "$timed" -skip "$RACE_SKIP" "${both[@]}" || status=1
	exit $status
	;;
*)
	echo "tests.sh: $1: unit, race or timed" >&2
	exit 2
	;;
esac
