package store

import (
	"context"
	"io"
	"slices"
	"strings"
	"sync"
	"time"
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

// RunRow is a run as the runs table exports it: what every other table's
// run_id joins to.
type RunRow struct {
	RunID      string    `parquet:"run_id"`
	Kind       string    `parquet:"kind"`
	Experiment string    `parquet:"experiment"` // of an experiment's run: dns-rtt, web, ...
	Method     int64     `parquet:"method"`     // its method's version; 0: none recorded
	StartedAt  time.Time `parquet:"started_at,timestamp(microsecond:utc)"`
	Doxlab     string    `parquet:"doxlab_version"`
	Go         string    `parquet:"go_version"`
	Kernel     string    `parquet:"kernel"`
	Hostname   string    `parquet:"hostname"`
	Profile    string    `parquet:"profile"`
	// SupersededBy is the run that measured this one again after a
	// failed link check (analysis reads that one); empty otherwise.
	SupersededBy string `parquet:"superseded_by"`
}

// RunRows are the stored runs keep accepts, oldest first, as the runs
// table has them.
func (s *Store) RunRows(ctx context.Context, keep func(runID string) bool) ([]RunRow, error) {
	runs, err := s.Runs(ctx)
	if err != nil {
		return nil, err
	}
	by, err := s.Superseders(ctx)
	if err != nil {
		return nil, err
	}
	var out []RunRow
	for _, r := range runs {
		if !keep(r.ID) {
			continue
		}
		exp, _ := strings.CutPrefix(r.Kind, "experiment:")
		if exp == r.Kind {
			exp = ""
		}
		out = append(out, RunRow{RunID: r.ID, Kind: r.Kind, Experiment: exp, Method: int64(r.Method), StartedAt: r.StartedAt.UTC(),
			Doxlab: r.DoxlabVersion, Go: r.GoVersion, Kernel: r.Kernel, Hostname: r.Hostname, Profile: r.Profile, SupersededBy: by[r.ID]})
	}
	return out, nil
}

func init() {
	RegisterExport("runs", "a row per run: its kind, experiment and method version, doxlab and Go versions, machine, profile, and the run that superseded it",
		func(ctx context.Context, st *Store, keep func(string) bool, emit func(RunRow) error) error {
			rows, err := st.RunRows(ctx, keep)
			if err != nil {
				return err
			}
			for _, r := range rows {
				if err := emit(r); err != nil {
					return err
				}
			}
			return nil
		})
}
