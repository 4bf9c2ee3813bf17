package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/doxlab/doxlab/internal/stats"
	"github.com/doxlab/doxlab/measure"
	"github.com/doxlab/doxlab/store"
)

// Aggregate is a stored benchmark's queries as distributions, read chunk
// by chunk: what the report's spectra and time panels draw, in memory
// that does not grow with the queries (a minute at 100,000 queries/s is
// six million of them).
type Aggregate struct {
	// Latency is the answered queries' latency, in ms (at least 1 µs,
	// for log axes).
	Latency *stats.Dist
	// Window is the width of Windows, by intended send time.
	Window  time.Duration
	Windows []Window
	// LastAt is the latest intended send time.
	LastAt time.Duration
	// answers are the rcodes the run took as answers (its OKRcodes).
	answers measure.Answers
}

// Window is the queries of one window of intended send times.
type Window struct {
	Latency          *stats.Dist // answered, ms
	Answered, Failed int
}

// LoadAggregated is Load with each benchmark's queries folded into an
// Aggregate as they are read, windowed by window(record) (a width by the
// benchmark's duration and rate), instead of kept.
func LoadAggregated(ctx context.Context, st *store.Store, keep func(runID string) bool, window func(Record) time.Duration) ([]*Stored, error) {
	return eachStored(ctx, st, keep, func(s *Stored) {
		// The run's own answers, as its summary counted them; a record
		// without any (older runs) takes the defaults.
		answers, err := measure.ParseAnswers(s.OKRcodes)
		if err != nil {
			answers = measure.DefaultAnswers()
		}
		s.Agg = &Aggregate{Latency: stats.NewDist(), Window: max(window(s.Record), time.Millisecond), answers: answers}
	}, func(s *Stored, ss []Sample) error {
		for _, x := range ss {
			if err := s.Agg.add(x, s.ElapsedS); err != nil {
				return fmt.Errorf("bench samples of run %s (%s): %w", s.Run, s.Key, err)
			}
		}
		return nil
	})
}

// maxWindows bounds an aggregate's windows: a day's benchmark in windows
// of a second is 86,400.
const maxWindows = 1 << 20

// ErrDamaged is a stored benchmark whose queries cannot have been
// measured: the store was damaged, or written by something else.
var ErrDamaged = errors.New("damaged")

func (a *Aggregate) add(x Sample, elapsedS float64) error {
	// A query's intended time lies within its benchmark: one a store's
	// damage put days past it (or before it) would make windows up to
	// it, gigabytes of them, before the report said a word.
	i := int64(x.At / a.Window)
	if x.At < 0 || x.At.Seconds() > elapsedS+60 || i >= maxWindows {
		return fmt.Errorf("%w: a query intended at %v, outside the benchmark's %.1f s", ErrDamaged, x.At, elapsedS)
	}
	for int64(len(a.Windows)) <= i {
		a.Windows = append(a.Windows, Window{Latency: stats.NewDist()})
	}
	a.LastAt = max(a.LastAt, x.At)
	w := &a.Windows[i]
	if a.answers.Outcome(x.Status, x.Rcode) != "" {
		w.Failed++
		return nil
	}
	ms := max(float64(x.Latency)/float64(time.Millisecond), 0.001)
	w.Answered++
	w.Latency.Add(ms)
	a.Latency.Add(ms)
	return nil
}
