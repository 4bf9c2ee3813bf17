package store

import (
	"context"
	"database/sql"
	"encoding/csv"
	"io"
	"strconv"

	"github.com/parquet-go/parquet-go"
)

// Row is one sample flattened for analysis: the columns pandas, DuckDB
// and R users want, with its run's environment. The raw sample stays in
// the store.
type Row struct {
	RunID         string   `parquet:"run_id"`
	Kind          string   `parquet:"kind"`
	Profile       string   `parquet:"profile"`
	DoxlabVersion string   `parquet:"doxlab_version"`
	Kernel        string   `parquet:"kernel"`
	Hostname      string   `parquet:"hostname"`
	StartedAt     string   `parquet:"started_at"`
	Target        string   `parquet:"target"`
	URL           string   `parquet:"url"`
	Transport     string   `parquet:"transport"`
	Condition     string   `parquet:"condition"`
	Rep           int64    `parquet:"rep"`
	Status        string   `parquet:"status"`
	Rcode         string   `parquet:"rcode"`
	ProbeRTTMs    *float64 `parquet:"probe_rtt_ms,optional"`
	HandshakeMs   *float64 `parquet:"handshake_ms,optional"`
	QueryMs       *float64 `parquet:"query_ms,optional"`
	TotalMs       *float64 `parquet:"total_ms,optional"`
	HandshakeRTT  *float64 `parquet:"handshake_rtt,optional"`
	ResolveRTT    *float64 `parquet:"resolve_rtt,optional"`
	TotalRTT      *float64 `parquet:"total_rtt,optional"`
	TLSResumed    bool     `parquet:"tls_resumed"`
	Used0RTT      bool     `parquet:"used_0rtt"`
	Retry         bool     `parquet:"retry"`
	TokenUsed     bool     `parquet:"token_used"`
	QUICVersion   string   `parquet:"quic_version"`
	ALPN          string   `parquet:"alpn"`
}

// Rows returns the samples of one run, or of all runs when runID is "",
// in a stable order.
func (s *Store) Rows(ctx context.Context, runID string) ([]Row, error) {
	q := `SELECT s.run_id, r.kind, r.profile, r.doxlab_version, r.kernel, r.hostname, s.started_at, s.target, s.url, s.transport, s.cond, s.rep,
		s.status, s.rcode, s.probe_rtt_ms, s.handshake_ms, s.query_ms, s.total_ms, s.handshake_rtt, s.resolve_rtt, s.total_rtt,
		s.tls_resumed, s.used_0rtt, s.retry, s.token_used, s.quic_version, s.alpn
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
		if err := rows.Scan(&r.RunID, &r.Kind, &r.Profile, &r.DoxlabVersion, &r.Kernel, &r.Hostname, &r.StartedAt, &r.Target, &r.URL,
			&r.Transport, &r.Condition, &r.Rep, &r.Status, &r.Rcode, &f[0], &f[1], &f[2], &f[3], &f[4], &f[5], &f[6],
			&r.TLSResumed, &r.Used0RTT, &r.Retry, &r.TokenUsed, &r.QUICVersion, &r.ALPN); err != nil {
			return nil, err
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

var csvHeader = []string{"run_id", "kind", "profile", "doxlab_version", "kernel", "hostname", "started_at", "target", "url", "transport",
	"condition", "rep", "status", "rcode", "probe_rtt_ms", "handshake_ms", "query_ms", "total_ms", "handshake_rtt", "resolve_rtt",
	"total_rtt", "tls_resumed", "used_0rtt", "retry", "token_used", "quic_version", "alpn"}

// WriteCSV writes rows with a header; missing values are empty cells.
func WriteCSV(w io.Writer, rows []Row) error {
	cw := csv.NewWriter(w)
	cw.Write(csvHeader)
	f := func(p *float64) string {
		if p == nil {
			return ""
		}
		return strconv.FormatFloat(*p, 'f', -1, 64)
	}
	b := strconv.FormatBool
	for _, r := range rows {
		cw.Write([]string{r.RunID, r.Kind, r.Profile, r.DoxlabVersion, r.Kernel, r.Hostname, r.StartedAt, r.Target, r.URL, r.Transport,
			r.Condition, strconv.FormatInt(r.Rep, 10), r.Status, r.Rcode, f(r.ProbeRTTMs), f(r.HandshakeMs), f(r.QueryMs), f(r.TotalMs),
			f(r.HandshakeRTT), f(r.ResolveRTT), f(r.TotalRTT), b(r.TLSResumed), b(r.Used0RTT), b(r.Retry), b(r.TokenUsed), r.QUICVersion, r.ALPN})
	}
	cw.Flush()
	return cw.Error()
}

// WriteParquet writes rows as one Parquet file.
func WriteParquet(w io.Writer, rows []Row) error { return parquet.Write(w, rows) }
