package coalescing

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/experiment"
	"github.com/doxlab/doxlab/experiment/internal/looptest"
	"github.com/doxlab/doxlab/internal/testutil"
)

func TestMain(m *testing.M) { testutil.Rootless(m) }

// TestProofsOnLoopback: each load's proof on the loopback net, without
// root — the same proofs as on the testbed, which need no link: how many
// QUIC and TCP handshakes a load cost, which connection its lookup rode,
// 0-RTT exactly when the ticket was kept, SETTINGS awaited exactly when
// told; a resumed run measures nothing again (looptest).
func TestProofsOnLoopback(t *testing.T) {
	db := filepath.Join(t.TempDir(), "c.db")
	mk := func(resume string) *Coalescing {
		return &Coalescing{Profiles: []string{"none"}, Pages: []string{"wiki"}, DNS: []string{"udp", "doq", Emulated, DoH3Coalesced, DNSStream},
			Repeat: 1, Env: experiment.Env{Store: db, Net: experiment.NetLoopback, Resume: resume, Log: testWriter{t}}}
	}
	res, st, id := looptest.Run(t, mk(""))
	ss := res.(Samples)
	require.Len(t, ss, 5*3, "modes × (1rtt, 0rtt, 0rtt-wait)")
	for _, s := range ss {
		k, p := s.Key(), s.Proof
		require.Equal(t, "ok", s.Status, "%s: %s", k, s.Error)
		require.Equal(t, s.H3 == "0rtt", p.PageUsed0RTT, "%s: 0-RTT iff the ticket was kept", k)
		require.Equal(t, s.H3 == "0rtt" && s.Settings == "wait", p.WaitedSettings, k)
		switch s.DNS {
		case DoH3Coalesced, DNSStream:
			require.Equal(t, 1, p.QUICHandshakes, "%s: one QUIC handshake, DNS included", k)
			require.Zero(t, p.TCPHandshakes, k)
			require.True(t, p.DNSOnPageConn, k)
		case "udp":
			require.Equal(t, 1, p.QUICHandshakes, k)
		default:
			require.Equal(t, 2, p.QUICHandshakes, "%s: the lookup's own QUIC connection", k)
			require.False(t, p.DNSOnPageConn, k)
		}
	}
	looptest.NothingAgain(t, mk(id), st, id, res)

	// The coalescing table gives each load's cell and proof as measured,
	// its times only where it loaded, and only the runs asked for.
	rows := looptest.Exported[Row](t, st, "coalescing", func(run string) bool { return strings.HasPrefix(run, id) })
	require.Len(t, rows, len(ss))
	byCell := map[string]*Sample{}
	for _, s := range ss {
		byCell[strings.Join([]string{s.Setup, s.Profile, s.Page, s.DNS, s.H3, s.Settings, fmt.Sprint(s.Rep)}, " ")] = s
	}
	for _, r := range rows {
		s, ok := byCell[strings.Join([]string{r.Setup, r.Profile, r.Page, r.DNS, r.H3, r.Settings, fmt.Sprint(r.Rep)}, " ")]
		require.True(t, ok, "a row of no load: %+v", r)
		p := s.Proof
		require.True(t, strings.HasPrefix(r.RunID, id), r.RunID)
		require.Equal(t, s.Start.UTC().Truncate(time.Microsecond), r.StartedAt.UTC(), s.Key())
		require.Equal(t, []any{s.Status, int64(p.QUICHandshakes), int64(p.TCPHandshakes), int64(p.Lookups), int64(p.Spared), p.DNSOnPageConn, p.DNSEarly, p.DNSTransport, p.PageUsed0RTT, p.PageResumed, p.PageTokenUsed, p.WaitedSettings},
			[]any{r.Status, r.QUICHandshakes, r.TCPHandshakes, r.Lookups, r.LookupsSpared, r.DNSOnPageConn, r.DNSEarly, r.DNSTransport, r.PageUsed0RTT, r.PageResumed, r.PageTokenUsed, r.WaitedSettings}, s.Key())
		require.NotNil(t, r.PLTMs, s.Key())
		require.Equal(t, []float64{s.PLTMs, s.DNSMs}, []float64{*r.PLTMs, *r.DNSMs}, s.Key())
	}
	require.Empty(t, looptest.Exported[Row](t, st, "coalescing", func(string) bool { return false }))
}

// TestORIGINFramesOnLoopback: o5's origins on separate servers and on
// one CDN edge, with ORIGIN frames: separately, every origin costs a
// lookup and a handshake (no certificate covers another, RFC 9412 §2.4);
// on one CDN the connection is pooled and the frames spare every lookup
// but the first. The counts need no link: the loopback net proves them.
func TestORIGINFramesOnLoopback(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	for _, tc := range []struct {
		placement                   string
		lookups, spared, handshakes int
	}{
		{"separate", 5, 0, 5},
		{"cdn", 1, 4, 1},
	} {
		c := &Coalescing{Profiles: []string{"none"}, Pages: []string{"o5"}, DNS: []string{"udp"}, H3: []string{"1rtt"}, Placement: tc.placement, Origins: true,
			Repeat: 1, Env: experiment.Env{Store: filepath.Join(dir, "c.db"), Net: experiment.NetLoopback, Log: testWriter{t}}}
		res, _, _ := looptest.Run(t, c)
		ss := res.(Samples)
		require.Len(t, ss, 1)
		s := ss[0]
		require.Equal(t, "ok", s.Status, "%s: %s", tc.placement, s.Error)
		require.Equal(t, tc.lookups, s.Proof.Lookups, tc.placement)
		require.Equal(t, tc.spared, s.Proof.Spared, tc.placement)
		require.Equal(t, tc.handshakes, s.Proof.QUICHandshakes, tc.placement)
	}
	c := &Coalescing{Pages: []string{"o5"}, DNS: []string{DNSStream}, Env: experiment.Env{Store: filepath.Join(dir, "c.db"), Net: experiment.NetLoopback}}
	_, err := c.Run(ctx)
	require.ErrorContains(t, err, "needs the page on the resolver's server")
}
