package experiment

import (
	"context"
	"io"
	"slices"
	"strings"
	"sync"

	"github.com/doxlab/doxlab/store"
)

// Export is a table an experiment's results flatten to, for 'doxlab
// export --table NAME' as CSV or Parquet beside the store's own tables
// (samples, loads): a row per stored result, typed columns.
type Export struct {
	Table string // as on the command line: "coalescing"
	Doc   string // what a row is
	// Write writes the rows of the runs keep accepts; it returns how
	// many.
	Write func(ctx context.Context, st *store.Store, keep func(runID string) bool, w io.Writer, f store.Format) (int, error)
}

var (
	exportsMu sync.Mutex
	exports   []Export
)

// RegisterExport declares an experiment's table: each hands emit the rows
// of the runs keep accepts, one at a time, and they are written as they
// come. T is a struct whose fields carry parquet tags.
func RegisterExport[T any](table, doc string, each func(ctx context.Context, st *store.Store, keep func(runID string) bool, emit func(T) error) error) {
	exportsMu.Lock()
	defer exportsMu.Unlock()
	exports = append(exports, Export{Table: table, Doc: doc, Write: func(ctx context.Context, st *store.Store, keep func(string) bool, w io.Writer, f store.Format) (int, error) {
		rw := store.NewRowWriter[T](w, f)
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
