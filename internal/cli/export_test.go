package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/experiment/coalescing"
	"github.com/doxlab/doxlab/store"
)

// TestExportCoalescingLoadsAsATable: coalescing loads are a table like
// page loads, in CSV and in Parquet with a typed start time; a selection
// with no rows fails instead of writing a header alone.
func TestExportCoalescingLoadsAsATable(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db := filepath.Join(dir, "s.db")
	st, err := store.Open(ctx, db)
	require.NoError(t, err)
	run0 := store.NewRun("experiment:coalescing", "fiber", map[string]any{"experiment": "coalescing-x"})
	run0.ID = "coalescing-x-fiber"
	require.NoError(t, st.BeginRun(ctx, run0))
	start := time.Date(2026, 11, 26, 14, 0, 0, 123456000, time.UTC)
	for rep, status := range []string{"ok", "timeout"} {
		s := coalescing.Sample{Task: coalescing.Task{Profile: "fiber", Page: "wiki", DNS: "dnsstream", H3: "0rtt", Settings: "remembered", Rep: rep},
			Start: start.Add(time.Duration(rep) * time.Second), Status: status, PLTMs: 106.1, DNSMs: 16.9,
			Proof: coalescing.Proof{QUICHandshakes: 1, Lookups: 1, DNSOnPageConn: true, DNSEarly: true, PageUsed0RTT: true}}
		require.NoError(t, st.WriteResult(ctx, run0.ID, coalescing.Kind, s.Key(), s.Start, s))
	}
	st.Close()

	code, out, errOut := run("export", "--store", db, "--table", "coalescing")
	require.Equal(t, 0, code, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 3, out)
	require.True(t, strings.HasPrefix(lines[0], "run_id,started_at,setup,profile,page,dns,h3,settings,rep,status,error,plt_ms,dns_ms,quic_handshakes"), lines[0])
	require.True(t, strings.HasPrefix(lines[1], "coalescing-x-fiber,2026-11-26T14:00:00.123456Z,,fiber,wiki,dnsstream,0rtt,remembered,0,ok,,106.1,16.9,1,"), lines[1])
	require.Contains(t, lines[2], ",timeout,,,,1,", "a failed load has no PLT")

	pq := filepath.Join(dir, "c.parquet")
	code, _, errOut = run("export", "--store", db, "--table", "coalescing", "--format", "parquet", "--out", pq)
	require.Equal(t, 0, code, errOut)
	rows, err := parquet.ReadFile[coalescing.Row](pq)
	require.NoError(t, err)
	require.Len(t, rows, 2)
	require.Equal(t, start, rows[0].StartedAt)
	f, err := os.Open(pq)
	require.NoError(t, err)
	defer f.Close()
	info, err := f.Stat()
	require.NoError(t, err)
	pf, err := parquet.OpenFile(f, info.Size())
	require.NoError(t, err)
	col, ok := pf.Schema().Lookup("started_at")
	require.True(t, ok)
	require.Contains(t, col.Node.Type().LogicalType().String(), "TIMESTAMP", "a typed time, not a string")

	code, _, errOut = run("export", "--store", db, "--table", "loads")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "no loads in the store")
}
