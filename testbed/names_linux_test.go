package testbed

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestDownTakesItsOwnTestbedOnly: a name that would reach outside the
// testbed's own state directory ("", "..", "a/b") is refused by Start,
// Load and Down, which removed StateRoot/NAME whole ("" and "." took
// every testbed's state, ".." all of /run/doxlab); and taking a testbed
// down leaves alone another whose namespaces its own prefix matches
// (doxlab's is its scratch testbed doxlab-bloat's).
func TestDownTakesItsOwnTestbedOnly(t *testing.T) {
	needRoot(t)
	sentinel := filepath.Join(StateRoot, "tsentinel")
	require.NoError(t, os.MkdirAll(sentinel, 0o755))
	t.Cleanup(func() { os.RemoveAll(sentinel) })
	for _, name := range []string{"", ".", "..", "../x", "a/b", "a b", "-a", ".hidden", "a\nb", "é", strings.Repeat("a", 41)} {
		require.ErrorContains(t, Down(name), "bad testbed name", "%q", name)
		_, err := Load(name)
		require.ErrorContains(t, err, "bad testbed name", "%q", name)
		if name != "" { // "": the default name
			_, err = Start(Spec{Name: name})
			require.ErrorContains(t, err, "bad testbed name", "%q", name)
		}
	}
	require.DirExists(t, sentinel, "another testbed's state stays")
	require.NoError(t, CheckName("doxlab-bloat"))
	require.NoError(t, CheckName("t_1.2"))

	startTB(t, Spec{Name: "tpre"})
	inner := startTB(t, Spec{Name: "tpre-x"})
	require.NoError(t, Down("tpre"))
	for _, h := range []string{"client", "server"} {
		require.NoFileExists(t, "/run/netns/doxlab-tpre-"+h)
		require.FileExists(t, "/run/netns/doxlab-tpre-x-"+h, "the other testbed's namespaces stay")
	}
	st, err := Load("tpre-x")
	require.NoError(t, err, "the other testbed's state stays")
	require.Equal(t, inner.NS, st.NS)
	_, err = inner.Check(context.Background(), Profiles["none"], CheckOptions{Probes: 10, Interval: 2 * time.Millisecond, SkipThroughput: true})
	require.NoError(t, err, "the other testbed still carries packets")
}
