package bench_test

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/bench"
	"github.com/doxlab/doxlab/transport"
)

// TestWithPolicyInvertsPolicy: each connection policy the CLI names
// gives options that Policy names back, whatever options came in; an
// unknown one is refused.
func TestWithPolicyInvertsPolicy(t *testing.T) {
	for _, p := range []string{"reuse", "new", "resumed", "0rtt"} {
		opts, err := bench.WithPolicy(transport.Options{Reuse: true, ZeroRTT: true}, p)
		require.NoError(t, err)
		require.Equal(t, p, bench.Policy(opts))
	}
	_, err := bench.WithPolicy(transport.Options{}, "sometimes")
	require.EqualError(t, err, `unknown connection policy "sometimes" (want reuse, new, resumed, 0rtt)`)
}

// TestParseStepsAndRamp: steps are positive finite rates in the order
// given; a ramp doubles from its start to at most its limit.
func TestParseStepsAndRamp(t *testing.T) {
	r, err := bench.ParseSteps("100, 250,1e3")
	require.NoError(t, err)
	require.Equal(t, []float64{100, 250, 1000}, r)
	for _, bad := range []string{"", "100,", "0", "-5", "fast", "Inf", "NaN"} {
		_, err := bench.ParseSteps(bad)
		require.Error(t, err, bad)
	}
	r, err = bench.ParseRamp("100:1000")
	require.NoError(t, err)
	require.Equal(t, []float64{100, 200, 400, 800}, r)
	for _, bad := range []string{"100", "900:100", "0:10", "a:b", "1:Inf", "NaN:10", "1:NaN"} {
		_, err := bench.ParseRamp(bad)
		require.Error(t, err, bad)
	}
	require.False(t, math.IsInf(r[len(r)-1], 0))
	// Bounded before the first step: a rate past MaxRate failed the run
	// after every step before it, and 1e-300:1e308 was 2,017 steps.
	r, err = bench.ParseRamp("1:1e7")
	require.NoError(t, err)
	require.Len(t, r, 24, "one query a second to MaxRate")
	_, err = bench.ParseRamp("1e-6:1e6")
	require.EqualError(t, err, "1e-6:1e6 doubles in 40 steps, more than 32 (each runs the whole duration): start higher")
	_, err = bench.ParseRamp("1e-300:1e308")
	require.ErrorContains(t, err, "two rates from above 0 to 10000000")
	_, err = bench.ParseSteps("100,2e7")
	require.ErrorContains(t, err, `"2e7" is not a rate from above 0 to 10000000`)
	_, err = bench.ParseSteps(strings.Repeat("10,", 32) + "10")
	require.EqualError(t, err, "33 steps, more than 32: each runs the whole duration")
	// An infinite limit ends where doubling does (it appended +Inf
	// without end): 1024 rates from 1 to the largest float.
	r = bench.Doubling(1, math.Inf(1))
	require.Len(t, r, 1024)
	require.Equal(t, math.Ldexp(1, 1023), r[len(r)-1])
	require.Empty(t, bench.Doubling(math.NaN(), 10))
}

// TestCheckRefusesWhatNoRunCanMean: negative counts and durations (0
// means the default), a rate that is no number, and a bound no rate can
// hold or every rate holds are refused before anything is sent.
func TestCheckRefusesWhatNoRunCanMean(t *testing.T) {
	require.NoError(t, (&bench.Config{}).Check(), "every zero is a default")
	for msg, c := range map[string]bench.Config{
		"duration must not be negative":      {Duration: -time.Second},
		"timeout must not be negative":       {Options: transport.Options{Timeout: -1}},
		"workers must not be negative":       {Workers: -1},
		"conns must not be negative":         {Conns: -1},
		"max-in-flight must not be negative": {MaxInFlight: -1},
		"max-queries must not be negative":   {MaxQueries: -1},
		"rate must be a number, 0 or more":   {Rate: math.NaN()},
		"more than any server here can take": {Rate: math.Inf(1)},
		"duration over a day":                {Duration: 25 * time.Hour},
		"10001 connections is more than":     {Conns: 10001},
		"1000000 workers is more than":       {Workers: 1_000_000},
	} {
		require.ErrorContains(t, c.Check(), msg)
	}
	require.NoError(t, bench.Bound{P99: time.Millisecond}.Check(), "no loss allowed")
	require.NoError(t, bench.Bound{P99: time.Millisecond, MaxLoss: 0.5}.Check())
	for _, b := range []bench.Bound{{}, {P99: -time.Millisecond}, {P99: time.Millisecond, MaxLoss: 1}, {P99: time.Millisecond, MaxLoss: -0.1}, {P99: time.Millisecond, MaxLoss: math.NaN()}} {
		require.Error(t, b.Check(), "%+v", b)
	}
	_, _, err := bench.Steps(context.Background(), bench.Config{}, []float64{100}, bench.Bound{P99: time.Millisecond, MaxLoss: 2})
	require.ErrorContains(t, err, "not 2", "Steps checks its bound before sending")
}
