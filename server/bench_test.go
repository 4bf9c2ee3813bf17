package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/doxlab/doxlab/server"
	"github.com/doxlab/doxlab/transport"
)

// BenchmarkServerQPS loads doxlab's server and CoreDNS, in the same run,
// over DoQ and DoH/3 (which dnsperf does not speak) with doxlab's client:
// 16 concurrent clients, each on its own reused connection.
//
//	go test ./server -run '^$' -bench ServerQPS -benchtime 20000x
func BenchmarkServerQPS(b *testing.B) {
	cd := testutil.StartCoreDNS(b)
	srv, err := server.New(&server.Config{Listen: server.Listen{DoQ: "127.0.0.1:0", DoH3: "127.0.0.1:0"}, Answers: server.Answers{Any: "192.0.2.7"}})
	if err != nil {
		b.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	targets := []struct{ name, url string }{
		{"doq/doxlab", "quic://" + srv.Addr("doq").String()},
		{"doq/coredns", cd.QUIC},
		{"doh3/doxlab", "h3://" + srv.Addr("doh3").String() + "/dns-query"},
		{"doh3/coredns", cd.H3},
	}
	for _, tg := range targets {
		b.Run(tg.name, func(b *testing.B) {
			b.SetParallelism(8)
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				tr, err := transport.New(tg.url, transport.Options{Insecure: true, Reuse: true})
				if err != nil {
					b.Error(err)
					return
				}
				defer tr.Close()
				q := new(dns.Msg)
				q.SetQuestion(testutil.ZoneName, dns.TypeA)
				for pb.Next() {
					if _, err := tr.Exchange(context.Background(), q); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "qps")
		})
	}
}
