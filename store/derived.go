package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// A derived table is made from a results kind's records as a dataset is
// written: a file beside each of the kind's results files, made from its
// rows in order (as StoredBriefs reads them), that a reader takes in
// place of the rows when it is of the reader's Format. A page load's
// analysis reads a hundred octets of it (its point) where its brief is
// 1.2 KB of JSON to decode: the first report of a dataset of half a
// million loads spent 7.8 s of its 21 s of CPU reading and decoding
// them. The Format names the bytes' version as the code that reads them
// knows it, so a file made by another doxlab is read where the two
// agree, and left for the rows where they do not.
type Derived struct {
	Table  string // its files' table in the manifest: "points"
	Format string // what its bytes are, with their version
	// New begins the derivation of one results file of run: add is
	// handed each row's record, end the file's bytes. An error from
	// either leaves the file without it (a reader reads the rows).
	New func(run string) (add func(raw []byte) error, end func() ([]byte, error))
}

// SamplesDerived is a table derived likewise from a dataset's samples
// files, a file beside each made from its rows as the writer writes
// them: a DNS report merges a file's cells (a hundred kilobytes) where
// it would read ten million rows into them (the first report of a
// dataset spent 7.9 s, ten times DuckDB's grouped medians, doing so).
type SamplesDerived struct {
	Table  string // "cells"
	Format string
	// Begin begins an export's derivations from s (what they need of
	// it, such as its runs, read once); New then begins one samples
	// file's of run: add is handed each row written to it, on the
	// writer's goroutine, end the file's bytes. An error from end leaves
	// the file without it.
	Begin func(ctx context.Context, s *Store) (New func(run string) (add func(*Row), end func() ([]byte, error)), err error)
}

var (
	derivedMu      sync.Mutex
	derived        = map[Kind][]Derived{}
	samplesDerived []SamplesDerived
)

// DeriveSamples declares, at init, a table derived from the samples in
// the datasets doxlab writes.
func DeriveSamples(d SamplesDerived) {
	derivedMu.Lock()
	defer derivedMu.Unlock()
	samplesDerived = append(samplesDerived, d)
}

// rowDeriver is a samples derivation begun for an export.
type rowDeriver struct {
	SamplesDerived
	New func(run string) (add func(*Row), end func() ([]byte, error))
}

// beginSamplesDerived begins the declared samples derivations for an
// export from s.
func beginSamplesDerived(ctx context.Context, s *Store) ([]rowDeriver, error) {
	derivedMu.Lock()
	ds := slices.Clone(samplesDerived)
	derivedMu.Unlock()
	var out []rowDeriver
	for _, d := range ds {
		nw, err := d.Begin(ctx, s)
		if err != nil {
			return nil, fmt.Errorf("dataset: the %s of the samples: %w", d.Table, err)
		}
		out = append(out, rowDeriver{d, nw})
	}
	return out, nil
}

// rowDeriving is one samples file's derivation: the file it makes, and
// what is handed each row.
type rowDeriving struct {
	made
	add func(*Row)
}

// Derive declares, at init, a table derived from kind's results in the
// datasets doxlab writes.
func Derive(kind Kind, d Derived) {
	derivedMu.Lock()
	defer derivedMu.Unlock()
	derived[kind] = append(derived[kind], d)
}

func derivedFor(kind Kind) []Derived {
	derivedMu.Lock()
	defer derivedMu.Unlock()
	return derived[kind]
}

// deriving is one derived table's file being made beside a results
// file, on a goroutine of its own: the writer hands it each row and goes
// on compressing (made on the writer, a page load's point cost the
// export of half a million loads 9 s).
type deriving struct {
	d    Derived
	rows chan []byte
	done chan struct{}
	once sync.Once
	out  []byte // set before done is closed
	err  error
}

func newDeriving(d Derived, run string) *deriving {
	add, end := d.New(run)
	dv := &deriving{d: d, rows: make(chan []byte, 256), done: make(chan struct{})}
	go func() {
		defer close(dv.done)
		for raw := range dv.rows { // drained whole, an error or not: put never blocks for good
			if dv.err == nil {
				dv.err = add(raw)
			}
		}
		if dv.err == nil {
			dv.out, dv.err = end()
		}
	}()
	return dv
}

// put hands the derivation a row's record, which it keeps a copy of.
func (dv *deriving) put(raw []byte) { dv.rows <- bytes.Clone(raw) }

// finish ends the derivation (again: the same) and gives its bytes.
func (dv *deriving) finish() ([]byte, error) {
	dv.once.Do(func() { close(dv.rows) })
	<-dv.done
	return dv.out, dv.err
}

// endDerived ends p's derivations, whatever became of p.
func (p *part) endDerived() {
	for _, dv := range p.derived {
		dv.finish()
	}
}

// made is a derived file to write: its table, format and bytes.
type made struct {
	table, format string
	end           func() ([]byte, error)
}

// made lists the derived files of p, results' and samples' alike.
func (p *part) made() []made {
	var out []made
	for _, dv := range p.derived {
		out = append(out, made{dv.d.Table, dv.d.Format, dv.finish})
	}
	for _, rd := range p.rowDerived {
		out = append(out, rd.made)
	}
	return out
}

// derivedExt ends a derived file's name: zstd, whatever it holds.
const derivedExt = ".bin.zst"

// writeDerived ends the derivations of results or samples file of and
// writes their files, returning those written; a derivation that failed
// is left out.
func (w *writer) writeDerived(of *DatasetFile, ds []made) ([]*DatasetFile, error) {
	var out []*DatasetFile
	for _, dv := range ds {
		b, err := dv.end()
		if err != nil {
			continue
		}
		base := strings.TrimSuffix(path.Base(of.Path), path.Ext(of.Path))
		base = strings.TrimSuffix(base, path.Ext(base)) + derivedExt
		f := &DatasetFile{Path: path.Join(partitionDir(dv.table, of.Kind, of.Run, "", of.Day), base), Table: dv.table, Kind: of.Kind,
			Run: of.Run, Day: of.Day, Of: of.Path, Format: dv.format}
		p, err := w.d.create(f)
		if err != nil {
			return out, fmt.Errorf("dataset: %w", err)
		}
		f.Rows, f.First = of.Rows, of.First // of the rows it was made from
		if _, err := p.zw.Write(b); err != nil {
			p.abort()
			return out, fmt.Errorf("dataset: writing %s: %w", f.Path, err)
		}
		if err := p.close(w.d.dir); err != nil {
			return out, err
		}
		out = append(out, f)
	}
	return out, nil
}

// maxDerived bounds what a derived file may decompress to, per row of
// the results file it was made from (a page load's point is about a
// hundred octets), and maxDerivedRows the rows it is allowed for, so
// that a hostile manifest cannot ask for more.
const (
	maxDerived     = 4 << 10
	maxDerivedRows = 1 << 20
)

// derivedOf is the file of table in format derived from results file f,
// of as many rows, if the dataset holds one.
func (d *Dataset) derivedOf(f DatasetFile, table, format string) (DatasetFile, bool) {
	return d.madeFrom(f, func(x DatasetFile) bool {
		return x.Table == table && x.Format == format && x.Rows == f.Rows && x.Kind == f.Kind && x.Run == f.Run
	})
}

// readDerived is the bytes of derived file f, checked against the
// manifest's digest.
func (d *Dataset) readDerived(ctx context.Context, f DatasetFile) ([]byte, error) {
	limit := min(max(f.Rows, 1), maxDerivedRows) * maxDerived
	z, err := readAll(ctx, d.src, f.Path, limit)
	if err != nil {
		return nil, fmt.Errorf("dataset %s: %w", d.dir, err)
	}
	if sum := sha256.Sum256(z); hex.EncodeToString(sum[:]) != f.SHA256 {
		return nil, fmt.Errorf("dataset %s: %s: changed since it was written: its SHA-256 is not the manifest's", d.dir, f.Path)
	}
	zr, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(uint64(limit)))
	if err != nil {
		return nil, err
	}
	defer zr.Close()
	b, err := zr.DecodeAll(z, nil)
	if err != nil {
		return nil, fmt.Errorf("dataset %s: %s: %w", d.dir, f.Path, err)
	}
	return b, nil
}

// DatasetDerived is the table of format derived from the attached
// dataset's results file df (Derive), where the dataset holds one made
// from its rows; ok is false where it holds none (the rows are then
// read).
func (s *Store) DatasetDerived(ctx context.Context, df DatasetFile, table, format string) (b []byte, ok bool, err error) {
	if s.archive == nil {
		return nil, false, nil
	}
	f, ok := s.archive.derivedOf(df, table, format)
	if !ok {
		return nil, false, nil
	}
	b, err = s.archive.readDerived(ctx, f)
	return b, err == nil, err
}
