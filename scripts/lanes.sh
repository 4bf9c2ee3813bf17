#!/usr/bin/env bash
# lanes: runs make targets, every one even when one fails, and reports
# each apart with its time, then the ones that failed: make test runs its
# lanes through it, so a red CI says which part broke.
#
# Each argument is a stream: lanes joined by commas run one after
# another; the streams run side by side. Half of CI's wall time was idle
# CPU (the testbed's links and Chromium wait on emulated delays), so the
# images and e2e lanes run beside the rest. Timed tests hold beside a
# busy CPU (scripts/hog-check.sh checks them so). A lane's output is
# kept apart and printed whole when it ends, so logs do not interleave.
#   bash scripts/lanes.sh lint,vet,unit images,e2e
set -uo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# stream runs its lanes in order, writing each lane's report under a
# lock once it is done, and its failures to $out/failed.
stream() {
	local lane start rc
	for lane in "$@"; do
		echo "::: lane $lane started" >&2
		start=$(date +%s)
		make --no-print-directory "$lane" > "$out/$lane.log" 2>&1
		rc=$?
		{
			flock 9
			echo "::: lane $lane"
			cat "$out/$lane.log"
			if ((rc == 0)); then
				echo "::: lane $lane ok in $(($(date +%s) - start)) s"
			else
				echo "::: lane $lane FAILED after $(($(date +%s) - start)) s"
				echo "$lane" >> "$out/failed"
			fi
		} 9> "$out/lock"
	done
}

start=$(date +%s)
pids=()
for s in "$@"; do
	IFS=, read -ra lanes <<< "$s"
	stream "${lanes[@]}" &
	pids+=($!)
done
wait "${pids[@]}"
all=$(tr ' ' '\n' <<< "$*" | tr ',' ' ' | xargs)
if [[ -s $out/failed ]]; then
	echo "::: failed: $(xargs < "$out/failed") (after $(($(date +%s) - start)) s)"
	exit 1
fi
echo "::: passed: $all in $(($(date +%s) - start)) s"
