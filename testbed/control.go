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

type request struct {
	Op      string        `json:"op"` // profile, stats, check or cross
	Host    string        `json:"host,omitempty"`
	Profile *Profile      `json:"profile,omitempty"`
	Check   *CheckOptions `json:"check,omitempty"`
}

type response struct {
	Error string       `json:"error,omitempty"`
	Stats *Stats       `json:"stats,omitempty"`
	Check *CheckResult `json:"check,omitempty"`
	Cross *CrossStats  `json:"cross,omitempty"` // nil: the host has no cross traffic running
}

// checkTimeout bounds a link check asked over the control socket.
const checkTimeout = 3 * time.Minute

// Stats are the emulator's counters.
type Stats struct {
	PID  int           `json:"pid"`
	FIFO bool          `json:"sched_fifo"` // writer threads run SCHED_FIFO
	CPU  time.Duration `json:"cpu"`        // CPU time of the emulator's threads so far
	// GCCycles counts the collections of the emulator's process so far:
	// each stops it. A Separate testbed's process collects only near
	// its memory limit, so this stays 0 there.
	GCCycles uint64               `json:"gc_cycles"`
	Hosts    map[string]HostStats `json:"hosts"`
	Profiles map[string]Profile   `json:"profiles"`
}

// HostStats counts one host's link.
type HostStats struct {
	FromHost, ToHost    uint64        // packets from and to the host, at its port (the kernel's forwarding included)
	UpSent, DownSent    uint64        // packets the emulator passed through each stage
	UpDropped, DownDrop uint64        // tail drops, and an AQM queue's drops over its limit
	UpCoDel, DownCoDel  uint64        // drops by the AQM (queue codel, fq_codel or pie), on arrival or at the head
	UpLost, DownLost    uint64        // emulated loss
	NoRoute, Overflow   uint64        // packets to unknown addresses; writer backlog overflows
	MeanLateness        time.Duration // mean time writes happened after their departure time
	CrossDown, CrossUp  int64         // bytes the host's cross traffic delivered each way since it started
}

func (tb *Testbed) serveControl() error {
	path := filepath.Join(tb.dir, "ctl.sock")
	os.Remove(path)
	l, err := net.Listen("unix", path)
	if err != nil {
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

// Control sends a request to testbed name's control socket.
func control(name string, req request) (*response, error) {
	return controlWithin(name, req, 5*time.Second)
}

// controlWithin is control with the time the answer may take.
func controlWithin(name string, req request, timeout time.Duration) (*response, error) {
	c, err := net.DialTimeout("unix", filepath.Join(stateDir(name), "ctl.sock"), 2*time.Second)
	if err != nil {
		return nil, fmt.Errorf("testbed %s is not running: %w", name, err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	if err := json.NewEncoder(c).Encode(req); err != nil {
		return nil, err
	}
	var resp response
	if err := json.NewDecoder(c).Decode(&resp); err != nil {
		return nil, fmt.Errorf("testbed %s: reading control answer: %w", name, err)
	}
	if resp.Error != "" { // the answer is the error
		return &resp, fmt.Errorf("testbed %s: %s", name, resp.Error)
	}
	return &resp, nil
}

// SetProfile switches a host's profile on testbed name, run by any process.
func SetProfile(name, host string, p Profile) error {
	_, err := control(name, request{Op: "profile", Host: host, Profile: &p})
	return err
}

// ReadStats reads testbed name's counters, run by any process.
func ReadStats(name string) (*Stats, error) {
	resp, err := control(name, request{Op: "stats"})
	if err != nil {
		return nil, err
	}
	return resp.Stats, nil
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
