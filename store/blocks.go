package store

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/stdlib"
	"github.com/klauspost/compress/zstd"
)

// Blocks keep each run's samples columnar as they are written (schema
// 15): the columns a report and an export read of them (blockColumns),
// blockRows samples at a time, each column packed and compressed on its
// own. A row store reads a row's every column to give fifteen of them:
// ten million rows cost SQLite (even the sqlite3 shell, in C) 9 s of
// one core before any statistics, where their blocks are a few hundred
// megaoctets of zstd; PostgreSQL's server spends as much sending 37
// columns a row. The rows stay the truth, and what changes or moves
// samples (resume, keys, archives, datasets) reads them: a block is a
// projection of its rows, made by the same scan, never a derived value.
//
// A block holds the samples of one run numbered after after_id, up to
// last_id, samples of them, in order; a run's blocks follow each other
// from 0 (each begins where the one before ended). What a run holds
// beyond its last block (its tail) is read from the rows. A run's blocks
// are used only while they and its tail count every sample it holds
// (RunSamples): otherwise, a sample committed late on PostgreSQL, or
// anything else, the run is read from its rows, as before blocks.
const sampleBlocksTable = `CREATE TABLE IF NOT EXISTS sample_blocks (
		run BIGINT NOT NULL,
		after_id BIGINT NOT NULL,
		last_id BIGINT NOT NULL,
		samples BIGINT NOT NULL,
		version INTEGER NOT NULL,
		z BLOB NOT NULL,
		PRIMARY KEY (run, after_id)
	)`

// blockVersion names the columns a block holds and how it packs them:
// blocks of another version are not read, and Seal makes them again.
// Change it with blockColumns (TestBlockColumnsPinned). Version 2
// (schema 16) holds the timings as stored, in thousandths; version 3
// every column an export writes, each behind its length, so that a
// reader of a few columns skips the others.
const blockVersion = 3

// blockColumns are what a block holds of each sample: the report's
// columns first, then the rest of what an export writes of a sample
// (allColumns, whose vantage point's details are whereCol here). The
// sample whole (z) stays in its row alone.
var blockColumns = slices.Concat(timingColumns, []string{"handshake_us", "query_us", "wire_query_us"},
	slices.DeleteFunc(slices.Clone(restCols), func(c string) bool {
		return c == "status" || c == "rcode" || strings.HasPrefix(c, "vantage_")
	}))

// blockRead is what a scan of cols reads of a run's blocks: cols where
// the blocks hold each; for allColumns, every block column (the same
// rows: whereCol gives the vantage point's details the row keeps
// apart); nil where blocks cannot give cols.
func blockRead(cols []string) []string {
	if slices.Equal(cols, allColumns) {
		return blockColumns
	}
	for _, c := range cols {
		if !slices.Contains(blockColumns, c) {
			return nil
		}
	}
	return cols
}

// blockRows is how many samples a full block holds (a variable for
// tests). At a DNS sample's 40-50 octets in a block, 8,192 make a block
// of a few hundred kilooctets: large enough for zstd and few enough to
// keep a writer's tail, which a report reads from the rows, short.
var blockRows = 8192

// maxBlockRows bounds the rows a block may say it holds: its columns
// are compressed, so its length does not, and a damaged count must not
// make a reader allocate gigabytes.
const maxBlockRows = 1 << 20

// maxTail is the most a report reads of a sealed run's tail from its
// rows before it reads the run as unsealed (a run sealed long ago and
// written on since by a doxlab before blocks).
var maxTail = 4 * blockRows

// The kinds of a block's columns, by the scan's destination's type.
const (
	blockInt        byte = 'i' // *int64: deltas, zigzag varints
	blockBool       byte = 'b' // *bool: an octet each
	blockString     byte = 's' // *string: a dictionary and an index each
	blockNullString byte = 'n' // *sql.NullString: index 0 is NULL
	blockFloat      byte = 'f' // *sql.NullFloat64: an octet each for NULL, then the values (floatPlanes or floatMillis)
)

// How a block keeps a column of floats' values: each float's octets by
// plane, or, where every value is a whole number of thousandths (doxlab
// rounds its timings to the microsecond and its RTTs to a thousandth),
// that number as a zigzag varint: 2-3 octets where a float takes 8.
const (
	floatPlanes byte = 0
	floatMillis byte = 1
	floatWhole  byte = 2 // whole numbers: the timings of schema 16, in thousandths
)

// millis is v as a whole number of thousandths, if float64(k)/1000 gives
// v back to the last bit.
func millis(v float64) (int64, bool) {
	if math.IsNaN(v) || math.Abs(v) >= 1<<50 {
		return 0, false
	}
	k := int64(math.Round(v * 1000))
	return k, float64(k)/1000 == v && !(v == 0 && math.Signbit(v))
}

// blockCol is one column of a block, as written or as read.
type blockCol struct {
	kind   byte
	ints   []int64
	bools  []bool
	valid  []bool // a NullString's or a float's
	strs   []string
	idx    []uint32 // read: into dict
	dict   []string
	floats []float64
}

func blockKind(dest any) (byte, error) {
	switch dest.(type) {
	case *int64:
		return blockInt, nil
	case *bool:
		return blockBool, nil
	case *string:
		return blockString, nil
	case *sql.NullString:
		return blockNullString, nil
	case *sql.NullFloat64:
		return blockFloat, nil
	}
	return 0, fmt.Errorf("store: a block cannot keep a %T", dest)
}

// blockWriter gathers rows read into dest (scanned's fields, one a
// column) into a block.
type blockWriter struct {
	dest []any
	cols []blockCol
	n    int
}

func newBlockWriter(dest []any) (*blockWriter, error) {
	w := &blockWriter{dest: dest, cols: make([]blockCol, len(dest))}
	for i, d := range dest {
		k, err := blockKind(d)
		if err != nil {
			return nil, err
		}
		w.cols[i].kind = k
	}
	return w, nil
}

// add takes the row dest holds.
func (w *blockWriter) add() {
	for i, d := range w.dest {
		c := &w.cols[i]
		switch v := d.(type) {
		case *int64:
			c.ints = append(c.ints, *v)
		case *bool:
			c.bools = append(c.bools, *v)
		case *string:
			c.strs = append(c.strs, *v)
		case *sql.NullString:
			c.valid, c.strs = append(c.valid, v.Valid), append(c.strs, v.String)
		case *sql.NullFloat64:
			c.valid, c.floats = append(c.valid, v.Valid), append(c.floats, v.Float64)
		}
	}
	w.n++
}

// encode is the block's columns: the row count, the column count, then
// each column's kind, the length of its values and its values, each
// column compressed on its own, so that a reader of a few columns
// decompresses only those.
func (w *blockWriter) encode() []byte {
	b := binary.AppendUvarint(nil, uint64(w.n))
	b = binary.AppendUvarint(b, uint64(len(w.cols)))
	var vals []byte
	for _, c := range w.cols {
		vals = vals[:0]
		switch c.kind {
		case blockInt:
			prev := int64(0)
			for _, v := range c.ints {
				vals = binary.AppendVarint(vals, v-prev)
				prev = v
			}
		case blockBool:
			for _, v := range c.bools {
				vals = append(vals, boolOctet(v))
			}
		case blockString, blockNullString:
			vals = appendStrings(vals, c)
		case blockFloat:
			for _, v := range c.valid {
				vals = append(vals, boolOctet(v))
			}
			vals = appendFloats(vals, c)
		}
		z := packColumn(vals)
		b = append(b, c.kind)
		b = binary.AppendUvarint(b, uint64(len(z)))
		b = append(b, z...)
	}
	return b
}

// appendFloats appends a float column's values (not its NULLs): as
// whole numbers where all are, as thousandths where all are, else by
// plane, as Blosc shuffles: a timing's high octets (sign, exponent)
// repeat from sample to sample where its low ones do not, and zstd
// finds the runs.
func appendFloats(b []byte, c blockCol) []byte {
	var ks []int64
	var bits []uint64
	whole, milli := true, true
	for i, v := range c.floats {
		if !c.valid[i] {
			continue
		}
		k, ok := millis(v)
		milli = milli && ok
		whole = whole && ok && k%1000 == 0 && float64(k/1000) == v
		ks, bits = append(ks, k), append(bits, math.Float64bits(v))
	}
	if milli {
		how, per := floatMillis, int64(1)
		if whole {
			how, per = floatWhole, 1000
		}
		b = append(b, how)
		for _, k := range ks {
			b = binary.AppendVarint(b, k/per)
		}
		return b
	}
	b = append(b, floatPlanes)
	for p := range 8 {
		for _, v := range bits {
			b = append(b, byte(v>>(8*p)))
		}
	}
	return b
}

// appendStrings appends a text column: its distinct values, then each
// row's index among them (a NullString's from 1, 0 for NULL).
func appendStrings(b []byte, c blockCol) []byte {
	ids := map[string]uint64{}
	var dict []string
	idx := make([]uint64, len(c.strs))
	for i, s := range c.strs {
		if c.kind == blockNullString && !c.valid[i] {
			continue
		}
		id, ok := ids[s]
		if !ok {
			id = uint64(len(dict))
			ids[s] = id
			dict = append(dict, s)
		}
		idx[i] = id
		if c.kind == blockNullString {
			idx[i]++
		}
	}
	b = binary.AppendUvarint(b, uint64(len(dict)))
	for _, s := range dict {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	for _, id := range idx {
		b = binary.AppendUvarint(b, id)
	}
	return b
}

func boolOctet(v bool) byte {
	if v {
		return 1
	}
	return 0
}

// ErrDamagedBlock is a block of samples that does not decode: SealAll
// with again makes every block anew from the rows.
var ErrDamagedBlock = errors.New("a damaged block of samples")

// blockReader reads an encoded block, failing on the first octet out
// of place instead of panicking.
type blockReader struct {
	b   []byte
	err error
}

func (r *blockReader) uvarint() uint64 { return readVarint(r, binary.Uvarint) }
func (r *blockReader) varint() int64   { return readVarint(r, binary.Varint) }

// readVarint reads one number with read (binary.Uvarint or Varint).
func readVarint[T uint64 | int64](r *blockReader, read func([]byte) (T, int)) T {
	v, n := read(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *blockReader) take(n uint64) []byte {
	if n > uint64(len(r.b)) {
		r.fail()
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *blockReader) fail() {
	if r.err == nil {
		r.err = ErrDamagedBlock
	}
	r.b = nil
}

// floats reads the count values of c's valid rows, as appendFloats
// wrote them.
func (r *blockReader) floats(c *blockCol, count int) {
	how := r.take(1)
	if r.err != nil {
		return
	}
	switch how[0] {
	case floatMillis, floatWhole:
		for j, ok := range c.valid {
			if ok {
				c.floats[j] = float64(r.varint())
				if how[0] == floatMillis {
					c.floats[j] /= 1000
				}
			}
		}
	case floatPlanes:
		planes := r.take(8 * uint64(count))
		if r.err != nil {
			return
		}
		k := 0
		for j, ok := range c.valid {
			if !ok {
				continue
			}
			var bits uint64
			for p := range 8 {
				bits |= uint64(planes[p*count+k]) << (8 * p)
			}
			c.floats[j] = math.Float64frombits(bits)
			k++
		}
	default:
		r.fail()
	}
}

// decodeBlock is the columns encode wrote of a block whose columns are
// of kinds: those at pick, in pick's order (every one for nil), the
// others skipped by their length.
func decodeBlock(b []byte, kinds []byte, pick []int) (int, []blockCol, error) {
	r := &blockReader{b: b}
	n := r.uvarint()
	if r.err != nil || n > maxBlockRows || r.uvarint() != uint64(len(kinds)) {
		return 0, nil, ErrDamagedBlock
	}
	vals := make([][]byte, len(kinds))
	for i, want := range kinds {
		if k := r.take(1); r.err != nil || k[0] != want {
			return 0, nil, ErrDamagedBlock
		}
		vals[i] = r.take(r.uvarint())
	}
	if r.err != nil || len(r.b) != 0 {
		return 0, nil, ErrDamagedBlock
	}
	if pick == nil {
		pick = make([]int, len(kinds))
		for i := range pick {
			pick[i] = i
		}
	}
	cols := make([]blockCol, len(pick))
	for i, p := range pick {
		if p < 0 || p >= len(kinds) {
			return 0, nil, fmt.Errorf("store: a block has no column %d", p)
		}
		b, err := unpackRaw(vals[p])
		if err != nil {
			return 0, nil, fmt.Errorf("%w: %w", ErrDamagedBlock, err)
		}
		if err := decodeColumn(&cols[i], kinds[p], b, n); err != nil {
			return 0, nil, err
		}
	}
	return int(n), cols, nil
}

// decodeColumn is c, of kind, from its n rows' values b, all of them.
func decodeColumn(c *blockCol, kind byte, b []byte, n uint64) error {
	r := &blockReader{b: b}
	c.kind = kind
	switch kind {
	case blockInt:
		c.ints = make([]int64, n)
		prev := int64(0)
		for j := range c.ints {
			prev += r.varint()
			c.ints[j] = prev
		}
	case blockBool:
		for _, o := range r.take(n) {
			c.bools = append(c.bools, o != 0)
		}
	case blockString, blockNullString:
		k := r.uvarint()
		if k > uint64(len(r.b)) {
			r.fail()
		}
		for range k {
			if r.err != nil {
				break
			}
			c.dict = append(c.dict, string(r.take(r.uvarint())))
		}
		c.idx = make([]uint32, n)
		top := k
		if kind == blockNullString {
			top++
		}
		for j := range c.idx {
			id := r.uvarint()
			if id >= top {
				r.fail()
			}
			c.idx[j] = uint32(id)
		}
	case blockFloat:
		valid := r.take(n)
		count := 0
		for _, o := range valid {
			c.valid = append(c.valid, o != 0)
			if o != 0 {
				count++
			}
		}
		c.floats = make([]float64, n)
		r.floats(c, count)
	}
	if r.err != nil {
		return r.err
	}
	if len(r.b) != 0 {
		return ErrDamagedBlock
	}
	return nil
}

// blockSource is a block's rows as scanRows reads them: of read, each
// one of blockColumns.
type blockSource struct {
	z    []byte // the block as stored
	read []string
	dest []any
	cols []blockCol
	n, i int
}

// blockKinds are the kinds of blockColumns' values, in order.
var blockKinds = sync.OnceValue(func() []byte {
	var x scanned
	kinds := make([]byte, len(blockColumns))
	for i, d := range x.dests(blockColumns) {
		kinds[i], _ = blockKind(d)
	}
	return kinds
})

func (b *blockSource) open(dest []any) (rowSource, error) {
	pick := make([]int, len(b.read))
	for i, c := range b.read {
		if pick[i] = slices.Index(blockColumns, c); pick[i] < 0 {
			return nil, fmt.Errorf("store: a block holds no %s", c)
		}
	}
	raw, err := unpackRaw(b.z)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrDamagedBlock, err)
	}
	b.n, b.cols, err = decodeBlock(raw, blockKinds(), pick)
	b.dest = dest
	return b, err
}

func (b *blockSource) next() (bool, error) {
	if b.i == b.n {
		return false, nil
	}
	i := b.i
	for j, d := range b.dest {
		c := &b.cols[j]
		switch v := d.(type) {
		case *int64:
			*v = c.ints[i]
		case *bool:
			*v = c.bools[i]
		case *string:
			*v = c.dict[c.idx[i]]
		case *sql.NullString:
			*v = sql.NullString{}
			if id := c.idx[i]; id > 0 {
				*v = sql.NullString{String: c.dict[id-1], Valid: true}
			}
		case *sql.NullFloat64:
			*v = sql.NullFloat64{Float64: c.floats[i], Valid: c.valid[i]}
		}
	}
	b.i++
	return true, nil
}

func (b *blockSource) close() error { return nil }

// exprs are cols as this engine's SQL spells them.
func (s *Store) exprs(cols []string) []string {
	out := slices.Clone(cols)
	if i := slices.Index(cols, whereCol); i >= 0 && s.postgres { // PostgreSQL's || takes no bigint
		out[i] = strings.NewReplacer("vantage_asn", "vantage_asn::text", "char(31)", "chr(31)").Replace(whereCol)
	}
	return out
}

// withSource runs f with a query's rows on a reader of its own: on
// PostgreSQL a connection of the pool, in pgx's own interface; on SQLite
// straight on its C API (reader).
func (s *Store) withSource(ctx context.Context, q string, args []any, f func(open func(dest []any) (rowSource, error)) error) error {
	if s.postgres {
		conn, err := s.db.Conn(ctx)
		if err != nil {
			return err
		}
		defer conn.Close()
		// pgx's own connection is not to be used outside Raw: the whole
		// scan runs in it.
		return conn.Raw(func(dc any) error {
			return f(queryPG(ctx, dc.(*stdlib.Conn).Conn(), s.rebind(q), args))
		})
	}
	c, err := s.reader()
	if err != nil {
		return err
	}
	defer s.release(c)
	return f(queryRaw(ctx, c, q, args))
}

// Seal keeps every sample the run holds in blocks, its last block
// partly filled: doxlab store seal, for runs written before schema 15
// or copied in SQL. A writer seals as it writes (Write, Wrote, Close).
func (s *Store) Seal(ctx context.Context, runID string) error { return s.sealID(ctx, runID, true) }

// sealID is seal of a run named by its ID.
func (s *Store) sealID(ctx context.Context, runID string, whole bool) error {
	var n int64
	if err := s.db.QueryRowContext(ctx, s.rebind(`SELECT n FROM runs WHERE id = ?`), runID).Scan(&n); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("store: no run %s", runID)
		}
		return err
	}
	return s.seal(ctx, n, whole)
}

// SealAll seals every run (Seal), two at a time; again, it first drops
// every block, for blocks that do not decode.
func (s *Store) SealAll(ctx context.Context, again bool) error {
	runs, err := s.dbRuns(ctx)
	if err != nil {
		return err
	}
	if again {
		if _, err := s.db.ExecContext(ctx, `DELETE FROM sample_blocks`); err != nil {
			return fmt.Errorf("store: dropping the blocks: %w", err)
		}
	}
	work := make(chan int64)
	errs := make(chan error, scanWorkers)
	var wg sync.WaitGroup
	for range scanWorkers {
		wg.Go(func() {
			var first error
			for n := range work {
				if err := s.seal(ctx, n, true); err != nil && first == nil {
					first = err
				}
			}
			errs <- first
		})
	}
	for _, r := range runs {
		work <- r.number
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// seal writes the run's samples after its last block into blocks of
// blockRows, and what is left into a last block if whole. Two sealers of
// one run at once write the same blocks: the second's are not kept
// (their run and start are the first's), and it reads on from what the
// first kept.
func (s *Store) seal(ctx context.Context, run int64, whole bool) error {
	// Blocks of another version go: the run's are made again.
	if _, err := s.db.ExecContext(ctx, s.rebind(`DELETE FROM sample_blocks WHERE run = ? AND version <> ?`), run, blockVersion); err != nil {
		return fmt.Errorf("store: sealing run %d: %w", run, err)
	}
	hi, err := s.sealBound(ctx)
	if err != nil {
		return fmt.Errorf("store: sealing run %d: %w", run, err)
	}
	q := `SELECT id, ` + strings.Join(s.exprs(blockColumns), ", ") + ` FROM sample_cols WHERE id > ? AND id <= ? AND +run = ? ORDER BY id LIMIT ?`
	var x scanned
	dest := x.dests(blockColumns)
	for {
		var after int64
		if err := s.db.QueryRowContext(ctx, s.rebind(`SELECT COALESCE(max(last_id), 0) FROM sample_blocks WHERE run = ?`), run).Scan(&after); err != nil {
			return fmt.Errorf("store: sealing run %d: %w", run, err)
		}
		w, err := newBlockWriter(dest)
		if err != nil {
			return err
		}
		var last int64
		err = s.withSource(ctx, q, []any{after, hi, run, blockRows}, func(open func([]any) (rowSource, error)) error {
			src, err := open(append([]any{&last}, dest...))
			if err != nil {
				return err
			}
			defer src.close()
			for {
				ok, err := src.next()
				if err != nil || !ok {
					return err
				}
				w.add()
			}
		})
		if err != nil {
			return fmt.Errorf("store: sealing run %d: %w", run, err)
		}
		if w.n == 0 || (w.n < blockRows && !whole) {
			return nil
		}
		z := append([]byte{codecPlain}, w.encode()...) // its columns compressed
		if _, err := s.db.ExecContext(ctx, s.rebind(`INSERT INTO sample_blocks (run, after_id, last_id, samples, version, z) VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT (run, after_id) DO NOTHING`), run, after, last, w.n, blockVersion, z); err != nil {
			return fmt.Errorf("store: sealing run %d: %w", run, err)
		}
		if w.n < blockRows {
			return nil
		}
	}
}

// sealBound is the highest sample number below which every sample is
// committed: the table's last on SQLite, whose one writer commits in
// order. On PostgreSQL a writer takes its number before it commits, so
// a lower number can commit after a higher one is seen: the bound is
// read under a SHARE lock, which waits for every writer holding one
// (and holds new ones back for as long as reading max(id) takes). A
// role that may not take it (a campaign worker's) does not seal.
func (s *Store) sealBound(ctx context.Context) (int64, error) {
	var hi int64
	if !s.postgres {
		err := s.db.QueryRowContext(ctx, `SELECT COALESCE(max(id), 0) FROM sample_cols`).Scan(&hi)
		return hi, err
	}
	err := s.InTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `SET LOCAL lock_timeout = '5s'`); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `LOCK TABLE sample_cols IN SHARE MODE`); err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, `SELECT COALESCE(max(id), 0) FROM sample_cols`).Scan(&hi)
	})
	return hi, err
}

// blockEncoder compresses blocks' columns: zstd without a dictionary (a
// column of a block is large enough to be its own); unpackRaw reads
// them, as a record.
var blockEncoder = sync.OnceValues(func() (*zstd.Encoder, error) {
	return zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1))
})

// packColumn is a block's column's values as the block keeps them.
func packColumn(b []byte) []byte {
	enc, err := blockEncoder()
	if err != nil {
		return append([]byte{codecPlain}, b...)
	}
	return enc.EncodeAll(b, []byte{codecZstd})
}

// blockRef is a block as the report looks for it, before its octets.
type blockRef struct {
	after, last, samples int64
}

// sealedRuns are the blocks of each run, by number, that follow each
// other from 0 and are of this version; a run whose blocks do not is
// left out (read from its rows).
func (s *Store) sealedRuns(ctx context.Context) (map[int64][]blockRef, error) {
	rows, err := s.db.QueryContext(ctx, s.rebind(`SELECT run, after_id, last_id, samples, version FROM sample_blocks`))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	all := map[int64][]blockRef{}
	bad := map[int64]bool{}
	for rows.Next() {
		var run, v int64
		var b blockRef
		if err := rows.Scan(&run, &b.after, &b.last, &b.samples, &v); err != nil {
			return nil, err
		}
		if v != blockVersion || b.samples <= 0 || b.last <= b.after {
			bad[run] = true
		}
		all[run] = append(all[run], b)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for run, bs := range all {
		sort.Slice(bs, func(i, j int) bool { return bs[i].after < bs[j].after })
		prev := int64(0)
		for _, b := range bs {
			if b.after != prev {
				bad[run] = true
			}
			prev = b.last
		}
		if bad[run] {
			delete(all, run)
		}
	}
	return all, nil
}

// readSealed reads read (a blockRead) of the samples of the runs in
// byNumber whose blocks and tail count what they hold, and says which
// runs it read: into sinks, the blocks shared out to the sinks'
// readers; or into ordered, run after run in their numbers' order, each
// run's blocks in order and then its tail. With f.After, a run is read
// from the block that begins there (a summary's last number, where a
// sealed run's summary ends).
func (s *Store) readSealed(ctx context.Context, f Filter, byNumber map[int64]Run, read []string, sinks []func(*Row) error, ordered func([]Row) error) (map[int64]bool, error) {
	blocks, err := s.sealedRuns(ctx)
	if err != nil || len(blocks) == 0 {
		// A role that may read the samples and not their blocks (a
		// campaign's reader granted them before schema 15) reads rows.
		return nil, nil //nolint:nilerr // the rows are the truth
	}
	held := f.Held
	if held == nil {
		if held, err = s.RunSamples(ctx); err != nil {
			return nil, err
		}
	}
	// A piece is a block (run, after) or, with tail set, a run's tail:
	// tail.rows[from:to].
	type piece struct {
		run, after int64
		tail       bool
		from, to   int
	}
	var parts []piece
	tail := &chunk{}
	covered := map[int64]bool{}
	q := `SELECT ` + strings.Join(s.exprs(read), ", ") + ` FROM sample_cols WHERE id > ? AND +run = ? ORDER BY id LIMIT ?`
	for _, n := range slices.Sorted(maps.Keys(blocks)) {
		bs := blocks[n]
		r, ok := byNumber[n]
		if !ok {
			continue
		}
		var in int64
		for _, b := range bs {
			in += b.samples
		}
		more := held[r.ID] - in
		if more < 0 || more > int64(maxTail) {
			continue // its rows say what it holds
		}
		// Read on from f.After (a summary's last number) by the blocks
		// that begin there, or by the tail alone where the blocks end
		// there; a number inside a block (a summary made with a tail)
		// leaves the run to its rows, which say which samples follow it.
		first := 0
		if f.After > 0 {
			if f.After == bs[len(bs)-1].last {
				first = len(bs)
			} else if first = slices.IndexFunc(bs, func(b blockRef) bool { return b.after == f.After }); first < 0 {
				continue
			}
		}
		// The tail is read one past what it should hold, also when that
		// is none: a sample deleted under a block leaves the run holding
		// one fewer than its blocks and its tail count, and a tail read
		// only as long as the difference would take its place unseen.
		from := len(tail.rows)
		if err := s.scanRange(ctx, q, []any{bs[len(bs)-1].last, n, more + 1}, read, byNumber, func(r *Row) error { tail.add(r); return nil }); err != nil {
			return nil, err
		}
		if int64(len(tail.rows)-from) != more { // one deleted under a block, or committed late: read the run from its rows
			tail.rows = tail.rows[:from]
			continue
		}
		covered[n] = true
		for _, b := range bs[first:] {
			parts = append(parts, piece{run: n, after: b.after})
		}
		if more > 0 {
			parts = append(parts, piece{run: n, tail: true, from: from, to: len(tail.rows)})
		}
		if more == 0 && f.Sealed != nil {
			f.Sealed[r.ID] = Held{Samples: in, Last: bs[len(bs)-1].last}
		}
	}
	if len(covered) == 0 {
		return nil, nil
	}
	if ordered != nil {
		return covered, inOrder(ctx, len(parts), func(ctx context.Context, i int, add func(*Row) error) error {
			p := parts[i]
			if !p.tail {
				return s.readBlock(ctx, p.run, p.after, read, byNumber, add)
			}
			for j := p.from; j < p.to; j++ {
				if err := add(&tail.rows[j]); err != nil {
					return err
				}
			}
			return nil
		}, ordered)
	}
	parts = slices.DeleteFunc(parts, func(p piece) bool { return p.tail })
	err = shareOut(ctx, len(parts), func(ctx context.Context, w, i int) error {
		return s.readBlock(ctx, parts[i].run, parts[i].after, read, byNumber, sinks[w])
	})
	if err != nil {
		return nil, err
	}
	for i := range tail.rows {
		if err := sinks[0](&tail.rows[i]); err != nil {
			return nil, err
		}
	}
	return covered, ctx.Err()
}

// readBlock hands sink read of the samples of one block.
func (s *Store) readBlock(ctx context.Context, run, after int64, read []string, byNumber map[int64]Run, sink func(*Row) error) error {
	var z []byte
	if err := s.db.QueryRowContext(ctx, s.rebind(`SELECT z FROM sample_blocks WHERE run = ? AND after_id = ?`), run, after).Scan(&z); err != nil {
		return fmt.Errorf("store: run %s's samples after %d: %w", byNumber[run].ID, after, err)
	}
	b := &blockSource{z: z, read: read}
	err := scanRows(b.open, read, byNumber, sink)
	if errors.Is(err, ErrDamagedBlock) {
		return fmt.Errorf("store: run %s's block of samples after number %d does not decode: %w", byNumber[run].ID, after, err)
	}
	return err
}

// Wrote notes a sample written to the run (Write calls it; a writer of
// WriteOnce calls it once its transaction commits): every blockRows
// samples a Store writes to a run, it seals the run's full blocks, and
// Close seals the rest. A seal that fails (a role that may not seal, a
// writer holding the lock) is only not made: the report reads those
// samples from their rows.
func (s *Store) Wrote(ctx context.Context, runID string) {
	s.wmu.Lock()
	if s.written == nil {
		s.written = map[string]int{}
	}
	s.written[runID]++
	due := s.written[runID] >= blockRows
	if due {
		s.written[runID] = 0
	}
	s.wmu.Unlock()
	if due {
		s.sealRun(ctx, runID, false)
	}
}

// sealWritten seals, whole, the runs this Store wrote to since it last
// sealed them.
func (s *Store) sealWritten() {
	s.wmu.Lock()
	var runs []string
	for id, n := range s.written {
		if n > 0 {
			runs = append(runs, id)
		}
	}
	s.written = nil
	s.wmu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, id := range runs {
		s.sealRun(ctx, id, true)
	}
}

// sealRun seals a run by its ID, as a writer does: an error leaves its
// samples to be read from their rows.
func (s *Store) sealRun(ctx context.Context, runID string, whole bool) {
	_ = s.sealID(ctx, runID, whole)
}

// Sealed is how many blocks the store keeps, and how many samples they
// hold.
func (s *Store) Sealed(ctx context.Context) (blocks, samples int64, err error) {
	err = s.db.QueryRowContext(ctx, `SELECT count(*), COALESCE(sum(samples), 0) FROM sample_blocks`).Scan(&blocks, &samples)
	return blocks, samples, err
}

// unsealed is how many of its samples each run holds beyond what its
// blocks hold, summed: a run whose blocks a report would not read
// counts whole.
func (s *Store) unsealed(ctx context.Context) (int64, error) {
	held, err := s.RunSamples(ctx)
	if err != nil {
		return 0, err
	}
	blocks, err := s.sealedRuns(ctx)
	if err != nil {
		return 0, err
	}
	runs, err := s.dbRuns(ctx)
	if err != nil {
		return 0, err
	}
	var out int64
	for _, r := range runs {
		n := held[r.ID]
		var in int64
		for _, b := range blocks[r.number] {
			in += b.samples
		}
		if in <= n {
			n -= in
		}
		out += n
	}
	return out, nil
}
