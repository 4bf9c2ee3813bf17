//go:build linux

package confine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/doxlab/doxlab/internal/blocklist"
)

// runDir holds a lock for setting up, and a file per namespace naming the
// process that owns it, so that the next worker removes what a killed
// one left.
const runDir = "/run/doxlab-pages"

// Net is one confined network: a namespace for a browser, its pair to
// this (the vantage point's) namespace, and both firewalls.
type Net struct {
	// NS is the browser's network namespace, for `ip netns exec`
	// (browser.Options.NetNS).
	NS string
	// Stub is the vantage point's end of the pair, where the stub
	// listens: its port 53 is all the browser may reach of the machine.
	Stub netip.Addr

	n       int
	veth    string
	browser netip.Addr
	rules   string // the browser's firewall as last applied
}

func names(n int) (ns, veth, table string) {
	return fmt.Sprintf("doxlab-page-%d", n), fmt.Sprintf("dxb%d", n), fmt.Sprintf("doxlab_page_%d", n)
}

// New makes a confined network whose browser may go where p allows, in
// the network namespace this process runs in. It needs root.
func New(p *blocklist.Policy) (*Net, error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("confining the browser needs root: it makes a network namespace and firewall rules")
	}
	for tool, pkg := range map[string]string{"ip": "iproute2", "nft": "nftables"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("confining the browser: %s not found (apt-get install %s)", tool, pkg)
		}
	}
	unlock, err := lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	sweep()
	n := -1
	for i := range maxNets {
		if _, err := os.Stat(pidFile(i)); errors.Is(err, os.ErrNotExist) {
			n = i
			break
		}
	}
	if n < 0 {
		return nil, fmt.Errorf("confining the browser: all %d networks are in use", maxNets)
	}
	if err := os.WriteFile(pidFile(n), []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
		return nil, err
	}
	c := &Net{n: n}
	c.NS, c.veth, _ = names(n)
	c.Stub, c.browser = subnet(n)
	if err := c.setUp(); err != nil {
		teardown(n)
		return nil, fmt.Errorf("confining the browser: %w", err)
	}
	if err := c.SetPolicy(p); err != nil {
		teardown(n)
		return nil, err
	}
	return c, nil
}

func pidFile(n int) string { return filepath.Join(runDir, strconv.Itoa(n)+".pid") }

// lock serialises setting up and tearing down between the workers of
// one machine.
func lock() (func(), error) {
	if err := os.MkdirAll(runDir, 0o700); err != nil {
		return nil, fmt.Errorf("confining the browser: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(runDir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("confining the browser: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("confining the browser: %w", err)
	}
	return func() { f.Close() }, nil
}

// sweep removes the networks of processes that are gone.
func sweep() {
	entries, _ := os.ReadDir(runDir)
	for _, e := range entries {
		num, ok := strings.CutSuffix(e.Name(), ".pid")
		n, err := strconv.Atoi(num)
		if !ok || err != nil {
			continue
		}
		b, _ := os.ReadFile(pidFile(n))
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		if pid > 0 && alive(pid) {
			continue
		}
		teardown(n)
	}
}

func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// setUp makes the namespace and the pair, addresses them, and puts the
// vantage point's side of the firewall in place.
func (c *Net) setUp() error {
	_, _, table := names(c.n)
	vantage := c.Stub.String()
	steps := [][]string{
		{"netns", "add", c.NS},
		{"link", "add", c.veth, "type", "veth", "peer", "name", "eth0", "netns", c.NS},
		// No IPv6 link-local addresses: their duplicate detection ends a
		// second or two after the link is up, and Chromium takes that
		// address change for a new network (ERR_NETWORK_CHANGED).
		{"link", "set", c.veth, "addrgenmode", "none"},
		{"-n", c.NS, "link", "set", "eth0", "addrgenmode", "none"},
		{"addr", "add", vantage + "/30", "dev", c.veth},
		{"link", "set", c.veth, "up"},
		{"-n", c.NS, "addr", "add", c.browser.String() + "/30", "dev", "eth0"},
		{"-n", c.NS, "link", "set", "eth0", "up"},
		{"-n", c.NS, "link", "set", "lo", "up"},
		{"-n", c.NS, "route", "add", "default", "via", vantage},
	}
	for _, s := range steps {
		if err := run(nil, "ip", s...); err != nil {
			return err
		}
	}
	if err := forwarding(); err != nil {
		return err
	}
	rules := fmt.Sprintf(`table inet %[1]s {}
delete table inet %[1]s
table inet %[1]s {
	chain input {
		type filter hook input priority filter - 1; policy accept;
		iifname "%[2]s" ip daddr %[3]s meta l4proto { tcp, udp } th dport %[5]d accept
		iifname "%[2]s" ct state established,related accept
		iifname "%[2]s" drop
	}
	chain forward {
		type filter hook forward priority filter - 1; policy accept;
		iifname "%[2]s" ip saddr %[4]s accept
		iifname "%[2]s" drop
		oifname "%[2]s" ct state established,related accept
		oifname "%[2]s" drop
	}
	chain postrouting {
		type nat hook postrouting priority srcnat; policy accept;
		ip saddr %[4]s oifname != "%[2]s" masquerade
	}
}
`, table, c.veth, vantage, c.browser, stubPort)
	return run([]byte(rules), "nft", "-f", "-")
}

// forwarding turns IPv4 forwarding on in this namespace if it is off,
// with a table (doxlab_forward) that forwards nothing but the browsers'
// pairs, so the machine routes nothing else it did not before. The last
// network closed turns it off again.
func forwarding() error {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_forward")
	if err != nil {
		return err
	}
	if strings.TrimSpace(string(b)) == "1" {
		return nil
	}
	rules := `table inet doxlab_forward {
	chain forward {
		type filter hook forward priority filter - 2; policy accept;
		iifname != "dxb*" oifname != "dxb*" drop
	}
}
`
	if err := run([]byte(rules), "nft", "-f", "-"); err != nil {
		return err
	}
	if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644); err != nil {
		run(nil, "nft", "delete", "table", "inet", "doxlab_forward")
		return fmt.Errorf("IPv4 forwarding is off and cannot be turned on (%w): in a container, start it with the sysctl net.ipv4.ip_forward=1", err)
	}
	return nil
}

// unforward turns forwarding off where forwarding turned it on, once no
// browser's pair is left in this namespace.
func unforward() {
	if run(nil, "nft", "list", "table", "inet", "doxlab_forward") != nil {
		return // on before doxlab came, or turned off already
	}
	out, err := exec.Command("ip", "-o", "link", "show").Output()
	if err != nil || bytes.Contains(out, []byte(": dxb")) {
		return
	}
	if os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("0"), 0o644) == nil {
		run(nil, "nft", "delete", "table", "inet", "doxlab_forward")
	}
}

// SetPolicy applies p to the browser's firewall: where new connections
// may go from now on.
func (c *Net) SetPolicy(p *blocklist.Policy) error {
	rules, err := c.browserRules(p)
	if err != nil {
		return err
	}
	if rules == c.rules {
		return nil
	}
	if err := run([]byte(rules), "ip", "netns", "exec", c.NS, "nft", "-f", "-"); err != nil {
		return fmt.Errorf("confining the browser: %w", err)
	}
	c.rules = rules
	return nil
}

// browserRules is the browser's firewall for p: the stub's port, then
// the blocklist and the vantage point's own addresses (refused even where
// allowed), then what p allows, then every special-purpose block.
func (c *Net) browserRules(p *blocklist.Policy) (string, error) {
	if p == nil {
		p = &blocklist.Policy{}
	}
	var block, allow, special []string
	for _, s := range p.Block.Prefixes() {
		if pre, err := netip.ParsePrefix(s); err == nil && pre.Addr().Is4() {
			block = append(block, pre.String())
		}
	}
	own, err := ownAddrs()
	if err != nil {
		return "", err
	}
	// The stub's address among them, listed or not yet: it is the
	// vantage point's own, and its one port the browser may reach is
	// accepted before. An opt-in (allow4) opens none of them.
	if !slices.Contains(own, c.Stub) {
		own = append(own, c.Stub)
	}
	for _, a := range own {
		if a.Is4() {
			block = append(block, a.String())
		}
	}
	for _, pre := range p.Allow {
		if pre.Addr().Is4() {
			allow = append(allow, pre.String())
		}
	}
	for _, s := range blocklist.Special() {
		if s.Prefix.Addr().Is4() {
			special = append(special, s.Prefix.String())
		}
	}
	set := func(name string, elems []string) string {
		s := fmt.Sprintf("\tset %s {\n\t\ttype ipv4_addr; flags interval; auto-merge;\n", name)
		if len(elems) > 0 {
			s += "\t\telements = { " + strings.Join(elems, ", ") + " }\n"
		}
		return s + "\t}\n"
	}
	refuse := func(family, addr string) string {
		return fmt.Sprintf(`	chain refuse%[1]s {
		meta l4proto { tcp, udp } update @seen%[1]s { %[2]s daddr . meta l4proto . th dport }
		counter name refused
		meta l4proto tcp reject with tcp reset
		reject with icmpx admin-prohibited
	}
`, family, addr)
	}
	var b strings.Builder
	b.WriteString("table inet doxlab {}\ndelete table inet doxlab\ntable inet doxlab {\n\tcounter refused {}\n")
	b.WriteString("\tset seen4 {\n\t\ttype ipv4_addr . inet_proto . inet_service; flags dynamic; size 65535;\n\t}\n")
	b.WriteString("\tset seen6 {\n\t\ttype ipv6_addr . inet_proto . inet_service; flags dynamic; size 65535;\n\t}\n")
	b.WriteString(set("block4", block) + set("allow4", allow) + set("special4", special))
	b.WriteString(refuse("4", "ip") + refuse("6", "ip6"))
	fmt.Fprintf(&b, `	chain output {
		type filter hook output priority filter; policy accept;
		ct state established,related accept
		ip daddr %s meta l4proto { tcp, udp } th dport %d accept
		meta nfproto ipv6 goto refuse6
		ip daddr @block4 goto refuse4
		ip daddr @allow4 accept
		ip daddr @special4 goto refuse4
	}
}
`, c.Stub, stubPort)
	return b.String(), nil
}

// ownAddrs are the addresses of this namespace's interfaces.
func ownAddrs() ([]netip.Addr, error) {
	out, err := exec.Command("ip", "-j", "addr", "show").Output()
	if err != nil {
		return nil, fmt.Errorf("listing the vantage point's addresses: %w", err)
	}
	var links []struct {
		AddrInfo []struct {
			Local string `json:"local"`
		} `json:"addr_info"`
	}
	if err := json.Unmarshal(out, &links); err != nil {
		return nil, fmt.Errorf("listing the vantage point's addresses: %w", err)
	}
	var addrs []netip.Addr
	for _, l := range links {
		for _, a := range l.AddrInfo {
			if ip, err := netip.ParseAddr(a.Local); err == nil {
				addrs = append(addrs, ip.Unmap())
			}
		}
	}
	return addrs, nil
}

// Refused are the destinations refused since the last call, and how many
// packets were refused on the way to them; both start again from zero.
func (c *Net) Refused() ([]Refusal, int, error) {
	var out []Refusal
	for _, set := range []string{"seen4", "seen6"} {
		b, err := exec.Command("ip", "netns", "exec", c.NS, "nft", "-j", "list", "set", "inet", "doxlab", set).Output()
		if err != nil {
			return nil, 0, fmt.Errorf("reading the browser's refusals: %w", err)
		}
		rs, err := parseSet(b)
		if err != nil {
			return nil, 0, err
		}
		out = append(out, rs...)
		if err := run(nil, "ip", "netns", "exec", c.NS, "nft", "flush", "set", "inet", "doxlab", set); err != nil {
			return nil, 0, err
		}
	}
	b, err := exec.Command("ip", "netns", "exec", c.NS, "nft", "-j", "reset", "counter", "inet", "doxlab", "refused").Output()
	if err != nil {
		return nil, 0, fmt.Errorf("reading the browser's refusals: %w", err)
	}
	var counter struct {
		Nftables []struct {
			Counter *struct {
				Packets int `json:"packets"`
			} `json:"counter"`
		} `json:"nftables"`
	}
	if err := json.Unmarshal(b, &counter); err != nil {
		return nil, 0, fmt.Errorf("reading the browser's refusals: %w", err)
	}
	packets := 0
	for _, x := range counter.Nftables {
		if x.Counter != nil {
			packets += x.Counter.Packets
		}
	}
	slices.SortFunc(out, func(a, b Refusal) int {
		return strings.Compare(fmt.Sprintf("%s/%s/%05d", a.Addr, a.Proto, a.Port), fmt.Sprintf("%s/%s/%05d", b.Addr, b.Proto, b.Port))
	})
	return out, packets, nil
}

// parseSet reads the elements of a set of address . protocol . port as
// nft -j lists them.
func parseSet(b []byte) ([]Refusal, error) {
	var doc struct {
		Nftables []struct {
			Set *struct {
				Elem []struct {
					Concat []any `json:"concat"`
				} `json:"elem"`
			} `json:"set"`
		} `json:"nftables"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("reading the browser's refusals: %w", err)
	}
	var out []Refusal
	for _, x := range doc.Nftables {
		if x.Set == nil {
			continue
		}
		for _, e := range x.Set.Elem {
			if len(e.Concat) != 3 {
				continue
			}
			addr, _ := e.Concat[0].(string)
			proto, _ := e.Concat[1].(string)
			port, _ := e.Concat[2].(float64)
			out = append(out, Refusal{Addr: addr, Proto: proto, Port: int(port)})
		}
	}
	return out, nil
}

// Close kills what runs in the namespace, removes the namespace, its
// pair and both firewalls.
func (c *Net) Close() error {
	unlock, err := lock()
	if err != nil {
		return err
	}
	defer unlock()
	teardown(c.n)
	return nil
}

// teardown removes network n, whatever is left of it.
func teardown(n int) {
	ns, veth, table := names(n)
	if out, err := exec.Command("ip", "netns", "pids", ns).Output(); err == nil {
		for _, f := range strings.Fields(string(out)) {
			if pid, err := strconv.Atoi(f); err == nil {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	run(nil, "ip", "netns", "del", ns)
	run(nil, "ip", "link", "del", veth) // gone with the namespace, unless it was never moved
	run(nil, "nft", "delete", "table", "inet", table)
	os.Remove(pidFile(n))
	unforward()
}

// run runs a command with stdin, its output in the error.
func run(stdin []byte, name string, args ...string) error {
	cmd := exec.Command(name, args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
