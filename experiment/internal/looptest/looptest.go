// Package looptest takes an experiment through its whole path on the
// loopback net, as each experiment's TestRunOnLoopback does: run, store,
// load, table, section, and a resume that measures nothing again. The
// tests assert the rest, what their experiment proves without a link.
package looptest

import (
	"bytes"
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
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
	var table strings.Builder
	require.NoError(t, res.WriteTable(&table))
	sec, err := res.Section(t.TempDir())
	require.NoError(t, err)
	Printed(t, "table", table.String())
	Printed(t, "section", string(sec.Intro)+string(sec.Table))
	return res, st, id
}

// unprinted is what a number or value looks like when it was printed
// without being checked: fmt's complaints, a nil, a float that is no
// number. A printed number comes from the statistics layer, which says
// "–" where there is none.
var unprinted = regexp.MustCompile(`NaN|[+-]?Inf\b|%!|<nil>|\[\]interface|map\[`)

// Printed fails where text, an experiment's table or report section,
// shows a value printed unchecked.
func Printed(t *testing.T, what, text string) {
	t.Helper()
	require.NotEmpty(t, strings.TrimSpace(text), "%s: empty", what)
	if m := unprinted.FindStringIndex(text); m != nil {
		from, to := max(m[0]-80, 0), min(m[1]+80, len(text))
		t.Fatalf("%s prints %q unchecked: ...%s...", what, text[m[0]:m[1]], text[from:to])
	}
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

// Exported is what doxlab export --table table --format parquet writes
// of the runs keep accepts, read back as an engine reads it: rows of T,
// the table's registered row type.
func Exported[T any](t *testing.T, st *store.Store, table string, keep func(runID string) bool) []T {
	t.Helper()
	tables := store.Exports()
	i := slices.IndexFunc(tables, func(x store.Export) bool { return x.Table == table })
	require.GreaterOrEqual(t, i, 0, "no table %s", table)
	var b bytes.Buffer
	n, err := tables[i].Write(context.Background(), st, keep, &b, store.Parquet)
	require.NoError(t, err)
	rows, err := parquet.Read[T](bytes.NewReader(b.Bytes()), int64(b.Len()))
	require.NoError(t, err)
	require.Len(t, rows, n, "the rows written")
	return rows
}
