package experiment

import (
	"fmt"
	"math"
)

// Verdict is whether a paper's claim holds in a store's data.
type Verdict string

// The verdicts.
const (
	Holds   Verdict = "holds"
	Differs Verdict = "differs"
	NoData  Verdict = "no data" // the store lacks what the claim needs
)

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
