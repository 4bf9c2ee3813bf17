package experiment

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/store"
)

func TestResumeNeedsAStoredExperimentExactly(t *testing.T) {
	ctx := context.Background()
	dsn := filepath.Join(t.TempDir(), "s.db")
	st, err := store.Open(ctx, dsn)
	require.NoError(t, err)
	defer st.Close()
	var log bytes.Buffer
	e := &Env{Store: dsn, Log: &log}
	id, err := e.ExperimentID("web")
	require.NoError(t, err)
	require.Contains(t, log.String(), "doxlab experiment web --resume "+id, "the ID and how to resume are said at the start")
	require.NoError(t, e.BeginRun(ctx, st, id+"-fiber", "experiment:web", "fiber", map[string]any{"experiment": id}))

	for _, bad := range []string{"nosuch", id + "-fiber", id[:len(id)-2]} {
		e := &Env{Store: dsn, Log: &log, Resume: bad}
		err := e.checkResume(ctx, st)
		require.ErrorContains(t, err, "no experiment", bad)
		require.ErrorContains(t, err, "the closest it holds: "+id, bad)
	}
	require.NoError(t, (&Env{Store: dsn, Resume: id}).checkResume(ctx, st))
	_, err = (&Env{Store: dsn, Log: &log, Resume: id}).ExperimentID("dnsrtt")
	require.ErrorContains(t, err, "is not a dns-rtt experiment")
}

func TestResumeRefusesAnotherDesign(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "s.db"))
	require.NoError(t, err)
	defer st.Close()
	var log bytes.Buffer
	begun := &Env{Log: &log, Design: map[string]string{"repeat": "3", "pages": "o1"}}
	require.NoError(t, begun.BeginRun(ctx, st, "web-x-fiber", "experiment:web", "fiber", map[string]any{"experiment": "web-x"}))
	same := &Env{Log: &log, Resume: "web-x", Design: map[string]string{"repeat": "3", "pages": "o1"}}
	require.NoError(t, same.BeginRun(ctx, st, "web-x-fiber", "experiment:web", "fiber", map[string]any{"experiment": "web-x"}))

	other := &Env{Log: &log, Resume: "web-x", Design: map[string]string{"repeat": "5", "pages": "o1", "h3": "0rtt"}}
	err = other.BeginRun(ctx, st, "web-x-fiber", "experiment:web", "fiber", map[string]any{"experiment": "web-x"})
	require.ErrorIs(t, err, ErrDesignChanged)
	require.ErrorContains(t, err, `repeat: "3" → "5"; h3: (unset) → "0rtt"`)

	other.Force = true
	require.NoError(t, other.BeginRun(ctx, st, "web-x-fiber", "experiment:web", "fiber", map[string]any{"experiment": "web-x"}))
	forced := 0
	require.NoError(t, st.Results(ctx, "web-x", ForcedKind, func(string, []byte) error { forced++; return nil }))
	require.Equal(t, 1, forced, "a forced resume is recorded with the run")
}

// TestResumeRefusesAnotherMethod: a run records its experiment's method
// version; resuming it with another one is refused unless forced, and
// the forced resume is recorded; a run from before methods were
// recorded (0) goes on.
func TestResumeRefusesAnotherMethod(t *testing.T) {
	Register(Info{Name: "method-test", Method: 2, Measures: "m", Reproduces: "r", New: func() Experiment { return nil }})
	t.Cleanup(func() { // the registry is the binary's: leave it as found
		registryMu.Lock()
		defer registryMu.Unlock()
		registry = slices.DeleteFunc(registry, func(i Info) bool { return i.Name == "method-test" })
	})
	setMethod := func(v int) {
		registryMu.Lock()
		defer registryMu.Unlock()
		for i := range registry {
			if registry[i].Name == "method-test" {
				registry[i].Method = v
			}
		}
	}
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "s.db"))
	require.NoError(t, err)
	defer st.Close()
	var log bytes.Buffer
	e := &Env{Log: &log}
	require.NoError(t, e.BeginRun(ctx, st, "mt-x-fiber", "experiment:method-test", "fiber", map[string]any{}))
	run, err := st.Run(ctx, "mt-x-fiber")
	require.NoError(t, err)
	require.Equal(t, 2, run.Method, "stored with the run")
	require.Zero(t, MethodOf("measure"), "no experiment's kind")

	setMethod(3)
	err = (&Env{Log: &log, Resume: "mt-x"}).BeginRun(ctx, st, "mt-x-fiber", "experiment:method-test", "fiber", map[string]any{})
	require.ErrorIs(t, err, ErrMethodChanged)
	require.ErrorContains(t, err, "method v2, this doxlab's is v3")
	require.NoError(t, (&Env{Log: &log, Resume: "mt-x", Force: true}).BeginRun(ctx, st, "mt-x-fiber", "experiment:method-test", "fiber", map[string]any{}))
	var forced []string
	require.NoError(t, st.Results(ctx, "mt-x", ForcedKind, func(_ string, raw []byte) error { forced = append(forced, string(raw)); return nil }))
	require.Len(t, forced, 1)
	require.Contains(t, forced[0], "method: v2 → v3")

	// A run stored before methods were recorded.
	old := store.NewRun("experiment:method-test", "fiber", map[string]any{})
	old.ID = "mt-y-fiber"
	require.NoError(t, st.BeginRun(ctx, old))
	require.NoError(t, (&Env{Log: &log, Resume: "mt-y"}).BeginRun(ctx, st, "mt-y-fiber", "experiment:method-test", "fiber", map[string]any{}))
}

// TestRegisterNeedsAMethod: an experiment without a method version is a
// programming error, found when the binary starts.
func TestRegisterNeedsAMethod(t *testing.T) {
	require.PanicsWithValue(t, "experiment no-method declares no method version", func() {
		Register(Info{Name: "no-method", Measures: "m", Reproduces: "r", New: func() Experiment { return nil }})
	})
}

// TestBadDesignKeepsItsMessage: an error marked as a bad design says
// what it said, and is both itself and ErrBadDesign; nil stays nil.
func TestBadDesignKeepsItsMessage(t *testing.T) {
	cause := fmt.Errorf("unknown profile %q", "moon")
	err := BadDesign(cause)
	require.EqualError(t, err, `unknown profile "moon"`)
	require.ErrorIs(t, err, ErrBadDesign)
	require.ErrorIs(t, err, cause)
	require.NoError(t, BadDesign(nil))
	require.NotErrorIs(t, cause, ErrBadDesign)
}
