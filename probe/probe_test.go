package probe_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/doxlab/doxlab/probe"
	"github.com/doxlab/doxlab/server"
	"github.com/doxlab/doxlab/testbed"
)

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestProbesAgainstPeers(t *testing.T) {
	srv, err := server.New(&server.Config{Listen: server.Listen{UDP: "127.0.0.1:0", DoT: "127.0.0.1:0", DoQ: "127.0.0.1:0"}, Answers: server.Answers{Any: "192.0.2.1"}})
	require.NoError(t, err)
	require.NoError(t, srv.Start())
	defer srv.Close()
	cd := testutil.StartCoreDNS(t)
	aq := testutil.StartAioquicDoQ(t, false)

	for name, addr := range map[string]string{"doxlab": srv.Addr("doq").String(), "coredns": cd.DoQ, "aioquic": aq.Addr} {
		t.Run("quic/"+name, func(t *testing.T) {
			r, err := probe.QUIC(ctx(t), addr)
			require.NoError(t, err)
			require.Greater(t, r.RTT, time.Duration(0))
			require.Contains(t, r.Versions, uint32(quic.Version1), "QUIC v1 offered: %x", r.Versions)
		})
	}
	for name, addr := range map[string]string{"doxlab": srv.Addr("udp").String(), "coredns": cd.Do53} {
		r, err := probe.UDP(ctx(t), addr)
		require.NoError(t, err, name)
		require.Greater(t, r.RTT, time.Duration(0))
	}
	for name, addr := range map[string]string{"doxlab": srv.Addr("dot").String(), "coredns": cd.DoT} {
		r, err := probe.TCP(ctx(t), addr)
		require.NoError(t, err, name)
		require.Greater(t, r.RTT, time.Duration(0))
	}
}

func TestProbesClosedPort(t *testing.T) {
	addr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	for name, f := range map[string]func(context.Context, string) (probe.Result, error){"udp": probe.UDP, "tcp": probe.TCP, "quic": probe.QUIC} {
		_, err := f(ctx(t), addr)
		require.ErrorIs(t, err, syscall.ECONNREFUSED, name)
	}
}

func TestParseVN(t *testing.T) {
	_, dcid, scid := probe.VNProbe()
	vn := append([]byte{0x80, 0, 0, 0, 0, byte(len(scid))}, scid...)
	vn = append(append(vn, byte(len(dcid))), dcid...)
	vn = append(vn, 0, 0, 0, 1, 0x6b, 0x33, 0x43, 0xcf)
	vs, err := probe.ParseVN(vn, dcid, scid)
	require.NoError(t, err)
	require.Equal(t, []uint32{1, 0x6b3343cf}, vs)
	_, err = probe.ParseVN(vn, scid, dcid)
	require.Error(t, err, "connection IDs must be swapped back")
	_, err = probe.ParseVN(vn[:len(vn)-2], dcid, scid)
	require.Error(t, err)
	own := binary.BigEndian.AppendUint32(slices.Clone(vn), probe.ReservedVersion)
	_, err = probe.ParseVN(own, dcid, scid)
	require.ErrorContains(t, err, "the probe's own version", "RFC 9000 §6.2: discarded")
}

// FuzzParseVN: whatever a server sends back, ParseVN returns an error or
// the versions its list holds, four octets each, after both connection
// IDs, never the probe's own.
func FuzzParseVN(f *testing.F) {
	_, dcid, scid := probe.VNProbe()
	vn := append([]byte{0x80, 0, 0, 0, 0, byte(len(scid))}, scid...)
	vn = append(append(vn, byte(len(dcid))), dcid...)
	f.Add(append(slices.Clone(vn), 0, 0, 0, 1))
	f.Add(append(slices.Clone(vn), 0xff, 0, 0, 0x1d, 0, 0, 0))
	f.Add([]byte{0x80, 0, 0, 0, 0, 200})
	f.Fuzz(func(t *testing.T, b []byte) {
		vs, err := probe.ParseVN(b, dcid, scid)
		if err != nil {
			return
		}
		require.NotEmpty(t, vs)
		require.Equal(t, len(b)-7-len(dcid)-len(scid), 4*len(vs))
		require.NotContains(t, vs, probe.ReservedVersion)
	})
}

// TestProbesInTestbed: across the emulated fiber link every probe takes one
// round trip.
func TestProbesInTestbed(t *testing.T) {
	if err := checkRoot(); err != nil {
		testutil.Missing(t, err.Error())
	}
	tb, err := testbed.Start(testbed.Spec{Name: "tprobe", Profile: "fiber"})
	require.NoError(t, err)
	defer tb.Close()
	srv, err := server.StartIn(&server.Config{Listen: server.Listen{UDP: tb.IPs["server"] + ":53", DoT: tb.IPs["server"] + ":853", DoQ: tb.IPs["server"] + ":853"}, Answers: server.Answers{Any: "192.0.2.1"}},
		func(f func() error) error { return tb.Run("server", f) })
	require.NoError(t, err)
	defer srv.Close()
	for name, f := range map[string]func(context.Context, string) (probe.Result, error){"udp": probe.UDP, "tcp": probe.TCP, "quic": probe.QUIC} {
		port := "853"
		if name == "udp" {
			port = "53"
		}
		// The first packets through a fresh testbed are slower (cold
		// threads and pages); the median of five is what a link is.
		var rtts []float64
		for range 5 {
			var r probe.Result
			require.NoError(t, tb.Run("client", func() error {
				var err error
				r, err = f(ctx(t), tb.IPs["server"]+":"+port)
				return err
			}), name)
			rtts = append(rtts, r.RTTMs())
		}
		slices.Sort(rtts)
		t.Logf("%s probe RTTs %v ms", name, rtts)
		// One round trip, not two: never below the emulated RTT, and
		// within half of one above it, scaled (the timed lane runs it).
		require.GreaterOrEqual(t, rtts[2], 14.8, name)
		require.Less(t, rtts[2], 14.8+testutil.ScaledMs(7.4), name)
	}
}

func checkRoot() error {
	if syscall.Geteuid() != 0 {
		return errors.New("needs root")
	}
	return nil
}

// TestForSchemeFromTheTable: each scheme's probe, read from the protocol
// table, is what it was: UDP for udp, QUIC for quic and h3, TCP else.
func TestForSchemeFromTheTable(t *testing.T) {
	name := func(f func(context.Context, string) (probe.Result, error)) string {
		return runtime.FuncForPC(reflect.ValueOf(f).Pointer()).Name()
	}
	for scheme, want := range map[string]string{"udp": "UDP", "quic": "QUIC", "h3": "QUIC", "tcp": "TCP", "tls": "TCP", "https": "TCP", "gopher": "TCP"} {
		require.True(t, strings.HasSuffix(name(probe.ForScheme(scheme)), "."+want), "%s: %s", scheme, name(probe.ForScheme(scheme)))
	}
}
