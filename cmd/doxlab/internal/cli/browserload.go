package cli

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/doxlab/doxlab/browser"
	"github.com/doxlab/doxlab/corpus"
	"github.com/doxlab/doxlab/testbed"
)

// browserLoad keeps headless Chromium loading the corpus pages, with cold
// caches, inside host of tb (a host of its own, so its traffic stays off
// the checked link) from an HTTP server on that host's loopback: real
// rendering and networking competing with the emulator for the same cores,
// as in the web experiment. It returns a stop function that reports the
// pages loaded.
func browserLoad(ctx context.Context, tb *testbed.Testbed, host string) (stop func() (int, error), err error) {
	dir, err := os.MkdirTemp("", "doxlab-browser-load")
	if err != nil {
		return nil, err
	}
	all, err := corpus.Extract(dir)
	if err == nil { // the one-origin pages: every file under the page's directory
		all, err = corpus.Select(all, corpus.Corpus)
	}
	pages := all
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	var ln net.Listener
	if err := tb.Run(host, func() (err error) { ln, err = net.Listen("tcp4", "127.0.0.1:0"); return err }); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	srv := &http.Server{Handler: http.FileServer(http.Dir(dir))}
	go srv.Serve(ln)
	b, err := browser.Launch(ctx, browser.Options{NetNS: tb.NS[host]})
	if err != nil {
		srv.Close()
		os.RemoveAll(dir)
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	var loaded atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			p := pages[i%len(pages)]
			if err := b.Reset(ctx, true); err != nil {
				if ctx.Err() == nil {
					failed.Store(err)
				}
				return
			}
			l := b.Load(ctx, fmt.Sprintf("http://%s/%s/index.html", ln.Addr(), p.Name), 30*time.Second)
			if l.Status == browser.LoadOK {
				loaded.Add(1)
			} else if ctx.Err() == nil {
				failed.Store(fmt.Errorf("loading %s: %s", p.Name, l.Error))
			}
		}
	}()
	return func() (int, error) {
		cancel()
		wg.Wait()
		b.Close()
		srv.Close()
		os.RemoveAll(dir)
		err, _ := failed.Load().(error)
		return int(loaded.Load()), err
	}, nil
}
