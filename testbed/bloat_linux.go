package testbed

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/doxlab/doxlab/internal/stats"
)

// MeasureLoadedRTT applies p to the client's link, probes the RTT for a
// second idle, then for d while the client downloads from the server
// over one TCP connection whose sender uses congestion control cc
// ("cubic", the common default, fills any buffer; "bbr" keeps queues
// short by itself; "" is the kernel's default here).
func (tb *Testbed) MeasureLoadedRTT(ctx context.Context, p Profile, d time.Duration, cc string) (*LoadedRTT, error) {
	if tb.child != nil {
		return nil, errSeparate("measuring the loaded RTT")
	}
	if len(tb.Spec.Hosts) < 2 {
		return nil, fmt.Errorf("loaded RTT needs two hosts")
	}
	client, server := tb.Spec.Hosts[0], tb.Spec.Hosts[1]
	if err := tb.SetProfile(client, p); err != nil {
		return nil, err
	}
	tb.drain(5 * time.Second)
	out := &LoadedRTT{Profile: p.Name, CongestionControl: cc}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	var mu sync.Mutex
	record := func(sent int64, rtt time.Duration) {
		mu.Lock()
		out.Samples = append(out.Samples, RTTSample{At: time.Duration(sent - start.UnixNano()), RTT: rtt})
		mu.Unlock()
	}
	probes := CheckOptions{Probes: int((time.Second + d) / (10 * time.Millisecond)), Interval: 10 * time.Millisecond}
	probeErr := make(chan error, 1)
	go func() {
		var r CheckResult
		r.ConfiguredRTT = p.RTT()
		probeErr <- tb.checkRTT(ctx, client, server, probes, &r, record)
	}()
	time.Sleep(time.Second) // idle
	before, drops0, over0, aqm := tb.links[client].down.queueSnapshot()
	steal0 := stealTime()
	b, err := tb.startBulk(client, server, true, cc)
	if err != nil {
		cancel()
		<-probeErr
		return nil, fmt.Errorf("bulk download: %w", err)
	}
	t0 := time.Now()
	select {
	case <-time.After(d):
	case <-ctx.Done():
	}
	out.Goodput = float64(b.delivered.Load()*8) / time.Since(t0).Seconds()
	out.Steal = stealTime() - steal0
	b.stop()
	cancel()
	if err := <-probeErr; err != nil && len(out.Samples) == 0 {
		return nil, err
	}
	if aqm {
		after, drops1, over1, _ := tb.links[client].down.queueSnapshot()
		q := after.since(before)
		out.Queue = &QueueStats{Discipline: p.Down.Queue, SojournP50: q.quantile(0.5), SojournP99: q.quantile(0.99), Drops: drops1 - drops0, Overlimit: over1 - over0}
	}
	var idle, loaded []time.Duration
	for _, s := range out.Samples {
		switch {
		case s.At < time.Second:
			idle = append(idle, s.RTT)
		case s.At > 2*time.Second:
			loaded = append(loaded, s.RTT)
		}
	}
	out.IdleP50 = quantileOf(idle, 0.5)
	out.LoadedP50, out.LoadedP99 = quantileOf(loaded, 0.5), quantileOf(loaded, 0.99)
	return out, nil
}

func quantileOf(v []time.Duration, q float64) time.Duration {
	s := slices.Clone(v)
	slices.Sort(s)
	return stats.DurationQuantile(s, q)
}
