package sqliteread_test

import (
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite"

	"github.com/doxlab/doxlab/store/internal/sqliteread"
)

// db is a database written through database/sql, as the store writes.
func db(t *testing.T) string {
	path := filepath.Join(t.TempDir(), "t.db")
	w, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)")
	require.NoError(t, err)
	t.Cleanup(func() { w.Close() })
	_, err = w.Exec(`CREATE TABLE t (id INTEGER PRIMARY KEY, n BIGINT, x DOUBLE PRECISION, s TEXT, b BLOB);
		INSERT INTO t VALUES (1, 7, 1.5, 'one', x'00ff'), (2, NULL, NULL, NULL, NULL), (3, -3, 2, 'three', x'')`)
	require.NoError(t, err)
	return "file:" + path + "?_pragma=busy_timeout(5000)"
}

// TestReadsWhatDatabaseSQLWrote: each value as it is typed, NULL as
// NULL, text and blobs as octets, parameters bound in order.
func TestReadsWhatDatabaseSQLWrote(t *testing.T) {
	c, err := sqliteread.Open(db(t), time.Second)
	require.NoError(t, err)
	defer c.Close()
	rows, err := c.Query(`SELECT id, n, x, s, b FROM t WHERE id >= ? AND s IS NOT ? ORDER BY id`, int64(1), "three")
	require.NoError(t, err)
	defer rows.Close()
	require.Equal(t, "id", rows.Name(0))
	type row struct {
		types []int
		n     int64
		x     float64
		s, b  string
	}
	var got []row
	for rows.Next() {
		r := row{n: rows.Value(1).Int64(), x: rows.Value(2).Float64(), s: string(rows.Value(3).Bytes()), b: string(rows.Value(4).Bytes())}
		for i := range 5 {
			r.types = append(r.types, rows.Value(i).Type()) // after the contents: read as octets, text is still text
		}
		got = append(got, r)
	}
	require.NoError(t, rows.Err())
	I, F, T, B, N := sqliteread.Integer, sqliteread.Float, sqliteread.Text, sqliteread.Blob, sqliteread.Null
	require.Equal(t, []row{
		{types: []int{I, I, F, T, B}, n: 7, x: 1.5, s: "one", b: "\x00\xff"},
		{types: []int{I, N, N, N, N}},
	}, got)
	require.False(t, rows.Next(), "past the end")
	require.NoError(t, rows.Close())
	require.NoError(t, rows.Close(), "twice")
}

// TestRefuses: a missing database is not created, and a bad query or
// argument is an error that says what.
func TestRefuses(t *testing.T) {
	_, err := sqliteread.Open("file:"+filepath.Join(t.TempDir(), "none.db"), time.Second)
	require.ErrorContains(t, err, "unable to open database file")
	c, err := sqliteread.Open(db(t), time.Second)
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Query(`SELECT missing FROM t`)
	require.EqualError(t, err, "sqlite: no such column: missing (1)")
	_, err = c.Query(`SELECT id FROM t WHERE x > ?`, 1.5)
	require.EqualError(t, err, "sqlite: argument 1: float64 is neither int64 nor string")
	rows, err := c.Query(`CREATE TABLE u (id)`)
	require.NoError(t, err, "prepared: the error comes with the step")
	require.False(t, rows.Next())
	require.ErrorContains(t, rows.Err(), "readonly")
	rows.Close()
}
