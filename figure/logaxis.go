package figure

import (
	"math"
	"strconv"

	"gonum.org/v1/plot"
)

// LogY puts p's y axis on a log scale with every decade labelled.
func LogY(p *plot.Plot) {
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = DecadeTicks{}
}

// logHeadroom widens a log y axis by a factor of 1.3 at each end, so
// that the highest and lowest lines are not drawn on the frame. A set
// saves each plot once, so it is widened once.
func logHeadroom(p *plot.Plot) {
	if _, ok := p.Y.Scale.(plot.LogScale); ok && p.Y.Min > 0 && p.Y.Max > p.Y.Min {
		p.Y.Min, p.Y.Max = p.Y.Min/1.3, p.Y.Max*1.3
	}
}

// DecadeTicks marks a log axis: every decade in range labelled, the
// values between unlabelled; where under three labels would show (an axis
// within one or two decades), 2 and 5 of each decade are labelled too.
// gonum's LogTicks labels powers of ten only, and leaves a narrow axis
// with one number on it.
type DecadeTicks struct{}

// Ticks implements plot.Ticker.
func (DecadeTicks) Ticks(lo, hi float64) []plot.Tick {
	if lo <= 0 || hi <= lo || math.IsInf(hi, 0) || math.IsNaN(lo) || math.IsNaN(hi) {
		return nil
	}
	first, last := int(math.Floor(math.Log10(lo))), int(math.Ceil(math.Log10(hi)))
	in := func(v float64) bool { return v >= lo*(1-1e-9) && v <= hi*(1+1e-9) }
	decades := 0
	for d := first; d <= last; d++ {
		if in(math.Pow(10, float64(d))) {
			decades++
		}
	}
	var ticks []plot.Tick
	for d := first; d <= last; d++ {
		base := math.Pow(10, float64(d))
		for m := 1; m <= 9; m++ {
			v := float64(m) * base
			if !in(v) {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || (decades < 3 && (m == 2 || m == 5)) {
				t.Label = strconv.FormatFloat(v, 'g', -1, 64)
			}
			ticks = append(ticks, t)
		}
	}
	return ticks
}

// PlainTicks are gonum's default ticks with their labels written as
// short as they read ("5000", not "5000.00", which gonum prints for an
// axis whose end is not round).
type PlainTicks struct{}

// Ticks implements plot.Ticker.
func (PlainTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = strconv.FormatFloat(ts[i].Value, 'g', 6, 64)
		}
	}
	return ts
}

// niceTicks are labelled ticks about n to an axis, at 1, 2 or 5 times a
// power of ten, with four unlabelled ones between; where gonum's default
// labels only 0 and 2.5 on an axis from 0 to 2.9, they label every half.
type niceTicks struct{ n int }

// Ticks implements plot.Ticker.
func (t niceTicks) Ticks(lo, hi float64) []plot.Tick {
	if hi <= lo || math.IsInf(hi-lo, 0) || math.IsNaN(hi-lo) {
		return nil
	}
	raw := (hi - lo) / float64(max(t.n, 2))
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := 10 * mag
	for _, m := range []float64{1, 2, 5} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	var ticks []plot.Tick
	minor := step / 5
	// Counted, not stepped until past hi: where minor is below the
	// floats' resolution at lo (an axis from 1e15 to 1e15+0.25), i+1 is
	// i, and the loop never ended. The axis holds at most n steps, five
	// ticks each.
	first := math.Ceil(lo / minor)
	if !(minor > 0) || math.IsInf(first, 0) {
		return nil // a span no float step divides (5e-324 wide)
	}
	for k := range 5*max(t.n, 2) + 6 {
		i := first + float64(k)
		v := i * minor
		if v > hi*(1+1e-12) {
			break
		}
		if math.Abs(v) < minor*1e-9 {
			v = 0
		}
		if len(ticks) > 0 && v <= ticks[len(ticks)-1].Value {
			continue // the same float again
		}
		tk := plot.Tick{Value: v}
		if math.Mod(math.Round(i), 5) == 0 {
			tk.Label = strconv.FormatFloat(v, 'f', max(0, -int(math.Floor(math.Log10(step)))), 64)
		}
		ticks = append(ticks, tk)
	}
	return ticks
}
