package bench_test

import (
	"math"
	"testing"

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
}
