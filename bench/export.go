package bench

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/doxlab/doxlab/experiment"
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
	Resumed     bool    `parquet:"resumed"`
	ZeroRTT     bool    `parquet:"zero_rtt"`
}

func init() {
	experiment.RegisterExport("bench", "a row per benchmark query (bench --store, server-load): its benchmark's settings, send time, latency, service time, handshake, status",
		func(ctx context.Context, st *store.Store, keep func(string) bool, emit func(Row) error) error {
			records := map[string]Record{}
			err := st.Results(ctx, "", Kind, func(runID string, raw []byte) error {
				var r Record
				if !keep(runID) {
					return nil
				}
				if err := json.Unmarshal(raw, &r); err != nil {
					return err
				}
				records[runID+"\x00"+r.Key] = r
				return nil
			})
			if err != nil {
				return err
			}
			ms := func(us int64) float64 { return float64(us) / 1e3 }
			return st.Results(ctx, "", KindSamples, func(runID string, raw []byte) error {
				if !keep(runID) {
					return nil
				}
				var c chunk
				if err := json.Unmarshal(raw, &c); err != nil {
					return err
				}
				r, ok := records[runID+"\x00"+c.Key]
				if !ok {
					return fmt.Errorf("bench samples %s/%d of run %s belong to no stored benchmark", c.Key, c.Part, runID)
				}
				if _, err := c.samples(); err != nil {
					return fmt.Errorf("bench samples %s/%d of run %s: %w", c.Key, c.Part, runID, err)
				}
				for i := range c.AtUs {
					if err := emit(Row{RunID: runID, Key: r.Key, Label: r.Label, Protocol: r.Protocol, Policy: r.Policy, Conns: int64(r.Conns), Step: int64(r.Step), Mode: r.Mode,
						AtMs: ms(c.AtUs[i]), LatencyMs: ms(c.LatencyUs[i]), ServiceMs: ms(c.ServiceUs[i]), HandshakeMs: ms(c.HandshakeUs[i]),
						Status: c.Statuses[c.Status[i]], Resumed: c.Flags[i]&1 != 0, ZeroRTT: c.Flags[i]&2 != 0}); err != nil {
						return err
					}
				}
				return nil
			})
		})
}
