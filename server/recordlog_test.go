package server_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/server"
)

// TestRecordLogSinceAMark: a sample takes the records added after its
// mark, a copy its later additions do not change.
func TestRecordLogSinceAMark(t *testing.T) {
	var l server.RecordLog
	l.Add(&server.Record{QName: "a."})
	m := l.Mark()
	require.Equal(t, 1, m)
	l.Add(&server.Record{QName: "b."})
	l.Add(&server.Record{QName: "c."})
	got := l.Since(m)
	require.Len(t, got, 2)
	require.Equal(t, "b.", got[0].QName)
	l.Add(&server.Record{QName: "d."})
	require.Len(t, got, 2, "a copy")
	require.Len(t, l.Since(0), 4)
	require.Empty(t, l.Since(l.Mark()))
}
