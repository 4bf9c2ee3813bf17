package experiment

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"os/exec"
	"strconv"
	"sync"

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
// testbed can do: shape a link, check it, capture it.
var ErrNeedsTestbed = errors.New("needs the testbed (--net testbed, as root): the loopback net emulates no link and captures nothing")

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

// testbedNet is the namespace testbed as a Net.
type testbedNet struct{ *testbed.Testbed }

// OnTestbed is a testbed started by hand (a test's own) as a Net.
func OnTestbed(tb *testbed.Testbed) Net { return testbedNet{tb} }

func (testbedNet) Kind() string                         { return NetTestbed }
func (n testbedNet) IP(host string) string              { return n.IPs[host] }
func (n testbedNet) NetNS(host string) string           { return n.NS[host] }
func (n testbedNet) Sniff(host string) (Sniffer, error) { return n.Testbed.Sniff(host) }

// EmulatorOwnProcess says the emulator runs in a process of its own
// (testbed.Spec.Separate), which a link check records.
func (n testbedNet) EmulatorOwnProcess() bool { return n.Spec.Separate }

// loopback is a Net of hosts on 127.a.b.1, 127.a.b.2, … in this process's
// network: a /24 of its own, found from the testbed's name, so that two
// experiments (two test packages at once) bind the same ports on other
// addresses, and a resumed run finds its hosts where they were (a task's
// key holds its server's address). The standard ports (53, 443, 853)
// need root, CAP_NET_BIND_SERVICE, or a user and network namespace of
// one's own (unshare -rn), where the process may bind them.
type loopback struct {
	prefix string
	at     int // its /24's index, in loopbackUsed while open
	ips    map[string]string
}

func newLoopback(spec testbed.Spec) (*loopback, error) {
	hosts := spec.Hosts
	if len(hosts) == 0 {
		hosts = []string{"client", "server"}
	}
	if len(hosts) > 250 {
		return nil, fmt.Errorf("at most 250 hosts")
	}
	if spec.PcapDir != "" {
		return nil, fmt.Errorf("captures %w", ErrNeedsTestbed)
	}
	// 127.100-199.x.0/24: clear of 127.0.0.0/24 (the machine's own
	// services) and 127.53.0.0/16 (the page workers' stubs).
	h := fnv.New32a()
	h.Write([]byte(spec.Name))
	at := int(h.Sum32() % (100 * 256))
	loopbackMu.Lock()
	defer loopbackMu.Unlock()
	for loopbackUsed[at] { // this process runs that one already
		at = (at + 1) % (100 * 256)
	}
	loopbackUsed[at] = true
	n := &loopback{prefix: fmt.Sprintf("127.%d.%d.", 100+at/256, at%256), ips: map[string]string{}}
	for i, h := range hosts {
		n.ips[h] = n.prefix + strconv.Itoa(i+1)
	}
	if err := n.canBind(); err != nil {
		delete(loopbackUsed, at)
		return nil, err
	}
	n.at = at
	return n, nil
}

var (
	loopbackMu   sync.Mutex
	loopbackUsed = map[int]bool{} // the /24s of this process's open loopback nets
)

// canBind says, before anything is measured, whether the standard ports
// can be bound here.
func (n *loopback) canBind() error {
	for _, ip := range n.ips {
		l, err := net.ListenPacket("udp", net.JoinHostPort(ip, "53"))
		if err != nil {
			return fmt.Errorf("the loopback net binds the standard ports (53, 443, 853) on 127.x.y.z: %w; run as root, or in a user and network namespace of your own (unshare -rn)", err)
		}
		l.Close()
		return nil
	}
	return nil
}

func (*loopback) Kind() string            { return NetLoopback }
func (n *loopback) IP(host string) string { return n.ips[host] }
func (*loopback) NetNS(string) string     { return "" }

// Close frees its /24 for another net of this process.
func (n *loopback) Close() error {
	loopbackMu.Lock()
	delete(loopbackUsed, n.at)
	loopbackMu.Unlock()
	return nil
}

func (*loopback) Sniff(string) (Sniffer, error) {
	return nil, fmt.Errorf("capturing a link %w", ErrNeedsTestbed)
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
