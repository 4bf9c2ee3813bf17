package web

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/miekg/dns"
	"gopkg.in/yaml.v3"

	"github.com/doxlab/doxlab/measure"
	"github.com/doxlab/doxlab/server"
	"github.com/doxlab/doxlab/transport"
)

// stub is doxlab's own server run as the client host's resolver
// (stubAddr, where resolv.conf points), forwarding over one transport. Its records come back over a pipe.
type stub struct {
	cmd     *exec.Cmd
	stdin   io.Closer // held open: should this process die, the stub stops (--exit-on-eof)
	records server.RecordLog
	readers sync.WaitGroup // the stdout and stderr readers: done before Wait
}

func (e *webEnv) startStub(ctx context.Context, tr, state string) (*stub, error) {
	u, err := measure.URLFor(tr, e.ip)
	if err != nil {
		return nil, err
	}
	// The stub is a process of its own in the client host: the
	// forwarder's upstream sockets are opened per query, and must be made
	// in the client's network namespace to cross the emulated link. It
	// gets a typed config and says it is ready by writing a file.
	at := e.stubAddr()
	cfg := server.Config{
		Listen: server.Listen{UDP: at, TCP: at},
		Answers: server.Answers{Forward: u, ForwardCA: e.ca, ForwardSNI: "localhost",
			ForwardConn: map[string]string{"cold": "fresh", "warm": "reuse"}[state], ForwardTimeout: 10 * time.Second},
		Records: "-",
	}
	b, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	base := filepath.Join(filepath.Dir(e.ca), "stub-"+tr+"-"+state)
	readyFile := base + ".ready"
	os.Remove(readyFile)
	if err := os.WriteFile(base+".yaml", b, 0o644); err != nil {
		return nil, err
	}
	s := &stub{cmd: e.tb.Command("client", e.c.Doxlab, "serve", "--config", base+".yaml", "--ready", readyFile, "--exit-on-eof")}
	if s.stdin, err = s.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	errOut, err := s.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the stub: %w", err)
	}
	s.readers.Add(2)
	go func() {
		defer s.readers.Done()
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			r := new(server.Record)
			if json.Unmarshal(sc.Bytes(), r) == nil && r.Kind == "query" {
				s.records.Add(r)
			}
		}
	}()
	exited := make(chan string, 1) // the last line it said, for the error
	go func() {
		defer s.readers.Done()
		sc := bufio.NewScanner(errOut)
		var last string
		for sc.Scan() {
			last = sc.Text()
		}
		exited <- last
	}()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(15 * time.Second)
	for {
		var ready server.Ready
		if b, err := os.ReadFile(readyFile); err == nil && json.Unmarshal(b, &ready) == nil && ready.Listeners["udp"] != "" {
			break
		}
		select {
		case <-tick.C:
			continue
		case last := <-exited:
			s.stop()
			return nil, fmt.Errorf("the stub exited: %s", last)
		case <-deadline:
			s.stop()
			return nil, fmt.Errorf("the stub did not start within 15 s")
		case <-ctx.Done():
			s.stop()
			return nil, ctx.Err()
		}
	}
	return s, nil
}

// stop kills the stub; its pipes are read to the end before Wait closes
// them, as os/exec requires.
func (s *stub) stop() {
	s.stdin.Close()
	s.cmd.Process.Kill()
	s.readers.Wait()
	s.cmd.Wait()
}

// stubDNS is DoUDP to the stub, from inside the client host: the lookup
// path the browser has.
func (e *webEnv) stubDNS(timeout time.Duration) (transport.Transport, error) {
	return transport.New("udp://"+e.stubAddr(), transport.Options{Timeout: timeout, OpenSockets: e.inClient})
}

// stubAddr is where the stub listens: the client's local address, where
// its resolv.conf points (the testbed's, or the browser's own on the
// loopback net).
func (e *webEnv) stubAddr() string { return net.JoinHostPort(e.tb.Local("client"), "53") }

// lookup resolves host through the stub from inside the client host, as
// the decoupled mode measures DNS apart from the page load: the stub's
// time including its upstream exchange, on the client's clock.
func (e *webEnv) lookup(host string) (float64, error) {
	t, err := e.stubDNS(10 * time.Second)
	if err != nil {
		return 0, err
	}
	defer t.Close()
	q := new(dns.Msg)
	q.SetQuestion(dns.Fqdn(host), dns.TypeA)
	rec, err := t.Exchange(context.Background(), q)
	if err != nil {
		return 0, err
	}
	if rec.Rcode != "NOERROR" || len(rec.Answers) == 0 {
		return 0, fmt.Errorf("the stub answered %s for %s", rec.Rcode, host)
	}
	return rec.Timing.TotalMs, nil
}
