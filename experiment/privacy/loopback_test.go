package privacy

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/experiment"
	"github.com/doxlab/doxlab/experiment/internal/looptest"
	"github.com/doxlab/doxlab/internal/ech"
	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/doxlab/doxlab/protocol"
)

func TestMain(m *testing.M) { testutil.Rootless(m) }

// TestRunOnLoopback: the ladder on the loopback net, without root or a
// browser (looptest): every rung answers, and what each proves on the
// wire holds — ODoH through the proxy host, the name in clear or ECH
// accepted (and a stale config rejected, then retried), 0-RTT where
// asked — from the servers' records; resumed, nothing measured again.
// What the rungs cost is the testbed's test.
func TestRunOnLoopback(t *testing.T) {
	db := filepath.Join(t.TempDir(), "p.db")
	mk := func(resume string) *Privacy {
		return &Privacy{Profiles: []string{"none"}, Repeat: 2, NoBrowser: true, Env: experiment.Env{Store: db, Net: experiment.NetLoopback, Resume: resume}}
	}
	res, st, id := looptest.Run(t, mk(""))
	ss := res.(Samples)
	require.Len(t, ss, (len(dnsCells)+len(webCells)+len(pageRungs))*2)
	for _, s := range ss {
		name := s.key()
		require.Equal(t, "ok", s.Status, "%s: %s", name, s.Error)
		require.Zero(t, s.ProxyRTTMs, "%s: no proxy link on loopback", name)
		require.Zero(t, s.RTTs, "%s: no RTT to count in", name)
		switch {
		case s.Part == "dns" && s.Rung == protocol.ODoH:
			require.NotNil(t, s.ODoH, "%s: answered through the proxy", name)
		case s.Part == "dns":
			require.Equal(t, s.Condition == "0rtt", s.Used0RTT, name)
		case s.Rung == Clear:
			require.Equal(t, site, s.OuterSNI, "%s: the name in clear", name)
			require.Equal(t, []string{ech.GREASE}, s.ECH, name)
			require.Equal(t, s.Condition == "0rtt", s.Used0RTT, name)
		case s.Rung == ECH:
			require.Equal(t, publicName, s.OuterSNI, name)
			require.Equal(t, []string{ech.Accepted}, s.ECH, name)
			require.Equal(t, s.Condition == "0rtt", s.Used0RTT, "%s: resumed in 0-RTT with ECH", name)
		case s.Rung == ECHStale:
			require.True(t, s.Retried, name)
			// Two connections; on loopback their records may come in
			// either order.
			require.ElementsMatch(t, []string{ech.Rejected, ech.Accepted}, s.ECH, name)
		case s.Part == "page":
			want := ""
			if strings.HasSuffix(s.Rung, "+"+ECH) {
				want = ech.Accepted
			}
			require.Equal(t, []string{want}, s.ECH, "%s: the page's one connection", name)
			if strings.HasPrefix(s.Rung, Coalesced+"+") {
				require.Equal(t, "fresh", s.Condition, "%s: no resolver connection to keep", name)
				require.Positive(t, s.LookupMs, "%s: its lookups on that connection", name)
			}
		}
	}
	sec, err := ss.Section(t.TempDir())
	require.NoError(t, err)
	require.Contains(t, string(sec.Table), publicName)
	looptest.NothingAgain(t, mk(id), st, id, res)
}

// TestBrowserOnLoopback: the browser part on the loopback net, without
// root: Chromium loads the page over HTTP/3, its lookups over the
// server's DoH in secure mode, and the web server saw ECH accepted
// under the public name where ECH was on, the site's own name where it
// was switched off. The testbed's test times it.
func TestBrowserOnLoopback(t *testing.T) {
	testutil.NeedChromium(t)
	c := &Privacy{Profiles: []string{"none"}, Repeat: 1, Env: experiment.Env{Store: filepath.Join(t.TempDir(), "p.db"), Net: experiment.NetLoopback}}
	res, _, _ := looptest.Run(t, c)
	var browsers int
	for _, s := range res.(Samples) {
		if s.Part != "browser" {
			continue
		}
		browsers++
		name := s.key()
		require.Equal(t, "ok", s.Status, "%s: %s", name, s.Error)
		require.Positive(t, s.Ms, name)
		withECH := strings.HasSuffix(s.Rung, "+"+ECH)
		require.NotEmpty(t, s.ECH, "%s: the page came over HTTP/3", name)
		require.Equal(t, withECH, slices.Contains(s.ECH, ech.Accepted), "%s: %v", name, s.ECH)
		require.Equal(t, map[bool]string{true: publicName, false: site}[withECH], s.OuterSNI, "%s: what the network saw", name)
	}
	require.Equal(t, len(browserRungs), browsers)
}
