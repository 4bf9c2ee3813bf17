package dnsrtt

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/doxlab/doxlab/internal/stats"
	"github.com/doxlab/doxlab/measure"
	"github.com/doxlab/doxlab/store"
	"github.com/doxlab/doxlab/testbed"
	"github.com/stretchr/testify/require"
)

// TestCellsPortable pins what a summary keeps of a fixed set of rows
// under madeBy's versions: a change to cells.add, to the distributions'
// encoding or to what a summary holds fails it until cellsProjection
// (or summaryFormat) is bumped, and a doxlab that makes other cells
// then reads no summary another made. The rows hold what the cells tell
// apart: every outcome, missing values, non-finite ones, a link and
// none, a vantage point's details, and a cell past stats.ExactLimit.
func TestCellsPortable(t *testing.T) {
	fiber, err := testbed.LookupProfile("fiber")
	require.NoError(t, err)
	cs := newCells(map[string]testbed.Profile{"run-a": fiber}, measure.DefaultAnswers())
	rng := rand.New(rand.NewPCG(5, 3))
	ms := func(hi float64) *float64 { v := math.Round(rng.Float64()*hi*1000) / 1000; return &v }
	for i := range 4 * stats.ExactLimit {
		r := store.Row{RunID: []string{"run-a", "run-b"}[i%2], Target: fmt.Sprintf("192.0.2.%d", rng.IntN(3)),
			Transport: []string{"udp", "doq", "doh3"}[rng.IntN(3)], Condition: "fresh", Status: "ok", Rcode: "NOERROR",
			BytesSent: 60 + int64(rng.IntN(40)), BytesReceived: 120, PacketsSent: 1, PacketsReceived: 1 + int64(rng.IntN(2))}
		if i%2 == 0 {
			r.Profile = "fiber"
		} else {
			r.Vantage, r.VantageLocation, r.VantageNetwork, r.VantageASN = "v1", "Berlin", "cable", 3320
		}
		if i < 3*stats.ExactLimit { // both runs' cells of it sketched
			r.Target, r.Transport = "192.0.2.9", "doh3"
		}
		r.TotalMs, r.TotalRTT, r.HandshakeRTT, r.ResolveRTT = ms(60), ms(5), ms(2), ms(2)
		if rng.IntN(4) > 0 {
			r.ProbeRTTMs = ms(20)
		}
		if rng.IntN(3) == 0 {
			r.WireMs = ms(50)
		}
		switch rng.IntN(24) {
		case 0:
			r.Rcode = "REFUSED"
		case 1:
			r.Rcode = "NXDOMAIN"
		case 2:
			r.Status, r.Rcode = "timeout", ""
		case 3:
			r.Status = "canceled"
		case 4:
			r.Status = "truncated"
		case 5:
			r.TotalRTT = nil
		case 6:
			r.HandshakeRTT, r.ResolveRTT = nil, nil
		case 7:
			r.TotalMs = nil
		case 8:
			nan := math.NaN()
			r.WireMs = &nan
		}
		cs.add(&r)
	}
	sketched := 0
	for _, g := range cs.order {
		if !g.Ms.Exact() {
			sketched++
		}
	}
	require.Equal(t, 2, sketched, "the big cell of each run is sketched")
	h := sha256.New()
	fmt.Fprintf(h, "%d %d %d\n", cs.skipped, cs.folded, cs.canceled)
	for _, g := range cs.order {
		fmt.Fprintf(h, "%q %q %q %q %q %q %t %d %d", g.Profile, g.Vantage, g.Where, g.Target, g.Transport, g.Condition, g.Link != nil, g.N, g.Answered)
		for _, k := range slices.Sorted(maps.Keys(g.Failed)) {
			fmt.Fprintf(h, " %s=%d", k, g.Failed[k])
		}
		for _, d := range g.dists() {
			b, err := d.MarshalBinary()
			require.NoError(t, err)
			fmt.Fprintf(h, " %x", b)
		}
		fmt.Fprintln(h)
	}
	got := hex.EncodeToString(h.Sum(nil))
	digests := map[string]string{
		"dns cells: encoding 1, projection 1, max-cells 50000": "a4e8572b065929d27254a4cf3660d55bdbc58277ac14d26edd33bb029cd64b0f",
	}
	want, ok := digests[madeBy()]
	switch {
	case !ok:
		t.Fatalf("%q has no digest: add it with %s", madeBy(), got)
	case want != got:
		t.Fatalf("what the rows make of cells changed under %q (digest %s, was %s): bump cellsProjection and add its digest", madeBy(), got, want)
	}
}
