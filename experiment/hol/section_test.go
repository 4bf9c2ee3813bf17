package hol

import (
	"encoding/csv"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSectionDrawsTheDelayedRun: Fig. 2 is a figure per profile of the
// delayed run's answered queries, each at its send time (s) and
// resolution time, marked when the server delayed it; the baseline run
// and failed queries are not on it. The table has a row per profile and
// transport, with the baseline's interval and its n.
func TestSectionDrawsTheDelayedRun(t *testing.T) {
	q := func(prof, tr, run string, delayed bool, send, ms float64, status string) *Query {
		return &Query{Profile: prof, Transport: tr, Run: run, Delayed: delayed, SendMs: send, ResolveMs: ms, Status: status}
	}
	qs := Queries{
		q("fiber", "udp", "baseline", false, 0, 1, "ok"), q("fiber", "udp", "baseline", false, 10, 2, "ok"),
		q("fiber", "udp", "delayed", true, 0, 1001, "ok"), q("fiber", "udp", "delayed", false, 1500, 3, "ok"),
		q("fiber", "udp", "delayed", false, 2500, 0, "timeout"),
		q("fiber", "dot-inorder", "baseline", false, 0, 5, "ok"),
		q("fiber", "dot-inorder", "delayed", true, 250, 1005, "ok"), q("fiber", "dot-inorder", "delayed", false, 300, 955, "ok"),
		q("dsl", "udp", "delayed", false, 100, 40, "ok"),
		q("dsl", "udp", "baseline", false, 100, 40, "ok"),
	}
	dir := t.TempDir()
	sec, err := qs.Section(dir)
	require.NoError(t, err)
	require.Equal(t, "hol", sec.ID)
	rows := map[string][][]string{}
	for _, f := range sec.Figures {
		r, err := os.Open(filepath.Join(dir, f.CSV))
		require.NoError(t, err)
		all, err := csv.NewReader(r).ReadAll()
		r.Close()
		require.NoError(t, err)
		rows[f.Name] = all
	}
	require.Len(t, rows, 2, "a figure per profile")
	require.Equal(t, [][]string{
		{"transport", "sent (s)", "resolution time (ms)", "delayed by the server"},
		{"udp", "0", "1001", "true"}, {"udp", "1.5", "3", "false"},
		{"dot-inorder", "0.25", "1005", "true"}, {"dot-inorder", "0.3", "955", "false"},
	}, rows["hol-fiber"])
	require.Equal(t, [][]string{{"transport", "sent (s)", "resolution time (ms)", "delayed by the server"}, {"udp", "0.1", "40", "false"}}, rows["hol-dsl"])

	table := string(sec.Table)
	require.Equal(t, 3, strings.Count(table, "<tr><td"), "a row per profile and transport: %s", table)
	require.Contains(t, table, `<td class="l">dot-inorder</td><td>5.00</td><td>[±∞] (1)</td><td>1</td><td>1</td>`, "one query of its own delayed, one knocked on")
	var text strings.Builder
	require.NoError(t, qs.WriteTable(&text))
	require.Contains(t, text.String(), "knock-on: not delayed itself, but slower than the baseline median by more than")
	require.Equal(t, 1+1+3, strings.Count(text.String(), "\n"), "the rule, the head and a line per row")
}
