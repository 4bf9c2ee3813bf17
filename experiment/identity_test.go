package experiment

import (
	"bytes"
	"context"
	"path/filepath"
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
