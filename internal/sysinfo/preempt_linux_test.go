package sysinfo

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPreemption checks the model is one the kernel knows, or unknown,
// and reads both of its sources right.
func TestPreemption(t *testing.T) {
	p := Preemption()
	t.Logf("preemption: %q", p)
	require.Contains(t, []string{"", "none", "voluntary", "full", "lazy", "rt"}, p)

	require.Equal(t, "voluntary", running("none (voluntary) full lazy\n"))
	require.Equal(t, "", running("garbage"))
	require.Equal(t, "none", fromConfig(strings.NewReader("CONFIG_PREEMPT_BUILD=y\nCONFIG_PREEMPT_NONE=y\n# CONFIG_PREEMPT is not set\nCONFIG_PREEMPT_DYNAMIC=y\n")))
	require.Equal(t, "full", fromConfig(strings.NewReader("# CONFIG_PREEMPT_NONE is not set\nCONFIG_PREEMPT=y\n")))
	require.Equal(t, "", fromConfig(strings.NewReader("CONFIG_HZ=250\n")))
}
