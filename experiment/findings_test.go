package experiment

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/stats"
)

func TestEarnGivesVerdictsOnlyWhereEarned(t *testing.T) {
	var fast, slow []float64
	for i := range 10 {
		fast, slow = append(fast, float64(10+i)), append(slow, float64(30+i))
	}
	apart := stats.Compare(fast, slow)
	same := stats.Compare(fast, fast)
	cases := []struct {
		name   string
		f      Finding
		ev     Evidence
		want   Verdict
		reason string
	}{
		{"earned", Finding{Verdict: Holds, N: 10, InRTTs: true, Test: &apart}, Evidence{}, Holds, ""},
		{"a differs is earned too", Finding{Verdict: Differs, N: 10}, Evidence{}, Differs, ""},
		{"too few samples", Finding{Verdict: Holds, N: 3}, Evidence{}, Inconclusive, "too few samples (n=3, at least 5 a cell)"},
		{"no sample count", Finding{Verdict: Differs}, Evidence{}, Inconclusive, "too few samples (n=0"},
		{"not significant", Finding{Verdict: Holds, N: 10, Test: &same}, Evidence{}, Inconclusive, "the difference is not significant (p=1.000 n=10+10)"},
		{"link check failed", Finding{Verdict: Holds, N: 10}, Evidence{FailedChecks: []string{"run e1-fiber (fiber, after): RTT error p99 1.4 ms"}}, Inconclusive, "a link check of these runs failed (run e1-fiber"},
		{"RTTs on loopback", Finding{Verdict: Differs, N: 10, InRTTs: true, OnLoopback: true}, Evidence{}, Inconclusive, "measured on loopback"},
		{"loopback is fine for a claim not in RTTs", Finding{Verdict: Holds, N: 10, OnLoopback: true}, Evidence{}, Holds, ""},
		{"time on the loopback net", Finding{Verdict: Holds, N: 10, Timed: true}, Evidence{Loopback: []string{"w1-none"}}, Inconclusive, "1 of these runs were on the loopback net"},
		{"a count on the loopback net", Finding{Verdict: Holds, N: 10}, Evidence{Loopback: []string{"c1-none"}}, Holds, ""},
		{"no data stays no data", Finding{Verdict: NoData}, Evidence{FailedChecks: []string{"x"}}, NoData, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Earn([]Finding{c.f}, c.ev)[0]
			require.Equal(t, c.want, got.Verdict)
			require.Contains(t, got.Reason, c.reason)
			if c.reason == "" {
				require.Empty(t, got.Reason)
			}
		})
	}
}

// TestSharedReasonsAreStatedOnce: a reason that holds back several
// findings is stated once, after them, and each names it by its mark;
// a finding's own reasons stay on its line.
func TestSharedReasonsAreStatedOnce(t *testing.T) {
	fs := Earn([]Finding{
		{Claim: "a", Verdict: Holds, N: 2, InRTTs: true, OnLoopback: true},
		{Claim: "b", Verdict: Holds, N: 9, InRTTs: true, OnLoopback: true},
		{Claim: "c", Verdict: Holds, N: 9},
	}, Evidence{})
	var out strings.Builder
	require.NoError(t, WriteFindings(&out, fs))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Equal(t, []string{
		"inconclusive: a (): [1]; too few samples (n=2, at least 5 a cell)",
		"inconclusive: b (): [1]",
		"holds: c ()",
		"[1] measured on loopback, where a claim in round trips has no RTT to rest on (2 findings)",
	}, lines)
}

// TestEvidenceNamesLoopbackRuns: a run's link checks on the loopback net
// make it evidence against claims about time, once per run, and fail
// nothing.
func TestEvidenceNamesLoopbackRuns(t *testing.T) {
	ev := EvidenceOf([]*LinkCheck{
		{Run: "d1-none", When: "before", Net: NetLoopback, OK: true},
		{Run: "d1-none", When: "after", Net: NetLoopback, OK: true},
		{Run: "d2-fiber", When: "before", OK: true},
	})
	require.Equal(t, []string{"d1-none"}, ev.Loopback)
	require.Empty(t, ev.FailedChecks)
}
