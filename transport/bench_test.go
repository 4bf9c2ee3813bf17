//go:build unix

package transport_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/doxlab/doxlab/transport"
)

// cpuTime is this process's user+system CPU time. CoreDNS runs in its own
// process, so during a benchmark this is the client's cost alone.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkExchangeReused measures the client's CPU per exchange on one
// reused connection to CoreDNS on loopback, per transport:
//
//	go test ./transport -run '^$' -bench ExchangeReused -benchtime 3000x
//
// client-cpu-us/op is the figure to compare; ns/op also includes waiting
// for CoreDNS.
func BenchmarkExchangeReused(b *testing.B) {
	cd := testutil.StartCoreDNS(b)
	for _, c := range []struct{ name, url, http string }{
		{"udp", cd.UDP, ""}, {"tcp", cd.TCP, ""}, {"dot", cd.TLS, ""}, {"doh1", cd.HTTPS, "1.1"},
		{"doh2", cd.HTTPS, "2"}, {"doh3", cd.H3, ""}, {"doq", cd.QUIC, ""},
	} {
		b.Run(c.name, func(b *testing.B) {
			tr, err := transport.New(c.url, transport.Options{RootCAs: cd.Cert.Pool, HTTPVersion: c.http, Reuse: true})
			if err != nil {
				b.Fatal(err)
			}
			defer tr.Close()
			q := new(dns.Msg)
			q.SetQuestion(testutil.ZoneName, dns.TypeA)
			if _, err := tr.Exchange(context.Background(), q); err != nil { // connect outside the loop
				b.Fatal(err)
			}
			b.ReportAllocs()
			cpu0 := cpuTime()
			b.ResetTimer()
			for b.Loop() {
				if _, err := tr.Exchange(context.Background(), q); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "client-cpu-us/op")
		})
	}
}

// BenchmarkMiekgReference is miekg/dns's client on the same CoreDNS: a
// reference for what doxlab's timing and accounting cost on top.
func BenchmarkMiekgReference(b *testing.B) {
	cd := testutil.StartCoreDNS(b)
	for _, netw := range []string{"udp", "tcp"} {
		b.Run(netw, func(b *testing.B) {
			c := &dns.Client{Net: netw}
			conn, err := c.Dial(cd.Do53)
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Close()
			q := new(dns.Msg)
			q.SetQuestion(testutil.ZoneName, dns.TypeA)
			b.ReportAllocs()
			cpu0 := cpuTime()
			for b.Loop() {
				if _, _, err := c.ExchangeWithConn(q, conn); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "client-cpu-us/op")
		})
	}
}
