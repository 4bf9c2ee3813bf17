package server

import (
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics exposes counters and latencies for Prometheus.
type metrics struct {
	reg     *prometheus.Registry
	queries *prometheus.CounterVec
	conns   *prometheus.CounterVec
	latency *prometheus.HistogramVec
	// refusals counts every refused, dropped or closed message and
	// connection by listener and Reason, records or not.
	refusals *prometheus.CounterVec
}

func newMetrics() *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	m.queries = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "doxlab_server_queries_total", Help: "Queries by transport and outcome."}, []string{"transport", "rcode", "dropped", "early"})
	m.conns = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "doxlab_server_connections_total", Help: "TLS and QUIC connections by transport, resumption, 0-RTT and Retry."}, []string{"transport", "resumed", "used_0rtt", "retry"})
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "doxlab_server_query_seconds", Help: "Query read to answer written, injected delay included.", Buckets: prometheus.ExponentialBuckets(0.00005, 2, 18)}, []string{"transport"})
	m.refusals = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "doxlab_server_refusals_total", Help: "Messages and connections refused, dropped or closed, by listener and reason."}, []string{"listener", "reason"})
	m.reg.MustRegister(m.queries, m.conns, m.latency, m.refusals)
	return m
}

func (m *metrics) observe(r *Record) {
	b := strconv.FormatBool
	switch r.Kind {
	case "conn":
		m.conns.WithLabelValues(r.Transport, b(r.Resumed), b(r.Used0RTT), b(r.Retry)).Inc()
	case "query":
		m.queries.WithLabelValues(r.Transport, r.Rcode, b(r.Dropped), b(r.EarlyData)).Inc()
		if !r.Dropped {
			m.latency.WithLabelValues(r.Transport).Observe(r.ServerMs / 1000)
		}
	}
}

func (s *Server) serveMetrics(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	s.track("metrics", ln.Addr(), srv)
	s.goServe(func() { srv.Serve(ln) })
	return nil
}
