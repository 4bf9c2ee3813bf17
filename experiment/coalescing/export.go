package coalescing

import (
	"context"
	"encoding/json"
	"time"

	"github.com/doxlab/doxlab/store"
)

// Row is one coalescing load flattened for export; the whole sample
// (the loader's record, the server's records) stays in the store.
type Row struct {
	RunID          string    `parquet:"run_id"`
	StartedAt      time.Time `parquet:"started_at,timestamp(microsecond:utc)"`
	Setup          string    `parquet:"setup"`
	Profile        string    `parquet:"profile"`
	Page           string    `parquet:"page"`
	DNS            string    `parquet:"dns"`
	H3             string    `parquet:"h3"`
	Settings       string    `parquet:"settings"`
	Rep            int64     `parquet:"rep"`
	Status         string    `parquet:"status"`
	Error          string    `parquet:"error"`
	PLTMs          *float64  `parquet:"plt_ms,optional"` // only for ok loads
	DNSMs          *float64  `parquet:"dns_ms,optional"`
	QUICHandshakes int64     `parquet:"quic_handshakes"`
	TCPHandshakes  int64     `parquet:"tcp_handshakes"`
	Lookups        int64     `parquet:"lookups"`
	LookupsSpared  int64     `parquet:"lookups_spared"`
	DNSOnPageConn  bool      `parquet:"dns_on_page_conn"`
	DNSEarly       bool      `parquet:"dns_early"`
	DNSTransport   string    `parquet:"dns_transport"`
	PageUsed0RTT   bool      `parquet:"page_0rtt"`
	PageResumed    bool      `parquet:"page_resumed"`
	PageTokenUsed  bool      `parquet:"page_token"`
	WaitedSettings bool      `parquet:"waited_settings"`
}

func init() {
	store.RegisterExport("coalescing", "a row per coalescing page load: its cell, status, PLT and lookup time, and the server's proof",
		func(ctx context.Context, st *store.Store, keep func(string) bool, emit func(Row) error) error {
			return st.Results(ctx, "", Kind, func(runID string, raw []byte) error {
				if !keep(runID) {
					return nil
				}
				var s Sample
				if err := json.Unmarshal(raw, &s); err != nil {
					return err
				}
				p := s.Proof
				r := Row{RunID: runID, StartedAt: s.Start.UTC(), Setup: s.Setup, Profile: s.Profile, Page: s.Page, DNS: s.DNS, H3: s.H3, Settings: s.Settings,
					Rep: int64(s.Rep), Status: s.Status, Error: s.Error, QUICHandshakes: int64(p.QUICHandshakes), TCPHandshakes: int64(p.TCPHandshakes),
					Lookups: int64(p.Lookups), LookupsSpared: int64(p.Spared), DNSOnPageConn: p.DNSOnPageConn, DNSEarly: p.DNSEarly,
					DNSTransport: p.DNSTransport, PageUsed0RTT: p.PageUsed0RTT, PageResumed: p.PageResumed, PageTokenUsed: p.PageTokenUsed,
					WaitedSettings: p.WaitedSettings}
				if s.Status == "ok" {
					r.PLTMs, r.DNSMs = &s.PLTMs, &s.DNSMs
				}
				return emit(r)
			})
		})
}
