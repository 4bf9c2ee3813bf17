package bench

import (
	"context"
	"errors"
	"time"
)

// Bound is what a step must hold to pass: its p99 latency (from the
// intended send time) at most P99, and at most MaxLoss of its queries
// unanswered.
type Bound struct {
	P99     time.Duration
	MaxLoss float64
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
	if b.P99 <= 0 {
		return nil, 0, errors.New("a latency bound is needed")
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

// Doubling is the rates from start doubling up to at most limit.
func Doubling(start, limit float64) []float64 {
	var out []float64
	for r := start; r <= limit && start > 0; r *= 2 {
		out = append(out, r)
	}
	return out
}
