package verify

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/scan"
	"github.com/doxlab/doxlab/store"
)

func TestReadTargets(t *testing.T) {
	in := "saddr,sport\n192.0.2.1,784\n# a comment\n\n192.0.2.2\n[2001:db8::1]:8853\n"
	got, err := readTargets(strings.NewReader(in), "t.csv", 853)
	require.NoError(t, err)
	require.Equal(t, []string{"192.0.2.1:784", "192.0.2.2:853", "[2001:db8::1]:8853"}, got)

	_, err = readTargets(strings.NewReader("192.0.2.1\nnot-an-ip\n"), "t.txt", 853)
	require.EqualError(t, err, `t.txt:2: "not-an-ip" is not an IP address or IP:PORT`)

	// As editors save it: a byte order mark before the first target (it
	// was taken for a CSV header, and the target dropped unsaid), CRLF
	// lines, a note after a # with commas in it.
	got, err = readTargets(strings.NewReader("\ufeff192.0.2.9\r\n192.0.2.1:784  # DoT, DoH: ok\r\n"), "t.txt", 853)
	require.NoError(t, err)
	require.Equal(t, []string{"192.0.2.9:853", "192.0.2.1:784"}, got)
	got, err = readTargets(strings.NewReader("\ufeffsaddr,sport\r\n192.0.2.1,784\r\n"), "t.csv", 853)
	require.NoError(t, err)
	require.Equal(t, []string{"192.0.2.1:784"}, got, "ZMap's header, after a byte order mark")

	// A first line is a header only where it is one: a name, or a typo,
	// in its place was dropped unsaid, and the targets after it
	// verified as if the list were whole.
	for _, first := range []string{"dns.example", "192.0.2", "localhost"} {
		_, err = readTargets(strings.NewReader(first+"\n192.0.2.1\n"), "t.txt", 853)
		require.EqualError(t, err, `t.txt:1: "`+first+`" is not an IP address or IP:PORT`, first)
	}
	for _, header := range []string{"saddr", "ip,note", "Address"} {
		got, err = readTargets(strings.NewReader(header+"\n192.0.2.1\n"), "t.csv", 853)
		require.NoError(t, err, header)
		require.Equal(t, []string{"192.0.2.1:853"}, got, header)
	}
	// ZMap's sport must be a port: another was taken for the default
	// port, and a service other than the one the scan found verified.
	for _, sport := range []string{"0", "99999", "x", "-1"} {
		_, err = readTargets(strings.NewReader("saddr,sport\n192.0.2.1,"+sport+"\n"), "t.csv", 853)
		require.EqualError(t, err, `t.csv:2: sport "`+sport+`" is not a port (1-65535)`, sport)
	}
}

// TestTarget: an IP with a port, or a bare IP given the default port;
// nothing else passes for one, though it holds a colon.
func TestTarget(t *testing.T) {
	for in, want := range map[string]string{"192.0.2.1": "192.0.2.1:853", " 192.0.2.1:784 ": "192.0.2.1:784", "2001:db8::1": "[2001:db8::1]:853", "[2001:db8::1]:8853": "[2001:db8::1]:8853"} {
		got, err := Target(in, 853)
		require.NoError(t, err, in)
		require.Equal(t, want, got)
	}
	for _, bad := range []string{"ftp://x", "dns.example:853", "192.0.2.1:99999", "192.0.2.1:0", "192.0.2.1:abc", "[::1", "fe80::1%eth0", ""} {
		_, err := Target(bad, 853)
		require.Error(t, err, bad)
	}
	// The default port is one too (doxlab verify --port): 70000 was
	// taken as 4464, and a port nobody asked for probed.
	for _, port := range []int{0, -1, 65536, 70000} {
		_, err := Target("192.0.2.1", port)
		require.EqualError(t, err, fmt.Sprintf("port %d is not a port (1-65535)", port))
		_, err = readTargets(strings.NewReader("192.0.2.1\n"), "t.txt", port)
		require.Error(t, err)
	}
	got, err := Target("192.0.2.1:784", 0)
	require.NoError(t, err, "a target's own port needs no default")
	require.Equal(t, "192.0.2.1:784", got)
}

// TestScanTargetsOfOneRun: a scan run's candidates are its own QUIC
// answers, not those of a run whose ID begins with its ID (scan-1 and
// scan-12), nor its Do53 ones; an ID no scan run has is an error that
// names the closest scans, and so is another kind of run's.
func TestScanTargetsOfOneRun(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "s.db"))
	require.NoError(t, err)
	defer st.Close()
	for _, r := range []struct{ id, kind string }{{"scan-1", "scan"}, {"scan-12", "scan"}, {"scan-1x", "measure"}} {
		require.NoError(t, st.BeginRun(ctx, store.Run{ID: r.id, Kind: r.kind, StartedAt: time.Unix(0, 0)}))
	}
	for i, x := range []struct {
		run string
		r   scan.Result
	}{
		{"scan-1", scan.Result{Target: "192.0.2.1:853", Kind: "quic"}},
		{"scan-1", scan.Result{Target: "192.0.2.1:53", Kind: "do53"}},
		{"scan-12", scan.Result{Target: "192.0.2.12:853", Kind: "quic"}},
		{"scan-1x", scan.Result{Target: "192.0.2.99:853", Kind: "quic"}},
	} {
		require.NoError(t, st.WriteResult(ctx, x.run, scan.KindResult, fmt.Sprint(i), time.Unix(int64(i), 0), x.r))
	}
	got, err := ScanTargets(ctx, st, "scan-1")
	require.NoError(t, err)
	require.Equal(t, []string{"192.0.2.1:853"}, got)
	got, err = ScanTargets(ctx, st, "scan-12")
	require.NoError(t, err)
	require.Equal(t, []string{"192.0.2.12:853"}, got)
	for _, id := range []string{"scan-", "scan-2", "scan-1x"} {
		_, err = ScanTargets(ctx, st, id)
		require.ErrorContains(t, err, fmt.Sprintf("no scan run %q in the store; the closest it holds: scan-1", id))
	}
}
