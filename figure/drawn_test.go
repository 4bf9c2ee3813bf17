package figure

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/buildinfo"
)

// TestFigureDrawnAgainOnlyWhenChanged: a figure drawn again into its
// directory from the same data keeps the files drawn before (they are
// not written); one whose data changed, or whose files changed or went
// missing since, or whose record of them is gone, is drawn whole again.
func TestFigureDrawnAgainOnlyWhenChanged(t *testing.T) {
	if buildinfo.BinaryID() == "" {
		t.Skip("this binary's build ID cannot be read: every figure is drawn")
	}
	dir := t.TempDir()
	draw := func(values ...float64) {
		t.Helper()
		p, d, err := CDF([]*Series{{Label: "a", Values: values}}, "t", "x", false)
		require.NoError(t, err)
		set := &Set{Dir: dir}
		require.NoError(t, set.Add(p, "f", "heading", "", CDFWidth, CDFHeight, d))
		require.NotEmpty(t, set.Figures[0].SVG)
	}
	others := []string{"f.pdf", "f.png", "f-1col.svg", "f-1col.pdf", "f-1col.png"}
	old := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	age := func() { // every file but the page's SVG dated old
		for _, f := range others {
			require.NoError(t, os.Chtimes(filepath.Join(dir, f), old, old))
		}
	}
	kept := func() (n int) {
		for _, f := range others {
			st, err := os.Stat(filepath.Join(dir, f))
			require.NoError(t, err)
			if st.ModTime().Equal(old) {
				n++
			}
		}
		return n
	}
	draw(1, 2, 3)
	png, err := os.ReadFile(filepath.Join(dir, "f.png"))
	require.NoError(t, err)
	age()
	draw(1, 2, 3)
	require.Equal(t, len(others), kept(), "the same data: nothing drawn again")

	draw(1, 2, 4)
	require.Zero(t, kept(), "other data: every file drawn again")
	changed, err := os.ReadFile(filepath.Join(dir, "f.png"))
	require.NoError(t, err)
	require.NotEqual(t, png, changed)

	draw(1, 2, 3)
	age()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "f-1col.pdf"), []byte("edited"), 0o644))
	draw(1, 2, 3)
	require.Zero(t, kept(), "a file changed since: drawn again")
	pdf, err := os.ReadFile(filepath.Join(dir, "f-1col.pdf"))
	require.NoError(t, err)
	require.Contains(t, string(pdf[:8]), "%PDF-")

	age()
	require.NoError(t, os.Remove(filepath.Join(dir, "f-1col.png")))
	draw(1, 2, 3)
	require.FileExists(t, filepath.Join(dir, "f-1col.png"), "a file gone: drawn again")

	age()
	require.NoError(t, os.RemoveAll(filepath.Join(dir, drawnDir)))
	draw(1, 2, 3)
	require.Zero(t, kept(), "no record of what was drawn: drawn again")
}
