package store

import (
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/doxlab/doxlab/measure"
	"github.com/doxlab/doxlab/transport"
)

// TestBlocksAreTheRows: a report's scan of sealed runs, from their blocks
// and tails, gives what it gives from their rows, field for field; a run
// whose blocks no longer count its rows is read from its rows; Close
// seals what a writer left.
func TestBlocksAreTheRows(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	s, err := Open(context.Background(), path)
	require.NoError(t, err)
	defer s.Close()
	blocksAreTheRows(t, s)

	// Close seals what its writes left: b's tail.
	require.NoError(t, s.Close())
	s, err = Open(context.Background(), path)
	require.NoError(t, err)
	_, sealed, err := s.Sealed(context.Background())
	require.NoError(t, err)
	require.Equal(t, int64(12+11), sealed, "a's blocks (which count a sample deleted since: not read) and b's, its tail's now in one")
}

// TestPostgresBlocksAreTheRows is it on PostgreSQL.
func TestPostgresBlocksAreTheRows(t *testing.T) { blocksAreTheRows(t, openPostgres(t)) }

func openPostgres(t *testing.T) *Store {
	s, err := Open(context.Background(), testutil.StartPostgres(t))
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

func smallBlocks(t *testing.T) {
	n, m := blockRows, maxTail
	blockRows, maxTail = 4, 16
	t.Cleanup(func() { blockRows, maxTail = n, m })
}

// blockSample is sample i, with what a block keeps varied: a vantage
// point or none, a failure without timings, RTTs, octets and rcodes.
func blockSample(i int) *measure.Sample {
	x := blockSampleOf(i)
	if i%2 == 0 { // run a's: timings as doxlab rounds them, kept as thousandths
		t := &x.Measure.Timing
		t.TotalMs, t.HandshakeMs = float64(10000+37*i)/1000, float64(i)/1000
		if x.RTTs != nil {
			x.RTTs.Handshake, x.RTTs.Total = float64(i*3)/1000, -float64(i)/1000
		}
	}
	return x
}

func blockSampleOf(i int) *measure.Sample {
	x := &measure.Sample{Task: measure.Task{URL: "udp://t:53", Target: "t", Transport: []string{"udp", "doq", "doh"}[i%3], Condition: "fresh", Rep: i},
		Start:  time.Unix(int64(i), 0),
		Status: transport.StatusOK,
		Measure: &transport.Record{Status: transport.StatusOK, Rcode: []string{"NOERROR", "REFUSED", "NXDOMAIN"}[i%3],
			Timing: transport.Timing{TotalMs: 10 + float64(i)/7, HandshakeMs: float64(i) / 3, WireMs: float64(i % 2)},
			Bytes:  transport.Counts{Sent: int64(100 + i), Received: int64(300 - i)}, Packets: transport.Counts{Sent: 2, Received: int64(i % 4)}},
		Probe: &measure.ProbeResult{RTTMs: 5 + float64(i%5)},
		RTTs:  &measure.InRTTs{Handshake: float64(i) / 11, Resolve: 1.5, Total: math.Pi * float64(i)},
	}
	if i%4 == 0 {
		x.Vantage = &measure.Vantage{Name: "fra1", Location: "Frankfurt", Network: "AS64500 Example", ASN: 64500, Address: "192.0.2.1"}
		x.Job = &measure.JobInfo{ID: int64(i), Attempt: 1 + i%3}
		x.Round = 1 + i%2
	}
	// What only an export reads of a sample: the connection's facts, the
	// query's and wire times.
	m := x.Measure
	m.Timing.QueryMs, m.Timing.WireQueryMs = float64(i)/5, float64(i%3)/4
	m.Conn = transport.ConnInfo{TLSResumed: i%2 == 1, Used0RTT: i%3 == 0, Retry: i%7 == 1, TokenUsed: i%6 == 2,
		QUICVersion: []string{"", "v1", "v2"}[i%3], ALPN: []string{"doq", "h3", ""}[i%3], DelayedACKStall: i%5 == 1}
	if i%5 == 3 {
		x.Status, x.Measure.Status, x.Measure.Timing = transport.StatusTimeout, transport.StatusTimeout, transport.Timing{}
		x.RTTs = nil
	}
	return x
}

// writtenRun is a store of small blocks holding run "a" of n samples
// (blockSample's), written as a writer writes them: its full blocks
// sealed.
func writtenRun(t *testing.T, n int) *Store {
	smallBlocks(t)
	s := openTemp(t)
	ctx := context.Background()
	require.NoError(t, s.BeginRun(ctx, Run{ID: "a", Kind: "measure", StartedAt: time.Unix(0, 0)}))
	for i := range n {
		require.NoError(t, s.Write(ctx, "a", blockSample(i)))
	}
	return s
}

// rowText is what a scan gave of a row, its floats' values in place of
// their addresses.
func rowText(r *Row) string {
	c := *r
	var fl []string
	for _, p := range c.floats() {
		v := "nil"
		if *p != nil {
			v = strconv.FormatFloat(**p, 'g', -1, 64)
		}
		fl = append(fl, v)
		*p = nil
	}
	c.raw = nil
	return fmt.Sprintf("%+v %v", c, fl)
}

func timingTexts(t *testing.T, s *Store, f Filter) []string {
	var sinks [][]string
	require.NoError(t, s.EachTiming(context.Background(), f, func() func(*Row) error {
		sinks = append(sinks, nil)
		i := len(sinks) - 1
		return func(r *Row) error { sinks[i] = append(sinks[i], rowText(r)); return nil }
	}))
	var out []string
	for _, sk := range sinks {
		out = append(out, sk...)
	}
	return out
}

// fromRows is what the scan gives with no block: the rows'.
func fromRows(t *testing.T, s *Store, f Filter) (out []string) {
	rowsOnly(t, s, func() { out = timingTexts(t, s, f) })
	return out
}

// rowsOnly runs read with the store's blocks of another version for the
// time: every scan reads the rows.
func rowsOnly(t *testing.T, s *Store, read func()) {
	ctx := context.Background()
	_, err := s.DB().ExecContext(ctx, `UPDATE sample_blocks SET version = version + 100`)
	require.NoError(t, err)
	defer func() {
		_, err := s.DB().ExecContext(ctx, `UPDATE sample_blocks SET version = version - 100`)
		require.NoError(t, err)
	}()
	read()
}

func blocksAreTheRows(t *testing.T, s *Store) {
	smallBlocks(t)
	ctx := context.Background()
	for _, id := range []string{"a", "b", "c"} {
		require.NoError(t, s.BeginRun(ctx, Run{ID: id, Kind: "measure", StartedAt: time.Unix(0, 0)}))
	}
	// a: 12 samples, three full blocks; b: 11, two and a tail of 3
	// (a writer seals full blocks as it goes); c: none.
	for i := range 23 {
		require.NoError(t, s.Write(ctx, []string{"a", "b"}[i%2], blockSample(i)))
	}
	blocks, sealed, err := s.Sealed(ctx)
	require.NoError(t, err)
	require.Equal(t, []int64{5, 20}, []int64{blocks, sealed})

	all := timingTexts(t, s, Filter{})
	require.Len(t, all, 23)
	require.ElementsMatch(t, fromRows(t, s, Filter{}), all)
	for _, f := range []Filter{{Runs: []string{"b"}}, {RunPrefix: "a"}, {Vantage: "fra1"}, {Runs: []string{"c"}}} {
		require.ElementsMatch(t, fromRows(t, s, f), timingTexts(t, s, f), "%+v", f)
	}

	// What a scan read of a run whole from its blocks is what the run
	// holds (RunHeld walks its index for it); of b, with a tail, it
	// says nothing.
	sealedRead := map[string]Held{}
	timingTexts(t, s, Filter{Sealed: sealedRead})
	ha, err := s.RunHeld(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, map[string]Held{"a": ha}, sealedRead)

	// The blocks are what is read: a row changed under its block (only
	// SQL does that) reads as it was sealed.
	var first int64
	require.NoError(t, s.DB().QueryRowContext(ctx, `SELECT min(id) FROM sample_cols`).Scan(&first))
	_, err = s.DB().ExecContext(ctx, s.rebind(`UPDATE sample_cols SET total_us = 999000 WHERE id = ?`), first)
	require.NoError(t, err)
	require.ElementsMatch(t, all, timingTexts(t, s, Filter{}))
	require.NotElementsMatch(t, all, fromRows(t, s, Filter{}))

	// A run holding fewer samples than its blocks (one deleted in SQL) is
	// read from its rows: the change shows, the deleted one is gone.
	_, err = s.DB().ExecContext(ctx, s.rebind(`DELETE FROM sample_cols WHERE id = ?`), first+2)
	require.NoError(t, err)
	now := timingTexts(t, s, Filter{})
	require.Len(t, now, 22)
	require.ElementsMatch(t, fromRows(t, s, Filter{}), now)

}

// TestDamagedBlock: a block that does not decode fails the scan in one
// line that names the run and the command that mends it, and SealAll
// with again makes the blocks anew.
func TestDamagedBlock(t *testing.T) {
	s := writtenRun(t, 8)
	ctx := context.Background()
	want := timingTexts(t, s, Filter{})
	for _, z := range [][]byte{{codecZstd, 0xff}, {codecPlain, 9, 1, 'q'}, {42}} {
		_, err := s.DB().ExecContext(ctx, `UPDATE sample_blocks SET z = ? WHERE after_id = 0`, z)
		require.NoError(t, err)
		err = s.EachTiming(ctx, Filter{}, func() func(*Row) error { return func(*Row) error { return nil } })
		require.ErrorIs(t, err, ErrDamagedBlock)
		require.ErrorContains(t, err, "run a's block of samples after number 0 does not decode")
	}
	require.NoError(t, s.SealAll(ctx, true))
	require.ElementsMatch(t, want, timingTexts(t, s, Filter{}))
}

// TestDecodeBlockRefusesDamage: a block cut short or changed anywhere
// decodes to an error or to rows, never a panic.
func TestDecodeBlockRefusesDamage(t *testing.T) {
	x, dest, kinds, w := blockFixture(t)
	for i := range 50 {
		x.run, x.Vantage, x.Target = int64(i/20), []string{"", "fra1"}[i%2], "t"
		x.fl[3].Float64, x.fl[3].Valid = float64(i)*1.25, i%3 != 0
		x.where.String, x.where.Valid = "Frankfurt", i%2 == 1
		w.add()
	}
	b := w.encode()
	n, _, err := decodeBlock(b, kinds, nil)
	require.NoError(t, err)
	require.Equal(t, 50, n)
	for cut := range len(b) {
		_, _, err := decodeBlock(b[:cut], kinds, nil)
		require.ErrorIs(t, err, ErrDamagedBlock, "cut at %d", cut)
	}
	for i := range b {
		for _, v := range []byte{0, 0x7f, 0x80, 0xff} {
			c := []byte(string(b))
			c[i] = v
			n, cols, err := decodeBlock(c, kinds, nil)
			if err == nil { // read every value, as a scan would
				src := &blockSource{dest: dest, cols: cols, n: n}
				for ok := true; ok; ok, _ = src.next() {
				}
			}
		}
	}
	_, _, err = decodeBlock(b, append([]byte{blockBool}, kinds[1:]...), nil)
	require.ErrorIs(t, err, ErrDamagedBlock, "a column of another kind")
}

// TestBlockSmallerThanItsRows: a block's columns are compressed, so a
// block of samples alike takes fewer octets than it holds rows, and
// still reads back whole.
func TestBlockSmallerThanItsRows(t *testing.T) {
	x, dest, kinds, w := blockFixture(t)
	x.run, x.Target, x.URL, x.Transport = 7, "t", "udp://t:53", "doq"
	x.fl[3] = sql.NullFloat64{Float64: 12345, Valid: true}
	for range 8192 {
		w.add()
	}
	b := w.encode()
	require.Less(t, len(b), 8192)
	n, cols, err := decodeBlock(b, kinds, nil)
	require.NoError(t, err)
	require.Equal(t, 8192, n)
	src := &blockSource{dest: dest, cols: cols, n: n}
	rows := 0
	for ok, err := src.next(); ok; ok, err = src.next() {
		require.NoError(t, err)
		require.Equal(t, "doq", x.Transport)
		rows++
	}
	require.Equal(t, 8192, rows)
	_, _, err = decodeBlock(binary.AppendUvarint(nil, maxBlockRows+1), kinds, nil)
	require.ErrorIs(t, err, ErrDamagedBlock, "more rows than any block holds")
}

// TestBlockColumnsPinned: a block keeps these columns, in this order,
// under version 3 (every column an export writes, each behind its
// length). A change to the columns changes blockVersion with them:
// blocks of the old version are then read from their rows, and store
// seal makes them anew.
func TestBlockColumnsPinned(t *testing.T) {
	require.Equal(t, 3, blockVersion)
	require.Equal(t, []string{"run", "vantage", "COALESCE(target, url)", "transport", "cond",
		"probe_rtt_us", "total_us", "handshake_mrtt", "resolve_mrtt", "total_mrtt", "wire_us",
		"bytes_sent", "bytes_received", "packets_sent", "packets_received", "status", "rcode", whereCol,
		"handshake_us", "query_us", "wire_query_us", "started_us", "url", "rep",
		"tls_resumed", "used_0rtt", "retry", "token_used", "quic_version", "alpn",
		"job_attempt", "delayed_ack_stall", "round", "task_key"}, blockColumns)
	// What the report reads is a block's first columns; an export reads
	// them all.
	require.Equal(t, timingColumns, blockRead(timingColumns))
	require.Equal(t, blockColumns, blockRead(allColumns))
	require.Nil(t, blockRead(rawColumns), "the sample whole is its row's alone")
}

// TestPostgresSealWaitsForWriters: on PostgreSQL a sample takes its
// number before it commits, so a seal must not pass over one still
// uncommitted: it waits for the writer, and its block holds the sample.
func TestPostgresSealWaitsForWriters(t *testing.T) {
	s := openPostgres(t)
	ctx := context.Background()
	require.NoError(t, s.BeginRun(ctx, Run{ID: "a", Kind: "measure", StartedAt: time.Unix(0, 0)}))
	tx, err := s.DB().BeginTx(ctx, nil)
	require.NoError(t, err)
	_, err = s.WriteOnce(ctx, tx, "a", blockSample(0)) // the lower number, uncommitted
	require.NoError(t, err)
	require.NoError(t, s.Write(ctx, "a", blockSample(1)))
	time.AfterFunc(300*time.Millisecond, func() { tx.Commit() })
	require.NoError(t, s.Seal(ctx, "a"))
	_, sealed, err := s.Sealed(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(2), sealed)
	require.Len(t, timingTexts(t, s, Filter{}), 2)
}

// TestBlockFloats: every float comes back to the last bit, whether its
// column is kept as thousandths or by plane.
func TestBlockFloats(t *testing.T) {
	for _, vals := range [][]float64{
		{12.345, 0, -0.001, 1e9, 0.5, 123456789.123},                         // thousandths
		{math.Pi, 12.345, 1e300, math.SmallestNonzeroFloat64, -1e-9, 0.0001}, // not all
		{math.Copysign(0, -1), 1},                                            // -0 is not 0 thousandths
		{1 << 52, 0.001},
		{12345, 0, -1, math.MaxInt32, -250, 1 << 40}, // whole: schema 16's thousandths as scanned
		{1 << 53, 3, math.Copysign(0, -1)},           // not
	} {
		b := floatBlock(t, vals)
		n, cols, err := decodeBlock(b, []byte{blockFloat}, nil)
		require.NoError(t, err)
		require.Equal(t, len(vals)+1, n)
		for i, v := range vals {
			require.Equal(t, math.Float64bits(v), math.Float64bits(cols[0].floats[i]), "%v", v)
		}
		require.False(t, cols[0].valid[len(vals)])
	}
	// Whole numbers pack as their thousandths would: as the numbers, not
	// as a thousand times them.
	whole := []float64{12345, 250, 999999, 7}
	var milli []float64
	for _, v := range whole {
		milli = append(milli, v/1000)
	}
	require.Len(t, floatBlock(t, whole), len(floatBlock(t, milli)))
	_, ok := millis(12.345)
	require.True(t, ok)
	for _, v := range []float64{math.Pi, math.Copysign(0, -1), math.NaN(), math.Inf(1), 1e300} {
		_, ok := millis(v)
		require.False(t, ok, "%v", v)
	}
}

// floatBlock is a block of one float column holding vals, then a NULL.
func floatBlock(t *testing.T, vals []float64) []byte {
	var x scanned
	w, err := newBlockWriter([]any{&x.fl[0]})
	require.NoError(t, err)
	for _, v := range vals {
		x.fl[0] = sql.NullFloat64{Float64: v, Valid: true}
		w.add()
	}
	x.fl[0] = sql.NullFloat64{}
	w.add()
	return w.encode()
}

// FuzzDecodeBlock: whatever a block's octets are, decoding them is an
// error or rows that read whole, never a panic; a block doxlab wrote
// reads back as written.
func FuzzDecodeBlock(f *testing.F) {
	x, dest, kinds, w := blockFixture(f)
	for i := range 20 {
		x.run, x.Vantage, x.Target = int64(i/7), []string{"", "fra1"}[i%2], "t"
		x.fl[0].Float64, x.fl[0].Valid = float64(i)*0.001, true
		x.fl[3].Float64, x.fl[3].Valid = math.Pi*float64(i), i%3 != 0
		x.where.String, x.where.Valid = "Frankfurt", i%2 == 1
		w.add()
	}
	f.Add(w.encode())
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		n, cols, err := decodeBlock(b, kinds, nil)
		if err != nil {
			require.ErrorIs(t, err, ErrDamagedBlock)
			return
		}
		require.LessOrEqual(t, n, maxBlockRows)
		src := &blockSource{dest: dest, cols: cols, n: n}
		rows := 0
		for {
			ok, err := src.next()
			require.NoError(t, err)
			if !ok {
				break
			}
			rows++
		}
		require.Equal(t, n, rows)
	})
}

// blockFixture is a writer of the report's block columns, each read from
// x, with the columns' destinations and kinds.
func blockFixture(tb testing.TB) (x *scanned, dest []any, kinds []byte, w *blockWriter) {
	x = new(scanned)
	dest = x.dests(blockColumns)
	kinds = make([]byte, len(dest))
	for i, d := range dest {
		kinds[i], _ = blockKind(d)
	}
	w, err := newBlockWriter(dest)
	require.NoError(tb, err)
	return x, dest, kinds, w
}

// TestReadOnFromTheBlocks: a summary's read-on (Filter.After at a block's
// start, or at the blocks' end) reads a sealed run's blocks from there,
// not its rows; a number inside a block reads the rows after it.
func TestReadOnFromTheBlocks(t *testing.T) {
	s := writtenRun(t, 10)
	ctx := context.Background()
	require.NoError(t, s.Seal(ctx, "a"))
	sealed, err := s.sealedRuns(ctx)
	require.NoError(t, err)
	require.Len(t, sealed, 1)
	var ends []int64
	for _, bs := range sealed {
		for _, b := range bs {
			ends = append(ends, b.last)
		}
	}
	require.Len(t, ends, 3, "blocks of 4, 4 and 2")
	on := func(after int64) Filter {
		return Filter{Runs: []string{"a"}, After: after, Held: map[string]int64{"a": 10}}
	}
	before := map[int64][]string{}
	for _, after := range []int64{ends[0], ends[1], ends[2], ends[0] + 1} {
		before[after] = timingTexts(t, s, on(after))
	}
	// The rows changed under the blocks: what a scan gives says which it read.
	_, err = s.DB().ExecContext(ctx, `UPDATE sample_cols SET total_us = total_us + 1`)
	require.NoError(t, err)
	for i, want := range []int{6, 2, 0} {
		got := timingTexts(t, s, on(ends[i]))
		require.Len(t, got, want, "after block %d", i)
		require.ElementsMatch(t, before[ends[i]], got, "after block %d: read from the blocks", i)
	}
	inside := timingTexts(t, s, on(ends[0]+1))
	require.Len(t, inside, 5)
	require.ElementsMatch(t, fromRows(t, s, on(ends[0]+1)), inside, "inside a block: read from the rows")
	require.NotEqual(t, before[ends[0]+1], inside)

	// What the blocks hold is said where the run was read on from them:
	// the summary made of it needs no count of the run again.
	for _, after := range []int64{ends[0], ends[0] + 1} {
		f := on(after)
		f.Sealed = map[string]Held{}
		timingTexts(t, s, f)
		if after == ends[0] {
			require.Equal(t, map[string]Held{"a": {Samples: 10, Last: ends[2]}}, f.Sealed)
		} else {
			require.Empty(t, f.Sealed, "read from the rows")
		}
	}
}
