package dnswire

import (
	"net/http"
	"testing"

	"github.com/miekg/dns"
	"github.com/stretchr/testify/require"
)

// TestParseType: a mnemonic in any case, or RFC 3597's TYPEnnn up to
// 65535; nothing else, not a sign, not a number past 16 bits, not TYPE
// alone.
func TestParseType(t *testing.T) {
	for s, want := range map[string]uint16{
		"A": dns.TypeA, "aaaa": dns.TypeAAAA, "Https": dns.TypeHTTPS, "ANY": dns.TypeANY,
		"TYPE65": dns.TypeHTTPS, "type1": dns.TypeA, "TYPE0": 0, "TYPE65535": 65535, "TYPE065": 65,
	} {
		got, ok := ParseType(s)
		require.True(t, ok, s)
		require.Equal(t, want, got, s)
	}
	for _, s := range []string{"", "TYPE", "TYPE65536", "TYPE-1", "TYPE+1", "TYPE 1", "65", "AA", "TYPE1x", "A "} {
		_, ok := ParseType(s)
		require.False(t, ok, "%q", s)
	}
}

// TestJSONQueryTypes: the JSON API's type= takes a mnemonic, TYPEnnn
// or the number alone, and refuses a number with anything after it
// (once read as its leading digits) or past 16 bits (once an error
// only by luck of the scanner).
func TestJSONQueryTypes(t *testing.T) {
	for raw, want := range map[string]uint16{
		"name=example.com&type=HTTPS":  dns.TypeHTTPS,
		"name=example.com&type=65":     dns.TypeHTTPS,
		"name=example.com&type=type65": dns.TypeHTTPS,
		"name=example.com":             dns.TypeA,
	} {
		q, asJSON, err := ParseDoH(DoHRequest{Method: http.MethodGet, RawQuery: raw})
		require.NoError(t, err, raw)
		require.True(t, asJSON, raw)
		require.Equal(t, want, q.Question[0].Qtype, raw)
	}
	for _, raw := range []string{"name=example.com&type=12abc", "name=example.com&type=65536", "name=example.com&type=-1", "name=example.com&type=NOPE"} {
		_, _, err := ParseDoH(DoHRequest{Method: http.MethodGet, RawQuery: raw})
		var he *HTTPError
		require.ErrorAs(t, err, &he, raw)
		require.Equal(t, http.StatusBadRequest, he.Code, raw)
	}
}
