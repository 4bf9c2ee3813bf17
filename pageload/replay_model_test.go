package pageload_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/doxlab/doxlab/pageload"
)

// TestReplayFollowsAnyGraph: graphs of random shape (up to 25 resources,
// chains and fans, bodies from empty to 300 KB, children found at any
// octet of their parent's body or after its end, gaps of up to 15 ms)
// replay over HTTP/3, cold and warm in 0-RTT, and over HTTP/2 as the
// graph says: each body whole, each request due no sooner than what
// discovered it arrived plus its gap (a child found mid-body after its
// parent's headers and by its end, a child found after the body after
// its end) and sent no sooner than it was due, one lookup and one
// connection for the origin, and the PLT the last body's end plus the
// onload gap.
func TestReplayFollowsAnyGraph(t *testing.T) {
	const slack = 0.002 // ms: times are kept to the µs
	for seed := range testutil.Seeds(4) {
		g, dir := randomSite(t, rand.New(rand.NewPCG(seed, 11)))
		srv := serveSite(t, "127.0.0.1:0", "127.0.0.1:0", dir)
		for _, c := range []struct {
			proto string
			warm  bool
		}{{"h3", false}, {"h3", true}, {"h2", false}} {
			name := fmt.Sprintf("seed %d, %s", seed, c.proto)
			l := loader(t, srv, c.proto, c.warm)
			r := l.Load(context.Background(), g)
			if c.warm { // again, resumed, the requests in 0-RTT
				name += " warm"
				r = l.Load(context.Background(), g)
				require.True(t, r.Conns[0].Used0RTT, name)
			}
			require.Equal(t, "ok", r.Status, "%s: %s", name, r.Error)
			require.Len(t, r.Resources, len(g.Resources), name)
			end := 0.0
			for i, f := range r.Resources {
				res := g.Resources[i]
				require.Empty(t, f.Error, "%s: %s", name, f.URL)
				require.Equal(t, 200, f.Status, "%s: %s", name, f.URL)
				require.Equal(t, res.Size, f.Bytes, "%s: %s whole", name, f.URL)
				require.GreaterOrEqual(t, f.Sent+slack, f.Due, "%s: %s sent before it was due", name, f.URL)
				end = max(end, f.End)
				if i == 0 {
					continue
				}
				p := r.Resources[res.Parent]
				if res.AfterBytes == g.Resources[res.Parent].Size {
					require.GreaterOrEqual(t, f.Due+slack, p.End+res.GapMs, "%s: %s found after its parent's end, plus %.1f ms", name, f.URL, res.GapMs)
					continue
				}
				require.GreaterOrEqual(t, f.Due+slack, p.FirstByte+res.GapMs, "%s: %s found in its parent's body, after its headers, plus %.1f ms", name, f.URL, res.GapMs)
				require.LessOrEqual(t, f.Due, p.End+res.GapMs+slack, "%s: %s found by its parent's end, plus %.1f ms", name, f.URL, res.GapMs)
			}
			require.InDelta(t, end, r.NetworkMs, slack, name)
			require.InDelta(t, end+g.OnloadGapMs, r.PLTMs, slack, name)
			require.Len(t, r.Lookups, 1, name)
			require.Len(t, r.Conns, 1, "%s: one connection for the origin", name)
			require.Equal(t, len(g.Resources), r.Conns[0].Requests, name)
		}
	}
}

// randomSite writes a random graph's files and returns the graph.
func randomSite(t *testing.T, rng *rand.Rand) (*pageload.Graph, string) {
	dir := t.TempDir()
	base := "https://" + host + "/"
	g := &pageload.Graph{Page: base, OnloadGapMs: float64(rng.IntN(10))}
	sizes := []int64{0, 1, 100, 1200, 16 << 10, 100 << 10, 300 << 10}
	types := []string{"Script", "Stylesheet", "Image", "Font", "Fetch"}
	n := 3 + rng.IntN(23)
	for i := range n {
		size := sizes[1+rng.IntN(len(sizes)-1)]
		if i > 0 {
			size = sizes[rng.IntN(len(sizes))]
		}
		r := pageload.Resource{URL: base, Type: "Document", Parent: -1, Size: size}
		if i > 0 {
			r.URL, r.Type = fmt.Sprintf("%sr%d", base, i), types[rng.IntN(len(types))]
			// Mostly the document's, else a chain or a fan under a
			// recent one.
			if rng.IntN(3) > 0 {
				r.Parent = max(0, i-1-rng.IntN(min(i, 3)))
			} else {
				r.Parent = 0
			}
			ps := g.Resources[r.Parent].Size
			switch rng.IntN(3) {
			case 0:
				r.AfterBytes = ps // after the whole body
			default:
				r.AfterBytes = rng.Int64N(ps + 1)
			}
			r.GapMs = float64(rng.IntN(16))
		}
		g.Resources = append(g.Resources, r)
		body := slices.Repeat([]byte{byte('a' + i%26)}, int(size))
		require.NoError(t, os.WriteFile(filepath.Join(dir, fileOf(i)), body, 0o644))
	}
	require.NoError(t, g.Check())
	return g, dir
}

// fileOf is resource i's file under the site's root: the document is
// its index.
func fileOf(i int) string {
	if i == 0 {
		return "index.html"
	}
	return fmt.Sprintf("r%d", i)
}
