package testbed

import (
	"bytes"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// TestCheckTable: a profile's row lines up under the header, and the
// lines for GC pauses, queues and traces follow it only when there is
// something to say.
func TestCheckTable(t *testing.T) {
	var b bytes.Buffer
	WriteCheckHeader(&b)
	res := &CheckResult{ConfiguredRTT: 14 * time.Millisecond, ErrP50: 20 * time.Microsecond, UpRate: 10e6, UpAchieved: 9.9e6, EmulatorCPU: 0.1}
	res.WriteRows(&b, "fiber")
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	require.Len(t, lines, 2, "header and one row: no pause, queue or trace to report")
	require.Equal(t, utf8.RuneCountInString(lines[0]), utf8.RuneCountInString(lines[1]), "the row lines up under the header:\n%s", b.String())
	require.Contains(t, lines[1], "9.9/10.0  99%")
	res.GCPauseMax, res.GCPauses = time.Millisecond, 2
	res.UpQueue = &QueueStats{Discipline: "codel", Drops: 3}
	b.Reset()
	res.WriteRows(&b, "fiber")
	require.Contains(t, b.String(), "stopped 2 times for GC")
	require.Contains(t, b.String(), "up queue codel")
	b.Reset()
	WriteCheckLegend(&b, "voluntary")
	require.True(t, strings.HasPrefix(b.String(), "kernel preemption: voluntary"))
}

// TestCheckOptionsBounds: the defaults (zeros) and a check's ordinary
// sizes pass; a negative count or time, and one that would outlast the
// three minutes a running testbed gives a check, are refused before
// anything is measured.
func TestCheckOptionsBounds(t *testing.T) {
	for _, o := range []CheckOptions{{}, {Probes: 100, Throughput: 500 * time.Millisecond}, {Probes: MaxCheckProbes},
		{Probes: 600, Interval: 100 * time.Millisecond, Throughput: time.Minute}} {
		require.NoError(t, o.Check(), "%+v", o)
	}
	for _, c := range []struct {
		o    CheckOptions
		says string
	}{
		{CheckOptions{Probes: -1}, "-1 RTT probes"},
		{CheckOptions{Probes: MaxCheckProbes + 1}, "want 1 to 12000"},
		{CheckOptions{Interval: -time.Millisecond}, "probe interval -1ms"},
		{CheckOptions{Interval: 2 * time.Second}, "probe interval 2s"},
		{CheckOptions{Probes: 1000, Interval: 100 * time.Millisecond}, "take 1m40s"},
		{CheckOptions{Throughput: -time.Second}, "throughput test of -1s"},
		{CheckOptions{Throughput: time.Hour}, "throughput test of 1h0m0s"},
	} {
		require.ErrorContains(t, c.o.Check(), c.says, "%+v", c.o)
	}
}
