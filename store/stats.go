package store

import (
	"context"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"

	"github.com/doxlab/doxlab/internal/printable"
)

// Stats is what a store holds and what it costs on disk: per table its
// rows and octets (indexes included), per result kind its rows and the
// octets of its records as stored (compressed), and the DNS samples'
// octets each.
type Stats struct {
	Engine string       `json:"engine"` // sqlite or postgres
	Tables []TableStats `json:"tables"`
	Kinds  []KindStats  `json:"kinds"`
	// Octets is the whole store's; Samples the DNS samples, and
	// OctetsPerSample what sample_cols (records and indexes included)
	// and sample_blocks take for each.
	Octets          int64   `json:"octets"`
	Samples         int64   `json:"samples"`
	OctetsPerSample float64 `json:"octets_per_sample"`
	// Unsealed are the DNS samples in no block a report reads: a first
	// report reads them from their rows until doxlab store seal seals
	// them.
	Unsealed int64 `json:"unsealed,omitempty"`
}

// TableStats is one table's size.
type TableStats struct {
	Name   string `json:"name"`
	Rows   int64  `json:"rows"`
	Octets int64  `json:"octets"` // its pages or relation, with its indexes
}

// KindStats is one result kind's share of the results table.
type KindStats struct {
	Kind        string  `json:"kind"`
	Rows        int64   `json:"rows"`
	RawOctets   int64   `json:"raw_octets"`   // the records' length as stored (compressed JSON), before any page overhead
	BriefOctets int64   `json:"brief_octets"` // the briefs' (schema 14), likewise
	OctetsEach  float64 `json:"octets_each"`  // record and brief
	TableOctets int64   `json:"table_octets"` // its share of the results table, by stored octets
	// Unbriefed are the results of a kind written with briefs that have
	// no current one (written before, or by another analysis): a report
	// reads them whole until doxlab store brief briefs them.
	Unbriefed int64 `json:"unbriefed,omitempty"`
}

// statsTables are doxlab's tables, in the order stats lists them.
var statsTables = []string{"runs", "sample_cols", "results", "summaries", "sample_blocks"}

// Stats measures the store.
func (s *Store) Stats(ctx context.Context) (*Stats, error) {
	st := &Stats{Engine: "sqlite", Kinds: []KindStats{}} // [] in JSON when there are none
	if s.postgres {
		st.Engine = "postgres"
	}
	octets, err := s.tableOctets(ctx)
	if err != nil {
		return nil, fmt.Errorf("store stats: %w", err)
	}
	for _, t := range statsTables {
		var n int64
		if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+t).Scan(&n); err != nil {
			return nil, fmt.Errorf("store stats: %s: %w", t, err)
		}
		st.Tables = append(st.Tables, TableStats{Name: t, Rows: n, Octets: octets[t]})
	}
	for _, o := range octets {
		st.Octets += o
	}
	st.Samples = st.Tables[1].Rows
	if st.Samples > 0 {
		st.OctetsPerSample = float64(octets["sample_cols"]+octets["sample_blocks"]) / float64(st.Samples)
	}
	if st.Unsealed, err = s.unsealed(ctx); err != nil {
		return nil, fmt.Errorf("store stats: blocks: %w", err)
	}
	rows, err := s.db.QueryContext(ctx, `SELECT kind, COUNT(*), COALESCE(SUM(LENGTH(z)), 0), COALESCE(SUM(LENGTH(brief)), 0) FROM results GROUP BY kind`)
	if err != nil {
		return nil, fmt.Errorf("store stats: results: %w", err)
	}
	defer rows.Close()
	var raw int64
	for rows.Next() {
		var k KindStats
		if err := rows.Scan(&k.Kind, &k.Rows, &k.RawOctets, &k.BriefOctets); err != nil {
			return nil, err
		}
		k.OctetsEach = float64(k.RawOctets+k.BriefOctets) / float64(max(k.Rows, 1))
		raw += k.RawOctets + k.BriefOctets
		st.Kinds = append(st.Kinds, k)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for i := range st.Kinds {
		if raw > 0 {
			st.Kinds[i].TableOctets = int64(float64(octets["results"]) * float64(st.Kinds[i].RawOctets+st.Kinds[i].BriefOctets) / float64(raw))
		}
	}
	slices.SortFunc(st.Kinds, func(a, b KindStats) int { return int(b.RawOctets - a.RawOctets) })
	for i := range st.Kinds {
		b := briefFor(Kind(st.Kinds[i].Kind))
		if b == nil {
			continue
		}
		q := s.rebind(`SELECT COUNT(*) FROM results WHERE kind = ? AND ` + s.staleBrief())
		if err := s.db.QueryRowContext(ctx, q, st.Kinds[i].Kind, b.hexHead()).Scan(&st.Kinds[i].Unbriefed); err != nil {
			return nil, fmt.Errorf("store stats: briefs: %w", err)
		}
	}
	return st, nil
}

// tableOctets is each table's size on disk with its indexes: SQLite's
// dbstat pages (an index counts for its table), PostgreSQL's total
// relation size (TOAST and indexes included). Tables that are not
// doxlab's (River's queue) are counted under their own names.
func (s *Store) tableOctets(ctx context.Context) (map[string]int64, error) {
	q := `SELECT COALESCE(m.tbl_name, d.name), SUM(d.pgsize) FROM dbstat d LEFT JOIN sqlite_schema m ON m.name = d.name GROUP BY 1`
	if s.postgres {
		q = `SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
			WHERE c.relkind = 'r' AND n.nspname = current_schema()`
	}
	rows, err := s.db.QueryContext(ctx, q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var name string
		var n int64
		if err := rows.Scan(&name, &n); err != nil {
			return nil, err
		}
		out[name] += n
	}
	return out, rows.Err()
}

// Write prints the stats as a table: octets per sample, per table and per
// result kind.
func (st *Stats) Write(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%s store: %s in all; %d DNS samples, %.0f octets each (sample_cols, records, indexes and blocks included)\n\n", st.Engine, size(st.Octets), st.Samples, st.OctetsPerSample)
	fmt.Fprintf(tw, "table\trows\toctets\toctets/row\t\n")
	for _, t := range st.Tables {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t\n", t.Name, t.Rows, size(t.Octets), perRow(t.Octets, t.Rows))
	}
	if len(st.Kinds) > 0 {
		fmt.Fprintf(tw, "\nresult kind\trows\trecords\tbriefs\toctets/row\t\n")
		for _, k := range st.Kinds {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%.0f\t\n", printable.String(k.Kind), k.Rows, size(k.RawOctets), size(k.BriefOctets), k.OctetsEach)
		}
	}
	return tw.Flush()
}

func perRow(octets, rows int64) string {
	if rows == 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f", float64(octets)/float64(rows))
}

// size spells octets for a reader: 4096, 12.3 kB, 1.38 GB.
func size(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.2f GB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	case n >= 1e4:
		return fmt.Sprintf("%.1f kB", float64(n)/1e3)
	}
	return fmt.Sprintf("%d", n)
}
