package testbed

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strings"
	"time"

	"github.com/doxlab/doxlab/internal/listfile"
	"github.com/doxlab/doxlab/internal/specfile"
	"github.com/doxlab/doxlab/testbed/profiles"
)

// Direction shapes one direction of a link. Zero values mean "not
// limited": no delay, unlimited rate, no loss.
type Direction struct {
	// Delay is the one-way propagation delay.
	Delay time.Duration `yaml:"delay" json:"delay"`
	// Jitter adds a uniform random delay in [0, Jitter) without ever
	// reordering packets (a packet never leaves before the one before it).
	Jitter time.Duration `yaml:"jitter" json:"jitter"`
	// Rate in bits per second; every byte of the IP packet counts.
	Rate float64 `yaml:"rate" json:"rate"`
	// Trace replaces Rate with a delivery-opportunity trace in Mahimahi's
	// format: a file, or a built-in one (BuiltinTraces). See Trace.
	Trace string `yaml:"trace" json:"trace,omitempty"`
	// Queue is the queue discipline in front of the rate limit: "tail"
	// (the default: an arrival finding the queue full is dropped),
	// "codel" (RFC 8289), "fq_codel" (RFC 8290: a CoDel queue per flow
	// of 1024, served by deficit round robin, new flows first) or "pie"
	// (RFC 8033: drops on arrival with a probability that follows the
	// queueing delay, target 15 ms); CoDel's target and interval default
	// to 5 ms and 100 ms. All need a rate or a trace, and take their
	// limit from QueuePackets.
	Queue string `yaml:"queue" json:"queue,omitempty"`
	CoDel CoDel  `yaml:"codel" json:"codel,omitzero"`
	// QueueBytes, QueuePackets or QueueTime bound the queue in front of
	// the rate limit (tail drop). With none set: 1000 packets, netem's default.
	QueueBytes   int           `yaml:"queue_bytes" json:"queue_bytes"`
	QueuePackets int           `yaml:"queue_packets" json:"queue_packets"`
	QueueTime    time.Duration `yaml:"queue_time" json:"queue_time"`
	// Loss drops each packet with this probability (Bernoulli), unless
	// GilbertElliott is set.
	Loss           float64         `yaml:"loss" json:"loss"`
	GilbertElliott *GilbertElliott `yaml:"gilbert_elliott" json:"gilbert_elliott,omitempty"`
}

// transparent reports whether d passes every packet at once: no delay,
// no rate limit, no loss, so it has nothing to emulate.
func (d Direction) transparent() bool {
	return d.Delay == 0 && d.Jitter == 0 && d.Rate == 0 && d.Trace == "" && d.Loss == 0 && d.GilbertElliott == nil
}

// MeanRate is the direction's rate in bit/s: Rate, or its trace's mean;
// 0 when unlimited (or the trace cannot be read).
func (d Direction) MeanRate() float64 {
	if d.Trace != "" {
		if tr, err := cachedTrace(d.Trace); err == nil {
			return tr.Rate()
		}
		return 0
	}
	return d.Rate
}

// MeanLoss is the share of packets the direction loses in the long run.
func (d Direction) MeanLoss() float64 {
	if g := d.GilbertElliott; g != nil {
		if g.P+g.R == 0 {
			return g.LossGood
		}
		bad := g.P / (g.P + g.R)
		return bad*g.LossBad + (1-bad)*g.LossGood
	}
	return d.Loss
}

// GilbertElliott is the two-state loss model: P and R are the chances to
// move from the good to the bad state and back per packet; LossGood and
// LossBad are the loss probabilities in each state.
type GilbertElliott struct {
	P        float64 `yaml:"p" json:"p"`
	R        float64 `yaml:"r" json:"r"`
	LossGood float64 `yaml:"loss_good" json:"loss_good"`
	LossBad  float64 `yaml:"loss_bad" json:"loss_bad"`
}

// Profile shapes an access link: Down is towards the host, Up away from it.
type Profile struct {
	Name string    `yaml:"name" json:"name"`
	Down Direction `yaml:"down" json:"down"`
	Up   Direction `yaml:"up" json:"up"`
	// MTU of the host's interface. Zero means 1500.
	MTU int `yaml:"mtu" json:"mtu"`
	// Cross is traffic that shares the link with what is measured.
	Cross Cross `yaml:"cross" json:"cross,omitzero"`
}

// Cross is cross traffic on a host's access link: bulk TCP flows between
// the host and a peer host, each as fast as its congestion control lets
// it, as a download or an upload running beside the measurement would.
// The testbed runs them while the host has the profile, and pauses them
// while it checks the link.
type Cross struct {
	Down int `yaml:"down" json:"down,omitempty"` // flows towards the host
	Up   int `yaml:"up" json:"up,omitempty"`     // flows away from it
	// Peer is the host at the flows' far end. Default "server", or the
	// first other host when there is none.
	Peer string `yaml:"peer" json:"peer,omitempty"`
	// CongestionControl of the senders: default "cubic", Linux's default,
	// which fills any buffer; "bbr" keeps queues short by itself.
	CongestionControl string `yaml:"congestion_control" json:"congestion_control,omitempty"`
}

func (c Cross) flows() int { return c.Down + c.Up }

// mtu is the host interface's MTU: MTU, or 1500.
func (p Profile) mtu() int {
	if p.MTU == 0 {
		return 1500
	}
	return p.MTU
}

// Emulates says whether p shapes anything: a delay, a rate, a loss, a
// smaller MTU or cross traffic, either way. A profile that does not
// ("none") needs no emulator: plain loopback carries it as it is.
func (p Profile) Emulates() bool {
	return !p.Down.transparent() || !p.Up.transparent() || (p.MTU != 0 && p.MTU != 1500) || p.Cross.flows() > 0
}

// RTT is the round trip the profile adds.
func (p Profile) RTT() time.Duration { return p.Down.Delay + p.Up.Delay }

func access(name string, rttMs, downMbps, upMbps float64) Profile {
	half := time.Duration(rttMs * float64(time.Millisecond) / 2)
	return Profile{Name: name, Down: Direction{Delay: half, Rate: downMbps * 1e6}, Up: Direction{Delay: half, Rate: upMbps * 1e6}}
}

// Profiles are the access networks of the cross-layer paper's Table II
// (FCC Measuring Broadband America and ERRANT averages), RTT split evenly,
// and "none".
var Profiles = map[string]Profile{
	"none":      {Name: "none"},
	"fiber":     access("fiber", 14.8, 99.9, 109.1),
	"cable":     access("cable", 25.2, 165.1, 11.6),
	"dsl":       access("dsl", 42.4, 10.7, 0.8),
	"4g":        access("4g", 91.9, 54.0, 21.2),
	"4g-medium": access("4g-medium", 104.5, 28.7, 4.2),
}

// TableII names the cross-layer paper's five access profiles, fastest
// first: the experiments' default.
var TableII = profiles.TableII

// ProfileNames lists the built-in profiles in a stable order.
func ProfileNames() []string {
	return profiles.Names()
}

// LookupProfiles looks up each name, in order.
func LookupProfiles(names []string) ([]Profile, error) {
	out := make([]Profile, len(names))
	for i, n := range names {
		p, err := LookupProfile(n)
		if err != nil {
			return nil, err
		}
		out[i] = p
	}
	return out, nil
}

// LookupProfile finds a built-in profile (case-insensitive, "DSL" or
// "4G-medium" work), a variant of one (see Variant: "4g+loss1",
// "dsl+bulk+fq_codel"), or loads a YAML file holding one profile.
func LookupProfile(name string) (Profile, error) {
	if p, ok := Profiles[strings.ToLower(name)]; ok {
		return p, nil
	}
	b, err := listfile.Read(name)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return Profile{}, fmt.Errorf("profile file: %w", err) // a file, but none to read
	}
	if err != nil {
		if base, mods, ok := strings.Cut(name, "+"); ok {
			return variant(base, mods)
		}
		names := ProfileNames()
		sort.Strings(names)
		return Profile{}, fmt.Errorf("unknown profile %q: not one of %s (each may take +variants: %s), and not a readable YAML file",
			name, strings.Join(names, ", "), Variants)
	}
	var p Profile
	if err := specfile.Decode(name, b, &p).Err(); err != nil {
		return Profile{}, err
	}
	if p.Name == "" {
		p.Name = name
	}
	return p, p.Validate()
}

// Validate rejects values that cannot be meant.
func (p Profile) Validate() error {
	for _, x := range []struct {
		dir string
		d   Direction
	}{{"down", p.Down}, {"up", p.Up}} {
		dir, d := x.dir, x.d
		if err := cmp.Or(specfile.Negative(dir, d), specfile.Negative(dir+".codel", d.CoDel)); err != nil {
			return fmt.Errorf("profile %s: %w", p.Name, err)
		}
		switch {
		case d.Loss > 1:
			return fmt.Errorf("profile %s: %s.loss %v is not a probability", p.Name, dir, d.Loss)
		case d.Rate > 0 && d.Rate < 8000:
			return fmt.Errorf("profile %s: %s.rate %v bit/s is below 1 kB/s; rates are in bits per second", p.Name, dir, d.Rate)
		case d.Rate > 0 && d.Trace != "":
			return fmt.Errorf("profile %s: %s: rate and trace exclude each other (the trace sets the rate)", p.Name, dir)
		}
		switch d.Queue {
		case "", "tail":
		case "codel", "fq_codel", "pie":
			if d.Rate == 0 && d.Trace == "" {
				return fmt.Errorf("profile %s: %s.queue %s needs a rate or a trace: without one nothing queues", p.Name, dir, d.Queue)
			}
			if d.QueueBytes > 0 || d.QueueTime > 0 {
				return fmt.Errorf("profile %s: %s.queue %s takes its limit from queue_packets", p.Name, dir, d.Queue)
			}
		default:
			return fmt.Errorf("profile %s: %s.queue %q is not tail, codel, fq_codel or pie", p.Name, dir, d.Queue)
		}
		if d.Trace != "" {
			if _, err := cachedTrace(d.Trace); err != nil {
				return fmt.Errorf("profile %s: %s: %w", p.Name, dir, err)
			}
		}
		if g := d.GilbertElliott; g != nil {
			for _, v := range []float64{g.P, g.R, g.LossGood, g.LossBad} {
				if v < 0 || v > 1 {
					return fmt.Errorf("profile %s: %s.gilbert_elliott: %v is not a probability", p.Name, dir, v)
				}
			}
		}
	}
	if p.Cross.Down < 0 || p.Cross.Up < 0 || p.Cross.flows() > maxCrossFlows {
		return fmt.Errorf("profile %s: cross: between 0 and %d flows in all", p.Name, maxCrossFlows)
	}
	if p.MTU != 0 && (p.MTU < 1280 || p.MTU > 65535) {
		return fmt.Errorf("profile %s: mtu %d outside 1280..65535", p.Name, p.MTU)
	}
	return nil
}
