package web

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/server"
)

// load is one OK 0-RTT load of insta on fiber over DoUDP by engine, its
// connection validated by a token or not.
func load(engine string, plt float64, token bool) *Sample {
	t := Task{Profile: "fiber", Page: "insta", Transport: "udp", StubState: "cold", H3: "0rtt", DNSMode: "stub"}
	if engine != EngineChromium {
		t.Engine = engine
	}
	return &Sample{Task: t, Status: "ok", PLTMs: plt, H3Conn: &server.Record{TokenUsed: token}}
}

// TestFidelityMatchesTokens: a load with a token is a round trip faster
// than one without, and which it is is a coin flip for both engines, so
// the engines are compared under one mix of the two; where an engine
// lacks one kind, the plain medians are compared.
func TestFidelityMatchesTokens(t *testing.T) {
	loads := []*Sample{
		// Chromium: 1 of 3 with a token; the loader: 2 of 3, as fast.
		load(EngineChromium, 100, true), load(EngineChromium, 200, false), load(EngineChromium, 210, false),
		load(EngineDoxlab, 100, true), load(EngineDoxlab, 104, true), load(EngineDoxlab, 205, false),
	}
	cells := Summarize(loads)
	require.Len(t, cells, 2)
	require.InDelta(t, 1.0/3, cells[0].Token, 1e-9, "chromium's share of loads with a token")
	require.InDelta(t, 2.0/3, cells[1].Token, 1e-9)

	f := CompareEngines(cells)
	require.Len(t, f.Cells, 1)
	c := f.Cells[0]
	require.True(t, c.Matched)
	// Both engines weighted 3 of 6 with a token (medians of an even
	// count are the upper middle): chromium 0.5·100 + 0.5·210, the loader
	// 0.5·104 + 0.5·205.
	require.InDelta(t, 155, c.Chromium, 1e-9)
	require.InDelta(t, 154.5, c.Doxlab, 1e-9)
	require.InDelta(t, 100*(154.5/155-1), c.ErrPct, 1e-9)
	require.InDelta(t, 100*(104.0/200-1), c.RawErrPct, 1e-9, "the plain medians are a round trip apart")
	require.Equal(t, 1, f.Matched)

	// No load of Chromium's had a token: nothing to match.
	loads[0].H3Conn.TokenUsed = false
	c = CompareEngines(Summarize(loads)).Cells[0]
	require.False(t, c.Matched)
	require.InDelta(t, 200, c.Chromium, 1e-9)
	require.InDelta(t, 104, c.Doxlab, 1e-9)
	require.Equal(t, c.RawErrPct, c.ErrPct)
}
