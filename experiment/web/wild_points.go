package web

import (
	"bytes"
	"context"
	"encoding/gob"
	"fmt"
	"slices"
	"unique"

	"github.com/doxlab/doxlab/campaign"
	"github.com/doxlab/doxlab/experiment"
	"github.com/doxlab/doxlab/store"
)

// wildPoint is what the analysis reads of a campaign's page load: a few
// hundred octets, where the load decoded for analysis holds 1.5 KB.
type wildPoint struct {
	Vantage, Resolver, Region, Page, Transport, Status string
	Round, Rep                                         int32
	// Timed: the load has the loader's own sample, whose FCP and PLT
	// these are (loads stored before 0.1.0 hold them there alone); else
	// PLT is the load's own.
	Timed    bool
	FCP, PLT float64
	// What the stub did upstream during the measured navigation
	// (upstreamFacts), the versions and ALPNs counted.
	Exchanges, Resumed, ZeroRTT, Retry, Token int32
	Versions, ALPNs                           []nameCount
	// What the page's own HTTPS lookups said (pageDNS); no host, none.
	PageHost                      string
	PageAsked, PageHTTPS, PageECH bool
}

// nameCount is a name and how many times it was seen.
type nameCount struct {
	Name string
	N    int32
}

// counted counts names, in the order first seen.
func counted(names []string) []nameCount {
	var out []nameCount
	for _, n := range names {
		i := slices.IndexFunc(out, func(c nameCount) bool { return c.Name == n })
		if i < 0 {
			out = append(out, nameCount{Name: unique.Make(n).Value()})
			i = len(out) - 1
		}
		out[i].N++
	}
	return out
}

// pointOfWild is what the analysis reads of x.
func pointOfWild(x *wildLoad) wildPoint {
	p := wildPoint{Vantage: x.vantage(), Resolver: x.resolver(), Region: x.region(), Page: x.Page, Transport: x.Transport, Status: x.Status,
		Round: int32(x.Round), Rep: int32(x.Rep)}
	p.PLT = x.PLTMs // what a comparison reads of a load without the loader's sample
	if s := x.Sample; s != nil {
		p.Timed, p.FCP, p.PLT = true, s.FCPMs, s.PLTMs
	}
	u := x.upstream()
	p.Exchanges, p.Resumed, p.ZeroRTT, p.Retry, p.Token = int32(u.exchanges), int32(u.resumed), int32(u.zeroRTT), int32(u.retry), int32(u.token)
	p.Versions, p.ALPNs = counted(u.versions), counted(u.alpns)
	if d := x.pageRecords(); d != nil {
		p.PageHost, p.PageAsked, p.PageHTTPS, p.PageECH = d.host, d.asked, d.https, d.ech
	}
	p.intern()
	return p
}

// intern keeps one copy of each name the loads repeat.
func (p *wildPoint) intern() {
	for _, f := range []*string{&p.Vantage, &p.Resolver, &p.Region, &p.Page, &p.Transport, &p.Status, &p.PageHost} {
		*f = unique.Make(*f).Value()
	}
	for _, cs := range [][]nameCount{p.Versions, p.ALPNs} {
		for i := range cs {
			cs[i].Name = unique.Make(cs[i].Name).Value()
		}
	}
}

// wildPointsFormat is the encoding's version, kept in it.
const wildPointsFormat = 1

// wildPointProjection is the version of what a point is of a campaign's
// load (pointOfWild after analysedWild): a change to either that changes
// a point bumps it (TestWildPointsPortable says when one did), as
// pages' pointProjection.
const wildPointProjection = 1

type wildPointsWire struct {
	Format int
	Points []wildPoint
}

// wildPoints reads the campaigns' page loads as the analysis reads them,
// each run's kept as its summary (experiment.Points): a campaign's run
// grows by a round at a time, and is read on from its last.
var wildPoints = experiment.Points[wildPoint]{
	Kind:    campaign.PageLoads,
	Summary: "campaign-load points",
	Point: func(run string, raw []byte) (wildPoint, error) {
		x, err := analysedWild(run, raw)
		if err != nil {
			return wildPoint{}, err
		}
		return pointOfWild(x), nil
	},
	Encode: func(ps []wildPoint) ([]byte, error) {
		var buf bytes.Buffer
		err := gob.NewEncoder(&buf).Encode(wildPointsWire{Format: wildPointsFormat, Points: ps})
		return buf.Bytes(), err
	},
	Decode: func(dst []wildPoint, b []byte) ([]wildPoint, bool, error) {
		var w wildPointsWire
		if err := gob.NewDecoder(bytes.NewReader(b)).Decode(&w); err != nil {
			return dst, false, err
		}
		if w.Format != wildPointsFormat {
			return dst, false, nil
		}
		for i := range w.Points {
			w.Points[i].intern()
		}
		return append(dst, w.Points...), true, nil
	},
	Portable: fmt.Sprintf("campaign-load points: encoding %d, projection %d", wildPointsFormat, wildPointProjection),
}

// readWild reads the campaigns' page loads f selects, as analysis does.
func readWild(ctx context.Context, st *store.Store, f store.Filter) (Wild, error) {
	ps, err := wildPoints.Read(ctx, st, f)
	if err != nil {
		return nil, err
	}
	if f.Vantage != "" {
		ps = slices.DeleteFunc(ps, func(p wildPoint) bool { return p.Vantage != f.Vantage })
	}
	return Wild(ps), nil
}
