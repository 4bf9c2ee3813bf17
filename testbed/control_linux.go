package testbed

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The control socket lets any process switch a running testbed's profiles
// and read its counters: one JSON request and one JSON answer per connection.

func (tb *Testbed) serveControl() error {
	path := filepath.Join(tb.dir, "ctl.sock")
	os.Remove(path)
	l, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("control socket: %w", err)
	}
	// Connecting takes write permission: only the testbed's owner may
	// switch its links, whatever the umask (a page worker's unprivileged
	// browser runs on this machine).
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return fmt.Errorf("control socket: %w", err)
	}
	tb.ctl = l
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go tb.handleControl(c)
		}
	}()
	return nil
}

func (tb *Testbed) handleControl(c net.Conn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	var req request
	var resp response
	if err := json.NewDecoder(c).Decode(&req); err != nil {
		resp.Error = "bad request: " + err.Error()
	} else {
		c.SetDeadline(time.Now().Add(checkTimeout + 5*time.Second))
		switch req.Op {
		case "profile":
			if req.Profile == nil {
				resp.Error = "no profile"
			} else if err := tb.SetProfile(req.Host, *req.Profile); err != nil {
				resp.Error = err.Error()
			}
		case "stats":
			st := tb.Stats()
			resp.Stats = &st
		case "check":
			if req.Profile == nil || req.Check == nil {
				resp.Error = "no profile or options"
				break
			}
			ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
			var err error
			resp.Check, err = tb.Check(ctx, *req.Profile, *req.Check)
			cancel()
			if err != nil {
				resp.Error = err.Error()
			}
		case "cross":
			if st, ok := tb.Cross(req.Host); ok {
				resp.Cross = &st
			}
		default:
			resp.Error = "unknown op " + req.Op
		}
	}
	json.NewEncoder(c).Encode(resp)
}

// SetProfile switches a host's access link at once; packets already
// scheduled keep their times.
func (tb *Testbed) SetProfile(host string, p Profile) error {
	if err := p.Validate(); err != nil {
		return err
	}
	if tb.child != nil {
		if _, err := tb.remote(context.Background(), request{Op: "profile", Host: host, Profile: &p}, 30*time.Second); err != nil {
			return err
		}
		tb.mu.Lock()
		tb.Profiles[host] = p
		tb.mu.Unlock()
		return nil
	}
	if tb.Spec.Backend == "netem" {
		if _, ok := tb.NS[host]; !ok {
			return fmt.Errorf("no host %q", host)
		}
		if err := tb.applyNetem(host, p); err != nil {
			return err
		}
	} else {
		l, ok := tb.links[host]
		if !ok {
			return fmt.Errorf("no host %q", host)
		}
		l.up.set(p.Up)
		l.down.set(p.Down)
		if err := tb.kernelPaths(); err != nil {
			return err
		}
		if err := ip("-n", tb.NS[host], "link", "set", "dx0", "mtu", strconv.Itoa(p.mtu())); err != nil {
			return err
		}
	}
	tb.mu.Lock()
	tb.Profiles[host] = p
	err := tb.save()
	tb.mu.Unlock()
	if err != nil {
		return err
	}
	return tb.setCross(host, p.Cross)
}

// Stats reads the counters.
func (tb *Testbed) Stats() Stats {
	if tb.child != nil {
		if r, err := tb.remote(context.Background(), request{Op: "stats"}, 5*time.Second); err == nil && r.Stats != nil {
			return *r.Stats
		}
		return Stats{PID: tb.PID}
	}
	st := Stats{PID: os.Getpid(), Hosts: map[string]HostStats{}, Profiles: map[string]Profile{}, GCCycles: gcCycles()}
	if tb.emu != nil {
		st.FIFO, st.CPU = tb.emu.fifo.Load(), tb.emu.cpu()
	}
	tb.mu.Lock()
	for h, p := range tb.Profiles {
		st.Profiles[h] = p
	}
	tb.mu.Unlock()
	ports, _ := portCounters(switchNS(tb.Spec.Name)) // none: the counts stay 0
	for h, l := range tb.links {
		l.up.mu.Lock()
		l.down.mu.Lock()
		c := ports[portName(l.index)]
		hs := HostStats{FromHost: c[0], ToHost: c[1], UpSent: l.up.Sent, DownSent: l.down.Sent,
			UpDropped: l.up.Dropped, DownDrop: l.down.Dropped, UpLost: l.up.Lost, DownLost: l.down.Lost,
			NoRoute: l.noRoute.Load(), Overflow: l.overflow.Load()}
		if q := l.up.aqm; q != nil {
			hs.UpDropped += q.q.Overlimit
			hs.UpCoDel = q.q.Drops
		}
		if q := l.down.aqm; q != nil {
			hs.DownDrop += q.q.Overlimit
			hs.DownCoDel = q.q.Drops
		}
		l.up.mu.Unlock()
		l.down.mu.Unlock()
		if n := l.tx.Load(); n > 0 {
			hs.MeanLateness = time.Duration(l.lateNs.Load() / int64(n))
		}
		if c, ok := tb.Cross(h); ok {
			hs.CrossDown, hs.CrossUp = c.DownBytes, c.UpBytes
		}
		st.Hosts[h] = hs
	}
	for _, l := range tb.links {
		l.capUp.flush()
		l.capDown.flush()
	}
	return st
}

// SetProfile switches a host's profile on testbed name, run by any process.
func SetProfile(name, host string, p Profile) error {
	_, err := control(name, request{Op: "profile", Host: host, Profile: &p})
	return err
}

// statCPU reads user+system time from a /proc stat file (process or thread).
func statCPU(path string) time.Duration {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(fields) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(fields[11], 10, 64)
	st, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(ut+st) * (time.Second / 100) // USER_HZ is 100 on Linux
}
