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
// due unanswered (never sent, or sent and not answered).
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
		// A query due and never sent (the window full until the step's
		// end) is one the server did not take at this rate: lost, as an
		// unanswered one is. It has no latency to raise the p99.
		lost := 1.0
		if due := s.Sent + s.Unsent; due > 0 {
			lost = float64(due-s.Answered) / float64(due)
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

// MaxSteps bounds a stepped run: each step runs the whole duration, and
// doubling from one query a second passes MaxRate in 24.
const MaxSteps = 32

// ParseSteps reads the rates a stepped benchmark runs through: a
// comma-separated list of positive rates up to MaxRate, at most
// MaxSteps of them, checked before the first step runs (a rate past
// MaxRate once failed the run after every step before it).
func ParseSteps(list string) ([]float64, error) {
	var rates []float64
	for _, f := range strings.Split(list, ",") {
		r, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || !(r > 0) || r > MaxRate {
			return nil, fmt.Errorf("%q is not a rate from above 0 to %d", f, MaxRate)
		}
		rates = append(rates, r)
	}
	if len(rates) > MaxSteps {
		return nil, fmt.Errorf("%d steps, more than %d: each runs the whole duration", len(rates), MaxSteps)
	}
	return rates, nil
}

// ParseRamp reads START:LIMIT, the rates from START doubling up to
// LIMIT, at most MaxRate and MaxSteps: 1e-300:1e308 was 2,017 steps,
// the first thousand sending one query each, for hours.
func ParseRamp(ramp string) ([]float64, error) {
	a, b, ok := strings.Cut(ramp, ":")
	start, err1 := strconv.ParseFloat(a, 64)
	limit, err2 := strconv.ParseFloat(b, 64)
	if !ok || err1 != nil || err2 != nil || !(start > 0) || !(limit >= start) || limit > MaxRate {
		return nil, fmt.Errorf("want START:LIMIT, two rates from above 0 to %d, START first", MaxRate)
	}
	rates := Doubling(start, limit)
	if len(rates) > MaxSteps {
		return nil, fmt.Errorf("%s doubles in %d steps, more than %d (each runs the whole duration): start higher", ramp, len(rates), MaxSteps)
	}
	return rates, nil
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
