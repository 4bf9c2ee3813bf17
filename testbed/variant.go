package testbed

import (
	"fmt"
	"strconv"
	"strings"
)

// Variants lists what may follow a profile's name, each after a "+":
// "4g+loss1" is 4g losing 1 % of the packets each way, "dsl+bulk+fq_codel"
// is DSL with a download running beside the measurement, behind FQ-CoDel.
const Variants = "lossN (N % Bernoulli loss each way), burstN (N % loss each way in bursts of 3 packets on average: Gilbert-Elliott), " +
	"codel, fq_codel, pie (the queue each way), bulk[N] (N bulk TCP downloads beside the measurement, default 1), bulkup[N] (uploads)"

// burstLength is the mean number of packets a burstN loss lasts: the
// Gilbert-Elliott chain leaves its lossy state with probability 1/3.
const burstLength = 3

// maxCrossFlows bounds a profile's cross traffic.
const maxCrossFlows = 16

// variant applies mods ("loss1+bulk") to the built-in profile base. The
// name of the result is the whole "base+mods", as given.
func variant(base, mods string) (Profile, error) {
	name := base + "+" + mods
	p, ok := Profiles[strings.ToLower(base)]
	if !ok {
		return Profile{}, fmt.Errorf("profile %q: variants apply to the built-in profiles, and %q is not one", name, base)
	}
	p.Name = strings.ToLower(name)
	for _, m := range strings.Split(strings.ToLower(mods), "+") {
		if err := p.apply(m); err != nil {
			return Profile{}, fmt.Errorf("profile %q: %w (variants: %s)", name, err, Variants)
		}
	}
	return p, p.Validate()
}

func (p *Profile) apply(m string) error {
	both := func(f func(d *Direction)) { f(&p.Down); f(&p.Up) }
	percent := func(prefix string) (float64, error) {
		v, err := strconv.ParseFloat(strings.TrimPrefix(m, prefix), 64)
		if err != nil || !(v > 0 && v < 100) { // NaN too: strconv reads "nan"
			return 0, fmt.Errorf("%s: want %sN with N a percentage above 0 and below 100", m, prefix)
		}
		return v / 100, nil
	}
	count := func(prefix string) (int, error) {
		rest := strings.TrimPrefix(m, prefix)
		if rest == "" {
			return 1, nil
		}
		n, err := strconv.Atoi(rest)
		if err != nil || n < 1 || n > maxCrossFlows {
			return 0, fmt.Errorf("%s: want %s or %sN with N from 1 to %d", m, prefix, prefix, maxCrossFlows)
		}
		return n, nil
	}
	switch {
	case m == "codel" || m == "fq_codel" || m == "pie":
		both(func(d *Direction) { d.Queue = m })
	case strings.HasPrefix(m, "loss"):
		f, err := percent("loss")
		if err != nil {
			return err
		}
		both(func(d *Direction) { d.Loss, d.GilbertElliott = f, nil })
	case strings.HasPrefix(m, "burst"):
		f, err := percent("burst")
		if err != nil {
			return err
		}
		// In the bad state every packet is lost and the good state loses
		// none, so the loss rate is the time spent in the bad state:
		// P/(P+R) = f.
		r := 1.0 / burstLength
		ge := GilbertElliott{P: r * f / (1 - f), R: r, LossBad: 1}
		both(func(d *Direction) { d.Loss, d.GilbertElliott = 0, &ge })
	case strings.HasPrefix(m, "bulkup"):
		n, err := count("bulkup")
		if err != nil {
			return err
		}
		p.Cross.Up = n
	case strings.HasPrefix(m, "bulk"):
		n, err := count("bulk")
		if err != nil {
			return err
		}
		p.Cross.Down = n
	default:
		return fmt.Errorf("unknown variant %q", m)
	}
	return nil
}
