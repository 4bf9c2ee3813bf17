package dnswire

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
	"strconv"
	"strings"

	"github.com/miekg/dns"
)

const (
	MimeDNS  = "application/dns-message" // RFC 8484 §6
	MimeJSON = "application/dns-json"    // the JSON API of Google and Cloudflare
)

// HTTPError is a DoH exchange that failed at the HTTP layer.
type HTTPError struct {
	Code int
	Msg  string
}

func (e *HTTPError) Error() string {
	if e.Msg != "" {
		return fmt.Sprintf("HTTP %d: %s", e.Code, e.Msg)
	}
	return fmt.Sprintf("HTTP %d", e.Code)
}

// NewDoHRequest builds the HTTP request for one query to target
// (https://host:port/path): RFC 8484 GET with the message base64url-encoded
// in ?dns= (no padding, §4.1), POST with the message as body, or the JSON
// API's GET ?name=&type=.
func NewDoHRequest(ctx context.Context, target, method string, asJSON bool, wire []byte, q *dns.Msg) (*http.Request, error) {
	u, err := url.Parse(target)
	if err != nil || u.Fragment != "" || u.Opaque != "" {
		return nil, fmt.Errorf("bad DoH URL %q", target)
	}
	addQuery := func(kv string) {
		if u.RawQuery != "" {
			u.RawQuery += "&"
		}
		u.RawQuery += kv
	}
	var body io.Reader
	accept := MimeDNS
	switch {
	case asJSON:
		accept = MimeJSON
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
		method = http.MethodGet // the JSON API is GET only
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
		req.Header.Set("Content-Type", MimeDNS)
		req.ContentLength = int64(len(wire))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(wire)), nil }
	}
	return req, nil
}

// ReadBody reads a DoH body, refusing one larger than a DNS message can be.
func ReadBody(r io.ReadCloser) ([]byte, error) {
	body, err := io.ReadAll(io.LimitReader(r, MaxMsg+1))
	r.Close()
	if err != nil {
		return nil, fmt.Errorf("reading body: %w", err)
	}
	return body, nil
}

// DecodeDoHResponse turns a complete DoH response into a DNS message.
func DecodeDoHResponse(status int, contentType string, body []byte, asJSON bool, q *dns.Msg) (*dns.Msg, error) {
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
	if len(body) > MaxMsg {
		return nil, Malformed("response body exceeds %d octets", MaxMsg)
	}
	mt, _, _ := mime.ParseMediaType(contentType)
	if asJSON {
		if mt != MimeJSON && mt != "application/json" {
			return nil, Malformed("content type %q, want %s", contentType, MimeJSON)
		}
		return DecodeJSON(body, q)
	}
	if mt != MimeDNS {
		return nil, Malformed("content type %q, want %s", contentType, MimeDNS)
	}
	return Unpack(body)
}

// Unpack parses a DNS message; any failure is the peer's.
func Unpack(wire []byte) (*dns.Msg, error) {
	m := new(dns.Msg)
	if err := m.Unpack(wire); err != nil {
		return nil, Malformed("%v", err)
	}
	return m, nil
}

// ParseDoHRequest extracts the query from a DoH request, as a server
// does: GET ?dns= (base64url; padding tolerated), POST with an
// application/dns-message body, or the JSON API's GET ?name=&type=. The
// error is an *HTTPError with the status to answer.
func ParseDoHRequest(r *http.Request) (q *dns.Msg, asJSON bool, err error) {
	req := DoHRequest{Method: r.Method, RawQuery: r.URL.RawQuery, ContentType: r.Header.Get("Content-Type"), ContentLength: r.ContentLength}
	if r.Method == http.MethodPost && r.ContentLength <= MaxMsg {
		if req.Body, err = ReadBody(r.Body); err != nil {
			return nil, false, &HTTPError{Code: http.StatusBadRequest, Msg: err.Error()}
		}
	}
	return ParseDoH(req)
}

// DoHRequest is what ParseDoH needs of a request, whatever server read it.
type DoHRequest struct {
	Method, RawQuery, ContentType string
	ContentLength                 int64 // -1 if not announced
	Body                          []byte
}

// ParseDoH is ParseDoHRequest on a request already read whole.
func ParseDoH(r DoHRequest) (q *dns.Msg, asJSON bool, err error) {
	bad := func(code int, format string, a ...any) (*dns.Msg, bool, error) {
		return nil, false, &HTTPError{Code: code, Msg: fmt.Sprintf(format, a...)}
	}
	var wire []byte
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		qs, _ := url.ParseQuery(r.RawQuery)
		if name := qs.Get("name"); name != "" && qs.Get("dns") == "" {
			return parseJSONQuery(qs)
		}
		s := qs.Get("dns")
		if s == "" {
			return bad(http.StatusBadRequest, "missing dns parameter")
		}
		if wire, err = base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "=")); err != nil {
			return bad(http.StatusBadRequest, "dns parameter is not base64url: %v", err)
		}
	case http.MethodPost:
		if mt, _, _ := mime.ParseMediaType(r.ContentType); mt != MimeDNS {
			return bad(http.StatusUnsupportedMediaType, "content type %q, want %s", r.ContentType, MimeDNS)
		}
		if r.ContentLength > MaxMsg {
			// Refused before reading: waiting for a body announced as a
			// terabyte would hold the request until the client gives up.
			return bad(http.StatusRequestEntityTooLarge, "content length %d exceeds %d", r.ContentLength, MaxMsg)
		}
		if wire = r.Body; len(wire) > MaxMsg {
			return bad(http.StatusRequestEntityTooLarge, "query exceeds %d octets", MaxMsg)
		}
	default:
		return bad(http.StatusMethodNotAllowed, "method %s not allowed", r.Method)
	}
	if q, err = Unpack(wire); err != nil {
		return bad(http.StatusBadRequest, "%v", err)
	}
	return q, false, nil
}

func parseJSONQuery(qs url.Values) (*dns.Msg, bool, error) {
	name := qs.Get("name")
	if _, ok := dns.IsDomainName(name); !ok {
		return nil, true, &HTTPError{Code: http.StatusBadRequest, Msg: fmt.Sprintf("bad name %q", name)}
	}
	qtype := dns.TypeA
	if t := qs.Get("type"); t != "" {
		// The JSON API also takes the number alone (type=65), whole:
		// "12abc" is not 12.
		v, ok := ParseType(t)
		if !ok {
			n, err := strconv.ParseUint(t, 10, 16)
			v, ok = uint16(n), err == nil
		}
		if !ok {
			return nil, true, &HTTPError{Code: http.StatusBadRequest, Msg: fmt.Sprintf("bad type %q", t)}
		}
		qtype = v
	}
	q := new(dns.Msg)
	q.SetQuestion(dns.Fqdn(name), qtype)
	q.CheckingDisabled = qs.Get("cd") == "1" || qs.Get("cd") == "true"
	if qs.Get("do") == "1" || qs.Get("do") == "true" {
		q.SetEdns0(1232, true)
	}
	return q, true, nil
}

// dnsJSON is the JSON API's answer format.
type dnsJSON struct {
	Status    *int     `json:"Status"`
	TC        bool     `json:"TC"`
	RD        bool     `json:"RD"`
	RA        bool     `json:"RA"`
	AD        bool     `json:"AD"`
	CD        bool     `json:"CD"`
	Question  []jsonQ  `json:"Question"`
	Answer    []jsonRR `json:"Answer,omitempty"`
	Authority []jsonRR `json:"Authority,omitempty"`
}

type jsonQ struct {
	Name string `json:"name"`
	Type uint16 `json:"type"`
}

type jsonRR struct {
	Name string `json:"name"`
	Type uint16 `json:"type"`
	TTL  uint32 `json:"TTL"`
	Data string `json:"data"`
}

// EncodeJSON renders an answer in the JSON API's format.
func EncodeJSON(m *dns.Msg) []byte {
	j := dnsJSON{Status: &m.Rcode, TC: m.Truncated, RD: m.RecursionDesired, RA: m.RecursionAvailable, AD: m.AuthenticatedData, CD: m.CheckingDisabled}
	for _, q := range m.Question {
		j.Question = append(j.Question, jsonQ{Name: q.Name, Type: q.Qtype})
	}
	conv := func(rrs []dns.RR) (out []jsonRR) {
		for _, rr := range rrs {
			h := rr.Header()
			data := strings.TrimPrefix(rr.String(), h.String())
			out = append(out, jsonRR{Name: h.Name, Type: h.Rrtype, TTL: h.Ttl, Data: data})
		}
		return out
	}
	j.Answer, j.Authority = conv(m.Answer), conv(m.Ns)
	b, _ := json.Marshal(j)
	return b
}

// DecodeJSON rebuilds a DNS message from a JSON API answer to q.
func DecodeJSON(body []byte, q *dns.Msg) (*dns.Msg, error) {
	var j dnsJSON
	if err := json.Unmarshal(body, &j); err != nil {
		return nil, Malformed("JSON answer: %v", err)
	}
	if j.Status == nil {
		return nil, Malformed("JSON answer has no Status")
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
				return nil, Malformed("JSON record %s %d %q: %v", r.Name, r.Type, r.Data, err)
			}
			*sec.out = append(*sec.out, rr)
		}
	}
	return m, nil
}
