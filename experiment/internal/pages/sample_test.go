package pages

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/browser"
	"github.com/doxlab/doxlab/pageload"
	"github.com/doxlab/doxlab/server"
)

// TestDecodeForAnalysisKeepsWhatTheReportReads: the task, status, times,
// lookups, the page's connection's facts and its origins are decoded;
// the navigations, the stub's records, the graph, the replay and the
// server's queries are not, and of the connection record and the
// connections per origin only the token and the sum are kept.
func TestDecodeForAnalysisKeepsWhatTheReportReads(t *testing.T) {
	x := &Sample{Task: Task{Profile: "fiber", Page: "o5", Transport: "doq", H3: "0rtt", Rep: 3}, Status: "ok", PLTMs: 210, FCPMs: 120, DNSMs: 11,
		Load: &browser.Load{PLTMs: 199}, WarmUp: &browser.Load{PLTMs: 250}, DNS: []*server.Record{{QName: "a.test.", QType: "A"}},
		Graph: &pageload.Graph{}, Replay: &pageload.Result{}, Lookups: 5, LookupsBlocking: 2, DNSBlockingMs: 9,
		H3Conn: &server.Record{TokenUsed: true, SNI: "a.test"}, H3Used0RTT: true, Origins: []OriginFacts{{Host: "a.test", Requests: 2}}, ServerQueries: map[string]int{"doq": 5},
		ConnsPerOrigin: map[string]int{"a.test": 2, "b.test": 1}}
	raw, err := json.Marshal(x)
	require.NoError(t, err)
	y, err := DecodeForAnalysis(raw)
	require.NoError(t, err)
	require.Nil(t, y.Load)
	require.Nil(t, y.WarmUp)
	require.Nil(t, y.DNS)
	require.Nil(t, y.Graph)
	require.Nil(t, y.Replay)
	require.Nil(t, y.ServerQueries)
	require.Nil(t, y.H3Conn, "of the page's connection, only its token")
	require.True(t, y.H3TokenUsed())
	require.Nil(t, y.ConnsPerOrigin, "only their sum")
	require.Equal(t, 3, y.WebConns())
	require.Equal(t, x.WebConns(), y.WebConns())
	x.Load, x.WarmUp, x.DNS, x.Graph, x.Replay, x.ServerQueries, x.H3Conn, x.ConnsPerOrigin = nil, nil, nil, nil, nil, nil, nil, nil
	x.h3Token, x.conns = true, 3
	require.Equal(t, x, y, "everything else as stored")
	_, err = DecodeForAnalysis([]byte(`{"status": 3}`))
	require.Error(t, err)
}

// TestOriginCounts: a load's origins summed as the report counts them:
// an origin not wholly over HTTP/3, or requested with no lookup reaching
// the stub, counts only if it was requested; a lookup an ORIGIN frame
// spared is one requested with no lookup on a connection that announced
// it; every web connection the servers saw counts, requested or not.
func TestOriginCounts(t *testing.T) {
	s := &Sample{Origins: []OriginFacts{
		{Host: "page.test", Requests: 3, Protocol: "h3", Lookup: LookupUpstream, Conns: 1, Conns0RTT: 1},
		{Host: "cdn.test", Requests: 5, Protocol: "h3", Lookup: LookupNone, Announced: true},
		{Host: "img.test", Requests: 2, Protocol: "h2+h3", Lookup: LookupNone, Conns: 2},
		{Host: "ads.test", Requests: 1, Protocol: "h3", Lookup: LookupStubCache, Conns: 1},
		{Host: "gone.test", Protocol: "", Lookup: LookupNone, Announced: true, Conns: 1, Conns0RTT: 1}, // a connection, nothing requested
	}}
	notH3, noLookup, conns, conns0RTT := s.OriginCounts()
	require.Equal(t, []int{1, 2, 5, 2}, []int{notH3, noLookup, conns, conns0RTT})
	require.Equal(t, 1, s.OriginsByFrame(), "cdn.test: announced, and never looked up")
	s.ConnsPerOrigin = map[string]int{"page.test": 1, "img.test": 2}
	require.Equal(t, 3, s.WebConns())
}
