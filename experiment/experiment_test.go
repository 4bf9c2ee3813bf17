package experiment_test

import (
	"context"
	"flag"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/experiment"
	_ "github.com/doxlab/doxlab/experiment/all"
	"github.com/doxlab/doxlab/store"
)

type fake struct {
	experiment.Env
	Repeat int
	Pages  []string
}

func (f *fake) Flags(fs *flag.FlagSet) {
	fs.IntVar(&f.Repeat, "repeat", 20, "")
	experiment.ListVar(fs, &f.Pages, "pages", []string{"a", "b", "c"}, "")
}
func (f *fake) Quick()                              { f.Repeat, f.Pages = 3, []string{"a"} }
func (f *fake) Run(context.Context) (string, error) { return "", nil }
func (f *fake) Load(context.Context, *store.Store, string) (experiment.Results, error) {
	return nil, nil
}

// TestApplyQuick: --quick shrinks what the command line left alone and
// keeps what it set.
func TestApplyQuick(t *testing.T) {
	f := new(fake)
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	f.Flags(fs)
	require.NoError(t, fs.Parse([]string{"--repeat", "7"}))
	require.NoError(t, experiment.ApplyQuick(f, fs))
	require.Equal(t, 7, f.Repeat, "explicit wins")
	require.Equal(t, []string{"a"}, f.Pages, "quick's")
}

// TestRegistry: every experiment registers once, in the papers' order.
func TestRegistry(t *testing.T) {
	require.Equal(t, []string{"dns-rtt", "web", "hol", "amplification", "overhead"}, experiment.Names())
	for _, i := range experiment.Registered() {
		e := i.New()
		fs := flag.NewFlagSet(i.Name, flag.ContinueOnError)
		e.Environment().Flags(fs, i.Resumable)
		e.Flags(fs)
		require.NoError(t, fs.Parse(nil), i.Name)
		require.NotEmpty(t, i.Doc)
		require.NotEmpty(t, i.Quick)
	}
}

// TestLoadEmptyStore: every experiment loads from a store with nothing of
// it, counts nothing and still writes its table's header.
func TestLoadEmptyStore(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "s.db"))
	require.NoError(t, err)
	defer st.Close()
	for _, i := range experiment.Registered() {
		res, err := i.New().Load(ctx, st, "")
		require.NoError(t, err, i.Name)
		n, unit := res.Count()
		require.Zero(t, n, i.Name)
		require.NotEmpty(t, unit, i.Name)
		var b strings.Builder
		require.NoError(t, res.WriteTable(&b), i.Name)
		require.NotEmpty(t, b.String(), i.Name)
	}
}
