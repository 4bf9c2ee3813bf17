package server_test

import (
	"bytes"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/doxlab/doxlab/server"
)

// TestDoH2Conformance runs h2spec's 145 checks of RFC 7540 and RFC 7541
// against the DoH listener's HTTP/2, then asks it as a client would:
// nothing h2spec sent may have left it broken.
func TestDoH2Conformance(t *testing.T) {
	bin := testutil.Need(t, "h2spec", "go install github.com/summerwind/h2spec/cmd/h2spec@v2.2.1+incompatible")
	ts := start(t, nil)
	out, err := exec.Command(bin, "-h", "127.0.0.1", "-p", ts.port("doh"), "-t", "-k", "-P", "/dns-query", "-o", "2").CombinedOutput()
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	t.Log(lines[len(lines)-1])
	require.NoError(t, err, "%s", out)
	require.Contains(t, lines[len(lines)-1], " 0 failed")
	ask(t, ts.url("doh"), ts.pool(), "after.example")
}

// h2client is a raw HTTP/2 client: the tests write frames the way a
// misbehaving or demanding client would.
type h2client struct {
	t   *testing.T
	c   *tls.Conn
	fr  *http2.Framer
	hb  bytes.Buffer
	enc *hpack.Encoder
}

func dialH2(t *testing.T, ts *testServer, settings ...http2.Setting) *h2client {
	c, err := tls.Dial("tcp", ts.Addr("doh").String(), &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	h := &h2client{t: t, c: c, fr: http2.NewFramer(c, c)}
	h.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	h.enc = hpack.NewEncoder(&h.hb)
	_, err = io.WriteString(c, http2.ClientPreface)
	require.NoError(t, err)
	require.NoError(t, h.fr.WriteSettings(settings...))
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	return h
}

// get opens stream id with a GET of name's query.
func (h *h2client) get(id uint32, name string) {
	q, err := query(name).Pack()
	require.NoError(h.t, err)
	h.hb.Reset()
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", "dns.test"},
		{":path", "/dns-query?dns=" + base64.RawURLEncoding.EncodeToString(q)}} {
		h.enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	require.NoError(h.t, h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: h.hb.Bytes(), EndHeaders: true, EndStream: true}))
}

// outcome reads frames until every stream in ids has ended, and returns
// each one's status (200, 400...) or RST_STREAM code, and its DATA.
func (h *h2client) outcome(ids ...uint32) (status map[uint32]string, data map[uint32][]byte) {
	status, data = map[uint32]string{}, map[uint32][]byte{}
	open := map[uint32]bool{}
	for _, id := range ids {
		open[id] = true
	}
	for len(open) > 0 {
		f, err := h.fr.ReadFrame()
		require.NoError(h.t, err)
		id := f.Header().StreamID
		if !open[id] && id != 0 {
			continue
		}
		switch f := f.(type) {
		case *http2.MetaHeadersFrame:
			status[id] = f.PseudoValue("status")
			if f.StreamEnded() {
				delete(open, id)
			}
		case *http2.DataFrame:
			data[id] = append(data[id], f.Data()...)
			if f.StreamEnded() {
				delete(open, id)
			}
		case *http2.RSTStreamFrame:
			status[id] = f.ErrCode.String()
			delete(open, id)
		case *http2.SettingsFrame:
			if !f.IsAck() {
				h.fr.WriteSettingsAck()
			}
		case *http2.GoAwayFrame:
			h.t.Fatalf("GOAWAY %v", f.ErrCode)
		}
	}
	return status, data
}

// TestDoH2StreamLimit: while answers take time, streams beyond
// max_streams are refused (REFUSED_STREAM, counted), the others answered,
// and the connection goes on serving.
func TestDoH2StreamLimit(t *testing.T) {
	ts := start(t, func(c *server.Config) {
		c.Limits.MaxStreams = 8
		c.Faults.Delay = 300 * time.Millisecond
	})
	h := dialH2(t, ts)
	var ids []uint32
	for i := range 12 {
		id := uint32(2*i + 1)
		ids = append(ids, id)
		h.get(id, fmt.Sprintf("s%d.example", i))
	}
	status, _ := h.outcome(ids...)
	count := map[string]int{}
	for _, s := range status {
		count[s]++
	}
	require.Equal(t, map[string]int{"200": 8, "REFUSED_STREAM": 4}, count)
	h.get(25, "again.example")
	status, data := h.outcome(25)
	require.Equal(t, "200", status[25])
	require.NotEmpty(t, data[25])
}

// TestDoH2FlowControl: a client that opens its window ten octets at a
// time gets the whole answer, in frames no larger than its window.
func TestDoH2FlowControl(t *testing.T) {
	ts := start(t, nil)
	h := dialH2(t, ts, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 10})
	h.get(1, "window.example")
	var body []byte
	for {
		f, err := h.fr.ReadFrame()
		require.NoError(t, err)
		if d, ok := f.(*http2.DataFrame); ok {
			require.LessOrEqual(t, len(d.Data()), 10)
			body = append(body, d.Data()...)
			if d.StreamEnded() {
				break
			}
			require.NoError(t, h.fr.WriteWindowUpdate(1, uint32(len(d.Data()))))
		}
	}
	m := parseAnswer(t, body)
	require.Equal(t, "window.example.", m.Question[0].Name)
}

// TestDoH2RequestsThatNeverEnd: over HTTP/2 as over HTTP/1.1, a POST
// whose body never comes is answered 400 after handshake_timeout, one
// announced as a terabyte 413 at once.
func TestDoH2RequestsThatNeverEnd(t *testing.T) {
	ts := start(t, func(c *server.Config) { c.Limits.HandshakeTimeout = 500 * time.Millisecond; c.Metrics = "127.0.0.1:0" })
	h := dialH2(t, ts)
	for i, length := range []string{"40", "1000000000000"} {
		h.hb.Reset()
		for _, f := range [][2]string{{":method", "POST"}, {":scheme", "https"}, {":authority", "dns.test"}, {":path", "/dns-query"},
			{"content-type", "application/dns-message"}, {"content-length", length}} {
			h.enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
		}
		require.NoError(t, h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: uint32(2*i + 1), BlockFragment: h.hb.Bytes(), EndHeaders: true}))
	}
	start := time.Now()
	status, _ := h.outcome(3)
	require.Equal(t, "413", status[3])
	status, _ = h.outcome(1)
	require.Equal(t, "400", status[1])
	require.GreaterOrEqual(t, time.Since(start), 400*time.Millisecond, "held until the deadline")
	resp, err := http.Get("http://" + ts.Addr("metrics").String() + "/metrics")
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := string(b)
	require.Contains(t, m, `doxlab_server_refusals_total{listener="doh",reason="slow"} 1`)
	require.Contains(t, m, `doxlab_server_refusals_total{listener="doh",reason="bad-request"} 1`, "the 413, as over HTTP/1.1")
}

func parseAnswer(t *testing.T, b []byte) *dns.Msg {
	m := new(dns.Msg)
	if err := m.Unpack(b); err != nil || len(m.Question) == 0 {
		t.Errorf("not an answer (%v): %q", err, b)
		return &dns.Msg{Question: []dns.Question{{}}}
	}
	return m
}

// TestDoH2Clients: Go's own HTTP/2 client, GET and POST, many at once on
// one connection, and a path that is not the DoH endpoint.
func TestDoH2Clients(t *testing.T) {
	ts := start(t, nil)
	tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, Protocols: new(http.Protocols)}
	tr.Protocols.SetHTTP2(true)
	c := &http.Client{Transport: tr}
	base := "https://" + ts.Addr("doh").String()
	errs := make(chan error, 50)
	for i := range 50 {
		go func() {
			q, _ := query(fmt.Sprintf("c%d.example", i)).Pack()
			var resp *http.Response
			var err error
			if i%2 == 0 {
				resp, err = c.Get(base + "/dns-query?dns=" + base64.RawURLEncoding.EncodeToString(q))
			} else {
				resp, err = c.Post(base+"/dns-query", "application/dns-message", bytes.NewReader(q))
			}
			if err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if m := parseAnswer(t, b); resp.StatusCode != 200 || resp.ProtoMajor != 2 || m.Question[0].Name != fmt.Sprintf("c%d.example.", i) {
					err = fmt.Errorf("%d: %s", resp.StatusCode, b)
				}
			}
			errs <- err
		}()
	}
	for range 50 {
		require.NoError(t, <-errs)
	}
	resp, err := c.Get(base + "/elsewhere")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	require.Len(t, ts.records("query", "doh2"), 50)
}
