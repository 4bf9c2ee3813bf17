package store

import (
	"context"
	"io"
	"slices"
	"strings"
	"sync"
)

// Export is a table results of one kind flatten to, for 'doxlab export
// --table NAME' as CSV or Parquet beside the store's own tables
// (samples, loads): a row per stored result, typed columns. The package
// that writes a kind registers its table here, next to the store's own,
// so whatever exports needs the store only (bench's table does not link
// the experiment framework).
type Export struct {
	Table string // as on the command line: "coalescing"
	Doc   string // what a row is
	// Write writes the rows of the runs keep accepts; it returns how
	// many.
	Write func(ctx context.Context, st *Store, keep func(runID string) bool, w io.Writer, f Format) (int, error)
}

var (
	exportsMu sync.Mutex
	exports   []Export
)

// RegisterExport declares a table: each hands emit the rows of the runs
// keep accepts, one at a time, and they are written as they come. T is
// a struct whose fields carry parquet tags.
func RegisterExport[T any](table, doc string, each func(ctx context.Context, st *Store, keep func(runID string) bool, emit func(T) error) error) {
	exportsMu.Lock()
	defer exportsMu.Unlock()
	exports = append(exports, Export{Table: table, Doc: doc, Write: func(ctx context.Context, st *Store, keep func(string) bool, w io.Writer, f Format) (int, error) {
		rw := NewRowWriter[T](w, f)
		if err := each(ctx, st, keep, rw.Write); err != nil {
			return rw.N, err
		}
		return rw.N, rw.Close()
	}})
}

// Exports lists the registered tables by name.
func Exports() []Export {
	exportsMu.Lock()
	defer exportsMu.Unlock()
	out := slices.Clone(exports)
	slices.SortFunc(out, func(a, b Export) int { return strings.Compare(a.Table, b.Table) })
	return out
}
