// Package testbed builds doxlab's emulated network: Linux network
// namespaces ("hosts") joined through a userspace link emulator that
// gives each host's access link a delay, rate, queue, loss and jitter per
// direction, accurate to tens of microseconds and needing no sch_netem.
// Programs inside the hosts run unmodified: kernel TCP, quic-go, Chromium.
// Example (example_test.go) shows a testbed's life.
package testbed

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"
)

// StateRoot holds one directory per testbed: its state and control socket.
var StateRoot = "/run/doxlab/testbed"

// Spec describes a testbed. Zero fields take the defaults given.
type Spec struct {
	// Name prefixes everything the testbed creates ("doxlab-NAME-HOST").
	// Default "doxlab".
	Name string `json:"name"`
	// Hosts, in order. Default client and server.
	Hosts []string `json:"hosts"`
	// Subnet for the hosts' addresses, a /24; host i gets .i+1. Default 10.200.0.0/24.
	Subnet string `json:"subnet"`
	// Profile shapes the first host's access link (the client's, as in
	// the papers); the others are unshaped. Default "none".
	Profile string `json:"profile"`
	// HostProfiles overrides the profile per host.
	HostProfiles map[string]string `json:"host_profiles,omitempty"`
	// Nameserver is the host whose address goes into every host's
	// resolv.conf. Default "resolver" if there is one, else "server".
	Nameserver string `json:"nameserver"`
	// HostNameservers overrides the nameserver per host, with a host name
	// or an IP address: 127.0.0.1 puts a stub resolver running inside the
	// host into its programs' lookup path.
	HostNameservers map[string]string `json:"host_nameservers,omitempty"`
	// PcapDir, if set, receives HOST-up.pcap and HOST-down.pcap per host.
	PcapDir string `json:"pcap_dir,omitempty"`
	// Backend is "userspace" (default: the emulator) or "netem" (veth
	// and the kernel's sch_netem, two hosts only, where the kernel has it).
	Backend string `json:"backend,omitempty"`
	// LowLatency keeps every CPU from halting while the testbed runs: a
	// thread per CPU spins at SCHED_IDLE, the lowest priority, taking only
	// time nothing else wants, and a PM QoS request of 0 µs
	// (/dev/cpu_dma_latency) makes the kernel's idle loop poll. On a VM a
	// halted vCPU takes tens of µs to wake and then runs the network path
	// slowly for a while. The machine shows every CPU busy and draws full
	// power meanwhile, so it is opt-in; nothing remains once the testbed
	// stops.
	LowLatency bool `json:"low_latency,omitempty"`
	// Separate runs the emulator in a process of its own, this program
	// re-executed (see process.go), rather than in this one: then no
	// garbage collection of this process's work stops the links. The
	// testbed is used the same way; only MeasureLoadedRTT needs it here.
	Separate bool `json:"separate,omitempty"`
}

func (s *Spec) defaults() error {
	if s.Name == "" {
		s.Name = "doxlab"
	}
	if err := CheckName(s.Name); err != nil {
		return err
	}
	if len(s.Hosts) == 0 {
		s.Hosts = []string{"client", "server"}
	}
	if len(s.Hosts) > 250 {
		return fmt.Errorf("at most 250 hosts")
	}
	seen := map[string]bool{}
	for _, h := range s.Hosts {
		// A host's name goes into its namespace's name and into every
		// host's /etc/hosts: a testbed name's characters, no more.
		if err := checkName("host", h); err != nil {
			return err
		}
		if seen[h] {
			return fmt.Errorf("host %q named twice", h)
		}
		if h == "switch" {
			return fmt.Errorf("host name %q is taken by the namespace that joins the hosts", h)
		}
		seen[h] = true
	}
	if s.Subnet == "" {
		s.Subnet = "10.200.0.0/24"
	}
	if p, err := netip.ParsePrefix(s.Subnet); err != nil || !p.Addr().Is4() || p.Bits() != 24 {
		return fmt.Errorf("subnet %q: want an IPv4 /24", s.Subnet)
	}
	if s.Profile == "" {
		s.Profile = "none"
	}
	switch s.Backend {
	case "", "userspace":
		s.Backend = "userspace"
	case "netem":
		if s.PcapDir != "" {
			return fmt.Errorf("the netem backend has no link capture; capture with tshark inside a host")
		}
	default:
		return fmt.Errorf("unknown backend %q (want userspace or netem)", s.Backend)
	}
	if s.Nameserver == "" {
		s.Nameserver = "server"
		if seen["resolver"] {
			s.Nameserver = "resolver"
		}
	}
	for h, ns := range s.HostNameservers {
		if !seen[h] {
			return fmt.Errorf("nameserver for unknown host %q", h)
		}
		if !seen[ns] && net.ParseIP(ns) == nil {
			return fmt.Errorf("nameserver of %s: %q is neither a host nor an IP address", h, ns)
		}
	}
	return nil
}

// State is what a running testbed records on disk, so that 'down' can
// remove everything even after the emulator was killed.
type State struct {
	Spec     Spec               `json:"spec"`
	PID      int                `json:"pid"`
	Started  time.Time          `json:"started"`
	NS       map[string]string  `json:"namespaces"`
	IPs      map[string]string  `json:"ips"`
	Profiles map[string]Profile `json:"profiles"`
}

func stateDir(name string) string { return filepath.Join(StateRoot, name) }

// CheckName refuses a testbed name that is not one name: a testbed's
// state is StateRoot/NAME, which Down removes whole, so "", "." or ".."
// took every testbed's state with it (or all of /run/doxlab), and its
// namespaces are doxlab-NAME-HOST.
func CheckName(name string) error { return checkName("testbed", name) }

// checkName refuses a name (a testbed's or a host's, what says which)
// that is not 1 to 40 letters, digits, '-', '_' or '.', the first no '.'
// or '-'.
func checkName(what, name string) error {
	ok := name != "" && len(name) <= 40 && name[0] != '.' && name[0] != '-'
	for _, c := range name {
		ok = ok && ('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.')
	}
	if !ok {
		return fmt.Errorf("bad %s name %q: want 1 to 40 letters, digits, '-', '_' or '.', the first a letter, digit or '_'", what, name)
	}
	return nil
}

func nsName(tb, host string) string { return "doxlab-" + tb + "-" + host }

// UpError is a testbed already up under the name asked for, by another
// process: it must come down first.
type UpError struct {
	Name string
	PID  int
}

func (e *UpError) Error() string {
	return fmt.Sprintf("testbed %s is already up (pid %d)", e.Name, e.PID)
}

// TraceFit is how a trace-driven direction delivered, per 100 ms window
// while its queue stayed full: the octets that arrived against those the
// trace's opportunities carry in the window.
type TraceFit struct {
	Trace    string  `json:"trace"`
	Windows  int     `json:"windows"`  // compared
	ErrP50   float64 `json:"err_p50"`  // |arrived - trace| / trace, per window
	ErrMax   float64 `json:"err_max"`  //
	Total    float64 `json:"total"`    // arrived / trace over all windows
	Achieved float64 `json:"achieved"` // bit/s over the windows
	Offered  float64 `json:"offered"`  // bit/s sent
}

// QueueStats is what a CoDel, FQ-CoDel or PIE queue did during a check's
// throughput run: the packets' time in it (bucket bounds, within 25 %)
// and its drops.
type QueueStats struct {
	Discipline             string        `json:"discipline"`
	SojournP50, SojournP99 time.Duration `json:",omitempty"`
	Drops                  uint64        `json:"drops"`     // the AQM's
	Overlimit              uint64        `json:"overlimit"` // over queue_packets
}

// CrossStats is what a host's cross traffic delivered since it started.
type CrossStats struct {
	DownFlows, UpFlows int
	DownBytes, UpBytes int64
	Since              time.Time
}

// LoadedRTT is the RTT while one bulk TCP download fills the client's
// downlink: what the downlink's queue (tail drop, CoDel, FQ-CoDel, PIE) does
// to everything else on the link, a DNS query included.
type LoadedRTT struct {
	Profile string        `json:"profile"`
	Samples []RTTSample   `json:"samples"` // every 10 ms
	IdleP50 time.Duration `json:"idle_p50"`
	// Loaded: from one second into the download (its slow start over).
	LoadedP50, LoadedP99 time.Duration
	Goodput              float64 `json:"goodput"` // bit/s of the download
	CongestionControl    string  `json:"congestion_control"`
	// Steal is the CPU time the hypervisor took from this VM during the
	// download: a VM paused for a while stalls everything, the link too.
	Steal time.Duration `json:"steal"`
	Queue *QueueStats   `json:"queue,omitempty"`
}

// CheckResult is what 'testbed check' measured for one profile on the
// first host's link (the client's) towards the second (the server).
type CheckResult struct {
	Profile       string        `json:"profile"`
	ConfiguredRTT time.Duration `json:"configured_rtt"` // delays plus the probe's serialization
	Probes        int           `json:"probes"`
	Lost          int           `json:"lost"`
	// RTT error: measured minus configured, at the percentiles.
	ErrP50, ErrP90, ErrP99, ErrMax time.Duration
	// Steal is the CPU time the hypervisor took from this machine's
	// vCPUs while the probes ran, summed over them: a vCPU that is not
	// running delivers nothing on time, so on a VM it explains much of
	// the error's tail. Zero on bare metal.
	Steal time.Duration
	// GCPauses and GCPauseMax are the stop-the-world pauses of the
	// garbage collector of the process that runs the emulator while the
	// probes ran (bucket bounds, within 25 %): a pause stops the emulator
	// too, and a probe that crosses one arrives that much late.
	GCPauses   int
	GCPauseMax time.Duration
	// Preemption is the kernel's preemption model (sysinfo.Preemption):
	// under none, a busy machine delays the emulator's threads.
	Preemption string
	// LateP50 and LateP99 are how late the emulator delivered the
	// probes' packets (bucket bounds, within 25 %): its own share of the
	// error. The rest is the kernels' work along the path.
	LateP50, LateP99 time.Duration
	// LateMax is the latest of them: one late probe is the error's p99
	// over 100 probes, but not the lateness's p99 over their packets.
	LateMax time.Duration
	// Throughput per direction against the configured rate (0: unlimited,
	// not measured); for a trace, its mean rate, and what arrived per
	// 100 ms window against what the trace delivers in it (Up/DownTrace).
	UpRate, UpAchieved     float64 // bit/s
	DownRate, DownAchieved float64
	UpTrace, DownTrace     *TraceFit `json:",omitempty"`
	// UpQueue, DownQueue: a CoDel, FQ-CoDel or PIE queue's delay and drops
	// during the throughput run.
	UpQueue, DownQueue *QueueStats `json:",omitempty"`
	// EmulatorCPU is the emulator's CPU during the throughput runs, as a
	// fraction of one core.
	EmulatorCPU float64
	FIFO        bool // the writer threads ran SCHED_FIFO
}

// CheckOptions tune the check; zero values take the defaults.
type CheckOptions struct {
	Probes         int           // RTT probes; default 300
	Interval       time.Duration // between probes; default 5 ms
	Throughput     time.Duration // per direction; default 2 s (0 with SkipThroughput)
	SkipThroughput bool
}

// Check says what is wrong with the options, before a testbed starts: a
// negative count or time would measure nothing and report it, and one
// past these bounds is a typo. A check asked of a running testbed has
// checkTimeout in all: a minute of probes, two of throughput at most.
func (o CheckOptions) Check() error {
	d := o.withDefaults()
	switch {
	case o.Probes < 0 || o.Probes > MaxCheckProbes:
		return fmt.Errorf("%d RTT probes: want 1 to %d (0: the default, 300)", o.Probes, MaxCheckProbes)
	case o.Interval < 0 || o.Interval > time.Second:
		return fmt.Errorf("probe interval %v: want up to 1s (0: the default, 5ms)", o.Interval)
	case time.Duration(d.Probes)*d.Interval > time.Minute:
		return fmt.Errorf("%d probes %v apart take %v: want a minute at most", d.Probes, d.Interval, time.Duration(d.Probes)*d.Interval)
	case o.Throughput < 0 || o.Throughput > time.Minute:
		return fmt.Errorf("throughput test of %v a direction: want up to 1m (0: the default, 2s)", o.Throughput)
	}
	return nil
}

// withDefaults is o with its zeros as a check takes them.
func (o CheckOptions) withDefaults() CheckOptions {
	o.Probes = cmp.Or(o.Probes, 300)
	o.Interval = cmp.Or(o.Interval, 5*time.Millisecond)
	o.Throughput = cmp.Or(o.Throughput, 2*time.Second)
	return o
}

// MaxCheckProbes bounds CheckOptions.Probes: 12,000 at the default 5 ms
// are the minute of probes a check may take.
const MaxCheckProbes = 12_000

type request struct {
	Op      string        `json:"op"` // profile, stats, check or cross
	Host    string        `json:"host,omitempty"`
	Profile *Profile      `json:"profile,omitempty"`
	Check   *CheckOptions `json:"check,omitempty"`
}

type response struct {
	Error string       `json:"error,omitempty"`
	Stats *Stats       `json:"stats,omitempty"`
	Check *CheckResult `json:"check,omitempty"`
	Cross *CrossStats  `json:"cross,omitempty"` // nil: the host has no cross traffic running
}

// checkTimeout bounds a link check asked over the control socket.
const checkTimeout = 3 * time.Minute

// Stats are the emulator's counters.
type Stats struct {
	PID  int           `json:"pid"`
	FIFO bool          `json:"sched_fifo"` // writer threads run SCHED_FIFO
	CPU  time.Duration `json:"cpu"`        // CPU time of the emulator's threads so far
	// GCCycles counts the collections of the emulator's process so far:
	// each stops it. A Separate testbed's process collects only near
	// its memory limit, so this stays 0 there.
	GCCycles uint64               `json:"gc_cycles"`
	Hosts    map[string]HostStats `json:"hosts"`
	Profiles map[string]Profile   `json:"profiles"`
}

// HostStats counts one host's link.
type HostStats struct {
	FromHost, ToHost    uint64        // packets from and to the host, at its port (the kernel's forwarding included)
	UpSent, DownSent    uint64        // packets the emulator passed through each stage
	UpDropped, DownDrop uint64        // tail drops, and an AQM queue's drops over its limit
	UpCoDel, DownCoDel  uint64        // drops by the AQM (queue codel, fq_codel or pie), on arrival or at the head
	UpLost, DownLost    uint64        // emulated loss
	NoRoute, Overflow   uint64        // packets to unknown addresses; writer backlog overflows
	MeanLateness        time.Duration // mean time writes happened after their departure time
	CrossDown, CrossUp  int64         // bytes the host's cross traffic delivered each way since it started
}

// Packet is one sniffed IPv4 packet.
type Packet struct {
	Time time.Time
	Data []byte
}

// RTTSample is one probe: when it was sent, since the start, and its RTT.
type RTTSample struct {
	At  time.Duration `json:"at"`
	RTT time.Duration `json:"rtt"`
}

// FitWindow is the window TraceFit compares.
const FitWindow = 100 * time.Millisecond

// CoDel's parameters (RFC 8289 §4.3): defaults 5 ms and 100 ms.
type CoDel struct {
	Target   time.Duration `yaml:"target" json:"target"`
	Interval time.Duration `yaml:"interval" json:"interval"`
}

func (c CoDel) withDefaults() CoDel {
	if c.Target <= 0 {
		c.Target = 5 * time.Millisecond
	}
	if c.Interval <= 0 {
		c.Interval = 100 * time.Millisecond
	}
	return c
}

// Names lists the testbeds that are up (their state recorded), by name.
func Names() ([]string, error) {
	ents, err := os.ReadDir(StateRoot)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if _, err := os.Stat(filepath.Join(StateRoot, e.Name(), "state.json")); e.IsDir() && err == nil {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// Load reads the state of a testbed that was started, perhaps by another
// process.
func Load(name string) (*State, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(stateDir(name), "state.json"))
	if err != nil {
		return nil, err
	}
	var st State
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("testbed %s: corrupt state: %w", name, err)
	}
	return &st, nil
}

// IP is a host's address.
func (st *State) IP(host string) net.IP { return net.ParseIP(st.IPs[host]) }

// HoldGC keeps this process's garbage collector from running until the
// heap nears gcHeapLimit, for a process whose work is the emulator (a
// Separate testbed's child, 'testbed up', 'check', 'bloat'): it
// allocates nothing per packet, and a collection stops the emulator for
// as long as stopping the world takes, once 0.95 s here (docs/testbed.md).
// restore undoes it.
func HoldGC() (restore func()) {
	pct, limit := debug.SetGCPercent(-1), debug.SetMemoryLimit(gcHeapLimit)
	return func() { debug.SetGCPercent(pct); debug.SetMemoryLimit(limit) }
}

// gcHeapLimit is the soft memory limit under HoldGC, then the only
// trigger of a collection.
const gcHeapLimit = 1 << 30
