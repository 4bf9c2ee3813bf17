package pages

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// mixed are loads of every kind a cell counts: both engines, odd and
// even repetitions, a failed load, tokens, 0-RTT and resumption, a
// multi-origin load with an origin over h2 and one with no lookup.
func mixed() []*Sample {
	var out []*Sample
	for rep := range 6 {
		for _, engine := range []string{EngineChromium, EngineDoxlab} {
			for _, tr := range []string{"udp", "doq"} {
				x := load(engine, 100+float64(rep*7%5)+map[string]float64{"udp": 0, "doq": 30}[tr], rep%3 == 0)
				x.Transport, x.Rep, x.H3 = tr, rep, "1rtt"
				x.FCPMs, x.DNSMs, x.DNSBlockingMs, x.DNSTotalMs = x.PLTMs/2, 3+float64(rep), 1.5, 4.25
				x.H3Used0RTT, x.H3Resumed = rep%2 == 0, rep%2 == 0
				x.Lookups, x.LookupsBlocking = 5, 3
				x.Origins = []OriginFacts{
					{Host: "www", Requests: 2, Protocol: "h3", Lookup: LookupUpstream, Conns: 1, Conns0RTT: rep % 2},
					{Host: "tags", Requests: 1, Protocol: "h2", Lookup: LookupUpstream, Conns: 2},
					{Host: "fonts", Requests: 1, Protocol: "h3", Lookup: LookupNone},
				}
				x.ConnsPerOrigin = map[string]int{"www": 1, "tags": 2}
				out = append(out, x)
			}
		}
	}
	failed := load(EngineChromium, 0, false)
	failed.Transport, failed.H3, failed.Status, failed.H3Conn = "doq", "1rtt", "timeout", nil
	return append(out, failed)
}

// TestPointsAreTheSamples: the cells and Chromium's split halves of the
// loads' points are the samples', and so are those of the points
// encoded as a run's summary keeps them and decoded.
func TestPointsAreTheSamples(t *testing.T) {
	samples := mixed()
	want := Summarize(samples)
	require.Len(t, want, 4, "engines × transports")
	ps := Points(samples)
	require.Equal(t, fmt.Sprint(want), fmt.Sprint(SummarizePoints(ps)))

	b, err := EncodePoints(ps)
	require.NoError(t, err)
	again, ok, err := DecodePoints(nil, b)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, ps, again)
	require.Equal(t, fmt.Sprint(want), fmt.Sprint(SummarizePoints(again)))
	require.Equal(t, fmt.Sprint(ChromiumSplitHalf(samples)), fmt.Sprint(ChromiumSplitHalfPoints(again)))
	require.Len(t, ChromiumSplitHalfPoints(again).Cells, 2, "Chromium's even repetitions against its odd, per transport")

	// Decoded after what was there.
	more, ok, err := DecodePoints(again[:3:3], b)
	require.NoError(t, err)
	require.True(t, ok)
	require.Len(t, more, 3+len(ps))

	c := want[0]
	require.Equal(t, [4]float64{1, 1, 1, 2}, [4]float64{c.NotH3, c.NoLookup, c.Lookups - 4, c.LookupsBlocking - 1}, "the multi-origin counts")
	require.InDelta(t, 3.0/6, c.Real0RTT, 1e-9)
	require.InDelta(t, 2.0/6, c.Token(), 1e-9)
	require.InDelta(t, 3.0/18, c.Conns0RTT, 1e-9, "three 0-RTT connections of 18")
}

// TestDecodePointsRefuses: an encoding of another format, or whose
// columns disagree, gives no points.
func TestDecodePointsRefuses(t *testing.T) {
	_, ok, err := DecodePoints(nil, []byte("not gob"))
	require.Error(t, err)
	require.False(t, ok)

	ps := Points(mixed())
	for name, spoil := range map[string]func(*pointsWire){
		"format":      func(w *pointsWire) { w.Format++ },
		"a column":    func(w *pointsWire) { w.PLT = w.PLT[1:] },
		"flags":       func(w *pointsWire) { w.Flags = w.Flags[1:] },
		"a count":     func(w *pointsWire) { w.Oe = append(w.Oe, 1) },
		"a key":       func(w *pointsWire) { w.Key[0] = int32(len(w.Keys)) },
		"a key below": func(w *pointsWire) { w.Key[1] = -1 },
		"a status":    func(w *pointsWire) { w.Status[2] = int32(len(w.Statuses)) },
	} {
		t.Run(name, func(t *testing.T) {
			w := wireOf(ps)
			spoil(&w)
			b := encodeWire(t, w)
			dst := Points(mixed()[:1])
			out, ok, _ := DecodePoints(dst, b)
			require.False(t, ok)
			require.Equal(t, dst, out, "what was there is left as it was")
		})
	}
}

// The points' wire, spoiled in the test and encoded.
func wireOf(ps []Point) pointsWire {
	b, err := EncodePoints(ps)
	if err != nil {
		panic(err)
	}
	var w pointsWire
	if err := decodeWire(b, &w); err != nil {
		panic(err)
	}
	return w
}

func encodeWire(t *testing.T, w pointsWire) []byte {
	b, err := w.encode()
	require.NoError(t, err)
	return b
}
