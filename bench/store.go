package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/doxlab/doxlab/store"
	"github.com/doxlab/doxlab/transport"
)

// Kinds in the store: one Record per benchmark (a URL, or one step of a
// stepped run), and its queries whole, in chunks of ChunkSize.
var (
	Kind        = store.NewKind("bench")
	KindSamples = store.NewKind("bench-samples")
)

// ChunkSize is the most samples one stored row holds.
const ChunkSize = 50_000

// Record is one benchmark as stored: its settings and summary. Its
// queries are stored beside it, under the same Key.
type Record struct {
	Key      string    `json:"key"`      // unique within the run: "2" (URL 2), "2.3" (its step 3)
	Label    string    `json:"label"`    // what the figures call it: the protocol unless set
	Protocol string    `json:"protocol"` // udp, tcp, dot, doh1, doh2, doh3, doq
	Policy   string    `json:"policy"`   // connections: reuse, new, resumed, 0rtt
	Conns    int       `json:"conns"`
	Step     int       `json:"step"` // 0-based step of a stepped run; -1 for a single run
	Bound    *Bound    `json:"bound,omitempty"`
	Held     bool      `json:"held"` // a step within Bound
	Start    time.Time `json:"start"`
	Summary
}

// NewRecord is the record of a finished run of c; step is its place in
// a stepped run, -1 for a single run.
func NewRecord(key string, c Config, r *Result, step int) Record {
	proto := r.Protocol
	if proto == "" { // nothing answered: the protocol its queries were sent in
		proto, _ = transport.ProtocolOf(c.URL, c.Options)
	}
	return Record{Key: key, Label: proto, Protocol: proto, Policy: Policy(c.Options), Conns: max(c.Conns, 1), Step: step, Start: r.Start, Summary: r.Summarize()}
}

// Policy names the connection policy of opts: reuse, new, resumed, 0rtt.
func Policy(opts transport.Options) string {
	switch {
	case opts.Reuse:
		return "reuse"
	case opts.ZeroRTT:
		return "0rtt"
	case opts.Session != nil:
		return "resumed"
	}
	return "new"
}

// WithPolicy is opts under the connection policy named (Policy's
// inverse): reuse keeps connections and pipelines; new opens one per
// query; resumed and 0rtt do too, resuming TLS (and sending in 0-RTT).
func WithPolicy(opts transport.Options, policy string) (transport.Options, error) {
	opts.Reuse, opts.Session, opts.ZeroRTT = false, nil, false
	switch policy {
	case "reuse":
		opts.Reuse = true
	case "new":
	case "resumed", "0rtt":
		opts.Session = transport.NewSession(transport.SessionConfig{Tickets: true, Tokens: true, Versions: true})
		opts.ZeroRTT = policy == "0rtt"
	default:
		return opts, fmt.Errorf("unknown connection policy %q (want reuse, new, resumed, 0rtt)", policy)
	}
	return opts, nil
}

// chunk is up to ChunkSize samples, one column per field, in µs.
type chunk struct {
	Key         string   `json:"key"`
	Part        int      `json:"part"`
	AtUs        []int64  `json:"at_us"`
	LatencyUs   []int64  `json:"latency_us"`
	ServiceUs   []int64  `json:"service_us"`
	HandshakeUs []int64  `json:"handshake_us"`
	Status      []int    `json:"status"`           // index into Statuses (and Rcodes)
	Statuses    []string `json:"statuses"`         // ok, timeout, ...
	Rcodes      []string `json:"rcodes,omitempty"` // the answer's rcode with each status, "" without one
	Flags       []uint8  `json:"flags"`            // 1: resumed, 2: 0-RTT accepted
}

// Save stores a benchmark's record and its samples under run runID.
func Save(ctx context.Context, st *store.Store, runID string, rec Record, samples []Sample) error {
	if err := st.WriteResult(ctx, runID, Kind, rec.Key, rec.Start, rec); err != nil {
		return err
	}
	for part := 0; part*ChunkSize < len(samples) || part == 0; part++ {
		ss := samples[part*ChunkSize : min(len(samples), (part+1)*ChunkSize)]
		c := chunk{Key: rec.Key, Part: part}
		type ended struct {
			st    transport.Status
			rcode string
		}
		index := map[ended]int{}
		for _, s := range ss {
			i, ok := index[ended{s.Status, s.Rcode}]
			if !ok {
				i = len(c.Statuses)
				index[ended{s.Status, s.Rcode}] = i
				c.Statuses, c.Rcodes = append(c.Statuses, string(s.Status)), append(c.Rcodes, s.Rcode)
			}
			var f uint8
			if s.Resumed {
				f |= 1
			}
			if s.ZeroRTT {
				f |= 2
			}
			c.AtUs = append(c.AtUs, s.At.Microseconds())
			c.LatencyUs = append(c.LatencyUs, s.Latency.Microseconds())
			c.ServiceUs = append(c.ServiceUs, s.Service.Microseconds())
			c.HandshakeUs = append(c.HandshakeUs, s.Handshake.Microseconds())
			c.Status = append(c.Status, i)
			c.Flags = append(c.Flags, f)
		}
		if err := st.WriteResult(ctx, runID, KindSamples, fmt.Sprintf("%s/%d", rec.Key, part), rec.Start, c); err != nil {
			return err
		}
	}
	return nil
}

// Stored is one stored benchmark: with its samples sorted by At (Load),
// or folded into an Aggregate (LoadAggregated).
type Stored struct {
	Run string `json:"run"`
	Record
	Samples []Sample   `json:"-"` // Load's
	Agg     *Aggregate `json:"-"` // LoadAggregated's
}

// Load reads the benchmarks of the runs keep accepts, in the order they
// ran.
func Load(ctx context.Context, st *store.Store, keep func(runID string) bool) ([]*Stored, error) {
	out, err := eachStored(ctx, st, keep, func(*Stored) {}, func(s *Stored, ss []Sample) error {
		s.Samples = append(s.Samples, ss...)
		return nil
	})
	for _, s := range out {
		slices.SortStableFunc(s.Samples, func(a, b Sample) int { return int(a.At - b.At) })
	}
	return out, err
}

// samples are the chunk's queries, checked.
func (c *chunk) samples() ([]Sample, error) {
	n := len(c.AtUs)
	if len(c.LatencyUs) != n || len(c.ServiceUs) != n || len(c.HandshakeUs) != n || len(c.Status) != n || len(c.Flags) != n {
		return nil, fmt.Errorf("columns of different lengths")
	}
	if c.Rcodes != nil && len(c.Rcodes) != len(c.Statuses) { // older chunks have none
		return nil, fmt.Errorf("%d rcodes for %d statuses", len(c.Rcodes), len(c.Statuses))
	}
	out := make([]Sample, n)
	for i := range n {
		if c.Status[i] < 0 || c.Status[i] >= len(c.Statuses) {
			return nil, fmt.Errorf("status index %d out of range", c.Status[i])
		}
		out[i] = Sample{At: us(c.AtUs[i]), Latency: us(c.LatencyUs[i]), Service: us(c.ServiceUs[i]),
			Handshake: us(c.HandshakeUs[i]), Status: transport.Status(c.Statuses[c.Status[i]]), Resumed: c.Flags[i]&1 != 0, ZeroRTT: c.Flags[i]&2 != 0}
		if c.Rcodes != nil {
			out[i].Rcode = c.Rcodes[c.Status[i]]
		}
	}
	return out, nil
}

// eachStored reads the benchmarks of the runs keep accepts: each record
// is handed to begin, then each stored chunk of its queries, checked, to
// add, chunk by chunk.
func eachStored(ctx context.Context, st *store.Store, keep func(runID string) bool, begin func(*Stored), add func(*Stored, []Sample) error) ([]*Stored, error) {
	var out []*Stored
	byKey := map[string]*Stored{}
	err := st.Results(ctx, "", Kind, func(runID string, raw []byte) error {
		if !keep(runID) {
			return nil
		}
		s := &Stored{Run: runID}
		if err := json.Unmarshal(raw, &s.Record); err != nil {
			return err
		}
		begin(s)
		out = append(out, s)
		byKey[runID+"\x00"+s.Key] = s
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = st.Results(ctx, "", KindSamples, func(runID string, raw []byte) error {
		if !keep(runID) {
			return nil
		}
		var c chunk
		if err := json.Unmarshal(raw, &c); err != nil {
			return err
		}
		s := byKey[runID+"\x00"+c.Key]
		if s == nil {
			return fmt.Errorf("bench samples %s/%d of run %s belong to no stored benchmark", c.Key, c.Part, runID)
		}
		ss, err := c.samples()
		if err != nil {
			return fmt.Errorf("bench samples %s/%d of run %s: %w", c.Key, c.Part, runID, err)
		}
		return add(s, ss)
	})
	return out, err
}

func us(v int64) time.Duration { return time.Duration(v) * time.Microsecond }

// Name is the label a figure gives a stored benchmark: its label, with
// its rate when it was one of several steps.
func (s *Stored) Name() string {
	var b strings.Builder
	b.WriteString(s.Label)
	if s.Step >= 0 && s.Mode == "open-loop" {
		fmt.Fprintf(&b, " @%s/s", rateString(s.IntendedQPS))
	}
	return b.String()
}

func rateString(r float64) string {
	switch {
	case r >= 1e6:
		return fmt.Sprintf("%gM", r/1e6)
	case r >= 1e3:
		return fmt.Sprintf("%gk", r/1e3)
	}
	return fmt.Sprintf("%g", r)
}
