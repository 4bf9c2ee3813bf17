//go:build linux

package confine_test

import (
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/browser/confine"
	"github.com/doxlab/doxlab/internal/blocklist"
	"github.com/doxlab/doxlab/internal/testutil"
)

// TestAKilledWorkersNetworkIsSwept: two workers' networks at once take
// a /30 each and namespaces of their own; when a worker dies without
// Close (killed, or its machine's OOM killer), the next worker to
// confine a browser removes what it left, killing what still ran in
// its namespace, and leaves the living worker's alone.
func TestAKilledWorkersNetworkIsSwept(t *testing.T) {
	testutil.NeedRoot(t, "the test makes network namespaces and firewall rules")
	testutil.Need(t, "nft", "apt-get install nftables")
	vantage := testutil.NewNetns(t, "dxt-sweep")
	p := &blocklist.Policy{Allow: []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")}}
	confined := func() *confine.Net {
		t.Helper()
		var c *confine.Net
		require.NoError(t, vantage.Run(func() (err error) {
			c, err = confine.New(p)
			return err
		}))
		t.Cleanup(func() { vantage.Run(c.Close) })
		return c
	}
	dead, living := confined(), confined()
	require.NotEqual(t, dead.NS, living.NS)
	require.NotEqual(t, dead.Stub, living.Stub)
	require.True(t, netip.MustParsePrefix("198.18.0.0/16").Contains(dead.Stub), "a benchmarking address, never a page's: %s", dead.Stub)

	// A browser left running in the dead worker's namespace, and the
	// worker itself gone: its pid file names a process that exited.
	orphan := exec.Command("ip", "netns", "exec", dead.NS, "sleep", "60")
	require.NoError(t, orphan.Start())
	exited := make(chan error, 1)
	go func() { exited <- orphan.Wait() }()
	// ip netns exec enters the namespace after it started: sweeping
	// before that would find nobody in it, and a browser killed long
	// after starting is what the sweep is for.
	require.Eventually(t, func() bool {
		out, _ := exec.Command("ip", "netns", "pids", dead.NS).Output()
		return slices.Contains(strings.Fields(string(out)), strconv.Itoa(orphan.Process.Pid))
	}, 10*time.Second, 10*time.Millisecond, "the orphan is in the dead worker's namespace")
	gone := exec.Command("true")
	require.NoError(t, gone.Run())
	require.NoError(t, os.WriteFile(confine.PidFile(dead), []byte(strconv.Itoa(gone.Process.Pid)), 0o600))

	next := confined()
	select {
	case err := <-exited:
		require.ErrorContains(t, err, "killed", "what ran in the dead worker's namespace")
	case <-time.After(10 * time.Second):
		t.Fatal("the orphaned browser still runs")
	}
	require.Equal(t, dead.NS, next.NS, "the swept network is the first free one again")
	_, err := os.Stat("/run/netns/" + living.NS)
	require.NoError(t, err, "the living worker's namespace stays")
	out, err := vantage.Command("nft", "list", "tables").CombinedOutput()
	require.NoError(t, err, "%s", out)
	table := strings.ReplaceAll(strings.TrimPrefix(living.NS, "doxlab-"), "-", "_")
	require.Contains(t, string(out), "table inet doxlab_"+table+"\n", "the living worker's firewall stays")
	require.NoError(t, testutil.InNetns(living.NS, func() error { return nil }), "and its namespace can be entered")
}

// TestParseSet reads the refusals nft -j lists, IPv4 and IPv6, and
// skips what is not an element of three; what is not JSON is an error.
func TestParseSet(t *testing.T) {
	got, err := confine.ParseSet([]byte(`{"nftables":[{"metainfo":{"version":"1.0.6"}},{"set":{"family":"inet","name":"seen4","table":"doxlab",
		"elem":[{"concat":["127.0.0.1","tcp",8081]},{"concat":["169.254.169.254","udp",53]},{"concat":["10.0.0.1","tcp"]},{"elem":{}}]}},
		{"set":{"name":"seen6","elem":[{"concat":["::1","tcp",443]}]}}]}`))
	require.NoError(t, err)
	require.Equal(t, []confine.Refusal{{Addr: "127.0.0.1", Proto: "tcp", Port: 8081}, {Addr: "169.254.169.254", Proto: "udp", Port: 53}, {Addr: "::1", Proto: "tcp", Port: 443}}, got)
	got, err = confine.ParseSet([]byte(`{"nftables":[{"set":{"name":"seen4","table":"doxlab"}}]}`))
	require.NoError(t, err)
	require.Empty(t, got, "an empty set")
	_, err = confine.ParseSet([]byte("Error: No such file or directory"))
	require.ErrorContains(t, err, "reading the browser's refusals")
}
