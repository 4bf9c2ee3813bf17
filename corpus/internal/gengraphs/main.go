// Command gengraphs captures the corpus pages' dependency graphs from
// Chromium, for doxlab's page loader to replay: `make graphs` writes them
// to corpus/graphs (`gengraphs DIR PAGE...` captures only those pages). Each
// page is loaded five times over HTTP/3 on loopback from doxlab's server,
// and the capture with the median PLT is kept (one real load, not a
// blend: its gaps are consistent with one another). The server listens
// on 127.0.0.1:443, as the testbed's do, so the graphs name the pages as
// the testbed serves them; that needs root.
package main

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/doxlab/doxlab/browser"
	"github.com/doxlab/doxlab/corpus"
	"github.com/doxlab/doxlab/pageload"
	"github.com/doxlab/doxlab/pageload/capture"
	"github.com/doxlab/doxlab/server"
)

const captures = 5

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: gengraphs DIR [PAGE...]")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2:]); err != nil {
		fmt.Fprintln(os.Stderr, "gengraphs:", err)
		os.Exit(1)
	}
}

func run(out string, only []string) error {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "gengraphs")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	pages, err := corpus.Extract(dir)
	if err != nil {
		return err
	}
	if len(only) > 0 {
		if pages, err = corpus.Select(pages, only); err != nil {
			return err
		}
	}
	// Port 443, as in the testbed: the multi-origin pages name their
	// hosts without a port. A certificate per origin, so that Chromium
	// opens a connection per origin as it does there.
	cfg := &server.Config{Listen: server.Listen{Web: "127.0.0.1:443"}, Web: server.Web{Roots: map[string]string{}}, TLS: server.TLS{CertPerName: true}}
	for _, p := range pages {
		for _, o := range p.Origins {
			if _, ok := cfg.Web.Roots[o.Host]; !ok {
				cfg.TLS.Names = append(cfg.TLS.Names, o.Host)
				cfg.Web.Roots[o.Host] = o.Dir
			}
		}
	}
	srv, err := server.New(cfg)
	if err != nil {
		return err
	}
	if err := srv.Start(); err != nil {
		return err
	}
	defer srv.Close()
	_, port, _ := strings.Cut(srv.Addr("web").String(), ":")
	opts := browser.Options{SPKI: []string{srv.SPKI()}, Flags: []string{"host-resolver-rules=MAP *." + corpus.Domain + " 127.0.0.1"}}
	for _, p := range pages {
		for _, h := range p.Hostnames() {
			opts.ForceQUIC = append(opts.ForceQUIC, h+":"+port)
		}
	}
	b, err := browser.Launch(ctx, opts)
	if err != nil {
		return err
	}
	defer b.Close()
	for _, p := range pages {
		page := "https://" + p.Host + ":" + port + "/"
		var gs []*pageload.Graph
		for range captures {
			if err := b.Reset(ctx, true); err != nil {
				return err
			}
			l, tr, err := b.Trace(ctx, page, 30*time.Second)
			if err != nil {
				return fmt.Errorf("%s: %w", p.Name, err)
			}
			g, err := capture.FromTrace(page, l, tr, pageload.Provenance{Browser: b.Version(), Profile: "loopback", At: time.Now().UTC().Truncate(time.Second)})
			if err != nil {
				return fmt.Errorf("%s: %w", p.Name, err)
			}
			gs = append(gs, g)
		}
		g := pageload.MedianGraph(gs)
		strip := func(u string) string { return strings.Replace(u, p.Host+":"+port+"/", p.Host+"/", 1) }
		g.Page = strip(g.Page)
		for i := range g.Resources {
			g.Resources[i].URL = strip(g.Resources[i].URL)
		}
		if err := pageload.WriteGraph(filepath.Join(out, p.Name+".json"), g); err != nil {
			return err
		}
		var plts []string
		slices.SortFunc(gs, func(a, b *pageload.Graph) int { return cmp.Compare(a.PLTMs, b.PLTMs) })
		for _, x := range gs {
			plts = append(plts, fmt.Sprintf("%.1f", x.PLTMs))
		}
		fmt.Printf("%s: %d resources, PLT %.1f ms kept of %s\n", p.Name, len(g.Resources), g.PLTMs, strings.Join(plts, ", "))
	}
	return nil
}
