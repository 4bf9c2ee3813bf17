package testbed_test

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/testbed"
)

// TestProfilesHaveNames: the names the order and the specs read from
// the profiles leaf are exactly the profiles the testbed shapes, each
// under its own name, "none" first and Table II from the fastest.
func TestProfilesHaveNames(t *testing.T) {
	names := testbed.ProfileNames()
	require.ElementsMatch(t, names, slices.Collect(maps.Keys(testbed.Profiles)))
	require.Equal(t, "none", names[0])
	for i, n := range names {
		require.Equal(t, n, testbed.Profiles[n].Name)
		if i > 1 {
			require.Less(t, testbed.Profiles[names[i-1]].RTT(), testbed.Profiles[n].RTT(), "Table II runs from the fastest")
		}
	}
}

// TestProfilesRefuseWhatIsNoNumber: YAML reads .nan and .inf, and
// strconv "nan" and "inf", as numbers; none is a loss rate, a link rate
// or a probability. Each profile that holds one, as a file or as a
// variant of a built-in one, is refused with the field named, before an
// emulator is given a loss rate no comparison refuses.
func TestProfilesRefuseWhatIsNoNumber(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ yaml, want string }{
		{"down: {loss: .nan}", "down.loss"},
		{"up: {rate: .inf}", "up.rate"},
		{"down: {rate: .nan}", "down.rate"},
		{"down: {gilbert_elliott: {p: .nan, r: 0.3, loss_bad: 1}}", "down.gilbert_elliott"},
		{"up: {gilbert_elliott: {p: 0.1, r: 0.3, loss_bad: .inf}}", "up.gilbert_elliott"},
	} {
		f := filepath.Join(dir, "p.yaml")
		require.NoError(t, os.WriteFile(f, []byte("name: odd\n"+c.yaml+"\n"), 0o644))
		_, err := testbed.LookupProfile(f)
		require.ErrorContains(t, err, c.want, c.yaml)
	}
	for _, name := range []string{"4g+lossnan", "4g+burstnan", "4g+lossinf", "dsl+loss-inf"} {
		_, err := testbed.LookupProfile(name)
		require.ErrorContains(t, err, "a percentage above 0 and below 100", name)
	}
	p, err := testbed.LookupProfile("4g+loss1")
	require.NoError(t, err)
	require.InDelta(t, 0.01, p.Down.Loss, 1e-12)
}

// TestProfilesRefuseWhatCannotBeMeant: a profile file that cannot be
// meant is refused before any link takes it, in one line naming the
// profile, the direction and the field; the one beside it that can be
// meant loads as written.
func TestProfilesRefuseWhatCannotBeMeant(t *testing.T) {
	dir := t.TempDir()
	trace := filepath.Join(dir, "steps.trace")
	require.NoError(t, os.WriteFile(trace, []byte("1\n2\n3\n"), 0o644))
	load := func(yaml string) (testbed.Profile, error) {
		f := filepath.Join(dir, "p.yaml")
		require.NoError(t, os.WriteFile(f, []byte("name: odd\n"+yaml+"\n"), 0o644))
		return testbed.LookupProfile(f)
	}
	for _, c := range []struct{ bad, good, want string }{
		{"down: {delay: -5ms}", "down: {delay: 5ms}", "down.delay"},
		{"up: {jitter: -1ms}", "up: {jitter: 1ms}", "up.jitter"},
		{"down: {loss: 1.5}", "down: {loss: 1}", "profile odd: down.loss 1.5 is not a probability"},
		{"up: {loss: -0.1}", "up: {loss: 0}", "up.loss"},
		{"down: {rate: 100}", "down: {rate: 8000}", "down.rate 100 bit/s is below 1 kB/s; rates are in bits per second"},
		{"down: {rate: 1e6, trace: " + trace + "}", "down: {trace: " + trace + "}", "down: rate and trace exclude each other"},
		{"up: {trace: " + trace + ".missing}", "up: {trace: " + trace + "}", "profile odd: up: "},
		{"down: {queue: codel}", "down: {queue: codel, rate: 1e6}", "down.queue codel needs a rate or a trace"},
		{"down: {queue: pie, rate: 1e6, queue_bytes: 3000}", "down: {queue: pie, rate: 1e6, queue_packets: 2}", "down.queue pie takes its limit from queue_packets"},
		{"up: {queue: fq_codel, rate: 1e6, queue_time: 5ms}", "up: {queue: tail, rate: 1e6, queue_time: 5ms}", "up.queue fq_codel takes its limit"},
		{"down: {queue: red, rate: 1e6}", "down: {queue: fq_codel, rate: 1e6}", `down.queue "red" is not tail, codel, fq_codel or pie`},
		{"down: {queue: codel, rate: 1e6, codel: {target: -5ms}}", "down: {queue: codel, rate: 1e6, codel: {target: 5ms}}", "down.codel.target"},
		{"up: {gilbert_elliott: {p: 0.1, r: 1.2, loss_bad: 1}}", "up: {gilbert_elliott: {p: 0.1, r: 1, loss_bad: 1}}", "up.gilbert_elliott: 1.2 is not a probability"},
		{"down: {gilbert_elliott: {p: -0.1, r: 0.3}}", "down: {gilbert_elliott: {p: 0, r: 0.3}}", "down.gilbert_elliott"},
		{"cross: {down: 17}", "cross: {down: 16}", "cross: between 0 and 16 flows in all"},
		{"cross: {down: 9, up: 8}", "cross: {down: 8, up: 8}", "cross: between 0 and 16 flows"},
		{"cross: {up: -1}", "cross: {up: 1}", "cross:"},
		{"mtu: 1000", "mtu: 1280", "mtu 1000 outside 1280..65535"},
		{"mtu: 70000", "mtu: 65535", "mtu 70000 outside"},
		{"down: {delay: 5ms, colour: blue}", "down: {delay: 5ms}", "colour"},
	} {
		_, err := load(c.bad)
		require.ErrorContains(t, err, c.want, c.bad)
		require.NotContains(t, err.Error(), "\n", "one line: %s", c.bad)
		p, err := load(c.good)
		require.NoError(t, err, c.good)
		require.Equal(t, "odd", p.Name)
	}
	p, err := load("down: {delay: 20ms, rate: 5e6, queue: pie, queue_packets: 64}\nup: {gilbert_elliott: {p: 0.01, r: 0.3, loss_bad: 1}}\nmtu: 1400\ncross: {down: 2, congestion_control: bbr}")
	require.NoError(t, err)
	require.Equal(t, 20*time.Millisecond, p.Down.Delay)
	require.Equal(t, 5e6, p.Down.Rate)
	require.Equal(t, 64, p.Down.QueuePackets)
	require.InDelta(t, 0.01/0.31, p.Up.MeanLoss(), 1e-12, "Gilbert-Elliott: the bad state's share, all lost there")
	require.Equal(t, 1400, p.MTU)
	require.Equal(t, testbed.Cross{Down: 2, CongestionControl: "bbr"}, p.Cross)
	require.Equal(t, 20*time.Millisecond, p.RTT(), "the delays of both ways: down alone here")
}
