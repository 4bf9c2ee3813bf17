package experiment

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/doxlab/doxlab/store"
	"github.com/doxlab/doxlab/testbed"
)

// LinkCheck is a short fidelity check of the client's emulated access
// link (testbed.Check: RTT probes and a throughput run per direction),
// taken before and after each run on the testbed, so that a run whose
// link misbehaved says so in the store and the report.
type LinkCheck struct {
	Run     string    `json:"run"`
	When    string    `json:"when"` // before, after
	Profile string    `json:"profile"`
	At      time.Time `json:"at"`
	RTTMs   float64   `json:"rtt_ms"` // configured
	// The RTT error (measured minus configured) of the probes, µs.
	ErrP50Us     float64 `json:"err_p50_us"`
	ErrP99Us     float64 `json:"err_p99_us"`
	ErrMaxUs     float64 `json:"err_max_us"`
	Lost         int     `json:"lost"`
	UpRate       float64 `json:"up_rate"` // bit/s; 0: unlimited
	UpAchieved   float64 `json:"up_achieved"`
	DownRate     float64 `json:"down_rate"`
	DownAchieved float64 `json:"down_achieved"`
	EmulatorCPU  float64 `json:"emulator_cpu"` // of one core
	// GCPauses and GCPauseMaxUs are the garbage collector's
	// stop-the-world pauses, while the probes ran, in the process that
	// runs the emulator: a pause holds its packets. EmulatorOwnProcess
	// says that process was one of its own, with its collector held
	// (testbed.Spec.Separate), rather than the experiment's, where
	// every run stored before it had the emulator.
	GCPauses           int     `json:"gc_pauses"`
	GCPauseMaxUs       float64 `json:"gc_pause_max_us"`
	EmulatorOwnProcess bool    `json:"emulator_own_process"`
	// LateMaxUs is how late the emulator itself delivered the latest of
	// the probes' packets (a bucket bound: its share of the error; the
	// rest is the kernels'), StealMs the CPU time the hypervisor took
	// meanwhile.
	LateMaxUs float64 `json:"late_max_us"`
	StealMs   float64 `json:"steal_ms"`
	// Net is "loopback" for a run on the loopback net, whose check
	// measured nothing (there is no emulated link); empty on the testbed.
	Net string `json:"net,omitempty"`
	OK  bool   `json:"ok"`
	Why string `json:"why,omitempty"` // what was off
	// Cross is what the profile's cross traffic delivered while the run
	// measured (on the check after it).
	Cross *CrossLoad `json:"cross,omitempty"`
}

// CrossLoad is the goodput of a run's cross traffic: bulk TCP flows on
// the client's link beside the measurement (testbed.Cross).
type CrossLoad struct {
	DownFlows int     `json:"down_flows,omitempty"`
	UpFlows   int     `json:"up_flows,omitempty"`
	DownMbps  float64 `json:"down_mbps"`
	UpMbps    float64 `json:"up_mbps"`
	Seconds   float64 `json:"seconds"`
}

// crossMeter reads the client's cross traffic now; the function it
// returns gives what was delivered since, or nil without cross traffic.
func crossMeter(n Net) func() *CrossLoad {
	c0, ok := n.Cross("client")
	t0 := time.Now()
	return func() *CrossLoad {
		c1, still := n.Cross("client")
		if !ok || !still || !c1.Since.Equal(c0.Since) {
			return nil
		}
		secs := time.Since(t0).Seconds()
		mbps := func(b int64) float64 { return float64(b) * 8 / secs / 1e6 }
		return &CrossLoad{DownFlows: c1.DownFlows, UpFlows: c1.UpFlows, Seconds: secs,
			DownMbps: mbps(c1.DownBytes - c0.DownBytes), UpMbps: mbps(c1.UpBytes - c0.UpBytes)}
	}
}

// KindLinkCheck is a LinkCheck in the store.
var KindLinkCheck = store.NewKind("link-check")

// The bounds a link must hold to pass: every rate delivered to 95 %
// (a rate collapse shows as far less), the RTT error's p99 under 1 ms
// (the emulator's is ~0.1 ms idle, ~0.4 ms under a browser's load).
const (
	MinRateShare = 0.95
	MaxErrP99    = time.Millisecond
)

// linkCheckOptions keep the check to about two seconds.
var linkCheckOptions = testbed.CheckOptions{Probes: 100, Interval: 2 * time.Millisecond, Throughput: 500 * time.Millisecond}

// CheckLink checks the client's link with profile p and stores the
// result for run runID. A check that cannot be taken is stored as failed
// with its reason; only a store error is returned.
func CheckLink(ctx context.Context, st *store.Store, n Net, runID, when string, p testbed.Profile, cross *CrossLoad) (*LinkCheck, error) {
	lc := checkLink(ctx, n, runID, when, p, cross)
	return lc, storeLinkCheck(ctx, st, lc)
}

// checkLink checks the client's link, as CheckLink, without storing.
func checkLink(ctx context.Context, n Net, runID, when string, p testbed.Profile, cross *CrossLoad) *LinkCheck {
	lc := &LinkCheck{Run: runID, When: when, Profile: p.Name, At: time.Now().UTC(), Cross: cross}
	if tn, ok := n.(testbedNet); ok {
		lc.EmulatorOwnProcess = tn.EmulatorOwnProcess()
	}
	if n.Kind() != NetTestbed {
		lc.Net = n.Kind()
	}
	res, err := n.Check(ctx, p, linkCheckOptions)
	if err != nil {
		lc.Why = "check failed: " + err.Error()
	} else {
		lc.RTTMs = float64(res.ConfiguredRTT) / float64(time.Millisecond)
		lc.ErrP50Us, lc.ErrP99Us, lc.ErrMaxUs, lc.Lost = us(res.ErrP50), us(res.ErrP99), us(res.ErrMax), res.Lost
		lc.UpRate, lc.UpAchieved, lc.DownRate, lc.DownAchieved = res.UpRate, res.UpAchieved, res.DownRate, res.DownAchieved
		lc.EmulatorCPU = res.EmulatorCPU
		lc.GCPauses, lc.GCPauseMaxUs = res.GCPauses, us(res.GCPauseMax)
		lc.LateMaxUs, lc.StealMs = us(res.LateMax), us(res.Steal)/1000
		lc.Why = linkOff(res, p)
	}
	lc.OK = lc.Why == ""
	return lc
}

// linkOff is what a check's result says was off with a link of profile
// p, "" when it held: a direction that delivered under MinRateShare of
// its rate less its mean loss, an RTT error p99 over MaxErrP99 with the
// likeliest cause the check measured (a GC pause of the emulator's
// process, the emulator's own lateness, the hypervisor's steal) where
// one accounts for half of it at least, else what each measured.
func linkOff(res *testbed.CheckResult, p testbed.Profile) string {
	var off []string
	for _, d := range []struct {
		name      string
		want, got float64
	}{{"up", res.UpRate * (1 - p.Up.MeanLoss()), res.UpAchieved}, {"down", res.DownRate * (1 - p.Down.MeanLoss()), res.DownAchieved}} {
		if d.want > 0 && d.got < MinRateShare*d.want {
			off = append(off, fmt.Sprintf("%s delivered %.1f of %.1f Mbit/s", d.name, d.got/1e6, d.want/1e6))
		}
	}
	if res.ErrP99 > MaxErrP99 {
		why := fmt.Sprintf("RTT error p99 %.0f µs", us(res.ErrP99))
		half := max(MaxErrP99, res.ErrP99) / 2 // a cause named accounts for half the error at least
		switch {
		case res.GCPauseMax >= half:
			why += fmt.Sprintf(" (a GC pause of up to %.1f ms in the process that runs the emulator)", us(res.GCPauseMax)/1000)
		case res.LateMax >= half:
			why += fmt.Sprintf(" (the emulator delivered a packet up to %.1f ms late)", us(res.LateMax)/1000)
		case res.Steal >= half:
			why += fmt.Sprintf(" (the hypervisor took %.1f ms of CPU meanwhile)", us(res.Steal)/1000)
		case res.GCPauseMax+res.LateMax+res.Steal > 0:
			why += fmt.Sprintf(" (more than the causes the check measures: GC pauses up to %.1f ms, the emulator up to %.1f ms late, the hypervisor's steal %.1f ms)",
				us(res.GCPauseMax)/1000, us(res.LateMax)/1000, us(res.Steal)/1000)
		}
		off = append(off, why)
	}
	return strings.Join(off, "; ")
}

// us is d in microseconds, as a check's figures are stored.
func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// storeLinkCheck stores a check with its run.
func storeLinkCheck(ctx context.Context, st *store.Store, lc *LinkCheck) error {
	return st.WriteResult(ctx, lc.Run, KindLinkCheck, fmt.Sprintf("%s-%d", lc.When, lc.At.UnixNano()), lc.At, lc)
}

// LoadLinkChecks reads the link checks of the runs keep accepts.
func LoadLinkChecks(ctx context.Context, st *store.Store, keep func(runID string) bool) ([]*LinkCheck, error) {
	return LoadResults[LinkCheck](ctx, st, KindLinkCheck, keep)
}

// EvidenceOf is what the link checks lcs say about verdicts: the checks
// that failed, and the runs on the loopback net.
func EvidenceOf(lcs []*LinkCheck) Evidence {
	var ev Evidence
	for _, lc := range lcs {
		if lc.Net == NetLoopback && !slices.Contains(ev.Loopback, lc.Run) {
			ev.Loopback = append(ev.Loopback, lc.Run)
		}
		if !lc.OK {
			ev.FailedChecks = append(ev.FailedChecks, fmt.Sprintf("run %s (%s, %s): %s", lc.Run, lc.Profile, lc.When, lc.Why))
		}
	}
	return ev
}
