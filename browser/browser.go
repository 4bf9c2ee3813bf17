// Package browser drives Debian's stock Chromium through the DevTools
// protocol (chromedp) to load pages over HTTP/3 and collect what the
// browser itself measured: navigation and paint timing, resource timing,
// the protocol each response came over. Chromium can run inside a testbed
// host (a network namespace) while the driver stays outside: DevTools
// goes over a pipe, which crosses namespaces.
package browser

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/memory"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// Options configure one browser process. The zero value runs the chromium
// on PATH headless in this network namespace, with a throwaway profile.
type Options struct {
	// Exec is the browser binary. Default: chromium, chromium-browser or
	// google-chrome on PATH.
	Exec string
	// NetNS runs the browser in this named network namespace through
	// `ip netns exec`, which also mounts the namespace's /etc/netns files
	// (resolv.conf, hosts, nsswitch.conf) over /etc.
	NetNS string
	// Etc are files put over /etc for the browser alone, by name
	// (resolv.conf, hosts, nsswitch.conf) to path: it runs in a mount
	// namespace of its own where they are bound over the machine's, so
	// its DNS goes where resolv.conf says on a real vantage point too,
	// and nothing else on the machine changes. Needs root.
	Etc map[string]string
	// UserAgentSuffix, if set, is added to the browser's User-Agent (with
	// "HeadlessChrome" said as "Chrome", as a headful browser's): a
	// campaign says who measures, and how to reach them.
	UserAgentSuffix string
	// ForceQUIC are origins (host:port) spoken to over HTTP/3 from the
	// first request, without waiting for Alt-Svc.
	ForceQUIC []string
	// SPKI are base64 SHA-256 hashes of public keys whose certificates are
	// accepted without a known root: Chromium refuses HTTP/3 to a
	// self-signed origin otherwise (ERR_QUIC_CERT_ROOT_NOT_KNOWN).
	SPKI []string
	// NetLog, if set, receives Chromium's NetLog (JSON), the ground truth
	// for DNS transactions, QUIC sessions and 0-RTT.
	NetLog string
	// UserDataDir is the profile. Default: a new temporary directory,
	// removed on Close.
	UserDataDir string
	// Flags are extra command-line switches, "name" or "name=value".
	Flags []string
	// Stderr receives the browser's own output. Default: discarded.
	Stderr io.Writer
}

// ErrNoBrowser is returned when no Chromium binary can be found or run.
var ErrNoBrowser = errors.New("no Chromium found: install it with `apt-get install chromium` (or set the browser path)")

// Browser is one running Chromium process with one tab.
type Browser struct {
	opts      Options
	allocCtx  context.Context
	cancel    context.CancelFunc
	tab       context.Context
	version   string
	tmpDir    string // a profile Launch made, removed by Close
	userAgent string
	profile   string // the user data directory, whatever made it

	traceOnce sync.Once
	tracer    *tracer
	listenErr error
}

// FindExec returns the browser binary to run.
func FindExec(exe string) (string, error) {
	if exe != "" {
		p, err := exec.LookPath(exe)
		if err != nil {
			return "", fmt.Errorf("%w: %w", ErrNoBrowser, err)
		}
		return p, nil
	}
	for _, n := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(n); err == nil {
			return p, nil
		}
	}
	return "", ErrNoBrowser
}

// Launch starts Chromium. ctx bounds the start only; Close stops it.
func Launch(ctx context.Context, opts Options) (*Browser, error) {
	exe, err := FindExec(opts.Exec)
	if err != nil {
		return nil, err
	}
	b := &Browser{opts: opts}
	if opts.UserDataDir == "" {
		if b.tmpDir, err = os.MkdirTemp("", "doxlab-chromium"); err != nil {
			return nil, err
		}
		opts.UserDataDir = b.tmpDir
	}
	b.profile = opts.UserDataDir
	flags := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe),
		chromedp.UserDataDir(opts.UserDataDir),
		chromedp.Flag("headless", "new"),
		chromedp.NoSandbox, // root, and inside a namespace
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.WindowSize(1280, 800),
		// Keep the browser's own traffic (updates, components, safe
		// browsing, metrics) out of the measurement as far as switches go;
		// the rest is filtered out of the DNS records by name.
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("metrics-recording-only", true),
		chromedp.Flag("no-pings", true),
		chromedp.Flag("disable-domain-reliability", true),
		chromedp.Flag("disable-client-side-phishing-detection", true),
		chromedp.Flag("disable-features", "DnsOverHttpsUpgrade,OptimizationHints,MediaRouter,Translate,InterestFeedContentSuggestions,AutofillServerCommunication,CertificateTransparencyComponentUpdater"),
		chromedp.Flag("enable-quic", true),
		chromedp.Flag("enable-net-benchmarking", true), // chrome.benchmarking, for Reset
		chromedp.CombinedOutput(orDiscard(opts.Stderr)),
	}
	if len(opts.ForceQUIC) > 0 {
		flags = append(flags, chromedp.Flag("origin-to-force-quic-on", strings.Join(opts.ForceQUIC, ",")))
	}
	if len(opts.SPKI) > 0 {
		flags = append(flags, chromedp.Flag("ignore-certificate-errors-spki-list", strings.Join(opts.SPKI, ",")))
	}
	if opts.NetLog != "" {
		flags = append(flags, chromedp.Flag("log-net-log", opts.NetLog), chromedp.Flag("net-log-capture-mode", "Everything"))
	}
	for _, f := range opts.Flags {
		name, value, ok := strings.Cut(strings.TrimLeft(f, "-"), "=")
		if ok {
			flags = append(flags, chromedp.Flag(name, value))
		} else {
			flags = append(flags, chromedp.Flag(name, true))
		}
	}
	if opts.NetNS != "" {
		ip, err := exec.LookPath("ip")
		if err != nil {
			return nil, fmt.Errorf("running the browser in %s: %w", opts.NetNS, err)
		}
		ns := opts.NetNS
		flags = append(flags, chromedp.ModifyCmdFunc(func(cmd *exec.Cmd) {
			cmd.Args = append([]string{"ip", "netns", "exec", ns}, cmd.Args...)
			cmd.Path = ip
		}))
	}
	if len(opts.Etc) > 0 {
		wrap, err := etcWrapper(opts.Etc)
		if err != nil {
			return nil, err
		}
		// Applied after the network namespace's (options modify in order),
		// so it wraps the whole command.
		flags = append(flags, chromedp.ModifyCmdFunc(wrap))
	}
	b.allocCtx, b.cancel = chromedp.NewExecAllocator(context.Background(), flags...)
	b.tab, _ = chromedp.NewContext(b.allocCtx)
	// The first call starts the browser and ties it to the context it is
	// given, so it runs on the tab itself; a watchdog bounds the start.
	started := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			b.cancel()
		case <-time.After(30 * time.Second):
			b.cancel()
		case <-started:
		}
	}()
	v, err := chromedp.CallBrowser(b.tab, browser.GetVersion, cdp.Empty{})
	close(started)
	if err != nil {
		b.Close()
		return nil, fmt.Errorf("%w (starting %s: %w)", ErrNoBrowser, exe, err)
	}
	b.version = v.Product
	if opts.UserAgentSuffix != "" {
		ua := strings.Replace(v.UserAgent, "HeadlessChrome/", "Chrome/", 1) + " " + opts.UserAgentSuffix
		if _, err := chromedp.Call(b.tab, emulation.SetUserAgentOverride, emulation.SetUserAgentOverrideParams{UserAgent: ua}); err != nil {
			b.Close()
			return nil, fmt.Errorf("setting the User-Agent: %w", err)
		}
		b.userAgent = ua
	}
	return b, nil
}

// UserAgent is the User-Agent set by Options.UserAgentSuffix, if any.
func (b *Browser) UserAgent() string { return b.userAgent }

// etcWrapper runs a command in a mount namespace of its own with files
// bound over /etc: unshare(1) makes the namespace private, a shell binds
// each file and execs the command, so the browser keeps its process ID.
func etcWrapper(etc map[string]string) (func(*exec.Cmd), error) {
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		return nil, fmt.Errorf("files over /etc for the browser: %w", err)
	}
	names := slices.Sorted(maps.Keys(etc))
	script := ""
	var paths []string
	for i, n := range names {
		if strings.ContainsAny(n, "/ ") || n == "" {
			return nil, fmt.Errorf("files over /etc: %q is not a file name", n)
		}
		if _, err := os.Stat(etc[n]); err != nil {
			return nil, fmt.Errorf("files over /etc: %w", err)
		}
		script += fmt.Sprintf(`mount --bind "$%d" /etc/%s && `, i+1, n)
		paths = append(paths, etc[n])
	}
	script += fmt.Sprintf(`shift %d && exec "$@"`, len(names))
	return func(cmd *exec.Cmd) {
		args := append([]string{"unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh"}, paths...)
		cmd.Args = append(args, cmd.Args...)
		cmd.Path = unshare
	}, nil
}

// Version is the browser's product string, e.g. "Chrome/156.0.8078.79".
func (b *Browser) Version() string { return b.version }

// Close stops the browser and removes a temporary profile.
func (b *Browser) Close() error {
	b.cancel()
	removeSingleton(b.profile)
	if b.tmpDir != "" {
		return os.RemoveAll(b.tmpDir)
	}
	return nil
}

// removeSingleton removes the directory Chromium made in the temporary
// directory for its process-singleton socket. The profile links to it;
// Chromium removes it only when it exits on its own, and Close kills
// it, so each run would otherwise leave one behind.
func removeSingleton(profile string) {
	if profile == "" {
		return
	}
	sock, err := os.Readlink(filepath.Join(profile, "SingletonSocket"))
	if err != nil {
		return
	}
	dir := filepath.Dir(sock)
	if strings.HasPrefix(filepath.Base(dir), "org.chromium.") {
		os.RemoveAll(dir)
	}
}

const resetScript = `(async () => {
  const b = chrome.benchmarking;
  await b.clearCache();
  await b.clearHostResolverCache();
  await b.clearPredictorCache();
  await b.closeConnections();
  return true;
})()`

// Reset prepares the next measured navigation as the papers do: the
// HTTP cache and the host cache are cleared and every connection is
// closed. With forget, TLS session tickets and QUIC server configs are
// dropped as well, so the next connection is a full 1-RTT handshake;
// without, they are kept, so it can resume and send 0-RTT.
func (b *Browser) Reset(ctx context.Context, forget bool) error {
	if forget {
		// A critical memory-pressure signal makes Chromium flush its TLS
		// and QUIC session caches (SSLClientSessionCache and
		// QuicClientSessionCache drop everything on critical pressure).
		// The network service handles it asynchronously, so it goes first
		// and lands while the rest of the reset runs; the moderate signal
		// after it ends the critical state.
		if err := within(ctx, 10*time.Second, func() error {
			_, err := chromedp.CallBrowser(b.tab, memory.SimulatePressureNotification, memory.SimulatePressureNotificationParams{Level: memory.PressureLevelCritical})
			if err == nil {
				_, err = chromedp.CallBrowser(b.tab, memory.SimulatePressureNotification, memory.SimulatePressureNotificationParams{Level: memory.PressureLevelModerate})
			}
			return err
		}); err != nil {
			return fmt.Errorf("dropping session tickets: %w", err)
		}
	}
	// Leave the page without waiting for a load event (about:blank has
	// none to wait for), so nothing of it keeps a connection busy.
	if err := within(ctx, 10*time.Second, func() error {
		_, err := chromedp.Call(b.tab, page.Navigate, page.NavigateParams{URL: "about:blank"})
		return err
	}); err != nil {
		return fmt.Errorf("leaving the page: %w", err)
	}
	// chrome.benchmarking (--enable-net-benchmarking) is what Chromium's
	// own page-load benchmarks use: the HTTP cache, the host cache and the
	// predictor's (so no preconnect resolves early), and every socket and
	// QUIC session closed. Session tickets stay unless forgotten above.
	if err := within(ctx, 10*time.Second, func() error {
		_, err := chromedp.Run(b.tab, chromedp.Evaluate[bool](resetScript, chromedp.EvalAwaitPromise))
		return err
	}); err != nil {
		return fmt.Errorf("clearing caches and closing connections: %w", err)
	}
	return nil
}

// errGaveUp is a call to the browser that took longer than allowed.
var errGaveUp = errors.New("the browser did not answer in time")

// within runs f, which calls the browser, for at most d. chromedp stops
// serving a tab once any context derived from the tab's is cancelled, so
// calls run on the tab's own context and a timeout abandons the call
// instead of cancelling it.
func within(ctx context.Context, d time.Duration, f func() error) error {
	done := make(chan error, 1)
	go func() { done <- f() }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		return fmt.Errorf("%w (%v)", errGaveUp, d)
	case <-ctx.Done():
		return ctx.Err()
	}
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// Do runs chromedp steps on the browser's tab within timeout: for pages
// doxlab checks rather than measures, such as its own report.
func (b *Browser) Do(ctx context.Context, timeout time.Duration, steps ...chromedp.Action[chromedp.Void]) error {
	return within(ctx, timeout, func() error { return chromedp.Do(b.tab, steps...) })
}

// Get runs one chromedp action that returns a value (an evaluation, a
// screenshot) on b's tab within timeout.
func Get[T any](ctx context.Context, b *Browser, timeout time.Duration, a chromedp.Action[T]) (T, error) {
	var v T
	err := within(ctx, timeout, func() (err error) {
		v, err = chromedp.Run(b.tab, a)
		return err
	})
	return v, err
}
