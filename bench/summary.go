package bench

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/doxlab/doxlab/internal/stats"
)

// Percentiles are the ones every summary gives.
var Percentiles = []float64{50, 90, 99, 99.9, 99.99}

// Dist is a distribution's summary in ms.
type Dist struct {
	N    int64              `json:"n"`
	Mean float64            `json:"mean_ms"`
	Max  float64            `json:"max_ms"`
	P    map[string]float64 `json:"percentiles_ms"` // "50", "99.9", ...
	// Exact: the percentiles come from every sample (internal/stats,
	// type 7, as numpy computes them), where the run kept them; else
	// from an HDR histogram, to 3 significant digits.
	Exact bool `json:"exact"`
}

// exactDist summarizes kept values (ms) exactly.
func exactDist(v []float64) Dist {
	s := stats.Sorted(v)
	d := Dist{N: int64(len(s)), P: map[string]float64{}, Exact: true}
	if len(s) == 0 {
		return d
	}
	d.Mean, d.Max = stats.Mean(s), s[len(s)-1]
	for _, p := range Percentiles {
		d.P[fmt.Sprint(p)] = stats.Quantile(s, p/100)
	}
	return d
}

func dist(h *hdrhistogram.Histogram) Dist {
	d := Dist{N: h.TotalCount(), P: map[string]float64{}}
	if d.N == 0 {
		return d
	}
	d.Mean, d.Max = h.Mean()/1000, float64(h.Max())/1000
	for _, p := range Percentiles {
		d.P[fmt.Sprint(p)] = float64(h.ValueAtQuantile(p)) / 1000
	}
	return d
}

// Summary is a Result for JSON and tables.
type Summary struct {
	URL           string         `json:"url"`
	Mode          string         `json:"mode"` // open-loop or closed-loop
	IntendedQPS   float64        `json:"intended_qps,omitempty"`
	AchievedQPS   float64        `json:"achieved_qps"`
	AnsweredQPS   float64        `json:"answered_qps"`
	Sent          int            `json:"sent"`
	Unsent        int            `json:"unsent,omitempty"` // open loop: due before the end, never sent (Result.Unsent)
	Answered      int            `json:"answered"`
	Errors        map[string]int `json:"errors"` // by rcode (an answer not taken) or status
	Rcodes        map[string]int `json:"rcodes"` // every answer by its rcode (dnsperf's "Response codes")
	OKRcodes      []string       `json:"ok_rcodes"`
	ConnErrors    map[string]int `json:"conn_errors,omitempty"` // connections lost mid-run, by why
	Reconnects    int            `json:"reconnects,omitempty"`  // connections opened to replace them
	ElapsedS      float64        `json:"elapsed_s"`
	CPUPerQueryUs float64        `json:"cpu_per_query_us"` // this process, user and system
	Latency       Dist           `json:"latency"`          // open loop: from the intended send time
	Service       Dist           `json:"service"`          // from the call
	Handshake     Dist           `json:"handshake"`
	MaxInFlight   int            `json:"max_in_flight"`
}

// Summarize gives the result's figures.
func (r *Result) Summarize() Summary {
	s := Summary{URL: r.URL, Mode: "closed-loop", AchievedQPS: r.Achieved, AnsweredQPS: r.Answered, Sent: r.Sent, Unsent: r.Unsent, Answered: r.OK,
		Errors: map[string]int{}, ElapsedS: r.Elapsed.Seconds(), Latency: dist(r.Latency), Service: dist(r.Service),
		Handshake: dist(r.Handshake), MaxInFlight: r.MaxInFlightObserved}
	if r.OpenLoop {
		s.Mode, s.IntendedQPS = "open-loop", r.Intended
	}
	if len(r.Samples) > 0 {
		// Every query was kept: exact figures, the ones the export
		// gives pandas and DuckDB.
		var lat, svc, hs []float64
		ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
		for _, x := range r.Samples {
			if r.answers.Outcome(x.Status, x.Rcode) != "" {
				continue
			}
			lat, svc = append(lat, ms(x.Latency)), append(svc, ms(x.Service))
			if x.Handshake > 0 {
				hs = append(hs, ms(x.Handshake))
			}
		}
		s.Latency, s.Service = exactDist(lat), exactDist(svc)
		if len(hs) > 0 { // the lean path keeps no handshake per query
			s.Handshake = exactDist(hs)
		}
	}
	maps.Copy(s.Errors, r.Errors)
	s.Rcodes, s.OKRcodes = maps.Clone(r.Rcodes), r.OKRcodes
	s.ConnErrors, s.Reconnects = r.ConnErrors, r.Reconnects
	if r.Sent > 0 {
		s.CPUPerQueryUs = float64((r.CPUUser + r.CPUSys).Microseconds()) / float64(r.Sent)
	}
	return s
}

// shares are counts with their share of the total, the most frequent
// first, as dnsperf prints its response codes: "NOERROR 990 (99.00%)".
func shares(counts map[string]int) string {
	total := 0
	for _, n := range counts {
		total += n
	}
	keys := slices.Sorted(maps.Keys(counts))
	slices.SortStableFunc(keys, func(a, b string) int { return cmp.Compare(counts[b], counts[a]) })
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d (%.2f%%)", k, counts[k], 100*float64(counts[k])/float64(total))
	}
	return strings.Join(parts, ", ")
}

// Write writes the summary as text.
func (s Summary) Write(w io.Writer) {
	fmt.Fprintf(w, "%s, %s: %d sent, %d answered in %.1f s", s.URL, s.Mode, s.Sent, s.Answered, s.ElapsedS)
	if s.Mode == "open-loop" {
		fmt.Fprintf(w, "; rate intended %.0f/s, achieved %.0f/s", s.IntendedQPS, s.AchievedQPS)
		if s.Unsent > 0 {
			fmt.Fprintf(w, " (%d due not sent: no room in flight, or no connection, until the end)", s.Unsent)
		}
	} else {
		fmt.Fprintf(w, "; rate %.0f/s", s.AchievedQPS)
	}
	fmt.Fprintf(w, ", answers %.0f/s; client CPU %.1f µs per query\n", s.AnsweredQPS, s.CPUPerQueryUs)
	if len(s.Rcodes) > 0 {
		fmt.Fprintf(w, "response codes: %s\n", shares(s.Rcodes))
	}
	if len(s.Errors) > 0 {
		fmt.Fprintf(w, "failed (not %s): %s\n", strings.Join(s.OKRcodes, " or "), shares(s.Errors))
	}
	for _, k := range slices.Sorted(maps.Keys(s.ConnErrors)) {
		fmt.Fprintf(w, "connections lost: %d × %s\n", s.ConnErrors[k], k)
	}
	if s.Reconnects > 0 {
		fmt.Fprintf(w, "reconnected %d times; what a lost connection had in flight counts as closed\n", s.Reconnects)
	}
	fmt.Fprintf(w, "%-10s %8s %9s", "ms", "n", "mean")
	for _, p := range Percentiles {
		fmt.Fprintf(w, " %9s", fmt.Sprintf("p%v", p))
	}
	fmt.Fprintf(w, " %9s\n", "max")
	for _, row := range []struct {
		name string
		d    Dist
	}{{"latency", s.Latency}, {"service", s.Service}, {"handshake", s.Handshake}} {
		if row.d.N == 0 {
			continue
		}
		fmt.Fprintf(w, "%-10s %8d %9.3f", row.name, row.d.N, row.d.Mean)
		for _, p := range Percentiles {
			fmt.Fprintf(w, " %9.3f", row.d.P[fmt.Sprint(p)])
		}
		fmt.Fprintf(w, " %9.3f\n", row.d.Max)
	}
	if s.Mode == "open-loop" {
		fmt.Fprintln(w, "latency counts from each query's intended send time: a stall shows as latency, not as a lower rate")
	}
}
