package store

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/csv"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/doxlab/doxlab/internal/sheet"
	"github.com/doxlab/doxlab/store/internal/sqliteread"
)

// Row is one sample flattened for analysis: the columns pandas, DuckDB
// and R users want, with its run's environment. The raw sample stays in
// the store.
type Row struct {
	RunID         string `parquet:"run_id,dict"`
	Key           string `parquet:"key"` // the sample's in its run, as the store keys its record whole
	Kind          string `parquet:"kind,dict"`
	Profile       string `parquet:"profile,dict"`
	DoxlabVersion string `parquet:"doxlab_version,dict"`
	Method        int64  `parquet:"method"` // the experiment's method version; 0: none recorded
	Kernel        string `parquet:"kernel,dict"`
	Hostname      string `parquet:"hostname,dict"`
	// The vantage point a campaign's worker measured from (empty outside
	// campaigns), and the delivery of its job that measured it.
	Vantage         string    `parquet:"vantage,dict"`
	VantageAddress  string    `parquet:"vantage_address,dict"`
	VantageNetwork  string    `parquet:"vantage_network,dict"`
	VantageASN      int64     `parquet:"vantage_asn"`
	VantageLocation string    `parquet:"vantage_location,dict"`
	JobAttempt      int64     `parquet:"job_attempt"`
	Round           int64     `parquet:"round"` // of a campaign in rounds, from 1; 0 outside one
	StartedAt       time.Time `parquet:"started_at,timestamp(microsecond:utc)"`
	Target          string    `parquet:"target,dict"`
	URL             string    `parquet:"url,dict"`
	Transport       string    `parquet:"transport,dict"`
	Condition       string    `parquet:"condition,dict"`
	Rep             int64     `parquet:"rep"`
	Status          string    `parquet:"status,dict"`
	Rcode           string    `parquet:"rcode,dict"`
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
	QUICVersion     string    `parquet:"quic_version,dict"`
	ALPN            string    `parquet:"alpn,dict"`
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

	raw []byte `parquet:"-"` // the sample whole, packed (zraw), when a scan asked for it
}

// Filter selects what a report or export reads, pushed down into the
// query so that the store sends nothing else.
type Filter struct {
	RunPrefix string // the runs whose ID starts with it; "" for all
	Vantage   string // only what this vantage point measured; "" for all
	// OKRcodes are the rcodes analysis takes as answers (nil: NOERROR
	// and NXDOMAIN); every row is read, the others count as failures.
	OKRcodes []string
	// Superseded keeps the runs that were measured again (Supersede),
	// which analysis and export leave out.
	Superseded bool
	// Runs are the only runs read, by ID; nil for any the rest keeps.
	Runs []string
	// After reads the store's samples numbered above it only (not an
	// attached dataset's): what a run holds since its summary was made.
	After int64
	// Held is what RunSamples said, where the caller asked it already: a
	// sealed run's blocks are read where they and its tail count it.
	Held map[string]int64
	// Sealed, if not nil, is given what the blocks hold of each run the
	// scan read from its blocks alone (no tail), whole or on from After:
	// how many samples, and the largest number among them. A summary of
	// the run is of exactly that, whatever was written since.
	Sealed map[string]Held
}

// Vantages are the vantage points the samples name, in order.
func (s *Store) Vantages(ctx context.Context) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT DISTINCT vantage FROM samples WHERE vantage <> '' ORDER BY vantage`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	if s.archive != nil {
		for _, v := range s.archive.vantages() {
			if !slices.Contains(out, v) {
				out = append(out, v)
			}
		}
		slices.Sort(out)
	}
	return out, rows.Err()
}

// Rows returns the samples of one run, or of all runs when runID is "".
// It holds them all: EachRow streams.
func (s *Store) Rows(ctx context.Context, runID string) ([]Row, error) {
	var out []Row
	err := s.EachRow(ctx, Filter{RunPrefix: runID}, func(r *Row) error {
		if runID == "" || r.RunID == runID {
			out = append(out, r.Clone())
		}
		return nil
	})
	return out, err
}

// Clone is a copy of r that shares nothing with it.
func (r *Row) Clone() Row {
	c := *r
	for _, p := range c.floats() {
		if *p != nil {
			v := **p
			*p = &v
		}
	}
	return c
}

// floats are r's optional numbers, in scanned's order (fl).
func (r *Row) floats() [9]**float64 {
	return [9]**float64{&r.ProbeRTTMs, &r.HandshakeMs, &r.QueryMs, &r.TotalMs, &r.HandshakeRTT, &r.ResolveRTT, &r.TotalRTT, &r.WireMs, &r.WireQueryMs}
}

// EachRow hands f each sample the filter selects, flattened from the
// typed columns (never the raw JSON), one at a time: memory does not grow
// with the store. Each run's samples come in the order they were
// stored: the runs read from their blocks (as a report reads them)
// first, one after another in the order they were begun, then the
// samples of the others in the order stored. f must not keep r: it is
// reused.
func (s *Store) EachRow(ctx context.Context, f Filter, fn func(r *Row) error) error {
	return s.EachRows(ctx, f, func(rows []Row) error {
		for i := range rows {
			if err := fn(&rows[i]); err != nil {
				return err
			}
		}
		return nil
	})
}

// EachRows is EachRow a batch of rows at a time (up to a range of a
// scan), which a writer of columns takes whole. fn must not keep rows:
// their memory is the next batch's.
func (s *Store) EachRows(ctx context.Context, f Filter, fn func(rows []Row) error) error {
	return s.scan(ctx, f, allColumns, fn, nil)
}

// EachTiming is EachRow for analysis, which needs no order: it reads
// only the run, vantage point, target, transport and condition, the
// timings, octets and packets, and the vantage point's details (the
// other fields are zero), since each column read costs (SQLite's API
// takes a lock per value); and a large SQLite store is read on several
// connections at once, each handing its rows to a sink of its own, made
// by newSink. A sink must not keep r.
func (s *Store) EachTiming(ctx context.Context, f Filter, newSink func() func(r *Row) error) error {
	return s.scan(ctx, f, timingColumns, nil, newSink)
}

// scanned is a row as scanned, before its times and floats are set.
type scanned struct {
	Row
	run     int64 // the run's number
	started int64 // microseconds since 1970
	fl      [9]sql.NullFloat64
	where   sql.NullString
	task    sql.NullString // the key as stored (keyCol)
}

// column is one column EachRow may read and where it goes.
type column struct {
	expr string
	dest func(*scanned) any
}

var columns = map[string]column{}

func col(expr string, dest func(*scanned) any) string {
	columns[expr] = column{expr, dest}
	return expr
}

var (
	runCols = []string{col("run", func(x *scanned) any { return &x.run }), col("vantage", func(x *scanned) any { return &x.Vantage }),
		col("COALESCE(target, url)", func(x *scanned) any { return &x.Target }), col("transport", func(x *scanned) any { return &x.Transport }),
		col("cond", func(x *scanned) any { return &x.Condition })}
	// floatCols are the timings in thousandths (schema 16), read as
	// numbers and made milliseconds and RTTs again by scanRows.
	floatCols = []string{col("probe_rtt_us", func(x *scanned) any { return &x.fl[0] }), col("handshake_us", func(x *scanned) any { return &x.fl[1] }),
		col("query_us", func(x *scanned) any { return &x.fl[2] }), col("total_us", func(x *scanned) any { return &x.fl[3] }),
		col("handshake_mrtt", func(x *scanned) any { return &x.fl[4] }), col("resolve_mrtt", func(x *scanned) any { return &x.fl[5] }),
		col("total_mrtt", func(x *scanned) any { return &x.fl[6] }), col("wire_us", func(x *scanned) any { return &x.fl[7] }),
		col("wire_query_us", func(x *scanned) any { return &x.fl[8] })}
	countCols = []string{col("bytes_sent", func(x *scanned) any { return &x.BytesSent }), col("bytes_received", func(x *scanned) any { return &x.BytesReceived }),
		col("packets_sent", func(x *scanned) any { return &x.PacketsSent }), col("packets_received", func(x *scanned) any { return &x.PacketsReceived })}
	restCols = []string{col("started_us", func(x *scanned) any { return &x.started }), col("url", func(x *scanned) any { return &x.URL }),
		col("rep", func(x *scanned) any { return &x.Rep }), col("status", func(x *scanned) any { return &x.Status }), col("rcode", func(x *scanned) any { return &x.Rcode }),
		col("tls_resumed", func(x *scanned) any { return &x.TLSResumed }), col("used_0rtt", func(x *scanned) any { return &x.Used0RTT }),
		col("retry", func(x *scanned) any { return &x.Retry }), col("token_used", func(x *scanned) any { return &x.TokenUsed }),
		col("quic_version", func(x *scanned) any { return &x.QUICVersion }), col("alpn", func(x *scanned) any { return &x.ALPN }),
		col("vantage_address", func(x *scanned) any { return &x.VantageAddress }), col("vantage_network", func(x *scanned) any { return &x.VantageNetwork }),
		col("vantage_asn", func(x *scanned) any { return &x.VantageASN }), col("vantage_location", func(x *scanned) any { return &x.VantageLocation }),
		col("job_attempt", func(x *scanned) any { return &x.JobAttempt }), col("delayed_ack_stall", func(x *scanned) any { return &x.DelayedACKStall }),
		col("round", func(x *scanned) any { return &x.Round }), keyCol}
	// keyCol is a sample's own key where it keeps one, NULL where its
	// columns spell it: derivedKey spells it then (as sampleKeySQL
	// would, without building a string a row in SQL).
	keyCol = col("task_key", func(x *scanned) any { return &x.task })
	// whereCol is the vantage point's details as one value, NULL outside
	// campaigns: one column read instead of four, joined by the unit
	// separator, which a vantage point's labels cannot hold.
	whereCol   = col("CASE WHEN vantage = '' THEN NULL ELSE vantage_location || char(31) || vantage_network || char(31) || vantage_asn || char(31) || vantage_address END", func(x *scanned) any { return &x.where })
	allColumns = slices.Concat(runCols, floatCols, countCols, restCols)
	// rawColumns are allColumns and the sample whole, packed, for an
	// archive.
	rawColumns    = append(slices.Clone(allColumns), col("z", func(x *scanned) any { return &x.raw }))
	timingColumns = slices.Concat(runCols, slices.DeleteFunc(slices.Clone(floatCols), func(c string) bool { return c == "query_us" || c == "handshake_us" || c == "wire_query_us" }), countCols, []string{"status", "rcode", whereCol})
)

// scan reads cols of the samples f selects, an attached dataset's and
// the store's: in order into ordered, a batch at a time, or in any order
// into sinks made by newSink.
func (s *Store) scan(ctx context.Context, f Filter, cols []string, ordered func([]Row) error, newSink func() func(*Row) error) error {
	return s.scanOf(ctx, f, cols, ordered, newSink, true)
}

// runsByID are the runs, the store's and an attached dataset's, by ID.
func (s *Store) runsByID(ctx context.Context) (map[string]Run, error) {
	all, err := s.Runs(ctx)
	runs := make(map[string]Run, len(all))
	for _, r := range all {
		runs[r.ID] = r
	}
	return runs, err
}

// scanOf is scan, of the store's own rows alone unless withDataset.
func (s *Store) scanOf(ctx context.Context, f Filter, cols []string, ordered func([]Row) error, newSink func() func(*Row) error, withDataset bool) error {
	runs, err := s.runsByID(ctx)
	if err != nil {
		return err
	}
	// A sink per reader, whatever it reads: a dataset's file or a range
	// of the store's. Every one is made before any reader starts: a
	// caller's newSink need not be safe beside a running sink.
	var sinks []func(*Row) error
	if newSink != nil {
		for range scanWorkers {
			sinks = append(sinks, newSink())
		}
	}
	keep, err := s.keepRun(ctx, f) // the dataset's runs and the store's
	if err != nil {
		return err
	}
	if s.archive != nil && withDataset && f.After == 0 { // the dataset's samples first: the older
		if sinks != nil {
			err = s.archive.scanTimings(s.archive.timingFiles(keep, f.Vantage), runs, func(w int, _ DatasetFile) func(*Row) error { return sinks[w] })
		} else {
			err = s.archive.scan(keep, f.Vantage, runs, ordered)
		}
		if err != nil {
			return err
		}
	}
	// sample_cols is read without the view's join: a sample's run is
	// its number, the filter the numbers of the runs it keeps (none
	// named when it keeps them all), the run's ID put back from here.
	held, err := s.dbRuns(ctx)
	if err != nil {
		return err
	}
	byNumber := map[int64]Run{}
	var kept []string
	for _, r := range held {
		if keep(r.ID) {
			byNumber[r.number] = r
			kept = append(kept, strconv.FormatInt(r.number, 10))
		}
	}
	narrowed := false // runs read from their blocks
	if read := blockRead(cols); read != nil && f.Vantage == "" {
		// Sealed runs from their blocks; the rest from their rows.
		read, err := s.readSealed(ctx, f, byNumber, read, sinks, ordered)
		if err != nil {
			return err
		}
		kept = slices.DeleteFunc(kept, func(n string) bool {
			v, _ := strconv.ParseInt(n, 10, 64)
			return read[v]
		})
		narrowed = len(read) > 0
	}
	if len(kept) == 0 {
		return nil
	}
	where, args := `TRUE`, []any{}
	bounds := `TRUE` // the range of numbers SQLite reads: the whole table's ends are cheap
	if f.After > 0 {
		where, args = `id > ?`, append(args, f.After)
		bounds = where // the numbers after it: a range of rowids
	}
	if len(kept) < len(held) {
		runs := `run IN (` + strings.Join(kept, ", ") + `)` // numbers the database gave
		if (f.Runs != nil || narrowed) && f.After == 0 {
			bounds = runs // a few runs' numbers: from their index
		}
		if !s.postgres {
			// SQLite reads a range of numbers by its rowids, not by
			// the runs' index and a sort: + keeps the index out.
			runs = `+` + runs
		}
		where += ` AND ` + runs
	}
	if f.Vantage != "" {
		where, args = where+` AND vantage = ?`, append(args, f.Vantage)
	}
	q := `SELECT ` + strings.Join(s.exprs(cols), ", ") + ` FROM sample_cols WHERE ` + where
	return s.scanChunks(ctx, q, args, bounds, cols, byNumber, ordered, sinks)
}

// chunkRows is how many sample numbers one part of a scan covers (a
// variable for tests).
var chunkRows int64 = 1 << 15

// scanWorkers is how many connections read a large store at once.
const scanWorkers = 2

// scanChunks runs a scan as ranges of sample numbers (SQLite's rowids,
// PostgreSQL's primary key) read on several connections at once: the
// per-value cost of reading and converting, not the disk, bounds a
// scan, and two cores halve it. With ordered, each range's rows are
// handed on whole, in the order stored (inOrder); with sinks, each
// reader hands its rows to a sink of its own as it reads them. Rows
// stored after the scan began are not read.
func (s *Store) scanChunks(ctx context.Context, q string, args []any, bounds string, cols []string, runs map[int64]Run, ordered func([]Row) error, sinks []func(*Row) error) error {
	lo, hi, err := s.scanEnds(ctx, bounds, args[:strings.Count(bounds, "?")])
	if err != nil || !lo.Valid {
		return err
	}
	q += ` AND id BETWEEN ? AND ? ORDER BY id`
	size := chunkRows
	n := int((hi.Int64-lo.Int64)/size + 1)
	rangeOf := func(i int) []any {
		from := lo.Int64 + int64(i)*size
		return append(slices.Clone(args), from, from+size-1)
	}
	if sinks == nil {
		return inOrder(ctx, n, func(ctx context.Context, i int, add func(*Row) error) error {
			return s.scanRange(ctx, q, rangeOf(i), cols, runs, add)
		}, ordered)
	}
	if n == 1 {
		return s.scanRange(ctx, q, rangeOf(0), cols, runs, sinks[0])
	}
	return shareOut(ctx, n, func(ctx context.Context, w, i int) error {
		return s.scanRange(ctx, q, rangeOf(i), cols, runs, sinks[w])
	})
}

// shareOut runs do(w, i) for each i below n on scanWorkers goroutines
// (w the goroutine's number, for a sink of its own), stopping at the
// first error.
func shareOut(ctx context.Context, n int, do func(ctx context.Context, w, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	next := make(chan int)
	errs := make(chan error, scanWorkers)
	var wg sync.WaitGroup
	for w := range scanWorkers {
		wg.Go(func() {
			for i := range next {
				if err := do(ctx, w, i); err != nil {
					errs <- err
					cancel()
					return
				}
			}
		})
	}
	func() {
		defer close(next)
		for i := range n {
			select {
			case next <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	return ctx.Err()
}

// inOrder reads n parts on scanWorkers goroutines (read hands add each
// row of part i) and hands ordered each part's rows whole, in the parts'
// order: at most scanWorkers+1 parts are in memory at a time, their
// buffers used again.
func inOrder(ctx context.Context, n int, read func(ctx context.Context, i int, add func(*Row) error) error, ordered func([]Row) error) error {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait() // no reader outlives the scan
	defer cancel()
	parts := make([]chan *chunk, n)
	for i := range parts {
		parts[i] = make(chan *chunk, 1)
	}
	next := make(chan int)
	free := make(chan *chunk, scanWorkers+1)    // buffers handed on, to read into again
	slots := make(chan struct{}, scanWorkers+1) // parts read but not yet handed on
	wg.Go(func() {
		defer close(next)
		for i := range n {
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return
			}
			select {
			case next <- i:
			case <-ctx.Done():
				return
			}
		}
	})
	for range scanWorkers {
		wg.Go(func() {
			for i := range next {
				var p *chunk
				select {
				case p = <-free:
					p.reset()
				default:
					p = &chunk{}
				}
				p.err = read(ctx, i, func(r *Row) error { p.add(r); return nil })
				parts[i] <- p
			}
		})
	}
	for i := range n {
		var p *chunk
		select {
		case p = <-parts[i]:
		case <-ctx.Done():
			return ctx.Err()
		}
		if p.err != nil {
			return p.err
		}
		if len(p.rows) > 0 {
			if err := ordered(p.rows); err != nil {
				return err
			}
		}
		select {
		case free <- p:
		default: // as many buffers as slots: never, but a full pool only drops one
		}
		<-slots
	}
	return nil
}

// endsProbe is how many sample numbers from each end of the table
// scanEnds reads for a few runs' first and last before it asks the
// runs' index (a variable for tests).
var endsProbe int64 = 1 << 16

// scanEnds is the first and last sample number bounds keeps (args its
// arguments). Each end is its own query: SQLite reads min(id) and
// max(id) asked together by visiting every row (1.3 s at ten million),
// either alone from an end of the rowids. For a few runs' numbers
// (bounds "run IN (...)"), SQLite's min and max walk every entry of
// those runs in their index (by run and vantage point, not number: 2.8 s
// at ten million, before the scan could start), where the runs a report
// first reads hold most of the table: their first and last are looked
// for among the endsProbe numbers at each end of the table, read in
// order, and in the index only where they are not there (a run added
// to a large store).
func (s *Store) scanEnds(ctx context.Context, bounds string, args []any) (lo, hi sql.NullInt64, err error) {
	end := func(f string) string { return `SELECT ` + f + `(id) FROM sample_cols WHERE ` + bounds }
	if s.postgres || !strings.HasPrefix(bounds, "run IN (") {
		err = s.db.QueryRowContext(ctx, s.rebind(`SELECT (`+end("min")+`), (`+end("max")+`)`), slices.Concat(args, args)...).Scan(&lo, &hi)
		return lo, hi, err
	}
	probe := `SELECT
		(SELECT id FROM sample_cols WHERE +` + bounds + ` AND id <= (SELECT min(id) FROM sample_cols) + ? ORDER BY id LIMIT 1),
		(SELECT id FROM sample_cols WHERE +` + bounds + ` AND id >= (SELECT max(id) FROM sample_cols) - ? ORDER BY id DESC LIMIT 1)`
	if err := s.db.QueryRowContext(ctx, probe, slices.Concat(args, []any{endsProbe}, args, []any{endsProbe})...).Scan(&lo, &hi); err != nil {
		return lo, hi, err
	}
	if !lo.Valid { // not near the table's start: from the index
		if err := s.db.QueryRowContext(ctx, end("min"), args...).Scan(&lo); err != nil {
			return lo, hi, err
		}
	}
	if !hi.Valid {
		err = s.db.QueryRowContext(ctx, end("max"), args...).Scan(&hi)
	}
	return lo, hi, err
}

// chunk is a range's rows as read, and the floats they point to, in
// memory used again for the next range: an ordered scan allocates
// nothing a row but the row's own strings.
type chunk struct {
	rows []Row
	vals []float64
	err  error
}

// add appends a copy of r that shares nothing with the reader's row.
func (p *chunk) add(r *Row) {
	p.rows = append(p.rows, *r)
	c := &p.rows[len(p.rows)-1]
	for _, f := range c.floats() {
		if *f != nil {
			// A full slab is replaced, not grown: the rows before point
			// into it.
			if len(p.vals) == cap(p.vals) {
				p.vals = make([]float64, 0, max(1024, 2*cap(p.vals)))
			}
			p.vals = append(p.vals, **f)
			*f = &p.vals[len(p.vals)-1]
		}
	}
}

// reset empties p for the next range; what it held is no longer read.
func (p *chunk) reset() {
	clear(p.rows) // let go of what the rows point to
	p.rows, p.vals, p.err = p.rows[:0], p.vals[:0], nil
}

// scanRange reads one query of a scan: on PostgreSQL from the pool, on
// SQLite on a reader of its own.
func (s *Store) scanRange(ctx context.Context, q string, args []any, cols []string, runs map[int64]Run, fn func(*Row) error) error {
	return s.withSource(ctx, q, args, func(open func(dest []any) (rowSource, error)) error {
		return scanRows(open, cols, runs, fn)
	})
}

// reader is a connection a scan reads SQLite on, straight on its C API
// (sqliteread): an idle one, or a new one. release gives it back.
func (s *Store) reader() (*sqliteread.Conn, error) {
	s.readMu.Lock()
	defer s.readMu.Unlock()
	if n := len(s.idle); n > 0 {
		c := s.idle[n-1]
		s.idle = s.idle[:n-1]
		return c, nil
	}
	return sqliteread.Open(s.sqliteDSN, busyTimeout)
}

// release keeps c for the next scan, or closes it when scanWorkers
// others wait.
func (s *Store) release(c *sqliteread.Conn) {
	s.readMu.Lock()
	defer s.readMu.Unlock()
	if len(s.idle) < scanWorkers {
		s.idle = append(s.idle, c)
		return
	}
	c.Close()
}

// rowSource is a query's rows as scanRows reads them, each row's values
// put in the destinations the source was made with (scanned's fields,
// one a column): database/sql's for PostgreSQL, SQLite's own for SQLite.
type rowSource interface {
	next() (bool, error) // false at the end
	close() error
}

// dests are the destinations of cols in x, one a column, in order.
func (x *scanned) dests(cols []string) []any {
	dest := make([]any, len(cols))
	for i, c := range cols {
		dest[i] = columns[c].dest(x)
	}
	return dest
}

// scanRows hands fn each row of a query over cols: open runs the query
// with the columns' destinations.
func scanRows(open func(dest []any) (rowSource, error), cols []string, runs map[int64]Run, fn func(*Row) error) error {
	var x scanned
	src, err := open(x.dests(cols))
	if err != nil {
		return err
	}
	defer src.close()
	timed := slices.Contains(cols, "started_us")
	keyed := slices.Contains(cols, keyCol)
	detailed := slices.Contains(cols, "vantage_address") // the vantage point's details as columns, not whereCol
	r := &x.Row
	ptrs := r.floats()
	var vals [len(ptrs)]float64
	var run Run
	last := int64(-1) // run's number
	for {
		x.fl = [9]sql.NullFloat64{}
		x.where = sql.NullString{}
		if ok, err := src.next(); err != nil || !ok {
			return err
		}
		if timed {
			r.StartedAt = time.UnixMicro(x.started).UTC()
		}
		if keyed {
			r.Key = x.task.String
			if !x.task.Valid {
				r.Key = derivedKey(r.Vantage, r.URL, r.Transport, r.Condition, int(r.Rep), int(r.Round))
			}
		}
		if x.where.Valid {
			setVantage(r, x.where.String)
		} else if !detailed {
			r.VantageLocation, r.VantageNetwork, r.VantageASN, r.VantageAddress = "", "", 0, ""
		}
		if x.run != last { // most rows are their predecessor's run's
			run, last = runs[x.run], x.run
		}
		r.RunID = run.ID
		r.Kind, r.Profile, r.DoxlabVersion, r.Kernel, r.Hostname = run.Kind, run.Profile, run.DoxlabVersion, run.Kernel, run.Hostname
		r.Method = int64(run.Method)
		for i, v := range x.fl {
			*ptrs[i] = nil
			if v.Valid {
				vals[i] = v.Float64 / 1000 // as float64(k)/1000: the timing measured
				*ptrs[i] = &vals[i]
			}
		}
		if err := fn(r); err != nil {
			return err
		}
	}
}

// rawSource reads a SQLite query straight from SQLite's C API
// (sqliteread): each value as it is typed, text kept once per distinct
// value seen (interned) rather than copied a row.
type rawSource struct {
	ctx  context.Context
	rows *sqliteread.Rows
	set  []func(i int) error
	n    int // rows read: the context is checked now and then
}

// queryRaw runs q on c as a rowSource.
func queryRaw(ctx context.Context, c *sqliteread.Conn, q string, args []any) func(dest []any) (rowSource, error) {
	return func(dest []any) (rowSource, error) {
		rows, err := c.Query(q, args...)
		if err != nil {
			return nil, err
		}
		src := &rawSource{ctx: ctx, rows: rows}
		for _, d := range dest {
			set, err := rawSetter(rows, d)
			if err != nil {
				rows.Close()
				return nil, err
			}
			src.set = append(src.set, set)
		}
		return src, nil
	}
}

func (q *rawSource) next() (bool, error) {
	if q.n++; q.n%1024 == 0 {
		if err := q.ctx.Err(); err != nil {
			return false, err
		}
	}
	if !q.rows.Next() {
		return false, q.rows.Err()
	}
	for i, set := range q.set {
		if err := set(i); err != nil {
			return false, err
		}
	}
	return true, nil
}

func (q *rawSource) close() error { return q.rows.Close() }

// sqliteTypes name SQLite's types in errors.
var sqliteTypes = map[int]string{sqliteread.Integer: "an integer", sqliteread.Float: "a float", sqliteread.Text: "text", sqliteread.Blob: "a blob", sqliteread.Null: "NULL"}

// rawSetter sets dst, one of scanned's fields, from a column of rows,
// refusing a value of another type than the field's, naming the column.
func rawSetter(rows *sqliteread.Rows, dst any) (func(i int) error, error) {
	wrong := func(i int, v sqliteread.Value, want string) error {
		return fmt.Errorf("column %s: %s where %s was expected", rows.Name(i), sqliteTypes[v.Type()], want)
	}
	// text is column i's value as text, interned in t; ok is false for
	// NULL.
	text := func(t *interned, i int) (s string, ok bool, err error) {
		v := rows.Value(i)
		switch v.Type() {
		case sqliteread.Text, sqliteread.Blob:
			return t.of(v.Bytes()), true, nil
		case sqliteread.Null:
			return "", false, nil
		}
		return "", false, wrong(i, v, "text")
	}
	switch d := dst.(type) {
	case *string:
		var t interned
		return func(i int) (err error) {
			*d, _, err = text(&t, i)
			return err
		}, nil
	case *sql.NullString:
		var t interned
		return func(i int) (err error) {
			d.String, d.Valid, err = text(&t, i)
			return err
		}, nil
	case *int64:
		return func(i int) error {
			v := rows.Value(i)
			switch v.Type() {
			case sqliteread.Integer, sqliteread.Null:
				*d = v.Int64()
			default:
				return wrong(i, v, "an integer")
			}
			return nil
		}, nil
	case *bool:
		return func(i int) error {
			v := rows.Value(i)
			if v.Type() != sqliteread.Integer {
				return wrong(i, v, "a boolean")
			}
			*d = v.Int64() != 0
			return nil
		}, nil
	case *sql.NullFloat64:
		return func(i int) error {
			v := rows.Value(i)
			switch v.Type() {
			case sqliteread.Float, sqliteread.Integer:
				*d = sql.NullFloat64{Float64: v.Float64(), Valid: true}
			case sqliteread.Null:
				*d = sql.NullFloat64{}
			default:
				return wrong(i, v, "a number")
			}
			return nil
		}, nil
	case *[]byte:
		return func(i int) error {
			v := rows.Value(i)
			switch v.Type() {
			case sqliteread.Blob, sqliteread.Text:
				*d = bytes.Clone(v.Bytes())
				if *d == nil {
					*d = []byte{}
				}
			default:
				return wrong(i, v, "binary data")
			}
			return nil
		}, nil
	}
	return nil, fmt.Errorf("no way to assign %T", dst)
}

// internMax bounds the distinct values a column keeps (interned): a
// column of unique values (a sample's own key) stops adding.
const internMax = 4096

// interned are a text column's values seen so far, so that a value
// read again is not copied again: most of a scan's text (transports,
// conditions, statuses, targets) takes a few values.
type interned struct {
	last string
	seen map[string]string
}

func (t *interned) of(b []byte) string {
	if string(b) == t.last {
		return t.last
	}
	s, ok := t.seen[string(b)]
	if !ok {
		s = string(b)
		if t.seen == nil {
			t.seen = map[string]string{}
		}
		if len(t.seen) < internMax {
			t.seen[s] = s
		}
	}
	t.last = s
	return s
}

// setVantage sets r's vantage point details from whereCol.
func setVantage(r *Row, joined string) {
	f := strings.SplitN(joined, "\x1f", 4)
	if len(f) != 4 {
		return
	}
	r.VantageLocation, r.VantageNetwork, r.VantageAddress = f[0], f[1], f[3]
	r.VantageASN, _ = strconv.ParseInt(f[2], 10, 64)
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
	rw := NewRowWriter[T](w, f)
	for _, r := range rows {
		if err := rw.Write(r); err != nil {
			return err
		}
	}
	return rw.Close()
}

// RowGroupRows is how many rows a Parquet row group of an export holds:
// the most an export keeps in memory.
const RowGroupRows = 64 << 10

// RowWriter writes rows as they come: CSV a line at a time, Parquet a row
// group at a time, so an export of 10 million samples needs the memory
// of one row group.
type RowWriter[T any] struct {
	csv   *csv.Writer
	safe  bool
	idx   []int // the fields written
	pq    *parquet.GenericWriter[T]
	batch []T
	N     int // rows written
}

// NewRowWriter writes rows of T to w in format f.
func NewRowWriter[T any](w io.Writer, f Format) *RowWriter[T] {
	if f == Parquet {
		// zstd, as a dataset's files: uncompressed, ten million samples
		// took 3.6 GB.
		return &RowWriter[T]{pq: parquet.NewGenericWriter[T](w, parquet.Compression(parquetZstd), parquet.MaxRowsPerRowGroup(RowGroupRows))}
	}
	rw := &RowWriter[T]{csv: csv.NewWriter(w), safe: f != RawCSV, idx: fields(reflect.TypeFor[T]())}
	rw.csv.Write(csvHeader[T]())
	return rw
}

// Write writes one row.
func (rw *RowWriter[T]) Write(r T) error {
	rw.N++
	if rw.pq == nil {
		return rw.csv.Write(csvRecord(r, rw.idx, rw.safe))
	}
	if rw.batch = append(rw.batch, r); len(rw.batch) == 1024 {
		return rw.flush()
	}
	return nil
}

// WriteRows writes rows, which it does not keep: Parquet takes them
// whole into its columns, without the copy Write keeps of each until
// its batch is written.
func (rw *RowWriter[T]) WriteRows(rows []T) error {
	if rw.pq == nil {
		for _, r := range rows {
			if err := rw.Write(r); err != nil {
				return err
			}
		}
		return nil
	}
	if err := rw.flush(); err != nil {
		return err
	}
	rw.N += len(rows)
	_, err := rw.pq.Write(rows)
	return err
}

func (rw *RowWriter[T]) flush() error {
	_, err := rw.pq.Write(rw.batch)
	clear(rw.batch) // let go of what the rows point to
	rw.batch = rw.batch[:0]
	return err
}

// Close writes what is buffered and ends the file (Parquet's footer).
func (rw *RowWriter[T]) Close() error {
	if rw.pq == nil {
		rw.csv.Flush()
		return rw.csv.Error()
	}
	if err := rw.flush(); err != nil {
		return err
	}
	return rw.pq.Close()
}

// WriteCSV writes rows with a header, a column per field named by its
// parquet tag, so the CSV and Parquet exports always have the same
// columns; missing values are empty cells; text that would run as a
// formula is neutralised (see CSV). A time is written in RFC 3339 with
// nanoseconds, in UTC.
func WriteCSV[T any](w io.Writer, rows []T) error { return writeCSV(w, rows, true) }

func writeCSV[T any](w io.Writer, rows []T, safe bool) error {
	f := CSV
	if !safe {
		f = RawCSV
	}
	return Write(w, f, rows)
}

// fields are the indices of T's exported columns: every field but
// those tagged parquet:"-".
func fields(t reflect.Type) []int {
	var out []int
	for i := range t.NumField() {
		if t.Field(i).Tag.Get("parquet") != "-" {
			out = append(out, i)
		}
	}
	return out
}

// csvHeader is T's columns, named by their parquet tags.
func csvHeader[T any]() []string {
	t := reflect.TypeFor[T]()
	var header []string
	for _, i := range fields(t) {
		header = append(header, strings.Split(t.Field(i).Tag.Get("parquet"), ",")[0])
	}
	return header
}

// csvRecord is r as CSV cells.
func csvRecord[T any](r T, idx []int, safe bool) []string {
	v := reflect.ValueOf(r)
	rec := make([]string, len(idx))
	for i, fi := range idx {
		f := v.Field(fi)
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
				rec[i] = sheet.Text(rec[i])
			}
		case reflect.Int, reflect.Int64:
			rec[i] = strconv.FormatInt(f.Int(), 10)
		case reflect.Float64:
			rec[i] = strconv.FormatFloat(f.Float(), 'f', -1, 64)
		case reflect.Bool:
			rec[i] = strconv.FormatBool(f.Bool())
		}
	}
	return rec
}

// WriteParquet writes rows as one Parquet file.
func WriteParquet[T any](w io.Writer, rows []T) error { return Write(w, Parquet, rows) }
