package testbed

import (
	"fmt"
	"io"
	"time"
)

// WriteCheckHeader writes the header of the check's table, a row per
// profile (WriteRows).
func WriteCheckHeader(w io.Writer) {
	fmt.Fprintf(w, "%-10s %9s %9s %9s %9s %9s %5s %16s %16s %6s %6s %9s %9s\n", "profile", "rtt_ms", "err_p50", "err_p90", "err_p99", "err_max", "lost", "up Mbit/s", "down Mbit/s", "cpu", "steal", "late_p50", "late_p99")
}

// WriteRows writes the check of one profile: its row of the table, then
// a line for long GC pauses, each queue's and each trace's fit.
func (res *CheckResult) WriteRows(w io.Writer, profile string) {
	us := func(d time.Duration) string { return fmt.Sprintf("%.0fµs", float64(d)/1e3) }
	upTo := func(d time.Duration) string { // a bucket bound; 0: nothing delivered (the kernel forwards)
		if d == 0 {
			return "-"
		}
		return "≤" + us(d)
	}
	rate := func(got, want float64, fit *TraceFit) string {
		switch {
		case fit != nil: // a trace: its mean says little of a few seconds
			return fmt.Sprintf("trace %5.1f%%", 100*fit.Total)
		case want == 0:
			return "unlimited"
		}
		return fmt.Sprintf("%.1f/%.1f %3.0f%%", got/1e6, want/1e6, 100*got/want)
	}
	fmt.Fprintf(w, "%-10s %9.3f %9s %9s %9s %9s %5d %16s %16s %5.0f%% %4dms %9s %9s\n", profile, float64(res.ConfiguredRTT)/1e6,
		us(res.ErrP50), us(res.ErrP90), us(res.ErrP99), us(res.ErrMax), res.Lost, rate(res.UpAchieved, res.UpRate, res.UpTrace), rate(res.DownAchieved, res.DownRate, res.DownTrace), 100*res.EmulatorCPU, res.Steal.Milliseconds(),
		upTo(res.LateP50), upTo(res.LateP99))
	if res.GCPauseMax >= 500*time.Microsecond {
		fmt.Fprintf(w, "%-10s this process, which runs the emulator, stopped %d times for GC while the probes ran, the longest ≤%s\n", "", res.GCPauses, us(res.GCPauseMax))
	}
	for _, q := range []struct {
		dir string
		q   *QueueStats
	}{{"up", res.UpQueue}, {"down", res.DownQueue}} {
		if q.q != nil {
			fmt.Fprintf(w, "%-10s %s queue %s: time in queue p50 %s, p99 %s; %d dropped by %s, %d over the limit\n",
				"", q.dir, q.q.Discipline, upTo(q.q.SojournP50), upTo(q.q.SojournP99), q.q.Drops, q.q.Discipline, q.q.Overlimit)
		}
	}
	for _, f := range []struct {
		dir string
		fit *TraceFit
	}{{"up", res.UpTrace}, {"down", res.DownTrace}} {
		if f.fit != nil {
			fmt.Fprintf(w, "%-10s %s trace %s: %d windows of %s, arrived/trace %.2f%%; per window |error| p50 %.2f%%, max %.2f%% (offered %.1f Mbit/s)\n",
				"", f.dir, f.fit.Trace, f.fit.Windows, FitWindow, 100*f.fit.Total, 100*f.fit.ErrP50, 100*f.fit.ErrMax, f.fit.Offered/1e6)
		}
	}
}

// WriteCheckLegend writes what the table's columns mean, after a note
// on the kernel's preemption model (preempt, as the check found it)
// where it lengthens the tail.
func WriteCheckLegend(w io.Writer, preempt string) {
	if preempt == "none" || preempt == "voluntary" {
		fmt.Fprintf(w, "kernel preemption: %s; a woken emulator thread waits until whatever runs in the kernel yields, so a busy machine (a browser) lengthens the tail; boot with preempt=full to remove that\n", preempt)
	}
	fmt.Fprintln(w, "err = measured RTT (ICMP echo, kernel timestamps at the client's device, out and back) minus configured delay and serialization (on a trace, the wait for an opportunity is part of the error); trace = octets arrived over those the trace delivers, in whole 100 ms windows while saturated; cpu = emulator, % of one core, during the throughput runs; steal = CPU time the hypervisor took from this VM during the probes (a vCPU not running is late for everything); late = how late the emulator itself delivered the probes' packets (the rest of the error is the kernels' work along the path)")
}
