package testbed

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/testutil"
)

// dnsPacket is a raw IPv4 UDP packet from src to dst port 53.
func dnsPacket(t *testing.T, src string, payload string) []byte {
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP,
		SrcIP: net.ParseIP(src).To4(), DstIP: net.IPv4(10, 0, 0, 2).To4()}
	udp := &layers.UDP{SrcPort: 40000, DstPort: 53}
	require.NoError(t, udp.SetNetworkLayerForChecksum(ip))
	b := gopacket.NewSerializeBuffer()
	require.NoError(t, gopacket.SerializeLayers(b, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
		ip, udp, gopacket.Payload(payload)))
	return b.Bytes()
}

// TestPcapKeepsTimesToTheNanosecond: a capture is raw IPv4 with
// nanosecond times, read back whole by a pcap reader and by tshark, the
// packets' times as the emulator took them (RTT analyses of a capture
// need more than pcap's default microseconds).
func TestPcapKeepsTimesToTheNanosecond(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 123456789, time.UTC)
	pkts := []Packet{
		{Time: t0, Data: dnsPacket(t, "10.0.0.1", "first")},
		{Time: t0.Add(1500 * time.Nanosecond), Data: dnsPacket(t, "10.0.0.3", "second")},
	}
	require.NoError(t, WritePcap(dir, "client-up.pcap", pkts))

	f, err := os.Open(filepath.Join(dir, "client-up.pcap"))
	require.NoError(t, err)
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	require.NoError(t, err)
	require.Equal(t, layers.LinkTypeRaw, r.LinkType())
	require.Equal(t, gopacket.TimestampResolutionNanosecond, r.Resolution())
	for _, p := range pkts {
		data, ci, err := r.ReadPacketData()
		require.NoError(t, err)
		require.Equal(t, p.Data, data)
		require.True(t, p.Time.Equal(ci.Timestamp), "%v, not %v", ci.Timestamp, p.Time)
		require.Equal(t, len(p.Data), ci.Length)
	}
	_, _, err = r.ReadPacketData()
	require.Error(t, err, "two packets, no more")

	tshark := testutil.Need(t, "tshark", "apt-get install tshark")
	out, err := exec.Command(tshark, "-r", f.Name(), "-T", "fields", "-e", "frame.time_epoch", "-e", "ip.src", "-e", "udp.dstport").Output()
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	require.Len(t, lines, 2)
	epoch := func(at time.Time) string { return fmt.Sprintf("%d.%09d", at.Unix(), at.Nanosecond()) }
	require.Equal(t, []string{epoch(t0), "10.0.0.1", "53"}, strings.Fields(lines[0]))
	require.Equal(t, []string{epoch(pkts[1].Time), "10.0.0.3", "53"}, strings.Fields(lines[1]))
	require.True(t, strings.HasSuffix(epoch(pkts[1].Time), ".123458289"))
}

// TestPcapSaysAFailedWrite: a capture the disk could not take is an
// error naming the capture, not a short file said nowhere; without a
// capture directory nothing is written and nothing fails.
func TestPcapSaysAFailedWrite(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full here")
	}
	err := WritePcap("/dev", "full", []Packet{{Time: time.Now(), Data: dnsPacket(t, "10.0.0.1", "x")}})
	require.ErrorContains(t, err, "capture full")
	require.ErrorContains(t, err, "no space left on device")

	c, err := newCapture("", "client-up.pcap")
	require.NoError(t, err)
	require.Nil(t, c, "no directory, no capture")
	c.write(time.Now(), []byte{1})
	c.flush()
	require.NoError(t, c.close())
	require.NoError(t, WritePcap("", "x.pcap", []Packet{{Time: time.Now(), Data: []byte{1}}}))
}
