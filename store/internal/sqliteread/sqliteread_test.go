package sqliteread_test

import (
	"context"
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

// TestReadsOneSnapshot: rows read while a writer commits are the
// database as it was when the read began (the export and the report
// read a store that workers still write), and the next query sees the
// writes.
func TestReadsOneSnapshot(t *testing.T) {
	dsn := db(t)
	w, err := sql.Open("sqlite", dsn)
	require.NoError(t, err)
	defer w.Close()
	c, err := sqliteread.Open(dsn, time.Second)
	require.NoError(t, err)
	defer c.Close()
	count := func() (n int) {
		rows, err := c.Query(`SELECT id FROM t ORDER BY id`)
		require.NoError(t, err)
		defer rows.Close()
		for rows.Next() {
			n++
		}
		require.NoError(t, rows.Err())
		return n
	}
	rows, err := c.Query(`SELECT id FROM t ORDER BY id`)
	require.NoError(t, err)
	var ids []int64
	for rows.Next() {
		ids = append(ids, rows.Value(0).Int64())
		if len(ids) == 1 {
			_, err := w.Exec(`INSERT INTO t (id, n) VALUES (4, 4), (5, 5); DELETE FROM t WHERE id = 3`)
			require.NoError(t, err, "a reader does not keep the writer out")
		}
	}
	require.NoError(t, rows.Err())
	require.NoError(t, rows.Close())
	require.Equal(t, []int64{1, 2, 3}, ids, "the rows as they were")
	require.Equal(t, 4, count(), "1, 2, 4 and 5 once the read is over")
}

// TestWaitsForTheWritersLock: a database in rollback-journal mode, which
// a writer locks whole (BEGIN EXCLUSIVE, as a commit does while it
// writes the pages): the reader waits for the lock up to its busy time,
// then says the database is locked.
func TestWaitsForTheWritersLock(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	w, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(DELETE)")
	require.NoError(t, err)
	defer w.Close()
	_, err = w.Exec(`CREATE TABLE t (id INTEGER PRIMARY KEY); INSERT INTO t VALUES (1)`)
	require.NoError(t, err)
	lock := func() *sql.Conn {
		conn, err := w.Conn(ctx)
		require.NoError(t, err)
		_, err = conn.ExecContext(ctx, `BEGIN EXCLUSIVE; INSERT INTO t VALUES (2)`)
		require.NoError(t, err)
		return conn
	}
	read := func(busy time.Duration) ([]int64, error) {
		c, err := sqliteread.Open("file:"+path, busy)
		require.NoError(t, err)
		defer c.Close()
		rows, err := c.Query(`SELECT id FROM t ORDER BY id`)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var ids []int64
		for rows.Next() {
			ids = append(ids, rows.Value(0).Int64())
		}
		return ids, rows.Err()
	}

	// Locked for good: the reader gives up and says why.
	conn := lock()
	_, err = read(0)
	require.ErrorContains(t, err, "database is locked")
	_, err = conn.ExecContext(ctx, `ROLLBACK`)
	require.NoError(t, err)
	conn.Close()

	// Locked for a moment: the reader waits it out.
	conn = lock()
	go func() {
		time.Sleep(100 * time.Millisecond)
		conn.ExecContext(ctx, `COMMIT`)
		conn.Close()
	}()
	ids, err := read(time.Minute)
	require.NoError(t, err)
	require.Equal(t, []int64{1, 2}, ids, "read after the commit")
}

// TestBindsNamedTypes: integers and text of named types (a duration, a
// store kind) bind as theirs; text keeps every octet, a NUL included.
func TestBindsNamedTypes(t *testing.T) {
	c, err := sqliteread.Open(db(t), time.Second)
	require.NoError(t, err)
	defer c.Close()
	type kind string
	rows, err := c.Query(`SELECT ?, typeof(?), ?, typeof(?), length(?)`, 3*time.Second, 3*time.Second, kind("a\x00b"), kind("k"), "é\x00")
	require.NoError(t, err)
	defer rows.Close()
	require.True(t, rows.Next())
	require.Equal(t, int64(3e9), rows.Value(0).Int64())
	require.Equal(t, "integer", string(rows.Value(1).Bytes()))
	require.Equal(t, []byte("a\x00b"), rows.Value(2).Bytes())
	require.Equal(t, "text", string(rows.Value(3).Bytes()))
	require.Equal(t, int64(1), rows.Value(4).Int64(), "SQLite's length stops at the NUL; the value does not")
	_, err = c.Query(`SELECT ?`, uint64(1))
	require.EqualError(t, err, "sqlite: argument 1: uint64 is neither int64 nor string")
}
