// Package pageload is doxlab's own page loader: it replays the network
// part of a page load from the page's dependency graph, captured from a
// real Chromium load (the WProf/Epload approach), over HTTP/3 or HTTP/2
// with quic-go, and keeps the browser's timing of everything else
// (parsing, script execution, layout) as gaps. What it does not model: no
// JavaScript runs, no layout or paint happens; a resource a script would
// fetch only under conditions that differ from the captured load is
// fetched as captured.
package pageload

import (
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"os"
	"time"

	"github.com/doxlab/doxlab/internal/listfile"
)

// Graph is a page's dependency graph: every resource the captured load
// fetched, which resource it was discovered from, how far into that
// parent's body, and how long after that the browser asked for it.
type Graph struct {
	// Page is the URL of the document, the graph's root (resource 0).
	Page string `json:"page"`
	// Captured says where the graph comes from.
	Captured Provenance `json:"captured"`
	// Resources are in the order they were requested; 0 is the document.
	Resources []Resource `json:"resources"`
	// OnloadGapMs is the browser's time from the last resource's end to
	// the end of the load event (its handlers, layout): the part of PLT
	// that is not network.
	OnloadGapMs float64 `json:"onload_gap_ms"`
	// PLTMs is the captured load's own PLT, for reference.
	PLTMs float64 `json:"plt_ms"`
}

// Provenance is the load a graph was captured from.
type Provenance struct {
	Browser string    `json:"browser"` // "Chrome/131.0.6778.204"
	Profile string    `json:"profile"` // the testbed profile of the load, if any
	At      time.Time `json:"at"`
	Edited  bool      `json:"edited,omitempty"` // changed by hand since
	// Loads is how many captured loads the graph was chosen among
	// (MedianGraph); 0 for a single capture.
	Loads int `json:"loads,omitempty"`
}

// Resource is one request of the page.
type Resource struct {
	URL      string `json:"url"`
	Type     string `json:"type"`               // DevTools' resource type: Document, Script, Stylesheet, Image, Font, Fetch, ...
	Priority string `json:"priority,omitempty"` // Chromium's: VeryHigh, High, Medium, Low, VeryLow
	// Parent is the index of the resource whose body or execution
	// discovered this one; -1 for the document.
	Parent int `json:"parent"`
	// AfterBytes is how much of the parent's body had arrived when the
	// browser asked for this resource: the parser's position, for
	// resources found while the body streamed in; the whole body for
	// those a script or a style sheet asked for once it was complete.
	AfterBytes int64 `json:"after_bytes"`
	// GapMs is the browser's time from those bytes' arrival (or the
	// parent's end, for a whole body) to the request on the wire: its
	// parsing and scripts, and any wait before it sent it (its resource
	// scheduler), less the lookup and connection set-up, which a replay
	// makes itself. The document's is from navigation to its request,
	// and may be negative: the browser's lookup began before navigation
	// did (a replay then starts its clock that much after the lookup).
	GapMs float64 `json:"gap_ms"`
	// Size is the body's length in the captured load, in octets, for a
	// replay to check it fetched the same thing.
	Size int64 `json:"size"`
	// SentMs and EndMs are when the captured load put the request on the
	// wire (after any lookup and connection set-up) and when its body
	// ended, from navigation: what a replay's own times are compared
	// with, step by step. A replay does not use them; graphs captured
	// before they were kept lack them.
	SentMs float64 `json:"sent_ms,omitempty"`
	EndMs  float64 `json:"end_ms,omitempty"`
	// WireEndMs is when the body's last octet reached the client in the
	// captured load, where a packet capture of it was matched: EndMs,
	// DevTools' end, comes later by the browser's intake of the body.
	// The gaps of the resources that waited for this whole body, and the
	// onload gap, count from it then: a replay's body ends with its last
	// octet.
	WireEndMs float64 `json:"wire_end_ms,omitempty"`
}

// MaxGapMs bounds a gap of a graph (the browser's time, which a load
// replays as a wait): ten minutes, more than any load's timeout. Beyond
// it a wait overflows time.Duration long before it ends.
const MaxGapMs = 10 * 60 * 1000

// Check rejects a graph no replay can follow: no document, parents that
// do not come before their children, negative sizes or gaps (but the
// document's), gaps longer than MaxGapMs, bad URLs.
func (g *Graph) Check() error {
	if len(g.Resources) == 0 {
		return fmt.Errorf("graph of %s: no resources", g.Page)
	}
	if len(g.Resources) > MaxResources {
		return fmt.Errorf("graph of %s: %d resources, more than %d", g.Page, len(g.Resources), MaxResources)
	}
	for i, r := range g.Resources {
		u, err := url.Parse(r.URL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return fmt.Errorf("graph of %s: resource %d: %q is not an http(s) URL", g.Page, i, r.URL)
		}
		switch {
		case i == 0 && r.Parent != -1:
			return fmt.Errorf("graph of %s: resource 0 is the document and has no parent", g.Page)
		case i > 0 && (r.Parent < 0 || r.Parent >= i):
			return fmt.Errorf("graph of %s: resource %d (%s): parent %d is not an earlier resource", g.Page, i, r.URL, r.Parent)
		case r.AfterBytes < 0 || (r.GapMs < 0 && i > 0) || r.Size < 0:
			return fmt.Errorf("graph of %s: resource %d (%s): negative bytes, gap or size", g.Page, i, r.URL)
		case !(math.Abs(r.GapMs) <= MaxGapMs): // NaN too
			return fmt.Errorf("graph of %s: resource %d (%s): a gap of %v ms, more than a load can hold (%v ms)", g.Page, i, r.URL, r.GapMs, float64(MaxGapMs))
		case i > 0 && r.AfterBytes > g.Resources[r.Parent].Size:
			return fmt.Errorf("graph of %s: resource %d (%s): discovered after %d octets of a %d-octet parent", g.Page, i, r.URL, r.AfterBytes, g.Resources[r.Parent].Size)
		}
	}
	if g.OnloadGapMs < 0 {
		return fmt.Errorf("graph of %s: negative onload gap", g.Page)
	}
	if !(g.OnloadGapMs <= MaxGapMs) {
		return fmt.Errorf("graph of %s: an onload gap of %v ms, more than a load can hold (%v ms)", g.Page, g.OnloadGapMs, float64(MaxGapMs))
	}
	return nil
}

// BrowserMs is the browser's own time on the graph's longest path, as
// if the network took none: the gaps along each chain of discovery, and
// the onload gap. Loads of a page under different network conditions
// differ in it only by the browser's speed at the moment.
func (g *Graph) BrowserMs() float64 {
	at := make([]float64, len(g.Resources))
	last := 0.0
	for i, r := range g.Resources {
		if i > 0 {
			at[i] = at[r.Parent]
		}
		at[i] += r.GapMs
		last = max(last, at[i])
	}
	return last + g.OnloadGapMs
}

// WireEnds counts the resources whose end on the wire a packet capture
// of the load gave (Resource.WireEndMs).
func (g *Graph) WireEnds() (n int) {
	for _, r := range g.Resources {
		if r.WireEndMs > 0 {
			n++
		}
	}
	return n
}

// Hosts are the host names the page's resources come from, in the order
// first requested.
func (g *Graph) Hosts() []string {
	var out []string
	seen := map[string]bool{}
	for _, r := range g.Resources {
		u, _ := url.Parse(r.URL)
		if h := u.Hostname(); !seen[h] {
			seen[h] = true
			out = append(out, h)
		}
	}
	return out
}

// MaxGraphBytes and MaxResources bound a graph: real pages have tens to
// hundreds of resources (HTTP Archive's 99th percentile is under 1,000),
// and their graphs a few hundred kB.
const (
	MaxGraphBytes = 64 << 20
	MaxResources  = 10000
)

// ReadGraph reads and checks a graph file (JSON), at most MaxGraphBytes.
func ReadGraph(path string) (*Graph, error) {
	b, err := listfile.ReadAtMost(path, MaxGraphBytes, "a page's graph")
	if err != nil {
		return nil, err
	}
	g, err := ParseGraph(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return g, nil
}

// ParseGraph reads and checks a graph (JSON).
func ParseGraph(b []byte) (*Graph, error) {
	var g Graph
	if err := json.Unmarshal(b, &g); err != nil {
		return nil, err
	}
	if err := g.Check(); err != nil {
		return nil, err
	}
	return &g, nil
}

// WriteGraph writes a graph as indented JSON, to be read and edited.
func WriteGraph(path string, g *Graph) error {
	b, err := json.MarshalIndent(g, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
