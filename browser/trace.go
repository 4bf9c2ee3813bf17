package browser

import (
	"context"
	"sync"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// NetTrace is what DevTools' network events said of one load: each
// request with its initiator, the arrival of its body, and the load
// event, all on the browser's monotonic clock. A page loader replays the
// network part of the load from it (package pageload).
type NetTrace struct {
	Requests []*TracedRequest
	// LoadEvent is when the load event fired.
	LoadEvent float64
}

// TracedRequest is one request of a traced load.
type TracedRequest struct {
	ID       string
	URL      string
	Type     string // Document, Script, Stylesheet, Image, Font, ...
	Priority string
	// Initiator: "parser" (with the URL of the document or style sheet
	// that named it), "script" (with the URL of the script on top of the
	// stack), "preload", "other".
	Initiator    string
	InitiatorURL string
	Sent         float64
	// Redirected is how long its redirects took, from Sent to the last
	// hop's request (0 without any): network time, which Held leaves out.
	Redirected float64
	// WireSent is when the network stack began sending the request
	// (DevTools' timing.sendStart): after Sent (and its redirects) by
	// whatever held it back. Held is that wait less the lookup and
	// connection set-up in it: the browser's own (its resource scheduler
	// holds low-priority requests while others are in flight; the
	// network service's hops).
	WireSent, Held float64
	Response       float64 // headers received
	// Chunks are the body's arrivals: when, and how many octets
	// (decoded) had arrived by then.
	Chunks   []Chunk
	Finished float64
	Size     int64 // decoded body octets
	Failed   string
	// WireEnd is when the body's last octet reached the client, on the
	// same clock, where a packet capture of the load was matched to it
	// (pageload/capture.MatchWire); 0 if unknown. DevTools' Finished comes later.
	WireEnd float64
	// WireSetup is, for the document where a capture of the load was
	// matched, its lookup and connection on the wire: from the first
	// packet out to the resolver to its last answer in before the page's
	// connection began, and from that connection's first packet out to
	// the request's; 0 if unknown. The rest of the time from navigation
	// to the request is the browser's.
	WireSetup float64
}

// Chunk is part of a body arriving.
type Chunk struct {
	At    float64
	Total int64
}

// msOf is a DevTools timestamp (seconds) in milliseconds.
func msOf(t cdp.MonotonicTime) float64 { return t.Float64() * 1000 }

// tracer collects the network events of the load under way.
type tracer struct {
	mu    sync.Mutex
	trace *NetTrace
	byID  map[network.RequestID]*TracedRequest
}

func (t *tracer) on(ev any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.trace == nil {
		return
	}
	switch e := ev.(type) {
	case *network.EventRequestWillBeSent:
		if e.RedirectResponse != nil {
			if r := t.byID[e.RequestID]; r != nil {
				r.URL = e.Request.URL // the same request, redirected: the last URL is what loads
				r.Redirected = max(0, msOf(e.Timestamp)-r.Sent)
				return
			}
		}
		r := &TracedRequest{ID: string(e.RequestID), URL: e.Request.URL, Type: e.Type.String(), Priority: e.Request.InitialPriority.String(), Sent: msOf(e.Timestamp)}
		if in := e.Initiator; in != nil {
			r.Initiator, r.InitiatorURL = in.Type.String(), in.URL
			if in.Stack != nil {
				for st := in.Stack; st != nil && r.InitiatorURL == ""; st = st.Parent {
					for _, f := range st.CallFrames {
						if f.URL != "" {
							r.InitiatorURL = f.URL
							break
						}
					}
				}
			}
		}
		t.byID[e.RequestID] = r
		t.trace.Requests = append(t.trace.Requests, r)
	case *network.EventResponseReceived:
		if r := t.byID[e.RequestID]; r != nil {
			r.Response = msOf(e.Timestamp)
			if tm := e.Response.Timing; tm != nil && tm.SendStart >= 0 {
				r.WireSent = tm.RequestTime*1000 + tm.SendStart
				setup := 0.0 // the lookup and connection the request waited for
				if tm.DNSStart >= 0 && tm.DNSEnd >= tm.DNSStart {
					setup += tm.DNSEnd - tm.DNSStart
				}
				if tm.ConnectStart >= 0 && tm.ConnectEnd >= tm.ConnectStart {
					setup += tm.ConnectEnd - tm.ConnectStart
				}
				r.Held = max(0, r.WireSent-r.Sent-r.Redirected-setup)
			}
		}
	case *network.EventDataReceived:
		if r := t.byID[e.RequestID]; r != nil {
			r.Size += e.DataLength
			r.Chunks = append(r.Chunks, Chunk{At: msOf(e.Timestamp), Total: r.Size})
		}
	case *network.EventLoadingFinished:
		if r := t.byID[e.RequestID]; r != nil {
			r.Finished = msOf(e.Timestamp)
		}
	case *network.EventLoadingFailed:
		if r := t.byID[e.RequestID]; r != nil {
			r.Finished, r.Failed = msOf(e.Timestamp), e.ErrorText
		}
	case *page.EventLoadEventFired:
		if t.trace.LoadEvent == 0 {
			t.trace.LoadEvent = msOf(e.Timestamp)
		}
	}
}

// Trace loads url as Load does and also returns the load's network
// events: the raw material of a dependency graph. The cache is disabled
// for it, so every resource is fetched.
func (b *Browser) Trace(ctx context.Context, url string, timeout time.Duration) (*Load, *NetTrace, error) {
	b.traceOnce.Do(func() {
		b.tracer = &tracer{}
		b.listenErr = chromedp.Listen(b.tab, b.tracer.on)
	})
	if b.listenErr != nil {
		return nil, nil, b.listenErr
	}
	err := within(ctx, 10*time.Second, func() error {
		if _, err := chromedp.Call(b.tab, network.Enable, network.EnableParams{}); err != nil {
			return err
		}
		_, err := chromedp.Call(b.tab, network.SetCacheDisabled, network.SetCacheDisabledParams{CacheDisabled: true})
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	tr := &NetTrace{}
	b.tracer.mu.Lock()
	b.tracer.trace, b.tracer.byID = tr, map[network.RequestID]*TracedRequest{}
	b.tracer.mu.Unlock()
	l := b.Load(ctx, url, timeout)
	b.tracer.mu.Lock()
	b.tracer.trace = nil
	b.tracer.mu.Unlock()
	within(ctx, 10*time.Second, func() error {
		_, err := chromedp.Call(b.tab, network.SetCacheDisabled, network.SetCacheDisabledParams{})
		return err
	})
	return l, tr, nil
}
