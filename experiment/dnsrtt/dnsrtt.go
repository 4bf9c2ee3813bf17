// Package dnsrtt is the dns-rtt experiment: the cross-layer paper's
// RTT-normalised DNS exchange (its §IV-A/B, Fig. 5-7) measured the PAM
// 2022 way on the testbed.
package dnsrtt

import (
	"cmp"
	"context"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"slices"
	"time"

	"github.com/doxlab/doxlab/experiment"
	"github.com/doxlab/doxlab/internal/stats"

	"github.com/doxlab/doxlab/measure"
	"github.com/doxlab/doxlab/protocol"
	"github.com/doxlab/doxlab/server"
	"github.com/doxlab/doxlab/store"
	"github.com/doxlab/doxlab/testbed"
	"github.com/doxlab/doxlab/transport"
)

// DNSRTT configures the dns-rtt experiment.
type DNSRTT struct {
	Profiles   []string // default: Table II's five
	Transports []string // default udp, tcp, dot, doh2, doh3, doq
	Conditions []string // default fresh, resumed, 0rtt
	Repeat     int      // lookups per profile × transport × condition; default 20
	experiment.Env
}

func init() {
	experiment.Register(experiment.Info{Name: "dns-rtt", Method: 1,
		Measures:   "the DNS exchange in round trips, per access profile, transport and condition",
		Reproduces: "cross-layer paper §IV-A/B, Fig. 5-7; PAM 2022 §2 and §4, Fig. 3",
		Resumable:  true, Quick: "3 lookups per cell instead of 20",
		Doc: "the RTT-normalised DNS exchange: per access profile, transport and\ncondition, the PAM 2022 measurement on the testbed",
		New: func() experiment.Experiment { return new(DNSRTT) }})
}

// Quick is a run of a few minutes.
func (c *DNSRTT) Quick() {
	c.Repeat = 3 // the claims pool the five profiles: 15 a cell
}

// Flags binds dns-rtt's flags.
// Its defaults are the config's (defaults), so they have one home.
func (c *DNSRTT) Flags(fs *flag.FlagSet) {
	c.defaults()
	experiment.ListVar(fs, &c.Profiles, "profiles", c.Profiles, "access profiles")
	experiment.ListVar(fs, &c.Transports, "transports", c.Transports, "transports")
	experiment.ListVar(fs, &c.Conditions, "conditions", c.Conditions, "conditions")
	experiment.CountVar(fs, &c.Repeat, "repeat", "`N` lookups per profile, transport and condition")
}

// defaults fills in what the config leaves zero.
func (c *DNSRTT) defaults() {
	if len(c.Profiles) == 0 {
		c.Profiles = slices.Clone(testbed.TableII)
	}
	if len(c.Transports) == 0 {
		c.Transports = protocol.Default()
	}
	if len(c.Conditions) == 0 {
		c.Conditions = []string{"fresh", "resumed", "0rtt"}
	}
	if c.Repeat <= 0 {
		c.Repeat = 20
	}
	c.Env.Defaults()
}

// Run runs the experiment and returns its ID (the prefix of its runs).
func (c *DNSRTT) Run(ctx context.Context) (string, error) {
	c.defaults()
	profiles, err := testbed.LookupProfiles(c.Profiles)
	if err != nil {
		return "", experiment.BadDesign(err)
	}
	// The tasks of a profile, checked before anything starts: an unknown
	// transport or condition is a usage error, not a run of nothing.
	tasks, err := (&measure.Spec{Targets: []string{"192.0.2.53"}, Transports: c.Transports, Conditions: c.Conditions, Repeat: c.Repeat}).Tasks()
	if err != nil {
		return "", experiment.BadDesign(err)
	}
	st, tb, closeAll, err := c.Env.Start(ctx, testbed.Spec{Name: "dnsrtt"})
	if err != nil {
		return "", err
	}
	defer closeAll()
	ip := tb.IP("server")
	cfg := &server.Config{
		Listen: server.Listen{UDP: ip + ":53", TCP: ip + ":53", DoT: ip + ":853", DoQ: ip + ":853", DoH: ip + ":443", DoH3: ip + ":443"},
		// The PAM paper asks for test.com; the server answers any name
		// with one address, so every query is answered from "cache".
		Answers: server.Answers{Any: "192.0.2.1"},
	}
	srv, err := experiment.StartServer(tb, cfg)
	if err != nil {
		return "", err
	}
	defer srv.Close()
	ca := x509.NewCertPool()
	ca.AppendCertsFromPEM(srv.CertPEM())

	expID, err := c.ExperimentID("dnsrtt")
	if err != nil {
		return "", err
	}
	spec := map[string]any{"server": cfg, "transports": c.Transports, "conditions": c.Conditions, "repeat": c.Repeat}
	c.Plan(len(tasks) * len(profiles))
	return expID, c.EachProfile(ctx, st, tb, expID, "experiment:dns-rtt", profiles, spec, func(p testbed.Profile, runID string) error {
		fmt.Fprintf(c.Log, "dns-rtt: %s (RTT %v): %d lookups per transport and condition\n", p.Name, p.RTT(), c.Repeat)
		// The PAM method in-process, every socket (exchanges and probes)
		// opened inside the client host, as hol and overhead do.
		done, err := st.Done(ctx, runID)
		if err != nil {
			return err
		}
		c.Advance(len(done))
		spec := measure.Spec{Targets: []string{ip}, Transports: c.Transports, Conditions: c.Conditions, Repeat: c.Repeat, Timeout: 10 * time.Second,
			Options: transport.Options{RootCAs: ca, SNI: "localhost", OpenSockets: func(open func() error) error { return tb.Run("client", open) }},
			Skip:    func(t measure.Task) bool { return done[store.TaskKey(t)] }}
		var werr error
		err = measure.Run(ctx, spec, func(x *measure.Sample) {
			if werr == nil {
				werr = store.Retry(ctx, func() error { return st.Write(ctx, runID, x) }, nil)
			}
			c.Advance(1)
		})
		if err = cmp.Or(werr, err); err != nil {
			return fmt.Errorf("measuring %s: %w", p.Name, err)
		}
		return nil
	})
}

// Expected is the protocol's round-trip count for an exchange on a new
// connection: UDP 1, TCP 2, TLS 1.3 over TCP 3 (resumption saves no round
// trip), QUIC 2, and 1 when the query rides in 0-RTT.
func Expected(transport, condition string) float64 {
	if condition == "0rtt" {
		return 1
	}
	if p, ok := protocol.Lookup(transport); ok {
		return float64(p.RoundTrips())
	}
	return 3
}

// Summary is the medians of one profile × transport × condition.
type Summary struct {
	Profile, Transport, Condition string
	N, OK                         int            // samples, answered samples
	Failed                        map[string]int // the others, by rcode or status
	Handshake, Resolve, Total     float64        // medians, in RTTs of the probe (the PAM paper's normalisation)
	TotalStat                     stats.Summary  // Total with its 95 % interval
	HandshakeStat, ResolveStat    stats.Summary
	// TotalEmulatedStat and SerializationStat: TotalEmulated and
	// Serialization with their intervals.
	TotalEmulatedStat, SerializationStat stats.Summary
	TotalEmulated                        float64 // median total in RTTs of the profile (the cross-layer paper's)
	Expected                             float64
	// Serialization is the median time the exchange's packets take to
	// cross the profile's rate limits, one after another (IP and UDP or
	// TCP headers included), in RTTs of the profile: the part of the
	// time above Expected that the link itself explains. It is an upper
	// bound: the record's counts include what the connection carried
	// after the answer (ACKs, tickets). What remains, TotalEmulated -
	// Expected - Serialization, is the hosts' (crypto, processing, pacing
	// and acknowledgement delays).
	Serialization float64
}

// SerializationMs is how long a sample's packets take to pass the
// profile's rate limits, in ms: what was sent at the up rate, what was
// received at the down rate. 0 where the link has no rate.
func SerializationMs(r store.Row, p testbed.Profile) float64 {
	return serializationMs(&r, &p, headerOctets(r.Transport))
}

// headerOctets is what IPv4 and transport's own header add to each of
// its packets.
func headerOctets(transport string) int64 {
	if p, _ := protocol.Lookup(transport); p.Datagram {
		return 20 + 8
	}
	return 20 + 20 + 12 // IPv4, TCP with the timestamp option
}

// serializationMs is SerializationMs with the header's octets known: a
// report works it out for each of ten million samples, and a cell's
// transport once.
func serializationMs(r *store.Row, p *testbed.Profile, hdr int64) float64 {
	at := func(bytes, packets int64, rate float64) float64 {
		if rate <= 0 {
			return 0
		}
		return float64((bytes+packets*hdr)*8) / rate * 1e3
	}
	return at(r.BytesSent, r.PacketsSent, p.Up.Rate) + at(r.BytesReceived, r.PacketsReceived, p.Down.Rate)
}

// StoredProfiles is the access profile each stored run was measured on,
// by run ID, as the run recorded it (its spec's "profile"): a custom
// profile reads as it was run, not as a file of that name says today.
// Runs on real networks have none.
func StoredProfiles(ctx context.Context, st *store.Store) (map[string]testbed.Profile, error) {
	runs, err := st.Runs(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]testbed.Profile{}
	for _, r := range runs {
		var spec struct {
			Profile *testbed.Profile `json:"profile"`
		}
		if json.Unmarshal(r.Spec, &spec) == nil && spec.Profile != nil && spec.Profile.Name != "" {
			out[r.ID] = *spec.Profile
		}
	}
	return out, nil
}

func deref(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}
