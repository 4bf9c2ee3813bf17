package experiment_test

import (
	"context"
	"flag"
	"os"
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

// TestListFlags: a list flag keeps its default until set, splits on
// commas and drops blanks; an explicit list also wins over --quick's;
// CheckValues names the value refused and what is allowed.
func TestListFlags(t *testing.T) {
	f := new(fake)
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	f.Flags(fs)
	require.Equal(t, []string{"a", "b", "c"}, f.Pages)
	require.NoError(t, fs.Parse([]string{"--pages", " b, ,c ,"}))
	require.Equal(t, []string{"b", "c"}, f.Pages)
	require.Equal(t, "b,c", fs.Lookup("pages").Value.String())
	require.NoError(t, experiment.ApplyQuick(f, fs))
	require.Equal(t, []string{"b", "c"}, f.Pages, "explicit wins over --quick")
	require.Equal(t, 3, f.Repeat, "quick's, where nothing was set")

	require.NoError(t, experiment.CheckValues("h3 mode", []string{"1rtt", "0rtt"}, "1rtt", "0rtt"))
	err := experiment.CheckValues("h3 mode", []string{"1rtt", "2rtt"}, "1rtt", "0rtt")
	require.EqualError(t, err, `h3 mode "2rtt" is not 1rtt or 0rtt`)
}

// TestRegistry: every experiment registers once, in the papers' order.
func TestRegistry(t *testing.T) {
	require.Equal(t, []string{"dns-rtt", "web", "coalescing", "hol", "amplification", "overhead", "privacy", "server-load"}, experiment.Names())
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

// TestDocsNameEveryFlag: docs/experiments has a page per registered
// experiment and none for an experiment that is gone; each page's flag
// table names every flag with its default, and the index the shared ones.
func TestDocsNameEveryFlag(t *testing.T) {
	dir := filepath.Join("..", "docs", "experiments")
	row := func(t *testing.T, page, flag string) string {
		t.Helper()
		for _, l := range strings.Split(page, "\n") {
			if strings.HasPrefix(l, "| `--"+flag+"` |") {
				return l
			}
		}
		t.Errorf("no row for --%s", flag)
		return ""
	}
	index, err := os.ReadFile(filepath.Join(dir, "README.md"))
	require.NoError(t, err)
	shared := flag.NewFlagSet("env", flag.ContinueOnError)
	new(experiment.Env).Flags(shared, true)
	shared.Bool("quick", false, "")
	shared.VisitAll(func(f *flag.Flag) { row(t, string(index), f.Name) })

	pages, err := filepath.Glob(filepath.Join(dir, "*.md"))
	require.NoError(t, err)
	for _, p := range pages {
		if name := strings.TrimSuffix(filepath.Base(p), ".md"); name != "README" {
			_, ok := experiment.Lookup(name)
			require.True(t, ok, "%s documents no registered experiment", p)
		}
	}
	for _, i := range experiment.Registered() {
		t.Run(i.Name, func(t *testing.T) {
			page, err := os.ReadFile(filepath.Join(dir, i.Name+".md"))
			require.NoError(t, err, "every experiment has a page")
			require.Contains(t, string(index), "`"+i.Name+"`", "the index lists it")
			fs := flag.NewFlagSet(i.Name, flag.ContinueOnError)
			i.New().Flags(fs)
			fs.VisitAll(func(f *flag.Flag) {
				r := row(t, string(page), f.Name)
				if d := f.DefValue; d != "" && d != "0" && d != "false" {
					require.Contains(t, r, "`"+d+"`", "--%s's default", f.Name)
				}
			})
		})
	}
}
