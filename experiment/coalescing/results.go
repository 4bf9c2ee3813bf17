package coalescing

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/doxlab/doxlab/internal/stats"

	"github.com/doxlab/doxlab/experiment"
	"github.com/doxlab/doxlab/experiment/internal/pages"
	"github.com/doxlab/doxlab/figure"
	"github.com/doxlab/doxlab/internal/order"
	"github.com/doxlab/doxlab/pageload"
	"github.com/doxlab/doxlab/server"
	"github.com/doxlab/doxlab/store"
	"github.com/doxlab/doxlab/testbed"
	"github.com/doxlab/doxlab/transport"
)

// Sample is one measured load, stored whole, with its proof.
type Sample struct {
	Task
	// Setup is the run's placement and options (Coalescing.setup).
	Setup  string    `json:"setup,omitempty"`
	Start  time.Time `json:"start"`
	Status string    `json:"status"` // ok, error, timeout, warm-up-failed, dns-failed
	Error  string    `json:"error,omitempty"`
	// PLTMs is the replay's PLT; for doq-emulated plus the DoQ lookup
	// measured apart, as the paper summed them.
	PLTMs float64 `json:"plt_ms"`
	// DNSMs is the page host's lookup: in the load, or apart.
	DNSMs float64           `json:"dns_ms"`
	Load  *pageload.Result  `json:"load"`
	Apart *transport.Record `json:"apart,omitempty"` // doq-emulated: the lookup measured apart
	Proof Proof             `json:"proof"`
	// Server are the server's records of the load's window: its
	// connections and queries.
	Server []*server.Record `json:"server"`
}

// Proof is what really happened in a load, from the server's records and
// the loader's.
type Proof struct {
	// QUICHandshakes and TCPHandshakes are the connections the server
	// saw the client complete during the load, DNS included.
	QUICHandshakes int `json:"quic_handshakes"`
	TCPHandshakes  int `json:"tcp_handshakes"`
	// Lookups are the names the loader resolved during the load; Spared
	// those an ORIGIN frame made a lookup unnecessary for (RFC 9412).
	Lookups int `json:"lookups"`
	Spared  int `json:"lookups_spared"`
	// DNSOnPageConn: the page's lookup went on the connection that then
	// fetched the page.
	DNSOnPageConn bool `json:"dns_on_page_conn"`
	// DNSEarly: the server took the page host's query before the
	// handshake of its connection completed (0-RTT early data).
	DNSEarly     bool   `json:"dns_early"`
	DNSTransport string `json:"dns_transport"` // as the server saw it
	// DNSSpared: an ORIGIN frame announced the page's origin before the
	// lookup's answer came, so the load used no answer.
	DNSSpared bool `json:"dns_spared,omitempty"`
	// PageUsed0RTT and PageResumed are the server's record of the page's
	// connection.
	PageUsed0RTT bool `json:"page_0rtt"`
	PageResumed  bool `json:"page_resumed"`
	// PageTokenUsed: the page's connection presented a NEW_TOKEN token,
	// so the server could answer 0-RTT beyond the amplification limit.
	PageTokenUsed bool `json:"page_token"`
	// WaitedSettings: the page's requests waited for the server's
	// SETTINGS; SettingsMs is when they arrived.
	WaitedSettings bool    `json:"waited_settings"`
	SettingsMs     float64 `json:"settings_ms"`
}

// Key names the sample's task.
func (s *Sample) Key() string { return s.Task.Key() }

// prove fills the proof and the times from the load and the records.
func (s *Sample) prove(host, client string) {
	r := s.Load
	if s.Apart != nil {
		s.DNSMs = s.Apart.Timing.TotalMs
	}
	if r == nil {
		return
	}
	s.PLTMs = r.PLTMs
	if s.Apart != nil {
		s.PLTMs += s.DNSMs // the paper's sum: the lookup measured apart, then the load
	}
	page := r.Resources[0].Conn
	for _, lk := range r.Lookups {
		if lk.Transport == "origin" {
			s.Proof.Spared++
		} else {
			s.Proof.Lookups++
		}
	}
	for _, lk := range r.Lookups {
		if strings.EqualFold(lk.Host, host) {
			if s.Apart == nil {
				s.DNSMs = round3(lk.EndMs - lk.StartMs)
			}
			s.Proof.DNSSpared = lk.Transport == "origin"
			s.Proof.DNSOnPageConn = lk.Coalesced && lk.Conn == page && page >= 0
		}
	}
	if page >= 0 && page < len(r.Conns) {
		s.Proof.WaitedSettings, s.Proof.SettingsMs = r.Conns[page].WaitedSettings, r.Conns[page].SettingsMs
	}
	var pagePort string
	for _, rec := range s.Server {
		switch rec.Kind {
		case "conn":
			if h, _, _ := net.SplitHostPort(rec.Remote); h != client {
				continue
			}
			if rec.ALPN == "h3" || rec.ALPN == "doq" {
				s.Proof.QUICHandshakes++
			} else {
				s.Proof.TCPHandshakes++
			}
		case "query":
			if strings.EqualFold(strings.TrimSuffix(rec.QName, "."), host) && s.Proof.DNSTransport == "" {
				s.Proof.DNSTransport, s.Proof.DNSEarly = rec.Transport, rec.EarlyData
			}
		}
	}
	// The page's connection as the server saw it: the web listener's
	// HTTP/3 connection from the loader's page socket.
	// (its socket is bound to no address in particular: the port tells).
	if page >= 0 && page < len(r.Conns) {
		_, pagePort, _ = net.SplitHostPort(r.Conns[page].Local)
	}
	for _, rec := range s.Server {
		if rec.Kind == "conn" && rec.Listener == "web" && rec.ALPN == "h3" && rec.RemotePort() == pagePort {
			s.Proof.PageUsed0RTT, s.Proof.PageResumed, s.Proof.PageTokenUsed = rec.Used0RTT, rec.Resumed, rec.TokenUsed
			break
		}
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func round3(f float64) float64 { return math.Round(f*1000) / 1000 }

// Samples are the stored loads of coalescing runs.
type Samples []*Sample

// Load reads the loads of the runs whose IDs start with prefix.
func (c *Coalescing) Load(ctx context.Context, st *store.Store, prefix string) (experiment.Results, error) {
	ss, err := experiment.LoadResults[Sample](ctx, st, Kind, experiment.OfExperiment(prefix))
	return Samples(ss), err
}

// Count is the number of loads.
func (ss Samples) Count() (int, string) { return len(ss), "coalescing page loads" }

// Cell is one profile × page × DNS mode × H3 variant: medians and the
// shares of what the proofs say.
type Cell struct {
	Profile, Page, DNS, H3, Settings string
	Setup                            string // placement and options: separate, cdn+origins, ...
	N, OK                            int
	PLT, DNS_                        float64 // medians, ms
	// RelPLT is the median's change over DoUDP + H3 1-RTT, Rel0RTT over
	// DoUDP + H3 0-RTT (SETTINGS remembered), in percent.
	RelPLT, Rel0RTT float64
	// PLTStat is the PLT's median with its 95 % interval; Delta1RTT and
	// Delta0RTT compare the loads with those two baselines' (Mann-Whitney,
	// "~" when not significant).
	PLTStat              stats.Summary
	Delta1RTT, Delta0RTT stats.Comparison
	// DNSStat, HandshakesStat, LookupsStat, SparedStat: the other medians
	// with their intervals.
	DNSStat, HandshakesStat, LookupsStat, SparedStat stats.Summary
	PLTs                                             []float64 // each OK load's PLT, ms
	// Shares of the OK loads: exactly one QUIC handshake (and none over
	// TCP), the lookup on the page's connection, the lookup in early
	// data, the page's connection in 0-RTT, requests that waited for
	// SETTINGS.
	OneHandshake, OnPageConn, DNSEarly, Used0RTT, Waited float64
	Handshakes                                           float64 // median handshakes, QUIC and TCP
	Lookups, Spared                                      float64 // median lookups made, and spared by ORIGIN frames
}

// Variant is the H3 handshake with the SETTINGS treatment: 1rtt, 0rtt,
// 0rtt-wait.
func (c Cell) Variant() string { return variant(c.H3, c.Settings) }

func variant(h3, settings string) string {
	if h3 == "0rtt" && settings == "wait" {
		return "0rtt-wait"
	}
	return h3
}

// Summarize groups the loads into cells, in a stable order.
func Summarize(ss Samples) []Cell {
	type key struct{ p, g, d, v, s string }
	cells := map[key]*Cell{}
	var keys []key
	plts := map[key][]float64{}
	dnss := map[key][]float64{}
	hs := map[key][]float64{}
	lks, spared := map[key][]float64{}, map[key][]float64{}
	for _, s := range ss {
		k := key{s.Profile, s.Page, s.DNS, variant(s.H3, s.Settings), s.Setup}
		c, ok := cells[k]
		if !ok {
			c = &Cell{Profile: s.Profile, Page: s.Page, DNS: s.DNS, H3: s.H3, Settings: s.Settings, Setup: s.Setup}
			if s.H3 == "1rtt" {
				c.Settings = ""
			}
			cells[k] = c
			keys = append(keys, k)
		}
		c.N++
		if s.Status != "ok" {
			continue
		}
		c.OK++
		plts[k] = append(plts[k], s.PLTMs)
		dnss[k] = append(dnss[k], s.DNSMs)
		hs[k] = append(hs[k], float64(s.Proof.QUICHandshakes+s.Proof.TCPHandshakes))
		lks[k] = append(lks[k], float64(s.Proof.Lookups))
		spared[k] = append(spared[k], float64(s.Proof.Spared))
		p := s.Proof
		c.OneHandshake += b2f(p.QUICHandshakes == 1 && p.TCPHandshakes == 0)
		c.OnPageConn += b2f(p.DNSOnPageConn)
		c.DNSEarly += b2f(p.DNSEarly)
		c.Used0RTT += b2f(p.PageUsed0RTT)
		c.Waited += b2f(p.WaitedSettings)
	}
	for k, c := range cells {
		c.PLTs, c.PLTStat = plts[k], stats.Summarize(plts[k])
		c.DNSStat, c.HandshakesStat, c.LookupsStat, c.SparedStat = stats.Summarize(dnss[k]), stats.Summarize(hs[k]), stats.Summarize(lks[k]), stats.Summarize(spared[k])
		c.PLT, c.DNS_, c.Handshakes = c.PLTStat.Median, c.DNSStat.Median, c.HandshakesStat.Median
		c.Lookups, c.Spared = c.LookupsStat.Median, c.SparedStat.Median
		if c.OK > 0 {
			n := float64(c.OK)
			c.OneHandshake, c.OnPageConn, c.DNSEarly, c.Used0RTT, c.Waited = c.OneHandshake/n, c.OnPageConn/n, c.DNSEarly/n, c.Used0RTT/n, c.Waited/n
		}
	}
	rel := func(c *Cell, base *Cell) (float64, stats.Comparison) {
		if base == nil || !(base.PLT > 0) {
			return math.NaN(), stats.Compare(nil, nil)
		}
		return 100 * (c.PLT/base.PLT - 1), stats.Compare(base.PLTs, c.PLTs)
	}
	for k, c := range cells {
		c.RelPLT, c.Delta1RTT = rel(c, cells[key{k.p, k.g, "udp", "1rtt", k.s}])
		c.Rel0RTT, c.Delta0RTT = rel(c, cells[key{k.p, k.g, "udp", "0rtt", k.s}])
	}
	slices.SortStableFunc(keys, func(a, b key) int {
		return cmp.Or(order.Compare(a.s, b.s), order.Compare(a.p, b.p), order.Compare(a.g, b.g), order.Compare(a.d, b.d), order.Compare(a.v, b.v))
	})
	out := make([]Cell, len(keys))
	for i, k := range keys {
		out[i] = *cells[k]
	}
	return out
}

// WriteTable writes the cells.
func (ss Samples) WriteTable(w io.Writer) error {
	fmt.Fprintln(w, "medians in ms with their 95 % intervals; Δ against DoUDP + H3 1-RTT and against DoUDP + H3 0-RTT, \"~\" where Mann-Whitney finds no difference (p ≥ 0.05); shares of the ok loads")
	fmt.Fprintf(w, "%-22s %-10s %-8s %-15s %-10s %6s %8s %-17s %-19s %-26s %-26s %-14s %-14s %-14s %6s %6s %6s %6s\n", "setup", "profile", "page", "dns", "h3", "ok", "PLT", "PLT 95% CI", "DNS", "Δ1-RTT", "Δ0-RTT", "hs", "lookups", "spared", "1-hs", "onconn", "early", "0-RTT")
	for _, c := range Summarize(ss) {
		if _, err := fmt.Fprintf(w, "%-22s %-10s %-8s %-15s %-10s %3d/%-2d %8s %-17s %-19s %-26s %-26s %-14s %-14s %-14s %5.0f%% %5.0f%% %5.0f%% %5.0f%%\n", cmp.Or(c.Setup, "-"), c.Profile, c.Page, c.DNS, c.Variant(), c.OK, c.N,
			stats.F(c.PLT, 1), c.PLTStat.CI(1), c.DNSStat.Cell(1), c.Delta1RTT.FormatDelta(), c.Delta0RTT.FormatDelta(), c.HandshakesStat.Cell(0), c.LookupsStat.Cell(0), c.SparedStat.Cell(0),
			100*c.OneHandshake, 100*c.OnPageConn, 100*c.DNSEarly, 100*c.Used0RTT); err != nil {
			return err
		}
	}
	return nil
}

var table = experiment.Table("coalescing", `<table id="coalescing-cells"><tr><th class="l">setup</th><th class="l">profile</th><th class="l">page</th><th class="l">DNS</th><th class="l">H3</th><th>ok/n</th>
<th>PLT ms</th><th>95 % CI</th><th>DNS ms</th><th>Δ DoUDP 1-RTT</th><th>Δ DoUDP 0-RTT</th><th>handshakes</th><th>lookups</th><th>spared by ORIGIN</th><th>one handshake</th><th>DNS on page's conn</th><th>DNS in 0-RTT</th><th>page in 0-RTT</th></tr>
{{range .}}<tr><td class="l">{{or .Setup "–"}}</td><td class="l">{{.Profile}}</td><td class="l">{{.Page}}</td><td class="l">{{.DNS}}</td><td class="l">{{.Variant}}</td><td>{{.OK}}/{{.N}}</td>
<td>{{ms .PLT}}</td><td>{{ci1 .PLTStat}}</td><td>{{mci1 .DNSStat}}</td><td>{{delta .Delta1RTT}}</td><td>{{delta .Delta0RTT}}</td><td>{{mci0 .HandshakesStat}}</td><td>{{mci0 .LookupsStat}}</td><td>{{mci0 .SparedStat}}</td><td>{{share .OneHandshake}}</td><td>{{share .OnPageConn}}</td><td>{{share .DNSEarly}}</td><td>{{share .Used0RTT}}</td></tr>
{{end}}</table>`)

// Section is the report's part: the cells, and the web experiment's
// relative-PLT figures (Fig. 8, 9, 10-11, 12) drawn from these loads, the
// emulated row beside the real coalesced ones.
func (ss Samples) Section(dir string) (*experiment.Section, error) {
	set := &figure.Set{Dir: dir}
	if err := pages.Figures(webCells(ss), set); err != nil {
		return nil, err
	}
	return experiment.NewSection("coalescing", "Coalescing DNS and web on one QUIC connection",
		"doxlab's page loader replays each corpus page's graph (captured from Chromium, shipped with the corpus) over HTTP/3, its name resolved over a connection of its own per DNS transport, by a DoQ lookup measured apart and added (<i>doq-emulated</i>: the cross-layer paper's emulated coalescing), or on the page's own QUIC connection: DoH/3 requests (<i>doh3-coalesced</i>) or DNS streams (<i>dnsstream</i>, docs/dnsstream.md). <i>0rtt-wait</i> (in the figures, <i>0-RTT wait</i>) holds the requests for the server's SETTINGS; <i>DoQ emulated</i> is the paper's emulation. Medians per cell; Δ is the median's change over DoUDP with H3 1-RTT and with H3 0-RTT on the same profile and page. The shares are the proof, from the server's records: loads that cost exactly one handshake, whose lookup rode on the page's connection, whose query the server took as 0-RTT early data, whose page connection used 0-RTT.",
		table, Summarize(ss), set)
}

// webCells are the loads as the web experiment's cells, to draw its
// figures: the DNS mode as the transport, the H3 variant as the H3 mode.
func webCells(ss Samples) []pages.Cell {
	var ws []*pages.Sample
	for _, s := range ss {
		ws = append(ws, &pages.Sample{Task: pages.Task{Profile: s.Profile, Page: s.Page, Transport: s.DNS, H3: variant(s.H3, s.Settings),
			StubState: "cold", DNSMode: strings.TrimSuffix("loader "+s.Setup, " "), Engine: pages.EngineDoxlab, Rep: s.Rep}, Status: s.Status, PLTMs: s.PLTMs, DNSMs: s.DNSMs,
			H3Used0RTT: s.Proof.PageUsed0RTT, H3Resumed: s.Proof.PageResumed})
	}
	return pages.Summarize(ws)
}

// mobile says whether a profile is a mobile access (the paper's 4G ones).
func mobile(profile string) bool {
	return strings.HasPrefix(profile, "4g") || strings.HasPrefix(profile, "3g") || strings.HasPrefix(profile, "5g")
}

// Findings checks the targets against the paper's claims: how
// much of DoH's cost real coalescing takes back, whether encrypted DNS
// costs nothing when coalesced in 0-RTT, that a coalesced single-origin
// page costs one handshake, and what waiting for SETTINGS costs.
func (ss Samples) Findings() []experiment.Finding {
	cells := Summarize(ss)
	type tuple struct{ profile, page string }
	by := map[tuple]map[string]*Cell{}
	var tuples []tuple
	for i := range cells {
		c := &cells[i]
		if c.OK == 0 || c.Setup != "" { // the papers' setup: one server, no frames or records
			continue
		}
		k := tuple{c.Profile, c.Page}
		if by[k] == nil {
			by[k] = map[string]*Cell{}
			tuples = append(tuples, k)
		}
		by[k][c.DNS+"/"+c.Variant()] = c
	}
	// The best coalesced 0-RTT cell of a tuple.
	coalesced := func(m map[string]*Cell) *Cell {
		var best *Cell
		for _, d := range []string{DoH3Coalesced, DNSStream} {
			if c := m[d+"/0rtt"]; c != nil && (best == nil || c.PLT < best.PLT) {
				best = c
			}
		}
		return best
	}
	var gainN, gainOK, freeN, freeOK int
	gainMin, freeMin := math.MaxInt, math.MaxInt // the fewest loads in a cell behind each
	var gains, frees []string
	for _, k := range tuples {
		m := by[k]
		co, doh := coalesced(m), m["doh2/1rtt"]
		if co != nil && doh != nil && !math.IsNaN(doh.RelPLT) {
			want := 1.0 / 3
			if mobile(k.profile) {
				want = 0.5
			}
			gainN++
			gainMin = min(gainMin, co.OK, doh.OK, cells0(m["udp/1rtt"]))
			// The share of DoH's inflation taken back; a tuple where DoH
			// costs nothing measurable (under 1 %) holds if coalescing
			// costs no more.
			taken := (doh.RelPLT - co.RelPLT) / doh.RelPLT
			if (doh.RelPLT >= 1 && taken >= want) || (doh.RelPLT < 1 && co.RelPLT <= doh.RelPLT) {
				gainOK++
			}
			gains = append(gains, fmt.Sprintf("%s/%s %.0f%% of %s", k.page, k.profile, 100*taken, figure.Pct(doh.RelPLT)))
		}
		if u0 := m["udp/0rtt"]; co != nil && u0 != nil {
			freeN++
			freeMin = min(freeMin, co.OK, u0.OK)
			d := 100 * (co.PLT/u0.PLT - 1)
			if d <= 1 {
				freeOK++
			}
			frees = append(frees, fmt.Sprintf("%s/%s %s", k.page, k.profile, figure.Pct(d)))
		}
	}
	var oneN int
	oneMin, waitMin := math.MaxInt, math.MaxInt
	var oneOK float64
	var waits []float64
	var waitRTT []string
	var waitTest *stats.Comparison // the least significant of the pairs
	for i := range cells {
		c := &cells[i]
		if Coalesced(c.DNS) && c.OK > 0 && c.Lookups+c.Spared <= 1 { // a single-origin page
			oneN++
			oneMin = min(oneMin, c.OK)
			oneOK += c.OneHandshake
		}
		if c.Variant() == "0rtt-wait" {
			if r := by[tuple{c.Profile, c.Page}][c.DNS+"/0rtt"]; r != nil {
				if p, ok := testbed.Profiles[c.Profile]; ok && p.RTT() > 0 {
					rtts := (c.PLT - r.PLT) / (float64(p.RTT()) / float64(time.Millisecond))
					waits = append(waits, rtts)
					waitMin = min(waitMin, c.OK, r.OK)
					if t := stats.Compare(r.PLTs, c.PLTs); waitTest == nil || !(t.P <= waitTest.P) {
						waitTest = &t
					}
					waitRTT = append(waitRTT, fmt.Sprintf("%s %s/%s %+.2f", c.DNS, c.Page, c.Profile, rtts))
				}
			}
		}
	}
	all := func(ok, n int) experiment.Verdict {
		if n == 0 {
			return experiment.NoData
		}
		return experiment.Within(float64(ok)/float64(n), 1, 1)
	}
	oneShare := math.NaN()
	if oneN > 0 {
		oneShare = oneOK / float64(oneN)
	}
	list := func(n, ok int, what []string, none string) string {
		if n == 0 {
			return none
		}
		return fmt.Sprintf("%d of %d (page, profile): %s", ok, n, strings.Join(what, "; "))
	}
	return []experiment.Finding{
		{
			Claim:   "Coalescing DNS and web in 0-RTT takes back at least the paper's share of DoH's cost",
			Source:  "cross-layer paper §IV-C, §VI; issue: real coalescing",
			Paper:   "emulated (a DoQ lookup added to an H3 0-RTT load): a third of DoH + H3 1-RTT's PLT increase on fixed lines, half on mobile",
			Here:    list(gainN, gainOK, gains, "no (page, profile) with DoH/2 + H3 1-RTT and a coalesced 0-RTT mode"),
			Why:     "holds when the best coalesced 0-RTT mode's median PLT increase over DoUDP + H3 1-RTT is at most two thirds of DoH/2's on fiber, cable and DSL, at most half on 4G, in every (page, profile)",
			Figure:  "coalescing",
			Verdict: all(gainOK, gainN),
			N:       fewest(gainMin), Timed: true,
		},
		{
			Claim:   "Encrypted DNS at no cost: coalesced + 0-RTT within +1 % of DoUDP + H3 0-RTT",
			Source:  "issue: real coalescing (the paper's setup could not reach it)",
			Paper:   "not reached: the emulation pays the DoQ lookup on its own connection",
			Here:    list(freeN, freeOK, frees, "no (page, profile) with DoUDP + H3 0-RTT and a coalesced 0-RTT mode"),
			Why:     "holds when the best coalesced 0-RTT mode's median PLT is at most 1 % above DoUDP + H3 0-RTT's in every (page, profile)",
			Figure:  "coalescing",
			Verdict: all(freeOK, freeN),
			N:       fewest(freeMin), Timed: true,
		},
		{
			Claim:   "A coalesced single-origin page costs exactly one QUIC handshake, DNS included",
			Source:  "issue: real coalescing",
			Paper:   "emulated only: the paper's lookups had a connection of their own",
			Here:    fmt.Sprintf("%s of the coalesced loads (the server's connection records)", figure.Share(oneShare)),
			Why:     "holds when every ok coalesced load shows one QUIC handshake and no TCP one",
			Figure:  "coalescing",
			Verdict: experiment.Within(oneShare, 1, 1),
			N:       fewest(oneMin),
		},
		{
			Claim:   "Waiting for the server's SETTINGS costs 0-RTT a round trip",
			Source:  "cross-layer paper §IV-C (the H3 SETTINGS exchange cost the round trip 0-RTT should save)",
			Paper:   "about one RTT lost",
			Here:    waitHere(waits, waitRTT),
			Why:     "holds when the median extra PLT of 0-RTT loads that wait for SETTINGS is 0.5 to 1.5 RTT, and Mann-Whitney tells every waiting cell from its twin",
			Figure:  "coalescing",
			Verdict: experiment.Within(stats.Median(waits), 0.5, 1.5),
			N:       fewest(waitMin), InRTTs: true, Test: waitTest,
		},
		originFinding(cells),
	}
}

// fewest is a running minimum of samples, 0 where nothing was counted.
func fewest(n int) int {
	if n == math.MaxInt {
		return 0
	}
	return n
}

// cells0 is a cell's OK loads, MaxInt for none (so min ignores it).
func cells0(c *Cell) int {
	if c == nil {
		return math.MaxInt
	}
	return c.OK
}

// originFinding compares many-origin pages served from one CDN edge with
// ORIGIN frames against the same pages on separate servers: how many
// lookups and handshakes the frames and the shared certificate remove.
func originFinding(cells []Cell) experiment.Finding {
	f := experiment.Finding{
		Claim:  "On one CDN with ORIGIN frames, a many-origin page costs one lookup and one handshake",
		Source: "RFC 9412; issue: pages as the web is",
		Paper:  "not measured: no browser reads ORIGIN frames",
		Why:    "holds when every many-origin cell on one CDN with ORIGIN frames has a median of one lookup and one handshake besides its DNS transport's own connection",
		Figure: "coalescing",
	}
	// Per page: the range of median lookups and handshakes over its
	// cells on one CDN with frames, and on separate servers.
	type span struct{ lo, hi float64 }
	widen := func(m map[string]*[2]span, page string, lookups, hs float64) {
		r := m[page]
		if r == nil {
			r = &[2]span{{lookups, lookups}, {hs, hs}}
			m[page] = r
		}
		r[0] = span{min(r[0].lo, lookups), max(r[0].hi, lookups)}
		r[1] = span{min(r[1].lo, hs), max(r[1].hi, hs)}
	}
	onCDN, separate := map[string]*[2]span{}, map[string]*[2]span{}
	n, ok, least := 0, 0, math.MaxInt
	for _, c := range cells {
		if c.OK == 0 || c.Lookups+c.Spared <= 1 {
			continue
		}
		if c.Setup == "" {
			widen(separate, c.Page, c.Lookups+c.Spared, c.Handshakes)
			continue
		}
		if !strings.Contains(c.Setup, "cdn") || !strings.Contains(c.Setup, "origins") {
			continue
		}
		n++
		least = min(least, c.OK)
		own := 0.0 // the DNS transport's own connection
		if c.DNS != "udp" {
			own = 1
		}
		if c.Lookups <= 1 && c.Handshakes <= 1+own {
			ok++
		}
		widen(onCDN, c.Page, c.Lookups, c.Handshakes)
	}
	if n == 0 {
		f.Here, f.Verdict = "no loads of a many-origin page on one CDN with ORIGIN frames (--placement cdn --origins)", experiment.NoData
		return f
	}
	rng := func(s span) string {
		if s.lo == s.hi {
			return fmt.Sprintf("%.0f", s.lo)
		}
		return fmt.Sprintf("%.0f-%.0f", s.lo, s.hi)
	}
	var here []string
	for _, page := range slices.SortedFunc(maps.Keys(onCDN), order.Compare) {
		r := onCDN[page]
		line := fmt.Sprintf("%s: %s lookups, %s handshakes", page, rng(r[0]), rng(r[1]))
		if b := separate[page]; b != nil {
			line += fmt.Sprintf(" (separate servers: %s and %s)", rng(b[0]), rng(b[1]))
		}
		here = append(here, line)
	}
	f.Here = strings.Join(here, "; ")
	f.Verdict = experiment.Within(float64(ok), float64(n), float64(n))
	f.N = fewest(least)
	return f
}

func waitHere(waits []float64, per []string) string {
	if len(waits) == 0 {
		return "no 0-RTT loads that waited for SETTINGS beside ones that did not"
	}
	return fmt.Sprintf("median %+.2f RTT (%s)", stats.Median(waits), strings.Join(per, "; "))
}

// Cells are the cells' PLT as numbers, against DoUDP + H3 1-RTT and
// against DoUDP + H3 0-RTT.
func (ss Samples) Cells() []experiment.Cell {
	var out []experiment.Cell
	for _, c := range Summarize(ss) {
		keys := map[string]string{"setup": c.Setup, "profile": c.Profile, "page": c.Page, "dns": c.DNS, "h3": c.Variant()}
		out = append(out,
			experiment.NewCell("coalescing", keys, "plt_ms", c.N, c.PLTStat).Versus("udp/1rtt", c.Delta1RTT),
			experiment.NewCell("coalescing", keys, "plt_ms", c.N, c.PLTStat).Versus("udp/0rtt", c.Delta0RTT),
			experiment.NewCell("coalescing", keys, "dns_ms", c.N, c.DNSStat),
			experiment.NewCell("coalescing", keys, "handshakes", c.N, c.HandshakesStat),
			experiment.NewCell("coalescing", keys, "lookups", c.N, c.LookupsStat),
			experiment.NewCell("coalescing", keys, "lookups_spared", c.N, c.SparedStat))
	}
	return out
}
