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
)

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
