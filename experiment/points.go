package experiment

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"os"
	"slices"

	"github.com/doxlab/doxlab/internal/buildinfo"
	"github.com/doxlab/doxlab/store"
)

// Points reads stored results of one kind as an analysis reads them: a
// result's point (what the analysis reads of it, a hundred octets where
// its JSON decoded holds kilobytes), kept per run as the run's summary
// when a report first reads the run, so that a later report decodes the
// points, not the results' JSON, as the DNS section keeps a run's
// cells. A summary is of the results its run held when it was made (as
// many, the latest start among them; results are only added, or
// archived with their run's summaries) and of the points' Portable
// version (madeBy): a run that holds more since (a campaign's next
// round) is read on from the latest start, or whole where that misses
// some (a worker's result stored late), and a summary of other points
// is made anew. An
// attached dataset's files are summarized likewise, each in the user's
// cache under its digest, as the DNS cells of its samples files are.
// The store's results are read by their briefs where the kind has them
// (store.Brief, store.StoredBriefs).
type Points[P any] struct {
	Kind    store.Kind // the results
	Summary string     // the summaries' kind
	// Point is what the analysis reads of one result of run: of its
	// record, or of its brief, which leaves out only what Point skips.
	Point  func(run string, raw []byte) (P, error)
	Encode func([]P) ([]byte, error)
	// Decode appends the points b encodes to dst; ok is false for an
	// encoding of another format.
	Decode func(dst []P, b []byte) (out []P, ok bool, err error)
	// Portable names the points' encoding and what a point is of its
	// result, with their versions, where a change to either bumps it:
	// the datasets doxlab writes keep each results file's points under
	// it (store.Derive), which any doxlab of the same Portable reads in
	// place of the results. Empty: a dataset keeps none.
	Portable string
}

// derivedTable is the dataset table results files' points go to.
const derivedTable = "points"

// keepers are the Keep of each Points registered with KeepsPoints.
var keepers []func(context.Context, *store.Store, store.Filter) (int, int, error)

// KeepsPoints registers p, at init, with KeepPoints, and its points as
// a table derived from its results in the datasets doxlab writes.
func KeepsPoints[P any](p Points[P]) {
	keepers = append(keepers, p.Keep)
	if p.Portable == "" {
		return
	}
	store.Derive(p.Kind, store.Derived{Table: derivedTable, Format: p.Portable, New: func(run string) (func([]byte) error, func() ([]byte, error)) {
		var ps []P
		return func(raw []byte) error {
				x, err := p.Point(run, raw)
				ps = append(ps, x)
				return err
			}, func() ([]byte, error) {
				return p.Encode(ps)
			}
	}})
}

// KeepPoints keeps the points of the runs f selects of every Points
// registered (Points.Keep): a run's page loads when it ends, and `store
// seal`'s. It returns how many runs and results it read.
func KeepPoints(ctx context.Context, st *store.Store, f store.Filter) (runs, results int, err error) {
	return keepEach(ctx, st, f, keepers)
}

// keepEach runs each keeper on the runs f selects, adding up how many
// runs and records they read, up to the first that fails.
func keepEach[N int | int64](ctx context.Context, st *store.Store, f store.Filter, keepers []func(context.Context, *store.Store, store.Filter) (int, N, error)) (runs int, read N, err error) {
	for _, k := range keepers {
		r, n, err := k(ctx, st, f)
		runs, read = runs+r, read+n
		if err != nil {
			return runs, read, err
		}
	}
	return runs, read, nil
}

// cellKeepers keep what a report reads of the runs' DNS samples
// (KeepsCells).
var cellKeepers []func(context.Context, *store.Store, store.Filter) (runs int, samples int64, err error)

// KeepsCells registers keep, at init, with KeepCells: the DNS section's
// summaries of each run's samples, which it reads in place of them.
func KeepsCells(keep func(context.Context, *store.Store, store.Filter) (runs int, samples int64, err error)) {
	cellKeepers = append(cellKeepers, keep)
}

// KeepCells keeps the summaries of the DNS samples of the runs f
// selects that have none current, as the first report to read them
// would (an experiment keeps its runs' when they end, as their page
// loads' points; `store seal` the rest): a report then reads the
// summaries, not every block. It returns how many runs and samples it
// read.
func KeepCells(ctx context.Context, st *store.Store, f store.Filter) (runs int, samples int64, err error) {
	return keepEach(ctx, st, f, cellKeepers)
}

// pointsBatch is how many runs are read in one pass.
const pointsBatch = 16

// madeBy heads a summary of points: what a point is of its result and
// how points are encoded, which Portable names with their versions (a
// change to either fails the tests that pin it until it is bumped, as
// datasets need), else the build that made it. A doxlab of another
// build, a worker's that kept a run's points when the run ended, or the
// analyst's after an upgrade, then reads the points it would make: half
// a million page loads decoded again took a first report from 4 s to
// 11 s at the scale bench's size.
func (p Points[P]) madeBy() []byte {
	if p.Portable != "" {
		return fmt.Appendf(nil, "%s\x00", p.Portable)
	}
	return fmt.Appendf(nil, "%s %s\x00", buildinfo.Version(), buildinfo.BinaryID())
}

// Pack is ps as a run's summary keeps them.
func (p Points[P]) Pack(ps []P) ([]byte, error) {
	b, err := p.Encode(ps)
	if err != nil {
		return nil, err
	}
	return append(p.madeBy(), b...), nil
}

// Unpack is the points a summary keeps; ok is false for one of other
// points (madeBy), or that does not decode.
func (p Points[P]) Unpack(b []byte) ([]P, bool) {
	rest, ok := bytes.CutPrefix(b, p.madeBy())
	if !ok {
		return nil, false
	}
	out, ok, err := p.Decode(nil, rest)
	return out, ok && err == nil
}

// madeHere says whether the summary b holds the points this build makes.
func (p Points[P]) madeHere(b []byte) bool { return bytes.HasPrefix(b, p.madeBy()) }

// Read returns the points of the results of the runs f selects (its
// prefix, runs and supersession; a vantage point is the caller's to
// select), those of an attached dataset first.
func (p Points[P]) Read(ctx context.Context, st *store.Store, f store.Filter) ([]P, error) {
	var out []P
	if err := p.readFiles(ctx, st, f, &out); err != nil {
		return nil, err
	}
	err := p.eachRun(ctx, st, f, false,
		func(total int) { out = slices.Grow(out, total) },          // a year's points, not twice as many slots
		func(ps []P, _ bool, _ error) { out = append(out, ps...) }) // a summary not kept is only made again
	return out, err
}

// Keep keeps as its summary the points of each run f selects that has
// none its store's results count whole, as the first report to read
// the run would (an experiment keeps its runs' when they end; `store
// seal` the rest): that report then reads the points, not the results.
// It returns how many runs and results it read and kept; a summary it
// could not keep is an error.
func (p Points[P]) Keep(ctx context.Context, st *store.Store, f store.Filter) (runs, results int, err error) {
	var failed error
	err = p.eachRun(ctx, st, f, true, func(int) {}, func(ps []P, read bool, kept error) {
		switch {
		case kept != nil:
			failed = cmp.Or(failed, kept)
		case read:
			runs, results = runs+1, results+len(ps)
		}
	})
	return runs, results, cmp.Or(err, failed)
}

// eachRun hands add the points of each of the store's runs f selects,
// from its summary where one is current (read false), else read from
// its results and kept (read true), after grow is told how many there
// are, with the error keeping them gave. skipWhole skips a run whose
// summary is current and whole without decoding it.
func (p Points[P]) eachRun(ctx context.Context, st *store.Store, f store.Filter, skipWhole bool, grow func(total int), add func(ps []P, read bool, kept error)) error {
	keep, err := st.Keeps(ctx, f)
	if err != nil {
		return err
	}
	held, err := st.RunResults(ctx, p.Kind)
	if err != nil {
		return err
	}
	sums, err := st.Summaries(ctx, p.Summary)
	if err != nil {
		sums = nil // a role granted the results before schema 12 reads them
	}
	runs, err := st.Runs(ctx)
	if err != nil {
		return err
	}
	var unread []string
	total := 0
	for _, r := range runs {
		if h, ok := held[r.ID]; ok && keep(r.ID) {
			total += int(h.Samples)
		}
	}
	grow(total)
	for _, r := range runs {
		h, ok := held[r.ID]
		if !ok || !keep(r.ID) {
			continue
		}
		if m, ok := sums[r.ID]; ok && m.Samples <= h.Samples {
			if skipWhole && m.Samples == h.Samples && p.madeHere(m.Data) {
				continue
			}
			ps, ok := p.Unpack(m.Data)
			read, kept := false, error(nil)
			if ok && m.Samples < h.Samples {
				if ps, ok, kept, err = p.readOn(ctx, st, r.ID, m.Held, h, ps); err != nil {
					return err
				}
				read = true
			}
			if ok {
				add(ps, read, kept)
				continue
			}
		}
		unread = append(unread, r.ID)
	}
	for batch := range slices.Chunk(unread, pointsBatch) {
		byRun := map[string][]P{}
		err := p.decodeStored(ctx, st, batch, 0, func(id string, x P) error {
			byRun[id] = append(byRun[id], x)
			return nil
		})
		if err != nil {
			return err
		}
		for _, id := range batch {
			ps := byRun[id]
			// Kept only if the run held, as it was read, what it held when
			// counted: a result stored meanwhile leaves it unkept.
			var kept error
			if h := held[id]; int64(len(ps)) == h.Samples {
				kept = p.keep(ctx, st, id, h, ps)
			}
			add(ps, true, kept)
		}
	}
	return nil
}

// readOn brings the points ps of run's summary, made when the run held
// was, up to what it holds now, reading only the results that started
// after the summary's latest, and keeps them as its summary. ok is false
// where those are not all it lacks: the run is then read whole. kept is
// the error keeping them gave.
func (p Points[P]) readOn(ctx context.Context, st *store.Store, run string, was, now store.Held, ps []P) (out []P, ok bool, kept, err error) {
	n := 0
	err = p.decodeStored(ctx, st, []string{run}, was.Last, func(_ string, x P) error {
		ps = append(ps, x)
		n++
		return nil
	})
	if err != nil || was.Samples+int64(n) != now.Samples {
		return nil, false, nil, err
	}
	return ps, true, p.keep(ctx, st, run, now, ps), nil
}

// decodeStored hands fn the point of each of runs' stored results (by
// their briefs, StoredBriefs) that started after after (0: all), in
// order: read packed, unpacked and decoded on DecodeEach's workers.
func (p Points[P]) decodeStored(ctx context.Context, st *store.Store, runs []string, after int64, fn func(run string, x P) error) error {
	return DecodeEach(func(f func(string, []byte) error) error { return st.StoredPacked(ctx, runs, p.Kind, after, f) },
		func(run string, z []byte) (P, error) {
			raw, err := store.Unpack(z)
			if err != nil {
				var zero P
				return zero, fmt.Errorf("store: run %s: %w", run, err)
			}
			return p.Point(run, raw)
		}, fn)
}

// keep keeps ps as run's summary of what it held, if it can.
func (p Points[P]) keep(ctx context.Context, st *store.Store, run string, held store.Held, ps []P) error {
	if len(ps) == 0 {
		return nil
	}
	b, err := p.Pack(ps)
	if err != nil {
		return err
	}
	return KeepSummary(ctx, st, p.Summary, run, held, b)
}

// presizeMax bounds the points made room for at once from what a
// dataset's manifest says its files hold, which a hostile one inflates.
const presizeMax = 1 << 21

// readFiles adds to out the points of the attached dataset's results
// files f keeps: a file's from its summary in the user's cache
// (CellCache), kept under the file's digest, where one counts the rows
// the manifest gives it, else read and kept there. Read in place, into
// room made for the rows the manifest gives: grown a point at a time,
// then copied, half a million points were held twice at once (a first
// report's peak RSS 287-308 MB, 262-277 MB so).
func (p Points[P]) readFiles(ctx context.Context, st *store.Store, f store.Filter, out *[]P) error {
	files, err := st.DatasetResults(ctx, f, p.Kind)
	if err != nil || len(files) == 0 {
		return err
	}
	var rows int64
	for _, df := range files {
		rows = min(rows+min(max(df.Rows, 0), presizeMax), presizeMax)
	}
	*out = slices.Grow(*out, int(rows))
	for _, df := range files {
		if p.Portable != "" { // the points the dataset keeps, made as this doxlab makes them
			if b, ok, err := st.DatasetDerived(ctx, df, derivedTable, p.Portable); err != nil {
				return err
			} else if ok {
				ps, ok, err := p.Decode(*out, b)
				if err != nil {
					return fmt.Errorf("dataset: %s: %w", df.Path, err)
				}
				if ok && int64(len(ps)-len(*out)) == df.Rows {
					*out = ps
					continue
				}
			}
		}
		name := SummaryFile(p.Summary, "points", df)
		if name != "" {
			if b, err := os.ReadFile(name); err == nil {
				if ps, ok := p.Unpack(b); ok && int64(len(ps)) == df.Rows {
					*out = append(*out, ps...)
					continue
				}
			}
		}
		start := len(*out)
		err := DecodeEach(func(fn func(string, []byte) error) error { return st.EachDatasetBrief(df, fn) }, p.Point, func(_ string, x P) error {
			*out = append(*out, x)
			return nil
		})
		if err != nil {
			return err
		}
		if ps := (*out)[start:]; name != "" && int64(len(ps)) == df.Rows {
			if b, err := p.Pack(ps); err == nil {
				_ = WriteFileAtomic(name, b) // not kept: read again next time
			}
		}
	}
	return nil
}
