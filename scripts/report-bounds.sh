#!/usr/bin/env bash
# report-bounds: doxlab report's time and peak memory on stores made to
# break it (issue 48's reproductions), beside the bounds it promises
# (docs/statistics.md, "What a report holds"). It measures a seed of two
# real samples against a doxlab server on loopback, replicates them in
# SQL into each store, and runs 'doxlab report' and 'report --json' on
# it, printing wall time and peak RSS (GNU time). A benchmark, not a
# test: nothing is asserted here; TestReportBounds checks the behaviour.
#
#   bash scripts/report-bounds.sh            # every store
#   STORES="targets wide" bash scripts/report-bounds.sh
#
# targets  20,000 resolvers × 2 samples (TARGETS=N for another count) (1,000 resolvers × 1,000 vantage
#          points is what docs/campaigns.md sizes)
# wide     40 cells of 5,000 samples (past the exact limit) whose values
#          span ±1e±300
# huge     one resolver's cell holding +1e308, -1e308 and 0, beside another
# inf      +Inf and -Inf in a store (written by hand: doxlab refuses them)
set -euo pipefail
cd "$(dirname "$0")/.."
STORES=${STORES:-"targets wide huge inf"}
TARGETS=${TARGETS:-20000} # resolvers in the targets store
WORK=${WORK:-/var/tmp/doxlab-report-bounds}
mkdir -p "$WORK"
command -v /usr/bin/time >/dev/null || { echo "report-bounds: needs GNU time (apt-get install time)" >&2; exit 2; }
command -v sqlite3 >/dev/null || { echo "report-bounds: needs sqlite3 (apt-get install sqlite3)" >&2; exit 2; }

go build -o "$WORK/doxlab" ./cmd/doxlab
dox="$WORK/doxlab"

if [ ! -f "$WORK/seed.db" ]; then
	port=$((20000 + RANDOM % 20000))
	"$dox" serve --any 192.0.2.1 --udp "127.0.0.1:$port" >"$WORK/serve.log" 2>&1 &
	srv=$!
	trap 'kill $srv 2>/dev/null || true' EXIT
	sleep 1
	"$dox" measure --store "$WORK/seed.db" --repeat 2 --conditions fresh "udp://127.0.0.1:$port" >/dev/null
	kill $srv
fi
"$dox" export --runs --store "$WORK/seed.db" >/dev/null # a seed from an older doxlab takes this one's schema
all=$(sqlite3 "$WORK/seed.db" "SELECT group_concat(name, ', ') FROM pragma_table_info('sample_cols') WHERE name <> 'id'")

# make STORE N EXPR...: a store of N copies of the seed, each column
# named in EXPR set to its expression (i is the copy's number).
make_store() {
	local db=$1 n=$2; shift 2
	local cols sel="" c e
	IFS=', ' read -r -a cols <<<"$all"
	for c in "${cols[@]}"; do
		local x=$c
		# a copy's repetition moves on, so that its key is its own, and
		# its key's hash moves towards 0: unique in its run
		[ "$c" = rep ] && x="rep + i * 100000"
		[ "$c" = k ] && x="CASE WHEN k > 0 THEN k - i ELSE k + i END"
		for e in "$@"; do
			[ "${e%%=*}" = "$c" ] && x="${e#*=}"
		done
		sel+="${sel:+, }$x"
	done
	rm -f "$db" && cp "$WORK/seed.db" "$db"
	sqlite3 "$db" "PRAGMA journal_mode=DELETE; CREATE TEMP TABLE seed AS SELECT * FROM sample_cols;
		DELETE FROM sample_cols; BEGIN;
		WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i+1 FROM n WHERE i < $((n - 1))) INSERT INTO sample_cols ($all) SELECT $sel FROM seed, n;
		COMMIT; PRAGMA journal_mode=WAL;" >/dev/null
}

wide='(CASE WHEN i % 2 THEN 1 ELSE -1 END) * pow(10, (i * 7919 % 601) - 300)'
for s in $STORES; do
	db="$WORK/$s.db"
	case $s in
	targets) make_store "$db" "$TARGETS" "target='udp://r' || i || '.example:53'" "url='udp://r' || i || '.example:53'" ;;
	wide) make_store "$db" 100000 "target='udp://w' || (i % 40) || '.example:53'" "url='udp://w' || (i % 40) || '.example:53'" \
		"total_ms=$wide" "total_rtt=$wide" "handshake_rtt=$wide" "resolve_rtt=$wide" "probe_rtt_ms=$wide" ;;
	huge) make_store "$db" 3 "target='udp://h' || (i % 2) || '.example:53'" "url='udp://h' || (i % 2) || '.example:53'" \
		"total_ms=CASE i WHEN 0 THEN 1e308 WHEN 1 THEN 0 ELSE -1e308 END" "total_rtt=CASE i WHEN 0 THEN 1e308 WHEN 1 THEN 0 ELSE -1e308 END" ;;
	inf) make_store "$db" 4 "target='udp://i' || (i % 2) || '.example:53'" "url='udp://i' || (i % 2) || '.example:53'" \
		"total_ms=CASE i WHEN 0 THEN 9e999 WHEN 1 THEN -9e999 ELSE total_ms END" "total_rtt=CASE i WHEN 0 THEN 9e999 ELSE total_rtt END" ;;
	*) echo "report-bounds: unknown store $s" >&2; exit 2 ;;
	esac
	n=$(sqlite3 "$db" "SELECT count(*) FROM samples")
	for how in html json; do
		rm -rf "$WORK/out"
		args=(report --store "$db" --out "$WORK/out")
		[ "$how" = json ] && args=(report --store "$db" --json)
		set +e
		/usr/bin/time -f '%e %M' -o "$WORK/time" timeout 600 "$dox" "${args[@]}" >"$WORK/last.log" 2>&1
		rc=$?
		set -e
		read -r secs kb < <(tail -1 "$WORK/time") || true
		printf '%-8s %7s samples  report %-4s  exit %3s  %7.1f s  %6.0f MiB  %s\n' "$s" "$n" "$how" "$rc" "${secs:-0}" "$(( ${kb:-0} / 1024 ))" \
			"$(grep -m1 -E 'skipped|refused|report.html|error|doxlab report:' "$WORK/last.log" | cut -c1-110)"
	done
done
