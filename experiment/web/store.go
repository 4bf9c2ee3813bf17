package web

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/doxlab/doxlab/experiment"
	"github.com/doxlab/doxlab/experiment/internal/pages"
	"github.com/doxlab/doxlab/store"
)

// Kind is a page load of the web experiment in the store's results,
// whole: its timings, the stub's and the servers' records.
var Kind = store.NewKind("web-load")

// WriteLoad stores one page load.
func WriteLoad(ctx context.Context, st *store.Store, runID string, x *pages.Sample) error {
	return st.WriteResult(ctx, runID, Kind, x.Key(), x.Start, x)
}

// ReadLoads returns the page loads of the runs whose ID starts with
// prefix (all when empty), whole, in the order they were measured.
func ReadLoads(ctx context.Context, st *store.Store, prefix string) ([]*pages.Sample, error) {
	var out []*pages.Sample
	err := eachLoad(ctx, st, prefix, func(_ string, x *pages.Sample) error {
		out = append(out, x)
		return nil
	})
	return out, err
}

func eachLoad(ctx context.Context, st *store.Store, prefix string, f func(runID string, x *pages.Sample) error) error {
	return experiment.DecodeResults(ctx, st, prefix, Kind, func(id string, raw []byte) (*pages.Sample, error) {
		x := new(pages.Sample)
		if err := json.Unmarshal(raw, x); err != nil {
			return nil, fmt.Errorf("store: page load in run %s: %w", id, err)
		}
		return x, nil
	}, f)
}

// LoadRow is one page load of the web experiment, flattened; the whole
// sample (timings, stub and server records) stays in the store.
type LoadRow struct {
	RunID      string    `parquet:"run_id"`
	StartedAt  time.Time `parquet:"started_at,timestamp(microsecond:utc)"`
	Profile    string    `parquet:"profile"`
	Page       string    `parquet:"page"`
	Transport  string    `parquet:"transport"`
	StubState  string    `parquet:"stub_state"`
	H3         string    `parquet:"h3"`
	DNSMode    string    `parquet:"dns_mode"`
	Engine     string    `parquet:"engine"` // chromium, or doxlab (the page loader)
	Rep        int64     `parquet:"rep"`
	Status     string    `parquet:"status"`
	Error      string    `parquet:"error"`
	Protocol   string    `parquet:"protocol"`
	PLTMs      *float64  `parquet:"plt_ms,optional"`
	FCPMs      *float64  `parquet:"fcp_ms,optional"`
	LCPMs      *float64  `parquet:"lcp_ms,optional"`
	DNSMs      *float64  `parquet:"dns_ms,optional"`
	H3Used0RTT bool      `parquet:"h3_0rtt"`
	H3Resumed  bool      `parquet:"h3_resumed"`
	DNSReused  bool      `parquet:"dns_reused"`
	DNSResumed bool      `parquet:"dns_resumed"`
	DNS0RTT    bool      `parquet:"dns_0rtt"`
	// The page's lookups and origins (see pages.Sample and pages.OriginFacts):
	// names the stub resolved, those a request waited for and the DNS time
	// on requests' paths and in all; the origins the load touched, those
	// not wholly over HTTP/3 and those requested with no lookup reaching
	// the stub; the web connections the servers saw, and those in 0-RTT.
	Lookups         int64   `parquet:"lookups"`
	LookupsBlocking int64   `parquet:"lookups_blocking"`
	DNSBlockingMs   float64 `parquet:"dns_blocking_ms"`
	DNSTotalMs      float64 `parquet:"dns_total_ms"`
	Origins         int64   `parquet:"origins"`
	OriginsNotH3    int64   `parquet:"origins_not_h3"`
	OriginsNoLookup int64   `parquet:"origins_no_lookup"`
	Conns           int64   `parquet:"conns"`
	Conns0RTT       int64   `parquet:"conns_0rtt"`
	// Setup is the page's placement and frames where not the papers'
	// (pages.Task.Setup); OriginsByFrame the origins requested with no
	// lookup that a connection had announced in an ORIGIN frame.
	Setup          string `parquet:"setup"`
	OriginsByFrame int64  `parquet:"origins_by_frame"`
}

// Row flattens a page load of run id.
func Row(id string, x *pages.Sample) LoadRow {
	r := LoadRow{RunID: id, StartedAt: x.Start.UTC(), Profile: x.Profile, Page: x.Page, Transport: x.Transport,
		StubState: x.StubState, H3: x.Task.H3, DNSMode: x.DNSMode, Engine: x.EngineName(), Rep: int64(x.Rep), Status: x.Status, Error: x.Error,
		H3Used0RTT: x.H3Used0RTT, H3Resumed: x.H3Resumed}
	if x.Load != nil {
		r.Protocol = x.Load.Protocol
	}
	if x.Status == "ok" {
		r.PLTMs, r.FCPMs, r.DNSMs = &x.PLTMs, &x.FCPMs, &x.DNSMs
		if x.Replay != nil {
			r.FCPMs = nil // the page loader paints nothing
		} else if x.Load != nil {
			r.LCPMs = &x.Load.LCPMs
		}
	}
	if f := x.DNSFacts; f != nil {
		r.DNSReused, r.DNSResumed, r.DNS0RTT = f.Reused, f.Resumed, f.Used0RTT
	}
	r.Lookups, r.LookupsBlocking, r.DNSBlockingMs, r.DNSTotalMs = int64(x.Lookups), int64(x.LookupsBlocking), x.DNSBlockingMs, x.DNSTotalMs
	notH3, noLookup, conns, early := x.OriginCounts()
	r.Origins, r.OriginsNotH3, r.OriginsNoLookup, r.Conns, r.Conns0RTT = int64(len(x.Origins)), int64(notH3), int64(noLookup), int64(conns), int64(early)
	r.Setup, r.OriginsByFrame = x.Setup, int64(x.OriginsByFrame())
	return r
}

func init() {
	store.RegisterExport("loads", "a row per page load of the web experiment: its cell, status, PLT, FCP and DNS time, its lookups and origins",
		func(ctx context.Context, st *store.Store, keep func(string) bool, emit func(LoadRow) error) error {
			return eachLoad(ctx, st, "", func(id string, x *pages.Sample) error {
				if !keep(id) {
					return nil
				}
				return emit(Row(id, x))
			})
		})
}

// PageTime is one page load as a comparison sees it: the page, the DNS
// transport, the setting it loaded in (the testbed's profile, engine and
// H3 handshake; "wild" for a campaign's), and its PLT in ms where it
// loaded, else its status.
type PageTime struct {
	Page, Transport, Setting, Status string
	PLTMs                            float64
}

// EachPageTime hands fn every page load f selects, the testbed's and
// the campaigns', one at a time, from their points (kept per run, as
// the report reads them).
func EachPageTime(ctx context.Context, st *store.Store, f store.Filter, fn func(PageTime)) error {
	if f.Vantage == "" {
		ps, err := readLab(ctx, st, f)
		if err != nil {
			return err
		}
		for _, x := range ps {
			k := x.Key.Value()
			fn(PageTime{Page: k.Page, Transport: k.Transport, Setting: strings.Join([]string{k.Profile, k.Engine, "H3 " + k.H3}, " "), Status: x.Status.Value(), PLTMs: x.PLT})
		}
	}
	w, err := readWild(ctx, st, f)
	if err != nil {
		return err
	}
	for _, x := range w {
		fn(PageTime{Page: x.Page, Transport: x.Transport, Setting: "wild", Status: x.Status, PLTMs: x.PLT})
	}
	return nil
}
