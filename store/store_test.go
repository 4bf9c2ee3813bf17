package store_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/doxlab/doxlab/measure"
	"github.com/doxlab/doxlab/store"
	"github.com/doxlab/doxlab/transport"
)

var update = flag.Bool("update", false, "rewrite golden files")

// fixture is a run with three samples: answered over DoQ in 0-RTT,
// answered over UDP, and a timeout.
func fixture() (store.Run, []*measure.Sample) {
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	run := store.Run{ID: "run-1", Kind: "measure", StartedAt: t0, DoxlabVersion: "v0.0.0 test", GoVersion: "go1.26",
		Kernel: "Linux 6.0 x86_64", Hostname: "vantage-1", Profile: "fiber", Spec: []byte(`{"targets":["10.200.0.2"]}`)}
	rec := func(status transport.Status, hs, q, tot float64, c transport.ConnInfo) *transport.Record {
		r := &transport.Record{Status: status, Timing: transport.Timing{HandshakeMs: hs, QueryMs: q, TotalMs: tot}, Conn: c, Answers: []string{}}
		if status.HasResponse() {
			r.Rcode = "NOERROR"
		}
		return r
	}
	sized := func(r *transport.Record, sent, received, ps, pr int64) *transport.Record {
		r.Bytes, r.Packets = transport.Counts{Sent: sent, Received: received}, transport.Counts{Sent: ps, Received: pr}
		return r
	}
	wired := func(r *transport.Record, ms float64) *transport.Record {
		r.Timing.WireMs, r.Timing.WireQueryMs = ms, ms
		return r
	}
	samples := []*measure.Sample{
		{Task: measure.Task{URL: "quic://10.200.0.2:853", Target: "10.200.0.2", Transport: "doq", Condition: "0rtt"}, Start: t0.Add(time.Second),
			Measure: sized(rec(transport.StatusOK, 17.5, 16.25, 18, transport.ConnInfo{TLSResumed: true, Used0RTT: true, TokenUsed: true, QUICVersion: "v1", ALPN: "doq"}), 3868, 2007, 4, 4),
			Probe:   &measure.ProbeResult{Kind: "quic", RTTMs: 14.9}, RTTs: &measure.InRTTs{Handshake: 1.174, Resolve: 1.091, Total: 1.208}, Status: transport.StatusOK,
			Vantage: &measure.Vantage{Name: "fra1", Address: "10.200.0.1", Network: "Example Net", ASN: 64500, Location: "Frankfurt, DE"},
			Job:     &measure.JobInfo{ID: 7, Attempt: 2, Worker: "w2", AttemptedBy: []string{"w1", "w2"}}},
		{Task: measure.Task{URL: "udp://10.200.0.2:53", Target: "10.200.0.2", Transport: "udp", Condition: "fresh"}, Start: t0.Add(2 * time.Second),
			Measure: wired(sized(rec(transport.StatusOK, 0, 15, 15.1, transport.ConnInfo{}), 30, 83, 1, 1), 14.95),
			Probe:   &measure.ProbeResult{Kind: "udp", RTTMs: 15}, RTTs: &measure.InRTTs{Resolve: 1, Total: 1.007}, Status: transport.StatusOK},
		{Task: measure.Task{URL: "tls://10.200.0.2:853", Target: "10.200.0.2", Transport: "dot", Condition: "fresh", Rep: 1}, Start: t0.Add(3 * time.Second),
			Measure: rec(transport.StatusTimeout, 0, 0, 5000, transport.ConnInfo{}), Probe: &measure.ProbeResult{Kind: "tcp", Error: "no answer"},
			Status: transport.StatusTimeout, Error: "no answer within 5s"},
	}
	return run, samples
}

// testLoad is a result kind of the tests own.
var testLoad = store.NewKind("test-load")

// openFixture opens a store at dsn holding the fixture's run and samples.
func openFixture(t *testing.T, dsn string) (*store.Store, store.Run, []*measure.Sample) {
	t.Helper()
	ctx := context.Background()
	s, err := store.Open(ctx, dsn)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	run, samples := fixture()
	require.NoError(t, s.BeginRun(ctx, run))
	for _, x := range samples {
		require.NoError(t, s.Write(ctx, run.ID, x))
	}
	return s, run, samples
}

func roundTrip(t *testing.T, dsn string) {
	ctx := context.Background()
	s, run, samples := openFixture(t, dsn)
	var err error
	require.ErrorContains(t, s.Write(ctx, run.ID, samples[0]), "writing sample", "a task is stored once")
	bad := *samples[1]
	bad.Rep, bad.RTTs = 7, &measure.InRTTs{Total: math.Inf(1)}
	err = s.Write(ctx, run.ID, &bad)
	require.ErrorIs(t, err, store.ErrNotFinite, "a non-finite duration is refused at write")
	require.ErrorContains(t, err, "total_rtt is +Inf")
	require.True(t, store.Permanent(err), "and never tried again")
	var stored []bool
	for range 2 { // a task a job queue delivered twice
		require.NoError(t, s.InTx(ctx, func(tx *sql.Tx) error {
			ok, err := s.WriteOnce(ctx, tx, run.ID, samples[1])
			stored = append(stored, ok)
			return err
		}))
	}
	require.Equal(t, []bool{false, false}, stored, "WriteOnce stores nothing a run already holds, without an error")
	page := measure.Task{URL: "udp://10.200.0.2:53", Transport: "udp", Page: "https://a.example/", Round: 2}
	stored = nil
	for range 2 { // a page load delivered twice is stored once too
		require.NoError(t, s.InTx(ctx, func(tx *sql.Tx) error {
			ok, err := s.WriteResultOnceTx(ctx, tx, run.ID, testLoad, store.TaskKey(page), run.StartedAt, map[string]int{"plt_ms": 100})
			stored = append(stored, ok)
			return err
		}))
	}
	require.Equal(t, []bool{true, false}, stored)
	require.Equal(t, "udp://10.200.0.2:53|udp|page:https://a.example/|0|r2", store.TaskKey(page))
	done, err := s.Done(ctx, run.ID)
	require.NoError(t, err)
	require.Len(t, done, 3)
	require.True(t, done[store.TaskKey(samples[1].Task)])
	require.True(t, done["fra1/"+store.TaskKey(samples[0].Task)], "a campaign's sample is keyed by its vantage point too")
	runs, err := s.Runs(ctx)
	require.NoError(t, err)
	require.Len(t, runs, 1)
	require.Equal(t, "vantage-1", runs[0].Hostname)
	require.JSONEq(t, string(run.Spec), string(runs[0].Spec))

	rows, err := s.Rows(ctx, "")
	require.NoError(t, err)
	require.Len(t, rows, 3)
	raw, err := s.Raw(ctx, run.ID, store.SampleKey(samples[0]))
	require.NoError(t, err)
	var whole measure.Sample
	require.NoError(t, json.Unmarshal(raw, &whole))
	require.Equal(t, *samples[0].Job, *whole.Job, "the sample is kept whole")
	require.Equal(t, samples[0].Measure.Bytes, whole.Measure.Bytes)
	var csv bytes.Buffer
	require.NoError(t, store.WriteCSV(&csv, rows))
	golden := filepath.Join("testdata", "export.csv")
	if *update {
		require.NoError(t, os.WriteFile(golden, csv.Bytes(), 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err)
	require.Equal(t, string(want), csv.String(), "CSV export differs from %s (go test -update to accept)", golden)

	var pq bytes.Buffer
	require.NoError(t, store.WriteParquet(&pq, rows))
	back, err := parquet.Read[store.Row](bytes.NewReader(pq.Bytes()), int64(pq.Len()))
	require.NoError(t, err)
	require.Equal(t, rows, back, "Parquet round trip")
	require.Nil(t, back[2].TotalRTT, "a failed sample has no RTT figures, not zeros")
	// Text of few values (runs, transports, statuses) is written as a
	// dictionary and its indices, a sample's own key as it is.
	f, err := parquet.OpenFile(bytes.NewReader(pq.Bytes()), int64(pq.Len()))
	require.NoError(t, err)
	enc := map[string][]format.Encoding{}
	for _, c := range f.Metadata().RowGroups[0].Columns {
		enc[strings.Join(c.MetaData.PathInSchema, ".")] = c.MetaData.Encoding
	}
	for _, c := range []string{"run_id", "transport", "status", "rcode", "url"} {
		require.Contains(t, enc[c], format.RLEDictionary, c)
	}
	require.NotContains(t, enc["key"], format.RLEDictionary)

	// Results select runs by ID prefix in the query.
	for _, id := range []string{"exp-4g", "exp-4g-medium"} {
		r := store.NewRun("experiment:x", "", nil)
		r.ID = id
		require.NoError(t, s.BeginRun(ctx, r))
		require.NoError(t, s.WriteResult(ctx, id, store.Kind("k"), "1", run.StartedAt, map[string]string{"run": id}))
	}
	var got []string
	require.NoError(t, s.Results(ctx, "exp-4g-", store.Kind("k"), func(id string, _ []byte) error { got = append(got, id); return nil }))
	require.Equal(t, []string{"exp-4g-medium"}, got)

	// A run measured again leaves analysis and export, never the store.
	again := store.NewRun("experiment:x", "", nil)
	again.ID = "exp-4g-again"
	require.NoError(t, s.BeginRun(ctx, again))
	require.NoError(t, s.WriteResult(ctx, again.ID, store.Kind("k"), "1", run.StartedAt, map[string]string{"run": again.ID}))
	for _, id := range []string{"exp-4g", again.ID} {
		require.NoError(t, s.Write(ctx, id, samples[1]))
	}
	require.NoError(t, s.Supersede(ctx, "exp-4g", again.ID, "the link check after it failed (RTT error p99 1400 µs)"))
	for _, all := range []bool{false, true} {
		got = nil
		require.NoError(t, s.FilteredResults(ctx, store.Filter{RunPrefix: "exp-", Superseded: all}, store.Kind("k"), func(id string, _ []byte) error { got = append(got, id); return nil }))
		var rows []string
		require.NoError(t, s.EachRow(ctx, store.Filter{RunPrefix: "exp-", Superseded: all}, func(r *store.Row) error { rows = append(rows, r.RunID); return nil }))
		if all {
			require.Equal(t, []string{"exp-4g", "exp-4g-again", "exp-4g-medium"}, got)
			require.Equal(t, []string{"exp-4g", "exp-4g-again"}, rows)
		} else {
			require.Equal(t, []string{"exp-4g-again", "exp-4g-medium"}, got, "results of a superseded run are left out")
			require.Equal(t, []string{"exp-4g-again"}, rows, "and its samples")
		}
	}
	sup, err := s.Supersessions(ctx, "exp-")
	require.NoError(t, err)
	require.Len(t, sup, 1)
	require.Equal(t, [3]string{"exp-4g", "exp-4g-again", "the link check after it failed (RTT error p99 1400 µs)"}, [3]string{sup[0].Run, sup[0].By, sup[0].Why})
	for id, want := range map[string]string{"exp-4g": "exp-4g-again", "exp-4g-medium": "", "exp-4": ""} {
		by, err := s.SupersededBy(ctx, id)
		require.NoError(t, err)
		require.Equal(t, want, by, id)
	}
}

func TestSQLiteRoundTrip(t *testing.T) {
	roundTrip(t, filepath.Join(t.TempDir(), "doxlab.db"))
}

func TestPostgresRoundTrip(t *testing.T) {
	roundTrip(t, testutil.StartPostgres(t))
}

// schema1Raw is the raw JSON of writeSchema1's sample k2.
const schema1Raw = `{"measure":{"bytes":{"sent":30,"received":83},"packets":{"sent":1,"received":1},"timing":{"wire_ms":14.95,"wire_query_ms":14.9},` +
	`"conn":{"delayed_ack_stall":true}},"round":3,"vantage":{"name":"fra1","address":"10.200.0.1","network":"Example Net","asn":64500,"location":"Frankfurt, DE"},"job":{"attempt":2}}`

// upgradeFromSchema1 opens a store written before vantage points and
// the typed columns of schema 3: Open adds the columns, fills them from
// each sample's raw JSON, keeps the samples, and stores new ones.
func upgradeFromSchema1(t *testing.T, driver, dsn string) {
	writeSchema1(t, driver, dsn)
	upgradedFromSchema1(t, dsn)
}

// writeSchema1 writes a store of schema 1: a run, two samples (k and k2,
// whose raw JSON is schema1Raw) and a page load.
func writeSchema1(t *testing.T, driver, dsn string) {
	t.Helper()
	db, err := sql.Open(driver, dsn)
	require.NoError(t, err)
	for _, stmt := range []string{
		`CREATE TABLE schema_version (version INTEGER NOT NULL)`, `INSERT INTO schema_version VALUES (1)`,
		`CREATE TABLE runs (id TEXT PRIMARY KEY, kind TEXT NOT NULL, started_at TEXT NOT NULL, doxlab_version TEXT NOT NULL, go_version TEXT NOT NULL,
			kernel TEXT NOT NULL, hostname TEXT NOT NULL, profile TEXT NOT NULL, spec TEXT NOT NULL)`,
		`CREATE TABLE samples (run_id TEXT NOT NULL REFERENCES runs(id), task_key TEXT NOT NULL, started_at TEXT NOT NULL, target TEXT NOT NULL, url TEXT NOT NULL,
			transport TEXT NOT NULL, cond TEXT NOT NULL, rep INTEGER NOT NULL, status TEXT NOT NULL, rcode TEXT NOT NULL, probe_rtt_ms DOUBLE PRECISION,
			handshake_ms DOUBLE PRECISION, query_ms DOUBLE PRECISION, total_ms DOUBLE PRECISION, handshake_rtt DOUBLE PRECISION, resolve_rtt DOUBLE PRECISION,
			total_rtt DOUBLE PRECISION, tls_resumed BOOLEAN NOT NULL, used_0rtt BOOLEAN NOT NULL, retry BOOLEAN NOT NULL, token_used BOOLEAN NOT NULL,
			quic_version TEXT NOT NULL, alpn TEXT NOT NULL, raw TEXT NOT NULL, PRIMARY KEY (run_id, task_key))`,
		`CREATE TABLE page_loads (run_id TEXT NOT NULL REFERENCES runs(id), task_key TEXT NOT NULL, started_at TEXT NOT NULL, profile TEXT NOT NULL,
			page TEXT NOT NULL, transport TEXT NOT NULL, stub_state TEXT NOT NULL, h3 TEXT NOT NULL, dns_mode TEXT NOT NULL, rep INTEGER NOT NULL,
			status TEXT NOT NULL, plt_ms DOUBLE PRECISION, fcp_ms DOUBLE PRECISION, dns_ms DOUBLE PRECISION, h3_0rtt BOOLEAN NOT NULL,
			h3_resumed BOOLEAN NOT NULL, raw TEXT NOT NULL, PRIMARY KEY (run_id, task_key))`,
		`INSERT INTO runs VALUES ('old', 'measure', '2026-01-01T00:00:00Z', 'v0', 'go', 'Linux', 'h', '', '{}')`,
		`INSERT INTO page_loads VALUES ('old', 'fiber|wiki|udp', '2026-01-01T00:00:03Z', 'fiber', 'wiki', 'udp', 'cold', '1rtt', 'stub', 0, 'ok', 110.5, 90, 15,
			FALSE, FALSE, '{"profile":"fiber","page":"wiki","plt_ms":110.5}')`,
		`INSERT INTO samples VALUES ('old', 'k', '2026-01-01T00:00:01Z', 't', 'udp://t:53', 'udp', 'fresh', 5, 'ok', 'NOERROR', 1, 0, 1, 1, 0, 1, 1, FALSE, FALSE, FALSE, FALSE, '', '', '{}')`,
		`INSERT INTO samples VALUES ('old', 'k2', '2026-01-01T01:00:02.1234567+01:00', 't', 'udp://t:53', 'udp', 'fresh', 6, 'ok', 'NOERROR', 1, 0, 1, 1, 0, 1, 1, FALSE, FALSE, FALSE, FALSE, '', '', '` + schema1Raw + `')`,
	} {
		_, err := db.Exec(stmt)
		require.NoError(t, err, stmt)
	}
	require.NoError(t, db.Close())
}

// upgradedFromSchema1 opens writeSchema1's store and checks that every
// upgrade kept what it held.
func upgradedFromSchema1(t *testing.T, dsn string) {
	t.Helper()
	ctx := context.Background()
	s, err := store.Open(ctx, dsn)
	require.NoError(t, err)
	defer s.Close()
	_, samples := fixture()
	require.NoError(t, s.Write(ctx, "old", samples[0]))
	require.NoError(t, s.PutSummary(ctx, "cells", "old", store.Summary{Held: store.Held{Samples: 3, Last: 3}, Data: []byte("x")}), "schema 12's summaries")
	requireIndex(t, s, "results_by_kind") // schema 13's
	rows, err := s.Rows(ctx, "old")
	require.NoError(t, err)
	require.Len(t, rows, 3, "the old samples are kept beside the new one")
	byKey := map[int64]store.Row{}
	for _, r := range rows {
		byKey[r.Rep] = r
	}
	require.Empty(t, byKey[5].Vantage)
	// A start of a store before storedTime, with a vantage point's offset
	// and seven digits, in microseconds (schema 11): truncated, not
	// rounded (PostgreSQL's timestamptz would make it ...457).
	require.Equal(t, time.Date(2026, 1, 1, 0, 0, 1, 0, time.UTC), byKey[5].StartedAt)
	require.Equal(t, time.Date(2026, 1, 1, 0, 0, 2, 123456000, time.UTC), byKey[6].StartedAt)
	var text string
	require.NoError(t, s.DB().QueryRowContext(ctx, `SELECT started_at FROM samples WHERE task_key = 'k2'`).Scan(&text))
	require.Equal(t, "2026-01-01T00:00:02.123456000Z", text, "the view gives the start as text, as schemas 1 to 10 kept it")
	require.Nil(t, byKey[5].WireMs, "no wire time in the raw sample: none in its column")
	r := byKey[6]
	require.Equal(t, [4]int64{30, 83, 1, 1}, [4]int64{r.BytesSent, r.BytesReceived, r.PacketsSent, r.PacketsReceived})
	require.NotNil(t, r.WireMs)
	require.InDelta(t, 14.95, *r.WireMs, 1e-9)
	require.True(t, r.DelayedACKStall)
	require.Equal(t, int64(2), r.JobAttempt)
	require.Equal(t, int64(3), r.Round, "the campaign round, from the raw sample (schema 6)")
	require.Zero(t, byKey[5].Round)
	require.Equal(t, []any{"10.200.0.1", "Example Net", int64(64500), "Frankfurt, DE"}, []any{r.VantageAddress, r.VantageNetwork, r.VantageASN, r.VantageLocation})
	moved, err := s.Raw(ctx, "old", "k2")
	require.NoError(t, err)
	require.JSONEq(t, schema1Raw, string(moved), "the raw sample moved to its own table whole (schema 4), compressed (schema 8), under its number (schema 9), into its row (schema 10)")
	zs, err := s.DB().QueryContext(ctx, `SELECT z FROM sample_cols`)
	require.NoError(t, err)
	defer zs.Close()
	for zs.Next() {
		var z []byte
		require.NoError(t, zs.Scan(&z))
		require.Contains(t, []byte{0, 3, 5}, z[0], "every sample packed again (schema 9: with the samples' dictionary, 3 now), a frame of dictionary 2 made bare (schema 11), or kept as it is")
	}
	var loads []string
	require.NoError(t, s.Results(ctx, "old", store.Kind("web-load"), func(id string, raw []byte) error {
		loads = append(loads, id+" "+string(raw))
		return nil
	}))
	require.Equal(t, []string{`old {"profile":"fiber","page":"wiki","plt_ms":110.5}`}, loads, "page loads are web-load results (schema 5)")
	done, err := s.ResultsDone(ctx, "old", store.Kind("web-load"))
	require.NoError(t, err)
	require.Equal(t, map[string]bool{"fiber|wiki|udp": true}, done, "under their task keys, for a resumed run")
	run, err := s.Run(ctx, "old")
	require.NoError(t, err)
	require.Zero(t, run.Method, "a run from before methods were recorded (schema 7)")
	next := store.NewRun("experiment:web", "fiber", nil)
	next.Method = 3
	require.NoError(t, s.BeginRun(ctx, next))
	run, err = s.Run(ctx, next.ID)
	require.NoError(t, err)
	require.Equal(t, 3, run.Method)
}

// upgradeResumes cuts the upgrade short after a batch of records
// compressed (schema 8) or packed again (schema 9), as a kill or a full
// disk would: Open fails, the store holds some records done and the rest
// not, and the next Open goes on and loses nothing.
func upgradeResumes(t *testing.T, driver string, newDSN func() string) {
	stop := errors.New("stopped half-way")
	for at, schema := range map[int]int{2: 8, 4: 9} { // compressing the samples; packing them again
		dsn := newDSN()
		writeSchema1(t, driver, dsn)
		batches := 0
		restore := store.SetPackHooks(1, func() error {
			if batches++; batches == at {
				return stop
			}
			return nil
		})
		_, err := store.Open(context.Background(), dsn)
		restore()
		require.ErrorIs(t, err, stop)
		db, err := sql.Open(driver, dsn)
		require.NoError(t, err)
		var v int
		require.NoError(t, db.QueryRow(`SELECT version FROM schema_version`).Scan(&v))
		db.Close()
		require.Equal(t, schema, v, "cut short on the way to schema %d", schema)
		upgradedFromSchema1(t, dsn)
	}
}

func TestUpgradeResumes(t *testing.T) {
	upgradeResumes(t, "sqlite", func() string { return filepath.Join(t.TempDir(), "old.db") })
}

func TestPostgresUpgradeResumes(t *testing.T) {
	upgradeResumes(t, "pgx", func() string { return testutil.StartPostgres(t) })
}

// upgradeFromSchema10: a store at schema 10, its records of codec 2,
// is upgraded to 11: the starts become numbers, the frames bare, and
// nothing is lost.
func upgradeFromSchema10(t *testing.T, driver, dsn string) {
	writeSchema1(t, driver, dsn)
	restore := store.SetSchema10()
	s, err := store.Open(context.Background(), dsn)
	restore()
	require.NoError(t, err)
	var v int
	var codec []byte
	require.NoError(t, s.DB().QueryRow(`SELECT version FROM schema_version`).Scan(&v))
	require.NoError(t, s.DB().QueryRow(`SELECT z FROM sample_cols WHERE rep = 6`).Scan(&codec))
	require.NoError(t, s.Close())
	require.Equal(t, []any{10, byte(2)}, []any{v, codec[0]}, "a store as schema 10 left it")
	upgradedFromSchema1(t, dsn)
	db, err := sql.Open(driver, dsn)
	require.NoError(t, err)
	defer db.Close()
	var z []byte
	require.NoError(t, db.QueryRow(`SELECT z FROM sample_cols WHERE rep = 6`).Scan(&z))
	require.Equal(t, store.Bare(codec), z, "the engine's SQL takes the frame apart as Go does")
}

func TestUpgradeFromSchema10(t *testing.T) {
	upgradeFromSchema10(t, "sqlite", filepath.Join(t.TempDir(), "old.db"))
}

func TestPostgresUpgradeFromSchema10(t *testing.T) {
	upgradeFromSchema10(t, "pgx", testutil.StartPostgres(t))
}

func TestUpgradeFromSchema1(t *testing.T) {
	upgradeFromSchema1(t, "sqlite", filepath.Join(t.TempDir(), "old.db"))
}

func TestPostgresUpgradeFromSchema1(t *testing.T) {
	upgradeFromSchema1(t, "pgx", testutil.StartPostgres(t))
}

func TestOpenErrors(t *testing.T) {
	start := time.Now()
	_, err := store.Open(context.Background(), "postgres://doxlab:secret@127.0.0.1:1/x?sslmode=disable&connect_timeout=2")
	require.ErrorContains(t, err, "unreachable")
	require.NotContains(t, err.Error(), "secret", "the password is not printed")
	require.Less(t, time.Since(start), testutil.Scaled(6*time.Second), "fails fast")
	// pgx tries TLS and then clear text (sslmode=prefer), and lists each
	// attempt on a line of its own.
	_, err = store.Open(context.Background(), "postgres://doxlab@127.0.0.1:1/x?connect_timeout=2")
	require.ErrorContains(t, err, "connection refused")
	require.NotContains(t, err.Error(), "\n", "one line")
	_, err = store.Open(context.Background(), filepath.Join(t.TempDir(), "no", "such", "dir", "x.db"))
	require.Error(t, err)
}

func TestNewRunRecordsEnvironment(t *testing.T) {
	r := store.NewRun("measure", "dsl", map[string]int{"repeat": 3})
	require.NotEmpty(t, r.ID)
	require.Contains(t, r.Kernel, "Linux")
	require.NotEmpty(t, r.GoVersion)
	require.JSONEq(t, `{"repeat":3}`, string(r.Spec))
}

// TestCSVNeutralisesFormulas: text from the network that a spreadsheet
// would run ('=HYPERLINK(…)' as a vantage point's label) gets a leading
// quote; numbers, negative ones too, and csv-raw stay as they are.
func TestCSVNeutralisesFormulas(t *testing.T) {
	neg := -1.5
	rows := []store.Row{{RunID: "r", Vantage: `=HYPERLINK("http://x","y")`, Target: "+1", Status: "-x", Rcode: "@SUM(A1)", ProbeRTTMs: &neg}}
	var safe, raw bytes.Buffer
	require.NoError(t, store.Write(&safe, store.CSV, rows))
	require.NoError(t, store.Write(&raw, store.RawCSV, rows))
	require.Contains(t, safe.String(), `"'=HYPERLINK(""http://x"",""y"")"`)
	for _, cell := range []string{",'+1,", ",'-x,", ",'@SUM(A1),", ",-1.5,"} {
		require.Contains(t, safe.String(), cell)
	}
	require.Contains(t, raw.String(), `"=HYPERLINK(""http://x"",""y"")"`)
	require.Contains(t, raw.String(), ",+1,")
}

// TestNewerStoreIsPermanent: a store a newer doxlab wrote is refused,
// naming both schemas, and a worker does not wait for it to change: it
// is not an error a retry mends.
func TestNewerStoreIsPermanent(t *testing.T) {
	ctx := context.Background()
	dsn := filepath.Join(t.TempDir(), "s.db")
	s, err := store.Open(ctx, dsn)
	require.NoError(t, err)
	_, err = s.DB().Exec(`UPDATE schema_version SET version = 99`)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	tries := 0
	err = store.Retry(ctx, func() error {
		tries++
		_, err := store.Open(ctx, dsn)
		return err
	}, func(error, time.Duration) { t.Error("waited to try again") })
	require.ErrorIs(t, err, store.ErrNewerSchema)
	require.ErrorContains(t, err, fmt.Sprintf("written by a newer doxlab (schema 99, this one knows %d)", store.SchemaVersion))
	require.Equal(t, 1, tries)
}

// TestOpenNamesAFileThatIsNoStore: a file that is not a database is said
// to be one, not "unreachable".
func TestOpenNamesAFileThatIsNoStore(t *testing.T) {
	p := filepath.Join(t.TempDir(), "notes.txt")
	require.NoError(t, os.WriteFile(p, []byte("hello, this is not SQLite, but long enough to have a header of its own\n"), 0o644))
	_, err := store.Open(context.Background(), p)
	require.EqualError(t, err, p+" is not a doxlab store (not a SQLite database)")
}

// TestRunsTable: 'export --table runs' has a row per run that every
// other table's run_id joins to, with its experiment, method version and
// the run that superseded it.
func TestRunsTable(t *testing.T) {
	ctx := context.Background()
	s := tempStore(t)
	first := store.NewRun("experiment:web", "fiber", nil)
	first.ID, first.Method = "web-x-fiber", 2
	again := store.NewRun("experiment:web", "fiber", nil)
	again.ID, again.Method = "web-x-fiber-again", 2
	other := store.NewRun("measure", "", nil)
	other.ID = "m"
	for _, r := range []store.Run{first, again, other} {
		require.NoError(t, s.BeginRun(ctx, r))
	}
	require.NoError(t, s.Supersede(ctx, first.ID, again.ID, "link check after: RTT error p99 1.4 ms"))
	var runs *store.Export
	for _, e := range store.Exports() {
		if e.Table == "runs" {
			runs = &e
		}
	}
	require.NotNil(t, runs, "the runs table is registered")
	var out bytes.Buffer
	n, err := runs.Write(ctx, s, func(id string) bool { return id != "m" }, &out, store.CSV)
	require.NoError(t, err)
	require.Equal(t, 2, n, "the runs keep accepts")
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Equal(t, "run_id,kind,experiment,method,started_at,doxlab_version,go_version,kernel,hostname,profile,superseded_by", lines[0])
	require.Regexp(t, `^web-x-fiber,experiment:web,web,2,.*,fiber,web-x-fiber-again$`, lines[1])
	require.Regexp(t, `^web-x-fiber-again,experiment:web,web,2,.*,fiber,$`, lines[2])
}

// storeStats: stats count every table's rows, give each table the octets
// its pages (or relation) take, the samples' octets each, and each result
// kind's raw JSON; the printed table says the same.
func storeStats(t *testing.T, dsn string) {
	ctx := context.Background()
	s, run, samples := openFixture(t, dsn)
	for i := range 4 {
		require.NoError(t, s.WriteResult(ctx, run.ID, store.Kind("web-load"), fmt.Sprint(i), time.Now(), map[string]any{"plt_ms": 100 + i, "page": "wiki"}))
	}
	st, err := s.Stats(ctx)
	require.NoError(t, err)
	rows := map[string]int64{}
	for _, tb := range st.Tables {
		rows[tb.Name] = tb.Rows
		require.Positive(t, tb.Octets, "%s takes room", tb.Name)
	}
	require.Equal(t, map[string]int64{"runs": 1, "sample_cols": int64(len(samples)), "results": 4, "summaries": 0, "sample_blocks": 0}, rows)
	require.Equal(t, int64(len(samples)), st.Samples)
	require.Equal(t, int64(len(samples)), st.Unsealed, "written, not yet sealed")
	require.Positive(t, st.OctetsPerSample)
	require.GreaterOrEqual(t, st.Octets, st.Tables[0].Octets+st.Tables[1].Octets+st.Tables[2].Octets)
	require.Len(t, st.Kinds, 1)
	require.Equal(t, "web-load", st.Kinds[0].Kind)
	require.Equal(t, int64(4), st.Kinds[0].Rows)
	require.InDelta(t, float64(st.Kinds[0].RawOctets)/4, st.Kinds[0].OctetsEach, 1e-9)
	var out bytes.Buffer
	require.NoError(t, st.Write(&out))
	require.Contains(t, out.String(), fmt.Sprintf("%d DNS samples, %.0f octets each", len(samples), st.OctetsPerSample))
	require.Regexp(t, `(?m)^\s*web-load\s+4\s`, out.String())

	require.NoError(t, s.Seal(ctx, run.ID))
	st, err = s.Stats(ctx)
	require.NoError(t, err)
	require.Zero(t, st.Unsealed)
	require.Equal(t, "sample_blocks", st.Tables[4].Name)
	require.Equal(t, int64(1), st.Tables[4].Rows)
}

func TestSQLiteStats(t *testing.T)   { storeStats(t, filepath.Join(t.TempDir(), "s.db")) }
func TestPostgresStats(t *testing.T) { storeStats(t, testutil.StartPostgres(t)) }

// TestResultsInTheOrderMeasured: results and runs come back in the
// order of their times, whatever their zones and fractions: a time on a
// whole second sorts before one half a second later, a vantage point's
// local time by its instant.
func TestResultsInTheOrderMeasured(t *testing.T) {
	ctx := context.Background()
	s := tempStore(t)
	base := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	cet := time.FixedZone("CET", 3600)
	times := map[string]time.Time{
		"c": base.Add(500 * time.Millisecond),
		"a": base.Add(-time.Nanosecond).In(cet), // 12:59:59.999999999+01:00
		"b": base,
		"d": base.Add(time.Second).In(cet),
	}
	for _, id := range []string{"d", "c", "b", "a"} {
		run := store.NewRun("measure", "", nil)
		run.ID, run.StartedAt = "run-"+id, times[id]
		require.NoError(t, s.BeginRun(ctx, run))
		require.NoError(t, s.WriteResult(ctx, "run-d", store.Kind("k"), id, times[id], map[string]string{"id": id}))
	}
	var got []string
	require.NoError(t, s.FilteredResults(ctx, store.Filter{}, store.Kind("k"), func(_ string, raw []byte) error {
		var x map[string]string
		require.NoError(t, json.Unmarshal(raw, &x))
		got = append(got, x["id"])
		return nil
	}))
	require.Equal(t, []string{"a", "b", "c", "d"}, got)
	runs, err := s.Runs(ctx)
	require.NoError(t, err)
	got = nil
	for _, r := range runs {
		got = append(got, r.ID)
		require.True(t, r.StartedAt.Equal(times[strings.TrimPrefix(r.ID, "run-")]), "%s keeps its instant", r.ID)
	}
	require.Equal(t, []string{"run-a", "run-b", "run-c", "run-d"}, got)
}

// starts: a sample's start is kept to the microsecond (schema 11), as
// the Parquet export keeps it, floored as Go's UnixMicro floors it, and
// the view samples gives it as the text schemas 1 to 10 kept: before
// 1970 too, where integer division would round toward zero.
func starts(t *testing.T, dsn string) {
	ctx := context.Background()
	s, run, samples := openFixture(t, dsn)
	at := map[int]time.Time{7: time.Date(1969, 12, 31, 23, 59, 59, 500000789, time.UTC), 8: time.Date(2026, 11, 29, 17, 1, 52, 123456789, time.FixedZone("", 3600))}
	for rep, start := range at {
		x := *samples[1]
		x.Rep, x.Start = rep, start
		require.NoError(t, s.Write(ctx, run.ID, &x))
	}
	rows, err := s.Rows(ctx, run.ID)
	require.NoError(t, err)
	got := map[int]time.Time{}
	for _, r := range rows {
		got[int(r.Rep)] = r.StartedAt
	}
	require.Equal(t, time.Date(1969, 12, 31, 23, 59, 59, 500000000, time.UTC), got[7])
	require.Equal(t, time.Date(2026, 11, 29, 16, 1, 52, 123456000, time.UTC), got[8], "in UTC")
	texts := map[int]string{}
	q, err := s.DB().QueryContext(ctx, `SELECT rep, started_at FROM samples WHERE rep > 6`)
	require.NoError(t, err)
	defer q.Close()
	for q.Next() {
		var rep int
		var text string
		require.NoError(t, q.Scan(&rep, &text))
		texts[rep] = text
	}
	require.NoError(t, q.Err())
	require.Equal(t, map[int]string{7: "1969-12-31T23:59:59.500000000Z", 8: "2026-11-29T16:01:52.123456000Z"}, texts)
}

func TestSQLiteStarts(t *testing.T)   { starts(t, filepath.Join(t.TempDir(), "s.db")) }
func TestPostgresStarts(t *testing.T) { starts(t, testutil.StartPostgres(t)) }

// requireIndex fails unless the store has the index name, on either
// engine.
func requireIndex(t *testing.T, s *store.Store, name string) {
	t.Helper()
	var n int
	err := s.DB().QueryRow(`SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = ?`, name).Scan(&n)
	if err != nil { // PostgreSQL's catalogue
		require.NoError(t, s.DB().QueryRow(`SELECT count(*) FROM pg_indexes WHERE indexname = $1`, name).Scan(&n))
	}
	require.Equal(t, 1, n, "the index %s", name)
}

// TestResultsOfAKind: a kind's results are found by the index, not by
// walking every kind's (a year's page loads); RunResults counts each
// run's, with the latest start, and StoredResults reads a run's, or
// those started after a time.
func TestResultsOfAKind(t *testing.T) {
	ctx := context.Background()
	s := tempStore(t)
	t0 := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	for _, run := range []string{"a", "b"} {
		require.NoError(t, s.BeginRun(ctx, store.Run{ID: run, Kind: "web", StartedAt: t0}))
		for i := range 3 {
			require.NoError(t, s.WriteResult(ctx, run, "load", fmt.Sprint(i), t0.Add(time.Duration(i)*time.Hour), map[string]int{"i": i}))
			require.NoError(t, s.WriteResult(ctx, run, "other", fmt.Sprint(i), t0, map[string]int{"i": i}))
		}
	}
	plan := testutil.QueryPlan(t, s.DB(), `SELECT run_id, z FROM results WHERE kind = ? AND substr(run_id, 1, ?) = ?`, "load", 0, "")
	require.Contains(t, plan, "USING INDEX results_by_kind (kind=?)")

	held, err := s.RunResults(ctx, "load")
	require.NoError(t, err)
	require.Equal(t, map[string]store.Held{"a": {Samples: 3, Last: t0.Add(2 * time.Hour).UnixNano()}, "b": {Samples: 3, Last: t0.Add(2 * time.Hour).UnixNano()}}, held)
	var got []string
	each := func(run string, raw []byte) error {
		got = append(got, run+" "+string(raw))
		return nil
	}
	require.NoError(t, s.StoredResults(ctx, []string{"b"}, "load", 0, each))
	require.Equal(t, []string{`b {"i":0}`, `b {"i":1}`, `b {"i":2}`}, got)
	got = nil
	require.NoError(t, s.StoredResults(ctx, []string{"b", "a"}, "load", 0, each))
	require.Equal(t, []string{`a {"i":0}`, `a {"i":1}`, `a {"i":2}`, `b {"i":0}`, `b {"i":1}`, `b {"i":2}`}, got, "run by run, each in the order taken")
	got = nil
	require.NoError(t, s.StoredResults(ctx, []string{"a", "b"}, "load", t0.Add(time.Hour).UnixNano(), each))
	require.Equal(t, []string{`a {"i":2}`, `b {"i":2}`}, got, "those started after the hour")
	got = nil
	require.NoError(t, s.StoredResults(ctx, nil, "load", 0, each))
	require.Empty(t, got)
}

// tempStore is a SQLite store of the test's own, closed after it.
func tempStore(t *testing.T) *store.Store {
	t.Helper()
	s, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "s.db"))
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}
