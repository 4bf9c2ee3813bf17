package report_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/experiment"
	"github.com/doxlab/doxlab/report"
	"github.com/doxlab/doxlab/store"
)

// TestSummaryIsTheReportsNumbers: report --json (Summarize) is what the
// HTML report shows, for scripts: each finding with the verdict the page
// earns, for the reason it gives, behind as many samples; the runs, how
// much each experiment holds, the link checks and which failed; every
// cell of the tables, each under its experiment, a cell with nothing
// answered null where it has no statistic (never 0); a check failed in
// another experiment's run leaves these verdicts alone, as on the page.
func TestSummaryIsTheReportsNumbers(t *testing.T) {
	in := samples(t)
	in.Runs = []store.Run{{ID: "e1-fiber", Kind: "experiment:dns-rtt"}, {ID: "e1-dsl", Kind: "experiment:dns-rtt"}}
	in.Links = []*experiment.LinkCheck{
		{Run: "e1-fiber", When: "before", Profile: "fiber", OK: true},
		{Run: "e1-fiber", When: "after", Profile: "fiber", OK: false, Why: "RTT error p99 1400 µs > 1000"},
	}
	for _, failedHere := range []bool{true, false} {
		if !failedHere {
			in.Runs = append(in.Runs, store.Run{ID: "web-x-4g", Kind: "experiment:web"})
			in.Links[1].Run = "web-x-4g"
		}
		rep, err := report.Render(in, t.TempDir(), "doxlab report: test")
		require.NoError(t, err)
		s := report.Summarize(in)

		require.Equal(t, []string{"e1-fiber", "e1-dsl"}, s.Runs[:2])
		require.Equal(t, report.Count{N: 2 * (3*20 + 1), Unit: "samples"}, s.Counts["dns-rtt"], "every sample, the failed ones too")
		require.Equal(t, 2, s.Links.Checks)
		require.Len(t, s.Links.Failed, 1)
		require.Contains(t, s.Links.Failed[0], "(fiber, after): RTT error p99 1400 µs > 1000")

		require.Len(t, s.Findings, len(rep.Findings))
		for i, f := range rep.Findings {
			got := s.Findings[i]
			require.Equal(t, "dns-rtt", got.Experiment)
			require.Equal(t, f.Claim, got.Claim)
			require.Equal(t, string(f.Verdict), got.Verdict, f.Claim)
			require.Equal(t, f.Reason, got.Reason, f.Claim)
			require.Equal(t, f.N, got.N, f.Claim)
		}
		want := experiment.Inconclusive
		if !failedHere {
			want = experiment.Holds
		}
		require.Equal(t, string(want), s.Findings[0].Verdict, "DoUDP in one RTT, its link check failed: %v", failedHere)

		require.NotEmpty(t, s.Cells)
		var timedOut *experiment.Cell
		for i, c := range s.Cells {
			require.Equal(t, "dns-rtt", c.Experiment)
			if c.Keys["transport"] == "dot" && timedOut == nil {
				timedOut = &s.Cells[i]
			}
		}
		require.NotNil(t, timedOut, "the cell whose one query timed out is a cell")
		require.Equal(t, 1, timedOut.Samples)
		require.Zero(t, timedOut.N)
		require.Nil(t, timedOut.Median, "no answer, no median: null, not 0")
		require.Nil(t, timedOut.CILo)
	}
}

// TestEmptySummaryIsEmptyLists: with nothing stored, report --json has
// lists a script can range over, not nulls.
func TestEmptySummaryIsEmptyLists(t *testing.T) {
	b, err := json.Marshal(report.Summarize(report.Input{}))
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	require.Equal(t, []any{}, m["runs"])
	require.Equal(t, []any{}, m["cells"])
	require.Equal(t, []any{}, m["findings"])
	links := m["links"].(map[string]any)
	require.Equal(t, []any{}, links["failed"])
	require.Equal(t, []any{}, links["measured_again"])
	require.Equal(t, map[string]any{}, m["counts"])
}
