package testbed_test

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

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
