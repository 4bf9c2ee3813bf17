package experiment

import (
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestVerdicts: a value within its bounds holds (the bounds included),
// NaN has no data; several verdicts hold only together, and any without
// data leaves the whole without, even beside one that differs.
func TestVerdicts(t *testing.T) {
	require.Equal(t, []Verdict{Holds, Holds, Holds, Differs, Differs, NoData},
		[]Verdict{Within(1, 1, 2), Within(1.5, 1, 2), Within(2, 1, 2), Within(0.99, 1, 2), Within(math.Inf(1), 1, 2), Within(math.NaN(), 1, 2)})
	require.Equal(t, Holds, Both())
	require.Equal(t, Holds, Both(Holds, Holds))
	require.Equal(t, Differs, Both(Holds, Differs))
	require.Equal(t, NoData, Both(Differs, NoData, Holds))
	require.Equal(t, []string{"–", "1.23", "–", "42 %"}, []string{F2(math.NaN()), F2(1.234), Share(math.NaN()), Share(0.4249)})
}

// TestDesignDiff: every flag that changed, was dropped or is new, in the
// order of the names, each as "flag: old → new".
func TestDesignDiff(t *testing.T) {
	stored := map[string]string{"repeat": "20", "profiles": "fiber,dsl", "quick": "false"}
	now := map[string]string{"repeat": "3", "profiles": "fiber,dsl", "net": "loopback"}
	require.Equal(t, []string{`quick: "false" → ""`, `repeat: "20" → "3"`, `net: (unset) → "loopback"`}, DesignDiff(stored, now))
	require.Empty(t, DesignDiff(stored, stored))
	require.NoError(t, designChanged(nil, now), "a run that recorded no design resumes with any")
	err := designChanged(stored, now)
	require.ErrorIs(t, err, ErrDesignChanged)
	require.Contains(t, err.Error(), `repeat: "20" → "3"`)
}

// TestExperimentID: a new experiment's ID is its prefix and a new run
// ID, said with the command that resumes it (dns-rtt's by its command's
// name); a resumed one must be of the same experiment.
func TestExperimentID(t *testing.T) {
	var log strings.Builder
	e := &Env{Store: "s.db", Log: &log}
	id, err := e.ExperimentID("dnsrtt")
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(id, "dnsrtt-"), id)
	require.Contains(t, log.String(), "continue it with: doxlab experiment dns-rtt --resume "+id+" --store s.db")

	e.Resume = "hol-20261129T120000Z-0123456789abcdef"
	_, err = e.ExperimentID("dnsrtt")
	require.EqualError(t, err, `experiment "hol-20261129T120000Z-0123456789abcdef" is not a dns-rtt experiment`)
	id, err = e.ExperimentID("hol")
	require.NoError(t, err)
	require.Equal(t, e.Resume, id)
	require.Contains(t, log.String(), "hol: continuing experiment "+id)
}
