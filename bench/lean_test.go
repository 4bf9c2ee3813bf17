package bench_test

import (
	"bufio"
	"context"
	"crypto/x509"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/bench"
	"github.com/doxlab/doxlab/measure"
	"github.com/doxlab/doxlab/server"
	"github.com/doxlab/doxlab/transport"
)

// everyTransport starts doxlab's server on every DNS listener on
// loopback, answering any name with 192.0.2.1, and returns the URL of
// each transport by protocol and the roots that trust the server.
func everyTransport(t *testing.T) (map[string]string, *x509.CertPool) {
	t.Helper()
	lo := "127.0.0.1:0"
	srv, err := server.New(&server.Config{Listen: server.Listen{UDP: lo, TCP: lo, DoT: lo, DoH: lo, DoH3: lo, DoQ: lo},
		Answers: server.Answers{Any: "192.0.2.1"}})
	require.NoError(t, err)
	require.NoError(t, srv.Start())
	t.Cleanup(func() { srv.Close() })
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(srv.CertPEM())
	a := func(n string) string { return srv.Addr(n).String() }
	return map[string]string{"udp": "udp://" + a("udp"), "tcp": "tcp://" + a("tcp"), "dot": "tls://" + a("dot"),
		"doh2": "https://" + a("doh") + "/dns-query", "doh3": "h3://" + a("doh3") + "/dns-query", "doq": "quic://" + a("doq")}, roots
}

// TestLeanPathEveryTransport: an open-loop run over reused connections
// takes the lean path on every transport but DoH/1.1, and every query
// due is sent or counted unsent, every one sent answered, kept and
// labelled with the protocol.
func TestLeanPathEveryTransport(t *testing.T) {
	urls, roots := everyTransport(t)
	for proto, url := range urls {
		t.Run(proto, func(t *testing.T) {
			var reports []bench.Progress // from one goroutine, which Run ends before it returns
			c := bench.Config{URL: url, Rate: 1000, Duration: 500 * time.Millisecond, Conns: 2, Keep: true,
				Names:    []bench.Query{{Name: "a.example", Type: 1}, {Name: "b.example", Type: 28}},
				Options:  transport.Options{Reuse: true, RootCAs: roots},
				Progress: func(p bench.Progress) { reports = append(reports, p) }, ProgressEvery: 20 * time.Millisecond}
			require.True(t, bench.Lean(c))
			res, err := bench.Run(context.Background(), c)
			require.NoError(t, err)
			s := res.Summarize()
			require.Equal(t, proto, res.Protocol)
			// Every query due is sent or counted unsent. How many are
			// sent is the machine's pace: under -race beside the other
			// lanes, DoH/2 sent 364 of 500, the window full of queries
			// a slowed server had yet to answer.
			require.Equal(t, 500, s.Sent+s.Unsent)
			require.Positive(t, s.Sent)
			if s.Unsent > 0 {
				t.Logf("%d of 500 due not sent: no room in flight until the end", s.Unsent)
			}
			require.Equal(t, s.Sent, s.Answered, "%v", s.Errors)
			require.Len(t, res.Samples, s.Sent)
			require.EqualValues(t, 2, s.Handshake.N, "one handshake per connection")
			require.Positive(t, s.MaxInFlight)
			// Progress counts what the summary counts: no failure shown
			// where none happened.
			require.NotEmpty(t, reports)
			for _, p := range reports {
				require.Zero(t, p.Failed, "%+v", p)
				require.Equal(t, p.Sent, p.OK+p.InFlight, "%+v", p)
			}
		})
	}
	c := bench.Config{URL: urls["doh2"], Rate: 10, Options: transport.Options{Reuse: true, HTTPVersion: "1.1"}}
	require.False(t, bench.Lean(c), "DoH/1.1 goes through the transport")
	c.Options.HTTPVersion, c.Full = "", true
	require.False(t, bench.Lean(c), "Full asks for the transport's records")
}

// TestLeanPathFullWindow: with the window full all run long, queries
// go in bursts as room frees and the readers poll, and still every query
// is sent once, answered, and never more in flight than the window.
func TestLeanPathFullWindow(t *testing.T) {
	lo := "127.0.0.1:0"
	srv, err := server.New(&server.Config{Listen: server.Listen{TCP: lo, DoT: lo}, Answers: server.Answers{Any: "192.0.2.1"}})
	require.NoError(t, err)
	require.NoError(t, srv.Start())
	defer srv.Close()
	for _, url := range []string{"tcp://" + srv.Addr("tcp").String(), "tls://" + srv.Addr("dot").String()} {
		res, err := bench.Run(context.Background(), bench.Config{URL: url, Rate: 1e6, MaxQueries: 20000, MaxInFlight: 64, Conns: 2,
			Duration: 10 * time.Second, Options: transport.Options{Reuse: true, Insecure: true}})
		require.NoError(t, err)
		s := res.Summarize()
		require.Equal(t, 20000, s.Sent, url)
		require.Equal(t, 20000, s.Answered, "%s: %v", url, s.Errors)
		require.LessOrEqual(t, s.MaxInFlight, 64)
		require.GreaterOrEqual(t, s.MaxInFlight, 32, "the window filled")
	}
}

// TestLeanPathCountsFailures: lost datagrams time out without holding
// up the schedule, answers that refuse count as failures by their rcode, and a DoH server that refuses
// RFC 8484 answers http-error, over HTTP/2 and HTTP/3.
func TestLeanPathCountsFailures(t *testing.T) {
	lossy := serve(t, "udp", server.Faults{DropProbability: 0.2})
	res, err := bench.Run(context.Background(), bench.Config{URL: lossy, Rate: 1000, Duration: time.Second,
		MaxInFlight: 500, Options: transport.Options{Reuse: true, Timeout: 200 * time.Millisecond}})
	require.NoError(t, err)
	s := res.Summarize()
	require.Equal(t, 1000, s.Sent, "lost queries give their room back after the timeout")
	require.InDelta(t, 200, s.Errors["timeout"], 60)
	require.Equal(t, s.Sent, s.Answered+s.Errors["timeout"])

	nx, err := server.New(&server.Config{Listen: server.Listen{TCP: "127.0.0.1:0"}})
	require.NoError(t, err)
	require.NoError(t, nx.Start())
	defer nx.Close()
	res, err = bench.Run(context.Background(), bench.Config{URL: "tcp://" + nx.Addr("tcp").String(), Rate: 200, Duration: 500 * time.Millisecond, Keep: true,
		Options: transport.Options{Reuse: true}})
	require.NoError(t, err)
	require.Zero(t, res.OK, "an answer that refuses is no answer")
	require.Equal(t, "REFUSED", res.Samples[0].Rcode)
	require.Equal(t, map[string]int{"REFUSED": 100}, res.Errors)
	require.Equal(t, map[string]int{"REFUSED": 100}, res.Rcodes, "counted as dnsperf's response codes")
	var out strings.Builder
	res.Summarize().Write(&out)
	require.Contains(t, out.String(), "response codes: REFUSED 100 (100.00%)")
	res, err = bench.Run(context.Background(), bench.Config{URL: "tcp://" + nx.Addr("tcp").String(), Rate: 200, Duration: 500 * time.Millisecond,
		Options: transport.Options{Reuse: true}, Answers: must(measure.ParseAnswers([]string{"REFUSED"}))})
	require.NoError(t, err)
	require.Equal(t, 100, res.OK, "--ok-rcodes REFUSED takes them")

	jsonOnly, err := server.New(&server.Config{Listen: server.Listen{DoH: "127.0.0.1:0", DoH3: "127.0.0.1:0"}, DoHJSONOnly: true, Answers: server.Answers{Any: "192.0.2.1"}})
	require.NoError(t, err)
	require.NoError(t, jsonOnly.Start())
	defer jsonOnly.Close()
	for _, url := range []string{"https://" + jsonOnly.Addr("doh").String() + "/dns-query", "h3://" + jsonOnly.Addr("doh3").String() + "/dns-query"} {
		res, err = bench.Run(context.Background(), bench.Config{URL: url, Rate: 200, Duration: 250 * time.Millisecond,
			Options: transport.Options{Reuse: true, Insecure: true}})
		require.NoError(t, err)
		require.Zero(t, res.OK, url)
		require.Equal(t, 50, res.Errors[string(transport.StatusHTTP)], url)
	}
}

// TestLeanPathSaysWhyConnectionsEnded: a server that closes each
// connection 100 ms into it, answering until then or only its first
// query, is reconnected to, as dnsperf does; what a lost connection had
// in flight ends as closed at once, not at the timeout, so that its room
// in the window comes back; and the result says which connections ended
// and why. Its counts are checked against the server's own, not against
// a schedule: on a loaded machine a reconnected sender may write its
// first query after the server has already given up on the connection.
func TestLeanPathSaysWhyConnectionsEnded(t *testing.T) {
	for _, answers := range []bool{true, false} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		defer ln.Close()
		// accepted: connections; queried: those that sent a query
		// before their 100 ms; served: answers written.
		var accepted, queried, served atomic.Int64
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				accepted.Add(1)
				go func() {
					defer c.Close()
					c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
					r := bufio.NewReader(c)
					for first := true; ; first = false {
						var n [2]byte
						if _, err := io.ReadFull(r, n[:]); err != nil {
							break
						}
						m := make([]byte, int(n[0])<<8|int(n[1]))
						if _, err := io.ReadFull(r, m); err != nil {
							break
						}
						if first {
							queried.Add(1)
						}
						if answers || first { // the query back, QR set
							m[2] |= 0x80
							if _, err := c.Write(append(n[:], m...)); err == nil {
								served.Add(1)
							}
						}
					}
				}()
			}
		}()
		res, err := bench.Run(context.Background(), bench.Config{URL: "tcp://" + ln.Addr().String(), Rate: 200, Duration: 350 * time.Millisecond,
			Conns: 2, Options: transport.Options{Reuse: true, Timeout: 5 * time.Second}})
		require.NoError(t, err)
		s := res.Summarize()
		lost := 0
		for _, n := range s.ConnErrors {
			lost += n
		}
		require.GreaterOrEqual(t, lost, 4, "two connections, each lost at 100 ms and 200 ms at least: %v", s.ConnErrors)
		require.GreaterOrEqual(t, s.Reconnects, 4)
		require.Zero(t, s.Errors["timeout"], "lost with their connection, not timed out")
		require.Equal(t, s.Sent, s.Answered+s.Errors["closed"])
		require.Equal(t, int(served.Load()), s.Answered, "every answer written is counted, once")
		// Every connection that carried a query was dialled and counted;
		// one dialled as the run ended may carry none.
		require.LessOrEqual(t, int(queried.Load()), s.Reconnects+2)
		require.LessOrEqual(t, s.Reconnects+2, int(accepted.Load()))
		if answers {
			require.Greater(t, s.Answered, s.Sent/2)
		} else {
			require.Equal(t, int(queried.Load()), s.Answered, "the first query on each connection")
		}
		var b strings.Builder
		s.Write(&b)
		require.Contains(t, b.String(), "connections lost: ")
		require.Contains(t, b.String(), "reconnected ")
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
