package scan_test

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/doxlab/doxlab/scan"
	"github.com/doxlab/doxlab/server"
	"github.com/doxlab/doxlab/testbed"
)

func TestSpecRefusesUnsafeScans(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name string
		spec scan.Spec
		want string
	}{
		{"no ranges", scan.Spec{Rate: 10}, "no ranges"},
		{"no rate", scan.Spec{Ranges: []string{"127.0.0.1"}}, "rate limit is required"},
		{"too fast", scan.Spec{Ranges: []string{"127.0.0.1"}, Rate: 1e6}, "(AllowFast)"},
		{"too large", scan.Spec{Ranges: []string{"10.0.0.0/8"}, Rate: 10}, "(AllowLarge)"},
		{"bad range", scan.Spec{Ranges: []string{"example.org"}, Rate: 10}, "not an IPv4"},
		{"NaN rate", scan.Spec{Ranges: []string{"127.0.0.1"}, Rate: math.NaN()}, "finite number of probes per second"},
		{"infinite rate", scan.Spec{Ranges: []string{"127.0.0.1"}, Rate: math.Inf(1), AllowFast: true}, "finite number of probes per second"},
		{"a rate no interval holds", scan.Spec{Ranges: []string{"127.0.0.0/30"}, Rate: 1e-12}, "12 targets at 1e-12 probes per second take 138888889 days, more than 366"},
		{"no port", scan.Spec{Ranges: []string{"127.0.0.1"}, Rate: 10, DNSPorts: []int{70000}}, "port 70000: want 1 to 65535"},
		{"the Internet", scan.Spec{Ranges: []string{"0.0.0.0/0"}, Rate: 1e7, AllowFast: true, AllowLarge: true}, "more than 16777216 targets"},
		{"a /7", scan.Spec{Ranges: []string{"10.0.0.0/8", "11.0.0.0/8"}, Rate: 1e7, AllowFast: true, AllowLarge: true, QUICPorts: []int{853}}, "a scan of the Internet is ZMap's"},
		{"missing blocklist", scan.Spec{Ranges: []string{"127.0.0.1"}, Rate: 10, Blocklist: []string{"/nonexistent"}}, "reading blocklist"},
		{"loopback", scan.Spec{Ranges: []string{"127.0.0.1"}, Rate: 10}, "range 127.0.0.1/32 is in 127.0.0.0/8, loopback (RFC 1122), and is special-purpose (RFC 6890) and not allowed"},
		{"the metadata service", scan.Spec{Ranges: []string{"169.254.169.254"}, Rate: 10}, "link-local, cloud metadata"},
		{"private and broadcast", scan.Spec{Ranges: []string{"192.168.1.0/24", "255.255.255.255"}, Rate: 10}, "(AllowSpecial)"},
		{"another block allowed", scan.Spec{Ranges: []string{"10.1.0.0/16"}, AllowSpecial: []string{"192.168.0.0/16"}, Rate: 10, AllowLarge: true}, "10.0.0.0/8, private use"},
		{"allowing what is no special block", scan.Spec{Ranges: []string{"127.0.0.1"}, AllowSpecial: []string{"1.1.1.0/24"}, Rate: 10}, "1.1.1.0/24 is not special-purpose"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := scan.Run(ctx, c.spec, func(scan.Result) {})
			require.ErrorContains(t, err, c.want)
			var se *scan.SpecError
			require.ErrorAs(t, err, &se, "refused, not failed")
			require.Equal(t, err.Error(), c.spec.Check().Error(), "Check says what Run would")
		})
	}
	// A /8 on one port is the most a scan holds; Check does not expand it.
	require.NoError(t, scan.Spec{Ranges: []string{"10.0.0.0/8"}, AllowSpecial: []string{"10.0.0.0/8"}, Rate: 1e7, AllowFast: true, AllowLarge: true, QUICPorts: []int{853}}.Check())
}

// TestScanFindsQUICServices scans the testbed: two server hosts with
// QUIC services on different ports, a third with nothing; the scan finds
// exactly the QUIC services with their versions, a Do53 service, honours
// the blocklist and keeps to its rate.
func TestScanFindsQUICServices(t *testing.T) {
	testutil.NeedRoot(t, "the testbed needs root")
	tb, err := testbed.Start(testbed.Spec{Name: "scantest", Hosts: []string{"client", "s1", "s2", "s3"}})
	require.NoError(t, err)
	defer tb.Close()
	start := func(host string, l server.Listen) {
		srv, err := server.StartIn(&server.Config{Listen: l, Answers: server.Answers{Any: "192.0.2.1"}}, func(f func() error) error { return tb.Run(host, f) })
		require.NoError(t, err)
		t.Cleanup(func() { srv.Close() })
	}
	s1, s2, s3 := tb.IPs["s1"], tb.IPs["s2"], tb.IPs["s3"]
	start("s1", server.Listen{DoQ: s1 + ":853"})
	start("s2", server.Listen{DoH3: s2 + ":443", UDP: s2 + ":53"})
	_ = s3

	run := func(spec scan.Spec) ([]string, scan.Stats) {
		var found []string
		var st scan.Stats
		require.NoError(t, tb.Run("client", func() error {
			var err error
			st, err = scan.Run(context.Background(), spec, func(r scan.Result) {
				found = append(found, r.Kind+" "+r.Target)
				if r.Kind == "quic" {
					require.Contains(t, r.Versions, "0x00000001", "QUIC v1 offered")
					require.Contains(t, r.Versions, "0x6b3343cf", "QUIC v2 offered")
				}
			})
			return err
		}))
		sort.Strings(found)
		return found, st
	}
	spec := scan.Spec{Ranges: []string{tb.IPs["client"] + "/29"}, AllowSpecial: []string{tb.IPs["client"] + "/24"}, QUICPorts: []int{443, 784, 853, 8853}, DNSPorts: []int{53}, Rate: 100, Cooldown: 500 * time.Millisecond}
	found, st := run(spec)
	require.Equal(t, []string{"do53 " + s2 + ":53", "quic " + s1 + ":853", "quic " + s2 + ":443"}, found)
	require.Equal(t, 8*5, st.Targets)
	require.Equal(t, st.Targets, st.Sent)
	// The rate is a ceiling: 40 probes at 100/s cannot leave in under 0.39 s.
	require.LessOrEqual(t, st.Rate, 101.0)
	require.GreaterOrEqual(t, st.Elapsed, 390*time.Millisecond+spec.Cooldown)

	block := filepath.Join(t.TempDir(), "blocklist")
	require.NoError(t, os.WriteFile(block, []byte("# s2 asked not to be scanned\n"+s2+"/32\n"), 0o644))
	spec.OptOut = []string{block}
	found, st = run(spec)
	require.Equal(t, []string{"quic " + s1 + ":853"}, found)
	require.Equal(t, 5, st.Blocked)
}
