package dnswire

import (
	"context"
	"encoding/base64"
	"net/http"
	"strings"
	"testing"

	"github.com/miekg/dns"
	"github.com/stretchr/testify/require"
)

// rfc8484Query is RFC 8484 §4.1.1's example: ID 0, RD set, one question
// for www.example.com A.
const rfc8484Query = "AAABAAABAAAAAAAAA3d3dwdleGFtcGxlA2NvbQAAAQAB"

// TestDoHRequestsAsRFC8484Shows: a GET carries the message base64url,
// unpadded, in ?dns= beside the URL's own query; a POST carries it whole
// with its media type and length; a server reads both back, padding or
// not, and answers a bad request with the status RFC 8484 implies.
func TestDoHRequestsAsRFC8484Shows(t *testing.T) {
	q := new(dns.Msg)
	q.SetQuestion("www.example.com.", dns.TypeA)
	q.Id = 0
	wire, err := q.Pack()
	require.NoError(t, err)
	require.Equal(t, rfc8484Query, base64.RawURLEncoding.EncodeToString(wire))

	get, err := NewDoHRequest(context.Background(), "https://dnsserver.example.net/dns-query?ct", http.MethodGet, false, wire, q)
	require.NoError(t, err)
	require.Equal(t, "https://dnsserver.example.net/dns-query?ct&dns="+rfc8484Query, get.URL.String())
	require.Equal(t, MimeDNS, get.Header.Get("Accept"))
	back, asJSON, err := ParseDoHRequest(get)
	require.NoError(t, err)
	require.False(t, asJSON)
	require.Equal(t, "www.example.com.", back.Question[0].Name)

	post, err := NewDoHRequest(context.Background(), "https://dnsserver.example.net/dns-query", http.MethodPost, false, wire, q)
	require.NoError(t, err)
	require.Equal(t, MimeDNS, post.Header.Get("Content-Type"))
	require.Equal(t, int64(len(wire)), post.ContentLength)
	back, _, err = ParseDoHRequest(post)
	require.NoError(t, err)
	require.Equal(t, q.Question, back.Question)

	padded, _, err := ParseDoH(DoHRequest{Method: http.MethodGet, RawQuery: "dns=" + rfc8484Query + "=="})
	require.NoError(t, err, "padding tolerated")
	require.Equal(t, q.Question, padded.Question)

	for _, c := range []struct {
		req  DoHRequest
		code int
	}{
		{DoHRequest{Method: http.MethodGet}, http.StatusBadRequest},
		{DoHRequest{Method: http.MethodGet, RawQuery: "dns=!!"}, http.StatusBadRequest},
		{DoHRequest{Method: http.MethodPost, ContentType: "text/plain", Body: wire}, http.StatusUnsupportedMediaType},
		{DoHRequest{Method: http.MethodPost, ContentType: MimeDNS, ContentLength: 1 << 40}, http.StatusRequestEntityTooLarge},
		{DoHRequest{Method: http.MethodPut}, http.StatusMethodNotAllowed},
		{DoHRequest{Method: http.MethodPost, ContentType: MimeDNS, Body: wire[:5]}, http.StatusBadRequest},
	} {
		_, _, err := ParseDoH(c.req)
		var he *HTTPError
		require.ErrorAs(t, err, &he, "%+v", c.req)
		require.Equal(t, c.code, he.Code, "%+v: %s", c.req, he.Msg)
	}

	_, err = NewDoHRequest(context.Background(), "https://x/dns-query#frag", http.MethodGet, false, wire, q)
	require.ErrorContains(t, err, "bad DoH URL")
	j, err := NewDoHRequest(context.Background(), "https://x/resolve", http.MethodPost, true, wire, q)
	require.NoError(t, err)
	require.Equal(t, http.MethodGet, j.Method, "the JSON API is GET only")
	require.True(t, strings.Contains(j.URL.RawQuery, "name=www.example.com.") && strings.Contains(j.URL.RawQuery, "type=A"), j.URL.RawQuery)
}

// TestDecodeDoHResponses: a response is a DNS message only with status
// 200 and its media type; an error status says its body's first line,
// cut short.
func TestDecodeDoHResponses(t *testing.T) {
	a := new(dns.Msg)
	a.SetQuestion("www.example.com.", dns.TypeA)
	a.Response = true
	wire, err := a.Pack()
	require.NoError(t, err)
	m, err := DecodeDoHResponse(http.StatusOK, MimeDNS+"; charset=binary", wire, false, nil)
	require.NoError(t, err)
	require.True(t, m.Response)
	_, err = DecodeDoHResponse(http.StatusOK, "text/html", wire, false, nil)
	require.ErrorContains(t, err, `content type "text/html"`)
	_, err = DecodeDoHResponse(http.StatusServiceUnavailable, "text/plain", []byte("overloaded\nretry later"), false, nil)
	var he *HTTPError
	require.ErrorAs(t, err, &he)
	require.Equal(t, http.StatusServiceUnavailable, he.Code)
	require.Equal(t, "overloaded", he.Msg)
	_, err = DecodeDoHResponse(http.StatusOK, MimeDNS, wire[:7], false, nil)
	require.Error(t, err, "a truncated message is malformed")
}
