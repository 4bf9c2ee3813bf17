// Package looptest takes an experiment through its whole path on the
// loopback net, as each experiment's TestRunOnLoopback does: run, store,
// load, table, section, and a resume that measures nothing again. The
// tests assert the rest, what their experiment proves without a link.
package looptest

import (
	"context"
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/experiment"
	"github.com/doxlab/doxlab/store"
)

// Run runs e (its Env on the loopback net) and returns what it stored,
// loaded, with its open store (closed when the test ends) and its ID;
// the results' table and section are drawn without an error.
func Run(t *testing.T, e experiment.Experiment) (experiment.Results, *store.Store, string) {
	t.Helper()
	ctx := context.Background()
	require.Equal(t, experiment.NetLoopback, e.Environment().Net)
	id, err := e.Run(ctx)
	require.NoError(t, err)
	st, err := store.Open(ctx, e.Environment().Store)
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	res, err := e.Load(ctx, st, id+"-")
	require.NoError(t, err)
	require.NoError(t, res.WriteTable(io.Discard))
	_, err = res.Section(t.TempDir())
	require.NoError(t, err)
	return res, st, id
}

// NothingAgain runs resumed, the experiment of id resumed, and checks
// that it measured nothing: the store holds as much as after the run.
func NothingAgain(t *testing.T, resumed experiment.Experiment, st *store.Store, id string, before experiment.Results) {
	t.Helper()
	require.Equal(t, id, resumed.Environment().Resume)
	_, err := resumed.Run(context.Background())
	require.NoError(t, err)
	after, err := resumed.Load(context.Background(), st, id+"-")
	require.NoError(t, err)
	n, unit := before.Count()
	m, _ := after.Count()
	require.Equal(t, n, m, "%s: a finished run resumed measures nothing", unit)
}
