package testbed_test

import (
	"maps"
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
