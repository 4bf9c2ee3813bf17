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

// netemArgs turns a direction into tc netem options, or says what of it
// netem cannot emulate.
func netemArgs(d Direction) ([]string, error) {
	switch {
	case d.Trace != "":
		return nil, fmt.Errorf("the netem backend has no delivery traces (trace %s): use the userspace backend", d.Trace)
	case d.Queue != "" && d.Queue != "tail":
		return nil, fmt.Errorf("the netem backend has no %s queue: use the userspace backend", d.Queue)
	case d.QueueBytes > 0 || d.QueueTime > 0:
		return nil, fmt.Errorf("the netem backend bounds its queue in packets only (queue_packets)")
	}
	args := []string{"netem"}
	if d.Delay > 0 || d.Jitter > 0 {
		// The userspace emulator adds a uniform [0, Jitter) to the
		// delay; netem's jitter is uniform around the delay it is given,
		// so centring it on Delay + Jitter/2 keeps the range and the
		// mean. (netem's jitter reorders packets, which the emulator's
		// never does.)
		args = append(args, "delay", usec(d.Delay+d.Jitter/2))
		if d.Jitter > 0 {
			args = append(args, usec(d.Jitter/2))
		}
	}
	if d.Rate > 0 {
		args = append(args, "rate", strconv.FormatFloat(d.Rate, 'f', 0, 64)+"bit")
	}
	if g := d.GilbertElliott; g != nil {
		// tc's four: p (good to bad), r (bad to good), then "1-h" and
		// "1-k", the loss probabilities in the bad and the good state
		// (tc turns 1-h into the kernel's h; tc-netem(8)).
		args = append(args, "loss", "gemodel", pct(g.P), pct(g.R), pct(g.LossBad), pct(g.LossGood))
	} else if d.Loss > 0 {
		args = append(args, "loss", pct(d.Loss))
	}
	limit := d.QueuePackets
	if limit == 0 {
		limit = 1000
	}
	return append(args, "limit", strconv.Itoa(limit)), nil
}

func usec(d time.Duration) string { return strconv.FormatInt(d.Microseconds(), 10) + "us" }
func pct(p float64) string        { return strconv.FormatFloat(100*p, 'f', 4, 64) + "%" }

// startNetem builds a two-host testbed on veth and netem.
func (tb *Testbed) startNetem() error {
	if len(tb.Spec.Hosts) != 2 {
		return fmt.Errorf("the netem backend joins exactly two hosts")
	}
	a, b := tb.Spec.Hosts[0], tb.Spec.Hosts[1]
	if _, err := netemProfile(tb.Profiles[a]); err != nil {
		return err // before anything is built
	}
	if err := NetemAvailable(); err != nil {
		return err
	}
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
	args, err := netemProfile(p)
	if err != nil {
		return err
	}
	for i, ns := range []string{tb.NS[host], tb.NS[peer]} {
		if err := tc(append([]string{"-n", ns, "qdisc", "replace", "dev", "dx0", "root"}, args[i]...)...); err != nil {
			return err
		}
	}
	return nil
}

// netemProfile is the netem options of a profile's up and down
// directions, or what of it netem cannot emulate.
func netemProfile(p Profile) ([2][]string, error) {
	var args [2][]string
	if p.Cross.flows() > 0 {
		return args, fmt.Errorf("profile %s: the netem backend has no cross traffic: use the userspace backend", p.Name)
	}
	for i, d := range []Direction{p.Up, p.Down} {
		var err error
		if args[i], err = netemArgs(d); err != nil {
			return args, fmt.Errorf("profile %s: %w", p.Name, err)
		}
	}
	return args, nil
}
