package web

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/campaign"
	"github.com/doxlab/doxlab/experiment/internal/pages"
	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/doxlab/doxlab/measure"
	"github.com/doxlab/doxlab/server"
	"github.com/doxlab/doxlab/store"
	"github.com/doxlab/doxlab/transport"
)

// campaignLoad is a campaign's load of a page over tr from vantage v in
// round, its FCP fcp, the stub's one upstream exchange resumed over
// DoQ, and the page's HTTPS record with an ECH config.
func campaignLoad(t *testing.T, v, tr string, round, rep int, fcp float64, start time.Time) *campaign.PageLoad {
	t.Helper()
	up := transport.ConnInfo{TLSResumed: tr != "udp", QUICVersion: map[bool]string{true: "v1"}[tr == "doq"], ALPN: map[string]string{"doq": "doq", "doh2": "h2"}[tr]}
	wl := WildLoad{Sample: &pages.Sample{Status: "ok", FCPMs: fcp, PLTMs: 2 * fcp},
		Stub: []*server.Record{
			{Upstream: &transport.Record{Status: transport.StatusOK, Conn: up}},
			{QName: "a.example.", QType: "HTTPS", Upstream: &transport.Record{Status: transport.StatusOK, Answers: []string{"a.example.\t300\tIN\tHTTPS\t1 . ech=\"AEX+\""}}},
		}}
	raw, err := json.Marshal(wl)
	require.NoError(t, err)
	return &campaign.PageLoad{Task: measure.Task{Target: "10.0.0.1", Transport: tr, Page: "https://a.example/", Round: round, Rep: rep},
		Start: start, Status: "ok", Vantage: &measure.Vantage{Name: v}, Resolver: "region=EU", FCPMs: fcp, PLTMs: 2 * fcp, Load: raw}
}

// writeRound stores a round of a campaign's loads: from two vantage
// points, over three protocols, three repetitions each.
func writeRound(t *testing.T, st *store.Store, run string, round int, start time.Time) []*campaign.PageLoad {
	t.Helper()
	var out []*campaign.PageLoad
	for _, v := range []string{"fra", "nyc"} {
		for rep := range 3 {
			for i, tr := range []string{"udp", "doq", "doh2"} {
				x := campaignLoad(t, v, tr, round, rep, 100+float64(10*i+rep+round), start.Add(time.Duration(len(out))*time.Second))
				require.NoError(t, st.WriteResult(context.Background(), run, campaign.PageLoads, x.Key(), x.Start, x))
				out = append(out, x)
			}
		}
	}
	return out
}

// firstRound is a store of the test's own holding a campaign's run,
// "camp", begun at t0, and its first round's loads.
func firstRound(t *testing.T) (*store.Store, time.Time, []*campaign.PageLoad) {
	t.Helper()
	st := tempStore(t)
	t0 := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	require.NoError(t, st.BeginRun(context.Background(), store.Run{ID: "camp", Kind: "campaign", StartedAt: t0}))
	return st, t0, writeRound(t, st, "camp", 1, t0)
}

// wildReport is the report's table of the campaigns' loads f selects.
func wildReport(t *testing.T, st *store.Store, f store.Filter) string {
	t.Helper()
	w, err := readWild(context.Background(), st, f)
	require.NoError(t, err)
	var b strings.Builder
	require.NoError(t, w.WriteTable(&b))
	return fmt.Sprintf("%d loads\n%s", len(w), b.String())
}

// wildScan is wildReport of loads decoded whole, as before points.
func wildScan(t *testing.T, loads []*campaign.PageLoad, vantage string) string {
	t.Helper()
	var w Wild
	for _, x := range loads {
		raw, err := json.Marshal(x)
		require.NoError(t, err)
		y, err := decodeWild("run", raw, false)
		require.NoError(t, err)
		if vantage == "" || y.vantage() == vantage {
			w = append(w, pointOfWild(y))
		}
	}
	var b strings.Builder
	require.NoError(t, w.WriteTable(&b))
	return fmt.Sprintf("%d loads\n%s", len(w), b.String())
}

// TestWildSummariesReadOn: a campaign's run is read once and kept as
// points; its next round is read on from the latest start (what the
// summary holds is kept: a change made to it in place stays), a load
// stored late, with an earlier start, makes the run read whole, and
// every report is the report of the loads decoded whole.
func TestWildSummariesReadOn(t *testing.T) {
	ctx := context.Background()
	st, t0, loads := firstRound(t)

	want := wildScan(t, loads, "")
	require.Contains(t, want, "doq    ")
	require.Contains(t, want, "1 an ECH config in it")
	require.Equal(t, want, wildReport(t, st, store.Filter{}), "read")
	require.Equal(t, want, wildReport(t, st, store.Filter{}), "from the summary")
	require.Equal(t, wildScan(t, loads, "nyc"), wildReport(t, st, store.Filter{Vantage: "nyc"}), "one vantage point's")

	// Change the summary in place: a read on keeps what it holds.
	sums, err := st.Summaries(ctx, wildPoints.Summary)
	require.NoError(t, err)
	m := sums["camp"]
	require.Equal(t, int64(len(loads)), m.Samples)
	ps, ok := wildPoints.Unpack(m.Data)
	require.True(t, ok)
	for i := range ps {
		if ps[i].Transport == "doh2" {
			ps[i].ALPNs = []nameCount{{Name: "changed", N: 1}}
		}
	}
	b, err := wildPoints.Pack(ps)
	require.NoError(t, err)
	require.NoError(t, st.PutSummary(ctx, wildPoints.Summary, "camp", store.Summary{Held: m.Held, Data: b}))

	second := writeRound(t, st, "camp", 2, t0.Add(48*time.Hour))
	got := wildReport(t, st, store.Filter{})
	require.Contains(t, got, "changed 50%", "the first round from the summary, read on")
	require.Equal(t, wildScan(t, append(loads, second...), ""), strings.ReplaceAll(got, "changed 50%, h2 50%", "h2 100%"), "the second round read")
	sums, err = st.Summaries(ctx, wildPoints.Summary)
	require.NoError(t, err)
	require.Equal(t, int64(2*len(loads)), sums["camp"].Samples, "kept, read on")

	// A load stored late, started before the summary's latest: read whole.
	late := campaignLoad(t, "fra", "udp", 1, 7, 100, t0.Add(time.Minute))
	require.NoError(t, st.WriteResult(ctx, "camp", campaign.PageLoads, late.Key(), late.Start, late))
	all := append(append(loads, second...), late)
	want = wildScan(t, all, "")
	require.Equal(t, want, wildReport(t, st, store.Filter{}), "read whole")
	require.NotContains(t, want, "changed")
	require.Equal(t, want, wildReport(t, st, store.Filter{}), "from its summary")
}

// TestWildPointsPortable: datasets keep a campaign's page loads' points
// under wildPoints.Portable, read by any doxlab of the same Portable in
// place of the loads, so what a point is of a load must not change
// under it. Eighteen loads of TestPageCampaignOnEmulatedInternet (each
// protocol against each of its six resolvers, some failed) are
// projected as the analysis does; a change that moves any of their
// points fails here until wildPointProjection (or wildPointsFormat) is
// bumped and the digest added.
func TestWildPointsPortable(t *testing.T) {
	testutil.Projected(t, "testdata/campaign-loads.jsonl.gz", wildPoints.Portable, map[string]string{
		"campaign-load points: encoding 1, projection 1": "b0daaa4263f1f56520f93a0315f16ccf9423beef8242122dbd842ee564a14c54",
	}, func(w io.Writer, line []byte) {
		var row struct {
			RunID  string          `json:"run_id"`
			Record json.RawMessage `json:"record"`
		}
		require.NoError(t, json.Unmarshal(line, &row))
		p, err := wildPoints.Point(row.RunID, row.Record)
		require.NoError(t, err)
		fmt.Fprintf(w, "%+v\n", p)
	})
}

// TestWildPointsInADataset: a campaign's loads exported to a dataset
// carry their points, which a report of the dataset reads in place of
// the loads (their files emptied), one vantage point's among them.
func TestWildPointsInADataset(t *testing.T) {
	ctx := context.Background()
	st, _, loads := firstRound(t)
	dir := filepath.Join(t.TempDir(), "ds")
	_, err := st.ExportDataset(ctx, dir, store.Filter{}, time.Time{})
	require.NoError(t, err)
	points := 0
	for _, f := range readManifest(t, dir).Files {
		switch {
		case f.Table == "points":
			require.Equal(t, wildPoints.Portable, f.Format)
			require.Equal(t, int64(len(loads)), f.Rows)
			points++
		case f.Table == store.TableResults || f.Table == store.TableBriefs:
			require.NoError(t, os.WriteFile(filepath.Join(dir, filepath.FromSlash(f.Path)), []byte("emptied"), 0o644))
		}
	}
	require.Equal(t, 1, points)
	alone := attached(t, tempStore(t), dir)
	require.Equal(t, wildScan(t, loads, ""), wildReport(t, alone, store.Filter{}))
	require.Equal(t, wildScan(t, loads, "nyc"), wildReport(t, alone, store.Filter{Vantage: "nyc"}))
}
