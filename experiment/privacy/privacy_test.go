package privacy

import (
	"bytes"
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/experiment"
	"github.com/doxlab/doxlab/internal/ech"
	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/doxlab/doxlab/protocol"
)

// TestPrivacyLadder runs the quick experiment on the testbed: every
// lookup, handshake and page load answers; the server saw ECH accepted
// under the public name on the ECH rungs (Chromium's too), the site's
// own name on the rungs in clear,
// a rejection then an acceptance on the stale rung; ODoH's lookups carry
// the proxy's target exchange. Times are checked only against the
// physics of the emulated links (lower bounds a busy machine cannot
// break): the report's findings judge the rest.
func TestPrivacyLadder(t *testing.T) {
	testutil.NeedRoot(t, "the testbed needs root")
	testutil.NeedChromium(t)
	c := &Privacy{Env: experiment.Env{Store: filepath.Join(t.TempDir(), "p.db")}}
	c.Quick()
	res, err := experiment.RunAndLoad(context.Background(), c)
	require.NoError(t, err)
	ss := res.(Samples)
	require.Len(t, ss, (len(dnsCells)+len(webCells)+len(pageRungs)+len(browserRungs))*c.Repeat)
	for _, s := range ss {
		name := s.key()
		require.Equal(t, "ok", s.Status, "%s: %s", name, s.Error)
		rtt := s.RTTMs
		switch {
		case s.Part == "dns" && s.Rung == protocol.ODoH:
			require.NotNil(t, s.ODoH, name)
			require.GreaterOrEqual(t, s.ODoH.TargetMs, s.ProxyRTTMs, "%s: the proxy crossed its link to the target", name)
			if s.Condition == "reused" {
				require.GreaterOrEqual(t, s.Ms, rtt+2*s.ProxyRTTMs, "%s: client→proxy→target and back", name)
			}
		case s.Rung == Clear:
			require.Equal(t, "page.test", s.OuterSNI, "%s: the name in clear", name)
			require.Equal(t, []string{ech.GREASE}, s.ECH, name)
			require.Equal(t, s.Condition == "0rtt", s.Used0RTT, name)
			if s.Condition == "fresh" {
				require.GreaterOrEqual(t, s.Ms, 2*rtt, "%s: a handshake and a request", name)
			} else {
				require.GreaterOrEqual(t, s.Ms, rtt, "%s: the request in 0-RTT", name)
			}
		case s.Rung == ECH:
			require.Equal(t, publicName, s.OuterSNI, name)
			require.Equal(t, []string{ech.Accepted}, s.ECH, name)
			require.False(t, s.Retried, name)
			require.Equal(t, s.Condition == "0rtt", s.Used0RTT, "%s: resumed in 0-RTT with ECH", name)
		case s.Part == "browser":
			withECH := strings.HasSuffix(s.Rung, "+"+ECH)
			require.NotEmpty(t, s.ECH, "%s: the page came over HTTP/3", name)
			require.Equal(t, withECH, slices.Contains(s.ECH, ech.Accepted), "%s: %v", name, s.ECH)
			require.Equal(t, map[bool]string{true: publicName, false: site}[withECH], s.OuterSNI, "%s: what the network saw", name)
		case s.Part == "page":
			want := ""
			if strings.HasSuffix(s.Rung, "+"+ECH) {
				want = ech.Accepted
			}
			require.Equal(t, []string{want}, s.ECH, "%s: the page's one connection", name)
			require.GreaterOrEqual(t, s.Ms, 3*rtt, "%s: the handshake, the document, then its subresources", name)
		case s.Rung == ECHStale:
			require.True(t, s.Retried, name)
			require.Equal(t, publicName, s.OuterSNI, name)
			require.True(t, slices.Equal([]string{ech.Rejected, ech.Accepted}, s.ECH), "%s: %v", name, s.ECH)
			require.GreaterOrEqual(t, s.Ms, 3*rtt, "%s: two handshakes and a request", name)
		}
	}
	fs := ss.Findings()
	require.Len(t, fs, 5)
	for _, f := range fs {
		require.NotEqual(t, experiment.NoData, f.Verdict, f.Claim)
		require.GreaterOrEqual(t, f.N, experiment.MinSamples, f.Claim)
	}
	var b bytes.Buffer
	require.NoError(t, ss.WriteTable(&b))
	require.Contains(t, b.String(), "ODoH")
	sec, err := ss.Section(t.TempDir())
	require.NoError(t, err)
	require.Contains(t, string(sec.Table), "public.test")
}
