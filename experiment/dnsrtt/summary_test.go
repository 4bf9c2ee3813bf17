package dnsrtt

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/gob"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/stats"
	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/doxlab/doxlab/measure"
	"github.com/doxlab/doxlab/store"
	"github.com/doxlab/doxlab/testbed"
	"github.com/doxlab/doxlab/transport"
)

// writeRuns stores two runs of n samples each over a few cells, one on
// the fiber profile; some refused, timed out or cancelled. One cell of
// the first run holds more than stats.ExactLimit values, so that its
// summary keeps a sketch.
func writeRuns(t *testing.T, st *store.Store, n int) []string {
	t.Helper()
	ctx := context.Background()
	fiber, err := testbed.LookupProfile("fiber")
	require.NoError(t, err)
	spec, err := json.Marshal(map[string]any{"profile": fiber})
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(1, 2))
	ids := []string{"run-a", "run-b"}
	for i, id := range ids {
		run := store.Run{ID: id, Kind: "measure", StartedAt: time.Date(2026, 11, 29, 12, i, 0, 0, time.UTC), DoxlabVersion: "test"}
		if i == 0 {
			run.Spec = spec
		}
		require.NoError(t, st.BeginRun(ctx, run))
		require.NoError(t, st.InTx(ctx, func(tx *sql.Tx) error {
			for rep := range n {
				x := sampleOf(rng, rep, i == 0 && rep < stats.ExactLimit+1000)
				x.Start = x.Start.AddDate(0, 0, 7*i) // a week apart: the first archived alone
				if _, err := st.WriteOnce(ctx, tx, id, x); err != nil {
					return err
				}
			}
			return nil
		}))
	}
	return ids
}

// runsStore is a store of writeRuns' two runs, the larger cell past
// stats.ExactLimit, and their profiles; closed when the test ends.
func runsStore(t *testing.T) (*store.Store, []string, map[string]testbed.Profile) {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "s.db"))
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	ids := writeRuns(t, st, stats.ExactLimit+1200)
	profiles, err := StoredProfiles(context.Background(), st)
	require.NoError(t, err)
	return st, ids, profiles
}

// sampleOf is one sample; big puts it in the cell that outgrows the
// exact limit.
func sampleOf(rng *rand.Rand, rep int, big bool) *measure.Sample {
	target, tr := fmt.Sprintf("192.0.2.%d", rng.IntN(3)), []string{"udp", "doq"}[rng.IntN(2)]
	if big {
		target, tr = "192.0.2.9", "doh3"
	}
	total := 5 + 40*rng.Float64()
	rec := &transport.Record{Status: transport.StatusOK, Rcode: "NOERROR", Timing: transport.Timing{TotalMs: total, QueryMs: total / 2},
		Bytes: transport.Counts{Sent: 60, Received: 120}, Packets: transport.Counts{Sent: 1, Received: 1}}
	if rng.IntN(3) == 0 {
		rec.Timing.WireMs = total - rng.Float64()
	}
	x := &measure.Sample{Task: measure.Task{URL: "udp://" + target + ":53", Target: target, Transport: tr, Condition: "fresh", Rep: rep},
		Start: time.Date(2026, 11, 29, 12, 0, 0, rep, time.UTC), Measure: rec, Status: transport.StatusOK,
		Probe: &measure.ProbeResult{Kind: "udp", RTTMs: 4 + rng.Float64()}, RTTs: &measure.InRTTs{Handshake: rng.Float64(), Resolve: 1, Total: total / 4}}
	switch rng.IntN(20) {
	case 0:
		rec.Rcode = "REFUSED"
	case 1:
		rec.Status, rec.Rcode, x.Status, x.RTTs = transport.StatusTimeout, "", transport.StatusTimeout, nil
	case 2:
		rec.Status, x.Status = transport.StatusCanceled, transport.StatusCanceled
	}
	return x
}

// sameSamples says a and b are the same report's input: the same cells,
// counts and failures, and distributions of the same values (exact or
// binned alike).
func sameSamples(t *testing.T, want, got *Samples, msg string) {
	t.Helper()
	require.Equal(t, []int{want.Skipped, want.Folded, want.Canceled}, []int{got.Skipped, got.Folded, got.Canceled}, msg)
	require.Len(t, got.Groups, len(want.Groups), msg)
	byKey := map[cellKey]*Group{}
	for _, g := range got.Groups {
		byKey[cellKey{g.Profile, g.Vantage, g.Target, g.Transport, g.Condition}] = g
	}
	for _, w := range want.Groups {
		g := byKey[cellKey{w.Profile, w.Vantage, w.Target, w.Transport, w.Condition}]
		require.NotNil(t, g, "%s: cell %+v", msg, w)
		require.Equal(t, []int{w.N, w.Answered}, []int{g.N, g.Answered}, msg)
		require.Equal(t, w.Failed, g.Failed, msg)
		require.Equal(t, w.Link, g.Link, msg)
		for i, d := range w.dists() {
			e := g.dists()[i]
			require.Equal(t, []any{d.N(), d.Exact()}, []any{e.N(), e.Exact()}, "%s: %s %s distribution %d", msg, w.Target, w.Transport, i)
			if d.N() > 0 {
				require.Equal(t, d.Summary(), e.Summary(), "%s: %s %s distribution %d", msg, w.Target, w.Transport, i)
			}
		}
	}
	require.Equal(t, fmt.Sprint(want.Stats()), fmt.Sprint(got.Stats()), msg) // NaN where a cell has no value
}

// TestSummariesAreTheScan: a report reads a run's samples once, keeps its
// cells as the run's summary, and reads the summary after that: the
// second report's input is the first's, and both are the one pass over
// every sample (a sketched cell too). A sample added to a run is read
// on from its summary and leaves the other's as it was, unless the
// summary misses one numbered below its last (the run is read whole); a
// summary of other cells (another projection), or one that does not
// decode, is read again and replaced; a run prefix reads only its
// runs' summaries.
func TestSummariesAreTheScan(t *testing.T) {
	ctx := context.Background()
	st, ids, profiles := runsStore(t)
	scanned := func(f store.Filter) *Samples {
		cs, err := scanCells(ctx, st, f, profiles, measure.DefaultAnswers())
		require.NoError(t, err)
		return cs.samples()
	}
	load := func(f store.Filter) *Samples {
		s, err := LoadSamples(ctx, st, f)
		require.NoError(t, err)
		return s
	}
	kind := summaryKind(measure.DefaultAnswers())
	kept := func() map[string]store.Summary {
		m, err := st.Summaries(ctx, kind)
		require.NoError(t, err)
		return m
	}

	want := scanned(store.Filter{})
	sketched := false
	for _, g := range want.Groups {
		sketched = sketched || g.Target == "192.0.2.9" && !g.RTT.Exact()
	}
	require.True(t, sketched, "the big cell is sketched")
	require.Empty(t, kept())
	sameSamples(t, want, load(store.Filter{}), "reading the samples")
	first := kept()
	require.Len(t, first, 2, "each run's cells kept")
	sameSamples(t, want, load(store.Filter{}), "from the summaries")

	// The summaries are what the second report read: one changed in
	// place shows.
	cs, ok, err := decodeCells(first[ids[1]].Data, ids[1], profiles, measure.DefaultAnswers())
	require.NoError(t, err)
	require.True(t, ok)
	cs.order[0].N += 1000
	b, err := cs.encode()
	require.NoError(t, err)
	require.NoError(t, st.PutSummary(ctx, kind, ids[1], store.Summary{Held: first[ids[1]].Held, Data: b}))
	n, _ := load(store.Filter{}).Count()
	m, _ := want.Count()
	require.Equal(t, m+1000, n, "the report merges the summary, not the samples")

	// A sample added: its run is read again, the other's summary kept.
	require.NoError(t, st.Write(ctx, ids[0], sampleOf(rand.New(rand.NewPCG(9, 9)), 1<<20, false)))
	require.NoError(t, st.PutSummary(ctx, kind, ids[1], first[ids[1]]))
	want = scanned(store.Filter{})
	sameSamples(t, want, load(store.Filter{}), "after a sample was added")
	now := kept()
	require.Equal(t, first[ids[1]], now[ids[1]], "the other run's summary untouched")
	require.Equal(t, first[ids[0]].Samples+1, now[ids[0]].Samples, "made anew with the sample")

	// A campaign's next round: what the run holds above its summary's
	// last is read, not the run. A summary changed in place, then the
	// run grown: the change stays.
	grown := kept()[ids[0]]
	cs, ok, err = decodeCells(grown.Data, ids[0], profiles, measure.DefaultAnswers())
	require.NoError(t, err)
	require.True(t, ok)
	cs.order[0].N += 1000
	b, err = cs.encode()
	require.NoError(t, err)
	require.NoError(t, st.PutSummary(ctx, kind, ids[0], store.Summary{Held: grown.Held, Data: b}))
	require.NoError(t, st.Write(ctx, ids[0], sampleOf(rand.New(rand.NewPCG(9, 10)), 1<<20+1, false)))
	want = scanned(store.Filter{})
	n, _ = load(store.Filter{}).Count()
	m, _ = want.Count()
	require.Equal(t, m+1000, n, "read on from the summary")
	require.Equal(t, grown.Samples+1, kept()[ids[0]].Samples)
	// The same through the blocks: the run sealed where its summary
	// ends, its next round sealed after them, read on from them.
	require.NoError(t, st.Seal(ctx, ids[0]))
	for i := range 3 {
		require.NoError(t, st.Write(ctx, ids[0], sampleOf(rand.New(rand.NewPCG(9, 11)), 1<<20+2+i, false)))
	}
	require.NoError(t, st.Seal(ctx, ids[0]))
	want = scanned(store.Filter{})
	n, _ = load(store.Filter{}).Count()
	m, _ = want.Count()
	require.Equal(t, m+1000, n, "read on from the summary, by the blocks")
	require.Equal(t, grown.Samples+4, kept()[ids[0]].Samples)
	// A sample numbered below the summary's last that it does not count
	// (on PostgreSQL, a lower number committed late): the run read whole.
	late := kept()[ids[0]]
	late.Samples--
	require.NoError(t, st.PutSummary(ctx, kind, ids[0], late))
	sameSamples(t, want, load(store.Filter{}), "a late commit: read whole")
	now = kept()

	// A summary of other cells (another projection), and one that does not decode.
	other := now[ids[0]]
	var w summaryWire
	require.NoError(t, gobDecode(other.Data, &w))
	w.Made = "dns cells: encoding 1, projection 0, max-cells 50000"
	other.Data = gobEncode(t, &w)
	require.NoError(t, st.PutSummary(ctx, kind, ids[0], other))
	require.NoError(t, st.PutSummary(ctx, kind, ids[1], store.Summary{Held: now[ids[1]].Held, Data: []byte("not gob")}))
	sameSamples(t, want, load(store.Filter{}), "summaries of other cells")
	for id, m := range kept() {
		_, ok, err := decodeCells(m.Data, id, profiles, measure.DefaultAnswers())
		require.NoError(t, err)
		require.True(t, ok, "%s: made anew", id)
		require.Equal(t, now[id].Held, m.Held)
	}

	// Another bound on the cells held apart: the summaries, folded under
	// the other, are read again (a resolver past a small bound would
	// stay folded under a large one).
	was := MaxCells
	MaxCells = 4
	stale := kept()[ids[0]]
	require.NoError(t, st.PutSummary(ctx, kind, ids[0], store.Summary{Held: stale.Held, Data: []byte("not gob")}))
	small := load(store.Filter{}) // the run read whole, its summary made anew, folded
	require.Positive(t, small.Folded)
	MaxCells = was
	sameSamples(t, want, load(store.Filter{}), "the bound back: read again")
	require.Zero(t, load(store.Filter{}).Folded)

	// A prefix: one run, from its summary.
	sameSamples(t, scanned(store.Filter{RunPrefix: "run-b"}), load(store.Filter{RunPrefix: "run-b"}), "one run")
	// Other rcodes taken as answers: summaries of their own.
	okr := store.Filter{OKRcodes: []string{"NOERROR", "REFUSED"}}
	answers, err := measure.ParseAnswers(okr.OKRcodes)
	require.NoError(t, err)
	cs, err = scanCells(ctx, st, okr, profiles, answers)
	require.NoError(t, err)
	sameSamples(t, cs.samples(), load(okr), "REFUSED answers")
	m2, err := st.Summaries(ctx, summaryKind(answers))
	require.NoError(t, err)
	require.Len(t, m2, 2)
}

func gobDecode(b []byte, v any) error { return gob.NewDecoder(bytes.NewReader(b)).Decode(v) }

func gobEncode(t *testing.T, v any) []byte {
	var buf bytes.Buffer
	require.NoError(t, gob.NewEncoder(&buf).Encode(v))
	return buf.Bytes()
}

// cachedRuns is a store of writeRuns' two runs of 3,000 samples each,
// closed when the test ends, and the user's cache of the test's own
// (DOXLAB_CACHE) that its datasets' files' cells are kept in.
func cachedRuns(t *testing.T) (st *store.Store, cache string, ids []string) {
	t.Helper()
	cache = t.TempDir()
	t.Setenv("DOXLAB_CACHE", cache)
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "s.db"))
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	return st, cache, writeRuns(t, st, 3000)
}

// TestDatasetSummariesAreTheScan: a dataset's files are summarized under
// their digests in the user's cache: the report of a dataset alone, and
// of a store with its older rounds archived to one, is the one pass over
// every sample, from the samples the first time and from the summaries
// after; a summary changed in place is what the report merges.
func TestDatasetSummariesAreTheScan(t *testing.T) {
	ctx := context.Background()
	st, cache, ids := cachedRuns(t)
	profiles, err := StoredProfiles(ctx, st)
	require.NoError(t, err)
	want, err := scanCells(ctx, st, store.Filter{}, profiles, measure.DefaultAnswers())
	require.NoError(t, err)

	// The first run's week archived: the store keeps the second's. The
	// dataset's own cells left out, as a doxlab before them wrote it.
	dir := filepath.Join(t.TempDir(), "ds")
	_, err = st.Archive(ctx, dir, time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	require.NoError(t, err)
	withoutTable(t, dir, cellsTable)
	d, err := store.OpenDataset(ctx, dir)
	require.NoError(t, err)
	require.NoError(t, st.Attach(ctx, d))
	files, err := st.DatasetSamples(ctx, store.Filter{})
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		require.Equal(t, ids[0], f.Run, "only the first run archived")
	}
	for _, pass := range []string{"store and dataset, read", "store and dataset, from summaries"} {
		got, err := LoadSamples(ctx, st, store.Filter{})
		require.NoError(t, err)
		sameSamples(t, want.samples(), got, pass)
	}
	kept, err := os.ReadDir(cache)
	require.NoError(t, err)
	require.Len(t, kept, len(files), "a summary per file")
	m, err := st.Summaries(ctx, summaryKind(measure.DefaultAnswers()))
	require.NoError(t, err)
	require.Len(t, m, 1, "the store's run summarized in the store")

	// The dataset alone, as report --dataset reads it: an empty store.
	empty, err := store.Open(ctx, filepath.Join(t.TempDir(), "empty.db"))
	require.NoError(t, err)
	defer empty.Close()
	require.NoError(t, empty.Attach(ctx, d))
	alone, err := scanCells(ctx, empty, store.Filter{}, profiles, measure.DefaultAnswers())
	require.NoError(t, err)
	got, err := LoadSamples(ctx, empty, store.Filter{})
	require.NoError(t, err)
	sameSamples(t, alone.samples(), got, "the dataset alone, from its summaries")

	// A summary changed in place shows: the report merged it.
	p := filepath.Join(cache, kept[0].Name())
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	cs, ok, err := decodeCells(b, ids[0], profiles, measure.DefaultAnswers())
	require.NoError(t, err)
	require.True(t, ok)
	cs.order[0].N++
	cs.skipped-- // as many rows as the file holds, or it is read again
	b, err = cs.encode()
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(p, b, 0o644))
	got, err = LoadSamples(ctx, empty, store.Filter{})
	require.NoError(t, err)
	n, _ := got.Count()
	m2, _ := alone.samples().Count()
	require.Equal(t, m2+1, n)

	t.Setenv("DOXLAB_CACHE", "off")
	got, err = LoadSamples(ctx, empty, store.Filter{})
	require.NoError(t, err)
	sameSamples(t, alone.samples(), got, "no cache: read")
}

// withoutTable takes table's files out of the manifest of the dataset
// in dir.
func withoutTable(t *testing.T, dir, table string) {
	t.Helper()
	p := filepath.Join(dir, "_manifest.json")
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	var m store.Manifest
	require.NoError(t, json.Unmarshal(b, &m))
	n := len(m.Files)
	m.Files = slices.DeleteFunc(m.Files, func(f store.DatasetFile) bool { return f.Table == table })
	require.Less(t, len(m.Files), n, "the dataset held %s", table)
	b, err = json.Marshal(m)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(p, b, 0o644))
}

// TestDatasetCellsAreTheScan: a dataset carries each samples file's
// cells, made as the export wrote the file, so the report of a dataset
// alone is the one pass over its samples without reading them (nothing
// is read into the user's cache); a report taking other answers reads
// the samples (and caches their cells); a cells file changed since it
// was written fails the report in a line naming it.
func TestDatasetCellsAreTheScan(t *testing.T) {
	ctx := context.Background()
	st, cache, _ := cachedRuns(t)
	dir := filepath.Join(t.TempDir(), "ds")
	_, err := st.ExportDataset(ctx, dir, store.Filter{}, time.Time{})
	require.NoError(t, err)
	d, err := store.OpenDataset(ctx, dir)
	require.NoError(t, err)
	empty, err := store.Open(ctx, filepath.Join(t.TempDir(), "empty.db"))
	require.NoError(t, err)
	defer empty.Close()
	require.NoError(t, empty.Attach(ctx, d))
	profiles, err := StoredProfiles(ctx, empty)
	require.NoError(t, err)
	exported, err := StoredProfiles(ctx, st)
	require.NoError(t, err)
	require.NotEmpty(t, profiles)
	require.Equal(t, exported, profiles, "the runs' profiles, from the dataset's runs")

	for _, rcodes := range [][]string{nil, {"NOERROR", "NXDOMAIN", "SERVFAIL"}} {
		f := store.Filter{OKRcodes: rcodes}
		answers, err := measure.ParseAnswers(rcodes)
		require.NoError(t, err)
		want, err := scanCells(ctx, empty, f, profiles, answers)
		require.NoError(t, err)
		got, err := LoadSamples(ctx, empty, f)
		require.NoError(t, err)
		sameSamples(t, want.samples(), got, fmt.Sprint(rcodes))
		kept, err := os.ReadDir(cache)
		require.NoError(t, err)
		if rcodes == nil {
			require.Empty(t, kept, "the dataset's cells merged, no sample read")
		} else {
			require.NotEmpty(t, kept, "other answers: the samples read, their cells kept")
		}
	}

	var cf store.DatasetFile
	for _, f := range d.Manifest().Files {
		if f.Table == cellsTable {
			cf = f
		}
	}
	require.Equal(t, cellsFormat(summaryKind(measure.DefaultAnswers())), cf.Format)
	p := filepath.Join(dir, filepath.FromSlash(cf.Path))
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	b[len(b)/2] ^= 1
	require.NoError(t, os.WriteFile(p, b, 0o644))
	_, err = LoadSamples(ctx, empty, store.Filter{})
	require.ErrorContains(t, err, cf.Path+": changed since it was written")
}

// TestPostgresRoleWithoutSummaries: a role granted the samples and not
// the summaries (as before schema 12) reports as it did, by reading
// every sample, and keeps none.
func TestPostgresRoleWithoutSummaries(t *testing.T) {
	ctx := context.Background()
	dsn := testutil.StartPostgres(t)
	st, err := store.Open(ctx, dsn)
	require.NoError(t, err)
	defer st.Close()
	writeRuns(t, st, 300)
	_, err = st.DB().ExecContext(ctx, `CREATE ROLE reader LOGIN; GRANT SELECT ON runs, schema_version, sample_cols, samples, results TO reader`)
	require.NoError(t, err)
	ro, err := store.Open(ctx, strings.Replace(dsn, "doxlab@", "reader@", 1))
	require.NoError(t, err)
	defer ro.Close()
	profiles, err := StoredProfiles(ctx, st)
	require.NoError(t, err)
	want, err := scanCells(ctx, st, store.Filter{}, profiles, measure.DefaultAnswers())
	require.NoError(t, err)
	got, err := LoadSamples(ctx, ro, store.Filter{})
	require.NoError(t, err)
	sameSamples(t, want.samples(), got, "a role without the summaries")
	m, err := st.Summaries(ctx, summaryKind(measure.DefaultAnswers()))
	require.NoError(t, err)
	require.Empty(t, m, "none kept")
}

// TestKeepCells: what store seal keeps of the DNS samples is what the
// first report would have: every run's cells, as their summaries, from
// which a report reads the one pass over every sample; kept once.
func TestKeepCells(t *testing.T) {
	ctx := context.Background()
	st, ids, profiles := runsStore(t)
	cs, err := scanCells(ctx, st, store.Filter{}, profiles, measure.DefaultAnswers())
	require.NoError(t, err)
	want := cs.samples()

	runs, samples, err := KeepCells(ctx, st, store.Filter{Superseded: true})
	require.NoError(t, err)
	require.Equal(t, len(ids), runs)
	require.Equal(t, cs.rows(), samples)
	sums, err := st.Summaries(ctx, summaryKind(measure.DefaultAnswers()))
	require.NoError(t, err)
	require.Len(t, sums, len(ids))
	// Each summary is what the report reads: changed in place, it shows.
	x, ok, err := decodeCells(sums[ids[0]].Data, ids[0], profiles, measure.DefaultAnswers())
	require.NoError(t, err)
	require.True(t, ok)
	sameSamples(t, want, loadOf(t, st), "from the summaries kept")
	x.order[0].N += 7
	b, err := x.encode()
	require.NoError(t, err)
	require.NoError(t, st.PutSummary(ctx, summaryKind(measure.DefaultAnswers()), ids[0], store.Summary{Held: sums[ids[0]].Held, Data: b}))
	n, _ := loadOf(t, st).Count()
	m, _ := want.Count()
	require.Equal(t, m+7, n, "the report read the summary, not the samples")

	runs, samples, err = KeepCells(ctx, st, store.Filter{Superseded: true})
	require.NoError(t, err)
	require.Zero(t, runs+int(samples), "kept once")
}

func loadOf(t *testing.T, st *store.Store) *Samples {
	t.Helper()
	s, err := LoadSamples(context.Background(), st, store.Filter{})
	require.NoError(t, err)
	return s
}
