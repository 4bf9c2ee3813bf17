package server

import (
	"bytes"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/doxlab/doxlab/internal/testutil"
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
		feed(t, in, func(srv net.Conn) {
			sl, _, _, _ := newPool(10, 10, time.Hour).admit(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}, func() {})
			s.serveStreamConn("tcp", srv, false, sl)
		})
	})
}

// feed writes in to a connection that serve handles and closes it;
// serve must then return, whatever in was.
func feed(t *testing.T, in []byte, serve func(net.Conn)) {
	client, srv := net.Pipe()
	done := make(chan struct{})
	go func() { serve(srv); close(done) }()
	go io.Copy(io.Discard, client)
	client.SetWriteDeadline(time.Now().Add(time.Second))
	client.Write(in)
	client.Close()
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		t.Fatal("connection handler did not return")
	}
}

// h2Seed is a client's side of an HTTP/2 connection: the preface, its
// SETTINGS and what frames writes.
func h2Seed(frames func(fr *http2.Framer, hpk func(fields ...string) []byte)) []byte {
	var b, hb bytes.Buffer
	b.WriteString(http2.ClientPreface)
	fr := http2.NewFramer(&b, nil)
	fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 100})
	enc := hpack.NewEncoder(&hb)
	frames(fr, func(fields ...string) []byte {
		hb.Reset()
		for i := 0; i+1 < len(fields); i += 2 {
			enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
		}
		return append([]byte(nil), hb.Bytes()...)
	})
	return b.Bytes()
}

// pipeTLS stands in for the TLS connection around the fuzzer's bytes.
type pipeTLS struct{ net.Conn }

func (pipeTLS) ConnectionState() tls.ConnectionState { return tls.ConnectionState{} }

// FuzzDoH2Conn feeds bytes to the DoH listener's HTTP/2 connection.
func FuzzDoH2Conn(f *testing.F) {
	get := []string{":method", "GET", ":scheme", "https", ":path", "/dns-query?dns=AAABAAABAAAAAAAAAWEHZXhhbXBsZQAAAQAB", ":authority", "dns.test"}
	f.Add(h2Seed(func(fr *http2.Framer, hpk func(...string) []byte) {
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hpk(get...), EndHeaders: true, EndStream: true})
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: hpk(get...), EndHeaders: true, EndStream: true})
		fr.WriteWindowUpdate(0, 1000)
		fr.WriteWindowUpdate(3, 1000)
	}))
	f.Add(h2Seed(func(fr *http2.Framer, hpk func(...string) []byte) {
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hpk(":method", "POST", ":scheme", "https", ":path", "/dns-query",
			"content-type", "application/dns-message", "content-length", "29"), EndHeaders: true})
		fr.WriteData(1, false, packed("a.example.", 9)[:10])
		fr.WritePing(false, [8]byte{1})
		fr.WriteData(1, true, packed("a.example.", 9)[10:])
		fr.WriteRSTStream(1, http2.ErrCodeCancel)
	}))
	f.Add(h2Seed(func(fr *http2.Framer, hpk func(...string) []byte) {
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hpk(get[:4]...), EndHeaders: false})
		fr.WriteContinuation(1, true, hpk("x", "y"))
		fr.WriteGoAway(0, http2.ErrCodeNo, nil)
	}))
	s := fuzzServer(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		feed(t, in, func(srv net.Conn) { s.serveH2Conn("doh", pipeTLS{srv}, nil, nil) })
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

// FuzzLoadConfig: a config file, whatever its octets, is read and
// checked into a config or one error, never a panic; a config it takes
// checks again the same (Validate fills in defaults it then keeps).
func FuzzLoadConfig(f *testing.F) {
	testutil.FuzzFile(f, []string{"../examples/serve.yaml", "../examples/serve-hardened.yaml"}, []string{
		"listen:\n  udp: 127.0.0.1:0\nanswers:\n  any: 192.0.2.1\nquic:\n  retry: first\nfaults:\n  delay: 10ms\n",
		"listen: {doh: ':0'}\ndoh_path: /q\nanswers: {static: ['a. 60 IN TXT \"x\"'], forward: 'udp://192.0.2.53:53'}\nlimits: {max_conns: 1}\n",
	}, func(t *testing.T, path string) {
		c, err := LoadConfig(path)
		if err != nil {
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("a config taken fails its check again: %v", err)
		}
	})
}
