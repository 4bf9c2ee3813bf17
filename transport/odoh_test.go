package transport

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestServerTiming: the proxy's word on the target's time is read as a
// browser reads Server-Timing, and only a finite, non-negative duration
// is taken: a hostile proxy's NaN or Inf would make the record one JSON
// cannot hold (its sample lost at the store), a negative one a time no
// exchange takes. What is not taken is absent (0), as an absent header.
func TestServerTiming(t *testing.T) {
	for _, c := range []struct {
		header string
		want   float64
	}{
		{"target;dur=12.5", 12.5},
		{"cache;desc=hit, target;desc=\"relay\";dur=4", 4},
		{" target ; dur=0.25 ", 0.25},
		{"targets;dur=3", 0},
		{"target", 0},
		{"target;dur=", 0},
		{"target;dur=fast", 0},
		{"target;dur=NaN", 0},
		{"target;dur=Inf", 0},
		{"target;dur=-Inf", 0},
		{"target;dur=1e400", 0},
		{"target;dur=-3", 0},
		{"", 0},
	} {
		got := serverTiming(c.header, "target")
		require.Equal(t, c.want, got, "%q", c.header)
		_, err := json.Marshal(ODoHFacts{TargetMs: got})
		require.NoError(t, err, "%q", c.header)
	}
}
