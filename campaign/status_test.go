package campaign_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/campaign"
	"github.com/doxlab/doxlab/measure"
	"github.com/doxlab/doxlab/store"
)

// TestRoundStates: a round is done when every task is stored, whatever
// the time; scheduled before it is due; running while a worker works on
// it in its slot; late when due with nothing taken; missed once the next
// round fell due before it was done.
func TestRoundStates(t *testing.T) {
	due := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	every := time.Hour
	r := campaign.RoundStatus{Round: 1, Due: due, Planned: 10}
	require.Equal(t, "scheduled", r.State(due.Add(-time.Second), every))
	require.Equal(t, "late", r.State(due, every))
	r.Running = 1
	require.Equal(t, "running", r.State(due.Add(time.Minute), every))
	r.Running, r.Failed = 0, 2
	require.Equal(t, "running", r.State(due.Add(time.Minute), every), "a task failed: a worker was there")
	require.Equal(t, "missed", r.State(due.Add(every), every))
	r.Done = 10
	require.Equal(t, "done", r.State(due.Add(-time.Hour), every), "done is done, even early")
}

// TestStatusTable: a vantage point's line says what it has stored of
// its plan with the share, a hostile name printed escaped, the totals
// below; a missed round is named with what to do.
func TestStatusTable(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	s := &campaign.Status{Run: "r1", Name: "year", Planned: now.Add(-3 * time.Hour), Every: time.Hour,
		Vantages: []campaign.VantageStatus{
			{Vantage: "fra", Planned: 200, Stored: 150, Running: 2, Waiting: 48, Workers: 1, Last: now.Add(-30 * time.Second)},
			{Vantage: "evil\x1b[2J", Planned: 200},
		},
		Rounds: []campaign.RoundStatus{
			{Round: 1, Due: now.Add(-3 * time.Hour), Planned: 200, Done: 200},
			{Round: 2, Due: now.Add(-2 * time.Hour), Planned: 200, Done: 50, Waiting: 150},
		}}
	var b strings.Builder
	require.NoError(t, s.Write(&b, now))
	out := b.String()
	require.NotContains(t, out, "\x1b", "a name cannot drive the terminal")
	lines := strings.Split(out, "\n")
	fields := func(prefix string) []string {
		for _, l := range lines {
			if strings.HasPrefix(l, prefix) {
				return strings.Fields(l)
			}
		}
		t.Fatalf("no line %q in\n%s", prefix, out)
		return nil
	}
	require.Equal(t, []string{"fra", "200", "150", "75.0%", "2", "48", "0", "0", "0", "1", "30s", "ago"}, fields("fra "))
	require.Equal(t, []string{"all", "400", "150", "37.5%", "2", "48", "0", "0", "0"}, fields("all "))
	require.Contains(t, out, "2 rounds, every 1h0m0s:")
	require.Contains(t, fields("    2 "), "missed")
	require.Contains(t, out, "1 round(s) missed: not done when the next fell due")
}

// TestHereStatus: a page campaign measured on this machine (doxlab
// campaign run) needs no queue and no PostgreSQL: its status is its
// loads stored of its tasks, the latest start among them, the rest
// waiting (none below zero when more were stored, a task measured
// again); it is the latest planned. A run of another kind is not
// taken for one, and its error is the queue's.
func TestHereStatus(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "s.db"))
	require.NoError(t, err)
	defer st.Close()
	t0 := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	plan := func(here int) json.RawMessage {
		b, err := json.Marshal(campaign.Plan{Name: "pages", Here: here})
		require.NoError(t, err)
		return b
	}
	require.NoError(t, st.BeginRun(ctx, store.Run{ID: "c1", Kind: campaign.Kind, StartedAt: t0, Spec: plan(5)}))
	for i, m := range []int{3, 9, 1} { // stored out of order
		load := campaign.PageLoad{Task: measure.Task{Rep: i}, Start: t0.Add(time.Duration(m) * time.Minute), Status: "ok"}
		require.NoError(t, st.WriteResult(ctx, "c1", campaign.PageLoads, fmt.Sprint(i), load.Start, load))
	}
	// A run whose ID begins with c1's: its loads are its own.
	require.NoError(t, st.BeginRun(ctx, store.Run{ID: "c12", Kind: campaign.Kind, StartedAt: t0.Add(-time.Hour), Spec: plan(5)}))
	late := campaign.PageLoad{Start: t0.Add(30 * time.Minute), Status: "ok"}
	require.NoError(t, st.WriteResult(ctx, "c12", campaign.PageLoads, "0", late.Start, late))
	s, err := campaign.GetStatus(ctx, st, "c1")
	require.NoError(t, err)
	require.Equal(t, &campaign.Status{Run: "c1", Name: "pages", Planned: t0, Vantages: []campaign.VantageStatus{
		{Vantage: campaign.HereVantage, Planned: 5, Stored: 3, Waiting: 2, Last: t0.Add(9 * time.Minute)},
	}}, s)
	latest, err := campaign.LatestPlanned(ctx, st)
	require.NoError(t, err)
	require.Equal(t, "c1", latest)

	require.NoError(t, st.BeginRun(ctx, store.Run{ID: "c2", Kind: campaign.Kind, StartedAt: t0.Add(time.Hour), Spec: plan(2)}))
	for i := range 3 {
		load := campaign.PageLoad{Start: t0.Add(time.Hour), Status: "timeout"}
		require.NoError(t, st.WriteResult(ctx, "c2", campaign.PageLoads, fmt.Sprint(i), load.Start, load))
	}
	s, err = campaign.GetStatus(ctx, st, "c2")
	require.NoError(t, err)
	require.Equal(t, []int{2, 3, 0}, []int{s.Vantages[0].Planned, s.Vantages[0].Stored, s.Vantages[0].Waiting})
	latest, err = campaign.LatestPlanned(ctx, st)
	require.NoError(t, err)
	require.Equal(t, "c2", latest)

	require.NoError(t, st.BeginRun(ctx, store.Run{ID: "m1", Kind: "measure", StartedAt: t0.Add(2 * time.Hour), Spec: plan(5)}))
	_, err = campaign.GetStatus(ctx, st, "m1")
	require.ErrorContains(t, err, "PostgreSQL", "not a campaign measured here: the queue's status, which SQLite has not")
	latest, err = campaign.LatestPlanned(ctx, st)
	require.NoError(t, err)
	require.Equal(t, "c2", latest, "a measure run is no campaign")
	_, err = campaign.GetStatus(ctx, st, "nope")
	require.ErrorIs(t, err, store.ErrNoRun)
}

// TestPlanRefusesABadCA: a campaign's CA file that holds no certificate
// is refused when planning, naming the setting and the file, not by
// every worker on every task after; a missing one names the setting.
func TestPlanRefusesABadCA(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.pem")
	require.NoError(t, os.WriteFile(notPEM, []byte("not a certificate\n"), 0o644))
	c := &measure.Campaign{Targets: []string{"127.0.0.1"}, AllowSpecial: loopback, TLS: measure.CampaignTLS{CA: notPEM}}
	_, _, err := campaign.NewPlan(c)
	require.EqualError(t, err, "tls.ca: "+notPEM+" holds no PEM certificate")
	c.TLS.CA = filepath.Join(dir, "missing.pem")
	_, _, err = campaign.NewPlan(c)
	require.ErrorIs(t, err, os.ErrNotExist)
	require.ErrorContains(t, err, "tls.ca: ")
}
