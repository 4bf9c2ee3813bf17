package server_test

import (
	"context"
	"testing"
	"time"

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

// TestRecordLogAwait: a wait returns once the records since its mark are
// enough, as each Add arrives from another goroutine (a server's), and
// at its context's end with those there are.
func TestRecordLogAwait(t *testing.T) {
	var l server.RecordLog
	l.Add(&server.Record{QName: "before."})
	m := l.Mark()
	go func() {
		for _, q := range []string{"a.", "b.", "c."} {
			time.Sleep(5 * time.Millisecond)
			l.Add(&server.Record{QName: q})
		}
	}()
	calls := 0
	got, ok := l.Await(context.Background(), m, func(recs []*server.Record) bool {
		calls++
		return len(recs) > 0 && recs[len(recs)-1].QName == "b."
	})
	require.True(t, ok)
	require.Equal(t, []string{"a.", "b."}, qnames(got), "from the mark, up to the record awaited")
	require.LessOrEqual(t, calls, 3, "asked again only when a record came")

	// Enough already: no wait.
	got, ok = l.Await(context.Background(), 0, func([]*server.Record) bool { return true })
	require.True(t, ok)
	require.Equal(t, "before.", got[0].QName)

	// Never enough: the context's end returns what there is.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	got, ok = l.Await(ctx, m, func([]*server.Record) bool { return false })
	require.False(t, ok)
	require.Equal(t, []string{"a.", "b.", "c."}, qnames(got))
}

func qnames(recs []*server.Record) []string {
	var out []string
	for _, r := range recs {
		out = append(out, r.QName)
	}
	return out
}
