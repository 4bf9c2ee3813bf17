package figure

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func labels(lo, hi float64) []string {
	var out []string
	for _, t := range (DecadeTicks{}).Ticks(lo, hi) {
		if t.Label != "" {
			out = append(out, t.Label)
		}
	}
	return out
}

// TestDecadeTicksLabelEveryDecade: every decade in range is labelled;
// a narrow axis gets 2 and 5 too, never a lone number.
func TestDecadeTicksLabelEveryDecade(t *testing.T) {
	require.Equal(t, []string{"0.01", "0.1", "1", "10", "100"}, labels(0.01, 150))
	require.Equal(t, []string{"0.5", "1", "2", "5"}, labels(0.4, 6), "within one decade")
	require.Equal(t, []string{"20", "50"}, labels(11, 90), "no power of ten in range")
	require.Empty(t, labels(0, 10), "no log axis through 0")
	require.Len(t, (DecadeTicks{}).Ticks(1, 100), 19, "1-9, 10-90 and 100: minor ticks between")
}

func TestPlainTicksReadShort(t *testing.T) {
	var got []string
	for _, tk := range (PlainTicks{}).Ticks(0, 5200) {
		if tk.Label != "" {
			got = append(got, tk.Label)
		}
	}
	require.Equal(t, []string{"0", "2500", "5000"}, got)
}
