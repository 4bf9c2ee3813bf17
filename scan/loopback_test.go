package scan_test

import (
	"context"
	"errors"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/scan"
)

// loopback is what these scans probe: loopback's block, which a scan
// skips unless allowed.
var loopback = []string{"127.0.0.0/8"}

// vnResponder answers each probe it gets with Version Negotiation for
// QUIC v1, the probe's connection IDs swapped back as RFC 9000 §17.2.1
// asks, times times; forge spoils them, as an answer for another target
// would have them. It returns its port.
func vnResponder(t *testing.T, times int, forge bool) int {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if n < 23 {
				continue
			}
			dcid, scid := buf[6:14], buf[15:23]
			vn := append([]byte{0x80, 0, 0, 0, 0, 8}, scid...)
			vn = append(append(vn, 8), dcid...)
			vn = append(vn, 0, 0, 0, 1)
			if forge {
				vn[6] ^= 0xff
			}
			for range times {
				pc.WriteTo(vn, from)
			}
		}
	}()
	return pc.LocalAddr().(*net.UDPAddr).Port
}

// TestScanOnLoopback: what the testbed's scan does not show. A target
// that answers twice is found once; an answer whose connection IDs are
// not its probe's is no service; a port that answers nothing is none either.
func TestScanOnLoopback(t *testing.T) {
	twice, forged := vnResponder(t, 2, false), vnResponder(t, 1, true)
	silent := vnResponder(t, 0, false) // takes probes, answers nothing
	var found []scan.Result
	st, err := scan.Run(context.Background(), scan.Spec{Ranges: []string{"127.0.0.1"}, AllowSpecial: loopback, QUICPorts: []int{twice, forged, silent}, Rate: 1000, Cooldown: 300 * time.Millisecond},
		func(r scan.Result) { found = append(found, r) })
	require.NoError(t, err)
	require.Len(t, found, 1, "%+v", found)
	require.Equal(t, "127.0.0.1:"+strconv.Itoa(twice), found[0].Target)
	require.Equal(t, []string{"0x00000001"}, found[0].Versions)
	require.Equal(t, scan.Stats{Targets: 3, Sent: 3, Answers: 1}, scan.Stats{Targets: st.Targets, Sent: st.Sent, Answers: st.Answers})
}

// TestScanStopsWhenCancelled: a scan cancelled part way sends nothing
// more and returns at once, saying how far it got.
func TestScanStopsWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var calls atomic.Int32
	go func() {
		time.Sleep(200 * time.Millisecond)
		cancel()
	}()
	// 256 probes at 50 a second would take five seconds.
	st, err := scan.Run(ctx, scan.Spec{Ranges: []string{"127.0.0.0/24"}, AllowSpecial: loopback, QUICPorts: []int{vnResponder(t, 0, false)}, Rate: 50},
		func(scan.Result) { calls.Add(1) })
	require.True(t, errors.Is(err, context.Canceled), "%v", err)
	require.Equal(t, 256, st.Targets)
	require.Positive(t, st.Sent)
	require.Less(t, st.Sent, st.Targets)
	require.Zero(t, calls.Load())
}

// TestScanSaysWhatWasNotSent: a probe the system refuses to send (here
// to the broadcast address, without SO_BROADCAST) is counted with its
// reason, not taken for sent; a scan that could send none fails saying
// why, where it said "0 probes sent" and succeeded.
func TestScanSaysWhatWasNotSent(t *testing.T) {
	port := vnResponder(t, 1, false)
	spec := scan.Spec{Ranges: []string{"255.255.255.255"}, AllowSpecial: []string{"127.0.0.0/8", "255.255.255.255"}, QUICPorts: []int{port}, Rate: 1000, Cooldown: 100 * time.Millisecond}
	st, err := scan.Run(context.Background(), spec, func(scan.Result) {})
	require.ErrorIs(t, err, scan.ErrNothingSent)
	require.ErrorContains(t, err, "1 tried, the first refused with sendto: permission denied")
	require.Equal(t, scan.Stats{Targets: 1, Unsent: 1, UnsentWhy: "sendto: permission denied"}, scan.Stats{Targets: st.Targets, Sent: st.Sent, Unsent: st.Unsent, UnsentWhy: st.UnsentWhy})

	spec.Ranges = []string{"127.0.0.1", "255.255.255.255"}
	var found []scan.Result
	st, err = scan.Run(context.Background(), spec, func(r scan.Result) { found = append(found, r) })
	require.NoError(t, err, "some were sent")
	require.Len(t, found, 1)
	require.Equal(t, scan.Stats{Targets: 2, Sent: 1, Answers: 1, Unsent: 1, UnsentWhy: "sendto: permission denied"},
		scan.Stats{Targets: st.Targets, Sent: st.Sent, Answers: st.Answers, Unsent: st.Unsent, UnsentWhy: st.UnsentWhy})
}

// TestAPortGivenTwiceIsProbedOnce: each scanned host gets one probe a
// port, however often the port is named.
func TestAPortGivenTwiceIsProbedOnce(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	require.NoError(t, err)
	defer pc.Close()
	port := pc.LocalAddr().(*net.UDPAddr).Port
	st, err := scan.Run(context.Background(), scan.Spec{Ranges: []string{"127.0.0.1"}, AllowSpecial: loopback, QUICPorts: []int{port, port, port}, DNSPorts: []int{port, port},
		Rate: 1000, Cooldown: 100 * time.Millisecond}, func(scan.Result) {})
	require.NoError(t, err)
	require.Equal(t, 2, st.Targets, "a QUIC probe and a DNS query")
	require.Equal(t, 2, st.Sent)
	got := 0
	require.NoError(t, pc.SetReadDeadline(time.Now().Add(200*time.Millisecond)))
	for buf := make([]byte, 2048); ; got++ {
		if _, _, err := pc.ReadFrom(buf); err != nil {
			break
		}
	}
	require.Equal(t, 2, got)
}
