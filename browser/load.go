package browser

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/doxlab/doxlab/internal/printable"
)

// Load is one navigation as the browser measured it. Times are in
// milliseconds from the navigation's start (performance.timeOrigin),
// read from the browser's monotonic clock.
type Load struct {
	URL    string    `json:"url"`
	Start  time.Time `json:"start"`  // wall clock when the navigation was requested
	Status string    `json:"status"` // ok, timeout, error
	Error  string    `json:"error,omitempty"`

	Protocol string `json:"protocol"` // the document's nextHopProtocol: h3, h2, http/1.1

	PLTMs  float64 `json:"plt_ms"`  // loadEventEnd: the papers' page load time
	DCLMs  float64 `json:"dcl_ms"`  // domContentLoadedEventEnd
	FPMs   float64 `json:"fp_ms"`   // first paint
	FCPMs  float64 `json:"fcp_ms"`  // first contentful paint
	LCPMs  float64 `json:"lcp_ms"`  // largest contentful paint, as of load end
	TTFBMs float64 `json:"ttfb_ms"` // responseStart
	// DNSMs is domainLookupEnd - domainLookupStart as navigation timing
	// reports it; it under-reports when a preconnect resolved earlier, so
	// the stub's and the server's records are the DNS time to use.
	DNSMs     float64 `json:"dns_ms"`
	ConnectMs float64 `json:"connect_ms"` // connectEnd - connectStart (QUIC handshake for h3)
	// WallMs is the driver's own time from the navigation request to the
	// load event, on this process's monotonic clock.
	WallMs float64 `json:"wall_ms"`
	// Dialogs counts the dialogs (alert, confirm, prompt) the page opened:
	// each is answered at once, and the page waited on it that long.
	Dialogs int `json:"dialogs,omitempty"`

	// Navigation is the full PerformanceNavigationTiming entry.
	Navigation map[string]any `json:"navigation,omitempty"`
	Resources  []Resource     `json:"resources,omitempty"`
	// ResourcesFull says the page fetched MaxResources or more: any
	// after those are not timed (Chromium keeps 250 unless asked for
	// more). The buffer is the document's: a page that shrinks it from
	// its own scripts has fewer timed, unsaid.
	ResourcesFull bool `json:"resources_full,omitempty"`
}

// MaxResources bounds the resources a load times (the Resource Timing
// buffer's size, set as each document starts): many times what a page
// of the corpus fetches (140 at most), and a bound on what a page can
// make a load's record hold.
const MaxResources = 2000

// timeEveryResource runs, in the loader's own world, as each document
// starts.
var timeEveryResource = fmt.Sprintf("performance.setResourceTimingBufferSize(%d)", MaxResources)

// Resource is one PerformanceResourceTiming entry.
type Resource struct {
	Name         string  `json:"name"`
	Initiator    string  `json:"initiator"`
	Protocol     string  `json:"protocol"`
	StartMs      float64 `json:"start_ms"`
	DurationMs   float64 `json:"duration_ms"`
	TransferSize int64   `json:"transfer_size"`
	BodySize     int64   `json:"body_size"`
	// DNSMs is the wait for a lookup before the request could go
	// (domainLookupEnd - domainLookupStart): non-zero only for a request
	// that opened a connection to a host not yet resolved. ConnectMs is
	// its connection set-up. A cross-origin resource reports both only
	// with Timing-Allow-Origin, which doxlab serve sends.
	DNSMs     float64 `json:"dns_ms,omitempty"`
	ConnectMs float64 `json:"connect_ms,omitempty"`
}

// Load statuses.
const (
	LoadOK      = "ok"
	LoadTimeout = "timeout"
	LoadError   = "error"
)

// collect runs in the page once it has loaded. loadEventEnd is only set
// after the load handlers have returned, so it waits for it, and for the
// first contentful paint; buffered LCP entries arrive in an observer
// callback, so it waits one task for them.
const collect = `(async () => {
  const deadline = performance.now() + 3000;
  let nav = performance.getEntriesByType('navigation')[0];
  while ((!nav || nav.loadEventEnd === 0) && performance.now() < deadline) {
    await new Promise(r => setTimeout(r, 5));
    nav = performance.getEntriesByType('navigation')[0];
  }
  // A small page can finish loading before its first frame is painted.
  const paintBy = performance.now() + 1000;
  while (performance.getEntriesByName('first-contentful-paint').length === 0 && performance.now() < paintBy) {
    await new Promise(r => requestAnimationFrame(() => setTimeout(r, 0)));
  }
  let lcp = 0;
  try {
    await new Promise(resolve => {
      new PerformanceObserver(l => { for (const e of l.getEntries()) lcp = e.startTime; })
        .observe({type: 'largest-contentful-paint', buffered: true});
      setTimeout(resolve, 0);
    });
  } catch (e) {}
  const paint = {};
  for (const e of performance.getEntriesByType('paint')) paint[e.name] = e.startTime;
  return JSON.stringify({
    nav: nav ? nav.toJSON() : null, paint, lcp,
    resources: performance.getEntriesByType('resource').map(r => ({
      name: r.name, initiator: r.initiatorType, protocol: r.nextHopProtocol,
      start_ms: r.startTime, duration_ms: r.duration, transfer_size: r.transferSize, body_size: r.encodedBodySize,
      dns_ms: r.domainLookupEnd - r.domainLookupStart, connect_ms: r.connectEnd - r.connectStart})),
  });
})()`

// Load navigates the measured tab to url and waits for the load event,
// at most timeout. The result is never nil: a failed or timed-out page is
// a Load with its status and error, never zeros passed off as timings.
func (b *Browser) Load(ctx context.Context, url string, timeout time.Duration) *Load {
	l := &Load{URL: url, Start: time.Now()}
	opened := b.dialogs.Load()
	defer func() { l.Dialogs = int(b.dialogs.Load() - opened) }()
	start := time.Now()
	err := within(ctx, timeout, func() error { return chromedp.Do(b.tab, chromedp.Navigate(url)) })
	l.WallMs = ms(time.Since(start))
	if err != nil {
		l.fail(err)
		if errors.Is(err, errGaveUp) {
			// A navigation still in flight would bleed into the next one.
			within(ctx, 5*time.Second, func() error {
				_, err := chromedp.Call(b.tab, page.Navigate, page.NavigateParams{URL: "about:blank"})
				return err
			})
		}
		return l
	}
	var raw string
	err = within(ctx, 10*time.Second, func() (err error) {
		world, err := b.ownWorld()
		if err != nil {
			return err
		}
		raw, err = chromedp.Run(b.tab, chromedp.Evaluate[string](collect, chromedp.EvalAwaitPromise, func(p *runtime.EvaluateParams) { p.ContextID = world }))
		return err
	})
	if err != nil {
		l.fail(fmt.Errorf("reading the page's timings: %w", err))
		return l
	}
	var got struct {
		Nav       map[string]any     `json:"nav"`
		Paint     map[string]float64 `json:"paint"`
		LCP       float64            `json:"lcp"`
		Resources []Resource         `json:"resources"`
	}
	if err := json.Unmarshal([]byte(raw), &got); err != nil || got.Nav == nil {
		l.fail(fmt.Errorf("the page has no navigation timing (%w)", err))
		return l
	}
	num := func(k string) float64 { f, _ := got.Nav[k].(float64); return round(f) }
	l.Navigation, l.Resources, l.ResourcesFull = got.Nav, got.Resources, len(got.Resources) >= MaxResources
	l.Protocol, _ = got.Nav["nextHopProtocol"].(string)
	l.PLTMs, l.DCLMs, l.TTFBMs = num("loadEventEnd"), num("domContentLoadedEventEnd"), num("responseStart")
	l.DNSMs = round(num("domainLookupEnd") - num("domainLookupStart"))
	l.ConnectMs = round(num("connectEnd") - num("connectStart"))
	l.FPMs, l.FCPMs, l.LCPMs = round(got.Paint["first-paint"]), round(got.Paint["first-contentful-paint"]), round(got.LCP)
	if status, _ := got.Nav["responseStatus"].(float64); status >= 400 {
		l.Status, l.Error = LoadError, fmt.Sprintf("HTTP status %d", int(status))
		return l
	}
	if l.PLTMs <= 0 {
		l.Status, l.Error = LoadTimeout, "the load event did not end"
		return l
	}
	l.Status = LoadOK
	return l
}

// ownWorld is an isolated world of the loader's own in the tab's main
// frame: the page's DOM and the browser's APIs, none of the page's
// scripts. Read in the page's own world, the timings are what the page
// says they are: it may replace the Performance API, toJSON or
// JSON.stringify, and report any PLT it likes.
func (b *Browser) ownWorld() (runtime.ExecutionContextID, error) {
	tree, err := chromedp.Call(b.tab, page.GetFrameTree, cdp.Empty{})
	if err != nil {
		return 0, err
	}
	if tree.FrameTree == nil || tree.FrameTree.Frame == nil {
		return 0, errors.New("the tab has no main frame")
	}
	w, err := chromedp.Call(b.tab, page.CreateIsolatedWorld, page.CreateIsolatedWorldParams{FrameID: tree.FrameTree.Frame.ID, WorldName: "doxlab"})
	return w.ExecutionContextID, err
}

func (l *Load) fail(err error) {
	l.Status, l.Error = LoadError, printable.String(err.Error()) // a page names its URLs
	if errors.Is(err, errGaveUp) {
		l.Status, l.Error = LoadTimeout, "no load event within the timeout"
	}
	// chromedp reports "page load error net::ERR_NAME_NOT_RESOLVED"; keep
	// the net error code, which is what tells failures apart.
	if i := strings.Index(l.Error, "net::ERR_"); i >= 0 {
		l.Error = l.Error[i:]
	}
}

func ms(d time.Duration) float64 { return round(float64(d) / float64(time.Millisecond)) }

func round(f float64) float64 { return float64(int64(f*1000+0.5)) / 1000 }
