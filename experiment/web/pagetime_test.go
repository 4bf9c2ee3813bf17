package web

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/campaign"
	"github.com/doxlab/doxlab/experiment/internal/pages"
	"github.com/doxlab/doxlab/measure"
	"github.com/doxlab/doxlab/store"
)

// TestEachPageTime: what a comparison of runs reads of page loads, one
// at a time: the testbed's, each in its setting (profile, engine, H3
// handshake), and the campaigns' as "wild", with their PLT where they
// loaded (a load stored before 0.1.0 kept it in its sample alone) and
// their status where not; a vantage point keeps the campaigns' loads
// measured from it, and none of the testbed's.
func TestEachPageTime(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "s.db"))
	require.NoError(t, err)
	defer st.Close()
	lab := store.NewRun("experiment:web", "fiber", nil)
	lab.ID = "web-x-fiber"
	require.NoError(t, st.BeginRun(ctx, lab))
	require.NoError(t, WriteLoad(ctx, st, lab.ID, &pages.Sample{Task: pages.Task{Profile: "fiber", Page: "wiki", Transport: "doq", H3: "0rtt", StubState: "warm", DNSMode: "stub"},
		Start: time.Unix(100, 0), Status: "ok", PLTMs: 310}))
	wild := store.NewRun("campaign:wild", "", nil)
	wild.ID = "campaign-wild"
	require.NoError(t, st.BeginRun(ctx, wild))
	put := func(vantage, tr string, status string, plt, legacy float64) {
		x := campaign.PageLoad{Task: measure.Task{Target: "10.0.0.1", Transport: tr, Page: "https://a.example/", Round: 1}, Start: time.Unix(200, 0),
			Status: status, PLTMs: plt, Vantage: &measure.Vantage{Name: vantage}}
		x.Load, _ = json.Marshal(map[string]any{"status": status, "plt_ms": legacy})
		require.NoError(t, st.WriteResult(ctx, wild.ID, campaign.PageLoads, x.Key(), x.Start, x))
	}
	put("fra", "udp", "ok", 250, 250)
	put("fra", "doq", "ok", 0, 270) // stored before 0.1.0: the PLT in its sample alone
	put("sin", "udp", "timeout", 0, 0)

	all := func(f store.Filter) []string {
		var out []string
		require.NoError(t, EachPageTime(ctx, st, f, func(x PageTime) {
			out = append(out, fmt.Sprintf("%s %s %s %s %g", x.Page, x.Transport, x.Setting, x.Status, x.PLTMs))
		}))
		sort.Strings(out)
		return out
	}
	require.Equal(t, []string{
		"https://a.example/ doq wild ok 270",
		"https://a.example/ udp wild ok 250",
		"https://a.example/ udp wild timeout 0",
		"wiki doq fiber " + pages.EngineChromium + " H3 0rtt ok 310",
	}, all(store.Filter{}))
	require.Equal(t, []string{"https://a.example/ udp wild timeout 0"}, all(store.Filter{Vantage: "sin"}))

	// Read from the points the first reads kept, the same.
	for _, kind := range []string{labPoints.Summary, wildPoints.Summary} {
		sums, err := st.Summaries(ctx, kind)
		require.NoError(t, err)
		require.Len(t, sums, 1, kind)
	}
	require.Len(t, all(store.Filter{}), 4)
	require.Equal(t, []string{"https://a.example/ udp wild timeout 0"}, all(store.Filter{Vantage: "sin"}))
}
