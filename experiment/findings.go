package experiment

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/doxlab/doxlab/internal/stats"
)

// Verdict is whether a paper's claim holds in a store's data.
type Verdict string

// The verdicts.
const (
	Holds        Verdict = "holds"
	Differs      Verdict = "differs"
	NoData       Verdict = "no data"      // the store lacks what the claim needs
	Inconclusive Verdict = "inconclusive" // the data cannot carry a verdict (Earn says why)
)

// MinSamples is the fewest samples a cell behind a verdict must have: with
// fewer, no median has a 95 % interval and Mann-Whitney cannot reach
// p < 0.05 (it needs 4 a side), so a verdict would rest on noise.
const MinSamples = 5

// Finding is one of a paper's headline claims checked against a store:
// what the paper measured beside what this store holds, and whether the
// claim holds. The report states them first.
type Finding struct {
	Claim   string  // "DoQ's DNS exchange is one round trip shorter than DoH's"
	Source  string  // "cross-layer paper §IV-B, Fig. 5"
	Paper   string  // the paper's figures: "DoQ 2.50, DoH 3.43 RTT (medians)"
	Here    string  // this store's, the same way
	Verdict Verdict // Holds, Differs or NoData
	Why     string  // the test the verdict applied, or what is missing
	Figure  string  // the anchor of the figure or table that shows it

	// What the verdict rests on, for Earn: the fewest samples in a cell
	// behind it; whether the claim is in round trips of an emulated link
	// (no verdict on loopback, where there is no RTT to speak of) and
	// whether its data had one; for a claim of a difference, the test.
	N          int
	InRTTs     bool
	OnLoopback bool
	// Timed says the claim is about time (a load's, a lookup's), in RTTs
	// or not: no verdict on runs of the loopback net, where no link was
	// emulated (Evidence.Loopback).
	Timed bool
	Test  *stats.Comparison
	// Reasons say why the verdict is Inconclusive (set by Earn), and
	// Reason is them in one sentence.
	Reasons []string
	Reason  string
}

// Evidence is what a verdict needs beyond the cells: the link checks
// of the runs behind the findings that failed.
type Evidence struct {
	FailedChecks []string // "run e1-fiber (fiber, before): RTT error p99 1.4 ms"
	// Loopback are the runs measured on the loopback net, by their link
	// checks.
	Loopback []string
}

// Earn keeps a finding's verdict only where the data earns one: every
// cell has MinSamples, a claimed difference is significant, every link
// check of the runs held, and a claim in RTTs, or about time at all, was
// measured on an emulated link. Otherwise the verdict is Inconclusive, with the reason.
func Earn(fs []Finding, ev Evidence) []Finding {
	out := slices.Clone(fs)
	for i := range out {
		f := &out[i]
		if f.Verdict == NoData {
			continue
		}
		var why []string
		if len(ev.FailedChecks) > 0 {
			why = append(why, "a link check of these runs failed ("+strings.Join(ev.FailedChecks, "; ")+")")
		}
		if f.InRTTs && f.OnLoopback {
			why = append(why, "measured on loopback, where a claim in round trips has no RTT to rest on")
		} else if (f.InRTTs || f.Timed) && len(ev.Loopback) > 0 {
			why = append(why, fmt.Sprintf("%d of these runs were on the loopback net, where no link was emulated: a claim about time has nothing to rest on", len(ev.Loopback)))
		}
		if f.N < MinSamples {
			why = append(why, fmt.Sprintf("too few samples (n=%d, at least %d a cell)", f.N, MinSamples))
		}
		switch {
		case f.Test != nil && f.Test.Undecided():
			why = append(why, "the test cannot tell on values binned to 0.1 % ("+f.Test.Test()+")")
		case f.Test != nil && !f.Test.Significant():
			why = append(why, "the difference is not significant ("+f.Test.Test()+")")
		}
		if len(why) > 0 {
			f.Verdict, f.Reasons, f.Reason = Inconclusive, why, strings.Join(why, "; ")
		}
	}
	return out
}

// WriteFindings writes findings as text, a line each, with the reasons
// of an inconclusive one; a reason shared by several is stated once,
// after them, and each names it by its mark.
func WriteFindings(w io.Writer, fs []Finding) error {
	shared, own := SharedReasons(fs)
	for i, f := range fs {
		line := fmt.Sprintf("%s: %s (%s)", f.Verdict, f.Claim, f.Here)
		var parts []string
		for _, s := range shared {
			if slices.Contains(f.Reasons, s.Reason) {
				parts = append(parts, s.Mark)
			}
		}
		parts = append(parts, own[i]...)
		if len(parts) > 0 {
			line += ": " + strings.Join(parts, "; ")
		}
		if _, err := fmt.Fprintln(w, line); err != nil {
			return err
		}
	}
	for _, s := range shared {
		if _, err := fmt.Fprintf(w, "%s %s (%d findings)\n", s.Mark, s.Reason, s.N); err != nil {
			return err
		}
	}
	return nil
}

// Shared is a reason several findings are inconclusive for, stated once.
type Shared struct {
	Mark   string // "[1]"
	Reason string
	N      int // findings it holds back
}

// SharedReasons are the reasons two findings or more are inconclusive
// for, each marked, in the order first given; and each finding's other
// reasons.
func SharedReasons(fs []Finding) ([]Shared, [][]string) {
	count := map[string]int{}
	var order []string
	for _, f := range fs {
		for _, r := range f.Reasons {
			if count[r] == 0 {
				order = append(order, r)
			}
			count[r]++
		}
	}
	var shared []Shared
	for _, r := range order {
		if count[r] > 1 {
			shared = append(shared, Shared{Mark: fmt.Sprintf("[%d]", len(shared)+1), Reason: r, N: count[r]})
		}
	}
	own := make([][]string, len(fs))
	for i, f := range fs {
		for _, r := range f.Reasons {
			if count[r] == 1 {
				own[i] = append(own[i], r)
			}
		}
	}
	return shared, own
}

// Finder is Results that can check their paper's claims.
type Finder interface {
	Findings() []Finding
}

// Within is Holds when v is in [lo, hi], Differs otherwise, NoData for
// NaN.
func Within(v, lo, hi float64) Verdict {
	switch {
	case math.IsNaN(v):
		return NoData
	case v >= lo && v <= hi:
		return Holds
	}
	return Differs
}

// Both is Holds when every verdict holds, NoData if any lacks data.
func Both(vs ...Verdict) Verdict {
	out := Holds
	for _, v := range vs {
		switch v {
		case NoData:
			return NoData
		case Differs:
			out = Differs
		}
	}
	return out
}

// F2 formats a value with two decimals, "–" for NaN.
func F2(v float64) string {
	if math.IsNaN(v) {
		return "–"
	}
	return fmt.Sprintf("%.2f", v)
}

// Share formats a fraction as a percentage, "–" for NaN.
func Share(v float64) string {
	if math.IsNaN(v) {
		return "–"
	}
	return fmt.Sprintf("%.0f %%", 100*v)
}
