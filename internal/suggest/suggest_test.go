package suggest

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNearest(t *testing.T) {
	flags := []string{"profiles", "pages", "transports", "repeat", "store"}
	require.Equal(t, []string{"profiles"}, Nearest("profile", flags, 1, true))
	require.Equal(t, []string{"transports"}, Nearest("transport", flags, 1, true))
	require.Empty(t, Nearest("zzzzzzz", flags, 1, true))
	require.Equal(t, []string{"store"}, Nearest("zzzzz", []string{"store"}, 1, false), "without close, always the nearest")
	require.Equal(t, 3, Distance("kitten", "sitting"))
	require.Equal(t, " (it holds none)", Closest("x", nil))
	require.Equal(t, "; the closest it holds: hol-1", Closest("hol-2", []string{"hol-1"}))
}
