#!/usr/bin/env bash
# lanes: runs make targets, every one even when one fails, and reports
# each apart with its time, then the ones that failed: make test runs its
# lanes (lint, vet, unit, race, e2e, ...) through it, so a red CI says
# which part broke.
#
#   lanes.sh 'unit & images cross lint vet & race e2e@images' timed
#
# Each argument is a lane, run after the one before; an argument with &
# runs its parts at once, each part its lanes in order, and prints each
# lane's output whole when it ends (so two lanes' lines never mix). A
# lane written NAME@OTHER waits, in its part, for lane OTHER of another
# part to end first (e2e runs the images lane's images); its time is
# counted from then.
#
# Each lane's CPU time (its processes' user and system time) is printed
# beside its wall time: a lane whose CPU time is near twice its wall time
# is bound by this machine's two cores, one far below it waits (on
# emulated links, on Chromium, on disks), and can share them.
set -uo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# cpu sets c to the CPU seconds this shell's children have used so far
# (times runs in this shell: in a $(...) it would count the subshell's).
cpu() {
	local f=$tmp/times.$BASHPID # this shell's (or this part's), not $(...)'s
	times > "$f"
	c=$(awk 'NR==2 {
		s = 0
		for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); s += a[1] * 60 + a[2] }
		printf "%d\n", s
	}' "$f")
}

# lane runs one lane; with an output file, its output goes there and is
# printed with the lane's lines when it ends, under a lock.
lane() {
	local name=${1%@*} out=${2:-} start result c0
	[ -n "$out" ] || echo "::: lane $name"
	if [[ $1 == *@* ]]; then
		while [ ! -e "$tmp/ended.${1#*@}" ]; do sleep 1; done
	fi
	start=$(date +%s)
	cpu
	c0=$c
	if [ -n "$out" ]; then
		make --no-print-directory "$name" > "$out" 2>&1
	else
		make --no-print-directory "$name"
	fi && result=ok || {
		result=FAILED
		echo "$name" >> "$tmp/failed"
	}
	cpu
	touch "$tmp/ended.$name"
	local line="::: lane $name $result in $(($(date +%s) - start)) s (cpu $((c - c0)) s)"
	if [ -n "$out" ]; then
		flock "$tmp/print" sh -c 'echo "::: lane $1"; cat "$2"; echo "$3"' _ "$name" "$out" "$line"
	else
		echo "$line"
	fi
}

# A lane may wait only for a lane of another part of its argument: one
# of its own part, or of no part at all, would never end first.
for arg in "$@"; do
	IFS='&' read -ra parts <<< "$arg"
	for part in "${parts[@]}"; do
		for n in $part; do
			[[ $n == *@* ]] || continue
			others=$(printf '%s\n' "${parts[@]}" | grep -vxF -- "$part" | tr ' ' '\n' | sed 's/@.*//')
			if ! grep -qxF -- "${n#*@}" <<< "$others"; then
				echo "lanes.sh: $n: ${n#*@} is no lane of another part of '$arg'" >&2
				exit 2
			fi
		done
	done
done

all=()
for arg in "$@"; do
	if [[ $arg != *"&"* ]]; then
		all+=("$arg")
		lane "$arg"
		continue
	fi
	IFS='&' read -ra parts <<< "$arg"
	group=$(echo "$arg" | sed 's/ *& */ | /g; s/^ *//; s/ *$//')
	echo "::: at once: $group"
	start=$(date +%s)
	for part in "${parts[@]}"; do
		read -ra names <<< "$part"
		all+=("${names[@]%@*}")
		(for n in "${names[@]}"; do lane "$n" "$tmp/out.${n%@*}"; done) &
	done
	wait
	echo "::: at once: $group in $(($(date +%s) - start)) s"
done
if [ -s "$tmp/failed" ]; then
	echo "::: failed: $(tr '\n' ' ' < "$tmp/failed")"
	exit 1
fi
echo "::: passed: ${all[*]}"
