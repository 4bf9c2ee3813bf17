package cli

import (
	"context"
	"errors"
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
// as in the web experiment. It returns once Chromium has loaded its first
// page, so what follows runs under that load (a fixed 2 s after launch
// was not enough on a busy machine: a short check ended with no page
// loaded), and gives a stop function that reports the pages loaded.
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
	loop, cancel := context.WithCancel(ctx)
	var loaded atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	first := make(chan struct{}, 1) // a page loaded; closed as the loop ends
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(first)
		for i := 0; loop.Err() == nil; i++ {
			p := pages[i%len(pages)]
			if err := b.Reset(loop, true); err != nil {
				if loop.Err() == nil {
					failed.Store(err)
				}
				return
			}
			l := b.Load(loop, fmt.Sprintf("http://%s/%s/index.html", ln.Addr(), p.Name), 30*time.Second)
			if l.Status == browser.LoadOK {
				if loaded.Add(1) == 1 {
					first <- struct{}{} // room for the one
				}
			} else if loop.Err() == nil {
				failed.Store(fmt.Errorf("loading %s: %s", p.Name, l.Error))
			}
		}
	}()
	stop = func() (int, error) {
		cancel()
		wg.Wait()
		b.Close()
		srv.Close()
		os.RemoveAll(dir)
		err, _ := failed.Load().(error)
		return int(loaded.Load()), err
	}
	select {
	case <-first:
	case <-time.After(time.Minute):
	}
	if loaded.Load() > 0 {
		return stop, nil
	}
	_, err = stop()
	switch {
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case err != nil:
		return nil, fmt.Errorf("no page loaded: %w", err)
	}
	return nil, errors.New("no page loaded within a minute")
}
