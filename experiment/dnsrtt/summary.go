package dnsrtt

import (
	"bytes"
	"context"
	"encoding/gob"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/doxlab/doxlab/experiment"
	"github.com/doxlab/doxlab/measure"
	"github.com/doxlab/doxlab/store"
	"github.com/doxlab/doxlab/testbed"
)

// A report of a year's campaign reads each run's samples once: the cells
// of a run are kept in the store as its summary (store.Summary) when the
// report first reads them, and a later report merges the run's kept
// cells instead of reading its samples again; an attached dataset's
// files likewise, each under its digest in a cache of the user's.
// Cells merge exactly (a Dist keeps its values whole up to
// stats.ExactLimit, and a sketch's bins add), so a report from
// summaries gives every statistic a scan gives. A summary is of the
// samples its run held when it was made (as many as it holds now:
// samples are only added, or archived with their run's summaries), of
// the answers taken (part of its kind) and of its cells' version
// (madeBy, kept in it): a run that holds more samples since is read on
// from the summary's last number (or whole, if that misses some), a
// summary of other cells (another projection or format) is read again,
// and the summary is made anew. The report of one vantage point reads its
// samples.

// summaryKind is the summaries' kind for the rcodes taken as answers.
func summaryKind(a measure.Answers) string {
	return "dns-cells " + strings.Join(a.Rcodes(), ",")
}

// summaryFormat is the encoding's version, kept in it.
const summaryFormat = 1

// cellsProjection is the version of what a cell keeps of its samples:
// cells.add, the distributions' encoding (stats.Dist's) and what a
// summary holds of them. A change to any that changes a summary bumps
// it (TestCellsPortable says when one did), so that a summary made by
// another doxlab (a worker's, kept when its run ended, or the analyst's
// before an upgrade) is read where the two make it alike, and only
// there: headed by the build, every upgrade's first report read each
// block again (4.6 s at ten million samples).
const cellsProjection = 1

// madeBy is what a summary must say it was made by to be used: its
// format and projection; and MaxCells, past which a run's cells were
// folded into OtherResolvers (report --max-cells): a summary folded
// under one bound holds no resolver apart under a larger one.
func madeBy() string {
	return fmt.Sprintf("dns cells: encoding %d, projection %d, max-cells %d", summaryFormat, cellsProjection, MaxCells)
}

// summaryWire is a run's cells as a summary keeps them.
type summaryWire struct {
	Made                      string
	Skipped, Folded, Canceled int
	Groups                    []groupWire
}

type groupWire struct {
	Profile, Vantage, Where, Target, Transport, Condition string
	N, Answered                                           int
	Failed                                                map[string]int
	Dists                                                 [][]byte // in dists' order
}

// encode is cs as a summary keeps it.
func (cs *cells) encode() ([]byte, error) {
	w := summaryWire{Made: madeBy(), Skipped: cs.skipped, Folded: cs.folded, Canceled: cs.canceled}
	for _, g := range cs.order {
		x := groupWire{Profile: g.Profile, Vantage: g.Vantage, Where: g.Where, Target: g.Target, Transport: g.Transport,
			Condition: g.Condition, N: g.N, Answered: g.Answered, Failed: g.Failed}
		for _, d := range g.dists() {
			b, err := d.MarshalBinary()
			if err != nil {
				return nil, err
			}
			x.Dists = append(x.Dists, b)
		}
		w.Groups = append(w.Groups, x)
	}
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(&w); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// decodeCells is the cells a summary of run keeps; ok is false for a
// summary another build or format made.
func decodeCells(b []byte, run string, profiles map[string]testbed.Profile, answers measure.Answers) (cs *cells, ok bool, err error) {
	var w summaryWire
	if err := gob.NewDecoder(bytes.NewReader(b)).Decode(&w); err != nil {
		return nil, false, err
	}
	if w.Made != madeBy() {
		return nil, false, nil
	}
	cs = newCells(profiles, answers)
	cs.skipped, cs.folded, cs.canceled = w.Skipped, w.Folded, w.Canceled
	link := cs.links[run]
	for _, x := range w.Groups {
		g := cs.cell(cellKey{x.Profile, x.Vantage, x.Target, x.Transport, x.Condition})
		g.Where, g.N, g.Answered, g.Link = x.Where, x.N, x.Answered, link
		for k, n := range x.Failed {
			g.Failed[k] = n
		}
		ds := g.dists()
		if len(x.Dists) != len(ds) {
			return nil, false, fmt.Errorf("a cell of %d distributions, not %d", len(x.Dists), len(ds))
		}
		for i, d := range ds {
			if err := d.UnmarshalBinary(x.Dists[i]); err != nil {
				return nil, false, err
			}
		}
	}
	return cs, true, nil
}

// rows is how many rows cs was gathered from.
func (cs *cells) rows() int64 {
	n := cs.skipped + cs.canceled
	for _, g := range cs.order {
		n += g.N
	}
	return int64(n)
}

// summarized gathers the samples f selects run by run: from a run's
// summary where it holds what the run holds, else by reading the run,
// whose cells are then kept as its summary. A summary that cannot be
// kept (a store opened read-only, a writer holding the lock) is only
// not kept. Runs are read summaryBatch at a time, in one pass over
// their samples, so that a report holds their cells and the pool, not
// a cell set for every run of a large store.
// It says how many runs, and samples of them, it read whole.
func summarized(ctx context.Context, st *store.Store, f store.Filter, profiles map[string]testbed.Profile, answers measure.Answers) (all *cells, runs int, samples int64, err error) {
	keep, err := st.Keeps(ctx, f)
	if err != nil {
		return nil, 0, 0, err
	}
	kind := summaryKind(answers)
	held, err := st.RunSamplesOf(ctx, kind)
	if err != nil {
		return nil, 0, 0, err
	}
	sums, err := st.Summaries(ctx, kind)
	if err != nil {
		// A role that may read the samples and not the summaries
		// (granted them before schema 12) reads every sample, as then.
		sums = nil
	}
	stored, err := st.Runs(ctx)
	if err != nil {
		return nil, 0, 0, err
	}
	all = newCells(profiles, answers)
	if err := summarizedFiles(ctx, st, f, kind, profiles, answers, all); err != nil { // an attached dataset's: the older
		return nil, 0, 0, err
	}
	var unread []string
	for _, r := range stored {
		n, ok := held[r.ID]
		if !ok || !keep(r.ID) {
			continue
		}
		if m, ok := sums[r.ID]; ok && m.Samples <= n {
			// One that does not decode is read again and replaced, as
			// one another build made: the samples are the truth.
			cs, ok, err := decodeCells(m.Data, r.ID, profiles, answers)
			ok = ok && err == nil
			if ok && m.Samples < n {
				if ok, err = readOn(ctx, st, kind, r.ID, m, n, cs, profiles, answers); err != nil {
					return nil, 0, 0, err
				}
			}
			if ok {
				all.merge(cs)
				continue
			}
		}
		unread = append(unread, r.ID)
	}
	for batch := range slices.Chunk(unread, summaryBatch) {
		byRun, sealed, err := scanRuns(ctx, st, batch, held, profiles, answers)
		if err != nil {
			return nil, 0, 0, err
		}
		for _, id := range batch {
			cs := byRun[id]
			if cs == nil {
				continue // its samples were archived meanwhile
			}
			// Kept only if the run held, as it was read, what it holds
			// now: a sample added or archived meanwhile leaves it unkept.
			// A run read whole from its blocks was read as it held them
			// (their count and last number), whatever came after: a
			// later report reads on from there, and needs no second walk
			// of the run's index to know it.
			now := heldNow(ctx, st, sealed, id)
			if now.Samples == held[id] && cs.rows() == now.Samples {
				keepSummary(ctx, st, kind, id, now, cs)
			}
			all.merge(cs)
			runs, samples = runs+1, samples+cs.rows()
		}
	}
	return all, runs, samples, nil
}

func init() { experiment.KeepsCells(KeepCells) }

// KeepCells keeps the cells of the runs f selects that have no current
// summary, as a report's first reading would (experiment.KeepCells:
// when a run ends and at store seal), with NOERROR and NXDOMAIN taken
// as answers and MaxCells' bound, a report's defaults. It says how many
// runs, and samples of them, it read.
func KeepCells(ctx context.Context, st *store.Store, f store.Filter) (runs int, samples int64, err error) {
	profiles, err := StoredProfiles(ctx, st)
	if err != nil {
		return 0, 0, err
	}
	_, runs, samples, err = summarized(ctx, st, f, profiles, measure.DefaultAnswers())
	return runs, samples, err
}

// readOn brings the cells cs of run's summary m up to the n samples the
// run holds, reading only those numbered above the summary's last (a
// campaign's next round, a resumed run's rest), and keeps them as its
// summary. ok is false where those are not all it lacks (on PostgreSQL
// a lower number can commit late): the run is then read whole.
func readOn(ctx context.Context, st *store.Store, kind, run string, m store.Summary, n int64, cs *cells, profiles map[string]testbed.Profile, answers measure.Answers) (ok bool, err error) {
	if m.Last <= 0 {
		return false, nil
	}
	sealed := map[string]store.Held{}
	more, err := scanCellsOf(ctx, store.Filter{Runs: []string{run}, Superseded: true, After: m.Last, Held: map[string]int64{run: n}, Sealed: sealed}, profiles, answers, st.EachStoredTiming)
	if err != nil {
		return false, err
	}
	now := heldNow(ctx, st, sealed, run)
	if now.Samples != n || m.Samples+more.rows() != n {
		return false, nil
	}
	cs.merge(more)
	keepSummary(ctx, st, kind, run, now, cs)
	return true, nil
}

// heldNow is what a summary of run, just read, is of: where the scan
// read it from its blocks alone (whole, or on from a summary), what
// they hold, whatever came after; else what the run holds now, counted
// again (on PostgreSQL a scan of the table, 1.7 s a run at ten million
// samples), or a count of -1, which no run holds, where that fails.
func heldNow(ctx context.Context, st *store.Store, sealed map[string]store.Held, run string) store.Held {
	if h, ok := sealed[run]; ok {
		return h
	}
	h, err := st.RunHeld(ctx, run)
	if err != nil {
		return store.Held{Samples: -1}
	}
	return h
}

// keepSummary keeps cs as run's summary of what it holds, if it can.
func keepSummary(ctx context.Context, st *store.Store, kind, run string, held store.Held, cs *cells) {
	if b, err := cs.encode(); err == nil {
		_ = experiment.KeepSummary(ctx, st, kind, run, held, b) // else read again next time
	}
}

// cellsTable is the table of a dataset that holds each samples file's
// cells, made as the export wrote the file (store.DeriveSamples).
const cellsTable = "cells"

// cellsFormat is what a dataset's cells file must say it holds to be
// read for a report taking kind's answers: the kind and madeBy.
func cellsFormat(kind string) string { return kind + "; " + madeBy() }

// A dataset carries each samples file's cells, as a report taking the
// default answers makes them, with the runs' profiles of the store it
// was exported from (which the dataset's runs carry).
func init() {
	answers := measure.DefaultAnswers()
	store.DeriveSamples(store.SamplesDerived{Table: cellsTable, Format: cellsFormat(summaryKind(answers)),
		Begin: func(ctx context.Context, st *store.Store) (func(string) (func(*store.Row), func() ([]byte, error)), error) {
			profiles, err := StoredProfiles(ctx, st)
			if err != nil {
				return nil, err
			}
			base := newCells(profiles, answers)
			return func(string) (func(*store.Row), func() ([]byte, error)) {
				cs := base.empty()
				return cs.add, cs.encode
			}, nil
		}})
}

// summarizedFiles adds the cells of the attached dataset's samples files
// f keeps to all: a file's from the cells the dataset keeps beside it
// where they are of this report's kind and version, else from its
// summary where one is kept, else read and kept. A file is never
// rewritten and the manifest names it by its digest, so its summary is
// kept under that digest in a cache of the user's (CellCache): a
// dataset in object storage is not written to.
func summarizedFiles(ctx context.Context, st *store.Store, f store.Filter, kind string, profiles map[string]testbed.Profile, answers measure.Answers, all *cells) error {
	files, err := st.DatasetSamples(ctx, f)
	if err != nil || len(files) == 0 {
		return err
	}
	name := func(df store.DatasetFile) string { return experiment.SummaryFile(kind, "cells", df) }
	// merged merges the cells b holds of df, if they are of this report
	// and count its rows.
	merged := func(df store.DatasetFile, b []byte) bool {
		cs, ok, err := decodeCells(b, df.Run, profiles, answers)
		if err != nil || !ok || cs.rows() != df.Rows {
			return false
		}
		all.merge(cs)
		return true
	}
	format := cellsFormat(kind)
	var unread []store.DatasetFile
	for _, df := range files {
		b, ok, err := st.DatasetDerived(ctx, df, cellsTable, format)
		if err != nil {
			return err
		}
		if ok && merged(df, b) {
			continue
		}
		if p := name(df); p != "" {
			if b, err := os.ReadFile(p); err == nil && merged(df, b) {
				continue
			}
		}
		unread = append(unread, df)
	}
	for batch := range slices.Chunk(unread, summaryBatch) {
		parts := map[string][]*cells{} // by file, one per reader
		err := st.EachDatasetTiming(ctx, batch, func(df store.DatasetFile) func(*store.Row) error {
			cs := newCells(profiles, answers)
			parts[df.Path] = append(parts[df.Path], cs)
			return func(r *store.Row) error {
				cs.add(r)
				return nil
			}
		})
		if err != nil {
			return err
		}
		for _, df := range batch {
			cs := newCells(profiles, answers)
			for _, p := range parts[df.Path] {
				cs.merge(p)
			}
			if p := name(df); p != "" && cs.rows() == df.Rows {
				if b, err := cs.encode(); err == nil {
					_ = experiment.WriteFileAtomic(p, b) // not kept: read again next time
				}
			}
			all.merge(cs)
		}
	}
	return nil
}

// summaryBatch is how many runs one pass reads into cells of their own.
const summaryBatch = 16

// scanRuns reads the samples of runs into cells per run, on the store's
// readers at once, and says what it read of the runs it read whole from
// their blocks (store.Filter.Sealed).
func scanRuns(ctx context.Context, st *store.Store, runs []string, held map[string]int64, profiles map[string]testbed.Profile, answers measure.Answers) (map[string]*cells, map[string]store.Held, error) {
	var parts []map[string]*cells // one per reader of the store
	sealed := map[string]store.Held{}
	err := st.EachStoredTiming(ctx, store.Filter{Runs: runs, Superseded: true, Held: held, Sealed: sealed}, func() func(*store.Row) error {
		byRun := map[string]*cells{}
		parts = append(parts, byRun)
		var cs *cells // the last row's run's: a run's rows come together
		var run string
		return func(r *store.Row) error {
			if cs == nil || r.RunID != run {
				if cs, run = byRun[r.RunID], r.RunID; cs == nil {
					cs = newCells(profiles, answers)
					byRun[r.RunID] = cs
				}
			}
			cs.add(r)
			return nil
		}
	})
	if err != nil {
		return nil, nil, err
	}
	out := map[string]*cells{}
	for _, byRun := range parts {
		for id, cs := range byRun {
			if out[id] == nil {
				out[id] = newCells(profiles, answers)
			}
			out[id].merge(cs)
		}
	}
	return out, sealed, nil
}

// scanCells reads the samples f selects into cells, on the store's
// readers at once.
func scanCells(ctx context.Context, st *store.Store, f store.Filter, profiles map[string]testbed.Profile, answers measure.Answers) (*cells, error) {
	return scanCellsOf(ctx, f, profiles, answers, st.EachTiming)
}

// scanCellsOf is scanCells by each, EachTiming or EachStoredTiming.
func scanCellsOf(ctx context.Context, f store.Filter, profiles map[string]testbed.Profile, answers measure.Answers,
	each func(context.Context, store.Filter, func() func(*store.Row) error) error) (*cells, error) {
	var parts []*cells // one per reader of the store
	err := each(ctx, f, func() func(*store.Row) error {
		cs := newCells(profiles, answers)
		parts = append(parts, cs)
		return func(r *store.Row) error {
			cs.add(r)
			return nil
		}
	})
	if err != nil {
		return nil, err
	}
	all := newCells(profiles, answers)
	for _, cs := range parts {
		all.merge(cs)
	}
	return all, nil
}
