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

// RegisterExport declares an experiment's table: rows reads the rows of
// the runs keep accepts. T is a struct whose fields carry parquet tags.
func RegisterExport[T any](table, doc string, rows func(ctx context.Context, st *store.Store, keep func(runID string) bool) ([]T, error)) {
	exportsMu.Lock()
	defer exportsMu.Unlock()
	exports = append(exports, Export{Table: table, Doc: doc, Write: func(ctx context.Context, st *store.Store, keep func(string) bool, w io.Writer, f store.Format) (int, error) {
		rs, err := rows(ctx, st, keep)
		if err != nil {
			return 0, err
		}
		return len(rs), store.Write(w, f, rs)
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
