package privacy

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/doxlab/doxlab/experiment"
	"github.com/doxlab/doxlab/figure"
	"github.com/doxlab/doxlab/internal/ech"
	"github.com/doxlab/doxlab/internal/order"
	"github.com/doxlab/doxlab/internal/stats"
	"github.com/doxlab/doxlab/protocol"
	"github.com/doxlab/doxlab/store"
)

// Samples are the stored samples of privacy runs.
type Samples []*Sample

// Load reads the samples of the runs whose IDs start with prefix.
func (c *Privacy) Load(ctx context.Context, st *store.Store, prefix string) (experiment.Results, error) {
	ss, err := experiment.LoadResults[Sample](ctx, st, Kind, experiment.OfExperiment(prefix))
	return Samples(ss), err
}

// Count is the number of samples.
func (ss Samples) Count() (int, string) { return len(ss), "lookups, handshakes and page loads" }

// Cell is one profile × part × rung × condition.
type Cell struct {
	Profile, Part, Rung, Condition string
	Label                          string // the rung as the ladder names it
	N, OK                          int
	RTTMs, ProxyRTTMs              float64
	Stat                           stats.Summary // Ms
	RTTsStat                       stats.Summary
	TargetStat                     stats.Summary // ODoH: the proxy's target exchange
	SealedStat                     stats.Summary // ODoH: sealed query + answer octets
	FCPStat                        stats.Summary // browser: first contentful paint
	Accepted, Retried, Grease      float64       // web: shares of samples whose server records said so
	ZeroRTT                        float64       // the share whose connection used 0-RTT
	OuterNames                     []string      // web: the outer names the server saw
}

// rungLabel names a rung as the ladder does.
func rungLabel(part, rung string) string {
	switch part {
	case "web":
		return map[string]string{Clear: "name in clear", ECH: "ECH", ECHStale: "ECH, stale config"}[rung]
	case "page", "browser":
		dns, how, _ := strings.Cut(rung, "+")
		label := rungLabel("dns", dns)
		if dns == Coalesced {
			label = "DNS on the page's connection"
		}
		label += map[string]string{Clear: ", name in clear", ECH: " + ECH"}[how]
		if part == "browser" {
			label = "Chromium, " + label
		}
		return label
	}
	p, _ := protocol.Lookup(rung)
	return p.Label
}

// rank orders cells by the ladder: the parts in turn, each as its list
// of cells goes.
func rank(part, rung, cond string) int {
	named := func(d dnsECH) bool { return d.rung() == rung }
	switch part {
	case "dns":
		return slices.Index(dnsCells, rungCond{rung, cond})
	case "web":
		return len(dnsCells) + slices.Index(webCells, rungCond{rung, cond})
	case "page":
		return len(dnsCells) + len(webCells) + slices.IndexFunc(pageRungs, named)
	}
	return len(dnsCells) + len(webCells) + len(pageRungs) + slices.IndexFunc(browserRungs, named)
}

// Summarize groups the samples into cells, by profile, then the ladder.
func Summarize(ss []*Sample) []Cell {
	type key struct{ p, part, rung, cond string }
	keys, groups := order.Group(ss, func(s *Sample) key { return key{s.Profile, s.Part, s.Rung, s.Condition} })
	slices.SortStableFunc(keys, func(a, b key) int {
		if c := order.Compare(a.p, b.p); c != 0 {
			return c
		}
		return rank(a.part, a.rung, a.cond) - rank(b.part, b.rung, b.cond)
	})
	var out []Cell
	for _, k := range keys {
		c := Cell{Profile: k.p, Part: k.part, Rung: k.rung, Condition: k.cond, Label: rungLabel(k.part, k.rung)}
		var v, rtts, target, sealed, fcp []float64
		for _, s := range groups[k] {
			c.N++
			c.RTTMs, c.ProxyRTTMs = s.RTTMs, s.ProxyRTTMs
			if s.Status != "ok" {
				continue
			}
			c.OK++
			v, rtts = append(v, s.Ms), append(rtts, s.RTTs)
			if s.Part == "browser" {
				fcp = append(fcp, s.FCPMs)
			}
			if s.ODoH != nil {
				target = append(target, s.ODoH.TargetMs)
				sealed = append(sealed, float64(s.ODoH.Sealed.Sent+s.ODoH.Sealed.Received))
			}
			if slices.Contains(s.ECH, ech.Accepted) {
				c.Accepted++
			}
			if s.Retried {
				c.Retried++
			}
			if s.Used0RTT {
				c.ZeroRTT++
			}
			if slices.Contains(s.ECH, ech.GREASE) {
				c.Grease++
			}
			if s.OuterSNI != "" && !slices.Contains(c.OuterNames, s.OuterSNI) {
				c.OuterNames = append(c.OuterNames, s.OuterSNI)
			}
		}
		c.Stat, c.RTTsStat = stats.Summarize(v), stats.Summarize(rtts)
		c.TargetStat, c.SealedStat, c.FCPStat = stats.Summarize(target), stats.Summarize(sealed), stats.Summarize(fcp)
		if c.OK > 0 {
			c.Accepted /= float64(c.OK)
			c.Retried /= float64(c.OK)
			c.Grease /= float64(c.OK)
			c.ZeroRTT /= float64(c.OK)
		}
		out = append(out, c)
	}
	return out
}

// WriteTable writes the medians per cell.
func (ss Samples) WriteTable(w io.Writer) error {
	fmt.Fprintln(w, "The privacy ladder, medians with 95 % intervals: a lookup's total (dns), a new HTTP/3 connection's dial to the page's last octet (web), doxlab's loader's PLT (page)")
	fmt.Fprintf(w, "%-10s %-7s %-36s %-8s %7s %-22s %-8s %-16s %-22s\n", "profile", "part", "rung", "cond.", "ok", "ms", "RTTs", "proxy→target ms", "what the server saw")
	for _, c := range Summarize(ss) {
		saw := ""
		if c.Part == "page" {
			saw = fmt.Sprintf("ECH accepted %s", experiment.Share(c.Accepted))
		}
		if c.Part == "browser" {
			saw = fmt.Sprintf("ECH accepted %s, outer %v, FCP %s ms", experiment.Share(c.Accepted), c.OuterNames, c.FCPStat.Cell(1))
		}
		if c.Part == "web" {
			saw = fmt.Sprintf("ECH accepted %s, retried %s, 0-RTT %s, outer %v", experiment.Share(c.Accepted), experiment.Share(c.Retried), experiment.Share(c.ZeroRTT), c.OuterNames)
		}
		if _, err := fmt.Fprintf(w, "%-10s %-7s %-36s %-8s %7s %-22s %-8s %-16s %s\n", c.Profile, c.Part, c.Label, c.Condition, fmt.Sprintf("%d/%d", c.OK, c.N),
			c.Stat.Cell(1), stats.F(c.RTTsStat.Median, 2), c.TargetStat.Cell(1), saw); err != nil {
			return err
		}
	}
	return nil
}

var table = experiment.Table("privacy", `<table id="privacy"><tr><th class="l">profile</th><th class="l">part</th><th class="l">rung</th><th class="l">condition</th><th>ok/n</th><th>ms</th><th>RTTs</th><th>proxy → target ms</th><th>sealed octets</th><th>FCP ms</th><th>0-RTT</th><th>ECH accepted</th><th>retried</th><th class="l">outer name</th></tr>
{{range .}}<tr><td class="l">{{.Profile}}</td><td class="l">{{.Part}}</td><td class="l">{{.Label}}</td><td class="l">{{.Condition}}</td><td>{{.OK}}/{{.N}}</td><td>{{mci1 .Stat}}</td><td>{{f .RTTsStat.Median}}</td><td>{{mci1 .TargetStat}}</td><td>{{mci0 .SealedStat}}</td><td>{{mci1 .FCPStat}}</td><td>{{share .ZeroRTT}}</td><td>{{if ne .Part "dns"}}{{share .Accepted}}{{end}}</td><td>{{if eq .Part "web"}}{{share .Retried}}{{end}}</td><td class="l">{{range .OuterNames}}{{.}} {{end}}</td></tr>
{{end}}</table>`)

// Section is the report's part: the table and the ladder's medians.
func (ss Samples) Section(dir string) (*experiment.Section, error) {
	cells := Summarize(ss)
	set := &figure.Set{Dir: dir}
	for _, part := range []string{"dns", "web", "page", "browser"} {
		var bars []figure.Bar
		for _, c := range cells {
			if c.Part != part {
				continue
			}
			b := figure.Bar{Label: fmt.Sprintf("%s: %s, %s", c.Profile, c.Label, c.Condition), Value: c.Stat.Median, Color: figure.Blue, Text: stats.F(c.Stat.Median, 1) + " ms"}
			if c.Rung == protocol.ODoH || c.Rung == ECH || c.Rung == ECHStale || strings.HasSuffix(c.Rung, "+"+ECH) {
				b.Color = figure.Red
			}
			if c.OK == 0 {
				b.Value = math.NaN()
			}
			bars = append(bars, b)
		}
		if len(bars) == 0 {
			continue
		}
		title, x := "Lookups up the privacy ladder", "median lookup (ms)"
		switch part {
		case "web":
			title, x = "A new HTTP/3 connection and the page, in clear and with ECH", "median dial to the page's last octet (ms)"
		case "page":
			title, x = "A page load up the ladder (doxlab's loader, HTTP/3)", "median PLT (ms)"
		case "browser":
			title, x = "Chromium's page load over secure DNS, in clear and with ECH", "median PLT (ms)"
		}
		p, w, h, data, err := figure.Bars(bars, title, x)
		if err != nil {
			return nil, err
		}
		if err := set.Add(p, "privacy-"+part, title+" (red: the rungs that hide more)", "", w, h, data); err != nil {
			return nil, err
		}
	}
	return experiment.NewSection("privacy", "The privacy ladder: ECH and Oblivious DoH",
		"Each rung hides more: DoH and DoQ hide names from the network, Oblivious DoH (RFC 9230) hides the client from the resolver through a proxy host, ECH (RFC 9849) hides the site's name in the TLS handshake. DNS cells are one lookup each: on a new connection (fresh), resuming a TLS session (resumed; DoQ's 0rtt), or on a connection kept open (reused), the ODoH proxy's connection to its target kept open as deployed proxies do. Web cells are a new HTTP/3 connection to the page and its first response; the outer name and ECH columns are what the server recorded of each connection. Page cells are doxlab's page loader fetching a four-resource page over HTTP/3 on a new connection, its lookups (the HTTPS record, whose hint spares the A lookup) over each rung's DNS kept open, with the record's ECH config or the name in clear: PLT; on the coalesced rung the lookups ride on the page's connection itself (DNS streams), which offers the ECH config an earlier visit left, so the network sees one connection to the public name. Browser cells are Chromium loading the page with its DNS over the server's DoH in secure mode (the only way it uses ECH), ECH switched off or on, after a reset (caches, sockets and tickets gone): PLT and FCP, and the server's record of ECH.",
		table, cells, set)
}

// Findings checks the published claims: ODoH costs DoH plus the detour
// through its proxy (Singanamalla et al., PETS 2021), and ECH adds no
// round trip with a current config and one when it must retry (RFC 9849
// §6.1.6).
func (ss Samples) Findings() []experiment.Finding {
	loopback := true
	for _, s := range ss {
		if s.Profile != "" && s.Profile != "none" {
			loopback = false
		}
	}
	pick := func(part, rung, cond string) (v []float64, rtt, proxy float64) {
		for _, s := range ss {
			if s.Part == part && s.Rung == rung && s.Condition == cond && s.Status == "ok" {
				v = append(v, s.Ms)
				rtt, proxy = s.RTTMs, s.ProxyRTTMs
			}
		}
		return v, rtt, proxy
	}
	var out []experiment.Finding

	doh, _, _ := pick("dns", protocol.DoH2, "reused")
	odoh, _, proxy := pick("dns", protocol.ODoH, "reused")
	// The detour: client→proxy (the client's RTT and the proxy's link),
	// then proxy→target (the proxy's link), instead of client→target.
	detour := 2 * proxy
	d := stats.Median(odoh) - stats.Median(doh)
	cmpODoH := stats.Compare(doh, odoh)
	slack := 0.25*detour + 1
	out = append(out, experiment.Finding{
		Claim:   "Oblivious DoH costs DoH plus the detour through its proxy",
		Source:  "Singanamalla et al., PETS 2021 (ODoH), §6",
		Paper:   "ODoH's response time close to DoH's plus the proxy's hop",
		Here:    fmt.Sprintf("on kept connections: DoH %s ms, ODoH %s ms, %s ms more; the detour is %s ms (proxy link %s ms RTT)", experiment.F2(stats.Median(doh)), experiment.F2(stats.Median(odoh)), experiment.F2(d), experiment.F2(detour), experiment.F2(proxy)),
		Why:     fmt.Sprintf("holds when ODoH's extra time is the detour ± %s ms (a quarter of it and 1 ms)", experiment.F2(slack)),
		Figure:  "privacy",
		Verdict: experiment.Within(d, detour-slack, detour+slack),
		N:       min(len(doh), len(odoh)),
		InRTTs:  true, OnLoopback: loopback,
		Test: &cmpODoH,
	})

	clear, rtt, _ := pick("web", Clear, "fresh")
	withECH, _, _ := pick("web", ECH, "fresh")
	clear0, _, _ := pick("web", Clear, "0rtt")
	withECH0, _, _ := pick("web", ECH, "0rtt")
	stale, _, _ := pick("web", ECHStale, "fresh")
	// A median in the RTTs of the access its samples had.
	inRTTs := func(v []float64, rtt float64) float64 {
		if rtt <= 0 {
			return math.NaN()
		}
		return stats.Median(v) / rtt
	}
	retry := inRTTs(stale, rtt) - inRTTs(withECH, rtt)
	cmpRetry := stats.Compare(withECH, stale)
	// ECH's current config against the name in clear: no round trip more.
	noRoundTrip := func(claim, what string, clear, withECH []float64, rtt float64) experiment.Finding {
		added := inRTTs(withECH, rtt) - inRTTs(clear, rtt)
		return experiment.Finding{
			Claim:      claim,
			Source:     "RFC 9849 §6.1; its design",
			Paper:      "the inner ClientHello rides in the outer one: no extra round trip",
			Here:       fmt.Sprintf("%s: in clear %s RTT, with ECH %s RTT (%s)", what, experiment.F2(inRTTs(clear, rtt)), experiment.F2(inRTTs(withECH, rtt)), signed(added)),
			Why:        "holds when those with ECH take within a quarter of an RTT of those in clear",
			Figure:     "privacy",
			Verdict:    experiment.Within(added, -0.25, 0.25),
			N:          min(len(clear), len(withECH)),
			InRTTs:     true,
			OnLoopback: loopback,
		}
	}
	out = append(out,
		noRoundTrip("ECH adds no round trip when its config is current", "new HTTP/3 connection to the page", clear, withECH, rtt),
		noRoundTrip("ECH keeps 0-RTT: a resumed connection with ECH costs no round trip more", "HTTP/3 resumed, the request in 0-RTT", clear0, withECH0, rtt),
		experiment.Finding{
			Claim:      "ECH with a stale config costs one more round trip",
			Source:     "RFC 9849 §6.1.6 (retry configs)",
			Paper:      "the server rejects, the client retries on a new connection with the retry configs",
			Here:       fmt.Sprintf("stale config %s RTT, current %s RTT: %s RTT more", experiment.F2(inRTTs(stale, rtt)), experiment.F2(inRTTs(withECH, rtt)), experiment.F2(retry)),
			Why:        "holds when the stale config's connections take 0.5-1.5 RTT more, a significant difference",
			Figure:     "privacy",
			Verdict:    experiment.Within(retry, 0.5, 1.5),
			N:          min(len(withECH), len(stale)),
			InRTTs:     true,
			OnLoopback: loopback,
			Test:       &cmpRetry,
		})
	pageClear, pageRTT, _ := pick("page", pageRung(protocol.DoH2, false), "warm")
	pageECH, _, _ := pick("page", pageRung(protocol.DoH2, true), "warm")
	return append(out, noRoundTrip("ECH costs a page load no round trip when its config is current",
		"doxlab's loader over HTTP/3, DNS over DoH, PLT", pageClear, pageECH, pageRTT))
}

// Cells are the table's medians as numbers.
func (ss Samples) Cells() []experiment.Cell {
	var out []experiment.Cell
	for _, c := range Summarize(ss) {
		keys := map[string]string{"profile": c.Profile, "part": c.Part, "rung": c.Rung, "condition": c.Condition}
		out = append(out, experiment.NewCell("privacy", keys, "ms", c.N, c.Stat), experiment.NewCell("privacy", keys, "rtts", c.N, c.RTTsStat))
		if c.TargetStat.N > 0 {
			out = append(out, experiment.NewCell("privacy", keys, "proxy_target_ms", c.N, c.TargetStat))
		}
	}
	return out
}

// signed writes a difference with its sign, a rounded zero as +0.00.
func signed(v float64) string {
	if math.Abs(v) < 0.005 {
		v = 0
	}
	return fmt.Sprintf("%+.2f", v)
}
