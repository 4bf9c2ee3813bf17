package transport

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"github.com/miekg/dns"
)

const (
	mimeDNS  = "application/dns-message" // RFC 8484 §6
	mimeJSON = "application/dns-json"    // the JSON API of Google and Cloudflare
)

// dohRequest builds the HTTP request for one query: RFC 8484 GET with the
// message base64url-encoded in ?dns= (no padding, §4.1), POST with the
// message as body, or the JSON API's GET ?name=&type=.
func dohRequest(ctx context.Context, ep *Endpoint, method string, asJSON bool, wire []byte, q *dns.Msg) (*http.Request, error) {
	u, err := url.Parse("https://" + ep.HostPort() + ep.Path)
	if err != nil || u.Fragment != "" || u.Opaque != "" {
		return nil, fmt.Errorf("bad DoH path %q", ep.Path)
	}
	addQuery := func(kv string) {
		if u.RawQuery != "" {
			u.RawQuery += "&"
		}
		u.RawQuery += kv
	}
	var body io.Reader
	accept := mimeDNS
	switch {
	case asJSON:
		accept = mimeJSON
		if len(q.Question) == 0 {
			return nil, fmt.Errorf("the JSON API needs a question")
		}
		v := url.Values{"name": {q.Question[0].Name}, "type": {dns.TypeToString[q.Question[0].Qtype]}}
		if q.CheckingDisabled {
			v.Set("cd", "1")
		}
		if o := q.IsEdns0(); o != nil && o.Do() {
			v.Set("do", "1")
		}
		addQuery(v.Encode())
		if method == http.MethodPost {
			method = http.MethodGet // the JSON API is GET only
		}
	case method == http.MethodPost:
		body = bytes.NewReader(wire)
	default:
		addQuery("dns=" + base64.RawURLEncoding.EncodeToString(wire))
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return nil, fmt.Errorf("building request: %w", err)
	}
	req.Header.Set("Accept", accept)
	if body != nil {
		req.Header.Set("Content-Type", mimeDNS)
		req.ContentLength = int64(len(wire))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(wire)), nil }
	}
	return req, nil
}

// readDoHBody reads a response body, refusing one larger than a DNS
// message can be.
func readDoHBody(resp *http.Response) ([]byte, error) {
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxMsg+1))
	resp.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("reading response body: %w", err)
	}
	return body, nil
}

// decodeDoH turns a complete DoH response into a DNS message.
func decodeDoH(status int, contentType string, body []byte, asJSON bool, q *dns.Msg) (*dns.Msg, error) {
	if status != http.StatusOK {
		msg := strings.TrimSpace(string(body))
		if i := strings.IndexByte(msg, '\n'); i >= 0 {
			msg = msg[:i]
		}
		if len(msg) > 80 {
			msg = msg[:80] + "..."
		}
		return nil, &HTTPError{Code: status, Msg: msg}
	}
	if len(body) > maxMsg {
		return nil, malformed("response body exceeds %d octets", maxMsg)
	}
	mt, _, _ := mime.ParseMediaType(contentType)
	if asJSON {
		if mt != mimeJSON && mt != "application/json" {
			return nil, malformed("content type %q, want %s", contentType, mimeJSON)
		}
		return decodeDNSJSON(body, q)
	}
	if mt != mimeDNS {
		return nil, malformed("content type %q, want %s", contentType, mimeDNS)
	}
	return unpack(body)
}

// dnsJSON is the JSON API's answer format.
type dnsJSON struct {
	Status   *int `json:"Status"`
	TC       bool `json:"TC"`
	RD       bool `json:"RD"`
	RA       bool `json:"RA"`
	AD       bool `json:"AD"`
	CD       bool `json:"CD"`
	Question []struct {
		Name string `json:"name"`
		Type uint16 `json:"type"`
	} `json:"Question"`
	Answer    []jsonRR `json:"Answer"`
	Authority []jsonRR `json:"Authority"`
}

type jsonRR struct {
	Name string `json:"name"`
	Type uint16 `json:"type"`
	TTL  uint32 `json:"TTL"`
	Data string `json:"data"`
}

// decodeDNSJSON rebuilds a DNS message from a JSON API answer.
func decodeDNSJSON(body []byte, q *dns.Msg) (*dns.Msg, error) {
	var j dnsJSON
	if err := json.Unmarshal(body, &j); err != nil {
		return nil, malformed("JSON answer: %v", err)
	}
	if j.Status == nil {
		return nil, malformed("JSON answer has no Status")
	}
	m := new(dns.Msg)
	m.Id = q.Id
	m.Response, m.Opcode = true, dns.OpcodeQuery
	m.Rcode = *j.Status
	m.Truncated, m.RecursionDesired, m.RecursionAvailable = j.TC, j.RD, j.RA
	m.AuthenticatedData, m.CheckingDisabled = j.AD, j.CD
	for _, jq := range j.Question {
		m.Question = append(m.Question, dns.Question{Name: dns.Fqdn(jq.Name), Qtype: jq.Type, Qclass: dns.ClassINET})
	}
	if len(m.Question) == 0 {
		m.Question = q.Question
	}
	for _, sec := range []struct {
		in  []jsonRR
		out *[]dns.RR
	}{{j.Answer, &m.Answer}, {j.Authority, &m.Ns}} {
		for _, r := range sec.in {
			rr, err := dns.NewRR(fmt.Sprintf("%s %d IN %s %s", dns.Fqdn(r.Name), r.TTL, dns.TypeToString[r.Type], r.Data))
			if err != nil || rr == nil {
				return nil, malformed("JSON record %s %d %q: %v", r.Name, r.Type, r.Data, err)
			}
			*sec.out = append(*sec.out, rr)
		}
	}
	return m, nil
}
