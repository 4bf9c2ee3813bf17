package web

import (
	"context"
	"fmt"
	"reflect"

	"github.com/doxlab/doxlab/campaign"
	"github.com/doxlab/doxlab/experiment"
	"github.com/doxlab/doxlab/experiment/internal/pages"
	"github.com/doxlab/doxlab/store"
)

// Page loads are written with briefs (store.Brief) that leave out what
// their analysis skips, found from the types it decodes them into: a
// report's first read of a year's loads decodes a fifth of their JSON.
func init() {
	store.Brief(Kind, pages.SkippedPaths(pages.AnalysedType)...)
	store.Brief(campaign.PageLoads, pages.SkippedPaths(reflect.TypeFor[wildAnalysedLoad]())...)
}

// And their points are kept as a run ends (a campaign's by store seal):
// a first report decodes a hundred octets a load, not its JSON.
func init() {
	experiment.KeepsPoints(labPoints)
	experiment.KeepsPoints(wildPoints)
}

// labPoints reads the web runs' page loads as the analysis reads them,
// each run's kept as its summary (experiment.Points).
var labPoints = experiment.Points[pages.Point]{
	Kind:    Kind,
	Summary: "web-load points",
	Point: func(run string, raw []byte) (pages.Point, error) {
		x, err := decodeAnalysed(run, raw)
		if err != nil {
			return pages.Point{}, err
		}
		return pages.PointOf(x), nil
	},
	Encode:   pages.EncodePoints,
	Decode:   pages.DecodePoints,
	Portable: pages.PointsPortable,
}

// readLab is the points of the web runs' page loads f selects.
func readLab(ctx context.Context, st *store.Store, f store.Filter) ([]pages.Point, error) {
	return labPoints.Read(ctx, st, f)
}

// decodeAnalysed is pages.DecodeForAnalysis of a load of run id.
func decodeAnalysed(id string, raw []byte) (*pages.Sample, error) {
	x, err := pages.DecodeForAnalysis(raw)
	if err != nil {
		return nil, fmt.Errorf("store: page load in run %s: %w", id, err)
	}
	return x, nil
}
