package testbed

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Testbed is a running testbed in this process.
type Testbed struct {
	State
	dir      string
	emu      *emulator
	links    map[string]*link
	ctl      net.Listener
	mu       sync.Mutex
	once     sync.Once
	pmqos    *os.File // the PM QoS request of LowLatency, held open
	spin     *idleSpinners
	kmu      sync.Mutex // kernelPaths
	noKernel error      // why the kernel cannot forward (no ingress qdisc, u32 or mirred here)
	cross    map[string]*crossFlows
	child    *child // the emulator's process, for a Separate testbed
}

// Start creates the hosts and runs the link emulator in this process (or,
// with spec.Separate, in a process of its own) until Close. It refuses to start over a testbed that is still running, and
// clears the leftovers of one that died.
func Start(spec Spec) (*Testbed, error) {
	wait, err := waitForHolder()
	if err != nil {
		return nil, err
	}
	if err := checkPrivileges(); err != nil {
		return nil, err
	}
	if err := spec.defaults(); err != nil {
		return nil, err
	}
	for deadline := time.Now().Add(wait); ; time.Sleep(200 * time.Millisecond) {
		st, err := Load(spec.Name)
		if err != nil || !st.Alive() {
			break
		}
		if time.Now().After(deadline) || st.PID == os.Getpid() { // never wait for ourselves
			return nil, &UpError{Name: spec.Name, PID: st.PID}
		}
	}
	if err := Down(spec.Name); err != nil {
		return nil, fmt.Errorf("clearing an old testbed %s: %w", spec.Name, err)
	}
	if spec.Separate {
		return startChild(spec)
	}
	tb := &Testbed{dir: stateDir(spec.Name), links: map[string]*link{}}
	if spec.LowLatency {
		f, err := os.OpenFile("/dev/cpu_dma_latency", os.O_WRONLY, 0)
		if err == nil {
			_, err = f.Write([]byte{0, 0, 0, 0}) // an int32 of 0 µs; the request lasts while f is open
		}
		if err != nil {
			return nil, fmt.Errorf("holding a CPU latency request for low latency: %w", err)
		}
		tb.pmqos = f
		if tb.spin, err = startIdleSpinners(); err != nil {
			f.Close()
			return nil, err
		}
	}
	tb.State = State{Spec: spec, PID: os.Getpid(), Started: time.Now().UTC(), NS: map[string]string{}, IPs: map[string]string{}, Profiles: map[string]Profile{}}
	if err := tb.build(); err != nil {
		tb.Close()
		return nil, err
	}
	for _, h := range spec.Hosts {
		if err := tb.setCross(h, tb.Profiles[h].Cross); err != nil {
			tb.Close()
			return nil, err
		}
	}
	return tb, nil
}

// waitForHolder is how long Start waits for a live testbed of its name
// to end. Two testbeds of one name would share namespaces; two running
// at once would also disturb each other's timing. A live holder is an
// error, unless DOXLAB_TESTBED_WAIT says how long to wait for it (the
// tests, whose packages run in parallel, set it): a value that is no
// duration is refused, not taken for none.
func waitForHolder() (time.Duration, error) {
	v := os.Getenv("DOXLAB_TESTBED_WAIT")
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("DOXLAB_TESTBED_WAIT=%q: want how long to wait for another testbed of the name to end, such as 8m", v)
	}
	return d, nil
}

func (tb *Testbed) build() error {
	spec := tb.Spec
	if err := os.MkdirAll(tb.dir, 0o755); err != nil {
		return err
	}
	// Record the state first: whatever happens next, 'down' can undo it.
	for i, h := range spec.Hosts {
		tb.NS[h] = nsName(spec.Name, h)
		base := netip.MustParsePrefix(spec.Subnet).Addr().As4()
		base[3] = byte(i + 1)
		tb.IPs[h] = netip.AddrFrom4(base).String()
		pname := "none"
		if i == 0 {
			pname = spec.Profile
		}
		if p, ok := spec.HostProfiles[h]; ok {
			pname = p
		}
		p, err := LookupProfile(pname)
		if err != nil {
			return err
		}
		tb.Profiles[h] = p
	}
	if err := tb.save(); err != nil {
		return err
	}
	if spec.Backend == "netem" {
		if err := tb.startNetem(); err != nil {
			return err
		}
		return tb.serveControl()
	}
	tb.emu = newEmulator()
	sw := switchNS(spec.Name)
	if err := ip("netns", "add", sw); err != nil {
		return err
	}
	for i, h := range spec.Hosts {
		ns := tb.NS[h]
		if err := ip("netns", "add", ns); err != nil {
			return err
		}
		if err := ip("-n", ns, "link", "set", "lo", "up"); err != nil {
			return err
		}
		p := tb.Profiles[h]
		if err := addPort(sw, ns, i, tb.IPs[h]+"/24", p.mtu()); err != nil {
			return fmt.Errorf("host %s: %w", h, err)
		}
		// An ingress qdisc on the port, for the kernel's own forwarding.
		if err := tc("-n", sw, "qdisc", "add", "dev", portName(i), "ingress"); err != nil {
			tb.noKernel = err
		}
		fd, index, err := openPort(sw, portName(i))
		if err != nil {
			return fmt.Errorf("host %s: %w", h, err)
		}
		tap, err := openTap(ns)
		if err != nil {
			unix.Close(fd)
			return fmt.Errorf("host %s: %w", h, err)
		}
		l := &link{host: h, ip: net.ParseIP(tb.IPs[h]).To4(), tap: tap, port: fd,
			up: newStage(p.Up, uint64(2*i+1)), down: newStage(p.Down, uint64(2*i+2))}
		l.to = unix.RawSockaddrLinklayer{Family: unix.AF_PACKET, Protocol: htons(unix.ETH_P_IP), Ifindex: int32(index), Halen: 6}
		copy(l.to.Addr[:], hostMAC)
		if err := tb.emu.add(l); err != nil {
			unix.Close(fd)
			unix.Close(tap)
			return err
		}
		tb.links[h] = l
		if l.capUp, err = newCapture(spec.PcapDir, h+"-up.pcap"); err != nil {
			return err
		}
		if l.capDown, err = newCapture(spec.PcapDir, h+"-down.pcap"); err != nil {
			return err
		}
		if err := tb.writeEtc(h); err != nil {
			return err
		}
	}
	if err := tb.kernelPaths(); err != nil {
		tb.noKernel = err
		for i := range spec.Hosts { // no filter half installed
			tc("-n", sw, "qdisc", "del", "dev", portName(i), "ingress")
		}
	}
	if tb.noKernel != nil {
		fmt.Fprintf(os.Stderr, "testbed %s: the kernel cannot forward undelayed paths (%v); the emulator forwards them, waking up for each packet\n", spec.Name, tb.noKernel)
	}
	tb.emu.start()
	return tb.serveControl()
}

// kernelPaths lets the kernel forward, between the ports, every pair of
// hosts whose path has nothing to emulate (both stages transparent), and
// takes it back from the kernel where a profile now shapes it. The
// kernel's path adds no wake-up of the emulator: on a VM that is most of
// the RTT of profile none. With a capture the emulator still reads those
// packets off the taps to write them down. While a path switches, its
// packets may pass twice for the few ms tc takes; duplicating is chosen
// over losing.
func (tb *Testbed) kernelPaths() error {
	tb.kmu.Lock()
	defer tb.kmu.Unlock()
	defer tb.emu.pace()
	if tb.noKernel != nil {
		return nil
	}
	sw := switchNS(tb.Spec.Name)
	var add, del []string
	var on, off [][2]*link
	for i, a := range tb.emu.all {
		for j, b := range tb.emu.all {
			if i == j {
				continue
			}
			want, have := a.up.transparent() && b.down.transparent(), a.kernel[j].Load()
			pref := strconv.Itoa(j + 1)
			switch {
			case want && !have:
				add = append(add, fmt.Sprintf("filter add dev %s ingress pref %s protocol ip u32 match ip dst %s/32 action mirred egress redirect dev %s",
					portName(i), pref, b.ip, portName(j)))
				on = append(on, [2]*link{a, b})
			case !want && have:
				del = append(del, fmt.Sprintf("filter del dev %s ingress pref %s", portName(i), pref))
				off = append(off, [2]*link{a, b})
			}
		}
	}
	// The emulator takes a path back before the kernel lets it go, and
	// the kernel takes one on before the emulator lets it go.
	for _, p := range off {
		p[0].kernel[p[1].index].Store(false)
	}
	if err := tb.tapFilters(); err != nil {
		return err
	}
	if err := tcBatch(sw, append(del, add...)); err != nil {
		return err
	}
	for _, p := range on {
		p[0].kernel[p[1].index].Store(true)
	}
	return tb.tapFilters()
}

// tapFilters keeps the packets the kernel forwards off the taps, so they
// do not wake the emulator, unless it captures them.
func (tb *Testbed) tapFilters() error {
	for _, a := range tb.emu.all {
		var skip []net.IP
		for _, b := range tb.emu.all {
			if a.kernel[b.index].Load() && tb.Spec.PcapDir == "" {
				skip = append(skip, b.ip)
			}
		}
		if err := setFilter(a.tap, tapFilter(skip)); err != nil {
			return fmt.Errorf("filter on %s's tap: %w", a.host, err)
		}
	}
	return nil
}

func switchNS(tb string) string { return nsName(tb, "switch") }

// writeEtc gives a host its own hosts, resolv.conf and nsswitch.conf,
// which 'ip netns exec' (and so Command) mounts over /etc.
func (tb *Testbed) writeEtc(host string) error {
	dir := filepath.Join("/etc/netns", tb.NS[host])
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var hosts strings.Builder
	hosts.WriteString("127.0.0.1\tlocalhost\n::1\tlocalhost\n")
	for _, h := range tb.Spec.Hosts {
		fmt.Fprintf(&hosts, "%s\t%s\n", tb.IPs[h], h)
	}
	ns := tb.IPs[tb.Spec.Nameserver]
	if n, ok := tb.Spec.HostNameservers[host]; ok {
		ns = n
		if ip, ok := tb.IPs[n]; ok {
			ns = ip
		}
	}
	files := map[string]string{
		"hosts":         hosts.String(),
		"resolv.conf":   fmt.Sprintf("nameserver %s\noptions timeout:2 attempts:1\n", ns),
		"nsswitch.conf": "hosts: files dns\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func (tb *Testbed) save() error {
	b, _ := json.MarshalIndent(tb.State, "", "  ")
	tmp := filepath.Join(tb.dir, "state.json.tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(tb.dir, "state.json"))
}

// Close stops the emulator and removes everything the testbed created.
func (tb *Testbed) Close() error {
	var err error
	tb.once.Do(func() {
		if tb.child != nil {
			err = tb.child.close(tb.Spec.Name)
			return
		}
		if tb.ctl != nil {
			tb.ctl.Close()
		}
		tb.stopCross()
		if tb.emu != nil {
			err = tb.emu.stop()
		}
		err = errors.Join(err, removeAll(tb.Spec.Name, tb.NS))
		tb.spin.close()
		if tb.pmqos != nil {
			tb.pmqos.Close()
		}
	})
	return err
}

// Down stops testbed name wherever it runs and removes its namespaces,
// their /etc files and its state, also after a crash. Nothing there is
// not an error.
func Down(name string) error {
	if err := CheckName(name); err != nil {
		return err
	}
	st, err := Load(name)
	ns := map[string]string{}
	if err == nil {
		ns = st.NS
		if st.Alive() && st.PID != os.Getpid() {
			syscall.Kill(st.PID, syscall.SIGTERM)
			for i := 0; i < 50 && st.Alive(); i++ {
				time.Sleep(100 * time.Millisecond)
			}
			if st.Alive() {
				syscall.Kill(st.PID, syscall.SIGKILL)
			}
		}
	}
	return removeAll(name, ns)
}

// removeAll deletes the namespaces of testbed name (those in ns and any
// other with its prefix that no other testbed's state names: testbed
// doxlab's prefix is also its scratch testbed doxlab-bloat's), their
// /etc/netns directories and its state.
func removeAll(name string, ns map[string]string) error {
	prefix := "doxlab-" + name + "-"
	names := map[string]bool{}
	for _, n := range ns {
		names[n] = true
	}
	others := map[string]bool{}
	if all, err := Names(); err == nil {
		for _, o := range all {
			if st, err := Load(o); err == nil && o != name {
				for _, n := range st.NS {
					others[n] = true
				}
			}
		}
	}
	if entries, err := os.ReadDir("/run/netns"); err == nil {
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), prefix) && !others[e.Name()] {
				names[e.Name()] = true
			}
		}
	}
	var errs []error
	for n := range names {
		if _, err := os.Stat("/run/netns/" + n); err == nil {
			if err := ip("netns", "del", n); err != nil {
				errs = append(errs, err)
			}
		}
		if err := os.RemoveAll(filepath.Join("/etc/netns", n)); err != nil {
			errs = append(errs, err)
		}
	}
	if err := os.RemoveAll(stateDir(name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Command runs a program inside a host, with the host's /etc/hosts,
// resolv.conf and nsswitch.conf (ip netns exec mounts them over /etc).
func (st *State) Command(host string, argv ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", st.NS[host]}, argv...)...)
}

// Run calls f on a thread inside host's network namespace: sockets f
// opens belong to the host. f must not start goroutines that expect to be
// in the namespace; the sockets themselves may be used from anywhere.
func (st *State) Run(host string, f func() error) error {
	ns, ok := st.NS[host]
	if !ok {
		return fmt.Errorf("no host %q in testbed %s", host, st.Spec.Name)
	}
	return inNetns(ns, f)
}

// Alive reports whether the process running the emulator is still there.
func (st *State) Alive() bool {
	if st.PID <= 0 {
		return false
	}
	if err := syscall.Kill(st.PID, 0); err != nil {
		return false
	}
	cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", st.PID))
	return len(cmd) > 0
}
