package browser

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/chromedp/chromedp"
)

// Confinement is what the browser's processes are, read from /proc at
// one moment: who they run as, and whether the renderers (which run the
// pages' code) are in Chromium's sandbox.
type Confinement struct {
	Processes int    `json:"processes"`
	User      string `json:"user"`           // the uid every process runs as, by name if known ("mixed" if they differ)
	Root      int    `json:"root_processes"` // processes running as uid 0
	Renderers int    `json:"renderers"`
	// Sandboxed are the renderers under seccomp-bpf in user and PID
	// namespaces of their own (Chromium's Linux sandbox).
	Sandboxed int `json:"sandboxed_renderers"`
}

// Holds is nil when no process of the browser runs as root and every
// renderer is sandboxed, else why not.
func (c Confinement) Holds() error {
	switch {
	case c.Processes == 0:
		return fmt.Errorf("no browser process found")
	case c.Root > 0:
		return fmt.Errorf("%d of the browser's %d processes run as root", c.Root, c.Processes)
	case c.Renderers == 0:
		return fmt.Errorf("no renderer process found")
	case c.Sandboxed < c.Renderers:
		return fmt.Errorf("%d of %d renderers run without Chromium's sandbox", c.Renderers-c.Sandboxed, c.Renderers)
	}
	return nil
}

// Confinement reads the browser's process tree from /proc.
func (b *Browser) Confinement() (Confinement, error) {
	c := chromedp.FromContext(b.tab)
	if c == nil || c.Browser == nil || c.Browser.Process() == nil {
		return Confinement{}, fmt.Errorf("the browser is not running")
	}
	return confinementOf(c.Browser.Process().Pid)
}

// confinementOf reads the tree of processes under pid.
func confinementOf(root int) (Confinement, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return Confinement{}, fmt.Errorf("reading processes: %w", err)
	}
	children := map[int][]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := status(pid); err == nil {
			ppid, _ := strconv.Atoi(st["PPid"])
			children[ppid] = append(children[ppid], pid)
		}
	}
	self, _ := os.Readlink("/proc/self/ns/user")
	selfMap, _ := os.ReadFile("/proc/self/uid_map")
	var c Confinement
	uids := map[string]bool{}
	for queue := []int{root}; len(queue) > 0; queue = queue[1:] {
		pid := queue[0]
		queue = append(queue, children[pid]...)
		st, err := status(pid)
		if err != nil {
			continue // gone meanwhile
		}
		c.Processes++
		uid := strings.Fields(st["Uid"] + " ?")[0] // real uid
		uids[uid] = true
		if uid == "0" {
			c.Root++
		}
		cmd, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
		if !strings.Contains(string(cmd), "--type=renderer") {
			continue
		}
		c.Renderers++
		if st["Seccomp"] == "2" && ownUserNS(pid, self, selfMap) {
			c.Sandboxed++
		}
	}
	switch len(uids) {
	case 0:
	case 1:
		for uid := range uids {
			c.User = userName(uid)
		}
	default:
		c.User = "mixed"
	}
	return c, nil
}

// ownUserNS says whether pid is in a user namespace other than ours:
// its namespace's link differs, or, where reading that link needs
// CAP_SYS_PTRACE (a container's root lacks it), its uid map does.
func ownUserNS(pid int, self string, selfMap []byte) bool {
	dir := filepath.Join("/proc", strconv.Itoa(pid))
	if ns, err := os.Readlink(filepath.Join(dir, "ns/user")); err == nil && self != "" {
		return ns != self
	}
	m, err := os.ReadFile(filepath.Join(dir, "uid_map"))
	return err == nil && len(selfMap) > 0 && string(m) != string(selfMap)
}

// status is /proc/PID/status as fields.
func status(pid int) (map[string]string, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			m[k] = strings.TrimSpace(v)
		}
	}
	return m, nil
}
