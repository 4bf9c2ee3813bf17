package store

import (
	"context"
	"database/sql"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/doxlab/doxlab/measure"
	"github.com/doxlab/doxlab/transport"
)

// TestThousandths: a timing is kept as its nearest whole number of
// thousandths and read back as the double float64(k)/1000 gives, which
// is the timing doxlab measured (it rounds to them); none is NULL, and
// one past 32 bits is refused before it is written.
func TestThousandths(t *testing.T) {
	for v, want := range map[float64]int64{0: 0, 0.001: 1, 12.345: 12345, 14.95: 14950, 2147483.647: math.MaxInt32, -0.25: -250, 1.0005: 1001} {
		got := thousandths(sql.NullFloat64{Float64: v, Valid: true})
		require.True(t, got.Valid, "%v", v)
		require.Equal(t, want, got.Int64, "%v", v)
		if k, ok := millis(v); ok {
			require.Equal(t, v, float64(k)/1000, "%v: read back as it was", v)
		}
	}
	require.False(t, thousandths(sql.NullFloat64{Float64: math.NaN(), Valid: true}).Valid)
	require.False(t, thousandths(sql.NullFloat64{Float64: 2147483.648, Valid: true}).Valid)
	require.False(t, thousandths(sql.NullFloat64{}).Valid)

	s := openTemp(t)
	ctx := context.Background()
	require.NoError(t, s.BeginRun(ctx, Run{ID: "a", Kind: "measure", StartedAt: time.Unix(0, 0)}))
	long := sampleTimed(1, 2200000) // 36 minutes and 40 seconds
	err := s.Write(ctx, "a", long)
	require.ErrorIs(t, err, ErrOutOfRange)
	require.ErrorContains(t, err, "total_ms is 2.2e+06, past the 2147484 a column keeps")
	n, err := s.Measured(ctx, "a")
	require.NoError(t, err)
	require.Zero(t, n, "refused whole")
}

// sampleTimed is sample rep of a run, total totalMs.
func sampleTimed(rep int, totalMs float64) *measure.Sample {
	return &measure.Sample{Task: measure.Task{URL: "udp://t:53", Transport: "udp", Condition: "fresh", Rep: rep}, Start: time.Unix(int64(rep), 0),
		Status: transport.StatusOK, Measure: &transport.Record{Status: transport.StatusOK, Rcode: "NOERROR",
			Timing: transport.Timing{TotalMs: totalMs, HandshakeMs: totalMs / 4, WireMs: totalMs / 2}},
		Probe: &measure.ProbeResult{RTTMs: 5.125}, RTTs: &measure.InRTTs{Handshake: 1.002, Resolve: 0.998, Total: 2}}
}

// upgradeToThousandths: a store of schema 15, its timings doubles, is
// upgraded to 16: every timing measured as doxlab measures them reads
// back the same double, field for field, from rows and from blocks
// sealed again; a timing of another precision (written by hand, or by
// a tool) is rounded to the microsecond, one past 32 bits is NULL in
// its column and whole in its record, and the old blocks are gone. On
// PostgreSQL a worker's role keeps its grants on the rebuilt table and
// view, and gains none.
func upgradeToThousandths(t *testing.T, dsn string) {
	ctx := context.Background()
	s, err := Open(ctx, dsn)
	require.NoError(t, err)
	require.NoError(t, s.BeginRun(ctx, Run{ID: "a", Kind: "measure", StartedAt: time.Unix(0, 0)}))
	for i := range 40 {
		x := blockSample(2 * i) // timings as doxlab rounds them
		if i%5 == 3 {
			x = sampleTimed(2*i, float64(int64(i)*1234567)/1000)
		}
		require.NoError(t, s.Write(ctx, "a", x))
	}
	require.NoError(t, s.Seal(ctx, "a"))
	before := fromRows(t, s, Filter{})

	// Schema 15's table, the same rows in it as 15 kept them, and two
	// timings no doxlab measured: a tenth of a microsecond, and a
	// thousand hours.
	view := func(ms string) string { return milliSQL("c." + thousandthsOf[ms]) }
	cols := selectList("c.", sampleColumnsV15, func(c string) string {
		if _, ok := thousandthsOf[c]; ok {
			return view(c)
		}
		return ""
	})
	for _, stmt := range []string{`DROP VIEW samples`,
		s.typed(strings.Replace(sampleColsV15, "sample_cols", "sample_cols15", 1)),
		`INSERT INTO sample_cols15 (id, run, k, task_key, ` + strings.Join(sampleColumnsV15, ", ") + `, z) SELECT c.id, c.run, c.k, c.task_key, ` + strings.Join(cols, ", ") + `, c.z FROM sample_cols c`,
		`DROP TABLE sample_cols`, `ALTER TABLE sample_cols15 RENAME TO sample_cols`,
		`UPDATE sample_cols SET total_ms = 12.3456789 WHERE rep = 2`, `UPDATE sample_cols SET total_ms = 3600000000 WHERE rep = 4`,
		`UPDATE schema_version SET version = 15`} {
		_, err := s.db.ExecContext(ctx, stmt)
		require.NoError(t, err, stmt)
	}
	if s.postgres {
		// A campaign's worker's role, granted on schema 15's table and
		// view (here a stand-in), as campaign grant leaves it.
		for _, stmt := range []string{`ALTER INDEX sample_cols15_pkey RENAME TO sample_cols_pkey`,
			`CREATE VIEW samples AS SELECT id, run FROM sample_cols`, `CREATE ROLE w_thousandths`,
			`GRANT SELECT, INSERT ON samples, sample_cols, results TO w_thousandths`, `GRANT SELECT ON runs TO w_thousandths`} {
			_, err := s.db.ExecContext(ctx, stmt)
			require.NoError(t, err, stmt)
		}
	}
	require.NoError(t, s.Close())

	s, err = Open(ctx, dsn)
	require.NoError(t, err)
	defer s.Close()
	var v, blocks int
	require.NoError(t, s.db.QueryRowContext(ctx, `SELECT version FROM schema_version`).Scan(&v))
	require.NoError(t, s.db.QueryRowContext(ctx, `SELECT count(*) FROM sample_blocks`).Scan(&blocks))
	require.Equal(t, []int{SchemaVersion, 0}, []int{v, blocks}, "upgraded; the blocks of milliseconds gone")
	if s.postgres {
		// The rebuilt table and view keep what the worker's role held:
		// dropped with the old ones, the grants are given back.
		for _, c := range []struct {
			relation, privilege string
			held                bool
		}{{"sample_cols", "INSERT", true}, {"sample_cols", "SELECT", true}, {"samples", "SELECT", true}, {"samples", "INSERT", true},
			{"runs", "SELECT", true}, {"runs", "UPDATE", false}, {"sample_cols", "DELETE", false}, {"sample_blocks", "SELECT", false}} {
			var held bool
			require.NoError(t, s.db.QueryRowContext(ctx, `SELECT has_table_privilege('w_thousandths', $1, $2)`, c.relation, c.privilege).Scan(&held))
			require.Equal(t, c.held, held, "%s on %s", c.privilege, c.relation)
		}
	}
	after := fromRows(t, s, Filter{})
	require.Len(t, after, len(before))
	var odd []Row
	require.NoError(t, s.EachRow(ctx, Filter{}, func(r *Row) error {
		if r.Rep == 2 || r.Rep == 4 {
			c := *r
			odd = append(odd, c)
		}
		return nil
	}))
	require.Len(t, odd, 2)
	require.Equal(t, 12.346, *odd[0].TotalMs, "to the microsecond")
	require.Nil(t, odd[1].TotalMs, "past 32 bits: NULL")
	raw, err := s.Raw(ctx, "a", odd[1].Key)
	require.NoError(t, err)
	require.Contains(t, string(raw), `"total_ms":`, "the record whole")
	for i := range before {
		if i != 1 && i != 2 {
			require.Equal(t, before[i], after[i], "row %d", i)
		}
	}
	require.NoError(t, s.Seal(ctx, "a"))
	require.Equal(t, after, timingTexts(t, s, Filter{}), "sealed again, the blocks are the rows")
	var inView float64
	require.NoError(t, s.db.QueryRowContext(ctx, `SELECT total_ms FROM samples WHERE rep = 2`).Scan(&inView))
	require.Equal(t, 12.346, inView, "the view gives milliseconds")
}

func TestUpgradeToThousandths(t *testing.T) {
	upgradeToThousandths(t, filepath.Join(t.TempDir(), "s.db"))
}

func TestPostgresUpgradeToThousandths(t *testing.T) {
	upgradeToThousandths(t, testutil.StartPostgres(t))
}
