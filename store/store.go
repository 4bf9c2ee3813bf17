// Package store keeps measurement samples: every raw sample, whole, with
// the run it belongs to and the environment it ran in (doxlab version and
// commit, kernel, host, profile, spec). SQLite (one file, WAL) is the
// default; a postgres:// URL writes to a shared PostgreSQL database so
// several vantage points fill one store. Both share one schema.
package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
	"modernc.org/sqlite"               // database/sql driver "sqlite", pure Go
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/doxlab/doxlab/internal/buildinfo"
	"github.com/doxlab/doxlab/internal/sysinfo"
	"github.com/doxlab/doxlab/measure"
	"github.com/doxlab/doxlab/transport"
)

// SchemaVersion is the version of the tables below; Open refuses a store
// written by a newer doxlab and migrates older ones.
const SchemaVersion = 8

var schema = []string{
	`CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)`,
	`CREATE TABLE IF NOT EXISTS runs (
		id TEXT PRIMARY KEY,
		kind TEXT NOT NULL,
		started_at TEXT NOT NULL,
		doxlab_version TEXT NOT NULL,
		go_version TEXT NOT NULL,
		kernel TEXT NOT NULL,
		hostname TEXT NOT NULL,
		profile TEXT NOT NULL,
		spec TEXT NOT NULL,
		method INTEGER NOT NULL DEFAULT 0
	)`,
	`CREATE TABLE IF NOT EXISTS samples (
		run_id TEXT NOT NULL REFERENCES runs(id),
		task_key TEXT NOT NULL,
		started_at TEXT NOT NULL,
		target TEXT NOT NULL,
		url TEXT NOT NULL,
		transport TEXT NOT NULL,
		cond TEXT NOT NULL,
		rep INTEGER NOT NULL,
		status TEXT NOT NULL,
		rcode TEXT NOT NULL,
		probe_rtt_ms DOUBLE PRECISION,
		handshake_ms DOUBLE PRECISION,
		query_ms DOUBLE PRECISION,
		total_ms DOUBLE PRECISION,
		handshake_rtt DOUBLE PRECISION,
		resolve_rtt DOUBLE PRECISION,
		total_rtt DOUBLE PRECISION,
		tls_resumed BOOLEAN NOT NULL,
		used_0rtt BOOLEAN NOT NULL,
		retry BOOLEAN NOT NULL,
		token_used BOOLEAN NOT NULL,
		quic_version TEXT NOT NULL,
		alpn TEXT NOT NULL,
		vantage TEXT NOT NULL DEFAULT '',
		` + sampleColumnsV3 + `,
		` + sampleColumnsV6 + `,
		PRIMARY KEY (run_id, task_key)
	)`,
	sampleRaw,
	`CREATE INDEX IF NOT EXISTS samples_by_transport ON samples (transport, cond)`,
	`CREATE INDEX IF NOT EXISTS samples_by_vantage ON samples (run_id, vantage)`,
	resultsTable,
}

// resultsTable holds every experiment's results but the DNS samples:
// one JSON object per row, whole, under its kind (page loads, head-of-
// line blocking, ...), compressed (packRaw) since schema 8.
const resultsTable = `CREATE TABLE IF NOT EXISTS results (
		run_id TEXT NOT NULL REFERENCES runs(id),
		kind TEXT NOT NULL,
		task_key TEXT NOT NULL,
		started_at TEXT NOT NULL,
		z BLOB NOT NULL,
		PRIMARY KEY (run_id, kind, task_key)
	)`

// resultsTableV7 is resultsTable of schemas 5 to 7, the JSON in clear,
// which schema 4's upgrade creates.
const resultsTableV7 = `CREATE TABLE IF NOT EXISTS results (
		run_id TEXT NOT NULL REFERENCES runs(id),
		kind TEXT NOT NULL,
		task_key TEXT NOT NULL,
		started_at TEXT NOT NULL,
		raw TEXT NOT NULL,
		PRIMARY KEY (run_id, kind, task_key)
	)`

// pageLoadsV4 is the web experiment's table of schemas 1 to 4, whose
// rows schema 5 moves into results.
const pageLoadsV4 = `CREATE TABLE IF NOT EXISTS page_loads (
		run_id TEXT NOT NULL REFERENCES runs(id),
		task_key TEXT NOT NULL,
		started_at TEXT NOT NULL,
		profile TEXT NOT NULL,
		page TEXT NOT NULL,
		transport TEXT NOT NULL,
		stub_state TEXT NOT NULL,
		h3 TEXT NOT NULL,
		dns_mode TEXT NOT NULL,
		rep INTEGER NOT NULL,
		status TEXT NOT NULL,
		plt_ms DOUBLE PRECISION,
		fcp_ms DOUBLE PRECISION,
		dns_ms DOUBLE PRECISION,
		h3_0rtt BOOLEAN NOT NULL,
		h3_resumed BOOLEAN NOT NULL,
		raw TEXT NOT NULL,
		PRIMARY KEY (run_id, task_key)
	)`

// Run describes one run and the environment it ran in.
type Run struct {
	ID            string    `json:"id"`
	Kind          string    `json:"kind"` // measure, experiment:dns-rtt, ...
	StartedAt     time.Time `json:"started_at"`
	DoxlabVersion string    `json:"doxlab_version"`
	// Method is the version of the experiment's method the run measured
	// with (experiment.Info.Method), schema 7; 0 for runs that are no
	// experiment's and for those stored before methods were recorded.
	Method    int             `json:"method,omitempty"`
	GoVersion string          `json:"go_version"`
	Kernel    string          `json:"kernel"`
	Hostname  string          `json:"hostname"`
	Profile   string          `json:"profile"` // testbed profile, or "" for real networks
	Spec      json.RawMessage `json:"spec"`    // what was asked for, server config included
}

// NewID is a new run ID: the UTC start time and 64 random bits.
func NewID() string {
	id := make([]byte, 8)
	rand.Read(id)
	return time.Now().UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(id)
}

// NewRun describes a run starting now on this machine.
func NewRun(kind, profile string, spec any) Run {
	b, err := json.Marshal(spec)
	if err != nil { // say so in the record rather than leave it empty
		b, _ = json.Marshal(map[string]string{"unrecorded": err.Error()})
	}
	host, _ := os.Hostname()
	return Run{ID: NewID(), Kind: kind,
		StartedAt: time.Now().UTC(), DoxlabVersion: buildinfo.Version(), GoVersion: runtime.Version(), Kernel: sysinfo.Kernel(),
		Hostname: host, Profile: profile, Spec: b}
}

// Store is an open store.
type Store struct {
	db       *sql.DB
	postgres bool
	// sqliteDSN opens the SQLite file again, for the readers of a scan.
	sqliteDSN string
	read      *sql.DB
	readOnce  sync.Once
	readErr   error
	// archive is a dataset read with the database (Attach).
	archive *Dataset
}

// Attach makes what the store reads for analysis (runs, samples,
// results) include the dataset's, read first: a report of a store and
// the dataset its old rounds were archived to is the report of both.
// What a run resumes from and what is written are the database's alone.
// A dataset that holds what the store holds too (exported to, not
// archived) is refused: every sample would count twice.
func (s *Store) Attach(ctx context.Context, d *Dataset) error {
	for _, f := range d.m.Files {
		q, args := `SELECT 1 FROM samples WHERE run_id = ? AND task_key = ?`, []any{f.Run, f.First}
		switch f.Table {
		case TableResults:
			q, args = `SELECT 1 FROM results WHERE run_id = ? AND kind = ? AND task_key = ?`, []any{f.Run, f.Kind, f.First}
		case TableRuns, TableSampleRaw:
			continue
		}
		var one int
		switch err := s.db.QueryRowContext(ctx, s.rebind(q), args...).Scan(&one); {
		case err == nil:
			return fmt.Errorf("dataset %s holds what the store holds too (%s of run %s: exported, not archived): read one or the other", d.dir, f.First, f.Run)
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
	}
	s.archive = d
	return nil
}

// Open opens (creating if needed) a store: a file path or sqlite://PATH
// for SQLite, postgres://... for PostgreSQL. It fails fast when the store
// cannot be reached, before anything is measured.
func Open(ctx context.Context, dsn string) (*Store, error) {
	s := &Store{}
	var err error
	switch {
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		s.postgres = true
		s.db, err = sql.Open("pgx", dsn)
	default:
		path := strings.TrimPrefix(dsn, "sqlite://")
		if path == "" {
			return nil, fmt.Errorf("store: empty path")
		}
		// WAL lets readers (reports, exports) work while a run writes; the
		// busy timeout rides out their brief locks.
		s.sqliteDSN = "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)&_pragma=foreign_keys(1)"
		s.db, err = sql.Open("sqlite", s.sqliteDSN)
		s.db.SetMaxOpenConns(1)
	}
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", Redact(dsn), err)
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := s.db.PingContext(pctx); err != nil {
		s.db.Close()
		if notDatabase(err) {
			return nil, fmt.Errorf("%s is not a doxlab store (not a SQLite database)", Redact(dsn))
		}
		return nil, fmt.Errorf("store %s: unreachable: %w", Redact(dsn), err)
	}
	if err := s.migrate(ctx); err != nil {
		s.db.Close()
		if notDatabase(err) {
			return nil, fmt.Errorf("%s is not a doxlab store (not a SQLite database)", Redact(dsn))
		}
		return nil, fmt.Errorf("store %s: %w", Redact(dsn), err)
	}
	return s, nil
}

// notDatabase reports SQLite's "file is not a database" (SQLITE_NOTADB).
func notDatabase(err error) bool {
	se, ok := errors.AsType[*sqlite.Error](err)
	return ok && se.Code()&0xff == sqlite3.SQLITE_NOTADB
}

// Redact hides a password in a PostgreSQL URL, for printing.
func Redact(dsn string) string {
	if i := strings.Index(dsn, "://"); i >= 0 {
		if at := strings.LastIndex(dsn, "@"); at > i {
			if c := strings.Index(dsn[i+3:at], ":"); c >= 0 {
				return dsn[:i+3+c] + ":***" + dsn[at:]
			}
		}
	}
	return dsn
}

// sampleColumnsV3 are what analysis reads of a sample beyond its first
// columns, typed, so that a report or export of millions of samples
// never decodes raw JSON: the exchange's octets and packets at the
// socket, its kernel-timestamped wire times, the delayed-ACK label, the
// job's delivery and the vantage point.
const sampleColumnsV3 = `bytes_sent BIGINT NOT NULL DEFAULT 0,
		bytes_received BIGINT NOT NULL DEFAULT 0,
		packets_sent BIGINT NOT NULL DEFAULT 0,
		packets_received BIGINT NOT NULL DEFAULT 0,
		wire_ms DOUBLE PRECISION,
		wire_query_ms DOUBLE PRECISION,
		delayed_ack_stall BOOLEAN NOT NULL DEFAULT FALSE,
		job_attempt BIGINT NOT NULL DEFAULT 0,
		vantage_address TEXT NOT NULL DEFAULT '',
		vantage_network TEXT NOT NULL DEFAULT '',
		vantage_asn BIGINT NOT NULL DEFAULT 0,
		vantage_location TEXT NOT NULL DEFAULT ''`

// sampleColumnsV6 is the campaign round a sample was measured in (from
// 1; 0 outside a campaign in rounds), typed since schema 6.
const sampleColumnsV6 = `round BIGINT NOT NULL DEFAULT 0`

// sampleRaw holds each DNS sample whole (schema 4), compressed
// (packRaw, schema 8): apart from the columns a report scans, so that a
// scan of 10 million samples reads the columns alone.
const sampleRaw = `CREATE TABLE IF NOT EXISTS sample_raw (
		run_id TEXT NOT NULL,
		task_key TEXT NOT NULL,
		z BLOB NOT NULL,
		PRIMARY KEY (run_id, task_key),
		FOREIGN KEY (run_id, task_key) REFERENCES samples (run_id, task_key)
	)`

// sampleRawV7 is sampleRaw of schemas 4 to 7, the JSON in clear, which
// schema 3's upgrade creates.
const sampleRawV7 = `CREATE TABLE IF NOT EXISTS sample_raw (
		run_id TEXT NOT NULL,
		task_key TEXT NOT NULL,
		raw TEXT NOT NULL,
		PRIMARY KEY (run_id, task_key),
		FOREIGN KEY (run_id, task_key) REFERENCES samples (run_id, task_key)
	)`

// upgrades take a store from the version of their index to the next.
func (s *Store) upgrades(from int) []string {
	switch from {
	case 1:
		return []string{`ALTER TABLE samples ADD COLUMN vantage TEXT NOT NULL DEFAULT ''`}
	case 2:
		// The typed columns, filled from each sample's raw JSON once.
		var out []string
		for _, col := range strings.Split(sampleColumnsV3, ",\n") {
			out = append(out, `ALTER TABLE samples ADD COLUMN `+strings.TrimSpace(col))
		}
		get := func(path, typ string) string {
			if s.postgres {
				return `(raw::jsonb #>> '{` + strings.ReplaceAll(path, ".", ",") + `}')::` + typ
			}
			return `json_extract(raw, '$.` + path + `')`
		}
		positive := func(path string) string {
			v := get(path, "double precision")
			return `CASE WHEN ` + v + ` > 0 THEN ` + v + ` END`
		}
		out = append(out, `UPDATE samples SET
			bytes_sent = COALESCE(`+get("measure.bytes.sent", "bigint")+`, 0),
			bytes_received = COALESCE(`+get("measure.bytes.received", "bigint")+`, 0),
			packets_sent = COALESCE(`+get("measure.packets.sent", "bigint")+`, 0),
			packets_received = COALESCE(`+get("measure.packets.received", "bigint")+`, 0),
			wire_ms = `+positive("measure.timing.wire_ms")+`,
			wire_query_ms = `+positive("measure.timing.wire_query_ms")+`,
			delayed_ack_stall = COALESCE(`+get("measure.conn.delayed_ack_stall", "boolean")+`, FALSE),
			job_attempt = COALESCE(`+get("job.attempt", "bigint")+`, 0),
			vantage_address = COALESCE(`+get("vantage.address", "text")+`, ''),
			vantage_network = COALESCE(`+get("vantage.network", "text")+`, ''),
			vantage_asn = COALESCE(`+get("vantage.asn", "bigint")+`, 0),
			vantage_location = COALESCE(`+get("vantage.location", "text")+`, '')`)
		return out
	case 3:
		return []string{sampleRawV7, `INSERT INTO sample_raw (run_id, task_key, raw) SELECT run_id, task_key, raw FROM samples`,
			`ALTER TABLE samples DROP COLUMN raw`}
	case 4:
		// Page loads become results of the web experiment's kind, like
		// every other experiment's, so the store knows no experiment.
		return []string{pageLoadsV4, resultsTableV7,
			`INSERT INTO results (run_id, kind, task_key, started_at, raw) SELECT run_id, 'web-load', task_key, started_at, raw FROM page_loads`,
			`DROP TABLE page_loads`}
	case 5:
		round := `json_extract(r.raw, '$.round')`
		if s.postgres {
			round = `(r.raw::jsonb ->> 'round')::bigint`
		}
		return []string{`ALTER TABLE samples ADD COLUMN ` + sampleColumnsV6,
			`UPDATE samples SET round = COALESCE((SELECT ` + round + ` FROM sample_raw r WHERE r.run_id = samples.run_id AND r.task_key = samples.task_key), 0)`}
	case 6:
		// Runs from before are of an unrecorded method: 0.
		return []string{`ALTER TABLE runs ADD COLUMN method INTEGER NOT NULL DEFAULT 0`}
	case 7:
		// The compressed records' columns; packRecords fills them from the
		// JSON in clear, batch by batch, and drops the old columns.
		out := []string{`ALTER TABLE sample_raw ADD COLUMN z BLOB`, `ALTER TABLE results ADD COLUMN z BLOB`}
		if s.postgres {
			out = append(out, `ALTER TABLE sample_raw ALTER COLUMN raw DROP NOT NULL`, `ALTER TABLE results ALTER COLUMN raw DROP NOT NULL`)
		}
		return out
	}
	return nil
}

// migrate creates the schema or upgrades an older one, in one
// transaction; on PostgreSQL a lock keeps workers that start together
// from migrating at once.
func (s *Store) migrate(ctx context.Context) error {
	// A store at this doxlab's schema needs nothing: a worker's role,
	// which may only read and write rows (docs/vantage-points.md), never
	// has to run DDL.
	var v int
	if err := s.db.QueryRowContext(ctx, `SELECT version FROM schema_version`).Scan(&v); err == nil && v == SchemaVersion {
		return s.packRecords(ctx) // an upgrade to 8 cut short goes on
	}
	if err := s.upgradeSchema(ctx); err != nil {
		return err
	}
	return s.packRecords(ctx)
}

// upgradeSchema creates the schema, or brings an older one to this
// doxlab's, in one transaction.
func (s *Store) upgradeSchema(ctx context.Context) error {
	return s.InTx(ctx, func(tx *sql.Tx) error {
		if s.postgres {
			if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(7310431)`); err != nil { // any constant: doxlab's schema lock
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, schema[0]); err != nil {
			return fmt.Errorf("creating schema: %w", err)
		}
		var v int
		err := tx.QueryRowContext(ctx, `SELECT version FROM schema_version`).Scan(&v)
		fresh := errors.Is(err, sql.ErrNoRows)
		if err != nil && !fresh {
			return err
		}
		if !fresh && v > SchemaVersion {
			return fmt.Errorf("written by a newer doxlab (schema %d, this one knows %d)", v, SchemaVersion)
		}
		if !fresh {
			for ; v < SchemaVersion; v++ {
				for _, stmt := range s.upgrades(v) {
					if _, err := tx.ExecContext(ctx, s.typed(stmt)); err != nil {
						return fmt.Errorf("upgrading the schema from %d: %w", v, err)
					}
				}
			}
		}
		for _, stmt := range schema {
			if _, err := tx.ExecContext(ctx, s.typed(stmt)); err != nil {
				return fmt.Errorf("creating schema: %w", err)
			}
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM schema_version`); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, s.rebind(`INSERT INTO schema_version (version) VALUES (?)`), SchemaVersion)
		return err
	})
}

// InTx runs f in a transaction, committed if f returns nil.
func (s *Store) InTx(ctx context.Context, f func(*sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := f(tx); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

// DB is the store's database, for the job queue, whose tables live beside
// the samples so that a sample and its job's completion commit together.
func (s *Store) DB() *sql.DB { return s.db }

// Postgres says whether the store is a PostgreSQL database.
func (s *Store) Postgres() bool { return s.postgres }

// rebind turns ? placeholders into PostgreSQL's $n.
func (s *Store) rebind(q string) string {
	if !s.postgres {
		return q
	}
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			fmt.Fprintf(&b, "$%d", n)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Close closes the store.
func (s *Store) Close() error {
	if s.read != nil {
		s.read.Close()
	}
	return s.db.Close()
}

// BeginRun records a run before its first sample.
func (s *Store) BeginRun(ctx context.Context, r Run) error { return s.BeginRunTx(ctx, s.db, r) }

// Execer is what runs a statement: the store's database or a transaction
// of it.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// BeginRunTx is BeginRun in a transaction.
func (s *Store) BeginRunTx(ctx context.Context, ex Execer, r Run) error {
	_, err := ex.ExecContext(ctx, s.rebind(`INSERT INTO runs (id, kind, started_at, doxlab_version, go_version, kernel, hostname, profile, spec, method) VALUES (?,?,?,?,?,?,?,?,?,?)`),
		r.ID, r.Kind, r.StartedAt.Format(time.RFC3339Nano), r.DoxlabVersion, r.GoVersion, r.Kernel, r.Hostname, r.Profile, string(r.Spec), r.Method)
	if err != nil {
		return fmt.Errorf("store: recording run: %w", err)
	}
	return nil
}

// TaskKey names a task within a run, the same on every attempt, so a run
// that is resumed knows what is already measured.
func TaskKey(t measure.Task) string {
	cond := t.Condition
	if t.Page != "" { // a page load has the page where a condition would be
		cond = "page:" + t.Page
	}
	if t.Round > 0 { // a campaign in rounds measures each task once a round
		return fmt.Sprintf("%s|%s|%s|%d|r%d", t.URL, t.Transport, cond, t.Rep, t.Round)
	}
	return fmt.Sprintf("%s|%s|%s|%d", t.URL, t.Transport, cond, t.Rep)
}

// SampleKey is a sample's key in its run: its task's, after its vantage
// point's name in a campaign measured from several.
func SampleKey(x *measure.Sample) string {
	if x.Vantage != nil {
		return x.Vantage.Name + "/" + TaskKey(x.Task)
	}
	return TaskKey(x.Task)
}

// Write stores one sample, whole. Writing a task twice is an error, so
// nothing is ever measured twice into one run.
func (s *Store) Write(ctx context.Context, runID string, x *measure.Sample) error {
	return s.InTx(ctx, func(tx *sql.Tx) error {
		_, err := s.write(ctx, tx, runID, x, false)
		return err
	})
}

// WriteOnce stores one sample in tx unless its run holds it already, and
// says whether it did: a task delivered twice by a job queue is stored
// once.
func (s *Store) WriteOnce(ctx context.Context, tx *sql.Tx, runID string, x *measure.Sample) (bool, error) {
	return s.write(ctx, tx, runID, x, true)
}

func (s *Store) write(ctx context.Context, db Execer, runID string, x *measure.Sample, once bool) (bool, error) {
	if err := finiteSample(x); err != nil {
		return false, fmt.Errorf("store: sample %s: %w", SampleKey(x), err)
	}
	raw, err := json.Marshal(x)
	if err != nil {
		return false, err
	}
	var probe, hs, q, tot, hsR, resR, totR sql.NullFloat64
	var conn struct{ resumed, zero, retry, token bool }
	var qv, alpn, rcode string
	if x.Probe != nil && x.Probe.RTTMs > 0 {
		probe = sql.NullFloat64{Float64: x.Probe.RTTMs, Valid: true}
	}
	if m := x.Measure; m != nil {
		if m.Status.HasResponse() {
			hs = sql.NullFloat64{Float64: m.Timing.HandshakeMs, Valid: true}
			q = sql.NullFloat64{Float64: m.Timing.QueryMs, Valid: true}
			tot = sql.NullFloat64{Float64: m.Timing.TotalMs, Valid: true}
		}
		c := m.Conn
		conn.resumed, conn.zero, conn.retry, conn.token = c.TLSResumed, c.Used0RTT, c.Retry, c.TokenUsed
		qv, alpn, rcode = c.QUICVersion, c.ALPN, m.Rcode
	}
	if r := x.RTTs; r != nil {
		hsR = sql.NullFloat64{Float64: r.Handshake, Valid: true}
		resR = sql.NullFloat64{Float64: r.Resolve, Valid: true}
		totR = sql.NullFloat64{Float64: r.Total, Valid: true}
	}
	var v measure.Vantage
	if x.Vantage != nil {
		v = *x.Vantage
	}
	var more struct {
		bytes, packets  transport.Counts
		wire, wireQuery sql.NullFloat64
		stall           bool
		attempt         int
	}
	if m := x.Measure; m != nil {
		more.bytes, more.packets, more.stall = m.Bytes, m.Packets, m.Conn.DelayedACKStall
		more.wire = sql.NullFloat64{Float64: m.Timing.WireMs, Valid: m.Timing.WireMs > 0}
		more.wireQuery = sql.NullFloat64{Float64: m.Timing.WireQueryMs, Valid: m.Timing.WireQueryMs > 0}
	}
	if x.Job != nil {
		more.attempt = x.Job.Attempt
	}
	stmt := `INSERT INTO samples (run_id, task_key, started_at, target, url, transport, cond, rep, status, rcode,
		probe_rtt_ms, handshake_ms, query_ms, total_ms, handshake_rtt, resolve_rtt, total_rtt,
		tls_resumed, used_0rtt, retry, token_used, quic_version, alpn, vantage,
		bytes_sent, bytes_received, packets_sent, packets_received, wire_ms, wire_query_ms, delayed_ack_stall, job_attempt,
		vantage_address, vantage_network, vantage_asn, vantage_location, round)
		VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`
	if once {
		stmt += ` ON CONFLICT (run_id, task_key) DO NOTHING`
	}
	res, err := db.ExecContext(ctx, s.rebind(stmt),
		runID, SampleKey(x), x.Start.Format(time.RFC3339Nano), x.Target, x.URL, x.Transport, x.Condition, x.Rep, string(x.Status), rcode,
		probe, hs, q, tot, hsR, resR, totR, conn.resumed, conn.zero, conn.retry, conn.token, qv, alpn, v.Name,
		more.bytes.Sent, more.bytes.Received, more.packets.Sent, more.packets.Received, more.wire, more.wireQuery, more.stall, more.attempt,
		v.Address, v.Network, v.ASN, v.Location, x.Round)
	if err != nil {
		return false, fmt.Errorf("store: writing sample %s: %w", SampleKey(x), err)
	}
	if n, err := res.RowsAffected(); n != 1 || err != nil {
		return false, err // held already
	}
	if _, err := db.ExecContext(ctx, s.rebind(`INSERT INTO sample_raw (run_id, task_key, z) VALUES (?,?,?)`), runID, SampleKey(x), packRaw(raw)); err != nil {
		return false, fmt.Errorf("store: writing sample %s: %w", SampleKey(x), err)
	}
	return true, nil
}

// Raw is a stored sample whole, as JSON; ErrNoRun's kin when the run does
// not hold it.
func (s *Store) Raw(ctx context.Context, runID, key string) (json.RawMessage, error) {
	var z []byte
	err := s.db.QueryRowContext(ctx, s.rebind(`SELECT z FROM sample_raw WHERE run_id = ? AND task_key = ?`), runID, key).Scan(&z)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("store: no sample %s in run %s", key, runID)
	}
	if err != nil {
		return nil, err
	}
	raw, err := unpackRaw(z)
	return json.RawMessage(raw), err
}

// Samples hands fn each stored sample of a run, whole, by task key.
func (s *Store) Samples(ctx context.Context, runID string, fn func(*measure.Sample) error) error {
	return s.eachRaw(ctx, `SELECT run_id, z FROM sample_raw WHERE run_id = ? ORDER BY task_key`, []any{runID}, func(_ string, raw []byte) error {
		var x measure.Sample
		if err := json.Unmarshal(raw, &x); err != nil {
			return fmt.Errorf("store: a sample of run %s: %w", runID, err)
		}
		return fn(&x)
	})
}

// Done returns the task keys a run has stored already.
func (s *Store) Done(ctx context.Context, runID string) (map[string]bool, error) {
	return s.keys(ctx, `SELECT task_key FROM samples WHERE run_id = ?`, runID)
}

// ResultsDone returns the keys of the results of kind a run has stored,
// so that a resumed run measures only the rest.
func (s *Store) ResultsDone(ctx context.Context, runID string, kind Kind) (map[string]bool, error) {
	return s.keys(ctx, `SELECT task_key FROM results WHERE run_id = ? AND kind = ?`, runID, kind)
}

// Measured counts what a run has stored: its samples and its results but
// those of the kinds except names (bookkeeping such as link checks).
func (s *Store) Measured(ctx context.Context, runID string, except ...Kind) (int, error) {
	q := `SELECT (SELECT COUNT(*) FROM samples WHERE run_id = ?) + (SELECT COUNT(*) FROM results WHERE run_id = ?`
	args := []any{runID, runID}
	for _, k := range except {
		q += ` AND kind <> ?`
		args = append(args, string(k))
	}
	var n int
	err := s.db.QueryRowContext(ctx, s.rebind(q+`)`), args...).Scan(&n)
	return n, err
}

// ErrNoRun is a run ID the store does not hold.
var ErrNoRun = errors.New("no such run")

// keys returns the task keys query selects for a run; a run the store
// does not hold is ErrNoRun, before anything is measured into it.
func (s *Store) keys(ctx context.Context, query, runID string, args ...any) (map[string]bool, error) {
	var one int
	switch err := s.db.QueryRowContext(ctx, s.rebind(`SELECT 1 FROM runs WHERE id = ?`), runID).Scan(&one); {
	case errors.Is(err, sql.ErrNoRows):
		return nil, fmt.Errorf("store: %w: %s", ErrNoRun, runID)
	case err != nil:
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, s.rebind(query), append([]any{runID}, args...)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	done := map[string]bool{}
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return nil, err
		}
		done[k] = true
	}
	return done, rows.Err()
}

// Runs lists the stored runs, oldest first, with an attached dataset's.
func (s *Store) Runs(ctx context.Context) ([]Run, error) {
	runs, err := s.dbRuns(ctx)
	if err != nil || s.archive == nil {
		return runs, err
	}
	more, err := s.archive.Runs()
	if err != nil {
		return nil, err
	}
	for _, r := range more {
		if !slices.ContainsFunc(runs, func(x Run) bool { return x.ID == r.ID }) {
			runs = append(runs, r)
		}
	}
	sortRuns(runs)
	return runs, nil
}

// dbRuns are the runs the database holds.
func (s *Store) dbRuns(ctx context.Context) ([]Run, error) {
	return s.runs(ctx, `SELECT id, kind, started_at, doxlab_version, go_version, kernel, hostname, profile, spec, method FROM runs ORDER BY started_at, id`)
}

// Run reads one run; one the store does not hold is ErrNoRun.
func (s *Store) Run(ctx context.Context, id string) (Run, error) {
	runs, err := s.runs(ctx, s.rebind(`SELECT id, kind, started_at, doxlab_version, go_version, kernel, hostname, profile, spec, method FROM runs WHERE id = ?`), id)
	if err != nil {
		return Run{}, err
	}
	if len(runs) == 0 && s.archive != nil {
		all, err := s.archive.Runs()
		if err != nil {
			return Run{}, err
		}
		runs = slices.DeleteFunc(slices.Clone(all), func(r Run) bool { return r.ID != id })
	}
	if len(runs) == 0 {
		return Run{}, fmt.Errorf("store: %w: %s", ErrNoRun, id)
	}
	return runs[0], nil
}

func (s *Store) runs(ctx context.Context, query string, args ...any) ([]Run, error) {
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Run
	for rows.Next() {
		var r Run
		var started, spec string
		if err := rows.Scan(&r.ID, &r.Kind, &started, &r.DoxlabVersion, &r.GoVersion, &r.Kernel, &r.Hostname, &r.Profile, &spec, &r.Method); err != nil {
			return nil, err
		}
		r.StartedAt, _ = time.Parse(time.RFC3339Nano, started)
		r.Spec = json.RawMessage(spec)
		out = append(out, r)
	}
	return out, rows.Err()
}

// Retry runs op until it succeeds, backing off from 100 ms to 5 s
// between tries, for at most a minute or until ctx ends: a lock held by
// another writer or a database restart does not end a run. An error
// that can never succeed (Permanent) is returned at once. notify, if
// set, hears of each failure and the wait before the next try.
func Retry(ctx context.Context, op func() error, notify func(error, time.Duration)) error {
	const budget = time.Minute
	wait, deadline := 100*time.Millisecond, time.Now().Add(budget)
	for {
		err := op()
		if err == nil || ctx.Err() != nil || Permanent(err) || time.Now().Add(wait).After(deadline) {
			return err
		}
		if notify != nil {
			notify(err, wait)
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return err
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// Permanent reports whether a database error can never succeed on a
// retry: PostgreSQL's data exceptions (class 22), integrity constraint
// violations (23) and program limits exceeded (54, an index row too
// large), and SQLite's constraint, too-big and mismatch errors.
func Permanent(err error) bool {
	if errors.Is(err, ErrNotFinite) {
		return true
	}
	if pe, ok := errors.AsType[*pgconn.PgError](err); ok {
		switch pe.Code[:2] {
		case "22", "23", "54":
			return true
		}
	}
	if se, ok := errors.AsType[*sqlite.Error](err); ok {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_CONSTRAINT, sqlite3.SQLITE_TOOBIG, sqlite3.SQLITE_MISMATCH:
			return true
		}
	}
	return false
}

// ErrNotFinite is a sample holding NaN or an infinity where a duration
// goes: no measurement gives one, so the sample is refused whole.
var ErrNotFinite = errors.New("not a finite number")

// finiteSample refuses a sample whose typed durations are not finite.
func finiteSample(x *measure.Sample) error {
	check := map[string]float64{}
	if x.Probe != nil {
		check["probe_rtt_ms"] = x.Probe.RTTMs
	}
	if m := x.Measure; m != nil {
		check["handshake_ms"], check["query_ms"], check["total_ms"] = m.Timing.HandshakeMs, m.Timing.QueryMs, m.Timing.TotalMs
		check["wire_ms"], check["wire_query_ms"] = m.Timing.WireMs, m.Timing.WireQueryMs
	}
	if r := x.RTTs; r != nil {
		check["handshake_rtt"], check["resolve_rtt"], check["total_rtt"] = r.Handshake, r.Resolve, r.Total
	}
	for _, name := range slices.Sorted(maps.Keys(check)) {
		if v := check[name]; math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("%s is %v: %w", name, v, ErrNotFinite)
		}
	}
	return nil
}
