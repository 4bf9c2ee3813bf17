package experiment

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"net/netip"
	"os/exec"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/doxlab/doxlab/internal/blocklist"
	"github.com/doxlab/doxlab/testbed"
)

// Net is the network an experiment's hosts live on, all it asks of one:
// the namespace testbed (emulated links, needs root), or loopback (hosts
// on 127.x.y.z, nothing emulated, no root), chosen by Env.Net. Timing
// claims need the testbed; everything else an experiment does (its
// servers, clients, store, resume and report) runs on either.
type Net interface {
	// Kind is NetTestbed or NetLoopback, recorded with every run.
	Kind() string
	// IP is a host's address.
	IP(host string) string
	// Local is the address host's own local services (the web
	// experiment's stub) listen on for it alone: 127.0.0.1 inside a
	// testbed host; on loopback, an address of the net's kept for host.
	Local(host string) string
	// Run calls f with the sockets it opens made in host's network.
	Run(host string, f func() error) error
	// Command is a program run in host's network.
	Command(host string, argv ...string) *exec.Cmd
	// NetNS is the path of host's network namespace for programs that
	// enter it themselves (Chromium's sandboxed launcher); "" for this
	// process's own.
	NetNS(host string) string
	// SetProfile shapes host's access link.
	SetProfile(host string, p testbed.Profile) error
	// Cross is the cross traffic host's link carries now, if any.
	Cross(host string) (testbed.CrossStats, bool)
	// Check measures the client's link against profile p.
	Check(ctx context.Context, p testbed.Profile, o testbed.CheckOptions) (*testbed.CheckResult, error)
	// Sniff starts recording the packets of host's link.
	Sniff(host string) (Sniffer, error)
	// Close stops what the net runs; for the testbed, it also flushes
	// its captures (Spec.PcapDir).
	Close() error
}

// OwnBlock is the special-purpose block host's address is in (the
// testbed's 10.0.0.0/8, loopback's 127.0.0.0/8), for a page loader to
// open to the experiment's pages: a loader refuses a page such an
// address unless its block is opened (pageload.Config.AllowSpecial).
func OwnBlock(n Net, host string) []netip.Prefix {
	a, err := netip.ParseAddr(n.IP(host))
	if err != nil {
		return nil
	}
	if s, ok := blocklist.SpecialOf(a); ok {
		return []netip.Prefix{s.Prefix}
	}
	return nil
}

// Sniffer is a capture Sniff started: Stop returns its packets.
type Sniffer interface {
	Stop() ([]testbed.Packet, error)
}

// The kinds of Net.
const (
	NetTestbed  = "testbed"
	NetLoopback = "loopback"
)

// ErrNeedsTestbed is what the loopback net answers for what only the
// testbed can do: shape a link, and check one.
var ErrNeedsTestbed = errors.New("needs the testbed (--net testbed, as root): the loopback net emulates no link")

// startNet starts the net Env.Net names for spec.
func (e *Env) startNet(spec testbed.Spec) (Net, error) {
	switch e.Net {
	case "", NetTestbed:
		tb, err := testbed.Start(spec)
		if err != nil {
			return nil, err
		}
		return OnTestbed(tb), nil
	case NetLoopback:
		return newLoopback(spec)
	}
	return nil, fmt.Errorf("net %q is not %s or %s", e.Net, NetTestbed, NetLoopback)
}

// SetDistance puts host d (a round trip) beyond its access link: half of
// it each way, nothing else shaped, as the testbed places a proxy or a
// page server. The loopback net has no links and all its hosts are as
// near: there it shapes nothing. It returns the distance host has.
func SetDistance(n Net, host string, d time.Duration) (time.Duration, error) {
	if n.Kind() == NetLoopback {
		return 0, nil
	}
	p := testbed.Profile{Name: "+" + d.String(), Up: testbed.Direction{Delay: d / 2}, Down: testbed.Direction{Delay: d - d/2}}
	return d, n.SetProfile(host, p)
}

// testbedNet is the namespace testbed as a Net.
type testbedNet struct{ *testbed.Testbed }

// OnTestbed is a testbed started by hand (a test's own) as a Net.
func OnTestbed(tb *testbed.Testbed) Net { return testbedNet{tb} }

func (testbedNet) Kind() string                         { return NetTestbed }
func (n testbedNet) IP(host string) string              { return n.IPs[host] }
func (testbedNet) Local(string) string                  { return "127.0.0.1" }
func (n testbedNet) NetNS(host string) string           { return n.NS[host] }
func (n testbedNet) Sniff(host string) (Sniffer, error) { return n.Testbed.Sniff(host) }

// EmulatorOwnProcess says the emulator runs in a process of its own
// (testbed.Spec.Separate), which a link check records.
func (n testbedNet) EmulatorOwnProcess() bool { return n.Spec.Separate }

// loopback is a Net of hosts on 127.a.b.2, 127.a.b.3, … in this process's
// network, the first (the client) on 127.0.0.1, the source of whatever
// any host dials: a /24 of its own, found from the testbed's name, so
// that a resumed run finds its hosts where they were (a task's key holds
// its server's address), and the next free one when another net (two
// test packages at once) holds that. The standard ports (53, 443, 853)
// need root, CAP_NET_BIND_SERVICE, or a user and network namespace of
// one's own (unshare -rn), where the process may bind them.
type loopback struct {
	prefix string
	// claim holds port 53 of the /24's .254 while the net is open: a
	// second net, in this process or another, finds it taken and moves
	// to the next /24.
	claim  net.PacketConn
	ips    map[string]string
	locals map[string]string // Local's, .129 on
	// The capture of Spec.PcapDir, written at Close as the testbed's:
	// HOST-up.pcap and HOST-down.pcap per host.
	pcapDir string
	capture func() ([]testbed.Packet, error)
}

func newLoopback(spec testbed.Spec) (*loopback, error) {
	hosts := spec.Hosts
	if len(hosts) == 0 {
		hosts = []string{"client", "server"}
	}
	if len(hosts) > 120 {
		return nil, fmt.Errorf("the loopback net takes at most 120 hosts")
	}
	// In a network namespace of one's own (unshare -rn) lo starts down:
	// sockets bind 127.x.y.z there, but reach nothing.
	if err := loopbackUp(); err != nil {
		return nil, fmt.Errorf("the loopback net: lo is down and cannot be brought up: %w", err)
	}
	// 127.100-199.x.0/24: clear of 127.0.0.0/24 (the machine's own
	// services) and 127.53.0.0/16 (the page workers' stubs).
	h := fnv.New32a()
	h.Write([]byte(spec.Name))
	at := int(h.Sum32() % (100 * 256))
	n := &loopback{ips: map[string]string{}, locals: map[string]string{}}
	for tries := 0; ; tries++ {
		n.prefix = fmt.Sprintf("127.%d.%d.", 100+at/256, at%256)
		claim, err := net.ListenPacket("udp", n.prefix+"254:53")
		if err == nil {
			n.claim = claim
			break
		}
		if !errors.Is(err, syscall.EADDRINUSE) || tries == 64 {
			return nil, fmt.Errorf("the loopback net binds the standard ports (53, 443, 853) on 127.x.y.z: %w; run as root, or in a user and network namespace of your own (unshare -rn)", err)
		}
		at = (at + 1) % (100 * 256) // another net, here or in another process, has it
	}
	for i, h := range hosts {
		n.ips[h], n.locals[h] = n.prefix+strconv.Itoa(i+1), n.prefix+strconv.Itoa(i+129)
	}
	// What a host dials from is the kernel's choice, 127.0.0.1, whatever
	// the host: the first host (the client) has that address, so that
	// the servers' records name it as the testbed's do.
	n.ips[hosts[0]] = "127.0.0.1"
	if spec.PcapDir != "" {
		sn, err := testbed.SniffLoopback()
		if err != nil {
			n.claim.Close()
			return nil, fmt.Errorf("capturing the loopback net (--pcap): %w", err)
		}
		n.pcapDir, n.capture = spec.PcapDir, sn.Record()
	}
	return n, nil
}

func (*loopback) Kind() string               { return NetLoopback }
func (n *loopback) IP(host string) string    { return n.ips[host] }
func (n *loopback) Local(host string) string { return n.locals[host] }
func (*loopback) NetNS(string) string        { return "" }

// Close writes the net's captures, if it took them, and frees its /24.
func (n *loopback) Close() error {
	n.claim.Close()
	if n.capture == nil {
		return nil
	}
	pkts, err := n.capture()
	n.capture = nil
	for host := range n.ips {
		up, down := n.ofHost(host, pkts)
		err = errors.Join(err, testbed.WritePcap(n.pcapDir, host+"-up.pcap", up), testbed.WritePcap(n.pcapDir, host+"-down.pcap", down))
	}
	return err
}

// Sniff records host's packets: those between it and another host of
// the net (loopback carries the whole machine's).
func (n *loopback) Sniff(host string) (Sniffer, error) {
	if _, ok := n.ips[host]; !ok {
		return nil, fmt.Errorf("no host %q on the loopback net", host)
	}
	sn, err := testbed.SniffLoopback()
	if err != nil {
		return nil, fmt.Errorf("capturing the loopback net: %w", err)
	}
	return hostSniff{n, host, sn}, nil
}

type hostSniff struct {
	n    *loopback
	host string
	sn   *testbed.Sniff
}

func (h hostSniff) Stop() ([]testbed.Packet, error) {
	pkts, err := h.sn.Stop()
	up, down := h.n.ofHost(h.host, pkts)
	all := append(up, down...)
	slices.SortStableFunc(all, func(a, b testbed.Packet) int { return a.Time.Compare(b.Time) })
	return all, err
}

// ofHost splits the IPv4 packets between host and the net's other hosts
// into those it sent and those it received.
func (n *loopback) ofHost(host string, pkts []testbed.Packet) (up, down []testbed.Packet) {
	addr := func(b []byte) string { return netip.AddrFrom4([4]byte(b)).String() }
	ours := map[string]bool{}
	for _, ip := range n.ips {
		ours[ip] = true
	}
	me := n.ips[host]
	for _, p := range pkts {
		if len(p.Data) < 20 || p.Data[0]>>4 != 4 {
			continue
		}
		src, dst := addr(p.Data[12:16]), addr(p.Data[16:20])
		switch {
		case src == dst: // a host to itself: not on its link (and 127.0.0.1's is the machine's)
		case src == me && ours[dst]:
			up = append(up, p)
		case dst == me && ours[src]:
			down = append(down, p)
		}
	}
	return up, down
}

func (n *loopback) Run(host string, f func() error) error {
	if _, ok := n.ips[host]; !ok {
		return fmt.Errorf("no host %q on the loopback net", host)
	}
	return f()
}

func (n *loopback) Command(host string, argv ...string) *exec.Cmd {
	cmd := exec.Command(argv[0], argv[1:]...)
	if _, ok := n.ips[host]; !ok {
		cmd.Err = fmt.Errorf("no host %q on the loopback net", host)
	}
	return cmd
}

// SetProfile takes a profile that shapes nothing ("none", a zero
// distance); any other needs the testbed.
func (n *loopback) SetProfile(host string, p testbed.Profile) error {
	if _, ok := n.ips[host]; !ok {
		return fmt.Errorf("no host %q on the loopback net", host)
	}
	if p.Emulates() {
		return fmt.Errorf("profile %s %w", p.Name, ErrNeedsTestbed)
	}
	return nil
}

func (*loopback) Cross(string) (testbed.CrossStats, bool) { return testbed.CrossStats{}, false }

// Check has no link to measure: what it returns holds nothing, and the
// stored check says the net was loopback.
func (*loopback) Check(_ context.Context, p testbed.Profile, _ testbed.CheckOptions) (*testbed.CheckResult, error) {
	if p.Emulates() {
		return nil, fmt.Errorf("checking profile %s %w", p.Name, ErrNeedsTestbed)
	}
	return &testbed.CheckResult{Profile: p.Name}, nil
}
