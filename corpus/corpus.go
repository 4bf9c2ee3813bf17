// Package web is the browser side of doxlab's testbed: the page corpus the
// server replays (generated, embedded, extracted for a run), snapshots of
// real pages, and the web experiment's samples, tasks and cells. The stub
// that puts DNS over any transport into Chromium's lookup path is doxlab
// serve with a forwarder (experiment/web starts it).
package corpus

//go:generate go run ./internal/gencorpus corpus

import (
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
)

//go:embed corpus
var corpus embed.FS

// Page is one page of the corpus. The paper's pages are served from one
// host (every resource from the page's own origin); the Sites load from
// many, and Origins lists them.
type Page struct {
	Name string // example, wiki, insta, o20, or a snapshot directory's name
	Host string // the host name its document is served and resolved as
	Dir  string // the directory served as Host, once extracted
	// Origins are every host the page loads from, Host's first.
	Origins []Origin
}

// MultiOrigin reports whether the page loads from more than its own host.
func (p Page) MultiOrigin() bool { return len(p.Origins) > 1 }

// Hostnames are the page's origins' host names, its own first.
func (p Page) Hostnames() []string {
	if len(p.Origins) == 0 {
		return []string{p.Host}
	}
	out := make([]string, len(p.Origins))
	for i, o := range p.Origins {
		out[i] = o.Host
	}
	return out
}

// singleOrigin is a page served from its one host.
func singleOrigin(name, host, dir string) Page {
	return Page{Name: name, Host: host, Dir: dir, Origins: []Origin{{Host: host, Dir: dir, Party: PartyFirst, TTL: 300, HTTPS: true}}}
}

// Domain is the zone the corpus hosts live under; the testbed's server
// answers for it, and nothing under it leaves the testbed.
const Domain = "doxlab.test"

// Corpus lists the built-in pages: a single HTML document (example.org
// style), HTML with a script, PNG logos and an SVG sprite (the paper's
// Wikipedia snapshot sizes) and HTML with seven scripts, two style sheets,
// script-loaded images and a script-built cookie banner (Instagram style).
var Corpus = []string{"example", "wiki", "insta"}

// Extract writes the built-in pages under dir and returns them: the
// paper's (Corpus) and the multi-origin Sites, which are generated here
// rather than embedded (some 13 MB; the generator is deterministic, and
// TestSitesAreDeterministic pins their bytes).
func Extract(dir string) ([]Page, error) {
	sub, err := fs.Sub(corpus, "corpus")
	if err == nil {
		err = os.CopyFS(dir, sub)
	}
	if err != nil {
		return nil, fmt.Errorf("extracting the corpus: %w", err)
	}
	var pages []Page
	for _, n := range Corpus {
		pages = append(pages, singleOrigin(n, n+"."+Domain, filepath.Join(dir, n)))
	}
	for _, s := range Sites {
		origins, err := generateSite(filepath.Join(dir, "sites"), s)
		if err != nil {
			return nil, fmt.Errorf("generating page %s: %w", s.Name, err)
		}
		pages = append(pages, Page{Name: s.Name, Host: origins[0].Host, Dir: origins[0].Dir, Origins: origins})
	}
	return pages, nil
}

// Snapshot adds a directory of a page's files as a page named after the
// directory. A directory holding index.html is a one-origin page (a
// `wget -mpEk` mirror), served as NAME.doxlab.test. A directory of host
// directories (`wget -mpEk -H`: one per host) is a multi-origin page: the
// host whose directory holds index.html is its own, the others third
// parties, each served under its own name. wget -k rewrote the links
// between hosts into relative paths (../cdn.example/x.js), which a
// browser would ask the page's own host for; a copy under work gets them
// back as absolute URLs (https://cdn.example/x.js).
func Snapshot(dir, work string) (Page, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return Page{}, err
	}
	name := filepath.Base(abs)
	if _, err := os.Stat(filepath.Join(abs, "index.html")); err == nil {
		return singleOrigin(name, name+"."+Domain, abs), nil
	}
	hosts, first, err := mirrorHosts(abs)
	if err != nil {
		return Page{}, fmt.Errorf("page %s: %w", dir, err)
	}
	out := filepath.Join(work, "snapshot-"+name)
	if err := copyMirror(abs, out, hosts); err != nil {
		return Page{}, fmt.Errorf("page %s: %w", dir, err)
	}
	p := Page{Name: name, Host: first, Dir: filepath.Join(out, first)}
	p.Origins = append(p.Origins, Origin{Host: first, Dir: p.Dir, Party: PartyFirst, TTL: 300})
	for _, h := range hosts {
		if h != first {
			p.Origins = append(p.Origins, Origin{Host: h, Dir: filepath.Join(out, h), Party: PartyThird, TTL: 300})
		}
	}
	return p, nil
}

// Select picks pages by name from all, in the order named.
func Select(all []Page, names []string) ([]Page, error) {
	by := map[string]Page{}
	var known []string
	for _, p := range all {
		by[p.Name] = p
		known = append(known, p.Name)
	}
	sort.Strings(known)
	var out []Page
	for _, n := range names {
		p, ok := by[n]
		if !ok {
			return nil, fmt.Errorf("no page %q (have %v)", n, known)
		}
		out = append(out, p)
	}
	return out, nil
}
