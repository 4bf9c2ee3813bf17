// Package amplification is the amplification experiment: the DoQ
// handshake at QUIC's amplification limit (PAM 2022 §4).
package amplification

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/doxlab/doxlab/internal/stats"

	"github.com/doxlab/doxlab/experiment"

	"github.com/miekg/dns"

	"github.com/doxlab/doxlab/internal/order"
	"github.com/doxlab/doxlab/server"
	"github.com/doxlab/doxlab/store"
	"github.com/doxlab/doxlab/testbed"
	"github.com/doxlab/doxlab/transport"
)

// Amplification is the PAM 2022 paper's amplification-limit finding (§4):
// until a QUIC server has validated the client's address it may send at
// most three times the bytes it received (RFC 9000 §8.1), so a
// certificate chain larger than that makes it wait a round trip for the
// client's ACK, unless a Retry or a NEW_TOKEN token validated the address.
// Per certificate size, key share (how big the client's first flight is)
// and address validation, it measures the DoQ handshake in RTTs and reads
// from the client's qlog whether the server's flight stalled.
type Amplification struct {
	Profile     testbed.Profile // default: 40 ms RTT, no rate limit (delay alone decides)
	CertSizes   []string        // small (one ECDSA certificate), large (a chain of LargeCertOctets); default both
	KeyShares   []string        // pq (Go's default X25519MLKEM768), classic (X25519); default both
	Validations []string        // none, retry (Retry always), token (Retry always, but a NEW_TOKEN token from an earlier connection); default all
	Repeat      int             // handshakes per cell; default 10
	// LargeCertOctets is the size the large chain reaches; default 8000,
	// above three times the PQ client's two Initial datagrams.
	LargeCertOctets int
	experiment.Env
}

func init() {
	experiment.Register(experiment.Info{Name: "amplification", Method: 3,
		Measures:   "DoQ handshakes against QUIC's 3× amplification limit",
		Reproduces: "PAM 2022 §4 (the 40 % finding)",
		Resumable:  true, Quick: "5 handshakes per cell",
		Doc: "the DoQ handshake in RTTs per certificate size, key share and\naddress validation (none, Retry, NEW_TOKEN), and from qlog\nwhether the server stalled at QUIC's amplification limit",
		New: func() experiment.Experiment { return new(Amplification) }})
}

// Quick is a run of a few minutes.
func (c *Amplification) Quick() { c.Repeat = experiment.MinSamples }

// Flags binds amplification's flags.
// Its defaults are the config's (defaults), so they have one home.
func (c *Amplification) Flags(fs *flag.FlagSet) {
	c.defaults() // a zero config is valid
	fs.Func("profile", "access profile (default: 40 ms RTT and no rate limit)", func(name string) error {
		p, err := testbed.LookupProfile(name)
		c.Profile = p
		return err
	})
	experiment.ListVar(fs, &c.CertSizes, "certs", c.CertSizes, "certificate chains: small (one ECDSA certificate), large")
	experiment.ListVar(fs, &c.KeyShares, "key-shares", c.KeyShares, "client key shares: pq (X25519MLKEM768, two Initials), classic (X25519, one)")
	experiment.ListVar(fs, &c.Validations, "validation", c.Validations, "address validation: none, retry (Retry always), token (NEW_TOKEN)")
	experiment.CountVar(fs, &c.Repeat, "repeat", "`N` handshakes per cell")
	experiment.CountVar(fs, &c.LargeCertOctets, "large-cert-octets", "the large chain's size in `octets`")
}

// Kind is a Sample in the store.
var Kind = store.NewKind("amplification")

// Sample is one DoQ handshake of the experiment.
type Sample struct {
	Profile    string  `json:"profile"`
	Cert       string  `json:"cert"`
	CertOctets int     `json:"cert_octets"` // the chain's DER octets
	KeyShare   string  `json:"key_share"`
	Validation string  `json:"validation"`
	Rep        int     `json:"rep"`
	RTTMs      float64 `json:"rtt_ms"` // the profile's RTT

	Status        string  `json:"status"`
	Error         string  `json:"error,omitempty"`
	HandshakeMs   float64 `json:"handshake_ms"`
	TotalMs       float64 `json:"total_ms"`
	HandshakeRTTs float64 `json:"handshake_rtts"`
	Retry         bool    `json:"retry"`
	TokenUsed     bool    `json:"token_used"`

	// From the client's qlog: the client's first flight (datagrams and
	// octets sent before anything arrived), the server octets that came
	// before the pause, and the pause: the server's stall at its
	// amplification limit if it stalled (a pause over 3/4 of an RTT once
	// it had sent up to three times the client's first flight), else the
	// longest pause within its handshake flight.
	ClientFirstFlight int     `json:"client_first_flight_octets"`
	ClientFirstDgrams int     `json:"client_first_flight_datagrams"`
	ServerFirstBurst  int     `json:"server_first_burst_octets"`
	ServerFlight      int     `json:"server_flight_octets"`
	LongestPauseMs    float64 `json:"longest_pause_ms"`
	Stalled           bool    `json:"stalled"`
	// ServerWaitMs is the client's wait from the end of its first flight
	// to the server's ServerHello (its first CRYPTO frame): one RTT and
	// the server's time to answer, where it signs (an RSA-4096 signature
	// for the large chain, which a busy machine stretches by tens of ms).
	ServerWaitMs float64 `json:"server_wait_ms"`
	Qlog         string  `json:"qlog,omitempty"`
}

func (c *Amplification) defaults() error {
	if c.Profile.Name == "" {
		c.Profile = testbed.Profile{Name: "delay-40ms", Down: testbed.Direction{Delay: 20 * time.Millisecond}, Up: testbed.Direction{Delay: 20 * time.Millisecond}}
	}
	if len(c.CertSizes) == 0 {
		c.CertSizes = []string{"small", "large"}
	}
	if len(c.KeyShares) == 0 {
		c.KeyShares = []string{"pq", "classic"}
	}
	if len(c.Validations) == 0 {
		c.Validations = []string{"none", "retry", "token"}
	}
	if c.Repeat <= 0 {
		c.Repeat = 10
	}
	if c.LargeCertOctets <= 0 {
		c.LargeCertOctets = 8000
	}
	c.Env.Defaults()
	return cmp.Or(experiment.CheckValues("certificate size", c.CertSizes, "small", "large"),
		experiment.CheckValues("key share", c.KeyShares, "pq", "classic"),
		experiment.CheckValues("validation", c.Validations, "none", "retry", "token"))
}

// Run runs the experiment and returns its ID.
func (c *Amplification) Run(ctx context.Context) (string, error) {
	if err := c.defaults(); err != nil {
		return "", experiment.BadDesign(err)
	}
	st, tb, closeAll, err := c.Env.Start(ctx, testbed.Spec{Name: "amp"})
	if err != nil {
		return "", err
	}
	defer closeAll()
	dir, err := os.MkdirTemp("", "doxlab-amp")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	if err := tb.SetProfile("client", c.Profile); err != nil {
		return "", err
	}
	ip := tb.IP("server")

	// One server per certificate and Retry policy, on its own port.
	type srvKey struct{ cert, retry string }
	ports := map[srvKey]int{}
	octets := map[string]int{}
	port := 853
	for _, size := range c.CertSizes {
		certFile, keyFile, n, err := experiment.WriteChain(dir, size, c.LargeCertOctets)
		if err != nil {
			return "", err
		}
		octets[size] = n
		for _, retry := range []string{"never", "always"} {
			srv, err := experiment.StartServer(tb, &server.Config{Listen: server.Listen{DoQ: fmt.Sprintf("%s:%d", ip, port)}, Answers: server.Answers{Any: "192.0.2.1"},
				TLS: server.TLS{Cert: certFile, Key: keyFile}, QUIC: server.QUIC{Retry: retry}})
			if err != nil {
				return "", err
			}
			defer srv.Close()
			ports[srvKey{size, retry}] = port
			port++
		}
	}
	expID, err := c.ExperimentID("amplification")
	if err != nil {
		return "", err
	}
	spec := map[string]any{"experiment": expID, "profile": c.Profile,
		"certs": octets, "key_shares": c.KeyShares, "validations": c.Validations, "repeat": c.Repeat}
	return expID, c.CheckedRun(ctx, st, tb, expID+"-"+c.Profile.Name, "experiment:amplification", c.Profile, spec, func(runID string) error {
		done, err := st.ResultsDone(ctx, runID, Kind)
		if err != nil {
			return err
		}
		c.Plan(len(c.CertSizes) * len(c.KeyShares) * len(c.Validations) * c.Repeat)
		qlogs := filepath.Join(dir, "qlog")
		rtt := float64(c.Profile.RTT()) / float64(time.Millisecond)
		for _, size := range c.CertSizes {
			for _, ks := range c.KeyShares {
				for _, v := range c.Validations {
					retry := "always"
					if v == "none" {
						retry = "never"
					}
					url := fmt.Sprintf("quic://%s:%d", ip, ports[srvKey{size, retry}])
					for rep := range c.Repeat {
						s := &Sample{Profile: c.Profile.Name, Cert: size, CertOctets: octets[size], KeyShare: ks, Validation: v, Rep: rep, RTTMs: rtt}
						if done[s.key()] {
							c.Advance(1)
							continue
						}
						if err := ctx.Err(); err != nil {
							return err
						}
						c.handshake(ctx, tb, url, filepath.Join(qlogs, runID, s.key()), s)
						if err := st.WriteResult(ctx, runID, Kind, s.key(), time.Now(), s); err != nil {
							return err
						}
						c.Advance(1)
					}
					fmt.Fprintf(c.Log, "amplification: cert %s (%d octets), key share %s, validation %s: %d handshakes\n", size, octets[size], ks, v, c.Repeat)
				}
			}
		}
		return nil
	})
}

func (s *Sample) key() string {
	return fmt.Sprintf("%s|%s|%s|%d", s.Cert, s.KeyShare, s.Validation, s.Rep)
}

// handshake measures one DoQ exchange on a new connection. For "token"
// a first connection (Retried) fetches the NEW_TOKEN token.
func (c *Amplification) handshake(ctx context.Context, tb experiment.Net, url, qlogDir string, s *Sample) {
	opts := transport.Options{Insecure: true, Timeout: 10 * time.Second,
		OpenSockets: func(open func() error) error { return tb.Run("client", open) }}
	if s.KeyShare == "classic" {
		opts.KeyShares = []tls.CurveID{tls.X25519}
	}
	q := new(dns.Msg)
	q.SetQuestion("amplification.doxlab.test.", dns.TypeA)
	if s.Validation == "token" {
		opts.Session = transport.NewSession(transport.SessionConfig{Tokens: true})
		if t, err := transport.New(url, opts); err == nil {
			t.Exchange(ctx, q)
			t.Close()
		}
	}
	opts.QlogDir = qlogDir
	t, err := transport.New(url, opts)
	if err != nil {
		s.Status, s.Error = "error", err.Error()
		return
	}
	rec, _ := t.Exchange(ctx, q)
	t.Close()
	s.Status, s.Error = string(rec.Status), rec.Error
	s.HandshakeMs, s.TotalMs, s.Retry, s.TokenUsed = rec.Timing.HandshakeMs, rec.Timing.TotalMs, rec.Conn.Retry, rec.Conn.TokenUsed
	if s.RTTMs > 0 {
		s.HandshakeRTTs = s.HandshakeMs / s.RTTMs
	}
	files, _ := filepath.Glob(filepath.Join(qlogDir, "*.sqlog"))
	if len(files) == 1 {
		s.Qlog = filepath.Base(files[0])
		if f, err := os.Open(files[0]); err == nil {
			analyzeQlog(f, s)
			f.Close()
		}
	}
}

// analyzeQlog reads a client qlog (quic-go's JSON-SEQ): the client's first
// flight, and the server's handshake flight, from its ServerHello up to
// the handshake's completion, with its longest pause.
func analyzeQlog(r io.Reader, s *Sample) {
	type event struct {
		Time float64 `json:"time"`
		Name string  `json:"name"`
		Data struct {
			Header struct {
				Type string `json:"packet_type"`
			} `json:"header"`
			Raw struct {
				Length int `json:"length"`
			} `json:"raw"`
			Frames   []qlogFrame `json:"frames"`
			PTOCount *int        `json:"pto_count"`
		} `json:"data"`
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	received := false
	probing := false  // the probe timer fired before anything came: what follows probes
	inFlight := false // the server's handshake flight has begun: its first CRYPTO frame came
	atLimit := false  // the pause kept is a stall at the limit
	var last, lastSent float64
	for sc.Scan() {
		line := bytes.TrimLeft(sc.Bytes(), "\x1e")
		var e event
		if json.Unmarshal(line, &e) != nil {
			continue
		}
		switch e.Name {
		case "recovery:metrics_updated":
			// A server slow to answer (a busy machine, a large chain to
			// sign) lets the client's probe timer fire: it sends its
			// flight again, which is not more of its first flight.
			if e.Data.PTOCount != nil && *e.Data.PTOCount > 0 && !received {
				probing = true
			}
		case "transport:packet_sent":
			if !received && !probing {
				s.ClientFirstFlight += e.Data.Raw.Length
				s.ClientFirstDgrams++
				lastSent = e.Time
			}
		case "transport:packet_received":
			t := e.Data.Header.Type
			if t == "retry" {
				// A Retry restarts the exchange: count from the next flight.
				received, probing, inFlight, s.ClientFirstFlight, s.ClientFirstDgrams = false, false, false, 0, 0
				continue
			}
			received = true
			if t == "initial" || t == "handshake" {
				if gap := e.Time - last; inFlight {
					// The stall at the limit, if there is one, else
					// the longest pause.
					stall := s.stallAt(gap, s.ServerFlight)
					if (stall && !atLimit) || (stall == atLimit && gap > s.LongestPauseMs) {
						s.LongestPauseMs, s.ServerFirstBurst, atLimit = gap, s.ServerFlight, stall
					}
				}
				// The flight begins with the ServerHello's CRYPTO frame: the
				// ACK a server sends at once for the first Initial of a
				// ClientHello in two counts against its limit, but the
				// wait after it is the server's signing, not a pause in
				// its flight.
				if !inFlight && slices.ContainsFunc(e.Data.Frames, qlogFrame.crypto) {
					s.ServerWaitMs, inFlight = e.Time-lastSent, true
				}
				last = e.Time
				s.ServerFlight += e.Data.Raw.Length
			}
		}
	}
	if s.LongestPauseMs == 0 {
		s.ServerFirstBurst = s.ServerFlight
	}
	s.LongestPauseMs = float64(int64(s.LongestPauseMs*1000)) / 1000
	s.ServerWaitMs = float64(int64(s.ServerWaitMs*1000)) / 1000
	s.Stalled = atLimit
}

// qlogFrame is a frame of a qlog packet event, by its type.
type qlogFrame struct {
	Type string `json:"frame_type"`
}

func (f qlogFrame) crypto() bool { return f.Type == "crypto" }

// maxDatagram is the largest datagram quic-go sends before path MTU
// discovery: a server at its limit stops within one of it.
const maxDatagram = 1252

// stallAt says whether a pause of gap ms, after the server had sent
// burst octets of its flight, is a stall at the amplification limit. A
// server at its limit waits for the client's ACK: the client sees a
// pause of about one RTT, less the burst's own spread, once the server
// has sent up to three times the client's first flight (more if the
// client's ACK came meanwhile). Three quarters of an RTT keeps that and
// leaves out shorter hiccups of a busy machine (22 ms at 40 ms RTT seen
// in CI); the limit leaves out longer ones elsewhere in the flight (34
// and 41 ms in two of three handshakes the server could send whole, in
// one CI, which the pause alone called stalls).
func (s *Sample) stallAt(gap float64, burst int) bool {
	return s.RTTMs > 0 && gap > 0.75*s.RTTMs && burst >= 3*s.ClientFirstFlight-maxDatagram
}

// Cell is the medians of one certificate × key share × validation.
type Cell struct {
	Cert, KeyShare, Validation string
	CertOctets, N, OK          int
	HandshakeRTTs, TotalMs     float64
	HandshakeStat              stats.Summary // HandshakeRTTs with its 95 % interval
	TotalStat, ClientFirstStat stats.Summary // TotalMs and ClientFirstFlight with theirs
	ServerFirstStat            stats.Summary // ServerFirstBurst with its
	ServerWaitStat             stats.Summary // ServerWaitMs with its
	ClientFirstFlight          float64
	ServerFirstBurst           float64
	Stalled, Retried, Token    float64 // shares of OK handshakes
}

// Summarize groups samples into cells.
func Summarize(ss []*Sample) []Cell {
	type key struct{ c, k, v string }
	keys, groups := order.Group(ss, func(s *Sample) key { return key{s.Cert, s.KeyShare, s.Validation} })
	slices.SortStableFunc(keys, func(a, b key) int {
		return cmp.Or(order.Compare(a.c, b.c), order.Compare(a.k, b.k), order.Compare(a.v, b.v))
	})
	var out []Cell
	for _, k := range keys {
		cell := Cell{Cert: k.c, KeyShare: k.k, Validation: k.v}
		var hs, tot, cf, sb, sw []float64
		for _, s := range groups[k] {
			cell.N++
			cell.CertOctets = s.CertOctets
			if s.Status != "ok" {
				continue
			}
			cell.OK++
			hs, tot = append(hs, s.HandshakeRTTs), append(tot, s.TotalMs)
			cf, sb = append(cf, float64(s.ClientFirstFlight)), append(sb, float64(s.ServerFirstBurst))
			if s.ServerWaitMs > 0 { // 0 in runs from before it was kept
				sw = append(sw, s.ServerWaitMs)
			}
			cell.Stalled += b2f(s.Stalled)
			cell.Retried += b2f(s.Retry)
			cell.Token += b2f(s.TokenUsed)
		}
		cell.HandshakeStat, cell.TotalStat = stats.Summarize(hs), stats.Summarize(tot)
		cell.ClientFirstStat, cell.ServerFirstStat = stats.Summarize(cf), stats.Summarize(sb)
		cell.ServerWaitStat = stats.Summarize(sw)
		cell.HandshakeRTTs, cell.TotalMs = cell.HandshakeStat.Median, cell.TotalStat.Median
		cell.ClientFirstFlight, cell.ServerFirstBurst = cell.ClientFirstStat.Median, cell.ServerFirstStat.Median
		if cell.OK > 0 {
			cell.Stalled /= float64(cell.OK)
			cell.Retried /= float64(cell.OK)
			cell.Token /= float64(cell.OK)
		}
		out = append(out, cell)
	}
	return out
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
