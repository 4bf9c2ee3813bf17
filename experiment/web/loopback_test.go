package web

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/experiment"
	"github.com/doxlab/doxlab/experiment/internal/pages"
	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/doxlab/doxlab/store"
)

// TestWebOnLoopback: the web experiment on the loopback net, without
// root: Chromium and doxlab's engine load a page over HTTP/3, their DNS
// through the stub on the client's own address (Chromium's resolv.conf
// bound over /etc for it alone), each load proven as on the testbed —
// h3, 0-RTT accepted exactly when the ticket was kept, the page's
// lookups at the server over the stub's transport and no other — the
// doxlab engine replaying a graph chosen among Chromium's loads; a
// resumed run measures nothing again. The times are the testbed's test.
func TestWebOnLoopback(t *testing.T) {
	testutil.NeedChromium(t)
	bin := testutil.Doxlab(t)
	db := filepath.Join(t.TempDir(), "web.db")
	mk := func(resume string) *Web {
		return &Web{Profiles: []string{"none"}, Transports: []string{"udp", "doq"}, Pages: []string{"example"}, Engines: []string{pages.EngineChromium, pages.EngineDoxlab},
			Repeat: 1, Doxlab: bin, Env: experiment.Env{Store: db, Net: experiment.NetLoopback, Resume: resume, Log: testWriter{t}}}
	}
	loads, st, id := run(t, mk(""))
	require.Len(t, loads, 2*2*2, "transports × h3 modes × engines")
	for _, x := range loads {
		require.Equal(t, "ok", x.Status, "%s: %s", x.Key(), x.Error)
		require.Equal(t, x.H3 == "0rtt", x.H3Used0RTT, "%s: 0-RTT accepted by the server iff the ticket was kept", x.Key())
		require.NotEmpty(t, x.DNS, "%s: the page's lookups went through the stub", x.Key())
		require.Equal(t, []string{x.Transport}, keys(x.ServerQueries), "%s: the server saw the page's lookups over the stub's transport only", x.Key())
		if x.EngineName() == pages.EngineDoxlab {
			require.NotNil(t, x.Replay, x.Key())
			require.Equal(t, "stub", x.Replay.Lookups[0].Transport, x.Key())
		} else {
			require.Equal(t, "h3", x.Load.Protocol, x.Key())
			require.NotNil(t, x.Graph, "%s: a traced load carries its graph", x.Key())
		}
	}
	_, err := LoadsOfSamples(loads...).Section(t.TempDir())
	require.NoError(t, err)

	// Its page loads' points were kept as the run ended (as its samples
	// are sealed): a first report decodes none of their JSON, and store
	// seal finds nothing left to keep.
	ctx := context.Background()
	sums, err := st.Summaries(ctx, labPoints.Summary)
	require.NoError(t, err)
	var kept int64
	for run, m := range sums {
		if strings.HasPrefix(run, id) {
			kept += m.Samples
		}
	}
	require.EqualValues(t, len(loads), kept, "every load's point kept when the run ended")
	runs, points, err := experiment.KeepPoints(ctx, st, store.Filter{Superseded: true})
	require.NoError(t, err)
	require.Zero(t, runs+points, "nothing left for store seal to keep")

	_, err = mk(id).Run(context.Background())
	require.NoError(t, err)
	again, err := ReadLoads(context.Background(), st, id)
	require.NoError(t, err)
	require.Len(t, again, len(loads), "a finished run resumed measures nothing")
}
