package server

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// The listeners' input paths under fuzzing: whatever arrives, the server
// must neither panic nor hang. Seeds and crashers live in testdata/fuzz.

func fuzzServer(t testing.TB) *Server {
	s, err := New(&Config{Listen: Listen{UDP: "127.0.0.1:0"}, Answers: Answers{Any: "192.0.2.7"}, Limits: Limits{IdleTimeout: 200 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func packed(name string, id uint16) []byte {
	q := new(dns.Msg)
	q.SetQuestion(name, dns.TypeA)
	q.Id = id
	b, _ := q.Pack()
	return b
}

// FuzzStreamConn feeds bytes to a Do53-over-TCP connection (DoT is the
// same path behind TLS).
func FuzzStreamConn(f *testing.F) {
	q := packed("a.example.", 7)
	f.Add(append([]byte{0, byte(len(q))}, q...))
	f.Add([]byte{0, 3, 1, 2, 3})
	f.Add([]byte{0xff, 0xff, 0})
	f.Add(append(append([]byte{0, byte(len(q))}, q...), 0, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))
	s := fuzzServer(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		client, srv := net.Pipe()
		done := make(chan struct{})
		sl, _, _ := newPool(10, 10).admit(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}, func() {})
		go func() { s.serveStreamConn("tcp", srv, false, sl); close(done) }()
		go io.Copy(io.Discard, client)
		client.SetWriteDeadline(time.Now().Add(time.Second))
		client.Write(in)
		client.Close()
		select {
		case <-done:
		case <-time.After(3 * time.Second):
			t.Fatal("connection handler did not return")
		}
	})
}

func FuzzDoHHandler(f *testing.F) {
	f.Add("GET", "/dns-query?dns=AAABAAABAAAAAAAAAWEHZXhhbXBsZQAAAQAB", "", []byte(nil))
	f.Add("POST", "/dns-query", "application/dns-message", packed("a.example.", 0))
	f.Add("GET", "/dns-query?name=a.example&type=65", "", []byte(nil))
	s := fuzzServer(f)
	h := s.dohHandler("doh")
	f.Fuzz(func(t *testing.T, method, target, ctype string, body []byte) {
		if !strings.HasPrefix(target, "/") {
			return
		}
		r, err := http.NewRequest(method, "https://dns.test"+target, bytes.NewReader(body))
		if err != nil {
			return
		}
		r.Header.Set("Content-Type", ctype)
		w := httptest.NewRecorder()
		h(w, r)
		if w.Code != 200 && (w.Code < 400 || w.Code > 499) {
			t.Fatalf("answered %d", w.Code)
		}
	})
}

// FuzzDoQQuery covers what a DoQ stream's message goes through: parsing,
// RFC 9250's checks, and the answer.
func FuzzDoQQuery(f *testing.F) {
	f.Add(packed("a.example.", 0))
	f.Add(packed("a.example.", 9))
	f.Add([]byte{0, 0, 1, 0, 0, 1})
	s := fuzzServer(f)
	f.Fuzz(func(t *testing.T, wire []byte) {
		q, err := doqQuery(wire)
		if err != nil {
			return
		}
		r := s.handle(s.ctx, q, &Record{Transport: "doq"}, time.Now())
		if r == nil {
			t.Fatal("no answer")
		}
		if _, err := r.Pack(); err != nil {
			t.Fatalf("answer does not pack: %v", err)
		}
	})
}
