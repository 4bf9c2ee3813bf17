package transport

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"github.com/miekg/dns"
)

// The fuzzers cover every path that parses what a server sends (and the
// URL a user types). Seeds live in testdata/fuzz; crashes found are kept
// there too and rerun by plain 'go test'.

func FuzzReadPrefixed(f *testing.F) {
	f.Add([]byte{0, 12, 0, 0, 0x81, 0x80, 0, 1, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{0, 3, 1, 2, 3})
	f.Add([]byte{0xff, 0xff, 1})
	f.Add([]byte{0})
	f.Fuzz(func(t *testing.T, in []byte) {
		r := bytes.NewReader(in)
		for {
			msg, err := readPrefixed(r)
			if err != nil {
				if !errors.Is(err, ErrMalformed) && err != io.EOF {
					t.Fatalf("unexpected error kind: %v", err)
				}
				return
			}
			if len(msg) < minMsg {
				t.Fatalf("accepted a %d-octet message", len(msg))
			}
			// What was read must be what the prefix said, and re-framing must round-trip.
			framed, err := appendPrefixed(nil, msg)
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
		m, err := decodeDoH(200, ctype, body, asJSON, q)
		if err != nil {
			if Classify(err) != StatusMalformed {
				t.Fatalf("DoH decoding error %v classified as %s", err, Classify(err))
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
		ep := &Endpoint{Host: "127.0.0.1", Port: 443, Path: path}
		q := new(dns.Msg)
		q.SetQuestion("example.test.", dns.TypeA)
		req, err := dohRequest(context.Background(), ep, "GET", false, wire, q)
		if err != nil {
			return // a path that is no URL
		}
		got, err := base64.RawURLEncoding.DecodeString(req.URL.Query().Get("dns"))
		if err != nil || !bytes.Equal(got, wire) {
			t.Fatalf("GET did not carry the message: %v", err)
		}
	})
}

func FuzzParseURL(f *testing.F) {
	for _, s := range []string{"udp://127.0.0.1", "quic://[::1]:853", "https://dns.example/dns-query?x", "h3://a:0", "tls://:853", "ftp://x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ep, err := ParseURL(s)
		if err != nil {
			return
		}
		if ep.Host == "" || ep.Port < 1 || ep.Port > 65535 || ep.Protocol == "" {
			t.Fatalf("accepted %q as %+v", s, ep)
		}
	})
}
