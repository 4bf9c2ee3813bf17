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
// lookups, the page's connection and its origins are decoded; the
// navigations, the stub's records, the graph and the replay are not.
func TestDecodeForAnalysisKeepsWhatTheReportReads(t *testing.T) {
	x := &Sample{Task: Task{Profile: "fiber", Page: "o5", Transport: "doq", H3: "0rtt", Rep: 3}, Status: "ok", PLTMs: 210, FCPMs: 120, DNSMs: 11,
		Load: &browser.Load{PLTMs: 199}, WarmUp: &browser.Load{PLTMs: 250}, DNS: []*server.Record{{QName: "a.test.", QType: "A"}},
		Graph: &pageload.Graph{}, Replay: &pageload.Result{}, Lookups: 5, LookupsBlocking: 2, DNSBlockingMs: 9,
		H3Conn: &server.Record{TokenUsed: true, SNI: "a.test"}, H3Used0RTT: true, Origins: []OriginFacts{{Requests: 2}}, ServerQueries: map[string]int{"doq": 5}}
	raw, err := json.Marshal(x)
	require.NoError(t, err)
	y, err := DecodeForAnalysis(raw)
	require.NoError(t, err)
	require.Nil(t, y.Load)
	require.Nil(t, y.WarmUp)
	require.Nil(t, y.DNS)
	require.Nil(t, y.Graph)
	require.Nil(t, y.Replay)
	x.Load, x.WarmUp, x.DNS, x.Graph, x.Replay = nil, nil, nil, nil, nil
	require.Equal(t, x, y, "everything else as stored")
	_, err = DecodeForAnalysis([]byte(`{"status": 3}`))
	require.Error(t, err)
}
