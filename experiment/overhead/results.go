package overhead

import (
	"context"
	"fmt"
	"image/color"
	"io"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/doxlab/doxlab/experiment"
	"github.com/doxlab/doxlab/figure"
	"github.com/doxlab/doxlab/internal/order"
	layers "github.com/doxlab/doxlab/overhead"
	"github.com/doxlab/doxlab/store"
)

// Conns are the stored connections of overhead runs.
type Conns []*Conn

// Load reads the connections of the runs whose IDs start with prefix.
func (c *Overhead) Load(ctx context.Context, st *store.Store, prefix string) (experiment.Results, error) {
	cs, err := experiment.LoadResults[Conn](ctx, st, KindConn, experiment.OfExperiment(prefix))
	return Conns(cs), err
}

// Count is the number of connections.
func (cs Conns) Count() (int, string) { return len(cs), "captured connections" }

// WriteTable writes octets per resolution by layer, and the single-query
// split of the IMC 2022 slides.
func (cs Conns) WriteTable(w io.Writer) error {
	cells := Summarize(cs)
	fmt.Fprintln(w, "octets per resolution (both directions, IP included) by layer")
	fmt.Fprintf(w, "%-6s %-10s %-5s %5s %8s %6s", "cert", "mode", "dns", "res", "octets", "pkts")
	for _, l := range layers.LayerNames {
		fmt.Fprintf(w, " %9s", l)
	}
	fmt.Fprintln(w)
	for _, x := range cells {
		fmt.Fprintf(w, "%-6s %-10s %-5s %5d %8.0f %6.1f", x.Cert, x.Mode, x.Transport, x.Resolutions, x.Octets, x.Packets)
		for _, v := range x.Layers {
			fmt.Fprintf(w, " %9.0f", v)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "\nsingle query on a new connection, medians of IP payload octets (the IMC 2022 slides' table)\n")
	fmt.Fprintf(w, "%-6s %-5s %8s %14s %14s %7s %9s\n", "cert", "dns", "total", "handshake c>r", "handshake r>c", "query", "response")
	for _, x := range cells {
		if x.Mode == "new" {
			if _, err := fmt.Fprintf(w, "%-6s %-5s %8.0f %14.0f %14.0f %7.0f %9.0f\n", x.Cert, x.Transport, x.Total, x.HandshakeUp, x.HandshakeDown, x.Query, x.Response); err != nil {
				return err
			}
		}
	}
	return nil
}

var table = experiment.Table("overhead", `<table id="overhead-cells"><tr><th class="l">cert</th><th class="l">mode</th><th class="l">transport</th><th>resolutions</th><th>octets</th><th>packets</th>{{range .Layers}}<th>{{.}}</th>{{end}}<th>single query</th><th>handshake c&gt;r</th><th>handshake r&gt;c</th><th>query</th><th>response</th></tr>
{{range .Cells}}<tr><td class="l">{{.Cert}}</td><td class="l">{{.Mode}}</td><td class="l">{{.Transport}}</td><td>{{.Resolutions}}</td><td>{{ms .Octets}}</td><td>{{ms .Packets}}</td>{{range .Layers}}<td>{{ms .}}</td>{{end}}<td>{{ms .Total}}</td><td>{{ms .HandshakeUp}}</td><td>{{ms .HandshakeDown}}</td><td>{{ms .Query}}</td><td>{{ms .Response}}</td></tr>
{{end}}</table>`)

var layerColors = [layers.NumLayers]color.Color{
	color.RGBA{0xbd, 0xbd, 0xbd, 0xff}, color.RGBA{0x96, 0x96, 0x96, 0xff}, color.RGBA{0x9e, 0xca, 0xe1, 0xff},
	color.RGBA{0x42, 0x92, 0xc6, 0xff}, color.RGBA{0x08, 0x45, 0x94, 0xff}, color.RGBA{0x17, 0xbe, 0xcf, 0xff},
	color.RGBA{0xfd, 0xae, 0x6b, 0xff}, color.RGBA{0xe6, 0x55, 0x0d, 0xff}, color.RGBA{0x31, 0xa3, 0x54, 0xff},
	color.RGBA{0x00, 0x00, 0x00, 0xff},
}

// Section is the report's part: the table and, per certificate and
// connection mode, the octets per resolution by transport stacked by
// layer (the DoH-cost paper's Fig. 3 and 5) and the packets per
// resolution (Fig. 4).
func (cs Conns) Section(dir string) (*experiment.Section, error) {
	cells := Summarize(cs)
	type group struct{ cert, mode string }
	groups, by := order.Group(cells, func(c Cell) group { return group{c.Cert, c.Mode} })
	set := &figure.Set{Dir: dir}
	for _, g := range groups {
		gc := by[g]
		var names []string
		layerData := figure.Data{Header: append([]string{"transport"}, layers.LayerNames[:]...)}
		packetData := figure.Data{Header: []string{"transport", "packets per resolution"}}
		for _, c := range gc {
			names = append(names, c.Transport)
			row := []any{c.Transport}
			for _, v := range c.Layers {
				row = append(row, v)
			}
			layerData.Add(row...)
			packetData.Add(c.Transport, c.Packets)
		}
		p := plot.New()
		p.Title.Text = fmt.Sprintf("octets per resolution by layer: %s connection, %s certificate", g.mode, g.cert)
		p.Y.Label.Text = "octets per resolution (both directions)"
		p.Add(plotter.NewGrid())
		var below *plotter.BarChart
		for l := layers.Layer(0); l < layers.NumLayers; l++ {
			vals := make(plotter.Values, len(gc))
			some := false
			for i, c := range gc {
				vals[i] = c.Layers[l]
				some = some || vals[i] > 0
			}
			if !some {
				continue
			}
			bar, err := plotter.NewBarChart(vals, vg.Points(22))
			if err != nil {
				return nil, err
			}
			bar.Color, bar.LineStyle.Width = layerColors[l], 0
			if below != nil {
				bar.StackOn(below)
			}
			below = bar
			p.Add(bar)
			p.Legend.Add(layers.LayerNames[l], bar)
		}
		p.Legend.Top, p.Legend.Left = true, true
		p.NominalX(names...)
		if err := set.Add(p, fmt.Sprintf("overhead-layers-%s-%s", g.cert, g.mode), "Fig. 3 and 5: octets per resolution by layer, "+g.mode+" connection", g.cert+" certificate", 7*vg.Inch, 4.5*vg.Inch, layerData); err != nil {
			return nil, err
		}

		pk := plot.New()
		pk.Title.Text = fmt.Sprintf("packets per resolution: %s connection, %s certificate", g.mode, g.cert)
		pk.Y.Label.Text = "packets per resolution (both directions)"
		pk.Add(plotter.NewGrid())
		vals := make(plotter.Values, len(gc))
		for i, c := range gc {
			vals[i] = c.Packets
		}
		bar, err := plotter.NewBarChart(vals, vg.Points(22))
		if err != nil {
			return nil, err
		}
		bar.Color, bar.LineStyle.Width = figure.Blue, 0
		pk.Add(bar)
		pk.NominalX(names...)
		if err := set.Add(pk, fmt.Sprintf("overhead-packets-%s-%s", g.cert, g.mode), "Fig. 4: packets per resolution, "+g.mode+" connection", g.cert+" certificate", 6*vg.Inch, 3.5*vg.Inch, packetData); err != nil {
			return nil, err
		}
	}
	return experiment.NewSection("overhead", "Octets per resolution, by layer",
		"Captured at the testbed link and decrypted with the client's key log; per resolution (a connection's octets divided by the resolutions it carried), both directions, IP included. The single-query columns are medians over new connections in IP payload octets (the IMC 2022 slides' table): the handshake each way before the query and before the answer, the query and the response.",
		table, map[string]any{"Cells": cells, "Layers": layers.LayerNames}, set)
}

// Findings checks the DoH-cost paper's §4 claim (Fig. 3-4): a DoH
// resolution on a new connection costs tens of times DoUDP's octets, and
// a persistent connection amortises most of it.
func (cs Conns) Findings() []experiment.Finding {
	n := -1 // the fewest resolutions behind a median
	get := func(t, mode string) float64 {
		for _, c := range Summarize(cs) {
			if c.Cert == "small" && c.Transport == t && c.Mode == mode && c.Resolutions > 0 {
				if n < 0 || c.Resolutions < n {
					n = c.Resolutions
				}
				return c.Octets
			}
		}
		n = 0
		return math.NaN()
	}
	udp, doh, dohP := get("udp", "new"), get("doh2", "new"), get("doh2", "persistent")
	return []experiment.Finding{{
		Claim:   "A DoH resolution on a new connection costs over ten times DoUDP's octets; a persistent connection amortises most of it",
		Source:  "DoH-cost paper §4, Fig. 3-4",
		Paper:   "DoUDP 182 octets; DoH 5,737 on a new connection (31×), 864 on a persistent one (medians, Cloudflare)",
		Here:    fmt.Sprintf("DoUDP %.0f; DoH/2 %.0f new (%s ×), %.0f persistent (octets per resolution, small certificate)", udp, doh, experiment.F2(doh/udp), dohP),
		Why:     "holds when DoH/2 new is over 10× DoUDP and persistent is under a third of new",
		Figure:  "overhead",
		Verdict: experiment.Both(experiment.Within(doh/udp, 10, math.Inf(1)), experiment.Within(dohP/doh, 0, 1.0/3)),
		N:       max(n, 0),
	}}
}
