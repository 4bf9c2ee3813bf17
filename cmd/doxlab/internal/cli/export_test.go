package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/experiment/coalescing"
	"github.com/doxlab/doxlab/experiment/web"
	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/doxlab/doxlab/measure"
	"github.com/doxlab/doxlab/store"
	"github.com/doxlab/doxlab/transport"
)

// TestExportCoalescingLoadsAsATable: coalescing loads are a table like
// page loads, in CSV and in Parquet with a typed start time; a selection
// with no rows fails instead of writing a header alone.
func TestExportCoalescingLoadsAsATable(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db := filepath.Join(dir, "s.db")
	st, err := store.Open(ctx, db)
	require.NoError(t, err)
	run0 := store.NewRun("experiment:coalescing", "fiber", map[string]any{"experiment": "coalescing-x"})
	run0.ID = "coalescing-x-fiber"
	require.NoError(t, st.BeginRun(ctx, run0))
	start := time.Date(2026, 11, 26, 14, 0, 0, 123456000, time.UTC)
	for rep, status := range []string{"ok", "timeout"} {
		s := coalescing.Sample{Task: coalescing.Task{Profile: "fiber", Page: "wiki", DNS: "dnsstream", H3: "0rtt", Settings: "remembered", Rep: rep},
			Start: start.Add(time.Duration(rep) * time.Second), Status: status, PLTMs: 106.1, DNSMs: 16.9,
			Proof: coalescing.Proof{QUICHandshakes: 1, Lookups: 1, DNSOnPageConn: true, DNSEarly: true, PageUsed0RTT: true}}
		require.NoError(t, st.WriteResult(ctx, run0.ID, coalescing.Kind, s.Key(), s.Start, s))
	}
	st.Close()

	code, out, errOut := run("export", "--store", db, "--table", "coalescing")
	require.Equal(t, 0, code, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 3, out)
	require.True(t, strings.HasPrefix(lines[0], "run_id,started_at,setup,profile,page,dns,h3,settings,rep,status,error,plt_ms,dns_ms,quic_handshakes"), lines[0])
	require.True(t, strings.HasPrefix(lines[1], "coalescing-x-fiber,2026-11-26T14:00:00.123456Z,,fiber,wiki,dnsstream,0rtt,remembered,0,ok,,106.1,16.9,1,"), lines[1])
	require.Contains(t, lines[2], ",timeout,,,,1,", "a failed load has no PLT")

	pq := filepath.Join(dir, "c.parquet")
	code, _, errOut = run("export", "--store", db, "--table", "coalescing", "--format", "parquet", "--out", pq)
	require.Equal(t, 0, code, errOut)
	rows, err := parquet.ReadFile[coalescing.Row](pq)
	require.NoError(t, err)
	require.Len(t, rows, 2)
	require.Equal(t, start, rows[0].StartedAt)
	f, err := os.Open(pq)
	require.NoError(t, err)
	defer f.Close()
	info, err := f.Stat()
	require.NoError(t, err)
	pf, err := parquet.OpenFile(f, info.Size())
	require.NoError(t, err)
	col, ok := pf.Schema().Lookup("started_at")
	require.True(t, ok)
	require.Contains(t, col.Node.Type().LogicalType().String(), "TIMESTAMP", "a typed time, not a string")
	for _, chunk := range pf.Metadata().RowGroups[0].Columns {
		require.Equal(t, "ZSTD", chunk.MetaData.Codec.String(), "every column compressed: %v", chunk.MetaData.PathInSchema)
	}

	code, _, errOut = run("export", "--store", db, "--table", "loads")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "no loads in the store")
}

// TestLoadStatisticsAgreeWithNumpy: the page-load and coalescing cells
// 'report --json' prints equal numpy's statistics over 'doxlab export'
// of the same store (the loads and coalescing tables), to 1e-9.
func TestLoadStatisticsAgreeWithNumpy(t *testing.T) {
	py := testutil.Need(t, "python3", "apt-get install python3")
	if exec.Command(py, "-c", "import numpy").Run() != nil {
		testutil.Missing(t, "numpy not found; install it with: pip install numpy (or run bash .ci/run)")
	}
	ctx := context.Background()
	dir := t.TempDir()
	db := filepath.Join(dir, "s.db")
	st, err := store.Open(ctx, db)
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(3, 4))
	start := time.Date(2026, 11, 26, 14, 0, 0, 0, time.UTC)
	webRun := store.NewRun("experiment:web", "fiber", map[string]any{"experiment": "web-x"})
	webRun.ID = "web-x-fiber"
	require.NoError(t, st.BeginRun(ctx, webRun))
	coRun := store.NewRun("experiment:coalescing", "fiber", map[string]any{"experiment": "coalescing-x"})
	coRun.ID = "coalescing-x-fiber"
	require.NoError(t, st.BeginRun(ctx, coRun))
	for _, tr := range []string{"udp", "doh2", "doq"} {
		for _, h3 := range []string{"1rtt", "0rtt"} {
			for rep := range 7 {
				// A web page load as the web experiment stores it (its
				// sample type is the experiments' own).
				x := map[string]any{"profile": "fiber", "page": "wiki", "transport": tr, "stub_state": "cold", "h3": h3, "dns_mode": "stub", "rep": rep,
					"start": start.Add(time.Duration(rep) * time.Second), "status": "ok", "plt_ms": math.Round(100+rng.ExpFloat64()*40e3) / 1e3, "fcp_ms": math.Round(50+rng.ExpFloat64()*20e3) / 1e3}
				require.NoError(t, st.WriteResult(ctx, webRun.ID, web.Kind, fmt.Sprintf("fiber|wiki|%s|cold|%s|stub|%d", tr, h3, rep), x["start"].(time.Time), x))
				s := coalescing.Sample{Task: coalescing.Task{Profile: "fiber", Page: "wiki", DNS: tr, H3: h3, Settings: "remembered", Rep: rep},
					Start: x["start"].(time.Time), Status: "ok", PLTMs: math.Round(90+rng.ExpFloat64()*30e3) / 1e3}
				require.NoError(t, st.WriteResult(ctx, coRun.ID, coalescing.Kind, s.Key(), s.Start, s))
			}
		}
	}
	st.Close()

	code, out, errOut := run("report", "--store", db, "--json")
	require.Equal(t, 0, code, errOut)
	sum := summaryCells(t, out)
	numpy := func(csvPath, value string, keys ...string) map[string][5]float64 {
		return numpyGroups(t, py, csvPath, value, keys...)
	}
	export := func(table string) string {
		p := filepath.Join(dir, table+".csv")
		code, _, errOut := run("export", "--store", db, "--table", table, "--out", p)
		require.Equal(t, 0, code, errOut)
		return p
	}
	want := map[string]map[string][5]float64{
		"web plt_ms":        numpy(export("loads"), "plt_ms", "transport", "h3"),
		"web fcp_ms":        numpy(filepath.Join(dir, "loads.csv"), "fcp_ms", "transport", "h3"),
		"coalescing plt_ms": numpy(export("coalescing"), "plt_ms", "dns", "h3"),
	}
	seen := map[string]int{}
	for _, c := range sum.Cells {
		w, ok := want[c.Table+" "+c.Metric]
		if !ok {
			continue
		}
		tr := c.Keys["transport"]
		if c.Table == "coalescing" {
			tr = c.Keys["dns"]
		}
		exp, ok := w[tr+"|"+c.Keys["h3"]]
		require.True(t, ok, "%s %v", c.Table, c.Keys)
		require.Equal(t, int(exp[0]), c.N)
		for i, got := range []float64{c.Median, c.P25, c.P75, c.P95} {
			require.InDelta(t, exp[i+1], got, 1e-9, "%s %s %v, statistic %d", c.Table, c.Metric, c.Keys, i)
		}
		seen[c.Table+" "+c.Metric]++
	}
	require.Equal(t, map[string]int{"web plt_ms": 6, "web fcp_ms": 6, "coalescing plt_ms": 12}, seen, "coalescing has a cell against each baseline")
}

// summaryCells reads the cells of 'report --json'.
func summaryCells(t *testing.T, out string) (sum struct {
	Cells []struct {
		Table, Metric         string
		Keys                  map[string]string
		N                     int
		Median, P25, P75, P95 float64
	}
}) {
	t.Helper()
	require.NoError(t, json.Unmarshal([]byte(out), &sum))
	return sum
}

// numpyGroups is numpy's count, median, p25, p75 and p95 of an exported
// CSV's column value, grouped by keys joined with "|": the reference
// outside Go the statistics are checked against.
func numpyGroups(t *testing.T, py, csvPath, value string, keys ...string) map[string][5]float64 {
	t.Helper()
	script := `import csv, json, sys, numpy as np
path, value, keys = sys.argv[1], sys.argv[2], sys.argv[3:]
groups = {}
for r in csv.DictReader(open(path)):
    if r[value]:
        groups.setdefault("|".join(r[k] for k in keys), []).append(float(r[value]))
json.dump({k: [len(v), float(np.median(v))] + [float(np.percentile(v, q)) for q in (25, 75, 95)] for k, v in groups.items()}, sys.stdout)`
	b, err := exec.Command(py, append([]string{"-c", script, csvPath, value}, keys...)...).Output()
	require.NoError(t, err)
	var m map[string][5]float64
	require.NoError(t, json.Unmarshal(b, &m))
	return m
}

// TestParquetExportKeepsEachRowsValues: the Parquet writer holds a row
// group of rows before writing them; each exported row keeps its own
// values (they once all took the last read row's, on PostgreSQL and on
// SQLite stores under 32,768 samples).
func TestParquetExportKeepsEachRowsValues(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db := filepath.Join(dir, "s.db")
	st, err := store.Open(ctx, db)
	require.NoError(t, err)
	sr := store.NewRun("measure", "", map[string]any{})
	require.NoError(t, st.BeginRun(ctx, sr))
	for i := range 40 {
		require.NoError(t, st.Write(ctx, sr.ID, &measure.Sample{
			Task:    measure.Task{URL: "udp://10.0.0.53:53", Target: "10.0.0.53", Transport: "udp", Condition: "fresh", Rep: i},
			Start:   time.Unix(int64(i), 0),
			Measure: &transport.Record{Status: transport.StatusOK, Answers: []string{}, Timing: transport.Timing{TotalMs: float64(10 + i)}},
			Status:  transport.StatusOK, RTTs: &measure.InRTTs{Total: float64(i) / 10},
		}))
	}
	require.NoError(t, st.Close())
	out := filepath.Join(dir, "s.parquet")
	code, _, errOut := run("export", "--store", db, "--format", "parquet", "--out", out)
	require.Equal(t, 0, code, errOut)
	rows, err := parquet.ReadFile[store.Row](out)
	require.NoError(t, err)
	require.Len(t, rows, 40)
	seen := map[float64]bool{}
	for _, r := range rows {
		require.NotNil(t, r.TotalMs)
		require.InDelta(t, (*r.TotalMs-10)/10, *r.TotalRTT, 1e-9, "a row's values are its own")
		seen[*r.TotalMs] = true
	}
	require.Len(t, seen, 40, "forty rows, forty totals")
}

// TestCPUProfiles: report and export write their CPU profile where
// --cpuprofile says (a pprof file: gzip), and say in one line why they
// cannot, before reading anything.
func TestCPUProfiles(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "s.db")
	st, err := store.Open(context.Background(), db)
	require.NoError(t, err)
	run0 := store.NewRun("measure", "", nil)
	require.NoError(t, st.BeginRun(context.Background(), run0))
	require.NoError(t, st.Write(context.Background(), run0.ID, &measure.Sample{Task: measure.Task{URL: "udp://192.0.2.1:53", Target: "192.0.2.1", Transport: "udp", Condition: "fresh"},
		Start: time.Now(), Status: transport.StatusOK, Measure: &transport.Record{Status: transport.StatusOK, Rcode: "NOERROR", Timing: transport.Timing{QueryMs: 1, TotalMs: 1}}}))
	st.Close()
	for _, args := range [][]string{{"export", "--store", db}, {"report", "--store", db, "--json"}} {
		prof := filepath.Join(dir, args[0]+".prof")
		code, _, errOut := run(append(args, "--cpuprofile", prof)...)
		require.Equal(t, 0, code, errOut)
		b, err := os.ReadFile(prof)
		require.NoError(t, err)
		require.Greater(t, len(b), 2)
		require.Equal(t, []byte{0x1f, 0x8b}, b[:2], "%s: a pprof profile is gzipped", args[0])

		code, out, errOut := run(append(args, "--cpuprofile", filepath.Join(dir, "no", "such", "dir", "p"))...)
		require.Equal(t, exitUsage, code, args[0])
		require.Empty(t, out)
		require.Equal(t, 1, strings.Count(errOut, "\n"), errOut)
		require.Contains(t, errOut, "doxlab "+args[0]+": --cpuprofile:")
	}
}

// TestStoredTextPrintsSafely: a campaign's workers write its samples and
// results, so a vantage point's name or a result's kind in a shared
// store is text from another machine, and ESC or BEL in it would drive
// the terminal of whoever reads the store (move the cursor, retitle the
// window). The closest vantage points an unknown one is told (report,
// export) and store stats's result kinds print such text escaped.
func TestStoredTextPrintsSafely(t *testing.T) {
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "s.db")
	st, err := store.Open(ctx, db)
	require.NoError(t, err)
	sr := store.NewRun("measure", "", map[string]any{})
	require.NoError(t, st.BeginRun(ctx, sr))
	evil := "fra\x1b]0;owned\x07\x1b[2J"
	require.NoError(t, st.Write(ctx, sr.ID, &measure.Sample{
		Task:    measure.Task{URL: "udp://10.0.0.53:53", Target: "10.0.0.53", Transport: "udp", Condition: "fresh"},
		Start:   time.Unix(1, 0),
		Measure: &transport.Record{Status: transport.StatusOK, Answers: []string{}, Timing: transport.Timing{TotalMs: 10}},
		Status:  transport.StatusOK, Vantage: &measure.Vantage{Name: evil},
	}))
	require.NoError(t, st.WriteResult(ctx, sr.ID, store.Kind("kind\x1b[31m"), "k", time.Unix(1, 0), map[string]int{"a": 1}))
	require.NoError(t, st.Close())

	for _, args := range [][]string{
		{"report", "--store", db, "--vantage", "fra", "--out", t.TempDir()},
		{"export", "--store", db, "--vantage", "fra", "--out", filepath.Join(t.TempDir(), "x.csv")},
	} {
		code, _, errOut := run(args...)
		require.Equal(t, 1, code, "%v: %s", args, errOut)
		require.Contains(t, errOut, `the closest it holds: fra\x1b]0;owned\x07\x1b[2J`, args)
		require.NotContains(t, errOut, "\x1b", args)
		require.NotContains(t, errOut, "\x07", args)
	}
	code, out, errOut := run("store", "stats", "--store", db)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, `kind\x1b[31m`)
	require.NotContains(t, out+errOut, "\x1b")
}
