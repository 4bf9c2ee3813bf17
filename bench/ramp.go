package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Bound is what a step must hold to pass: its p99 latency (from the
// intended send time) at most P99, and at most MaxLoss of its queries
// unanswered.
type Bound struct {
	P99     time.Duration
	MaxLoss float64
}

// Check says what is wrong with a bound: a p99 of nothing would hold
// no rate, and a loss outside [0, 1) no rate or every one.
func (b Bound) Check() error {
	switch {
	case b.P99 <= 0:
		return errors.New("the p99 latency bound must be positive")
	case !(b.MaxLoss >= 0 && b.MaxLoss < 1): // NaN too
		return fmt.Errorf("the loss a rate may have is a share from 0 up to 1, not %v", b.MaxLoss)
	}
	return nil
}

// Step is one rate of a stepped run.
type Step struct {
	Summary
	Held   bool    // within the bound
	Result *Result `json:"-"`
}

// Steps runs c open loop at each rate in turn, each for c.Duration, and
// stops after the first rate that breaks the bound: resperf's question,
// the highest rate a server holds, answered with the latency counted
// from each query's intended time. It returns every step run and the
// highest rate held (0 if none).
func Steps(ctx context.Context, c Config, rates []float64, b Bound) ([]Step, float64, error) {
	if len(rates) == 0 {
		return nil, 0, errors.New("no rates to step through")
	}
	if err := b.Check(); err != nil {
		return nil, 0, err
	}
	var steps []Step
	held := 0.0
	for _, r := range rates {
		if r <= 0 {
			return steps, held, errors.New("step rates must be positive")
		}
		sc := c
		sc.Rate, sc.MaxQueries = r, 0
		res, err := Run(ctx, sc)
		if err != nil {
			return steps, held, err
		}
		s := res.Summarize()
		lost := 1.0
		if s.Sent > 0 {
			lost = float64(s.Sent-s.Answered) / float64(s.Sent)
		}
		st := Step{Summary: s, Result: res, Held: s.Answered > 0 && s.Latency.P["99"] <= float64(b.P99)/float64(time.Millisecond) && lost <= b.MaxLoss}
		steps = append(steps, st)
		if c.StepDone != nil {
			c.StepDone(st)
		}
		if !st.Held || ctx.Err() != nil {
			break
		}
		held = r
	}
	return steps, held, nil
}

// ParseSteps reads the rates a stepped benchmark runs through: a
// comma-separated list of positive rates.
func ParseSteps(list string) ([]float64, error) {
	var rates []float64
	for _, f := range strings.Split(list, ",") {
		r, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || !(r > 0) || math.IsInf(r, 0) {
			return nil, fmt.Errorf("%q is not a positive rate", f)
		}
		rates = append(rates, r)
	}
	return rates, nil
}

// ParseRamp reads START:LIMIT, the rates from START doubling up to LIMIT.
func ParseRamp(ramp string) ([]float64, error) {
	a, b, ok := strings.Cut(ramp, ":")
	start, err1 := strconv.ParseFloat(a, 64)
	limit, err2 := strconv.ParseFloat(b, 64)
	if !ok || err1 != nil || err2 != nil || !(start > 0) || !(limit >= start) || math.IsInf(limit, 0) {
		return nil, fmt.Errorf("want START:LIMIT, two positive rates, START first")
	}
	return Doubling(start, limit), nil
}

// Doubling is the rates from start doubling up to at most limit. An
// infinite limit ends where the doubling does, at the largest float.
func Doubling(start, limit float64) []float64 {
	var out []float64
	for r := start; r <= limit && start > 0 && !math.IsInf(r, 0); r *= 2 {
		out = append(out, r)
	}
	return out
}
