package web

import (
	"cmp"
	"context"
	"os"
	"os/exec"
	"os/user"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/doxlab/doxlab/browser"
	"github.com/doxlab/doxlab/campaign"
)

func init() { campaign.RegisterPageCheck(checkPages) }

// checkPages checks what page loads need at a vantage point, ending with
// the real thing: a confined, sandboxed browser started and its
// processes read.
func checkPages(cfg campaign.PageLoaderConfig) []campaign.Finding {
	var out []campaign.Finding
	add := func(check string, ok bool, detail string) bool {
		out = append(out, campaign.Finding{Check: check, OK: ok, Detail: detail})
		return ok
	}
	linux := "Linux: network and mount namespaces, nftables"
	if runtime.GOOS != "linux" {
		linux = "page loads need Linux: this is " + runtime.GOOS
	}
	if !add("linux", runtime.GOOS == "linux", linux) {
		return out
	}
	add("root", os.Geteuid() == 0, "the worker makes the browser's namespaces and firewall as root, then drops it (running as uid "+itoa(os.Geteuid())+")")
	exe, err := browser.FindExec(cfg.Browser)
	if add("chromium", err == nil, cmp.Or(errText(err), exe)) {
		if v, err := exec.Command(exe, "--version").Output(); err == nil {
			out[len(out)-1].Detail = strings.TrimSpace(string(v)) + " (" + exe + ")"
		}
	}
	name := cmp.Or(cfg.BrowserUser, campaign.DefaultBrowserUser)
	u, err := user.Lookup(name)
	switch {
	case err != nil:
		add("user", false, "no user "+name+": useradd --system --user-group --no-create-home --shell /usr/sbin/nologin "+name)
	case u.Uid == "0":
		add("user", false, name+" is root: the browser needs an unprivileged user")
	default:
		add("user", true, "the browser runs as "+name+" (uid "+u.Uid+")")
	}
	var lack []string
	for _, tool := range []string{"ip", "nft", "setpriv", "unshare"} {
		if _, err := exec.LookPath(tool); err != nil {
			lack = append(lack, tool)
		}
	}
	tools := "ip, nft, setpriv and unshare present"
	if len(lack) > 0 {
		tools = strings.Join(lack, ", ") + " missing (apt-get install iproute2 nftables util-linux)"
	}
	add("tools", len(lack) == 0, tools)
	if b, err := os.ReadFile("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"); err == nil && strings.TrimSpace(string(b)) == "1" {
		add("userns", false, "AppArmor restricts unprivileged user namespaces, which Chromium's sandbox needs: sysctl kernel.apparmor_restrict_unprivileged_userns=0")
	}
	if len(out) > 0 && !allOK(out) {
		return out
	}
	l, err := newWildLoader(cfg)
	if !add("confine", err == nil, cmp.Or(errText(err), "a network of the browser's own was made: namespace, veth pair, NAT and both firewalls")) {
		return out
	}
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	wl := l.(*wildLoader)
	b, err := wl.browser(ctx, "doxlab-worker-check")
	if !add("sandbox", err == nil, cmp.Or(errText(err), "")) {
		return out
	}
	c, _ := b.Confinement()
	out[len(out)-1].Detail = "Chromium ran as " + c.User + ", no process as root, " + itoa(c.Sandboxed) + " of " + itoa(c.Renderers) + " renderers in its sandbox"
	return out
}

func allOK(fs []campaign.Finding) bool {
	for _, f := range fs {
		if !f.OK {
			return false
		}
	}
	return true
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func itoa(n int) string { return strconv.Itoa(n) }
