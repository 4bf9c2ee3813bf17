package experiment

import (
	"math"

	"github.com/doxlab/doxlab/internal/stats"
)

// Cell is one statistic of a results table as numbers, for scripts and
// CI jobs (doxlab report --json): the cell's grouping keys, the metric,
// how many samples it holds and how many the statistic is over, the
// median with its interval, and, where the table compares the cell with
// a baseline, the comparison. A number without data is null.
type Cell struct {
	Experiment string            `json:"experiment"`
	Table      string            `json:"table"`
	Keys       map[string]string `json:"keys"`
	Metric     string            `json:"metric"`
	Samples    int               `json:"samples"` // all of the cell's, failed ones included
	N          int               `json:"n"`       // those the statistic is over (answered, ok)
	// Failed counts the samples that failed by what they failed with
	// (an rcode not taken as an answer, a status), where known.
	Failed  map[string]int `json:"failed,omitempty"`
	Median  *float64       `json:"median"`
	CILo    *float64       `json:"ci_lo"` // the median's interval at CILevel; null when too few samples
	CIHi    *float64       `json:"ci_hi"`
	CILevel *float64       `json:"ci_level"`
	P25     *float64       `json:"p25"`
	P75     *float64       `json:"p75"`
	P95     *float64       `json:"p95"`
	// Against a baseline: the relative change of the medians, the
	// Mann-Whitney p-value, and whether it is significant at 0.05.
	Baseline    string   `json:"baseline,omitempty"`
	Delta       *float64 `json:"delta,omitempty"`
	P           *float64 `json:"p,omitempty"`
	Significant *bool    `json:"significant,omitempty"` // null where binned values cannot tell
	// Approx: P is from values binned to 0.1 % (a cell past 4,096
	// values); Significant is still the exact test's verdict, or null.
	Approx bool `json:"approx,omitempty"`
	Rank   int  `json:"rank,omitempty"`
}

// Num is v for JSON: nil for NaN and infinities.
func Num(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

// NewCell is a cell of table with keys, holding samples, summarized by s.
func NewCell(table string, keys map[string]string, metric string, samples int, s stats.Summary) Cell {
	c := Cell{Table: table, Keys: keys, Metric: metric, Samples: samples, N: s.N,
		Median: Num(s.Median), P25: Num(s.P25), P75: Num(s.P75), P95: Num(s.P95)}
	if s.Bounded() {
		c.CILo, c.CIHi, c.CILevel = Num(s.Lo), Num(s.Hi), Num(s.Level)
	}
	return c
}

// Versus adds the comparison with a baseline, named.
func (c Cell) Versus(baseline string, cmp stats.Comparison) Cell {
	if math.IsNaN(cmp.P) {
		return c
	}
	c.Baseline, c.Delta, c.P, c.Approx = baseline, Num(cmp.Delta), Num(cmp.P), cmp.Approx
	if !cmp.Undecided() { // no verdict an exact test could reverse
		sig := cmp.Significant()
		c.Significant = &sig
	}
	return c
}

// Tabler is Results that give their tables' statistics as cells.
type Tabler interface {
	Cells() []Cell
}
