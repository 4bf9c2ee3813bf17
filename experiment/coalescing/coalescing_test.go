package coalescing

import (
	"bytes"
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/experiment"
	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/doxlab/doxlab/store"
)

// TestCoalescingProvesEachLoad runs the experiment on fiber and checks
// each load's proof against what its mode must do: a coalesced load
// costs one QUIC handshake and no TCP one, its lookup rides on the
// page's connection and, in 0-RTT with the SETTINGS remembered, in early
// data; the emulation and a separate transport cost a connection more
// (none for DoUDP); 0-RTT is used exactly when the ticket was kept; and
// requests wait for SETTINGS exactly when told to.
func TestCoalescingProvesEachLoad(t *testing.T) {
	testutil.NeedRoot(t, "the testbed needs root")
	dir := t.TempDir()
	c := &Coalescing{Profiles: []string{"fiber"}, Pages: []string{"wiki"}, DNS: []string{"udp", "doq", Emulated, DoH3Coalesced, DNSStream},
		Repeat: 2, Env: experiment.Env{Store: filepath.Join(dir, "c.db"), Log: testWriter{t}}}
	ctx := context.Background()
	id, err := c.Run(ctx)
	require.NoError(t, err)
	st, err := store.Open(ctx, c.Store)
	require.NoError(t, err)
	defer st.Close()
	res, err := c.Load(ctx, st, id)
	require.NoError(t, err)
	ss := res.(Samples)
	require.Len(t, ss, 5*3*2, "modes × (1rtt, 0rtt, 0rtt-wait) × repeats")
	for _, s := range ss {
		k, p := s.Key(), s.Proof
		require.Equal(t, "ok", s.Status, "%s: %s", k, s.Error)
		require.Equal(t, s.H3 == "0rtt", p.PageUsed0RTT, "%s: 0-RTT iff the ticket was kept", k)
		require.Equal(t, s.H3 == "0rtt" && s.Settings == "wait", p.WaitedSettings, k)
		require.Greater(t, s.PLTMs, 0.0)
		switch s.DNS {
		case DoH3Coalesced, DNSStream:
			require.Equal(t, 1, p.QUICHandshakes, "%s: one QUIC handshake, DNS included", k)
			require.Zero(t, p.TCPHandshakes, k)
			require.True(t, p.DNSOnPageConn, k)
			require.Equal(t, map[string]string{DoH3Coalesced: "doh3", DNSStream: "dnsstream"}[s.DNS], p.DNSTransport, k)
			if s.Settings != "wait" {
				require.Equal(t, s.H3 == "0rtt", p.DNSEarly, "%s: the query in the 0-RTT flight", k)
			}
		case "udp":
			require.Equal(t, 1, p.QUICHandshakes, k)
			require.Equal(t, "udp", p.DNSTransport, k)
		default: // doq, doq-emulated: the lookup's own QUIC connection
			require.Equal(t, 2, p.QUICHandshakes, k)
			require.Equal(t, "doq", p.DNSTransport, k)
			require.False(t, p.DNSOnPageConn, k)
		}
	}
	var table bytes.Buffer
	require.NoError(t, ss.WriteTable(&table))
	require.Contains(t, table.String(), "[±∞]", "two loads a cell have no 95 % interval")
	fs := ss.Findings()
	one := slices.IndexFunc(fs, func(f experiment.Finding) bool {
		return strings.HasPrefix(f.Claim, "A coalesced single-origin page costs exactly one")
	})
	require.GreaterOrEqual(t, one, 0)
	require.Equal(t, experiment.Holds, fs[one].Verdict, fs[one].Here)
	// Two loads a cell cannot earn it.
	earned := experiment.Earn(fs, experiment.Evidence{})[one]
	require.Equal(t, experiment.Inconclusive, earned.Verdict)
	require.Contains(t, earned.Reason, "too few samples (n=2")
	sec, err := ss.Section(t.TempDir())
	require.NoError(t, err)
	require.NotEmpty(t, sec.Figures)
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(string(bytes.TrimRight(b, "\n")))
	return len(b), nil
}
