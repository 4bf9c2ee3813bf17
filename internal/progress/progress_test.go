package progress

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPlainLinesEveryTenth(t *testing.T) {
	var b strings.Builder
	m := New(&b, "tasks")
	for i := 0; i <= 100; i++ {
		m.Update(i, 100)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	require.Len(t, lines, 11, b.String())
	require.Contains(t, lines[10], "progress: 100/100 tasks")
	require.Contains(t, lines[5], "ETA")
}

func TestLogLinesClearTheBar(t *testing.T) {
	var b strings.Builder
	m := New(&b, "loads")
	m.tty = true
	m.Update(1, 4)
	m.Write([]byte("web: fiber done\n"))
	m.Update(4, 4)
	out := b.String()
	require.Contains(t, out, "[=======                       ] 1/4 loads")
	require.Contains(t, out, "\r\x1b[Kweb: fiber done\n[=======", "the bar erased before the line, redrawn after")
	require.True(t, strings.HasSuffix(out, "4/4 loads, 0.0/min, ETA 0s\n") || strings.Contains(out, "] 4/4 loads"), out)
}
