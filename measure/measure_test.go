package measure_test

import (
	"context"
	"encoding/json"
	"math"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/measure"
	"github.com/doxlab/doxlab/server"
	"github.com/doxlab/doxlab/transport"
)

func TestTasks(t *testing.T) {
	s := measure.Spec{Targets: []string{"192.0.2.1", "quic://[2001:db8::1]:8853"}, Conditions: []string{"fresh", "resumed", "0rtt"}, Repeat: 2, Seed: 1}
	tasks, err := s.Tasks()
	require.NoError(t, err)
	count := map[string]int{}
	for _, task := range tasks {
		count[task.Transport+"/"+task.Condition]++
		if task.Target == "quic://[2001:db8::1]:8853" {
			require.Equal(t, "doq", task.Transport, "a URL target measures its own transport")
		}
	}
	require.Equal(t, 2, count["udp/fresh"])
	require.Zero(t, count["udp/resumed"], "nothing to resume over UDP")
	require.Zero(t, count["dot/0rtt"], "0-RTT only for DoQ and DoH/3")
	require.Equal(t, 4, count["doq/0rtt"], "both targets")
	require.Equal(t, 2, count["doh3/0rtt"])
	again, _ := s.Tasks()
	require.Equal(t, tasks, again, "a seed fixes the order")

	for _, bad := range []measure.Spec{{}, {Targets: []string{"x"}, Transports: []string{"smtp"}}, {Targets: []string{"x"}, Conditions: []string{"warm"}}} {
		_, err := bad.Tasks()
		require.Error(t, err)
	}

	// ODoH goes through a proxy: a name alone cannot say which, a URL can.
	relayed := measure.Spec{Targets: []string{"dns.example"}, Transports: []string{"odoh"}}
	_, err = relayed.Tasks()
	require.ErrorContains(t, err, "odoh://PROXY/dns-query?target=dns.example/dns-query")
	u := "odoh://proxy.example/dns-query?target=dns.example/dns-query"
	both := measure.Spec{Targets: []string{u, "192.0.2.1"}, Transports: []string{"odoh", "doh2"}, Conditions: []string{"fresh"}}
	tasks, err = both.Tasks()
	require.NoError(t, err)
	got := map[string]string{}
	for _, task := range tasks {
		got[task.Transport] = task.Target
	}
	require.Equal(t, map[string]string{"odoh": u, "doh2": "192.0.2.1"}, got, "each target its own transport")
}

// TestRunAgainstServer measures doxlab's server on loopback under every
// condition and checks each sample says what happened.
func TestRunAgainstServer(t *testing.T) {
	srv, err := server.New(&server.Config{Listen: server.Listen{UDP: "127.0.0.1:0", TCP: "127.0.0.1:0", DoT: "127.0.0.1:0", DoH: "127.0.0.1:0", DoH3: "127.0.0.1:0", DoQ: "127.0.0.1:0"}, Answers: server.Answers{Any: "192.0.2.7"}})
	require.NoError(t, err)
	require.NoError(t, srv.Start())
	defer srv.Close()
	url := func(name, scheme, path string) string { return scheme + "://" + srv.Addr(name).String() + path }
	s := measure.Spec{
		Targets:    []string{url("udp", "udp", ""), url("tcp", "tcp", ""), url("dot", "tls", ""), url("doh", "https", "/dns-query"), url("doh3", "h3", "/dns-query"), url("doq", "quic", "")},
		Conditions: []string{"fresh", "pam", "resumed", "0rtt"}, Options: transport.Options{Insecure: true}, Timeout: 3 * time.Second, Concurrency: 2,
	}
	var samples []*measure.Sample
	require.NoError(t, measure.Run(context.Background(), s, func(x *measure.Sample) { samples = append(samples, x) }))
	require.NotEmpty(t, samples)
	for _, x := range samples {
		require.Equal(t, transport.StatusOK, x.Status, "%s %s: %s", x.Transport, x.Condition, x.Error)
		require.True(t, x.Warmup.Warmup)
		require.NotNil(t, x.RTTs, "%s %s: probe %+v", x.Transport, x.Condition, x.Probe)
		require.Greater(t, x.Probe.RTTMs, 0.0)
		c := x.Measure.Conn
		switch x.Condition {
		case "fresh", "pam":
			require.False(t, c.TLSResumed, "%s %s", x.Transport, x.Condition)
		case "resumed":
			require.True(t, c.TLSResumed, "%s resumed", x.Transport)
			require.False(t, c.Used0RTT)
		case "0rtt":
			require.True(t, c.Used0RTT, "%s 0rtt", x.Transport)
		}
		if x.Transport == "doq" || x.Transport == "doh3" {
			require.Equal(t, x.Condition != "fresh", c.TokenUsed, "%s %s: NEW_TOKEN from the warm-up", x.Transport, x.Condition)
			require.Contains(t, x.Probe.Versions, uint32(1))
		}
	}
}

func TestRunClosedPortKeepsSample(t *testing.T) {
	l, _ := net.ListenPacket("udp", "127.0.0.1:0")
	addr := l.LocalAddr().String()
	l.Close()
	var samples []*measure.Sample
	err := measure.Run(context.Background(), measure.Spec{Targets: []string{"udp://" + addr}, Timeout: time.Second}, func(x *measure.Sample) { samples = append(samples, x) })
	require.NoError(t, err)
	require.Len(t, samples, 1)
	require.Equal(t, transport.StatusRefused, samples[0].Status, "a failure is a sample with its cause, not a gap")
	require.Contains(t, samples[0].Probe.Error, "refused")
	require.Nil(t, samples[0].RTTs)
}

// TestSpecIsRecorded checks that a spec, with the hooks a testbed sets,
// turns into the JSON a run records: a field JSON cannot encode made
// every run's spec empty.
func TestSpecIsRecorded(t *testing.T) {
	s := measure.Spec{Targets: []string{"192.0.2.1"}, Repeat: 1,
		Options: transport.Options{OpenSockets: func(open func() error) error { return open() }}}
	b, err := json.Marshal(s)
	require.NoError(t, err)
	require.Contains(t, string(b), "192.0.2.1")
}

// TestSpecCheck: values no run can mean are errors, not panics or a
// silent "no limit".
func TestSpecCheck(t *testing.T) {
	for name, s := range map[string]measure.Spec{
		"rate-too-high":   {Rate: 2e9},
		"rate-inf":        {Rate: math.Inf(1)},
		"rate-nan":        {Rate: math.NaN()},
		"rate-negative":   {Rate: -1},
		"rate-too-low":    {Rate: 1e-12}, // NewTicker panicked on the wrapped interval
		"concurrency":     {Concurrency: -1},
		"concurrency-1e6": {Concurrency: 1_000_000}, // a million sockets at once
		"repeat":          {Repeat: -2},
		"timeout":         {Timeout: -time.Second},
		// A typo in repeat is refused before any task is held.
		"repeat-too-many": {Repeat: measure.MaxTasks/3 + 1, Conditions: []string{"fresh"}, Transports: []string{"udp", "tcp", "dot"}},
		"repeat-overflow": {Repeat: math.MaxInt, Transports: []string{"udp", "tcp"}},
	} {
		t.Run(name, func(t *testing.T) {
			s.Targets = []string{"127.0.0.1"}
			_, err := s.Tasks()
			require.Error(t, err)
			require.NotContains(t, err.Error(), "\n")
			if strings.HasPrefix(name, "repeat-") {
				require.ErrorContains(t, err, "tasks one run holds")
			}
		})
	}
}

// TestTasksOnce: a target listed twice, or a host and its own URL, is
// measured once.
func TestTasksOnce(t *testing.T) {
	s := measure.Spec{Targets: []string{"127.0.0.1", "127.0.0.1", "udp://127.0.0.1:53"}, Transports: []string{"udp", "tcp"}, Conditions: []string{"fresh"}, Repeat: 2}
	tasks, err := s.Tasks()
	require.NoError(t, err)
	require.Len(t, tasks, 4, "udp and tcp × 2 repetitions")
}
