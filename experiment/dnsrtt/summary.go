package dnsrtt

import (
	"bytes"
	"context"
	"encoding/gob"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/doxlab/doxlab/internal/buildinfo"
	"github.com/doxlab/doxlab/measure"
	"github.com/doxlab/doxlab/store"
	"github.com/doxlab/doxlab/testbed"
)

// A report of a year's campaign reads each run's samples once: the cells
// of a run are kept in the store as its summary (store.Summary) when the
// report first reads them, and a later report merges the run's kept
// cells instead of reading its samples again. Cells merge exactly (a
// Dist keeps its values whole up to stats.ExactLimit, and a sketch's bins
// add), so a report from summaries gives every statistic a scan gives.
// A summary is of the samples the run held when it was made (as many as
// it holds now: samples are only added, or archived with their run's
// summaries), of the answers taken (part of its kind) and of the doxlab that made it (kept
// in it): a run that holds other samples since, or a summary another
// build made, is read again, and its summary made anew.

// summaryKind is the summaries' kind for the rcodes taken as answers.
func summaryKind(a measure.Answers) string {
	return "dns-cells " + strings.Join(a.Rcodes(), ",")
}

// summaryFormat is the encoding's version, kept with the build's.
const summaryFormat = 1

// madeBy is what a summary must say it was made by to be used: the
// binary's build ID, which changes with any change to the code, where a
// development build's version may not.
func madeBy() string {
	return fmt.Sprintf("%d %s %s", summaryFormat, buildinfo.Version(), buildinfo.BinaryID())
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

// summaryPut bounds the wait for the store's lock when a summary is
// kept: a report beside a campaign that writes does not wait on it.
const summaryPut = 2 * time.Second

// summarized gathers the samples f selects run by run: from a run's
// summary where it holds what the run holds, else by reading the run,
// whose cells are then kept as its summary. A summary that cannot be
// kept (a store opened read-only, a writer holding the lock) is only
// not kept. Runs are read summaryBatch at a time, in one pass over
// their samples, so that a report holds their cells and the pool, not
// a cell set for every run of a large store.
func summarized(ctx context.Context, st *store.Store, f store.Filter, profiles map[string]testbed.Profile, answers measure.Answers) (*cells, error) {
	keep, err := st.Keeps(ctx, f)
	if err != nil {
		return nil, err
	}
	held, err := st.RunSamples(ctx)
	if err != nil {
		return nil, err
	}
	kind := summaryKind(answers)
	sums, err := st.Summaries(ctx, kind)
	if err != nil {
		return nil, err
	}
	runs, err := st.Runs(ctx)
	if err != nil {
		return nil, err
	}
	all := newCells(profiles, answers)
	var unread []string
	for _, r := range runs {
		n, ok := held[r.ID]
		if !ok || !keep(r.ID) {
			continue
		}
		if m, ok := sums[r.ID]; ok && m.Samples == n {
			// One that does not decode is read again and replaced, as
			// one another build made: the samples are the truth.
			if cs, ok, err := decodeCells(m.Data, r.ID, profiles, answers); err == nil && ok {
				all.merge(cs)
				continue
			}
		}
		unread = append(unread, r.ID)
	}
	for batch := range slices.Chunk(unread, summaryBatch) {
		byRun, err := scanRuns(ctx, st, batch, profiles, answers)
		if err != nil {
			return nil, err
		}
		for _, id := range batch {
			cs := byRun[id]
			if cs == nil {
				continue // its samples were archived meanwhile
			}
			// Kept only if the run held, as it was read, what it holds
			// now: a sample added or archived meanwhile leaves it unkept.
			if now, err := st.RunHeld(ctx, id); err == nil && now.Samples == held[id] && cs.rows() == now.Samples {
				if b, err := cs.encode(); err == nil {
					pctx, cancel := context.WithTimeout(ctx, summaryPut)
					_ = st.PutSummary(pctx, kind, id, store.Summary{Held: now, Data: b})
					cancel()
				}
			}
			all.merge(cs)
		}
	}
	return all, nil
}

// summaryBatch is how many runs one pass reads into cells of their own.
const summaryBatch = 16

// scanRuns reads the samples of runs into cells per run, on the store's
// readers at once.
func scanRuns(ctx context.Context, st *store.Store, runs []string, profiles map[string]testbed.Profile, answers measure.Answers) (map[string]*cells, error) {
	var parts []map[string]*cells // one per reader of the store
	err := st.EachTiming(ctx, store.Filter{Runs: runs, Superseded: true}, func() func(*store.Row) error {
		byRun := map[string]*cells{}
		parts = append(parts, byRun)
		return func(r *store.Row) error {
			cs := byRun[r.RunID]
			if cs == nil {
				cs = newCells(profiles, answers)
				byRun[r.RunID] = cs
			}
			cs.add(r)
			return nil
		}
	})
	if err != nil {
		return nil, err
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
	return out, nil
}

// scanCells reads the samples f selects into cells, on the store's
// readers at once.
func scanCells(ctx context.Context, st *store.Store, f store.Filter, profiles map[string]testbed.Profile, answers measure.Answers) (*cells, error) {
	var parts []*cells // one per reader of the store
	err := st.EachTiming(ctx, f, func() func(*store.Row) error {
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
