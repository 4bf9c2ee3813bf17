// Package overhead is the overhead experiment: octets per resolution
// by layer, from a decrypted link capture (DoH-cost paper §4).
package overhead

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/doxlab/doxlab/internal/stats"

	"github.com/doxlab/doxlab/experiment"

	"github.com/miekg/dns"

	"github.com/doxlab/doxlab/internal/order"
	"github.com/doxlab/doxlab/measure"
	layers "github.com/doxlab/doxlab/overhead"
	"github.com/doxlab/doxlab/protocol"
	"github.com/doxlab/doxlab/server"
	"github.com/doxlab/doxlab/store"
	"github.com/doxlab/doxlab/testbed"
	"github.com/doxlab/doxlab/transport"
)

// Overhead is the DoH-cost paper's bytes-per-resolution experiment (§4,
// Fig. 3-5) and the IMC 2022 slides' single-query sizes: names resolved
// over each transport, with a new connection per query and over one
// persistent connection, captured at the testbed link and every octet
// attributed to a layer with the keys the client logged.
type Overhead struct {
	Transports []string // default udp, tcp, dot, doh1, doh2, doh3, doq
	Modes      []string // new (a connection per query), persistent; default both
	Certs      []string // small (one ECDSA certificate), large (an RSA chain); default small
	Names      []string // default layers.Names
	// KeyShare is the client's TLS key share: pq (Go's default,
	// X25519MLKEM768, whose ClientHello is ~1.2 kB larger) or classic
	// (X25519, as the papers' clients). Default pq.
	KeyShare string
	// LargeCertOctets is the large chain's size; default 4000.
	LargeCertOctets int
	// Keep, if set, receives the captures (client-up.pcap,
	// client-down.pcap) and the key log (keys.log), for Wireshark.
	Keep string
	experiment.Env
}

func init() {
	experiment.Register(experiment.Info{Name: "overhead", Method: 1,
		Measures:   "octets and packets per resolution, by layer",
		Reproduces: "DoH-cost paper §4; IMC 2022 slides (single-query sizes)",
		Quick:      "the first 10 names",
		Doc:        "bytes and packets per resolution by transport and connection\nmode, each octet attributed to a layer from a link capture",
		New:        func() experiment.Experiment { return new(Overhead) }})
}

// Quick is a run of a few minutes: the first 10 names.
func (c *Overhead) Quick() {
	if len(c.Names) == 0 {
		c.Names = layers.Names
	}
	c.Names = c.Names[:min(10, len(c.Names))]
}

// Flags binds overhead's flags.
// Its defaults are the config's (defaults), so they have one home.
func (c *Overhead) Flags(fs *flag.FlagSet) {
	c.defaults() // a zero config is valid
	experiment.ListVar(fs, &c.Transports, "transports", c.Transports, "transports")
	experiment.ListVar(fs, &c.Modes, "modes", c.Modes, "connection modes: new (one per query), persistent")
	experiment.ListVar(fs, &c.Certs, "certs", c.Certs, "certificate chains: small (one ECDSA certificate), large (an RSA chain)")
	fs.Func("names", "a file of names, one per line (default: the shipped list of 100)", func(path string) error {
		names, err := measure.ReadTargets(path)
		c.Names = names
		return err
	})
	experiment.CountVar(fs, &c.LargeCertOctets, "large-cert-octets", "the large chain's size in `octets`")
	fs.StringVar(&c.KeyShare, "key-share", c.KeyShare, "the client's TLS key share: pq (Go's default X25519MLKEM768) or classic (X25519, as the papers)")
	fs.StringVar(&c.Keep, "keep", "", "a directory to keep the captures and the key log in, for Wireshark")
}

// KindConn is a Conn in the store.
var KindConn = store.NewKind("overhead-conn")

// Conn is one captured connection, as stored.
type Conn struct {
	Cert       string        `json:"cert"`
	CertOctets int           `json:"cert_octets"`
	Transport  string        `json:"transport"`
	Mode       string        `json:"mode"`
	Index      int           `json:"index"`
	Queries    int           `json:"queries"` // resolutions the connection carried
	Decrypted  bool          `json:"decrypted"`
	Up         layers.Counts `json:"up"` // client to resolver, octets per layer (layers.LayerNames)
	Down       layers.Counts `json:"down"`
	UpPkts     int           `json:"up_packets"`
	DownPkts   int           `json:"down_packets"`
	// The slides' split, in IP payload octets: the handshake each way
	// (before the query, before the answer), the query and the response.
	HandshakeUp, HandshakeDown, Query, Response int64
}

func (c *Overhead) defaults() error {
	if len(c.Transports) == 0 {
		c.Transports = protocol.Direct()
	}
	if len(c.Modes) == 0 {
		c.Modes = []string{"new", "persistent"}
	}
	if len(c.Certs) == 0 {
		c.Certs = []string{"small"}
	}
	if len(c.Names) == 0 {
		c.Names = layers.Names
	}
	if c.LargeCertOctets <= 0 {
		c.LargeCertOctets = 4000
	}
	if c.KeyShare == "" {
		c.KeyShare = "pq"
	}
	c.Env.Defaults()
	return cmp.Or(experiment.CheckValues("transport", c.Transports, protocol.Direct()...),
		experiment.CheckValues("mode", c.Modes, "new", "persistent"),
		experiment.CheckValues("certificate size", c.Certs, "small", "large"),
		experiment.CheckValues("key share", []string{c.KeyShare}, "pq", "classic"))
}

type window struct {
	cert, transport, mode string
	from, to              time.Time
}

// Run runs the experiment and returns its ID.
func (c *Overhead) Run(ctx context.Context) (string, error) {
	if err := c.defaults(); err != nil {
		return "", experiment.BadDesign(err)
	}
	dir, err := os.MkdirTemp("", "doxlab-overhead")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	st, tb, closeAll, err := c.Env.Start(ctx, testbed.Spec{Name: "overhead", PcapDir: filepath.Join(dir, "pcap")})
	if err != nil {
		return "", err
	}
	defer closeAll()
	ip := tb.IP("server")
	var keyLog lockedBuffer
	windows, octets, err := c.measureAll(ctx, tb, dir, ip, &keyLog)
	if err != nil {
		return "", err
	}
	if err := tb.Close(); err != nil { // flushes the captures; closeAll closes it no more
		return "", err
	}
	raws, kl, err := c.readCapture(dir, keyLog.Bytes())
	if err != nil {
		return "", err
	}
	conns, err := layers.Attribute(raws, netip.MustParseAddr(ip), layers.DefaultApps, kl)
	if err != nil {
		return "", err
	}
	expID, err := c.ExperimentID("overhead")
	if err != nil {
		return "", err
	}
	runID := expID + "-none"
	if err := c.BeginRun(ctx, st, runID, "experiment:overhead", "none", map[string]any{"experiment": expID, "transports": c.Transports,
		"modes": c.Modes, "certs": octets, "names": len(c.Names), "key_share": c.KeyShare}); err != nil {
		return expID, err
	}
	return expID, c.storeConns(ctx, st, runID, conns, windows, octets)
}

// measureAll resolves every name over each transport and mode with
// each certificate, the client's link captured, and returns the time
// window of each combination and each certificate chain's octets.
func (c *Overhead) measureAll(ctx context.Context, tb experiment.Net, dir, ip string, keyLog *lockedBuffer) ([]window, map[string]int, error) {
	var windows []window
	octets := map[string]int{}
	c.Plan(len(c.Certs) * len(c.Transports) * len(c.Modes))
	for _, cert := range c.Certs {
		certFile, keyFile, n, err := experiment.WriteChain(dir, cert, c.LargeCertOctets)
		if err != nil {
			return nil, nil, err
		}
		octets[cert] = n
		srv, err := experiment.StartServer(tb, &server.Config{
			Listen:  server.Listen{UDP: ip + ":53", TCP: ip + ":53", DoT: ip + ":853", DoQ: ip + ":853", DoH: ip + ":443", DoH3: ip + ":443"},
			Answers: server.Answers{Any: "192.0.2.1"}, TLS: server.TLS{Cert: certFile, Key: keyFile}})
		if err != nil {
			return nil, nil, err
		}
		for _, t := range c.Transports {
			for _, m := range c.Modes {
				if err := ctx.Err(); err != nil {
					srv.Close()
					return nil, nil, err
				}
				w := window{cert: cert, transport: t, mode: m, from: time.Now()}
				if err := c.resolve(ctx, tb, ip, t, m, keyLog); err != nil {
					srv.Close()
					return nil, nil, fmt.Errorf("%s %s: %w", t, m, err)
				}
				time.Sleep(300 * time.Millisecond) // closing handshakes land in the window
				w.to = time.Now()
				windows = append(windows, w)
				fmt.Fprintf(c.Log, "overhead: cert %s, %s, %s connection: %d names\n", cert, t, m, len(c.Names))
				c.Advance(1)
			}
		}
		srv.Close()
	}
	return windows, octets, nil
}

// readCapture reads the client link's capture and the key log, and keeps
// copies of both in c.Keep when asked.
func (c *Overhead) readCapture(dir string, keyLog []byte) ([]layers.Raw, layers.KeyLog, error) {
	var raws []layers.Raw
	for _, f := range []string{"client-up.pcap", "client-down.pcap"} {
		r, err := layers.ReadPcap(filepath.Join(dir, "pcap", f))
		if err != nil {
			return nil, nil, err
		}
		raws = append(raws, r...)
	}
	if c.Keep != "" {
		if err := os.MkdirAll(c.Keep, 0o755); err != nil {
			return nil, nil, err
		}
		for _, f := range []string{"client-up.pcap", "client-down.pcap"} {
			b, err := os.ReadFile(filepath.Join(dir, "pcap", f))
			if err == nil {
				err = os.WriteFile(filepath.Join(c.Keep, f), b, 0o644)
			}
			if err != nil {
				return nil, nil, err
			}
		}
		if err := os.WriteFile(filepath.Join(c.Keep, "keys.log"), keyLog, 0o600); err != nil {
			return nil, nil, err
		}
	}
	kl, err := layers.ReadKeyLog(bytes.NewReader(keyLog))
	if err != nil {
		return nil, nil, err
	}
	return raws, kl, nil
}

// storeConns stores each captured connection that carried resolutions,
// labelled with the window (certificate, transport, mode) it began in.
func (c *Overhead) storeConns(ctx context.Context, st *store.Store, runID string, conns []*layers.Conn, windows []window, octets map[string]int) error {
	index := map[window]int{}
	for _, cn := range conns {
		if len(cn.Packets) == 0 {
			continue
		}
		t0 := cn.Packets[0].Time
		var w *window
		for i := range windows {
			if !t0.Before(windows[i].from) && t0.Before(windows[i].to) {
				w = &windows[i]
			}
		}
		if w == nil || cn.Client.Port() == 0 {
			continue
		}
		oc := summarizeConn(cn)
		oc.Cert, oc.CertOctets, oc.Transport, oc.Mode, oc.Index = w.cert, octets[w.cert], w.transport, w.mode, index[*w]
		if oc.Queries == 0 {
			continue // a connection that carried no resolution (e.g. a warm-up probe)
		}
		index[*w]++
		if err := st.WriteResult(ctx, runID, KindConn, fmt.Sprintf("%s|%s|%s|%04d", w.cert, w.transport, w.mode, oc.Index), t0, oc); err != nil {
			return err
		}
	}
	return nil
}

// resolve sends every name over one transport in one mode from inside the
// client host, logging the TLS and QUIC secrets.
func (c *Overhead) resolve(ctx context.Context, tb experiment.Net, ip, t, mode string, keyLog io.Writer) error {
	u, err := measure.URLFor(t, ip)
	if err != nil {
		return err
	}
	p, _ := protocol.Lookup(t)
	opts := transport.Options{Insecure: true, Timeout: 10 * time.Second, KeyLog: keyLog, Reuse: mode == "persistent", Method: "post",
		HTTPVersion: p.HTTP,
		OpenSockets: func(open func() error) error { return tb.Run("client", open) }}
	if c.KeyShare == "classic" {
		opts.KeyShares = []tls.CurveID{tls.X25519}
	}
	tr, err := transport.New(u, opts)
	if err != nil {
		return err
	}
	defer tr.Close()
	for _, name := range c.Names {
		q := new(dns.Msg)
		q.SetQuestion(dns.Fqdn(name), dns.TypeA)
		q.RecursionDesired = true
		if _, err := tr.Exchange(ctx, q); err != nil {
			return err
		}
	}
	return nil
}

// summarizeConn totals a connection and splits it the slides' way.
func summarizeConn(cn *layers.Conn) *Conn {
	oc := &Conn{Decrypted: cn.Decrypted}
	oc.Up, oc.Down, oc.UpPkts, oc.DownPkts = cn.Totals()
	seenQuery, seenAnswer := false, false
	for _, p := range cn.Packets {
		payload := int64(p.Len) - p.Layers[layers.IP]
		switch {
		case p.FromClient && p.HasDNS():
			seenQuery = true
			oc.Query += payload
			if p.FreshDNS > 0 { // a retransmitted query is not another
				oc.Queries++
			}
		case !p.FromClient && p.HasDNS():
			seenAnswer = true
			oc.Response += payload
		case p.FromClient && !seenQuery:
			oc.HandshakeUp += payload
		case !p.FromClient && !seenAnswer:
			oc.HandshakeDown += payload
		}
	}
	return oc
}

// lockedBuffer is a key log shared by concurrent connections.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) Bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]byte(nil), l.b.Bytes()...)
}

// Cell is one certificate × transport × mode, per resolution.
type Cell struct {
	Cert, Transport, Mode string
	CertOctets            int
	Conns, Resolutions    int
	Decrypted             bool
	Octets, Packets       float64                   // per resolution, both directions, IP included
	Layers                [layers.NumLayers]float64 // per resolution
	// Single query (new connections), medians in IP payload octets.
	Total, HandshakeUp, HandshakeDown, Query, Response float64
}

// Summarize computes per-resolution means and single-query medians.
func Summarize(cs []*Conn) []Cell {
	type key struct{ c, t, m string }
	keys, groups := order.Group(cs, func(c *Conn) key { return key{c.Cert, c.Transport, c.Mode} })
	slices.SortStableFunc(keys, func(a, b key) int {
		return cmp.Or(order.Compare(a.c, b.c), order.Compare(a.m, b.m), order.Compare(a.t, b.t))
	})
	var out []Cell
	for _, k := range keys {
		cell := Cell{Cert: k.c, Transport: k.t, Mode: k.m, Decrypted: true}
		var total, hu, hd, q, r []float64
		for _, c := range groups[k] {
			cell.Conns++
			cell.CertOctets = c.CertOctets
			cell.Resolutions += c.Queries
			cell.Decrypted = cell.Decrypted && (c.Decrypted || k.t == "udp" || k.t == "tcp")
			var all layers.Counts
			all.Add(c.Up)
			all.Add(c.Down)
			cell.Octets += float64(all.Total())
			cell.Packets += float64(c.UpPkts + c.DownPkts)
			for i, v := range all {
				cell.Layers[i] += float64(v)
			}
			payload := float64(all.Total() - all[layers.IP])
			total, hu, hd = append(total, payload), append(hu, float64(c.HandshakeUp)), append(hd, float64(c.HandshakeDown))
			q, r = append(q, float64(c.Query)), append(r, float64(c.Response))
		}
		if cell.Resolutions > 0 {
			n := float64(cell.Resolutions)
			cell.Octets /= n
			cell.Packets /= n
			for i := range cell.Layers {
				cell.Layers[i] /= n
			}
		}
		if k.m == "new" {
			cell.Total, cell.HandshakeUp, cell.HandshakeDown = stats.Median(total), stats.Median(hu), stats.Median(hd)
			cell.Query, cell.Response = stats.Median(q), stats.Median(r)
		}
		out = append(out, cell)
	}
	return out
}
