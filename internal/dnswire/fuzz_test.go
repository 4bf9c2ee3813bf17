package dnswire

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// The fuzzers cover every path that parses what a peer sends: framing and
// DoH answers (client side), DoH requests (server side). Seeds live in
// testdata/fuzz; crashes found are kept there and rerun by plain 'go test'.

func FuzzReadPrefixed(f *testing.F) {
	f.Add([]byte{0, 12, 0, 0, 0x81, 0x80, 0, 1, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{0, 3, 1, 2, 3})
	f.Add([]byte{0xff, 0xff, 1})
	f.Add([]byte{0})
	f.Fuzz(func(t *testing.T, in []byte) {
		r := bytes.NewReader(in)
		for {
			msg, err := ReadPrefixed(r)
			if err != nil {
				if !errors.Is(err, ErrMalformed) && !errors.Is(err, io.EOF) {
					t.Fatalf("unexpected error kind: %v", err)
				}
				return
			}
			if len(msg) < MinMsg {
				t.Fatalf("accepted a %d-octet message", len(msg))
			}
			// What was read must be what the prefix said, and re-framing must round-trip.
			framed, err := AppendPrefixed(nil, msg)
			if err != nil || int(binary.BigEndian.Uint16(framed)) != len(msg) {
				t.Fatalf("re-framing failed: %v", err)
			}
		}
	})
}

func FuzzDecodeDoH(f *testing.F) {
	q := new(dns.Msg)
	q.SetQuestion("example.test.", dns.TypeA)
	r := new(dns.Msg)
	r.SetReply(q)
	good, _ := r.Pack()
	f.Add(good, "application/dns-message", false)
	f.Add([]byte(`{"Status":0,"Answer":[{"name":"example.test.","type":1,"TTL":5,"data":"192.0.2.1"}]}`), "application/dns-json", true)
	f.Add([]byte(`{"Status":3}`), "application/json", true)
	f.Add([]byte("<html>"), "text/html", false)
	f.Fuzz(func(t *testing.T, body []byte, ctype string, asJSON bool) {
		m, err := DecodeDoHResponse(200, ctype, body, asJSON, q)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("DoH decoding error %v is not ErrMalformed", err)
			}
			return
		}
		if m == nil {
			t.Fatal("nil message without error")
		}
		if _, err := m.Pack(); err != nil && !asJSON {
			t.Fatalf("accepted message does not pack: %v", err)
		}
	})
}

func FuzzDoHRequest(f *testing.F) {
	f.Add([]byte{0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 7, 'e', 'x', 'a', 'm', 'p', 'l', 'e', 0, 0, 1, 0, 1}, "/dns-query")
	f.Add([]byte{0xfb, 0xff, 0xfe}, "/q?x=1")
	f.Fuzz(func(t *testing.T, wire []byte, path string) {
		q := new(dns.Msg)
		q.SetQuestion("example.test.", dns.TypeA)
		req, err := NewDoHRequest(context.Background(), "https://127.0.0.1:443"+path, "GET", false, wire, q)
		if err != nil {
			return // a path that is no URL
		}
		got, err := base64.RawURLEncoding.DecodeString(req.URL.Query().Get("dns"))
		if err != nil || !bytes.Equal(got, wire) {
			t.Fatalf("GET did not carry the message: %v", err)
		}
	})
}

func FuzzParseDoHRequest(f *testing.F) {
	q := new(dns.Msg)
	q.SetQuestion("example.test.", dns.TypeA)
	wire, _ := q.Pack()
	f.Add("GET", "/dns-query?dns="+base64.RawURLEncoding.EncodeToString(wire), "", []byte(nil))
	f.Add("POST", "/dns-query", MimeDNS, wire)
	f.Add("GET", "/dns-query?name=example.test&type=AAAA&do=1", "", []byte(nil))
	f.Add("PUT", "/dns-query", "", []byte("x"))
	f.Fuzz(func(t *testing.T, method, target, ctype string, body []byte) {
		if !strings.HasPrefix(target, "/") || strings.ContainsAny(method, " \r\n") || method == "" {
			return
		}
		r, err := http.NewRequest(method, "https://dns.test"+target, bytes.NewReader(body))
		if err != nil {
			return
		}
		r.Header.Set("Content-Type", ctype)
		q, _, err := ParseDoHRequest(r)
		if err != nil {
			var he *HTTPError
			if !errors.As(err, &he) || he.Code < 400 || he.Code > 499 {
				t.Fatalf("bad request answered with %v", err)
			}
			return
		}
		if q == nil {
			t.Fatal("nil query without error")
		}
		_ = httptest.NewRecorder()
	})
}

// peekReader is a stream that can be peeked at, as quic-go's are.
type peekReader struct{ *bytes.Reader }

func (p peekReader) Peek(b []byte) (int, error) {
	pos, _ := p.Seek(0, io.SeekCurrent)
	n, err := io.ReadFull(p.Reader, b)
	p.Seek(pos, io.SeekStart)
	if errors.Is(err, io.ErrUnexpectedEOF) {
		err = io.EOF
	}
	return n, err
}

// FuzzDNSStream is a server's side of a DNS stream on HTTP/3: told apart
// from a request stream without consuming it, then one framed query.
func FuzzDNSStream(f *testing.F) {
	q := new(dns.Msg)
	q.SetQuestion("example.org.", dns.TypeA)
	q.Id = 0
	wire, _ := q.Pack()
	good, _ := AppendDNSStreamQuery(nil, wire)
	f.Add(good)
	f.Add(good[:5])
	f.Add([]byte{0x01, 0x10}) // a HEADERS frame: a request stream
	f.Add([]byte{0x80, 0x00, 0xd0, 0xc0, 0x00})
	f.Add([]byte{0xc0})
	f.Fuzz(func(t *testing.T, in []byte) {
		p := peekReader{bytes.NewReader(in)}
		ok, err := IsDNSStream(p)
		if p.Len() != len(in) {
			t.Fatalf("telling the stream apart consumed %d octets", len(in)-p.Len())
		}
		if err != nil || !ok {
			return
		}
		if !bytes.HasPrefix(in, good[:4]) {
			t.Fatalf("took % x for the signal", in[:min(4, len(in))])
		}
		if err := SkipDNSStreamSignal(p); err != nil {
			t.Fatal(err)
		}
		msg, err := ReadPrefixed(p)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, io.EOF) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		again, err := AppendDNSStreamQuery(nil, msg)
		if err != nil || !bytes.HasPrefix(in, again) {
			t.Fatalf("re-framing does not give back what was read: %v", err)
		}
	})
}
