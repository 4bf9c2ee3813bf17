package pages

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	jsonv2 "github.com/go-json-experiment/json"
	jsonv1 "github.com/go-json-experiment/json/v1"
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

// TestAnalysedFailsAsItDid: decoding for analysis without the first
// version's check of the whole value first fails where it failed with
// it, for a load cut short at every octet and for values of the wrong
// kind anywhere, and decodes the same where neither fails.
func TestAnalysedFailsAsItDid(t *testing.T) {
	x := &Sample{Task: Task{Profile: "fiber", Page: "o5", Transport: "doq", H3: "0rtt", Rep: 3}, Status: "ok", PLTMs: 210,
		Load: &browser.Load{PLTMs: 199}, DNS: []*server.Record{{QName: "a.test.", QType: "A"}}, H3Conn: &server.Record{TokenUsed: true},
		Origins: []OriginFacts{{Host: "a.test", Requests: 2}}, ConnsPerOrigin: map[string]int{"a.test": 2}}
	raw, err := json.Marshal(x)
	require.NoError(t, err)
	var inputs [][]byte
	for i := range raw {
		inputs = append(inputs, raw[:i])
	}
	for _, from := range []string{`"rep":3`, `"status":"ok"`, `"plt_ms":210`, `"requests":2`, `"token_accepted":true`, `"a.test":2`} {
		require.Contains(t, string(raw), from)
		for _, to := range []string{`"rep":"3"`, `"status":1`, `"plt_ms":[1]`, `"requests":{}`, `"token_accepted":"x"`, `"a.test":2.5`} {
			inputs = append(inputs, bytes.Replace(raw, []byte(from), []byte(to), 1))
		}
	}
	for _, in := range inputs {
		was, now := analysed{Sample: new(Sample)}, analysed{Sample: new(Sample)}
		wasErr := jsonv2.Unmarshal(in, &was, jsonv1.DefaultOptionsV1())
		nowErr := UnmarshalAnalysed(in, &now)
		require.Equal(t, wasErr == nil, nowErr == nil, "%s: %v, %v", in, wasErr, nowErr)
		if nowErr == nil {
			require.Equal(t, was, now, "%s", in)
		}
	}
}

// TestConnectionsSummedAsDecoded: the connections per origin are summed
// as they are read, as the map they are would sum (encoding/json's, the
// oracle): null and an origin with null are none; a count that is no
// integer, or a value that is no object, fails the load's decoding as
// the map's would; what follows is read on.
func TestConnectionsSummedAsDecoded(t *testing.T) {
	for _, in := range []string{`{"a.test":2,"b.test":3}`, `{}`, `null`, `{"a.test":null,"b.test":-1}`, `{"a.test":{"x":1}}`,
		`{"a.test":1.5}`, `{"a.test":"2"}`, `[1]`, `3`, `{"a.test":1e2}`, `{"a.test":99999999999999999999}`, `{"a.test":true}`} {
		var m map[string]int
		wantErr := json.Unmarshal([]byte(in), &m) != nil
		y, err := DecodeForAnalysis([]byte(`{"status":"ok","conns_per_origin":` + in + `,"lookups":4}`))
		if wantErr {
			require.Error(t, err, in)
			continue
		}
		require.NoError(t, err, in)
		sum := 0
		for _, n := range m {
			sum += n
		}
		require.Equal(t, sum, y.WebConns(), in)
		require.Equal(t, 4, y.Lookups, "%s: read on after it", in)
	}
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

// TestTaskKeyKeepsChromiumsOldKeys: a Chromium task is keyed as before
// there were engines (a store of those resumes), another engine's task
// names it; an unset engine is Chromium.
func TestTaskKeyKeepsChromiumsOldKeys(t *testing.T) {
	task := Task{Profile: "fiber", Page: "wiki", Transport: "doq", StubState: "warm", H3: "0rtt", DNSMode: "stub", Rep: 4}
	require.Equal(t, EngineChromium, task.EngineName())
	require.Equal(t, "fiber|wiki|doq|warm|0rtt|stub|4", task.Key())
	task.Engine = EngineChromium
	require.Equal(t, "fiber|wiki|doq|warm|0rtt|stub|4", task.Key(), "named or not, Chromium's key")
	task.Engine = EngineDoxlab
	require.Equal(t, "fiber|wiki|doq|warm|0rtt|stub|4|doxlab", task.Key())
}

// TestLoadCounts: the web connections are the lightened sum and the
// per-origin map's; an origin counts as spared by an ORIGIN frame only
// if it was requested, looked up by nobody, and announced.
func TestLoadCounts(t *testing.T) {
	s := &Sample{ConnsPerOrigin: map[string]int{"a.test": 2, "b.test": 1}, Origins: []OriginFacts{
		{Host: "a.test", Requests: 3, Lookup: "stub", Protocol: "h3"},
		{Host: "b.test", Requests: 1, Lookup: LookupNone, Announced: true, Protocol: "h3"},
		{Host: "c.test", Requests: 1, Lookup: LookupNone, Protocol: "h2"},
		{Host: "d.test", Requests: 0, Lookup: LookupNone, Announced: true},
	}}
	require.Equal(t, 3, s.WebConns())
	s.Lighten(&H3Token{TokenUsed: true}, ConnSum(s.WebConns()))
	require.Equal(t, 3, s.WebConns(), "the sum, once the map is gone")
	require.True(t, s.H3TokenUsed())
	require.Equal(t, 1, s.OriginsByFrame(), "b: requested, no lookup, announced")
}

// TestCellShares: a cell's token share is of its OK loads; it is
// multi-origin if its loads touched more than one origin, resolved or
// not; DoUDP with H3 1-RTT is every cell's baseline.
func TestCellShares(t *testing.T) {
	require.Zero(t, Cell{}.Token(), "no loads, no share")
	require.Equal(t, 0.25, Cell{Tokens: []bool{true, false, false, false}}.Token())
	require.False(t, Cell{Lookups: 1}.MultiOrigin())
	require.True(t, Cell{Lookups: 1, NoLookup: 0.5}.MultiOrigin(), "an origin an ORIGIN frame spared the lookup of")
	require.True(t, Cell{Transport: "udp", H3: "1rtt"}.Baseline())
	require.False(t, Cell{Transport: "udp", H3: "0rtt"}.Baseline())
}

// FuzzDecodeForAnalysis: whatever a store holds as a page load, the
// report's decoding (UnmarshalAnalysed, without the first version's
// check of the whole value) fails where that check failed and decodes
// the same where neither does, as TestAnalysedFailsAsItDid checks for a
// few inputs; and what it decodes reads without a panic.
func FuzzDecodeForAnalysis(f *testing.F) {
	x := &Sample{Task: Task{Profile: "fiber", Page: "o5", Transport: "doq", H3: "0rtt", Rep: 3}, Status: "ok", PLTMs: 210,
		Load: &browser.Load{PLTMs: 199}, DNS: []*server.Record{{QName: "a.test.", QType: "A"}}, H3Conn: &server.Record{TokenUsed: true},
		Origins: []OriginFacts{{Host: "a.test", Requests: 2}}, ConnsPerOrigin: map[string]int{"a.test": 2}}
	raw, _ := json.Marshal(x)
	f.Add(raw)
	f.Add([]byte(`{"status": 3}`))
	f.Add([]byte(`{"conns_per_origin": {"a": -5, "b": 9223372036854775807}, "load": []}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		was, now := analysed{Sample: new(Sample)}, analysed{Sample: new(Sample)}
		wasErr := jsonv2.Unmarshal(in, &was, jsonv1.DefaultOptionsV1())
		nowErr := UnmarshalAnalysed(in, &now)
		if (wasErr == nil) != (nowErr == nil) {
			t.Fatalf("%s: checked whole %v, analysed %v", in, wasErr, nowErr)
		}
		if nowErr != nil {
			return
		}
		if !reflect.DeepEqual(was, now) {
			t.Fatalf("%s: decoded %+v, checked whole %+v", in, now.Sample, was.Sample)
		}
		y, err := DecodeForAnalysis(in)
		if err != nil {
			t.Fatalf("%s: analysed, then not: %v", in, err)
		}
		y.WebConns()
		y.H3TokenUsed()
	})
}
