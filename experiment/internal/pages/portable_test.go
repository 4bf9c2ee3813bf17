package pages

import (
	"fmt"
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/testutil"
)

// TestPointsPortable: a dataset keeps its page loads' points under
// PointsPortable, and another doxlab of the same PointsPortable reads
// them in place of the loads, so what a point is of a load must not
// change under one name. Thirteen stored loads (real ones from the web
// experiment's quick run, and one of them as a timeout) are decoded and
// projected as the analysis does; a change that moves any of their
// points fails here until pointProjection (or pointsFormat) is bumped
// and the digest added.
func TestPointsPortable(t *testing.T) {
	testutil.Projected(t, "testdata/loads.jsonl.gz", PointsPortable, map[string]string{
		"web-load points: encoding 2, projection 1": "ebff690394a4b7422739dd44c8c8cfca837f1334080ffb520de476548e4c63b2",
	}, func(w io.Writer, line []byte) {
		x, err := DecodeForAnalysis(line)
		require.NoError(t, err)
		p := PointOf(x)
		fmt.Fprintf(w, "%+v %q %d %d %v %v %v %v %v %d %d %d %d %d %d %d\n", p.Key.Value(), p.Status.Value(), p.Rep, p.Flags,
			p.PLT, p.FCP, p.DNS, p.DNSBlocking, p.DNSTotal, p.Lookups, p.LookupsBlocking, p.Conns, p.NotH3, p.NoLookup, p.OriginConns, p.OriginConns0RTT)
	})
}
