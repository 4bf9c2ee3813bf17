package testbed

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// crossFlows are the bulk flows of one host's Cross. They run until stop,
// which the testbed calls when the host's profile changes, while it checks
// the link, and when it closes: they end with the testbed, and never
// leave its namespaces.
type crossFlows struct {
	down, up []*bulk
	since    time.Time
}

// crossPeer is the host at the far end of host's cross traffic.
func (tb *Testbed) crossPeer(host string, c Cross) (string, error) {
	if c.Peer != "" {
		if c.Peer == host || !slices.Contains(tb.Spec.Hosts, c.Peer) {
			return "", fmt.Errorf("cross traffic of %s: peer %q is not another host of the testbed", host, c.Peer)
		}
		return c.Peer, nil
	}
	if host != "server" && slices.Contains(tb.Spec.Hosts, "server") {
		return "server", nil
	}
	for _, h := range tb.Spec.Hosts {
		if h != host {
			return h, nil
		}
	}
	return "", fmt.Errorf("cross traffic of %s needs a second host", host)
}

// setCross stops host's cross traffic and starts what c asks for.
func (tb *Testbed) setCross(host string, c Cross) error {
	tb.mu.Lock()
	old := tb.cross[host]
	delete(tb.cross, host)
	tb.mu.Unlock()
	if old != nil {
		old.stop()
	}
	if c.flows() == 0 {
		return nil
	}
	peer, err := tb.crossPeer(host, c)
	if err != nil {
		return err
	}
	cf := &crossFlows{since: time.Now()}
	for i := 0; i < c.Down+c.Up; i++ {
		down := i < c.Down
		b, err := tb.startBulk(host, peer, down, cmp.Or(c.CongestionControl, "cubic"))
		if err != nil {
			cf.stop()
			return fmt.Errorf("cross traffic between %s and %s: %w", host, peer, err)
		}
		if down {
			cf.down = append(cf.down, b)
		} else {
			cf.up = append(cf.up, b)
		}
	}
	tb.mu.Lock()
	if tb.cross == nil {
		tb.cross = map[string]*crossFlows{}
	}
	tb.cross[host] = cf
	tb.mu.Unlock()
	return nil
}

// bulk is one bulk TCP flow between a host and a peer: the host dials,
// as a browser's download or upload would, and one end writes as fast as
// its congestion control lets it while the other reads and counts.
type bulk struct {
	snd, rcv  net.Conn
	delivered atomic.Int64 // bytes the receiving end has read
	wg        sync.WaitGroup
	once      sync.Once
}

// startBulk starts a flow between host and peer, towards host when down.
// cc names the sender's congestion control ("cubic", "bbr"); "" keeps the
// kernel's default.
func (tb *Testbed) startBulk(host, peer string, down bool, cc string) (*bulk, error) {
	var ln net.Listener
	if err := tb.Run(peer, func() (err error) {
		ln, err = net.Listen("tcp4", net.JoinHostPort(tb.IPs[peer], "0"))
		return err
	}); err != nil {
		return nil, fmt.Errorf("listening in %s: %w", peer, err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	var dialed net.Conn
	if err := tb.Run(host, func() (err error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		dialed, err = (&net.Dialer{}).DialContext(ctx, "tcp4", ln.Addr().String())
		return err
	}); err != nil {
		return nil, fmt.Errorf("connecting from %s: %w", host, err)
	}
	var far net.Conn
	select {
	case c, ok := <-accepted:
		if !ok {
			dialed.Close()
			return nil, errors.New("accepting the flow failed")
		}
		far = c
	case <-time.After(10 * time.Second):
		dialed.Close()
		return nil, errors.New("the flow was not accepted within 10 s")
	}
	b := &bulk{snd: dialed, rcv: far}
	if down {
		b.snd, b.rcv = far, dialed
	}
	if cc != "" {
		var ccErr error
		if rc, err := b.snd.(*net.TCPConn).SyscallConn(); err == nil {
			rc.Control(func(fd uintptr) { ccErr = unix.SetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION, cc) })
		}
		if ccErr != nil {
			b.snd.Close()
			b.rcv.Close()
			return nil, fmt.Errorf("congestion control %q: %w", cc, ccErr)
		}
	}
	b.wg.Add(2)
	go func() {
		defer b.wg.Done()
		buf := make([]byte, 64<<10)
		for {
			if _, err := b.snd.Write(buf); err != nil {
				return
			}
		}
	}()
	go func() {
		defer b.wg.Done()
		buf := make([]byte, 64<<10)
		for {
			n, err := b.rcv.Read(buf)
			b.delivered.Add(int64(n))
			if err != nil {
				return
			}
		}
	}()
	return b, nil
}

// stop closes both ends and waits for the writer and the reader.
func (b *bulk) stop() {
	b.once.Do(func() {
		b.snd.Close()
		b.rcv.Close()
		b.wg.Wait()
	})
}

func (cf *crossFlows) stop() {
	for _, b := range append(cf.down, cf.up...) {
		b.stop()
	}
}

func (cf *crossFlows) stats() CrossStats {
	sum := func(bs []*bulk) (n int64) {
		for _, b := range bs {
			n += b.delivered.Load()
		}
		return n
	}
	return CrossStats{DownFlows: len(cf.down), UpFlows: len(cf.up), DownBytes: sum(cf.down), UpBytes: sum(cf.up), Since: cf.since}
}

// Cross reports what host's cross traffic delivered since it started;
// ok is false when the host has none running.
func (tb *Testbed) Cross(host string) (st CrossStats, ok bool) {
	if tb.child != nil {
		r, err := tb.remote(context.Background(), request{Op: "cross", Host: host}, 5*time.Second)
		if err != nil || r.Cross == nil {
			return CrossStats{}, false
		}
		return *r.Cross, true
	}
	tb.mu.Lock()
	defer tb.mu.Unlock()
	cf := tb.cross[host]
	if cf == nil {
		return CrossStats{}, false
	}
	return cf.stats(), true
}

func (tb *Testbed) stopCross() {
	tb.mu.Lock()
	all := tb.cross
	tb.cross = nil
	tb.mu.Unlock()
	for _, cf := range all {
		cf.stop()
	}
}
