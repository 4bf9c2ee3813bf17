package web

import (
	"bytes"
	"context"
	"fmt"
	"slices"

	"github.com/doxlab/doxlab/experiment"
	"github.com/doxlab/doxlab/experiment/internal/pages"
	"github.com/doxlab/doxlab/internal/buildinfo"
	"github.com/doxlab/doxlab/store"
)

// A report of a year's page loads holds each as a pages.Point, and reads
// a run's loads once: their points are kept as the run's summary (as the
// DNS section keeps a run's cells) when a report first reads them, and a
// later report decodes the points, not the loads' JSON. A summary is of
// the loads its run held when it was made (loads are only added, or
// archived with their run's summaries) and of the binary that made it:
// a run that holds more loads since, or whose summary another build
// made, is read again and its summary made anew. An attached dataset's
// loads are read each time.

// pointsKind is the summaries' kind of a run's page loads.
const pointsKind = "web-load points"

// pointsBatch is how many runs are read in one pass.
const pointsBatch = 16

// pointsMadeBy is what a summary must say it was made by to be used: a
// change to the code may change what a load's point is.
func pointsMadeBy() []byte {
	return fmt.Appendf(nil, "%s %s\x00", buildinfo.Version(), buildinfo.BinaryID())
}

// encodePoints is a run's points as its summary keeps them.
func encodePoints(ps []pages.Point) ([]byte, error) {
	b, err := pages.EncodePoints(ps)
	if err != nil {
		return nil, err
	}
	return append(pointsMadeBy(), b...), nil
}

// decodePoints appends the points of a summary to dst; ok is false for
// one another build made, or that does not decode.
func decodePoints(dst []pages.Point, b []byte) ([]pages.Point, bool) {
	made, rest, found := bytes.Cut(b, []byte{0})
	if !found || !bytes.Equal(append(made, 0), pointsMadeBy()) {
		return dst, false
	}
	out, ok, err := pages.DecodePoints(dst, rest)
	return out, ok && err == nil
}

// labPoints are the points of the web runs' page loads f selects: a
// run's from its summary where it holds what the run holds, else read
// and kept as its summary; an attached dataset's read.
func labPoints(ctx context.Context, st *store.Store, f store.Filter) ([]pages.Point, error) {
	var out []pages.Point
	add := func(_ string, x *pages.Sample) error {
		out = append(out, pages.PointOf(x))
		return nil
	}
	err := experiment.DecodeEach(func(fn func(string, []byte) error) error { return st.ArchivedResults(ctx, f, Kind, fn) }, decodeAnalysed, add)
	if err != nil {
		return nil, err
	}
	keep, err := st.Keeps(ctx, f)
	if err != nil {
		return nil, err
	}
	held, err := st.RunResults(ctx, Kind)
	if err != nil {
		return nil, err
	}
	sums, err := st.Summaries(ctx, pointsKind)
	if err != nil {
		sums = nil // a role granted the results before schema 12 reads them
	}
	runs, err := st.Runs(ctx)
	if err != nil {
		return nil, err
	}
	var unread []string
	for _, r := range runs {
		n, ok := held[r.ID]
		if !ok || !keep(r.ID) {
			continue
		}
		if m, ok := sums[r.ID]; ok && m.Samples == n {
			if more, ok := decodePoints(out, m.Data); ok {
				out = more
				continue
			}
		}
		unread = append(unread, r.ID)
	}
	for batch := range slices.Chunk(unread, pointsBatch) {
		byRun := map[string][]pages.Point{}
		err := experiment.DecodeEach(func(fn func(string, []byte) error) error { return st.StoredResults(ctx, batch, Kind, fn) }, decodeAnalysed,
			func(id string, x *pages.Sample) error {
				byRun[id] = append(byRun[id], pages.PointOf(x))
				return nil
			})
		if err != nil {
			return nil, err
		}
		for _, id := range batch {
			ps := byRun[id]
			// Of as many loads as were read: a load added meanwhile
			// makes the count differ, and the run is read again.
			if b, err := encodePoints(ps); err == nil && len(ps) > 0 {
				experiment.KeepSummary(ctx, st, pointsKind, id, store.Held{Samples: int64(len(ps))}, b)
			}
			out = append(out, ps...)
		}
	}
	return out, nil
}

// decodeAnalysed is pages.DecodeForAnalysis of a load of run id.
func decodeAnalysed(id string, raw []byte) (*pages.Sample, error) {
	x, err := pages.DecodeForAnalysis(raw)
	if err != nil {
		return nil, fmt.Errorf("store: page load in run %s: %w", id, err)
	}
	return x, nil
}
