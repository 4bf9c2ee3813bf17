package testbed

import (
	"context"
	"fmt"
	"time"

	"github.com/doxlab/doxlab/internal/sysinfo"
)

// Check applies profile p to the first host's link and measures it.
func (tb *Testbed) Check(ctx context.Context, p Profile, o CheckOptions) (_ *CheckResult, err error) {
	if err := o.Check(); err != nil {
		return nil, err
	}
	if tb.child != nil { // measured by the emulator's process, whose clocks and counters it reads
		r, err := tb.remote(ctx, request{Op: "check", Profile: &p, Check: &o}, checkTimeout)
		if err != nil {
			return nil, err
		}
		if r.Check == nil {
			return nil, fmt.Errorf("testbed %s: the check came back empty", tb.Spec.Name)
		}
		tb.mu.Lock()
		tb.Profiles[tb.Spec.Hosts[0]] = p
		tb.mu.Unlock()
		return r.Check, nil
	}
	if len(tb.Spec.Hosts) < 2 {
		return nil, fmt.Errorf("check needs two hosts")
	}
	o = o.withDefaults()
	client, server := tb.Spec.Hosts[0], tb.Spec.Hosts[1]
	// The check measures the link alone: cross traffic pauses meanwhile,
	// and resumes after it.
	bare := p
	bare.Cross = Cross{}
	if err := tb.SetProfile(client, bare); err != nil {
		return nil, err
	}
	if p.Cross.flows() > 0 {
		defer func() {
			if rerr := tb.SetProfile(client, p); err == nil {
				err = rerr
			}
		}()
	}
	res := &CheckResult{Profile: p.Name, UpRate: p.Up.MeanRate(), DownRate: p.Down.MeanRate()}
	// A probe's serialization; on a trace, the wait for an opportunity
	// varies, and is left out.
	serial := func(d Direction) time.Duration {
		if d.Rate == 0 {
			return 0
		}
		return time.Duration(float64(probeSize*8) / d.Rate * float64(time.Second))
	}
	res.ConfiguredRTT = p.Up.Delay + p.Down.Delay + serial(p.Up) + serial(p.Down)
	// Packets of an earlier profile or check may still be queued on the
	// link: the probes would wait behind them.
	tb.drain(5 * time.Second)
	steal0, gc0 := stealTime(), gcPauses()
	var late0 lateCounts
	if tb.emu != nil {
		late0 = tb.emu.lateness()
	}
	if err := tb.checkRTT(ctx, client, server, o, res, nil); err != nil {
		return nil, err
	}
	res.Steal = stealTime() - steal0
	res.GCPauses, res.GCPauseMax = gcPauses().since(gc0)
	if tb.emu != nil {
		late := tb.emu.lateness().since(late0)
		res.LateP50, res.LateP99, res.LateMax = late.quantile(0.5), late.quantile(0.99), late.quantile(1)
	}
	res.Preemption = sysinfo.Preemption()
	if !o.SkipThroughput {
		cpu := func() time.Duration {
			if tb.emu == nil {
				return 0 // netem: the kernel's work, not measurable here
			}
			return tb.emu.cpu()
		}
		cpu0, t0 := cpu(), time.Now()
		var err error
		for _, dir := range []struct {
			d        Direction
			from, to string
			stage    func() *stage
			achieved *float64
			fit      **TraceFit
			queue    **QueueStats
		}{
			{p.Up, client, server, func() *stage { return tb.links[client].up }, &res.UpAchieved, &res.UpTrace, &res.UpQueue},
			{p.Down, server, client, func() *stage { return tb.links[client].down }, &res.DownAchieved, &res.DownTrace, &res.DownQueue},
		} {
			var before lateCounts
			var drops0, over0 uint64
			aqm := false
			if tb.emu != nil {
				before, drops0, over0, aqm = dir.stage().queueSnapshot()
			}
			switch {
			case dir.d.Trace != "" && tb.emu != nil:
				if *dir.fit, err = tb.traceThroughput(ctx, dir.from, dir.to, dir.stage(), dir.d.Delay, max(o.Throughput, 3*time.Second)); err != nil {
					return nil, err
				}
				*dir.achieved = (*dir.fit).Achieved
			case dir.d.Rate > 0:
				if *dir.achieved, err = tb.throughput(ctx, dir.from, dir.to, dir.d.Rate, o.Throughput); err != nil {
					return nil, err
				}
			}
			if aqm {
				after, drops1, over1, _ := dir.stage().queueSnapshot()
				d := after.since(before)
				*dir.queue = &QueueStats{Discipline: dir.d.Queue, SojournP50: d.quantile(0.5), SojournP99: d.quantile(0.99), Drops: drops1 - drops0, Overlimit: over1 - over0}
			}
		}
		if d := time.Since(t0); res.UpRate > 0 || res.DownRate > 0 {
			res.EmulatorCPU = float64(cpu()-cpu0) / float64(d)
		}
	}
	res.FIFO = tb.emu != nil && tb.emu.fifo.Load()
	return res, nil
}
