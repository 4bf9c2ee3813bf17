package testutil

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/doxlab/doxlab/internal/netns"
)

// Netns is a network namespace of a test's own (root), removed when the
// test ends: a stand-in for a machine, such as a vantage point, whose
// traffic goes nowhere but to the test's other namespaces.
type Netns struct {
	Name string
	t    testing.TB
}

// NewNetns makes a namespace with its loopback up.
func NewNetns(t testing.TB, name string) *Netns {
	t.Helper()
	name = fmt.Sprintf("%s-%d", name, os.Getpid())
	exec.Command("ip", "netns", "del", name).Run()
	n := &Netns{Name: name, t: t}
	n.IP("netns", "add", name)
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "pids", name).Output(); err == nil {
			for _, f := range strings.Fields(string(out)) {
				exec.Command("kill", "-9", f).Run()
			}
		}
		exec.Command("ip", "netns", "del", name).Run()
	})
	n.IP("-n", name, "link", "set", "lo", "up")
	return n
}

// IP runs ip(8) with args, failing the test if it fails.
func (n *Netns) IP(args ...string) {
	n.t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		n.t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// Link joins n to m by a veth pair, with addr (a prefix) on n's end and
// peer on m's.
func (n *Netns) Link(m *Netns, dev, addr, peerDev, peer string) {
	n.t.Helper()
	n.IP("-n", n.Name, "link", "add", dev, "type", "veth", "peer", "name", peerDev, "netns", m.Name)
	n.IP("-n", n.Name, "addr", "add", addr, "dev", dev)
	n.IP("-n", m.Name, "addr", "add", peer, "dev", peerDev)
	n.IP("-n", n.Name, "link", "set", dev, "up")
	n.IP("-n", m.Name, "link", "set", peerDev, "up")
}

// Run runs f on an OS thread in the namespace: sockets it opens and
// processes it starts are there.
func (n *Netns) Run(f func() error) error {
	return InNetns(n.Name, f)
}

// Command is argv run in the namespace.
func (n *Netns) Command(argv ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", n.Name}, argv...)...)
}

// InNetns runs f on an OS thread switched into the named network
// namespace.
var InNetns = netns.Run
