package server_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/doxlab/doxlab/internal/stats"
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

// BenchmarkODoH sets Oblivious DoH against DoH on loopback, each on a
// kept connection: a proxy and a target of doxlab's (two servers), the
// DoH client asking the target directly. Per exchange it reports the
// client's median total, the proxy's own exchange with the target
// (Server-Timing), and what ODoH costs beyond DoH plus that hop:
//
//	go test ./server -run '^$' -bench ODoH -benchtime 2000x
func BenchmarkODoH(b *testing.B) {
	ca := testutil.NewCA(b, "localhost")
	start := func(c *server.Config) *server.Server {
		c.TLS.Cert, c.TLS.Key = ca.CertFile, ca.KeyFile
		c.Answers.Any = "192.0.2.7"
		srv, err := server.New(c)
		if err != nil {
			b.Fatal(err)
		}
		if err := srv.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { srv.Close() })
		return srv
	}
	target := start(&server.Config{Listen: server.Listen{DoH: "127.0.0.1:0"}, ODoH: server.ODoH{Target: true}})
	proxy := start(&server.Config{Listen: server.Listen{DoH: "127.0.0.1:0"}, ODoH: server.ODoH{Proxy: true, ProxyTargets: []string{"127.0.0.1"}, ProxyCA: ca.CAFile}})
	pem, err := os.ReadFile(ca.CAFile)
	if err != nil {
		b.Fatal(err)
	}
	opts := transport.Options{Reuse: true, RootCAs: certPool(pem), Timeout: 5 * time.Second}
	medians := map[string]float64{}
	for _, c := range []struct{ name, url string }{
		{"doh", "https://" + target.Addr("doh").String() + "/dns-query"},
		{"odoh", "odoh://" + proxy.Addr("doh").String() + "/dns-query?target=" + target.Addr("doh").String() + "/dns-query"},
	} {
		b.Run(c.name, func(b *testing.B) {
			tr, err := transport.New(c.url, opts)
			if err != nil {
				b.Fatal(err)
			}
			defer tr.Close()
			q := new(dns.Msg)
			q.SetQuestion("bench.example.", dns.TypeA)
			if _, err := tr.Exchange(context.Background(), q); err != nil { // the connections, and ODoH's config
				b.Fatal(err)
			}
			var total, hop []float64
			b.ResetTimer()
			for range b.N {
				rec, err := tr.Exchange(context.Background(), q)
				if err != nil {
					b.Fatal(err)
				}
				total = append(total, rec.Timing.TotalMs)
				if rec.ODoH != nil {
					hop = append(hop, rec.ODoH.TargetMs)
				}
			}
			medians[c.name] = stats.Median(total)
			b.ReportMetric(stats.Median(total), "total-ms")
			if len(hop) > 0 {
				medians["hop"] = stats.Median(hop)
				b.ReportMetric(stats.Median(hop), "proxy-target-ms")
				b.ReportMetric(medians["odoh"]-medians["doh"]-medians["hop"], "beyond-doh+hop-ms")
			}
		})
	}
}
