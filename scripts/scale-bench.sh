#!/usr/bin/env bash
# scale-bench: how doxlab's analysis grows with the store. It measures a
# seed of real dns-rtt samples on the testbed (doxlab experiment dns-rtt
# --quick, as root), replicates them in SQL to each size (same rows, new
# repetitions), and runs 'doxlab report' and 'doxlab export --format
# parquet' on the store, printing what a sample takes on disk ('doxlab
# store stats'), wall time and peak RSS (GNU time) beside DuckDB's time
# and peak RSS for the same grouped medians and p95s over the export.
# The copies are sealed first (store seal: each run's samples kept in
# blocks, its page loads as points and its DNS samples' cells as a
# summary, schema 12, as doxlab keeps what it writes when a run ends:
# the seal column). The report runs three times: the first after the
# seal (report), which reads the summaries and the new size's runs;
# again; and cold, with the DNS cells' summaries dropped, which reads
# every sample's block (what a report does after the cells' projection
# changed, or with other rcodes taken) and keeps them again. The
# dataset backend exports the SQLite store to a Parquet dataset (export
# --dataset; its time in the export column) and reports from the
# dataset alone, whose first report merges each samples file's cells
# that the export wrote beside it; its cold report takes other rcodes
# as answers, so reads every file (as a dataset before the cells did)
# and keeps each file's cells in a cache. The report, cold and DuckDB's
# times are each the median of three runs. "report / again / cold" is the
# reports' times as multiples of DuckDB's (issue 53 asks for 5×),
# "medians vs DuckDB" the largest gap between their medians and p95s
# and DuckDB's. It is a benchmark, not a test: nothing is asserted.
#
#   bash scripts/scale-bench.sh                    # 100k, 1M and 10M: SQLite, PostgreSQL, a dataset
#   SIZES="100000 1000000" BACKENDS=sqlite bash scripts/scale-bench.sh
#   LOADS_PER=0 bash scripts/scale-bench.sh        # DNS samples alone, no page loads
#
# Disk: a dns-rtt sample takes about 0.5-0.6 KB in SQLite and PostgreSQL
# (its raw JSON, 2 KB, compressed since schema 8), but building the store
# takes more (PostgreSQL's WAL and its copies, SQLite's journal): 10M
# samples took 15 GB on PostgreSQL and 5.4 GB on SQLite in WORK (default
# /var/tmp/doxlab-scale), and the bench stops before a size that would
# not fit (room); each
# backend's store is removed after its largest size (KEEP=1 leaves the
# last SQLite store in WORK/s.db, and PostgreSQL's data in WORK/pg/data,
# stopped, to measure by hand). PostgreSQL is Debian's, started by the script
# as the postgres user on a private socket and port, and stopped at exit.
set -euo pipefail
cd "$(dirname "$0")/.."

SIZES=${SIZES:-"100000 1000000 10000000"}
BACKENDS=${BACKENDS:-"sqlite postgres dataset"}
WORK=${WORK:-/var/tmp/doxlab-scale}
PGPORT=${PGPORT:-55432}
mkdir -p "$WORK"
command -v /usr/bin/time >/dev/null || { echo "scale-bench: needs GNU time (apt-get install time)" >&2; exit 2; }
command -v sqlite3 >/dev/null || { echo "scale-bench: needs sqlite3 (apt-get install sqlite3)" >&2; exit 2; }

go build -o "$WORK/doxlab" ./cmd/doxlab
dox="$WORK/doxlab"

# DuckDB (PyPI) in a virtual environment of its own.
if [ ! -x "$WORK/venv/bin/python" ]; then
	python3 -m venv "$WORK/venv"
	"$WORK/venv/bin/pip" install -q duckdb
fi

# measure CMD...: prints "seconds peak-MB" of one run (seconds to PREC
# decimals, 1 unless set), its output to $WORK/last.log.
measure() {
	/usr/bin/time -f '%e %M' -o "$WORK/time" "$@" >"$WORK/last.log" 2>&1 || { cat "$WORK/last.log" >&2; return 1; }
	awk -v f="%.${PREC:-1}f %.0f" '{printf f, $1, $2/1024}' "$WORK/time"
}

# median BEFORE CMD...: measure's figures of the run of median time of
# three, the shell command BEFORE run before each. What the multiples of
# DuckDB's divide is timed so: on this VM one run of either strayed by
# a second or more (DuckDB 0.47 s in one bench, 2.90 s in another).
median() {
	local before=$1 runs=() i
	shift
	for i in 1 2 3; do
		eval "$before"
		runs[i]=$(measure "$@") || return 1
	done
	printf '%s\n' "${runs[@]}" | sort -n -k1,1 | sed -n 2p
}

duck() { # PARQUET: the grouped medians and p95s, as the issue's reference
	PREC=2 median : "$WORK/venv/bin/python" -c '
import duckdb, sys
duckdb.sql(f"""SELECT profile, transport, condition, count(*), quantile_cont(total_ms, 0.5), quantile_cont(total_ms, 0.95)
FROM read_parquet({sys.argv[1]!r}, hive_partitioning=true) GROUP BY ALL""").fetchall()' "$1" # to the hundredth: it divides
}

times() { # REPORT AGAIN COLD DUCK ("s MB" each): the reports' times as multiples of DuckDB's
	awk -v r="$1" -v a="$2" -v c="$3" -v d="$4" 'BEGIN { split(r, x, " "); split(a, y, " "); split(c, w, " "); split(d, z, " ");
		printf "%.1fx / %.1fx / %.1fx", x[1] / z[1], y[1] / z[1], w[1] / z[1] }'
}

forget() { # DSN: the DNS cells' summaries dropped, so that the next report reads every block
	case $1 in
	postgres://*) psql -q "$1" -c "DELETE FROM summaries WHERE kind LIKE 'dns-cells%'" >/dev/null ;;
	*) sqlite3 "$1" "DELETE FROM summaries WHERE kind LIKE 'dns-cells%'" ;;
	esac
}

agree() { # DSN PARQUET: the largest relative gap between the report's medians and p95s
	# (total ms per profile, transport and condition) and DuckDB's exact
	# ones over the export; the report promises at most 0.1 % (its sketch)
	"$dox" report --store "$1" --json >"$WORK/report.json"
	"$WORK/venv/bin/python" -c '
import duckdb, json, sys
cells = {}
for c in json.load(open(sys.argv[1]))["cells"]:
    if c["table"] == "dns" and c["metric"] == "total_ms" and c["n"]:
        k = c["keys"]
        cells[(k["profile"], k["transport"], k["condition"])] = c
rows = duckdb.sql(f"""SELECT profile, transport, condition,
  quantile_cont(total_ms, 0.5), quantile_cont(total_ms, 0.95)
  FROM read_parquet({sys.argv[2]!r}) WHERE total_ms IS NOT NULL AND total_rtt IS NOT NULL GROUP BY ALL""").fetchall()
gap = 0
for p, t, c, med, p95 in rows:
    x = cells[(p or "none", t, c)]
    gap = max(gap, abs(x["median"] - med) / med, abs(x["p95"] - p95) / p95)
print(f"{100*gap:.3f} % over {len(rows)} cells")' "$WORK/report.json" "$2"
}

cols() { # sample_cols' columns but its number, which a copy gets anew
	sqlite3 "$WORK/seed.db" "SELECT group_concat(name, ', ') FROM pragma_table_info('sample_cols') WHERE name <> 'id'"
}

# A copy i of a seed sample is its original with the repetition moved on
# by i × COPYREP, so that the key its columns spell is its own (as a real
# sample's, kept in no column of its own), and its key's hash moved by i
# towards 0 (no overflow): unique in its run, though not its key's hash
# (the bench never looks a copy up by key). The seed's repetitions are
# under 1,000, and a copy's must fit PostgreSQL's 32-bit rep: 55,556
# copies make 10M samples.
COPYREP=1000

# A dataset's summaries (a report keeps each file's DNS cells) go to the
# bench's own cache, emptied before each first report.
export DOXLAB_CACHE="$WORK/cache"

seed() { # STORE: a seed of real samples
	echo "scale-bench: measuring the seed on the testbed (doxlab experiment dns-rtt --quick) into $1" >&2
	"$dox" experiment dns-rtt --quick --store "$1" >"$WORK/seed.log" 2>&1 || { cat "$WORK/seed.log" >&2; exit 1; }
}

# Page loads beside the DNS samples, one for every LOADS_PER samples (the
# IMC 2022 study: ~0.5 M page loads to ~10 M samples a year): a seed of
# real loads from the web experiment's quick run (Chromium on the
# testbed), whole, replicated with the samples; LOADS_PER=0 for none.
LOADS_PER=${LOADS_PER:-20}
seed_web() { # STORE: the seed's page loads
	echo "scale-bench: measuring page loads on the testbed (doxlab experiment web --quick) into $1" >&2
	"$dox" experiment web --quick --store "$1" >"$WORK/seed-web.log" 2>&1 || { cat "$WORK/seed-web.log" >&2; exit 1; }
}

[ -f "$WORK/seed.db" ] || seed "$WORK/seed.db"
if [ "$(sqlite3 "$WORK/seed.db" "SELECT count(*) FROM results WHERE kind = 'web-load'")" = 0 ]; then
	rm -f "$WORK/seed-web.db"
	seed_web "$WORK/seed-web.db"
	"$dox" export --runs --store "$WORK/seed-web.db" >/dev/null
	# the web runs numbered after the seed's own (runs.n, schema 9)
	sqlite3 -bail "$WORK/seed.db" "ATTACH '$WORK/seed-web.db' AS w; BEGIN;
		INSERT INTO runs SELECT id, kind, started_at, doxlab_version, go_version, kernel, hostname, profile, spec, method, n + (SELECT MAX(n) FROM main.runs) FROM w.runs;
		INSERT INTO results SELECT * FROM w.results WHERE kind = 'web-load'; COMMIT;"
fi
seedloads=$(sqlite3 "$WORK/seed.db" "SELECT count(*) FROM results WHERE kind = 'web-load'")
noloads="" # what leaves the seed's page loads out of a store, with LOADS_PER=0
[ "$LOADS_PER" -gt 0 ] || { noloads="kind <> 'web-load'"; seedloads=0; }
"$dox" export --runs --store "$WORK/seed.db" >/dev/null # a seed from an older doxlab takes this one's schema
# A seed's run measured again after a failed link check is superseded,
# and a report and an export leave it out: the store would hold a sixth
# more samples than they read (8.3 M of 10 M). Its mark is dropped, so
# that the samples the bench counts are the samples it analyses.
sqlite3 "$WORK/seed.db" "DELETE FROM results WHERE kind = 'supersedes'"
"$dox" store brief --store "$WORK/seed.db" >/dev/null   # and its page loads this one's briefs, as it writes them
seedn=$(sqlite3 "$WORK/seed.db" "SELECT count(*) FROM sample_cols")
all=$(cols)
copy=$(sed -E "s/(^|, )k(,|\$)/\1CASE WHEN k > 0 THEN k - i ELSE k + i END\2/; s/(^|, )rep(,|\$)/\1rep + i * $COPYREP\2/" <<<"$all")

pg_start() {
	bin=$(dirname "$(ls /usr/lib/postgresql/*/bin/postgres | sort -V | tail -1)")
	rm -rf "$WORK/pg" && mkdir -p "$WORK/pg" && chown postgres "$WORK/pg"
	su postgres -s /bin/sh -c "$bin/initdb -D $WORK/pg/data -A trust -U doxlab --no-sync" >/dev/null
	su postgres -s /bin/sh -c "$bin/pg_ctl -D $WORK/pg/data -l $WORK/pg/log -w -o '-k $WORK/pg -p $PGPORT -c listen_addresses=127.0.0.1 -c fsync=off -c max_wal_size=8GB' start" >/dev/null
	trap 'su postgres -s /bin/sh -c "$bin/pg_ctl -D $WORK/pg/data -m fast stop" >/dev/null 2>&1 || true' EXIT
	PGURL="postgres://doxlab@127.0.0.1:$PGPORT/postgres?sslmode=disable"
	# The seed, copied from SQLite: doxlab creates the schema, COPY the rows.
	"$dox" export --runs --store "$PGURL" >/dev/null
	sqlite3 -header -csv "$WORK/seed.db" "SELECT * FROM runs" >"$WORK/runs.csv"
	sqlite3 -header -csv "$WORK/seed.db" "SELECT id, $(sed -E "s/(^|, )z(,|\$)/\1'\\\\x' || lower(hex(z)) AS z\2/" <<<"$all") FROM sample_cols" >"$WORK/samples.csv" # bytea's hex form
	sqlite3 -header -csv "$WORK/seed.db" "SELECT run_id, kind, task_key, started_at, '\\x' || lower(hex(z)) AS z,
		CASE WHEN brief IS NOT NULL THEN '\\x' || lower(hex(brief)) END AS brief FROM results WHERE ${noloads:-TRUE}" >"$WORK/results.csv"
	psql -q "$PGURL" -c "\\copy runs FROM '$WORK/runs.csv' CSV HEADER" -c "\\copy sample_cols (id, $all) FROM '$WORK/samples.csv' CSV HEADER" \
		-c "\\copy results FROM '$WORK/results.csv' CSV HEADER" \
		-c "SELECT setval(pg_get_serial_sequence('sample_cols', 'id'), (SELECT MAX(id) FROM sample_cols))" \
		-c "SELECT setval(pg_get_serial_sequence('runs', 'n'), (SELECT MAX(n) FROM runs))" >/dev/null
}

# grow BACKEND N: replicates the seed until the store holds ~N samples
# (whole copies of it), adding only the copies it lacks.
# room BACKEND N: stops the bench, saying why, when WORK has not the
# octets a store of N samples took to build (1.6 KB a sample on
# PostgreSQL, 0.7 on SQLite and for a dataset's store, with its export):
# a disk filled halfway leaves a store no one can measure, and whatever
# else writes there (the tests' PostgreSQL) failing.
room() {
	local per=700 free
	[ "$1" = postgres ] && per=1600
	free=$(df -Pk "$WORK" | awk 'NR==2 {print $4}') # KiB
	if [ "$free" -lt $(($2 * per / 1024)) ]; then
		echo "scale-bench: $1 at $2 samples needs about $(($2 * per / 1000000000 + 1)) GB free in $WORK, which has $((free / 1000000)) GB" >&2
		exit 2
	fi
}

grow() {
	local want=$(( ($2 + seedn - 1) / seedn ))
	if [ "$1" = sqlite ]; then
		local have; have=$(sqlite3 "$WORK/s.db" "SELECT count(*) FROM sample_cols")
		have=$(( have / seedn ))
		# A rollback journal while building, a few thousand copies a
		# transaction: in WAL mode one transaction of 10M samples needs
		# the store's size again in WAL before its checkpoint.
		local from
		for ((from = have; from < want; from += 5000)); do
			local to=$(( from + 5000 < want ? from + 5000 : want ))
			sqlite3 "$WORK/s.db" "PRAGMA journal_mode=DELETE; CREATE TEMP TABLE seed AS SELECT * FROM sample_cols WHERE rep < $COPYREP;
				BEGIN;
				WITH RECURSIVE n(i) AS (SELECT $from UNION ALL SELECT i+1 FROM n WHERE i < $((to - 1))) INSERT INTO sample_cols ($all) SELECT $copy FROM seed, n WHERE i > 0;
				COMMIT;" >/dev/null
		done
		if [ -n "$noloads" ]; then
			sqlite3 "$WORK/s.db" "DELETE FROM results WHERE NOT ($noloads)" >/dev/null
		else
			sqlite3 "$WORK/s.db" "PRAGMA journal_mode=DELETE; CREATE TEMP TABLE seed_web AS SELECT * FROM results WHERE kind = 'web-load' AND instr(task_key, '#') = 0;
				WITH RECURSIVE k(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM k WHERE i < $(( $2 / LOADS_PER / seedloads )))
				INSERT OR IGNORE INTO results SELECT run_id, kind, task_key || '#' || i, started_at, z, brief FROM seed_web, k;" >/dev/null
		fi
		sqlite3 "$WORK/s.db" "PRAGMA journal_mode=WAL; SELECT count(*) FROM sample_cols" | tail -1
	else
		local have; have=$(psql -tA "$PGURL" -c "SELECT count(*) FROM sample_cols")
		have=$(( have / seedn ))
		psql -q "$PGURL" -c "CREATE TEMP TABLE seed AS SELECT * FROM sample_cols WHERE rep < $COPYREP;
			INSERT INTO sample_cols ($all) SELECT $copy FROM seed, generate_series(GREATEST($have, 1), $((want - 1))) i;
			CREATE TEMP TABLE seed_web AS SELECT * FROM results WHERE kind = 'web-load' AND position('#' in task_key) = 0;
			INSERT INTO results SELECT run_id, kind, task_key || '#' || i, started_at, z, brief FROM seed_web, generate_series(1, $(( LOADS_PER > 0 ? $2 / LOADS_PER / seedloads : 0 ))) i ON CONFLICT DO NOTHING;" -c "VACUUM ANALYZE sample_cols"
		psql -tA "$PGURL" -c "SELECT count(*) FROM sample_cols"
	fi
}

if [ -n "$noloads" ]; then echo "page loads: none (LOADS_PER=0)"; else echo "page loads: one per $LOADS_PER samples, from $seedloads of the web experiment's, in the report's time"; fi
printf '%-9s %11s | %9s | %-20s | %-20s | %-20s | %-20s | %-20s | %-20s | %-22s | %s\n' backend samples "B/sample" "seal s / peak MB" "report s / peak MB" "again s / peak MB" "cold s / peak MB" "export s / peak MB" "DuckDB s / peak MB" "report / again / cold" "medians vs DuckDB"
for b in $BACKENDS; do
	for n in $SIZES; do room "$b" "$n"; done # before a store is started
	case $b in
	sqlite | dataset) cp "$WORK/seed.db" "$WORK/s.db"; dsn="$WORK/s.db" ;;
	postgres) pg_start; dsn=$PGURL ;;
	*) echo "scale-bench: unknown backend $b" >&2; exit 2 ;;
	esac
	for n in $SIZES; do
		have=$(grow "${b/dataset/sqlite}" "$n" | tail -1)
		rm -rf "$WORK/report"
		if [ "$b" = dataset ]; then
			# The store exported to a dataset, then the dataset alone:
			# report --dataset, and DuckDB over its Hive partitions.
			rm -rf "$WORK/ds"
			exp=$(measure "$dox" export --store "$dsn" --dataset "$WORK/ds")
			rep=$(median 'rm -rf "$DOXLAB_CACHE" "$WORK/report"' "$dox" report --dataset "$WORK/ds" --out "$WORK/report")
			again=$(measure "$dox" report --dataset "$WORK/ds" --out "$WORK/report")
			# Cold: other rcodes taken as answers, so no file's cells
			# serve and every file is read (as a dataset before them).
			cold=$(median 'rm -rf "$DOXLAB_CACHE" "$WORK/report"' "$dox" report --dataset "$WORK/ds" --ok-rcodes NOERROR,NXDOMAIN,SERVFAIL --out "$WORK/report")
			dk=$(duck "$WORK/ds/**/*.parquet")
			octets=$(( $(du -sb "$WORK/ds" | cut -f1) / have ))
			printf '%-9s %11s | %9s | %-20s | %-20s | %-20s | %-20s | %-20s | %-20s | %-22s | %s\n' "$b" "$have" "$octets" "-" "$rep" "$again" "$cold" "$exp" "$dk" "$(times "$rep" "$again" "$cold" "$dk")" "-"
			continue
		fi
		# The samples copied in SQL into blocks, as doxlab seals what it
		# writes as it writes it: the copies made since the last size.
		seal=$(measure "$dox" store seal --store "$dsn")
		rep=$(median 'rm -rf "$WORK/report"' "$dox" report --store "$dsn" --out "$WORK/report")
		again=$(measure "$dox" report --store "$dsn" --out "$WORK/report")
		cold=$(median 'forget "$dsn"; rm -rf "$WORK/report"' "$dox" report --store "$dsn" --out "$WORK/report")
		exp=$(measure "$dox" export --store "$dsn" --format parquet --out "$WORK/samples.parquet")
		dk=$(duck "$WORK/samples.parquet")
		gap=$(agree "$dsn" "$WORK/samples.parquet")
		# what a sample takes on disk, indexes included (doxlab store stats)
		octets=$("$dox" store stats --json --store "$dsn" | python3 -c 'import json,sys; print(round(json.load(sys.stdin)["octets_per_sample"]))')
		printf '%-9s %11s | %9s | %-20s | %-20s | %-20s | %-20s | %-20s | %-20s | %-22s | %s\n' "$b" "$have" "$octets" "$seal" "$rep" "$again" "$cold" "$exp" "$dk" "$(times "$rep" "$again" "$cold" "$dk")" "$gap"
	done
	[ "${KEEP:-}" = 1 ] && [ "$b" = sqlite ] || rm -f "$WORK"/s.db*
	rm -f "$WORK/samples.parquet"
	if [ "$b" = postgres ] && [ "${KEEP:-}" != 1 ]; then
		psql -q "$PGURL" -c "DROP TABLE sample_cols CASCADE" >/dev/null 2>&1 || true
	fi
done
