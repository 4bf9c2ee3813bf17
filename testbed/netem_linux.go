package testbed

import (
	"fmt"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// The netem backend shapes the link with the kernel's sch_netem instead of
// the userspace emulator, for kernels that have it: two hosts joined by a
// veth pair, each end's egress shaped (the client's end is "up", the
// server's "down"). Loss models and queues map onto netem's own options.

// NetemAvailable reports whether this kernel can run sch_netem, probing in
// a scratch namespace so nothing outside the testbed is touched.
func NetemAvailable() error {
	ns := fmt.Sprintf("doxlab-netem-probe-%d", time.Now().UnixNano()%1e6)
	if err := ip("netns", "add", ns); err != nil {
		return err
	}
	defer ip("netns", "del", ns)
	out, err := exec.Command("tc", "-n", ns, "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms").CombinedOutput()
	if err != nil {
		return fmt.Errorf("this kernel has no sch_netem (tc: %s); use the default userspace backend", strings.TrimSpace(string(out)))
	}
	return nil
}

// netemArgs turns a direction into tc netem options.
func netemArgs(d Direction) []string {
	args := []string{"netem"}
	if d.Delay > 0 || d.Jitter > 0 {
		args = append(args, "delay", usec(d.Delay))
		if d.Jitter > 0 {
			// netem's jitter reorders unless rate-limited; half each way
			// around the mean approximates the userspace jitter's range.
			args = append(args, usec(d.Jitter/2))
		}
	}
	if d.Rate > 0 {
		args = append(args, "rate", strconv.FormatFloat(d.Rate, 'f', 0, 64)+"bit")
	}
	if g := d.GilbertElliott; g != nil {
		args = append(args, "loss", "gemodel", pct(g.P), pct(g.R), pct(1-g.LossBad), pct(g.LossGood))
	} else if d.Loss > 0 {
		args = append(args, "loss", pct(d.Loss))
	}
	limit := d.QueuePackets
	if limit == 0 {
		limit = 1000
	}
	return append(args, "limit", strconv.Itoa(limit))
}

func usec(d time.Duration) string { return strconv.FormatInt(d.Microseconds(), 10) + "us" }
func pct(p float64) string        { return strconv.FormatFloat(100*p, 'f', 4, 64) + "%" }

// startNetem builds a two-host testbed on veth and netem.
func (tb *Testbed) startNetem() error {
	if len(tb.Spec.Hosts) != 2 {
		return fmt.Errorf("the netem backend joins exactly two hosts")
	}
	if err := NetemAvailable(); err != nil {
		return err
	}
	a, b := tb.Spec.Hosts[0], tb.Spec.Hosts[1]
	for _, h := range tb.Spec.Hosts {
		if err := ip("netns", "add", tb.NS[h]); err != nil {
			return err
		}
		if err := ip("-n", tb.NS[h], "link", "set", "lo", "up"); err != nil {
			return err
		}
	}
	if err := ip("link", "add", "dxn-"+tb.Spec.Name[:min(8, len(tb.Spec.Name))], "netns", tb.NS[a], "type", "veth", "peer", "name", "dx0", "netns", tb.NS[b]); err != nil {
		return err
	}
	if err := ip("-n", tb.NS[a], "link", "set", "dxn-"+tb.Spec.Name[:min(8, len(tb.Spec.Name))], "name", "dx0"); err != nil {
		return err
	}
	prefix := netip.MustParsePrefix(tb.Spec.Subnet)
	for _, h := range tb.Spec.Hosts {
		if err := ip("-n", tb.NS[h], "addr", "add", tb.IPs[h]+"/"+strconv.Itoa(prefix.Bits()), "dev", "dx0"); err != nil {
			return err
		}
		if err := ip("-n", tb.NS[h], "link", "set", "dx0", "up"); err != nil {
			return err
		}
		if err := tb.writeEtc(h); err != nil {
			return err
		}
	}
	return tb.applyNetem(a, tb.Profiles[a])
}

// applyNetem shapes host's link: its egress is "up", the peer's "down".
func (tb *Testbed) applyNetem(host string, p Profile) error {
	peer := tb.Spec.Hosts[1]
	if host == peer {
		peer = tb.Spec.Hosts[0]
	}
	for _, x := range []struct {
		ns string
		d  Direction
	}{{tb.NS[host], p.Up}, {tb.NS[peer], p.Down}} {
		if err := tc(append([]string{"-n", x.ns, "qdisc", "replace", "dev", "dx0", "root"}, netemArgs(x.d)...)...); err != nil {
			return err
		}
	}
	return nil
}
