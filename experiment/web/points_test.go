package web

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/browser"
	"github.com/doxlab/doxlab/campaign"
	"github.com/doxlab/doxlab/experiment"
	"github.com/doxlab/doxlab/experiment/internal/pages"
	"github.com/doxlab/doxlab/server"
	"github.com/doxlab/doxlab/store"
)

// writeWebRuns stores two web runs of loads over both engines, two
// transports and both H3 modes, a week apart, some failed; it returns
// every load stored, in order.
func writeWebRuns(t *testing.T, st *store.Store) []*pages.Sample {
	t.Helper()
	ctx := context.Background()
	var all []*pages.Sample
	for i, id := range []string{"web-a", "web-b"} {
		start := time.Date(2026, 11, 22+7*i, 12, 0, 0, 0, time.UTC)
		require.NoError(t, st.BeginRun(ctx, store.Run{ID: id, Kind: "web", StartedAt: start, DoxlabVersion: "test"}))
		for rep := range 5 {
			for _, engine := range []string{"", pages.EngineDoxlab} {
				for _, tr := range []string{"udp", "doq"} {
					for _, h3 := range []string{"0rtt", "1rtt"} {
						x := webLoad(engine, tr, h3, rep, start.Add(time.Duration(len(all))*time.Second))
						x.PLTMs += float64(i*13+rep*7%11) + map[string]float64{"udp": 0, "doq": 25}[tr]
						if rep == 3 && tr == "doq" && h3 == "0rtt" {
							x.Status, x.Error = "timeout", "the page did not load"
						}
						require.NoError(t, WriteLoad(ctx, st, id, x))
						all = append(all, x)
					}
				}
			}
		}
	}
	return all
}

// webLoad is one load of o5 on fiber, its DNS through the stub.
func webLoad(engine, tr, h3 string, rep int, start time.Time) *pages.Sample {
	return &pages.Sample{Task: pages.Task{Profile: "fiber", Page: "o5", Transport: tr, StubState: "cold", H3: h3, DNSMode: "stub", Engine: engine, Rep: rep},
		Start: start, Status: "ok", PLTMs: 200, FCPMs: 120, DNSMs: 9, H3Used0RTT: h3 == "0rtt", H3Resumed: h3 == "0rtt",
		H3Conn: &server.Record{TokenUsed: rep%2 == 0}, Lookups: 5, LookupsBlocking: 4, DNSBlockingMs: 6, DNSTotalMs: 11,
		Origins: []pages.OriginFacts{
			{Host: "www.o5.doxlab.test", Requests: 2, Protocol: "h3", Lookup: pages.LookupUpstream, Conns: 1},
			{Host: "fonts.doxlab.test", Requests: 1, Protocol: "h3", Lookup: pages.LookupNone},
		},
		ConnsPerOrigin: map[string]int{"www.o5.doxlab.test": 1}}
}

// tempStore is a store of the test's own, closed after it.
func tempStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "s.db"))
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	return st
}

// report is what the report shows of the web runs f selects: the text
// table, which holds every cell's statistics and the engines' fidelity.
func report(t *testing.T, st *store.Store, f store.Filter) string {
	t.Helper()
	r, err := (&Web{}).LoadFiltered(context.Background(), st, f)
	require.NoError(t, err)
	var b strings.Builder
	require.NoError(t, r.WriteTable(&b))
	n, _ := r.Count()
	return fmt.Sprintf("%d loads\n%s", n, b.String())
}

// scan is report of samples read whole, as before there were summaries.
func scan(t *testing.T, samples []*pages.Sample) string {
	t.Helper()
	var b strings.Builder
	require.NoError(t, Results{Lab: LoadsOfSamples(samples...)}.WriteTable(&b))
	return fmt.Sprintf("%d loads\n%s", len(samples), b.String())
}

// TestLoadSummariesAreTheScan: the first report of a store reads its
// loads and keeps each run's points; a later report decodes the points
// (a summary changed in place is what it shows) and is the report of
// the loads read whole; a run with a load added, a summary another
// build made and one that does not decode are read again.
func TestLoadSummariesAreTheScan(t *testing.T) {
	ctx := context.Background()
	st := tempStore(t)
	all := writeWebRuns(t, st)
	want := scan(t, all)
	require.Contains(t, want, "doxlab's page loader against Chromium")

	require.Equal(t, want, report(t, st, store.Filter{}), "read")
	sums, err := st.Summaries(ctx, labPoints.Summary)
	require.NoError(t, err)
	require.Len(t, sums, 2, "a summary per run")
	require.Equal(t, int64(40), sums["web-a"].Samples)
	require.Equal(t, want, report(t, st, store.Filter{}), "from summaries")
	require.Equal(t, scan(t, all[:40]), report(t, st, store.Filter{RunPrefix: "web-a"}), "a prefix's runs")

	// What the report merges is the summary: one changed in place shows.
	changed := func(run string, plt float64) {
		t.Helper()
		ps, ok := labPoints.Unpack(sums[run].Data)
		require.True(t, ok)
		for i := range ps {
			ps[i].PLT = plt
		}
		b, err := labPoints.Pack(ps)
		require.NoError(t, err)
		require.NoError(t, st.PutSummary(ctx, labPoints.Summary, run, store.Summary{Held: sums[run].Held, Data: b}))
	}
	changed("web-a", 1e6)
	require.Contains(t, report(t, st, store.Filter{}), "1000000.0", "the changed summary")

	// A load added to web-a after its last: read on, the summary's kept
	// (changed) points with it; web-b's summary as it was.
	changed("web-b", 2e6)
	extra := webLoad("", "udp", "1rtt", 9, time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC))
	require.NoError(t, WriteLoad(ctx, st, "web-a", extra))
	got := report(t, st, store.Filter{})
	require.Contains(t, got, "1000000.0", "web-a read on")
	require.Contains(t, got, "2000000.0", "web-b from its summary")
	require.Contains(t, got, "81 loads")

	// One stored late, started before web-a's last: web-a read whole.
	late := webLoad("", "udp", "1rtt", 10, time.Date(2026, 11, 22, 11, 0, 0, 0, time.UTC))
	require.NoError(t, WriteLoad(ctx, st, "web-a", late))
	got = report(t, st, store.Filter{})
	require.NotContains(t, got, "1000000.0", "web-a read whole")
	require.Contains(t, got, "2000000.0", "web-b from its summary")

	// A summary is of its points' Portable version, not of the build
	// that made it (a worker's, or the analyst's before an upgrade).
	sums, err = st.Summaries(ctx, labPoints.Summary)
	require.NoError(t, err)
	require.Equal(t, int64(42), sums["web-a"].Samples)
	head, points, _ := bytes.Cut(sums["web-a"].Data, []byte{0})
	require.Equal(t, pages.PointsPortable, string(head))

	// One of other points (another projection, or the build-headed
	// summaries of doxlab before), and one that does not decode, are
	// read again and replaced.
	other := append([]byte("v0.0.0 another-build\x00"), points...)
	require.NoError(t, st.PutSummary(ctx, labPoints.Summary, "web-a", store.Summary{Held: sums["web-a"].Held, Data: other}))
	require.NoError(t, st.PutSummary(ctx, labPoints.Summary, "web-b", store.Summary{Held: sums["web-b"].Held, Data: append(bytes.Clone(sums["web-b"].Data[:bytes.IndexByte(sums["web-b"].Data, 0)+1]), "garbage"...)}))
	all = append([]*pages.Sample{late}, append(all[:40:40], append([]*pages.Sample{extra}, all[40:]...)...)...)
	want = scan(t, all)
	require.Equal(t, want, report(t, st, store.Filter{}), "read again")
	require.Equal(t, want, report(t, st, store.Filter{}), "from the summaries made anew")
	sums, err = st.Summaries(ctx, labPoints.Summary)
	require.NoError(t, err)
	for _, run := range []string{"web-a", "web-b"} {
		_, ok := labPoints.Unpack(sums[run].Data)
		require.True(t, ok, "%s's summary made anew", run)
	}
}

// TestLoadSummariesBesideADataset: with the first run archived and the
// dataset attached, the report counts each load once, the archived ones
// read from the dataset, and equals the report before the archive.
func TestLoadSummariesBesideADataset(t *testing.T) {
	ctx := context.Background()
	st := tempStore(t)
	all := writeWebRuns(t, st)
	want := scan(t, all)
	require.Equal(t, want, report(t, st, store.Filter{}))

	dir := filepath.Join(t.TempDir(), "ds")
	_, err := st.Archive(ctx, dir, time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC))
	require.NoError(t, err)
	held, err := st.RunResults(ctx, Kind)
	require.NoError(t, err)
	require.Len(t, held, 1, "web-a's loads moved to the dataset")
	require.Equal(t, int64(40), held["web-b"].Samples)
	require.Equal(t, all[len(all)-1].Start.UnixNano(), held["web-b"].Last, "the latest start")
	d, err := store.OpenDataset(ctx, dir)
	require.NoError(t, err)
	require.NoError(t, st.Attach(ctx, d))
	for _, pass := range []string{"read", "from summaries"} {
		got := report(t, st, store.Filter{})
		// The archived run's loads come first: the cells' loads in
		// another order give the same statistics.
		require.Equal(t, want, got, pass)
	}

	// The dataset keeps web-a's points beside its loads, as any doxlab of
	// this PointsPortable makes them: what the report read, not the loads
	// (emptied, they are not read), and nothing is kept in the cache.
	// A dataset of points under another PointsPortable, or none (as a
	// doxlab before them wrote), is read by its loads, each file's points
	// kept in the user's cache; a points file changed since it was
	// written is said to be.
	plain := withoutPoints(t, dir)
	m := readManifest(t, dir)
	var points []store.DatasetFile
	for _, f := range m.Files {
		if f.Table == "points" {
			points = append(points, f)
		}
	}
	require.Len(t, points, 1, "web-a's one file of loads")
	require.Equal(t, pages.PointsPortable, points[0].Format)
	require.Equal(t, int64(40), points[0].Rows)
	for _, f := range m.Files {
		if f.Table == store.TableResults || f.Table == store.TableBriefs {
			require.NoError(t, os.WriteFile(filepath.Join(dir, filepath.FromSlash(f.Path)), []byte("emptied"), 0o644))
		}
	}
	require.Equal(t, want, report(t, attached(t, st, dir), store.Filter{}), "web-a's points, not its loads")
	cached, err := filepath.Glob(filepath.Join(experiment.CellCache(), "*.points"))
	require.NoError(t, err)
	require.Empty(t, cached)
	other := editManifest(t, dir, func(f *store.DatasetFile) { f.Format = strings.Replace(f.Format, "projection", "projection 0 then", 1) })
	_, err = (&Web{}).LoadFiltered(ctx, attached(t, st, other), store.Filter{})
	require.ErrorContains(t, err, "changed since it was written", "points of another projection: the loads read")
	require.NoError(t, os.WriteFile(filepath.Join(dir, filepath.FromSlash(points[0].Path)), []byte("damaged"), 0o644))
	_, err = (&Web{}).LoadFiltered(ctx, attached(t, st, dir), store.Filter{})
	require.ErrorContains(t, err, points[0].Path+": changed since it was written")

	require.Equal(t, want, report(t, attached(t, st, plain), store.Filter{}))
	cached, err = filepath.Glob(filepath.Join(experiment.CellCache(), "*.points"))
	require.NoError(t, err)
	require.Len(t, cached, 1, "web-a's one file")
	b, err := os.ReadFile(cached[0])
	require.NoError(t, err)
	ps, ok := labPoints.Unpack(b)
	require.True(t, ok)
	require.Len(t, ps, 40)
	for i := range ps {
		ps[i].PLT = 3e6
	}
	changed, err := labPoints.Pack(ps)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(cached[0], changed, 0o644))
	require.Contains(t, report(t, st, store.Filter{}), "3000000.0", "the file's summary")
	fewer, err := labPoints.Pack(ps[:39])
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(cached[0], fewer, 0o644))
	require.Equal(t, want, report(t, st, store.Filter{}), "a summary of other rows read again")
	t.Setenv("DOXLAB_CACHE", "off")
	require.NoError(t, os.WriteFile(cached[0], changed, 0o644))
	require.Equal(t, want, report(t, st, store.Filter{}), "no cache: read")

	// The dataset alone, as report --dataset reads it.
	require.Equal(t, scan(t, all[:40]), report(t, attached(t, tempStore(t), plain), store.Filter{}))
}

// attached is st with the dataset in dir attached.
func attached(t *testing.T, st *store.Store, dir string) *store.Store {
	t.Helper()
	d, err := store.OpenDataset(context.Background(), dir)
	require.NoError(t, err)
	require.NoError(t, st.Attach(context.Background(), d))
	return st
}

func readManifest(t *testing.T, dir string) store.Manifest {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "_manifest.json"))
	require.NoError(t, err)
	var m store.Manifest
	require.NoError(t, json.Unmarshal(b, &m))
	return m
}

// editManifest copies the dataset in dir and has edit change each of
// the copy's derived files' entries (its points) in its manifest; edit
// setting a path "" leaves the file out. It returns the copy.
func editManifest(t *testing.T, dir string, edit func(f *store.DatasetFile)) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "ds")
	require.NoError(t, os.CopyFS(out, os.DirFS(dir)))
	m := readManifest(t, out)
	files := m.Files[:0]
	for _, f := range m.Files {
		if f.Format != "" {
			if edit(&f); f.Path == "" {
				continue
			}
		}
		files = append(files, f)
	}
	m.Files = files
	b, err := json.Marshal(m)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(out, "_manifest.json"), b, 0o644))
	return out
}

// withoutPoints is a copy of the dataset in dir as a doxlab before
// points in datasets wrote it.
func withoutPoints(t *testing.T, dir string) string {
	return editManifest(t, dir, func(f *store.DatasetFile) { f.Path = "" })
}

// TestDatasetRowsMiscounted: a dataset whose manifest counts its page
// loads' files wrong (damaged, or hostile: negative, none, or near the
// largest int64) makes no room for what it says and no panic: every
// load is read, the report is the loads', and no summary is kept in the
// cache under a count that is not the file's.
func TestDatasetRowsMiscounted(t *testing.T) {
	ctx := context.Background()
	st := tempStore(t)
	want := scan(t, writeWebRuns(t, st))
	dir := filepath.Join(t.TempDir(), "ds")
	_, err := st.ExportDataset(ctx, dir, store.Filter{Superseded: true}, time.Time{})
	require.NoError(t, err)
	name := filepath.Join(dir, "_manifest.json")
	b, err := os.ReadFile(name)
	require.NoError(t, err)
	for _, rows := range []int64{-5, 0, math.MaxInt64, math.MaxInt64 / 3} {
		var m store.Manifest
		require.NoError(t, json.Unmarshal(b, &m))
		for i := range m.Files {
			if m.Files[i].Kind == Kind { // its results and briefs files
				m.Files[i].Rows = rows
			}
		}
		edited, err := json.Marshal(m)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(name, edited, 0o644))
		t.Setenv("DOXLAB_CACHE", t.TempDir())
		d, err := store.OpenDataset(ctx, dir)
		require.NoError(t, err)
		alone := tempStore(t)
		require.NoError(t, alone.Attach(ctx, d))
		require.Equal(t, want, report(t, alone, store.Filter{}), "rows %d", rows)
		cached, err := filepath.Glob(filepath.Join(experiment.CellCache(), "*.points"))
		require.NoError(t, err)
		require.Empty(t, cached, "rows %d: no summary kept", rows)
	}
}

// TestBriefsReadAsRecords: page loads are stored with briefs that leave
// out what their analysis skips, found from the types it decodes into,
// and every point read from a brief is the point of its record.
func TestBriefsReadAsRecords(t *testing.T) {
	require.Equal(t, []string{"dns", "load", "warm_up", "graph", "replay", "server_queries"}, pages.SkippedPaths(pages.AnalysedType))
	wild := pages.SkippedPaths(reflect.TypeFor[wildAnalysedLoad]())
	require.Contains(t, wild, "load.dns")
	require.Contains(t, wild, "load.confinement")
	for _, p := range wild {
		require.True(t, strings.HasPrefix(p, "load."), "only the loader's record is skipped of a campaign's load: %s", p)
	}

	ctx := context.Background()
	st := tempStore(t)
	all := writeWebRuns(t, st)
	require.NoError(t, st.BeginRun(ctx, store.Run{ID: "web-c", Kind: "web", StartedAt: time.Now()}))
	for i, x := range all[:10] { // loads with what analysis skips, stored again
		x.Load = &browser.Load{URL: "https://o5.test/", Status: "ok", PLTMs: 1e6}
		x.DNS = []*server.Record{{Kind: "query", Transport: "udp", SNI: "o5.test"}}
		x.ServerQueries = map[string]int{"o5.test.": 3}
		require.NoError(t, WriteLoad(ctx, st, "web-c", x), i)
	}
	require.NoError(t, st.BeginRun(ctx, store.Run{ID: "camp", Kind: "campaign", StartedAt: time.Now()}))
	writeRound(t, st, "camp", 1, time.Now())

	// A dataset the store is exported to, read on its own.
	dir := filepath.Join(t.TempDir(), "ds")
	_, err := st.ExportDataset(ctx, dir, store.Filter{Superseded: true}, time.Time{})
	require.NoError(t, err)
	d, err := store.OpenDataset(ctx, dir)
	require.NoError(t, err)
	ds := tempStore(t)
	require.NoError(t, ds.Attach(ctx, d))

	for _, tc := range []struct {
		kind  store.Kind
		runs  []string
		point func(string, []byte) (any, error)
	}{
		{Kind, []string{"web-a", "web-b", "web-c"}, func(run string, raw []byte) (any, error) { return labPoints.Point(run, raw) }},
		{campaign.PageLoads, []string{"camp"}, func(run string, raw []byte) (any, error) { return wildPoints.Point(run, raw) }},
	} {
		files, err := ds.DatasetResults(ctx, store.Filter{}, tc.kind)
		require.NoError(t, err)
		fromFiles := func(each func(store.DatasetFile, func(string, []byte) error) error) func(context.Context, []string, store.Kind, int64, func(string, []byte) error) error {
			return func(_ context.Context, _ []string, _ store.Kind, _ int64, fn func(string, []byte) error) error {
				for _, df := range files {
					if err := each(df, fn); err != nil {
						return err
					}
				}
				return nil
			}
		}
		read := func(each func(context.Context, []string, store.Kind, int64, func(string, []byte) error) error) (points []any, octets int) {
			require.NoError(t, each(ctx, tc.runs, tc.kind, 0, func(run string, raw []byte) error {
				p, err := tc.point(run, raw)
				points, octets = append(points, p), octets+len(raw)
				return err
			}))
			return points, octets
		}
		whole, wholeOctets := read(st.StoredResults)
		briefs, briefOctets := read(st.StoredBriefs)
		require.Len(t, briefs, len(whole), tc.kind)
		for i := range whole {
			require.Equal(t, whole[i], briefs[i], "%s: load %d", tc.kind, i)
		}
		require.Less(t, briefOctets, wholeOctets, "%s: the briefs leave out what analysis skips", tc.kind)

		// The dataset's files are the day's of each run, in the order
		// they were taken: as many points, in another order.
		fileWhole, fileWholeOctets := read(fromFiles(ds.EachDatasetResult))
		fileBriefs, fileBriefOctets := read(fromFiles(ds.EachDatasetBrief))
		require.ElementsMatch(t, whole, fileWhole, "%s: the dataset's records", tc.kind)
		require.Equal(t, fileWhole, fileBriefs, "%s: the dataset's briefs", tc.kind)
		require.Equal(t, [2]int{wholeOctets, briefOctets}, [2]int{fileWholeOctets, fileBriefOctets}, "%s: what the dataset's files hold", tc.kind)
	}
}
