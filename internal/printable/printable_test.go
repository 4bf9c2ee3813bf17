package printable

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestStringEscapesControlCharacters(t *testing.T) {
	require.Equal(t, "fra1", String("fra1"))
	require.Equal(t, `evil\x1b]0;pwned\x07 name`, String("evil\x1b]0;pwned\a name"))
	require.Equal(t, `a\x0ab\x7fc\x9bd`, String("a\nb\x7fc\u009bd"))
	require.Equal(t, "Zürich, CH ✓", String("Zürich, CH ✓"))
}
