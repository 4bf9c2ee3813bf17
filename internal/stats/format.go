package stats

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// None is how a missing value prints.
const None = "–"

// F formats v with prec decimals, None for NaN, "∞" for infinities.
func F(v float64, prec int) string {
	switch {
	case math.IsNaN(v):
		return None
	case math.IsInf(v, 1):
		return "∞"
	case math.IsInf(v, -1):
		return "-∞"
	}
	return strconv.FormatFloat(v, 'f', prec, 64)
}

// CI formats the median's interval as "[lo, hi]", "[±∞]" when the
// sample is too small for one, None for no data.
func (s Summary) CI(prec int) string {
	switch {
	case s.N == 0:
		return None
	case !s.Bounded():
		return "[±∞]"
	}
	return "[" + F(s.Lo, prec) + ", " + F(s.Hi, prec) + "]"
}

// Cell is "median [lo, hi]" with prec decimals: a table cell that
// carries its interval; None for no data.
func (s Summary) Cell(prec int) string {
	if s.N == 0 {
		return None
	}
	return F(s.Median, prec) + " " + s.CI(prec)
}

// String is "median [lo, hi] n=N" with two decimals.
func (s Summary) String() string {
	if s.N == 0 {
		return None + " n=0"
	}
	return fmt.Sprintf("%s %s n=%d", F(s.Median, 2), s.CI(2), s.N)
}

// FormatDelta is the relative change as benchstat prints it: "+15.1 %"
// when significant, "~" when not, None when it cannot be computed. The
// p-value and the sizes follow in parentheses: "+15.1 % (p=0.008 n=10+10)".
func (c Comparison) FormatDelta() string {
	if math.IsNaN(c.P) || math.IsNaN(c.Delta) {
		return None
	}
	d := "~"
	switch {
	case c.Undecided():
		d = "?"
	case c.Significant():
		d = fmt.Sprintf("%+.1f %%", 100*c.Delta)
	}
	return fmt.Sprintf("%s (%s)", d, c.Test())
}

// Apart says whether the two differ: "yes (p=0.008 n=10+10)" when
// significant, "~ (p=0.400 n=5+5)" when not, None without data.
func (c Comparison) Apart() string {
	switch {
	case math.IsNaN(c.P):
		return None
	case c.Undecided():
		return "? (" + c.Test() + ")"
	case c.Significant():
		return "yes (" + c.Test() + ")"
	}
	return "~ (" + c.Test() + ")"
}

// Test is "p=0.008 n=10+10"; on binned values (cells past ExactLimit)
// "p≈0.008 n=5000+6000", and where the exact p could fall on either side
// of Alpha, says so: "p≈0.051 n=5000+6000, binned: too close to 0.05 to
// call".
func (c Comparison) Test() string {
	if !c.Approx {
		return fmt.Sprintf("p=%s n=%d+%d", formatP(c.P), c.Base.N, c.Other.N)
	}
	t := fmt.Sprintf("p≈%s n=%d+%d", formatP(c.P), c.Base.N, c.Other.N)
	if c.Undecided() {
		t += fmt.Sprintf(", binned: too close to %g to call", Alpha)
	}
	return t
}

// formatP prints p with three decimals, or as many more as keep it on
// its side of Alpha: p=0.0496 is significant, and printed "0.050" it
// would read as not.
func formatP(p float64) string {
	switch {
	case math.IsNaN(p):
		return None
	case p < 0.001:
		return "<0.001"
	}
	s := strconv.FormatFloat(p, 'f', 3, 64)
	for prec := 4; prec <= 6; prec++ {
		printed, _ := strconv.ParseFloat(s, 64)
		if (printed < Alpha) == (p < Alpha) {
			break
		}
		s = strconv.FormatFloat(p, 'f', prec, 64)
	}
	return s
}

// SignedCell is "+value [+lo, +hi]" with prec decimals and signs (a
// relative change), "[±∞]" for an interval the sample cannot bound;
// None for no data.
func (e QuantileEstimate) SignedCell(prec int) string {
	if e.N == 0 {
		return None
	}
	sf := func(v float64) string {
		switch f := F(v, prec); {
		case strings.Trim(f, "-0.") == "":
			return strings.TrimPrefix(f, "-") // no sign on a change that rounds to none
		case v > 0:
			return "+" + f
		default:
			return f
		}
	}
	if !e.Bounded() {
		return sf(e.Value) + " [±∞]"
	}
	return sf(e.Value) + " [" + sf(e.Lo) + ", " + sf(e.Hi) + "]"
}
