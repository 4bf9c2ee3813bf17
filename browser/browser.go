// Package browser drives Debian's stock Chromium through the DevTools
// protocol (chromedp) to load pages over HTTP/3 and collect what the
// browser itself measured: navigation and paint timing, resource timing,
// the protocol each response came over. Chromium can run inside a testbed
// host (a network namespace) while the driver stays outside: DevTools
// goes over a pipe, which crosses namespaces.
package browser

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/memory"
	"github.com/chromedp/cdproto/network"
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
	// User, if set, is the unprivileged user the browser runs as, with
	// Chromium's own sandbox on (user namespaces: Debian's Chromium ships
	// no setuid sandbox helper). It needs root, which drops to the user
	// once the namespaces are made; the profile is given to the user.
	// Without it, a browser started by root runs as root with no sandbox
	// (--no-sandbox: Chromium refuses a sandbox as root), for pages of
	// doxlab's own only; one started by another user keeps its sandbox.
	User string
	// StorageLimit bounds what pages can make a browser with User keep:
	// the profile's Default directory, where Chromium keeps sites'
	// storage (IndexedDB, Cache Storage, service workers, ...) and its
	// HTTP cache, is a tmpfs of this many octets in the browser's own
	// mount namespace, gone when the browser exits. Without it a page
	// may store up to Chromium's quota, 60 % of the disk, and a
	// campaign's browser keeps what each page stored. Default
	// DefaultStorageLimit; negative: no bound.
	StorageLimit int64
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
	// SecureDNS, if set, is a DoH URL template (https://host/dns-query)
	// that Chromium sends all its DNS to, in its secure mode (no
	// fallback to the system's resolver), as a user who turns on "Use
	// secure DNS" with a custom provider does. Only then does Chromium
	// take ECH configs (ech= in HTTPS records) and use ECH (RFC 9849).
	SecureDNS string
	// NoECH turns Chromium's Encrypted Client Hello off (the
	// ssl.ech_enabled preference, which the EncryptedClientHelloEnabled
	// policy sets): it then sends GREASE ECH and the site's name in clear.
	NoECH bool
	// UserDataDir is the profile. Default: a new temporary directory,
	// removed on Close.
	UserDataDir string
	// Flags are extra command-line switches, "name" or "name=value".
	Flags []string
	// Stderr receives the browser's own output. Default: discarded.
	Stderr io.Writer
}

// DefaultStorageLimit is Options.StorageLimit's default: what pages may
// keep in a browser with a User, many times what a page of the corpus
// caches, and Chromium gives an origin 60 % of it.
const DefaultStorageLimit = 512 << 20

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

	dialogs   atomic.Int64 // the dialogs pages opened, each answered (Launch)
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
	if opts.SecureDNS != "" || opts.NoECH {
		if err := localState(opts.UserDataDir, opts.SecureDNS, opts.NoECH); err != nil {
			if b.tmpDir != "" {
				os.RemoveAll(b.tmpDir)
			}
			return nil, err
		}
	}
	flags := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe),
		chromedp.UserDataDir(opts.UserDataDir),
		chromedp.Flag("headless", "new"),
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
	// The command is wrapped, outermost first: files bound over /etc in a
	// mount namespace, the network namespace, the drop to the user.
	// chromedp takes one command modifier, so they are composed here.
	var wrap []string
	var u *user.User
	if opts.User != "" {
		if u, err = browserUser(opts.User); err != nil {
			return nil, err
		}
	}
	var store *tmpfs
	if u != nil && opts.StorageLimit >= 0 {
		if store, err = b.storageMount(u, opts.StorageLimit); err != nil {
			return nil, err
		}
	}
	if len(opts.Etc) > 0 || store != nil {
		w, err := mountWrapper(opts.Etc, store)
		if err != nil {
			return nil, err
		}
		wrap = append(wrap, w...)
	}
	if opts.NetNS != "" {
		if _, err := exec.LookPath("ip"); err != nil {
			return nil, fmt.Errorf("running the browser in %s: %w", opts.NetNS, err)
		}
		wrap = append(wrap, "ip", "netns", "exec", opts.NetNS)
	}
	switch {
	case u != nil:
		w, env, err := b.asUser(u, opts)
		if err != nil {
			return nil, err
		}
		wrap = append(wrap, w...)
		// chromedp adds --no-sandbox whenever its process is root unless
		// told not to: the browser is not root.
		flags = append(flags, chromedp.Env(env...), chromedp.Flag("no-sandbox", false))
	case os.Geteuid() == 0:
		flags = append(flags, chromedp.NoSandbox) // Chromium runs no sandbox as root
	}
	if len(wrap) > 0 {
		flags = append(flags, chromedp.ModifyCmdFunc(func(cmd *exec.Cmd) {
			cmd.Args = append(slices.Clone(wrap), cmd.Args...)
			cmd.Path, _ = exec.LookPath(wrap[0])
		}))
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
		return nil, fmt.Errorf("starting %s: %w", exe, err)
	}
	b.version = v.Product
	if err := b.setUp(v.UserAgent, opts.UserAgentSuffix); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

// setUp readies a started browser's tab for pages, each step a call to
// the browser; agent is its own User-Agent, to which suffix is added.
func (b *Browser) setUp(agent, suffix string) error {
	// A page may start a download (a link clicked by script, a response
	// as an attachment): headless Chromium saves it under HOME, and a
	// hostile page of a campaign's would fill the vantage point's disk,
	// a load at a time.
	if _, err := chromedp.CallBrowser(b.tab, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{Behavior: browser.SetDownloadBehaviorBehaviorDeny}); err != nil {
		return fmt.Errorf("refusing downloads: %w", err)
	}
	// A service worker a page registered in its warm-up would answer the
	// measured navigation itself, from its own cache, without the network
	// or DNS the load is there to measure: every request bypasses them,
	// as DevTools' "Bypass for network" does.
	if _, err := chromedp.Call(b.tab, network.SetBypassServiceWorker, network.SetBypassServiceWorkerParams{Bypass: true}); err != nil {
		return fmt.Errorf("bypassing service workers: %w", err)
	}
	// A dialog (alert, confirm, prompt) stalls the page's scripts, and
	// its load, until someone answers it, and a headless browser has no
	// one: a page that alerted timed out. Each is answered at once, as
	// a crawler answers them (a confirm cancelled, a page left).
	if err := chromedp.Listen(b.tab, func(ev any) {
		if d, ok := ev.(*page.EventJavascriptDialogOpening); ok {
			b.dialogs.Add(1)
			go within(context.Background(), 5*time.Second, func() error {
				_, err := chromedp.Call(b.tab, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: d.Type == page.DialogTypeBeforeunload})
				return err
			})
		}
	}); err != nil {
		return fmt.Errorf("answering dialogs: %w", err)
	}
	if _, err := chromedp.Call(b.tab, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: timeEveryResource, WorldName: "doxlab"}); err != nil {
		return fmt.Errorf("timing every resource: %w", err)
	}
	if suffix != "" {
		ua := strings.Replace(agent, "HeadlessChrome/", "Chrome/", 1) + " " + suffix
		if _, err := chromedp.Call(b.tab, emulation.SetUserAgentOverride, emulation.SetUserAgentOverrideParams{UserAgent: ua}); err != nil {
			return fmt.Errorf("setting the User-Agent: %w", err)
		}
		b.userAgent = ua
	}
	return nil
}

// UserAgent is the User-Agent set by Options.UserAgentSuffix, if any.
func (b *Browser) UserAgent() string { return b.userAgent }

// tmpfs is a tmpfs mounted for the browser alone, of size octets, owned
// by uid:gid.
type tmpfs struct {
	dir      string
	size     int64
	uid, gid string
}

// storageMount makes the profile's Default directory, which a tmpfs of
// limit octets (Options.StorageLimit) owned by u is mounted over for the
// browser.
func (b *Browser) storageMount(u *user.User, limit int64) (*tmpfs, error) {
	dir := filepath.Join(b.profile, "Default")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	return &tmpfs{dir: dir, size: cmp.Or(limit, DefaultStorageLimit), uid: u.Uid, gid: u.Gid}, nil
}

// mountWrapper is the start of a command line that runs the rest in a
// mount namespace of its own with files bound over /etc and the tmpfs
// mounted: unshare(1) makes the namespace private, a shell mounts and
// execs the rest, so the browser keeps its process ID.
func mountWrapper(etc map[string]string, t *tmpfs) ([]string, error) {
	if _, err := exec.LookPath("unshare"); err != nil {
		return nil, fmt.Errorf("a mount namespace for the browser: %w", err)
	}
	names := slices.Sorted(maps.Keys(etc))
	script := ""
	var args []string
	for _, n := range names {
		if strings.ContainsAny(n, "/ ") || n == "" {
			return nil, fmt.Errorf("files over /etc: %q is not a file name", n)
		}
		if _, err := os.Stat(etc[n]); err != nil {
			return nil, fmt.Errorf("files over /etc: %w", err)
		}
		args = append(args, etc[n])
		script += fmt.Sprintf(`mount --bind "$%d" /etc/%s && `, len(args), n)
	}
	if t != nil {
		args = append(args, t.dir)
		script += fmt.Sprintf(`mount -t tmpfs -o size=%d,mode=0700,uid=%s,gid=%s doxlab-browser "$%d" && `, t.size, t.uid, t.gid, len(args))
	}
	script += fmt.Sprintf(`shift %d && exec "$@"`, len(args))
	return append([]string{"unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh"}, args...), nil
}

// browserUser is the unprivileged user a browser runs as (Options.User).
func browserUser(name string) (*user.User, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("the browser's user %q does not exist: create it, a system user of its own (useradd), or name another", name)
	}
	if u.Uid == "0" {
		return nil, fmt.Errorf("the browser's user %q is root: name an unprivileged one", name)
	}
	return u, nil
}

// asUser is the start of a command line that runs the rest as
// opts.User, and the environment it needs: setpriv(1) sets the user's
// IDs and groups, drops every capability (inheritable, ambient and
// bounding) and keeps the parent-death signal chromedp set, which a
// change of user would clear, so the browser dies with its driver. The
// profile (and NetLog) is handed to the user.
func (b *Browser) asUser(u *user.User, opts Options) (wrap, env []string, err error) {
	if os.Geteuid() != 0 {
		return nil, nil, fmt.Errorf("running the browser as %s needs root", opts.User)
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		return nil, nil, fmt.Errorf("running the browser as %s: %w (apt-get install util-linux)", opts.User, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	give := []string{b.profile}
	if opts.NetLog != "" {
		if f, err := os.OpenFile(opts.NetLog, os.O_CREATE|os.O_WRONLY, 0o600); err == nil {
			f.Close()
		}
		give = append(give, opts.NetLog)
	}
	for _, root := range give {
		err := filepath.WalkDir(root, func(p string, _ fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			return os.Lchown(p, uid, gid)
		})
		if err != nil {
			return nil, nil, fmt.Errorf("giving the browser's files to %s: %w", opts.User, err)
		}
	}
	wrap = []string{"setpriv", "--reuid=" + u.Uid, "--regid=" + u.Gid, "--init-groups",
		"--inh-caps=-all", "--ambient-caps=-all", "--bounding-set=-all", "--pdeathsig=keep", "--"}
	// Chromium keeps its caches and settings under HOME and XDG's
	// directories: all in the profile, which is the user's.
	env = []string{"HOME=" + b.profile, "XDG_CONFIG_HOME=" + b.profile, "XDG_CACHE_HOME=" + b.profile, "USER=" + u.Username, "LOGNAME=" + u.Username}
	return wrap, env, nil
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

// userName is a uid's user name, or the uid.
func userName(uid string) string {
	if u, err := user.LookupId(uid); err == nil {
		return u.Username
	}
	return uid
}

// localState writes Chromium's secure DNS settings (mode "secure" with
// one template, when template is set) and its ECH switch into the
// profile's Local State, where the settings page and the policies keep
// them. (The DnsOverHttpsTemplates and EncryptedClientHelloEnabled
// policies do the same, but machine-wide.)
func localState(profile, template string, noECH bool) error {
	state := map[string]any{}
	if template != "" {
		u, err := url.Parse(template)
		if err != nil || u.Scheme != "https" || u.Host == "" {
			return fmt.Errorf("secure DNS %q: want an https:// DoH URL template", template)
		}
		state["dns_over_https"] = map[string]any{"mode": "secure", "templates": template}
	}
	if noECH {
		state["ssl"] = map[string]any{"ech_enabled": false}
	}
	b, err := json.Marshal(state)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(profile, "Local State"), b, 0o644)
}
