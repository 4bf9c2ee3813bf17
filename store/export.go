package store

import (
	"context"
	"database/sql"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/doxlab/doxlab/measure"
	"github.com/doxlab/doxlab/transport"
	"github.com/doxlab/doxlab/web"
)

// Row is one sample flattened for analysis: the columns pandas, DuckDB
// and R users want, with its run's environment. The raw sample stays in
// the store.
type Row struct {
	RunID         string `parquet:"run_id"`
	Kind          string `parquet:"kind"`
	Profile       string `parquet:"profile"`
	DoxlabVersion string `parquet:"doxlab_version"`
	Kernel        string `parquet:"kernel"`
	Hostname      string `parquet:"hostname"`
	// The vantage point a campaign's worker measured from (empty outside
	// campaigns), and the delivery of its job that measured it.
	Vantage         string    `parquet:"vantage"`
	VantageAddress  string    `parquet:"vantage_address"`
	VantageNetwork  string    `parquet:"vantage_network"`
	VantageASN      int64     `parquet:"vantage_asn"`
	VantageLocation string    `parquet:"vantage_location"`
	JobAttempt      int64     `parquet:"job_attempt"`
	StartedAt       time.Time `parquet:"started_at,timestamp(microsecond:utc)"`
	Target          string    `parquet:"target"`
	URL             string    `parquet:"url"`
	Transport       string    `parquet:"transport"`
	Condition       string    `parquet:"condition"`
	Rep             int64     `parquet:"rep"`
	Status          string    `parquet:"status"`
	Rcode           string    `parquet:"rcode"`
	ProbeRTTMs      *float64  `parquet:"probe_rtt_ms,optional"`
	HandshakeMs     *float64  `parquet:"handshake_ms,optional"`
	QueryMs         *float64  `parquet:"query_ms,optional"`
	TotalMs         *float64  `parquet:"total_ms,optional"`
	HandshakeRTT    *float64  `parquet:"handshake_rtt,optional"`
	ResolveRTT      *float64  `parquet:"resolve_rtt,optional"`
	TotalRTT        *float64  `parquet:"total_rtt,optional"`
	TLSResumed      bool      `parquet:"tls_resumed"`
	Used0RTT        bool      `parquet:"used_0rtt"`
	Retry           bool      `parquet:"retry"`
	TokenUsed       bool      `parquet:"token_used"`
	QUICVersion     string    `parquet:"quic_version"`
	ALPN            string    `parquet:"alpn"`
	// The measured exchange at the socket (transport.Record's bytes and
	// packets: UDP payloads or TCP payload with TLS, datagrams or TCP
	// segments), handshake included on a new connection.
	BytesSent       int64 `parquet:"bytes_sent"`
	BytesReceived   int64 `parquet:"bytes_received"`
	PacketsSent     int64 `parquet:"packets_sent"`
	PacketsReceived int64 `parquet:"packets_received"`
	// From the record's kernel timestamps (transport.Timing): the
	// exchange on the wire, and the query's part of it; total_ms minus
	// wire_ms is the client's own time.
	WireMs      *float64 `parquet:"wire_ms,optional"`
	WireQueryMs *float64 `parquet:"wire_query_ms,optional"`
	// DelayedACKStall marks an answer whose tail the server's Nagle held
	// for the client's delayed ACK (transport.ConnInfo).
	DelayedACKStall bool `parquet:"delayed_ack_stall"`
}

// Rows returns the samples of one run, or of all runs when runID is "",
// in a stable order.
func (s *Store) Rows(ctx context.Context, runID string) ([]Row, error) {
	q := `SELECT s.run_id, r.kind, r.profile, r.doxlab_version, r.kernel, r.hostname, s.started_at, s.target, s.url, s.transport, s.cond, s.rep,
		s.status, s.rcode, s.probe_rtt_ms, s.handshake_ms, s.query_ms, s.total_ms, s.handshake_rtt, s.resolve_rtt, s.total_rtt,
		s.tls_resumed, s.used_0rtt, s.retry, s.token_used, s.quic_version, s.alpn, s.raw
		FROM samples s JOIN runs r ON r.id = s.run_id`
	var args []any
	if runID != "" {
		q += ` WHERE s.run_id = ?`
		args = append(args, runID)
	}
	q += ` ORDER BY s.run_id, s.started_at, s.task_key`
	rows, err := s.db.QueryContext(ctx, s.rebind(q), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Row
	for rows.Next() {
		var r Row
		var f [7]sql.NullFloat64
		var raw, started string
		if err := rows.Scan(&r.RunID, &r.Kind, &r.Profile, &r.DoxlabVersion, &r.Kernel, &r.Hostname, &started, &r.Target, &r.URL,
			&r.Transport, &r.Condition, &r.Rep, &r.Status, &r.Rcode, &f[0], &f[1], &f[2], &f[3], &f[4], &f[5], &f[6],
			&r.TLSResumed, &r.Used0RTT, &r.Retry, &r.TokenUsed, &r.QUICVersion, &r.ALPN, &raw); err != nil {
			return nil, err
		}
		var err error
		if r.StartedAt, err = time.Parse(time.RFC3339Nano, started); err != nil {
			return nil, fmt.Errorf("sample of run %s: start time %q: %w", r.RunID, started, err)
		}
		r.StartedAt = r.StartedAt.UTC()
		var x struct {
			Measure *struct {
				Bytes, Packets transport.Counts
				Timing         transport.Timing
				Conn           transport.ConnInfo
			}
			Vantage *measure.Vantage
			Job     *measure.JobInfo
		}
		err = json.Unmarshal([]byte(raw), &x)
		if v := x.Vantage; err == nil && v != nil {
			r.Vantage, r.VantageAddress, r.VantageNetwork, r.VantageASN, r.VantageLocation = v.Name, v.Address, v.Network, int64(v.ASN), v.Location
		}
		if x.Job != nil {
			r.JobAttempt = int64(x.Job.Attempt)
		}
		if err == nil && x.Measure != nil {
			m := x.Measure
			r.BytesSent, r.BytesReceived = m.Bytes.Sent, m.Bytes.Received
			r.PacketsSent, r.PacketsReceived = m.Packets.Sent, m.Packets.Received
			if m.Timing.WireMs > 0 {
				r.WireMs = &m.Timing.WireMs
			}
			if m.Timing.WireQueryMs > 0 {
				r.WireQueryMs = &m.Timing.WireQueryMs
			}
			r.DelayedACKStall = m.Conn.DelayedACKStall
		}
		ptrs := []**float64{&r.ProbeRTTMs, &r.HandshakeMs, &r.QueryMs, &r.TotalMs, &r.HandshakeRTT, &r.ResolveRTT, &r.TotalRTT}
		for i, v := range f {
			if v.Valid {
				x := v.Float64
				*ptrs[i] = &x
			}
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// Format is how rows are exported.
type Format string

// The formats. CSV neutralises text cells a spreadsheet would run as a
// formula (OWASP's CSV injection advice: a cell starting with =, +, -,
// @, tab or carriage return gets a leading '), since stored text comes
// from the network (server names, errors, a vantage point's label);
// RawCSV writes them as they are, for tools that are not spreadsheets.
const (
	CSV     Format = "csv"
	RawCSV  Format = "csv-raw"
	Parquet Format = "parquet"
)

// Write writes rows in format f.
func Write[T any](w io.Writer, f Format, rows []T) error {
	switch f {
	case Parquet:
		return WriteParquet(w, rows)
	case RawCSV:
		return writeCSV(w, rows, false)
	}
	return writeCSV(w, rows, true)
}

// WriteCSV writes rows with a header, a column per field named by its
// parquet tag, so the CSV and Parquet exports always have the same
// columns; missing values are empty cells; text that would run as a
// formula is neutralised (see CSV). A time is written in RFC 3339 with
// nanoseconds, in UTC.
func WriteCSV[T any](w io.Writer, rows []T) error { return writeCSV(w, rows, true) }

// neutralise prefixes a text cell a spreadsheet would take for a
// formula with a quote.
func neutralise(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}

func writeCSV[T any](w io.Writer, rows []T, safe bool) error {
	t := reflect.TypeFor[T]()
	cw := csv.NewWriter(w)
	var header []string
	for i := range t.NumField() {
		header = append(header, strings.Split(t.Field(i).Tag.Get("parquet"), ",")[0])
	}
	cw.Write(header)
	for _, r := range rows {
		v := reflect.ValueOf(r)
		rec := make([]string, t.NumField())
		for i := range rec {
			f := v.Field(i)
			if f.Kind() == reflect.Pointer {
				if f.IsNil() {
					continue
				}
				f = f.Elem()
			}
			if t, ok := f.Interface().(time.Time); ok {
				rec[i] = t.UTC().Format(time.RFC3339Nano)
				continue
			}
			switch f.Kind() {
			case reflect.String:
				rec[i] = f.String()
				if safe {
					rec[i] = neutralise(rec[i])
				}
			case reflect.Int, reflect.Int64:
				rec[i] = strconv.FormatInt(f.Int(), 10)
			case reflect.Float64:
				rec[i] = strconv.FormatFloat(f.Float(), 'f', -1, 64)
			case reflect.Bool:
				rec[i] = strconv.FormatBool(f.Bool())
			}
		}
		cw.Write(rec)
	}
	cw.Flush()
	return cw.Error()
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
	// The page's lookups and origins (see web.Sample and web.OriginFacts):
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
}

// LoadRows flattens the page loads of the runs whose ID starts with prefix.
func (s *Store) LoadRows(ctx context.Context, prefix string) ([]LoadRow, error) {
	var out []LoadRow
	err := s.eachLoad(ctx, prefix, func(id string, x *web.Sample) error {
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
		out = append(out, r)
		return nil
	})
	return out, err
}

// WriteParquet writes rows as one Parquet file.
func WriteParquet[T any](w io.Writer, rows []T) error { return parquet.Write(w, rows) }
