package pages

import (
	"bytes"
	"encoding/gob"
	"fmt"
	"unique"
)

// A report of a year's page loads holds each load as the analysis reads
// it (a Point, 96 octets), not as it was stored (its records decoded
// hold 1.5 KB), and a run's points are what the store keeps as the run's
// summary: a later report decodes them, not the loads' JSON.

// CellKey names a load's cell (Summarize's cells).
type CellKey struct {
	Profile, Page, Transport, H3, StubState, DNSMode, Engine, Setup string
}

// Point is what the analysis reads of one page load.
type Point struct {
	Key    unique.Handle[CellKey]
	Status unique.Handle[string] // ok, or why the load failed
	Rep    int32
	Flags  uint8 // pointOK, pointReal0RTT, pointResumed, pointToken
	// PLT, FCP and DNS times and the multi-origin times, ms.
	PLT, FCP, DNS, DNSBlocking, DNSTotal float64
	// The page's lookups, those a request waited for, the servers' web
	// connections, the origins not wholly over HTTP/3 and those with no
	// lookup, and the origins' connections in all and in 0-RTT.
	Lookups, LookupsBlocking, Conns, NotH3, NoLookup, OriginConns, OriginConns0RTT int32
}

const (
	pointOK uint8 = 1 << iota
	pointReal0RTT
	pointResumed
	pointToken
)

// OK says whether the load succeeded.
func (p Point) OK() bool { return p.Flags&pointOK != 0 }

// PointOf is what the analysis reads of x.
func PointOf(x *Sample) Point {
	p := Point{
		Key:    unique.Make(CellKey{x.Profile, x.Page, x.Transport, x.H3, x.StubState, x.DNSMode, x.EngineName(), x.Setup}),
		Status: unique.Make(x.Status),
		Rep:    int32(x.Rep),
	}
	if x.Status != "ok" {
		return p
	}
	p.Flags = pointOK
	for _, f := range []struct {
		on   bool
		flag uint8
	}{{x.H3Used0RTT, pointReal0RTT}, {x.H3Resumed, pointResumed}, {x.H3TokenUsed(), pointToken}} {
		if f.on {
			p.Flags |= f.flag
		}
	}
	notH3, noLookup, all, early := x.OriginCounts()
	p.PLT, p.FCP, p.DNS, p.DNSBlocking, p.DNSTotal = x.PLTMs, x.FCPMs, x.DNSMs, x.DNSBlockingMs, x.DNSTotalMs
	p.Lookups, p.LookupsBlocking, p.Conns = int32(x.Lookups), int32(x.LookupsBlocking), int32(x.WebConns())
	p.NotH3, p.NoLookup, p.OriginConns, p.OriginConns0RTT = int32(notH3), int32(noLookup), int32(all), int32(early)
	return p
}

// Points are what the analysis reads of samples.
func Points(samples []*Sample) []Point {
	out := make([]Point, len(samples))
	for i, x := range samples {
		out[i] = PointOf(x)
	}
	return out
}

// pointsFormat is the encoding's version, kept in it.
const pointsFormat = 2

// pointProjection is the version of what a point is of its load:
// PointOf, and DecodeForAnalysis before it. A change to either that
// changes a point bumps it (TestPointsPortable says when one did), so
// that a dataset's points made by another doxlab are read only where the
// two make them alike.
const pointProjection = 1

// PointsPortable names the points of page loads that datasets keep
// (experiment.Points.Portable): their encoding and projection.
var PointsPortable = fmt.Sprintf("web-load points: encoding %d, projection %d", pointsFormat, pointProjection)

// pointsWire is points as EncodePoints writes them: each key once, and
// the points as columns.
type pointsWire struct {
	Format                                                             int
	Keys                                                               []CellKey
	Statuses                                                           []string
	Status                                                             []int32
	Key, Rep, Lookups, LookupsBlocking, Conns, NotH3, NoLookup, Oc, Oe []int32
	Flags                                                              []uint8
	PLT, FCP, DNS, DNSBlocking, DNSTotal                               []float64
}

// EncodePoints is points as a run's summary keeps them.
func EncodePoints(points []Point) ([]byte, error) {
	w := pointsWire{Format: pointsFormat}
	index, statuses := map[unique.Handle[CellKey]]int32{}, map[unique.Handle[string]]int32{}
	for _, p := range points {
		i, ok := index[p.Key]
		if !ok {
			i = int32(len(w.Keys))
			index[p.Key] = i
			w.Keys = append(w.Keys, p.Key.Value())
		}
		j, ok := statuses[p.Status]
		if !ok {
			j = int32(len(w.Statuses))
			statuses[p.Status] = j
			w.Statuses = append(w.Statuses, p.Status.Value())
		}
		w.Status = append(w.Status, j)
		w.Key, w.Rep, w.Flags = append(w.Key, i), append(w.Rep, p.Rep), append(w.Flags, p.Flags)
		w.Lookups, w.LookupsBlocking, w.Conns = append(w.Lookups, p.Lookups), append(w.LookupsBlocking, p.LookupsBlocking), append(w.Conns, p.Conns)
		w.NotH3, w.NoLookup, w.Oc, w.Oe = append(w.NotH3, p.NotH3), append(w.NoLookup, p.NoLookup), append(w.Oc, p.OriginConns), append(w.Oe, p.OriginConns0RTT)
		w.PLT, w.FCP, w.DNS = append(w.PLT, p.PLT), append(w.FCP, p.FCP), append(w.DNS, p.DNS)
		w.DNSBlocking, w.DNSTotal = append(w.DNSBlocking, p.DNSBlocking), append(w.DNSTotal, p.DNSTotal)
	}
	return w.encode()
}

func (w *pointsWire) encode() ([]byte, error) {
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(w); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func decodeWire(b []byte, w *pointsWire) error { return gob.NewDecoder(bytes.NewReader(b)).Decode(w) }

// DecodePoints appends the points b encodes to dst; ok is false for
// another format's.
func DecodePoints(dst []Point, b []byte) (out []Point, ok bool, err error) {
	var w pointsWire
	if err := decodeWire(b, &w); err != nil {
		return dst, false, err
	}
	if w.Format != pointsFormat {
		return dst, false, nil
	}
	n := len(w.Key)
	for _, col := range [][]int32{w.Status, w.Rep, w.Lookups, w.LookupsBlocking, w.Conns, w.NotH3, w.NoLookup, w.Oc, w.Oe} {
		if len(col) != n {
			return dst, false, fmt.Errorf("page-load points: a column of %d values, not %d", len(col), n)
		}
	}
	for _, col := range [][]float64{w.PLT, w.FCP, w.DNS, w.DNSBlocking, w.DNSTotal} {
		if len(col) != n {
			return dst, false, fmt.Errorf("page-load points: a column of %d values, not %d", len(col), n)
		}
	}
	if len(w.Flags) != n {
		return dst, false, fmt.Errorf("page-load points: %d flags for %d points", len(w.Flags), n)
	}
	keys := make([]unique.Handle[CellKey], len(w.Keys))
	for i, k := range w.Keys {
		keys[i] = unique.Make(k)
	}
	statuses := make([]unique.Handle[string], len(w.Statuses))
	for i, st := range w.Statuses {
		statuses[i] = unique.Make(st)
	}
	out = dst
	for i := range n {
		k, st := w.Key[i], w.Status[i]
		if k < 0 || int(k) >= len(keys) || st < 0 || int(st) >= len(statuses) {
			return dst, false, fmt.Errorf("page-load points: key %d of %d, status %d of %d", k, len(keys), st, len(statuses))
		}
		out = append(out, Point{Key: keys[k], Status: statuses[st], Rep: w.Rep[i], Flags: w.Flags[i],
			PLT: w.PLT[i], FCP: w.FCP[i], DNS: w.DNS[i], DNSBlocking: w.DNSBlocking[i], DNSTotal: w.DNSTotal[i],
			Lookups: w.Lookups[i], LookupsBlocking: w.LookupsBlocking[i], Conns: w.Conns[i], NotH3: w.NotH3[i], NoLookup: w.NoLookup[i],
			OriginConns: w.Oc[i], OriginConns0RTT: w.Oe[i]})
	}
	return out, true, nil
}
