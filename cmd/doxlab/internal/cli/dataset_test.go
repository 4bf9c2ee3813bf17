package cli

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/experiment/web"
	"github.com/doxlab/doxlab/measure"
	"github.com/doxlab/doxlab/store"
	"github.com/doxlab/doxlab/transport"
)

// TestArchiveKeepsTheReport: 'store archive' moves a store's first day
// to a dataset; the report of the store with the dataset is the report
// before, word for word; the dataset alone reports the first day; an
// export of what the store still holds is refused beside it; and bad
// arguments get a line each.
func TestArchiveKeepsTheReport(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db := filepath.Join(dir, "s.db")
	st, err := store.Open(ctx, db)
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(5, 6))
	day1 := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	dnsRun := store.NewRun("measure", "", map[string]any{"targets": []string{"10.0.0.1"}})
	require.NoError(t, st.BeginRun(ctx, dnsRun))
	webRun := store.NewRun("experiment:web", "fiber", map[string]any{"experiment": "web-x"})
	webRun.ID = "web-x-fiber"
	require.NoError(t, st.BeginRun(ctx, webRun))
	for d := range 2 {
		at := day1.Add(time.Duration(d) * 24 * time.Hour)
		for i := range 40 {
			tr := []string{"udp", "doh2", "doq"}[i%3]
			ms := math.Round(10+rng.ExpFloat64()*5e3) / 1e3
			x := &measure.Sample{Task: measure.Task{URL: tr + "://10.0.0.1", Target: "10.0.0.1", Transport: tr, Condition: "fresh", Rep: d*100 + i},
				Start: at.Add(time.Duration(i) * time.Second), Status: transport.StatusOK,
				Measure: &transport.Record{Status: transport.StatusOK, Rcode: "NOERROR", Timing: transport.Timing{TotalMs: ms, QueryMs: ms}}}
			require.NoError(t, st.Write(ctx, dnsRun.ID, x))
			w := map[string]any{"profile": "fiber", "page": "wiki", "transport": tr, "stub_state": "cold", "h3": "1rtt", "dns_mode": "stub", "rep": d*100 + i,
				"start": x.Start, "status": "ok", "plt_ms": math.Round(100+rng.ExpFloat64()*40e3) / 1e3, "fcp_ms": math.Round(50+rng.ExpFloat64()*20e3) / 1e3}
			require.NoError(t, st.WriteResult(ctx, webRun.ID, web.Kind, fmt.Sprintf("fiber|wiki|%s|cold|1rtt|stub|%d", tr, d*100+i), x.Start, w))
		}
	}
	st.Close()
	report := func(args ...string) string {
		t.Helper()
		code, out, errOut := run(append([]string{"report", "--json"}, args...)...)
		require.Equal(t, 0, code, errOut)
		return out
	}
	before := report("--store", db)
	compared := report("--store", db, "--compare", dnsRun.ID, webRun.ID)

	ds := filepath.Join(dir, "archive")
	code, out, errOut := run("store", "archive", "--store", db, "--before", "2026-11-21", "--dataset", ds)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "added 2 runs, 40 samples and 40 results")
	after := report("--store", db)
	require.NotEqual(t, before, after, "the store alone lost its first day")
	// Again, and before anything was measured: nothing moves, and the
	// store is left as it is (no VACUUM of it all for nothing).
	for _, cut := range []string{"2026-11-21", "1970-01-01"} {
		code, out, errOut = run("store", "archive", "--store", db, "--before", cut, "--dataset", ds)
		require.Equal(t, 0, code, errOut)
		require.Equal(t, ds+": nothing in "+db+" started before "+cut+"; nothing moved\n", out)
		require.Equal(t, after, report("--store", db))
	}
	require.Contains(t, after, `"n": 40`)
	require.Equal(t, before, report("--store", db, "--dataset", ds), "the store and its archive report as the store did")
	require.NotEqual(t, before, report("--dataset", ds), "the dataset alone holds the first day")
	require.Equal(t, compared, report("--store", db, "--dataset", ds, "--compare", dnsRun.ID, webRun.ID), "runs compare as they did with their archived rounds")
	require.NotEqual(t, compared, report("--store", db, "--compare", dnsRun.ID, webRun.ID))

	exported := filepath.Join(dir, "exported")
	code, out, errOut = run("export", "--store", db, "--dataset", exported, "--format", "parquet")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "added 2 runs, 40 samples and 40 results")
	code, out, _ = run("export", "--store", db, "--dataset", exported)
	require.Equal(t, 0, code)
	require.Contains(t, out, "added 0 runs, 0 samples and 0 results in 0 files of 0 octets; 80 it held already")
	code, _, errOut = run("report", "--store", db, "--dataset", exported)
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, "exported, not archived")

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"store", "archive", "--store", db, "--dataset", ds}, "--before DATE is required"},
		{[]string{"store", "archive", "--store", db, "--before", "yesterday", "--dataset", ds}, `"yesterday": want a day`},
		{[]string{"store", "archive", "--store", db, "--before", "2026-11-21"}, "--dataset DIR is required"},
		{[]string{"report", "--dataset", dir}, "no _manifest.json"},
		{[]string{"export", "--store", db, "--dataset", ds, "--format", "csv"}, "a dataset is Parquet"},
		{[]string{"export", "--store", db, "--before", "2026-11-21"}, "--before goes with --dataset DIR"},
		{[]string{"report", "--compare", "--dataset", ds, "a", "b"}, `archive: no run or experiment "a"`},
	} {
		code, _, errOut := run(c.args...)
		require.NotZero(t, code, c.args)
		require.Contains(t, errOut, c.want, c.args)
	}
}

// TestStoreBrief: store stats says how many page loads have no brief
// (written before schema 14) and prints the command that briefs them,
// which works as pasted and says how many it briefed; run again, none;
// a store that is not there is one line and no store made.
func TestStoreBrief(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "my store") // a space: the hint quotes it
	require.NoError(t, os.Mkdir(dir, 0o755))
	db := filepath.Join(dir, "s.db")
	st, err := store.Open(ctx, db)
	require.NoError(t, err)
	require.NoError(t, st.BeginRun(ctx, store.Run{ID: "w", Kind: "web", StartedAt: time.Now()}))
	for i := range 3 {
		require.NoError(t, st.WriteResult(ctx, "w", web.Kind, fmt.Sprint(i), time.Now(), map[string]any{"status": "ok", "graph": map[string]int{"n": i}}))
	}
	_, err = st.DB().ExecContext(ctx, `UPDATE results SET brief = NULL`)
	require.NoError(t, err)
	st.Close()

	code, _, errOut := run("store", "stats", "--store", db)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, errOut, "3 web-load results have no current brief")
	out := runTheHint(t, errOut)
	require.Equal(t, "doxlab store brief: 3 results briefed", strings.Join(strings.Fields(out)[:6], " "))
	code, out, errOut = run("store", "stats", "--store", db, "--json")
	require.Equal(t, 0, code)
	require.Empty(t, errOut, "all briefed: no hint")
	require.NotContains(t, out, "unbriefed")
	code, out, _ = run("store", "brief", "--store", db)
	require.Equal(t, 0, code)
	require.Contains(t, out, ": 0 results briefed")

	missing := filepath.Join(t.TempDir(), "none.db")
	code, _, errOut = run("store", "brief", "--store", missing)
	require.NotEqual(t, 0, code)
	require.Equal(t, 1, strings.Count(strings.TrimSpace(errOut), "\n")+1, errOut)
	require.NoFileExists(t, missing)
}

// TestStoreSealKeepsPoints: store seal keeps each run's page loads as
// the points a report reads of them (loads copied in SQL, a campaign's,
// another build's points), once: the report after it is the report
// before, and sealing again keeps nothing.
func TestStoreSealKeepsPoints(t *testing.T) {
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "s.db")
	st, err := store.Open(ctx, db)
	require.NoError(t, err)
	for _, id := range []string{"web-a", "web-b"} {
		require.NoError(t, st.BeginRun(ctx, store.Run{ID: id, Kind: "web", StartedAt: time.Now()}))
	}
	for i := range 5 {
		require.NoError(t, st.WriteResult(ctx, []string{"web-a", "web-b"}[i%2], web.Kind, fmt.Sprint(i), time.Now(),
			map[string]any{"status": "ok", "profile": "4g", "transport": "doq", "page": "wiki", "plt_ms": 100 + i}))
	}
	st.Close()
	code, before, errOut := run("report", "--store", db, "--json")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, before, `"page loads"`)

	st, err = store.Open(ctx, db)
	require.NoError(t, err)
	_, err = st.DB().ExecContext(ctx, `DELETE FROM summaries`)
	require.NoError(t, err)
	st.Close()
	code, out, errOut := run("store", "seal", "--store", db)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "; the points of 5 results of 2 runs kept; ")
	code, after, errOut := run("report", "--store", db, "--json")
	require.Equal(t, 0, code, errOut)
	require.JSONEq(t, before, after)
	code, out, errOut = run("store", "seal", "--store", db)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "; the points of 0 results of 0 runs kept; ")
}

// TestStoreSeal: store stats says how many DNS samples are in no block
// (written before schema 15, or copied in SQL) and prints the command
// that seals them, which works as pasted; a report after it is the
// report before, and a store that is not there is one line.
func TestStoreSeal(t *testing.T) {
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "s.db")
	st, err := store.Open(ctx, db)
	require.NoError(t, err)
	require.NoError(t, st.BeginRun(ctx, store.Run{ID: "m", Kind: "measure", StartedAt: time.Now()}))
	for i := range 5 {
		x := &measure.Sample{Task: measure.Task{URL: "udp://192.0.2.1:53", Target: "192.0.2.1", Transport: "udp", Condition: "fresh", Rep: i},
			Start: time.Now(), Status: transport.StatusOK,
			Measure: &transport.Record{Status: transport.StatusOK, Rcode: "NOERROR", Timing: transport.Timing{TotalMs: float64(10 + i)}}}
		require.NoError(t, st.Write(ctx, "m", x))
	}
	require.NoError(t, st.Close()) // seals what it wrote
	code, _, errOut := run("store", "stats", "--store", db)
	require.Equal(t, 0, code, errOut)
	require.Empty(t, errOut, "all sealed: no hint")
	code, before, errOut := run("report", "--store", db, "--json")
	require.Equal(t, 0, code, errOut)

	st, err = store.Open(ctx, db)
	require.NoError(t, err)
	_, err = st.DB().ExecContext(ctx, `DELETE FROM sample_blocks`)
	require.NoError(t, err)
	_, err = st.DB().ExecContext(ctx, `DELETE FROM summaries`) // the next report reads the blocks
	require.NoError(t, err)
	st.Close()
	code, _, errOut = run("store", "stats", "--store", db)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, errOut, "5 DNS samples are in no block")
	out := runTheHint(t, errOut)
	require.Contains(t, out, "doxlab store seal: 5 samples in 1 block; ")
	require.Contains(t, out, "; the cells of 5 samples of 1 run; ", "kept for the first report")
	code, after, errOut := run("report", "--store", db, "--json")
	require.Equal(t, 0, code, errOut)
	require.JSONEq(t, before, after)
	code, out, errOut = run("store", "seal", "--store", db)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "; the cells of 0 samples of 0 runs; ", "kept once")

	// A block that does not decode: one line, and the command that
	// makes the blocks anew, which works as pasted.
	st, err = store.Open(ctx, db)
	require.NoError(t, err)
	_, err = st.DB().ExecContext(ctx, `UPDATE sample_blocks SET z = x'04ff'`)
	require.NoError(t, err)
	_, err = st.DB().ExecContext(ctx, `DELETE FROM summaries`)
	require.NoError(t, err)
	st.Close()
	code, _, errOut = run("report", "--store", db, "--json")
	require.Equal(t, 1, code)
	require.Equal(t, 1, strings.Count(strings.TrimSpace(errOut), "\n")+1, errOut)
	require.Contains(t, errOut, "does not decode")
	runTheHint(t, errOut)
	code, after, errOut = run("report", "--store", db, "--json")
	require.Equal(t, 0, code, errOut)
	require.JSONEq(t, before, after)

	code, _, errOut = run("store", "seal", "--store", filepath.Join(t.TempDir(), "none.db"))
	require.NotEqual(t, 0, code)
	require.Equal(t, 1, strings.Count(strings.TrimSpace(errOut), "\n")+1, errOut)
}
