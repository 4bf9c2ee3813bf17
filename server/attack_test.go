//go:build unix

package server_test

// Attacks on doxlab serve, each bounded in count and time and sent to
// loopback only. The attacker speaks from 127.0.0.2 and up, the
// well-behaved client from 127.0.0.1, so per-source limits can tell them
// apart. Each test asserts that the server keeps serving the good client
// (≥ 99 % answered, each within its 2 s timeout) and logs the figures.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"github.com/quic-go/quic-go/quicvarint"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/doxlab/doxlab/internal/dnswire"
	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/doxlab/doxlab/server"
	"github.com/doxlab/doxlab/transport"
)

// attacker is the n-th attacking source address, 127.0.0.(n+2).
func attacker(n int) net.IP { return net.IPv4(127, 0, 0, byte(n+2)) }

// goodClient asks over url on a fresh connection every 20 ms until done,
// from 127.0.0.1.
type goodClient struct {
	rss        int // KiB when the attack began
	asked      atomic.Int64
	answered   int
	slowest    time.Duration
	stop, done chan struct{}
}

// startGood starts a good client asking over url. Its deadline is a
// bound on time: scaled, and it makes the tests that start one timed, run
// apart from the other test lanes (beside all three, one question of 23
// went unanswered in HTTP/2 slowloris under -race).
func startGood(t *testing.T, url string, opts transport.Options) *goodClient {
	t.Helper()
	opts.Timeout = testutil.Scaled(2 * time.Second)
	g := &goodClient{rss: rssKiB(t), stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(g.done)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-g.stop:
				return
			case <-tick.C:
			}
			tr, err := transport.New(url, opts)
			if err != nil {
				panic(err)
			}
			start := time.Now()
			rec, err := tr.Exchange(context.Background(), query(fmt.Sprintf("good%d.example", i)))
			tr.Close()
			g.asked.Add(1)
			if err == nil && rec.Status == transport.StatusOK {
				g.answered++
				g.slowest = max(g.slowest, time.Since(start))
			}
		}
	}()
	return g
}

// goodAsks is how many questions the good client asks at least while an
// attack is on, so that 1 % of them is a question.
const goodAsks = 21

// await returns once the good client has asked goodAsks questions, or
// after a minute: an attack lasts until the good client has been measured
// against it, however slowly a race build on a busy machine asks (20 in
// 4 s of slowloris, each waiting its turn).
func (g *goodClient) await() {
	for deadline := time.Now().Add(time.Minute); g.asked.Load() < goodAsks && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
}

// finish stops the client, once it has asked enough, and asserts it was
// served.
func (g *goodClient) finish(t *testing.T) {
	t.Helper()
	g.await()
	close(g.stop)
	<-g.done
	rss := rssKiB(t) - g.rss
	asked := int(g.asked.Load())
	t.Logf("good client: %d/%d answered, slowest %v; RSS +%d KiB (attacker and server both in this process)", g.answered, asked, g.slowest.Round(time.Millisecond), rss)
	require.GreaterOrEqual(t, asked, goodAsks)
	limit := 256 << 10 // KiB
	if testutil.Race {
		// The race detector's shadow memory costs five to ten times the
		// heap: 200 idle QUIC connections grew RSS by 285 MiB there, run
		// alone, against 13-35 MiB without it.
		limit *= 10
	}
	require.Less(t, rss, limit, "RSS grew by more than %d MiB", limit>>10)
	require.GreaterOrEqual(t, g.answered*100, asked*99, "the good client lost more than 1 %%")
}

// rssKiB is this process's resident set.
func rssKiB(t *testing.T) int {
	b, err := os.ReadFile("/proc/self/status")
	require.NoError(t, err)
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return n
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// TestSpoofedDatagramFromItself: one datagram whose source is the server's
// own address. The server answers it once, and must drop its own answer
// (QR=1) rather than answer that too, for ever.
func TestSpoofedDatagramFromItself(t *testing.T) {
	testutil.NeedRoot(t, "a raw socket needs root")
	ts := start(t, nil)
	srv := ts.Addr("udp").(*net.UDPAddr)
	q := query("loop.example")
	payload, _ := q.Pack()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_RAW, syscall.IPPROTO_RAW)
	require.NoError(t, err)
	defer syscall.Close(fd)
	// IPv4 and UDP headers by hand: the kernel fills in the IP checksum
	// and total length (raw(7)); a UDP checksum of 0 means none.
	pkt := make([]byte, 28, 28+len(payload))
	pkt[0], pkt[8], pkt[9] = 0x45, 64, syscall.IPPROTO_UDP
	copy(pkt[12:16], srv.IP.To4())
	copy(pkt[16:20], srv.IP.To4())
	binary.BigEndian.PutUint16(pkt[20:], uint16(srv.Port))
	binary.BigEndian.PutUint16(pkt[22:], uint16(srv.Port))
	binary.BigEndian.PutUint16(pkt[24:], uint16(8+len(payload)))
	pkt = append(pkt, payload...)
	to := &syscall.SockaddrInet4{}
	copy(to.Addr[:], srv.IP.To4())
	require.NoError(t, syscall.Sendto(fd, pkt, 0, to))
	time.Sleep(500 * time.Millisecond)
	n := len(ts.records("query", "udp"))
	t.Logf("answers in 500 ms after one spoofed datagram: %d", n)
	require.Equal(t, 1, n, "the query is answered once and the answer is not")
	require.Len(t, ts.records("refusal", "udp"), 1)
	require.Equal(t, string(server.ReasonResponse), ts.records("refusal", "udp")[0].Reason)
}

// TestConnectionsThatSayNothing: 1,100 connections from 11 sources that
// send half a length prefix (TCP) or never start TLS (DoT) against the
// default limit of 1,000 must not lock a new client out.
func TestConnectionsThatSayNothing(t *testing.T) {
	ts := start(t, nil)
	for _, listener := range []string{"tcp", "dot"} {
		t.Run(listener, func(t *testing.T) {
			g := startGood(t, ts.url(listener), ts.pool())
			var conns []net.Conn
			defer func() {
				for _, c := range conns {
					c.Close()
				}
			}()
			for i := range 1100 {
				d := net.Dialer{LocalAddr: &net.TCPAddr{IP: attacker(i % 11)}}
				c, err := d.Dial("tcp", ts.Addr(listener).String())
				require.NoError(t, err)
				if listener == "tcp" {
					c.Write([]byte{0})
				}
				conns = append(conns, c)
			}
			time.Sleep(2 * time.Second)
			open := 0
			for _, c := range conns {
				c.SetReadDeadline(time.Now().Add(time.Millisecond))
				if _, err := c.Read(make([]byte, 1)); isTimeout(err) {
					open++
				}
			}
			t.Logf("attacking connections still open after 2 s: %d of 1100", open)
			require.LessOrEqual(t, open, 1000)
			g.finish(t)
		})
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// dialQUIC opens a QUIC connection from src.
func dialQUIC(t *testing.T, src net.IP, addr net.Addr, alpn string) (*quic.Conn, error) {
	pc, err := net.ListenUDP("udp", &net.UDPAddr{IP: src})
	require.NoError(t, err)
	tr := &quic.Transport{Conn: pc}
	t.Cleanup(func() { tr.Close(); pc.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return tr.Dial(ctx, addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{alpn}}, &quic.Config{MaxIdleTimeout: 30 * time.Second})
}

// TestIdleQUICConnections: twice the limit of QUIC connections that
// complete the handshake and then say nothing, from 12 sources, must not
// lock a new client out of DoQ or DoH/3.
func TestIdleQUICConnections(t *testing.T) {
	ts := start(t, func(c *server.Config) { c.Limits.MaxConns = 100 })
	for _, listener := range []string{"doq", "doh3"} {
		t.Run(listener, func(t *testing.T) {
			alpn := map[string]string{"doq": "doq", "doh3": "h3"}[listener]
			g := startGood(t, ts.url(listener), ts.pool())
			var conns []*quic.Conn
			for i := range 200 {
				if c, err := dialQUIC(t, attacker(i%12), ts.Addr(listener), alpn); err == nil {
					conns = append(conns, c)
				}
			}
			time.Sleep(500 * time.Millisecond)
			open := 0
			for _, c := range conns {
				if c.Context().Err() == nil {
					open++
				}
			}
			t.Logf("idle attacking connections still open: %d of %d (limit 100)", open, len(conns))
			require.LessOrEqual(t, open, 100)
			g.finish(t)
		})
	}
}

// TestDoHConnectionLimit: refused connections must not free slots when
// they close (they did: 4,500 held against 1,000).
func TestDoHConnectionLimit(t *testing.T) {
	ts := start(t, func(c *server.Config) { c.Limits.MaxConns = 50 })
	g := startGood(t, ts.url("doh"), ts.pool())
	var conns []*tls.Conn
	for i := range 200 {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: attacker(i % 20)}, Timeout: 2 * time.Second}
		c, err := tls.DialWithDialer(d, "tcp", ts.Addr("doh").String(), &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}})
		if err == nil {
			conns = append(conns, c)
			defer c.Close()
		}
	}
	time.Sleep(300 * time.Millisecond)
	open := 0
	for _, c := range conns {
		c.SetReadDeadline(time.Now().Add(5 * time.Millisecond))
		// h2 sends SETTINGS first: drain until a timeout (open) or an
		// error (closed).
		var err error
		for err == nil {
			_, err = c.Read(make([]byte, 4096))
		}
		if isTimeout(err) {
			open++
		}
	}
	t.Logf("DoH connections held: %d against a limit of 50 (%d handshakes completed)", open, len(conns))
	require.LessOrEqual(t, open, 50)
	g.finish(t)
}

// TestDoHRequestsThatNeverEnd: a POST whose body never comes, or is
// announced as a terabyte, is answered, not held for ever.
func TestDoHRequestsThatNeverEnd(t *testing.T) {
	ts := start(t, nil)
	for name, tc := range map[string]struct {
		length string
		code   int
	}{"no-body": {"40", http.StatusBadRequest}, "terabyte": {"1000000000000", http.StatusRequestEntityTooLarge}} {
		t.Run(name, func(t *testing.T) {
			c, err := tls.Dial("tcp", ts.Addr("doh").String(), &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}})
			require.NoError(t, err)
			defer c.Close()
			fmt.Fprintf(c, "POST /dns-query HTTP/1.1\r\nHost: dns.test\r\nContent-Type: application/dns-message\r\nContent-Length: %s\r\n\r\n", tc.length)
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			start := time.Now()
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			require.NoError(t, err, "held without an answer")
			resp.Body.Close()
			t.Logf("answered %d after %v", resp.StatusCode, time.Since(start).Round(time.Millisecond))
			require.Equal(t, tc.code, resp.StatusCode)
		})
	}
}

// heapKiB is the heap in use after a collection.
func heapKiB() int {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int(ms.HeapInuse >> 10)
}

// TestDoQStalledStreams: 40 connections × 100 streams that announce a
// 65,535-octet query and send one octet of it. The server allocates as
// octets arrive, so this costs it little; it used to allocate the whole
// announced message at once (heap +256 MiB here).
func TestDoQStalledStreams(t *testing.T) {
	ts := start(t, nil)
	g := startGood(t, ts.url("doq"), ts.pool())
	rss, heap := rssKiB(t), heapKiB()
	var wg sync.WaitGroup
	for i := range 40 {
		c, err := dialQUIC(t, attacker(i%4), ts.Addr("doq"), "doq")
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				str, err := c.OpenStreamSync(context.Background())
				if err != nil {
					return
				}
				str.Write([]byte{0xff, 0xff, 0})
			}
		}()
	}
	wg.Wait()
	time.Sleep(500 * time.Millisecond)
	heap, rss = heapKiB()-heap, rssKiB(t)-rss
	// Both ends run in this process: the figures bound the server's share.
	t.Logf("40 connections × 100 stalled streams: heap +%d KiB (%d KiB a connection), RSS +%d KiB", heap, heap/40, rss)
	require.Less(t, heap, 40*2048, "more than 2 MiB of heap a stalled connection")
	require.Less(t, rss, 256<<10, "RSS grew by more than 256 MiB")
	g.finish(t)
}

// TestDoQConnectionBuffer: unfinished queries beyond limits.max_conn_buffer
// close the connection with DOQ_EXCESSIVE_LOAD.
func TestDoQConnectionBuffer(t *testing.T) {
	ts := start(t, func(c *server.Config) { c.Limits.MaxConnBuffer = 64 << 10 })
	c, err := dialQUIC(t, net.IPv4(127, 0, 0, 1), ts.Addr("doq"), "doq")
	require.NoError(t, err)
	for range 20 {
		str, err := c.OpenStream()
		if err != nil {
			break
		}
		str.Write(append([]byte{0xff, 0xff}, make([]byte, 8<<10)...))
	}
	requireClosedWith(t, c, 0x4)
}

// TestDoQStreamRules: RFC 9250 allows one query per bidirectional stream;
// a unidirectional stream, a second message, trailing octets or a
// response (QR=1) sent as a query close the connection with
// DOQ_PROTOCOL_ERROR.
func TestDoQStreamRules(t *testing.T) {
	ts := start(t, nil)
	q := query("rules.example")
	q.Id = 0
	b, _ := q.Pack()
	q.Response = true
	resp, _ := q.Pack()
	for name, send := range map[string]func(*quic.Conn) error{
		"response": func(c *quic.Conn) error {
			str, err := c.OpenStream()
			if err == nil {
				_, err = str.Write(prefix(resp))
				str.Close()
			}
			return err
		},
		"unidirectional": func(c *quic.Conn) error {
			str, err := c.OpenUniStream()
			if err == nil {
				_, err = str.Write(make([]byte, 64<<10))
			}
			return err
		},
		"two-queries": func(c *quic.Conn) error {
			str, err := c.OpenStream()
			if err == nil {
				_, err = str.Write(append(prefix(b), prefix(b)...))
			}
			return err
		},
		"trailing-octets": func(c *quic.Conn) error {
			str, err := c.OpenStream()
			if err == nil {
				_, err = str.Write(append(prefix(b), 1, 2, 3))
			}
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			c, err := dialQUIC(t, net.IPv4(127, 0, 0, 1), ts.Addr("doq"), "doq")
			require.NoError(t, err)
			send(c) // may fail as the server closes the connection
			requireClosedWith(t, c, 0x2)
		})
	}
	// A query with FIN right after it is still fine.
	require.Equal(t, transport.StatusOK, ask(t, ts.url("doq"), ts.pool(), "after.example").Status)
}

// TestRefusalsAreCounted: every refusal shows in the metrics by listener
// and reason, and as a record, rate-limited so a flood cannot fill a disk.
func TestRefusalsAreCounted(t *testing.T) {
	recs := t.TempDir() + "/records.jsonl"
	ts := start(t, func(c *server.Config) { c.Metrics = "127.0.0.1:0"; c.Records = recs })
	u, err := net.Dial("udp", ts.Addr("udp").String())
	require.NoError(t, err)
	defer u.Close()
	answer := query("a.example")
	answer.Response = true
	ab, _ := answer.Pack()
	u.Write(ab)
	for i := range 1000 {
		u.Write([]byte("\x00\x01garbage"))
		if i%20 == 0 {
			time.Sleep(5 * time.Millisecond) // within the socket's buffer
		}
	}
	// TCP: a message that does not parse gets FORMERR.
	c, err := net.Dial("tcp", ts.Addr("tcp").String())
	require.NoError(t, err)
	c.Write([]byte{0, 14, 0xbe, 0xef, 1, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0xff, 0xff})
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	io.ReadFull(c, make([]byte, 14))
	c.Close()
	// DoQ: a non-zero message ID.
	qc, err := dialQUIC(t, net.IPv4(127, 0, 0, 1), ts.Addr("doq"), "doq")
	require.NoError(t, err)
	str, _ := qc.OpenStream()
	withID := query("id.example")
	withID.Id = 7
	wb, _ := withID.Pack()
	str.Write(prefix(wb))
	str.Close()
	<-qc.Context().Done()
	// DoQ: a client that does not trust the certificate aborts the
	// handshake.
	_, err = quic.DialAddr(context.Background(), ts.Addr("doq").String(), &tls.Config{NextProtos: []string{"doq"}}, nil)
	require.Error(t, err)
	// DoH: a client that is not TLS.
	d, err := net.Dial("tcp", ts.Addr("doh").String())
	require.NoError(t, err)
	d.Write([]byte("GET / HTTP/1.0\r\n\r\n"))
	d.SetReadDeadline(time.Now().Add(2 * time.Second))
	io.ReadAll(d)
	d.Close()
	time.Sleep(200 * time.Millisecond)

	resp, err := http.Get("http://" + ts.Addr("metrics").String() + "/metrics")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	// The kernel may drop a few datagrams before the server reads them
	// (under -race it reads slowly); every one it read is counted.
	m := regexp.MustCompile(`doxlab_server_refusals_total\{listener="udp",reason="malformed"\} (\d+)`).FindStringSubmatch(string(body))
	require.Len(t, m, 2, "%s", body)
	n, _ := strconv.Atoi(m[1])
	require.GreaterOrEqual(t, n, 950)
	require.LessOrEqual(t, n, 1000)
	for _, want := range []string{
		`doxlab_server_refusals_total{listener="udp",reason="response"} 1`,
		`doxlab_server_refusals_total{listener="tcp",reason="malformed"} 1`,
		`doxlab_server_refusals_total{listener="doq",reason="protocol-error"} 1`,
		`doxlab_server_refusals_total{listener="doh",reason="handshake-error"} 1`,
		`doxlab_server_refusals_total{listener="doq",reason="handshake-error"} 1`,
	} {
		require.Contains(t, string(body), want)
	}
	ts.Close()
	f, err := os.ReadFile(recs)
	require.NoError(t, err)
	lines := strings.Count(string(f), `"kind":"refusal"`)
	t.Logf("refusal records written for 1,005 refusals: %d", lines)
	require.Greater(t, lines, 3)
	require.Less(t, lines, 500, "rate-limited")
	require.Contains(t, string(f), `"suppressed":`)
}

// requireClosedWith waits for the server to close c with an application
// error code (RFC 9250 §4.3: 0x2 protocol error, 0x4 excessive load).
func requireClosedWith(t *testing.T, c *quic.Conn, code quic.ApplicationErrorCode) {
	t.Helper()
	select {
	case <-c.Context().Done():
	case <-time.After(3 * time.Second):
		t.Fatal("connection not closed")
	}
	var ae *quic.ApplicationError
	require.True(t, errors.As(context.Cause(c.Context()), &ae), "%v", context.Cause(c.Context()))
	require.Equal(t, code, ae.ErrorCode)
}

// TestDNSStreamRules: on the web listener's HTTP/3 connections, a DNS
// stream (docs/dnsstream.md) is answered; one with a bad frame, two
// queries, a signal then FIN, or a response (QR=1) is reset on its own
// with H3_MESSAGE_ERROR, and the connection goes on serving DNS streams
// and page requests. A connection whose only stream stalls (a signal
// with nothing after it, half a signal) is closed once handshake_timeout
// has passed.
func TestDNSStreamRules(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "index.html"), []byte("<html>ok</html>"), 0o644))
	ts := start(t, func(c *server.Config) {
		c.Listen.Web = "127.0.0.1:0"
		c.Web.Roots = map[string]string{"*": dir}
		c.Limits.HandshakeTimeout = 300 * time.Millisecond
	})
	c, err := dialQUIC(t, net.IPv4(127, 0, 0, 1), ts.Addr("web"), "h3")
	require.NoError(t, err)
	cc := (&http3.Transport{}).NewClientConn(c)
	<-cc.ReceivedSettings()
	require.Equal(t, uint64(1), cc.Settings().Other[dnswire.DNSStreamSetting], "the server offers DNS streams")
	q := query("stream.example")
	q.Id = 0
	wire, _ := q.Pack()
	good, _ := dnswire.AppendDNSStreamQuery(nil, wire)
	exchange := func(send []byte, fin bool) ([]byte, error) {
		str, err := c.OpenStreamSync(context.Background())
		require.NoError(t, err)
		str.Write(send)
		if fin {
			str.Close()
		}
		str.SetReadDeadline(time.Now().Add(2 * time.Second))
		return io.ReadAll(str)
	}
	for name, c := range map[string]struct {
		send []byte
		fin  bool
		code quic.StreamErrorCode
	}{
		"short-prefix": {good[:5], true, 0x10e},
		"two-queries":  {append(slices.Clone(good), good[4:]...), true, 0x10e},
		"not-dns":      {append(good[:4:4], 0, 12, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12), true, 0x10e},
		"bare-signal":  {good[:4], true, 0x10e},
		"half-signal":  {good[:2], true, 0x10d}, // not a signal: an incomplete HTTP/3 request
		"response":     {responseStream(t), true, 0x10e},
	} {
		_, err := exchange(c.send, c.fin)
		var se *quic.StreamError
		require.ErrorAs(t, err, &se, name)
		require.Equal(t, c.code, se.ErrorCode, name)
	}
	out, err := exchange(good, true)
	require.NoError(t, err)
	r := new(dns.Msg)
	require.NoError(t, r.Unpack(out[2:]))
	require.Equal(t, dns.RcodeSuccess, r.Rcode)
	require.NotEmpty(t, r.Answer)
	req, _ := http.NewRequest(http.MethodGet, "https://"+ts.Addr("web").String()+"/", nil)
	resp, err := cc.RoundTrip(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	require.Equal(t, "<html>ok</html>", string(body), "the page still loads on the connection")
	require.NotEmpty(t, ts.records("query", "dnsstream"))

	for name, send := range map[string][]byte{"silent": good[:4], "half-signal": good[:2], "frame-type": {0x40}} {
		c, err := dialQUIC(t, net.IPv4(127, 0, 0, 1), ts.Addr("web"), "h3")
		require.NoError(t, err, name)
		str, err := c.OpenStreamSync(context.Background())
		require.NoError(t, err)
		str.Write(send)
		start := time.Now()
		requireClosedWith(t, c, 0x100)
		t.Logf("%s: closed after %v", name, time.Since(start).Round(time.Millisecond))
		require.Less(t, time.Since(start), testutil.Scaled(300*time.Millisecond+2*time.Second), name)
	}
}

// responseStream is a DNS stream carrying a response (QR=1) as a query.
func responseStream(t *testing.T) []byte {
	m := query("stream.example")
	m.Id, m.Response = 0, true
	wire, err := m.Pack()
	require.NoError(t, err)
	out, err := dnswire.AppendDNSStreamQuery(nil, wire)
	require.NoError(t, err)
	return out
}

// TestStalledStreamsLockNobodyOut: the connection limit's worth of QUIC
// connections from 10 sources (10 each, the per-source cap), each holding
// one stream whose end never comes: a DoQ query answered but never
// FIN'd, a DoH/3 POST whose body never ends (on the DoH/3 and the web
// listener), a DNS stream answered but never FIN'd, a header block that
// never ends. Good clients keep being answered, and every attacking
// connection is closed within handshake_timeout + 2 s. All used to lock
// good clients out (0/100) for as long as the attacker liked.
func TestStalledStreamsLockNobodyOut(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "index.html"), []byte("<html>ok</html>"), 0o644))
	const timeout = time.Second
	ts := start(t, func(c *server.Config) {
		c.Listen.Web = "127.0.0.1:0"
		c.Web.Roots = map[string]string{"*": dir}
		c.Limits.MaxConns, c.Limits.MaxConnsPerSource = 100, 10
		c.Limits.HandshakeTimeout = timeout
	})
	q := query("stalled.example")
	q.Id = 0
	wire, err := q.Pack()
	require.NoError(t, err)
	prefixed, _ := dnswire.AppendPrefixed(nil, wire)
	dnsStream, _ := dnswire.AppendDNSStreamQuery(nil, wire)
	post := func(c *quic.Conn, path string) {
		cc := (&http3.Transport{}).NewClientConn(c)
		body, _ := io.Pipe() // never written, never closed
		req, _ := http.NewRequest(http.MethodPost, "https://dns.test"+path, body)
		req.ContentLength = int64(len(wire))
		req.Header.Set("Content-Type", "application/dns-message")
		go cc.RoundTrip(req)
	}
	raw := func(send []byte, streams int) func(*quic.Conn, string) {
		return func(c *quic.Conn, _ string) {
			for range streams {
				if str, err := c.OpenStreamSync(context.Background()); err == nil {
					str.Write(send)
				}
			}
		}
	}
	// A HEADERS frame announcing 30 kB (under the 32 kB bound) of which
	// 1 kB comes; and one announcing 1 MB.
	headers := func(n int) []byte {
		b := quicvarint.Append([]byte{0x01}, uint64(n))
		return append(b, make([]byte, 1024)...)
	}
	for _, a := range []struct {
		name, listener, alpn string
		stall                func(*quic.Conn, string)
		// refused: the server answers the stream at once (431), so the
		// connection is idle, not stalled: evictable, and not closed.
		refused bool
	}{
		{"doq-no-fin", "doq", "doq", raw(prefixed, 1), false},
		{"doh3-post-body", "doh3", "h3", post, false},
		{"web-post-body", "web", "h3", post, false},
		{"web-dnsstream-no-fin", "web", "h3", raw(dnsStream, 1), false},
		{"web-header-block", "web", "h3", raw(headers(30<<10), 10), false},
		{"web-huge-header-block", "web", "h3", raw(headers(1<<20), 10), true},
	} {
		t.Run(a.name, func(t *testing.T) {
			g := startGood(t, ts.url(a.listener), ts.pool())
			heap := heapKiB()
			var conns []*quic.Conn
			for i := range 100 {
				c, err := dialQUIC(t, attacker(i%10), ts.Addr(a.listener), a.alpn)
				if err != nil {
					continue
				}
				conns = append(conns, c)
				a.stall(c, "/dns-query")
			}
			deadline := time.Now().Add(timeout + 2*time.Second)
			for time.Now().Before(deadline) {
				open := 0
				for _, c := range conns {
					if c.Context().Err() == nil {
						open++
					}
				}
				if open == 0 {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			open := 0
			for _, c := range conns {
				if c.Context().Err() == nil {
					open++
				}
			}
			heap = heapKiB() - heap
			t.Logf("%d attacking connections, %d still open after handshake_timeout + 2 s; heap +%d KiB", len(conns), open, heap)
			require.Less(t, heap, 64<<10, "the heap kept more than 64 MiB")
			if !a.refused {
				require.Zero(t, open, "attacking connections closed")
			}
			g.finish(t)
		})
	}
}

// TestQPACKStreamsAreRead: quic-go's HTTP/3 leaves a peer's QPACK encoder
// and decoder streams unread (it uses no dynamic table), so each could
// park a flow-control window's worth of data in the server. The server
// reads and discards it: 2 MB written on each goes through.
func TestQPACKStreamsAreRead(t *testing.T) {
	ts := start(t, nil)
	for _, typ := range []byte{0x02, 0x03} {
		c, err := dialQUIC(t, attacker(0), ts.Addr("doh3"), "h3")
		require.NoError(t, err)
		str, err := c.OpenUniStream()
		require.NoError(t, err)
		str.SetWriteDeadline(time.Now().Add(5 * time.Second))
		_, err = str.Write([]byte{typ})
		require.NoError(t, err)
		_, err = str.Write(make([]byte, 2<<20))
		require.NoError(t, err, "stream type %#x: the server stopped reading", typ)
	}
}

// TestWebServesNothingOutsideItsRoot: the web listener lists no
// directory and follows no symlink or path out of its site.
func TestWebServesNothingOutsideItsRoot(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "index.html"), []byte("<html>ok</html>"), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "assets"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "assets", "a.css"), []byte("body{}"), 0o644))
	secret := filepath.Join(t.TempDir(), "secret.txt")
	require.NoError(t, os.WriteFile(secret, []byte("not for the web"), 0o644))
	require.NoError(t, os.Symlink(secret, filepath.Join(dir, "link.txt")))
	ts := start(t, func(c *server.Config) {
		c.Listen.Web = "127.0.0.1:0"
		c.Web.Roots = map[string]string{"*": dir}
	})
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, ForceAttemptHTTP2: true}, Timeout: 5 * time.Second}
	get := func(p string) (int, string) {
		resp, err := client.Get("https://" + ts.Addr("web-tcp").String() + p)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := get("/")
	require.Equal(t, 200, code)
	require.Equal(t, "<html>ok</html>", body)
	code, body = get("/assets/a.css")
	require.Equal(t, 200, code)
	require.Equal(t, "body{}", body)
	for _, p := range []string{"/assets/", "/link.txt", "/../" + filepath.Base(filepath.Dir(secret)) + "/secret.txt"} {
		code, body = get(p)
		require.Equal(t, http.StatusNotFound, code, p)
		require.NotContains(t, body, "not for the web", p)
		require.NotContains(t, body, "a.css", p)
	}
}

// TestForwarderBoundsQueriesInFlight: to an upstream that never answers,
// queries past answers.forward_max_in_flight are answered SERVFAIL at
// once and counted, instead of each holding a goroutine for the whole
// forward timeout.
func TestForwarderBoundsQueriesInFlight(t *testing.T) {
	sink, err := net.ListenPacket("udp", "127.0.0.1:0") // reads nothing, answers nothing
	require.NoError(t, err)
	defer sink.Close()
	ts := start(t, func(c *server.Config) {
		c.Answers = server.Answers{Forward: "udp://" + sink.LocalAddr().String(), ForwardMaxInFlight: 10, ForwardTimeout: 2 * time.Second}
	})
	var wg sync.WaitGroup
	var mu sync.Mutex
	fast := 0
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &dns.Client{Net: "udp", Timeout: 4 * time.Second}
			start := time.Now()
			r, _, err := c.Exchange(query(fmt.Sprintf("f%d.example", i)), ts.Addr("udp").String())
			if err == nil && r.Rcode == dns.RcodeServerFailure && time.Since(start) < time.Second {
				mu.Lock()
				fast++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	t.Logf("%d of 50 answered SERVFAIL at once (10 waited for the upstream)", fast)
	require.GreaterOrEqual(t, fast, 40)
	require.GreaterOrEqual(t, len(ts.records("refusal", "")), 1)
	for _, r := range ts.records("refusal", "") {
		require.Equal(t, "forward-limit", r.Reason)
	}
}

// TestHTTP2SlowlorisReopened: the connection limit's worth and more of
// HTTP/2 connections from 11 sources, each with a DoH POST whose body
// never comes, every closed one reopened at once, on the web listener's
// HTTP/2 side and on the DoH listener. The good client is still served:
// at the limit with every connection busy, a newcomer takes one of the
// source holding the most (it was 43/50 on the web listener).
func TestHTTP2SlowlorisReopened(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "index.html"), []byte("<html>ok</html>"), 0o644))
	ts := start(t, func(c *server.Config) {
		c.Listen.Web = "127.0.0.1:0"
		c.Web.Roots = map[string]string{"*": dir}
		c.Limits.MaxConns, c.Limits.MaxConnsPerSource = 100, 10
	})
	for _, listener := range []string{"web-tcp", "doh"} {
		t.Run(listener, func(t *testing.T) {
			url := "https://" + ts.Addr(listener).String() + "/dns-query"
			g := startGood(t, url, ts.pool())
			stop := make(chan struct{})
			var wg sync.WaitGroup
			var opened atomic.Int64
			for i := range 110 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						select {
						case <-stop:
							return
						default:
						}
						d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: attacker(i % 11)}, Timeout: 2 * time.Second}
						tr := &http.Transport{DialContext: d.DialContext, ForceAttemptHTTP2: true, TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
						body, w := io.Pipe()
						req, _ := http.NewRequest(http.MethodPost, url, body)
						req.ContentLength = 40
						req.Header.Set("Content-Type", "application/dns-message")
						opened.Add(1)
						done := make(chan struct{})
						go func() { tr.RoundTrip(req); close(done) }()
						select {
						case <-done: // closed or answered: reopen at once
						case <-stop:
						}
						w.Close()
						tr.CloseIdleConnections()
					}
				}()
			}
			time.Sleep(4 * time.Second)
			g.await()
			close(stop)
			wg.Wait()
			t.Logf("%s: %d attacking connections opened in all", listener, opened.Load())
			g.finish(t)
		})
	}
}

// mutedConn is a client's UDP socket that, once muted, drops everything
// it receives: its QUIC stack acknowledges nothing more. It offers only
// net.PacketConn's methods, so quic-go reads through ReadFrom.
type mutedConn struct {
	pc    net.PacketConn
	muted atomic.Bool
}

func (c *mutedConn) ReadFrom(p []byte) (int, net.Addr, error) {
	for {
		n, a, err := c.pc.ReadFrom(p)
		if err != nil || !c.muted.Load() {
			return n, a, err
		}
	}
}
func (c *mutedConn) WriteTo(p []byte, a net.Addr) (int, error) { return c.pc.WriteTo(p, a) }
func (c *mutedConn) Close() error                              { return c.pc.Close() }
func (c *mutedConn) LocalAddr() net.Addr                       { return c.pc.LocalAddr() }
func (c *mutedConn) SetDeadline(t time.Time) error             { return c.pc.SetDeadline(t) }
func (c *mutedConn) SetReadDeadline(t time.Time) error         { return c.pc.SetReadDeadline(t) }
func (c *mutedConn) SetWriteDeadline(t time.Time) error        { return c.pc.SetWriteDeadline(t) }

// manySources is the n-th of 1,000 attacking addresses, one each, in
// 127.1.0.0/22.
func manySources(n int) net.IP { return net.IPv4(127, 1, byte(n/250), byte(n%250+1)) }

// TestUnacknowledgedAnswersLockNobodyOut: the connection limit's worth of
// connections, one per source address, each asking for a large answer
// its client never takes: over HTTP/3 the client stops acknowledging,
// over HTTP/2 it opens no flow-control window, over DoT it reads nothing.
// Each would hold its connection busy until idle_timeout (30 s), and no
// source holds more than another, so nothing was ever closed to make
// room: new HTTP/3 clients got 0/60. Now an answer untaken for
// stall_timeout leaves its connection stalled, the first to be closed:
// 100 new clients, each keeping its connection open, must be served
// (≥ 99 %), and room made by closing stalled connections, before the
// client's own idle ones. (Grouping sources by network would also make
// room here, the attackers being four /24s; TestPoolGroupsSourcesByNetwork
// checks that apart.) 1,000 sources (250 under the race detector) on the
// web listener's HTTP/3 and HTTP/2 and on DoH; 200 on DoT, whose 40 answers of 50 kB each would sit in the
// kernel's buffers but for TCP_NOTSENT_LOWAT.
func TestUnacknowledgedAnswersLockNobodyOut(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "index.html"), []byte("<html>ok</html>"), 0o644))
	big := make([]byte, 8<<20)
	rand.Read(big) // incompressible: the listener gzips what it can
	require.NoError(t, os.WriteFile(filepath.Join(dir, "big.bin"), big, 0o644))
	txt := "big.test. 60 IN TXT"
	for range 200 {
		txt += ` "` + strings.Repeat("x", 250) + `"`
	}
	const good = 100
	for _, tc := range []struct {
		name, listener string
		sources        int
		attack         func(t *testing.T, src net.IP, addr net.Addr) bool
		get            func(addr net.Addr) (io.Closer, error)
	}{
		{"h3", "web", 1000, attackH3, getH3},
		{"h2", "web-tcp", 1000, attackH2, getH2},
		{"dot", "dot", 200, attackDoT, getDoT},
		{"doh2", "doh", 1000, attackDoH2, getDoH2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if testutil.Race && tc.sources > 250 {
				// A quarter of the attackers, filling a pool of a quarter
				// the size: 1,000 handshakes took 45 s under the race
				// detector, the same test 13 s without it.
				tc.sources = 250
			}
			ts := start(t, func(c *server.Config) {
				c.Listen = server.Listen{Web: "127.0.0.1:0", DoT: "127.0.0.1:0", DoH: "127.0.0.1:0"}
				c.Web.Roots = map[string]string{"*": dir}
				c.Answers.Static = []string{txt}
				c.Limits.MaxConns, c.Limits.MaxConnsPerSource = tc.sources, good
				c.Limits.StallTimeout = time.Second
				// A DoT write blocked before the first query's answer is
				// bounded by handshake_timeout too: kept out of the way,
				// so what makes room is the stall alone.
				c.Limits.HandshakeTimeout = time.Minute
				// Nor may idleness close an attacker's connection before
				// room is asked for: the setup of 1,000 takes half a
				// minute under the race detector, and QUIC's idle timeout
				// (30 s by default) closed the first ones, leaving room
				// that no eviction had made.
				c.Limits.IdleTimeout = 5 * time.Minute
			})
			addr := ts.Addr(tc.listener)
			var held atomic.Int64
			var wg sync.WaitGroup
			slots := make(chan struct{}, 50)
			start := time.Now()
			for i := range tc.sources {
				wg.Add(1)
				slots <- struct{}{}
				go func() {
					defer wg.Done()
					defer func() { <-slots }()
					if tc.attack(t, manySources(i), addr) {
						held.Add(1)
					}
				}()
			}
			wg.Wait()
			t.Logf("%d of %d attacking connections asked for an answer they will never take (%.1f s)", held.Load(), tc.sources, time.Since(start).Seconds())
			require.Greater(t, held.Load(), int64(tc.sources*9/10))
			time.Sleep(1500 * time.Millisecond) // past stall_timeout
			served := 0
			var slowest time.Duration
			var open []io.Closer
			var firstErr error
			for range good {
				start := time.Now()
				c, err := tc.get(addr)
				if err != nil && firstErr == nil {
					firstErr = err
				}
				if err == nil {
					served++
					slowest = max(slowest, time.Since(start))
					open = append(open, c)
				}
			}
			for _, c := range open {
				c.Close()
			}
			evicted := map[string]int{}
			for _, r := range ts.records("refusal", "") {
				if r.Reason == string(server.ReasonEvicted) {
					why, _, _ := strings.Cut(r.Error, " at the")
					evicted[why]++
				}
			}
			t.Logf("%s: new clients served %d/%d, slowest %v (first failure: %v); connections closed to make room: %v", tc.name, served, good, slowest.Round(time.Millisecond), firstErr, evicted)
			require.GreaterOrEqual(t, served*100, good*99, "new clients locked out")
			// Room for each new client came from a stalled connection, but
			// for those the attackers who did not hold left (237 of 250
			// under -race once: 87 stalled closed for 100 clients).
			require.GreaterOrEqual(t, evicted["stalled"], min(good*9/10, good-int(int64(tc.sources)-held.Load())), "room made by closing stalled connections")
		})
	}
}

// attackDoT opens a DoT connection from src with a small receive buffer,
// asks for a 50 kB answer 40 times, and reads nothing.
func attackDoT(t *testing.T, src net.IP, addr net.Addr) bool {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: src}, Timeout: 5 * time.Second, Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	raw, err := d.Dial("tcp", addr.String())
	if err != nil {
		return false
	}
	t.Cleanup(func() { raw.Close() })
	tc := tls.Client(raw, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"dot"}})
	tc.SetDeadline(time.Now().Add(5 * time.Second))
	if tc.Handshake() != nil {
		return false
	}
	q := new(dns.Msg)
	q.SetQuestion("big.test.", dns.TypeTXT)
	wire, _ := q.Pack()
	var b []byte
	for range 40 {
		b, _ = dnswire.AppendPrefixed(b, wire)
	}
	_, err = tc.Write(b)
	return err == nil
}

// dialH2From opens a TLS connection offering only h2 from src, with 5 s to
// do its work; nil when it cannot.
func dialH2From(t *testing.T, src net.IP, addr net.Addr) *tls.Conn {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: src}, Timeout: 5 * time.Second}
	raw, err := d.Dial("tcp", addr.String())
	if err != nil {
		return nil
	}
	t.Cleanup(func() { raw.Close() })
	tc := tls.Client(raw, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}})
	tc.SetDeadline(time.Now().Add(5 * time.Second))
	if tc.Handshake() != nil {
		return nil
	}
	return tc
}

// attackDoH2 opens an HTTP/2 connection to the DoH listener from src
// that gives the server no window at all (SETTINGS_INITIAL_WINDOW_SIZE 0)
// and asks a query: its answer waits for a window that never opens.
func attackDoH2(t *testing.T, src net.IP, addr net.Addr) bool {
	tc := dialH2From(t, src, addr)
	if tc == nil {
		return false
	}
	q := query("zero-window.example")
	q.Id = 0
	wire, _ := q.Pack()
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", "dns.test"},
		{":path", "/dns-query?dns=" + base64.RawURLEncoding.EncodeToString(wire)}, {"accept", "application/dns-message"}} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	fr := http2.NewFramer(tc, tc)
	if _, err := tc.Write([]byte(http2.ClientPreface)); err != nil {
		return false
	}
	if fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0}) != nil ||
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block.Bytes(), EndStream: true, EndHeaders: true}) != nil {
		return false
	}
	_, err := io.ReadAtLeast(tc, make([]byte, 64), 1) // the server's SETTINGS: it is speaking
	return err == nil
}

// getDoH2 asks over a new DoH (HTTP/2) connection from 127.0.0.1, and
// keeps it.
func getDoH2(addr net.Addr) (io.Closer, error) {
	return getDNS("https://" + addr.String() + "/dns-query")
}

// getDoT asks over a new DoT connection from 127.0.0.1, and keeps it.
func getDoT(addr net.Addr) (io.Closer, error) {
	return getDNS("tls://" + addr.String())
}

// getDNS asks over a new connection to url, and keeps it.
func getDNS(url string) (io.Closer, error) {
	tr, err := transport.New(url, transport.Options{Insecure: true, Reuse: true, Timeout: 2 * time.Second})
	if err != nil {
		return nil, err
	}
	rec, err := tr.Exchange(context.Background(), query("good.example"))
	if err == nil && rec.Status != transport.StatusOK {
		err = fmt.Errorf("%s", rec.Status)
	}
	if err != nil {
		tr.Close()
		return nil, err
	}
	return tr, nil
}

// attackH3 opens an HTTP/3 connection from src, asks for the large file,
// and once its headers come, acknowledges nothing more.
func attackH3(t *testing.T, src net.IP, addr net.Addr) bool {
	pc, err := net.ListenUDP("udp", &net.UDPAddr{IP: src})
	if err != nil {
		return false
	}
	mc := &mutedConn{pc: pc}
	tr := &quic.Transport{Conn: mc}
	t.Cleanup(func() { tr.Close(); pc.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := tr.Dial(ctx, addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{http3.NextProtoH3}}, &quic.Config{MaxIdleTimeout: 5 * time.Minute})
	if err != nil {
		return false
	}
	cc := (&http3.Transport{}).NewClientConn(c)
	// Not the dial's context: cancelling a request would reset its stream.
	req, _ := http.NewRequest(http.MethodGet, "https://web.test/big.bin", nil)
	resp, err := cc.RoundTrip(req)
	if err != nil {
		return false
	}
	mc.muted.Store(true)
	_ = resp // its body is never read
	return true
}

// attackH2 opens an HTTP/2 connection from src, asks for the large file
// and then reads nothing and opens no window: the answer stops at the
// stream's initial 64 KB.
func attackH2(t *testing.T, src net.IP, addr net.Addr) bool {
	tc := dialH2From(t, src, addr)
	if tc == nil {
		return false
	}
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", "web.test"}, {":path", "/big.bin"}} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	fr := http2.NewFramer(tc, tc)
	if _, err := tc.Write([]byte(http2.ClientPreface)); err != nil {
		return false
	}
	if fr.WriteSettings() != nil || fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block.Bytes(), EndStream: true, EndHeaders: true}) != nil {
		return false
	}
	// The first frames back: the server's answer has begun.
	_, err := io.ReadAtLeast(tc, make([]byte, 512), 1)
	return err == nil
}

// getH3 fetches the small page over a new HTTP/3 connection from
// 127.0.0.1, and keeps the connection open (the Closer).
func getH3(addr net.Addr) (io.Closer, error) {
	pc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return nil, err
	}
	tr := &quic.Transport{Conn: pc}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c, err := tr.Dial(ctx, addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{http3.NextProtoH3}}, &quic.Config{MaxIdleTimeout: 30 * time.Second})
	if err == nil {
		err = fetch(ctx, (&http3.Transport{}).NewClientConn(c))
	}
	if err != nil {
		tr.Close()
		pc.Close()
		return nil, err
	}
	return closers{tr, pc}, nil
}

// getH2 fetches the small page over a new HTTP/2 connection, and keeps
// the connection open.
func getH2(addr net.Addr) (io.Closer, error) {
	tr := &http.Transport{ForceAttemptHTTP2: true, TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := fetchURL(ctx, tr, "https://"+addr.String()+"/"); err != nil {
		tr.CloseIdleConnections()
		return nil, err
	}
	return closerFunc(func() error { tr.CloseIdleConnections(); return nil }), nil
}

func fetch(ctx context.Context, rt http.RoundTripper) error {
	return fetchURL(ctx, rt, "https://web.test/")
}

func fetchURL(ctx context.Context, rt http.RoundTripper, url string) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && (resp.StatusCode != http.StatusOK || !bytes.Contains(b, []byte("ok"))) {
		err = fmt.Errorf("%s: %q", resp.Status, b)
	}
	return err
}

type closers []io.Closer

func (cs closers) Close() error {
	for _, c := range cs {
		c.Close()
	}
	return nil
}

type closerFunc func() error

func (f closerFunc) Close() error { return f() }

// TestDNSStreamKeepsConnectionAlive: a web listener's HTTP/3 connection
// used only for DNS streams, one every 150 ms for three idle timeouts,
// stays open and answers them all (its idle timer counted HTTP requests
// only, so it was closed as idle mid-use, losing the query in flight);
// with nothing in flight it is closed as idle after all.
func TestDNSStreamKeepsConnectionAlive(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "index.html"), []byte("<html>ok</html>"), 0o644))
	const idle = 400 * time.Millisecond
	ts := start(t, func(c *server.Config) {
		c.Listen = server.Listen{Web: "127.0.0.1:0"}
		c.Web.Roots = map[string]string{"*": dir}
		c.Limits.IdleTimeout = idle
	})
	c, err := dialQUIC(t, net.IPv4(127, 0, 0, 1), ts.Addr("web"), "h3")
	require.NoError(t, err)
	q := query("stream.example")
	q.Id = 0
	wire, _ := q.Pack()
	signal, _ := dnswire.AppendDNSStreamQuery(nil, wire)
	for i := range 8 {
		str, err := c.OpenStreamSync(context.Background())
		require.NoError(t, err, "stream %d", i)
		str.Write(signal)
		str.Close()
		str.SetReadDeadline(time.Now().Add(3 * time.Second))
		out, err := io.ReadAll(str)
		require.NoError(t, err, "answer %d", i)
		r := new(dns.Msg)
		require.NoError(t, r.Unpack(out[2:]))
		require.NotEmpty(t, r.Answer)
		time.Sleep(150 * time.Millisecond)
	}
	requireClosedWith(t, c, 0x100) // H3_NO_ERROR: idle at last
}

// TestUniStreamsHeldNoLonger: unidirectional streams that send one
// octet of a two-octet stream type were held until the connection ended
// (+0.42 MiB a connection with 99 of them). On the web listener such a
// stream is refused once handshake_timeout has passed; on every QUIC
// listener a client may hold at most 16 open at once.
func TestUniStreamsHeldNoLonger(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "index.html"), []byte("<html>ok</html>"), 0o644))
	ts := start(t, func(c *server.Config) {
		c.Listen.Web = "127.0.0.1:0"
		c.Web.Roots = map[string]string{"*": dir}
		c.Limits.HandshakeTimeout = 300 * time.Millisecond
	})
	c, err := dialQUIC(t, net.IPv4(127, 0, 0, 1), ts.Addr("web"), "h3")
	require.NoError(t, err)
	var strs []*quic.SendStream
	for range 10 {
		str, err := c.OpenUniStream()
		require.NoError(t, err)
		_, err = str.Write([]byte{0x40}) // the first octet of a two-octet varint
		require.NoError(t, err)
		strs = append(strs, str)
	}
	time.Sleep(testutil.Scaled(time.Second))
	for i, str := range strs {
		_, err := str.Write([]byte{0x21})
		var se *quic.StreamError
		require.ErrorAs(t, err, &se, "stream %d: still read", i)
		require.Equal(t, quic.StreamErrorCode(0x103), se.ErrorCode) // H3_STREAM_CREATION_ERROR
	}
	require.NoError(t, c.Context().Err(), "the connection goes on")

	c, err = dialQUIC(t, net.IPv4(127, 0, 0, 1), ts.Addr("doh3"), "h3")
	require.NoError(t, err)
	opened := 0
	for range 100 {
		str, err := c.OpenUniStream()
		if err != nil {
			break
		}
		str.Write([]byte{0x40})
		opened++
	}
	require.Equal(t, 16, opened, "held streams are capped")
}
