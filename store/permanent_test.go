package store_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/doxlab/doxlab/store"
)

// TestPermanentFromSQLite: the errors SQLite itself gives, classified:
// a constraint, a value of the wrong type for a rowid and a value past
// the length limit can never succeed, and are not tried again; a lock
// another writer holds (SQLITE_BUSY) is what Retry waits out.
func TestPermanentFromSQLite(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.db")
	s, err := store.Open(ctx, path)
	require.NoError(t, err)
	defer s.Close()
	db := s.DB()
	_, err = db.ExecContext(ctx, `CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT NOT NULL)`)
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, `INSERT INTO t VALUES (1, 'a')`)
	require.NoError(t, err)
	for name, q := range map[string]string{
		"a key twice":      `INSERT INTO t VALUES (1, 'b')`,
		"a null":           `INSERT INTO t VALUES (2, NULL)`,
		"text for a rowid": `INSERT INTO t VALUES ('x', 'c')`,
		"past the limit":   `SELECT length(zeroblob(2000000000))`,
	} {
		_, err := db.ExecContext(ctx, q)
		require.Error(t, err, name)
		require.True(t, store.Permanent(err), "%s: %v", name, err)
		require.True(t, store.Permanent(fmt.Errorf("store: writing: %w", err)), "%s, wrapped", name)
	}

	// Another connection holds the write lock; this one does not wait.
	other, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(0)")
	require.NoError(t, err)
	defer other.Close()
	lock, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	_, err = lock.ExecContext(ctx, `INSERT INTO t VALUES (3, 'held')`)
	require.NoError(t, err)
	_, busy := other.ExecContext(ctx, `INSERT INTO t VALUES (4, 'd')`)
	require.Error(t, busy)
	require.False(t, store.Permanent(busy), "%v", busy)

	// Retry waits it out, hearing of each failure, and writes once the
	// lock is let go.
	var waits []time.Duration
	tries := 0
	err = store.Retry(ctx, func() error {
		if tries++; tries == 3 {
			require.NoError(t, lock.Commit())
		}
		_, err := other.ExecContext(ctx, `INSERT INTO t VALUES (4, 'd')`)
		return err
	}, func(err error, wait time.Duration) {
		require.False(t, store.Permanent(err))
		waits = append(waits, wait)
	})
	require.NoError(t, err)
	require.Equal(t, 3, tries)
	require.Equal(t, []time.Duration{100 * time.Millisecond, 200 * time.Millisecond}, waits, "backing off")

	// A permanent error is returned at once; so is the last one when
	// the context ends.
	tries = 0
	err = store.Retry(ctx, func() error {
		tries++
		_, err := db.ExecContext(ctx, `INSERT INTO t VALUES (1, 'again')`)
		return err
	}, func(error, time.Duration) { t.Error("waited to try a key twice again") })
	require.Error(t, err)
	require.Equal(t, 1, tries)
	done, cancel := context.WithCancel(ctx)
	transient := errors.New("away")
	err = store.Retry(done, func() error { cancel(); return transient }, nil)
	require.ErrorIs(t, err, transient)
}

// TestPermanentFromPostgres: PostgreSQL's data exceptions (class 22),
// integrity constraint violations (23) and program limits (54: an index
// row too large) can never succeed; a statement cancelled by its
// timeout (57014) or a serialization failure could, and is retried.
func TestPermanentFromPostgres(t *testing.T) {
	ctx := context.Background()
	s, err := store.Open(ctx, testutil.StartPostgres(t))
	require.NoError(t, err)
	defer s.Close()
	db := s.DB()
	_, err = db.ExecContext(ctx, `CREATE TABLE t (k integer PRIMARY KEY, v text NOT NULL); CREATE INDEX t_v ON t (v)`)
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, `INSERT INTO t VALUES (1, 'a')`)
	require.NoError(t, err)
	// An index entry past a third of a page: text that does not compress.
	var big strings.Builder
	for i := range 4000 {
		fmt.Fprintf(&big, "%x", (i*2654435761)%65521)
	}
	for name, q := range map[string]string{
		"22P02 not an integer":         `SELECT 'x'::integer`,
		"22012 division by zero":       `SELECT 1 / 0`,
		"23505 a key twice":            `INSERT INTO t VALUES (1, 'b')`,
		"23502 a null":                 `INSERT INTO t VALUES (2, NULL)`,
		"54000 an index row too large": `INSERT INTO t VALUES (3, '` + big.String() + `')`,
	} {
		_, err := db.ExecContext(ctx, q)
		require.Error(t, err, name)
		require.True(t, store.Permanent(err), "%s: %v", name, err)
		require.Contains(t, err.Error(), "SQLSTATE "+name[:5], "the error is the one meant")
	}
	conn, err := db.Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.ExecContext(ctx, `SET statement_timeout = 10`)
	require.NoError(t, err)
	_, err = conn.ExecContext(ctx, `SELECT pg_sleep(5)`)
	require.ErrorContains(t, err, "SQLSTATE 57014")
	require.False(t, store.Permanent(err), "%v", err)
	// The timeout is lifted first: a DO block's first run (plpgsql
	// loaded and compiled) can take past 10 ms on a busy machine.
	_, err = conn.ExecContext(ctx, `SET statement_timeout = 0`)
	require.NoError(t, err)
	_, err = conn.ExecContext(ctx, `DO $$ BEGIN RAISE EXCEPTION USING ERRCODE = '40001'; END $$`)
	require.ErrorContains(t, err, "SQLSTATE 40001")
	require.False(t, store.Permanent(err), "%v", err)
}
