package bench

import (
	"context"
	"time"

	"github.com/doxlab/doxlab/store"
)

// Row is one benchmark query, flattened for 'doxlab export --table
// bench', with its benchmark's settings.
type Row struct {
	RunID     string  `parquet:"run_id"`
	Key       string  `parquet:"key"` // the benchmark within its run: "2", or "2.3" for step 3
	Label     string  `parquet:"label"`
	Protocol  string  `parquet:"protocol"`
	Policy    string  `parquet:"policy"`
	Conns     int64   `parquet:"conns"`
	Step      int64   `parquet:"step"`
	Mode      string  `parquet:"mode"`
	AtMs      float64 `parquet:"at_ms"`      // since the start: the intended send time in open loop
	LatencyMs float64 `parquet:"latency_ms"` // at -> answer or failure: what a client waited, queueing included
	ServiceMs float64 `parquet:"service_ms"` // the call -> answer or failure
	// HandshakeMs is 0 when an open connection carried the query.
	HandshakeMs float64 `parquet:"handshake_ms"`
	Status      string  `parquet:"status"`
	Rcode       string  `parquet:"rcode"` // the answer's, "" without one
	Resumed     bool    `parquet:"resumed"`
	ZeroRTT     bool    `parquet:"zero_rtt"`
}

func init() {
	store.RegisterExport("bench", "a row per benchmark query (bench --store, server-load): its benchmark's settings, send time, latency, service time, handshake, status, rcode",
		func(ctx context.Context, st *store.Store, keep func(string) bool, emit func(Row) error) error {
			ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
			_, err := eachStored(ctx, st, keep, func(*Stored) {}, func(s *Stored, ss []Sample) error {
				for _, x := range ss {
					if err := emit(Row{RunID: s.Run, Key: s.Key, Label: s.Label, Protocol: s.Protocol, Policy: s.Policy, Conns: int64(s.Conns), Step: int64(s.Step), Mode: s.Mode,
						AtMs: ms(x.At), LatencyMs: ms(x.Latency), ServiceMs: ms(x.Service), HandshakeMs: ms(x.Handshake),
						Status: string(x.Status), Rcode: x.Rcode, Resumed: x.Resumed, ZeroRTT: x.ZeroRTT}); err != nil {
						return err
					}
				}
				return nil
			})
			return err
		})
}
