package campaign

import (
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/blocklist"
	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/doxlab/doxlab/measure"
)

// TestPlanOfACampaign: what a plan records, read on the planning
// machine, and the tasks it queues: each task once per round, labelled
// with it, round k due Every × (k-1) after planning; the targets file's
// notes; the CA whole; the opt-outs' prefixes and allow_special, which
// every worker's transport applies to each address it would contact.
func TestPlanOfACampaign(t *testing.T) {
	dir := t.TempDir()
	targets := filepath.Join(dir, "targets.txt")
	require.NoError(t, os.WriteFile(targets, []byte("10.200.0.1 # doq QUIC v1, Retry\n10.200.0.2\n"), 0o644))
	block := filepath.Join(dir, "opt-out.txt")
	require.NoError(t, os.WriteFile(block, []byte("# asked not to be measured\n10.200.0.128/25\n"), 0o644))
	ca := testutil.NewCA(t, "resolver.test")
	c := &measure.Campaign{Name: "rounds", Targets: []string{"10.200.0.3"}, TargetsFile: targets, Transports: []string{"udp", "doq"},
		Conditions: []string{"fresh"}, Repeat: 2, Rounds: 3, Every: time.Hour, OptOut: []string{block},
		AllowSpecial: []string{"10.200.0.0/24"}, TLS: measure.CampaignTLS{CA: ca.CAFile}}
	p, tasks, err := NewPlan(c)
	require.NoError(t, err)
	const perRound = 3 * 2 * 2 // targets × transports × repeat
	require.Len(t, tasks, 3*perRound)
	require.Equal(t, len(tasks), p.Here)
	for r := 1; r <= 3; r++ {
		round := tasks[(r-1)*perRound : r*perRound]
		for i, task := range round {
			require.Equal(t, r, task.Round)
			want := tasks[i]
			want.Round = r
			require.Equal(t, want, task, "round %d measures what round 1 does", r)
		}
	}
	start := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	require.Equal(t, start, p.due(start, 1))
	require.Equal(t, start.Add(2*time.Hour), p.due(start, 3))
	require.Equal(t, start, p.due(start, 0), "no round before the first")

	require.Equal(t, map[string]string{"10.200.0.1": "doq QUIC v1, Retry"}, p.Notes)
	pem, err := os.ReadFile(ca.CAFile)
	require.NoError(t, err)
	require.Equal(t, string(pem), p.TLS.CAPEM, "the CA kept whole, not its path on this machine")
	require.Equal(t, []string{"10.200.0.128/25"}, p.Blocked)

	s, err := p.spec()
	require.NoError(t, err)
	require.NotNil(t, s.Options.RootCAs)
	require.ErrorIs(t, s.Options.Refuse(netip.MustParseAddr("10.200.0.200")), blocklist.ErrBlocked, "opted out, allow_special or not")
	require.ErrorIs(t, s.Options.Refuse(netip.MustParseAddr("169.254.169.254")), blocklist.ErrSpecial, "the cloud's metadata")
	require.ErrorIs(t, s.Options.Refuse(netip.MustParseAddr("192.0.2.1")), blocklist.ErrSpecial, "documentation: not allowed")
	require.NoError(t, s.Options.Refuse(netip.MustParseAddr("10.200.0.9")), "allow_special")
	require.NoError(t, s.Options.Refuse(netip.MustParseAddr("9.9.9.9")))
}

// TestPlanRecordsTheDefaults: a plan records the transports, conditions
// and repetitions its tasks were made with, each the campaign left out,
// so that the run's spec says what was measured. With transports given,
// it recorded no conditions and a repeat of 0 where its tasks took three
// conditions once each.
func TestPlanRecordsTheDefaults(t *testing.T) {
	p, tasks, err := NewPlan(&measure.Campaign{Targets: []string{"9.9.9.9"}, Transports: []string{"doq"}})
	require.NoError(t, err)
	require.Equal(t, []string{"doq"}, p.Transports)
	require.Equal(t, []string{"fresh", "resumed", "0rtt"}, p.Conditions)
	require.Equal(t, 1, p.Repeat)
	require.Len(t, tasks, 3)

	p, tasks, err = NewPlan(&measure.Campaign{Targets: []string{"9.9.9.9"}, Conditions: []string{"0rtt"}, Repeat: 4})
	require.NoError(t, err)
	require.NotEmpty(t, p.Transports, "the default transports")
	require.Equal(t, []string{"0rtt"}, p.Conditions)
	require.Equal(t, 4, p.Repeat)

	// The tasks a worker accepts are those of the plan as stored: the
	// same, defaults and all (in another order: a plan without a seed
	// shuffles its tasks each time).
	again, err := p.tasks([]string{"9.9.9.9"})
	require.NoError(t, err)
	require.ElementsMatch(t, tasks, again)

	_, _, err = NewPlan(&measure.Campaign{Name: "none"})
	require.EqualError(t, err, "no targets")
}
