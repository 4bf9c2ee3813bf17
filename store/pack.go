package store

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
)

// typed turns the schema's portable types into the engine's: BLOB is
// PostgreSQL's BYTEA, an INTEGER PRIMARY KEY (SQLite's rowid) its
// BIGINT, numbers are identities there, and a view is replaced (it has
// no IF NOT EXISTS).
func (s *Store) typed(stmt string) string {
	if s.postgres {
		return strings.NewReplacer(" BLOB", " BYTEA", "INTEGER PRIMARY KEY", "BIGINT PRIMARY KEY",
			"SAMPLEID", sampleIDPostgres, "RUNNUMBER", runNumberPostgres, "STARTEDTEXT", startedTextPostgres,
			"CREATE VIEW IF NOT EXISTS", "CREATE OR REPLACE VIEW").Replace(stmt)
	}
	return strings.NewReplacer("SAMPLEID", sampleIDSQLite, "RUNNUMBER", runNumberSQLite, "STARTEDTEXT", startedTextSQLite).Replace(stmt)
}

// hasColumn says whether table has a column of that name.
func (s *Store) hasColumn(ctx context.Context, table, column string) (bool, error) {
	return s.hasColumnOn(ctx, s.db, table, column)
}

// hasColumnOn is hasColumn in a transaction (SQLite's one writer).
func (s *Store) hasColumnOn(ctx context.Context, db interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, table, column string) (bool, error) {
	q := `SELECT COUNT(*) FROM pragma_table_info(?) WHERE name = ?`
	if s.postgres {
		q = `SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1 AND column_name = $2`
	}
	var n int
	err := db.QueryRowContext(ctx, q, table, column).Scan(&n)
	return n > 0, err
}

// packBatch is how many records packRecords compresses per transaction:
// an upgrade cut short (a kill, a full disk) loses at most one batch's
// work, and goes on at the next Open.
var packBatch = 2000

// afterPackBatch, if set, is called after each batch (a test stops the
// upgrade half-way).
var afterPackBatch func() error

// packRecords finishes the upgrade to schema 8 in place: the records
// kept as JSON in clear (raw) are compressed into z, a batch per
// transaction, each batch clearing the raw it moved, until none is left;
// then the raw columns are dropped and SQLite gives the space back. Run
// again after an interruption, it goes on where it stopped. A store
// without raw columns has nothing to do.
func (s *Store) packRecords(ctx context.Context) error {
	tables := []struct{ name, key string }{{"sample_raw", "run_id, task_key"}, {"results", "run_id, kind, task_key"}}
	packed := false
	for _, t := range tables {
		has, err := s.hasColumn(ctx, t.name, "raw")
		if err != nil || !has {
			if err != nil {
				return fmt.Errorf("upgrading to schema 8: %w", err)
			}
			continue
		}
		var after []any // the last key packed: each batch reads on from it
		for {
			last, err := s.packBatch(ctx, t.name, t.key, after)
			if err != nil {
				return fmt.Errorf("upgrading to schema 8, compressing %s: %w", t.name, err)
			}
			if last == nil {
				break
			}
			after = last
			if afterPackBatch != nil {
				if err := afterPackBatch(); err != nil {
					return err
				}
			}
		}
		drop := []string{`ALTER TABLE ` + t.name + ` DROP COLUMN raw`}
		if s.postgres {
			drop = append(drop, `ALTER TABLE `+t.name+` ALTER COLUMN z SET NOT NULL`)
		}
		err = s.InTx(ctx, func(tx *sql.Tx) error {
			for _, stmt := range drop {
				if _, err := tx.ExecContext(ctx, stmt); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("upgrading to schema 8, %s: %w", t.name, err)
		}
		packed = true
	}
	if packed {
		// The space the JSON took goes back to the file system: once, a
		// rewrite of the tables (PostgreSQL's UPDATEs left a dead copy of
		// every row behind too).
		vacuum := `VACUUM`
		if s.postgres {
			vacuum = `VACUUM FULL sample_raw, results`
		}
		if _, err := s.db.ExecContext(ctx, vacuum); err != nil {
			return fmt.Errorf("upgrading to schema 8, %s: %w", vacuum, err)
		}
	}
	return nil
}

// packBatch compresses, in one transaction, up to packBatch records of
// table in the order of its key (SQLite's rowid), after the key after
// (nil: from the first), and returns the last key it packed (nil: none
// left). Read on from the last batch's end, each batch costs its own
// rows (reading "z IS NULL" from the start again would walk every row
// already packed, batch after batch: quadratic at ten million); a
// resumed upgrade walks the rows it packed before once.
func (s *Store) packBatch(ctx context.Context, table, key string, after []any) ([]any, error) {
	// SQLite's raw stays NOT NULL until it is dropped: '' marks it moved.
	clear := "NULL"
	if !s.postgres {
		clear = "''"
	}
	last, _, err := s.rewriteBatch(ctx, table, key, "raw", "z IS NULL", nil, "z = ?, raw = "+clear, after,
		func(raw []byte) ([]byte, error) { return packRaw(raw), nil })
	return last, err
}

// rewriteBatch rewrites, in one transaction, up to packBatch rows of
// table that where selects (with args), in the order of key (on SQLite
// its rowid: the table's own order, read sequentially) after the key
// after (nil: from the first): set (one placeholder) takes what f makes
// of each row's col, a row f makes nil of left as it is. It returns the
// last key it read (nil: none left) and how many rows it set. Read on
// from the last batch's key, each batch costs its own rows.
func (s *Store) rewriteBatch(ctx context.Context, table, key, col, where string, args []any, set string, after []any, f func([]byte) ([]byte, error)) (last []any, n int, err error) {
	if !s.postgres {
		key = "rowid"
	}
	keys := strings.Split(key, ", ")
	q := `SELECT ` + key + `, ` + col + ` FROM ` + table + ` WHERE ` + where
	args = slices.Clone(args)
	if after != nil {
		q += ` AND (` + key + `) > (?` + strings.Repeat(", ?", len(keys)-1) + `)`
		args = append(args, after...)
	}
	type row struct {
		keys []any // SQLite's rowid an int64, text keys strings
		v    []byte
	}
	read := func(tx *sql.Tx) ([]row, error) {
		rows, err := tx.QueryContext(ctx, s.rebind(fmt.Sprintf(`%s ORDER BY %s LIMIT %d`, q, key, packBatch)), args...)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var batch []row
		for rows.Next() {
			r := row{keys: make([]any, len(keys))}
			var v []byte
			var dest []any
			for i := range r.keys {
				dest = append(dest, &r.keys[i])
			}
			if err := rows.Scan(append(dest, &v)...); err != nil {
				return nil, err
			}
			if r.v, err = f(v); err != nil {
				return nil, err
			}
			batch = append(batch, r)
		}
		return batch, rows.Err()
	}
	err = s.InTx(ctx, func(tx *sql.Tx) error {
		batch, err := read(tx)
		if err != nil || len(batch) == 0 {
			return err
		}
		stmt, err := tx.PrepareContext(ctx, s.rebind(`UPDATE `+table+` SET `+set+` WHERE `+strings.Join(keys, " = ? AND ")+" = ?"))
		if err != nil {
			return err
		}
		defer stmt.Close()
		for _, r := range batch {
			if r.v == nil {
				continue
			}
			if _, err := stmt.ExecContext(ctx, append([]any{r.v}, r.keys...)...); err != nil {
				return err
			}
			n++
		}
		last = batch[len(batch)-1].keys
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	return last, n, nil
}

// repackSamples finishes the upgrade to schema 9 in place: the samples'
// records packed with dictionary 1 are packed again with dictionary 2,
// which keeps them in about half the octets, a batch per transaction
// from the sample number the last batch reached (kept in
// repack_samples, which goes when all are done); then the space goes
// back to the file system. Run again after an interruption, it goes on
// where it stopped. A store without repack_samples has nothing to do.
func (s *Store) repackSamples(ctx context.Context) error {
	pending, err := s.hasColumn(ctx, "repack_samples", "after")
	if err != nil || !pending {
		return err
	}
	for done := false; !done; {
		err := s.InTx(ctx, func(tx *sql.Tx) error {
			var after int64
			if err := tx.QueryRowContext(ctx, `SELECT after FROM repack_samples`).Scan(&after); err != nil {
				return err
			}
			rows, err := tx.QueryContext(ctx, s.rebind(fmt.Sprintf(`SELECT id, z FROM sample_raw WHERE id > ? ORDER BY id LIMIT %d`, packBatch)), after)
			if err != nil {
				return err
			}
			type row struct {
				id int64
				z  []byte
			}
			var batch []row
			read := 0
			for rows.Next() {
				read++
				var r row
				if err := rows.Scan(&r.id, &r.z); err != nil {
					rows.Close()
					return err
				}
				after = r.id
				if len(r.z) > 0 && r.z[0] == codecZstd1 {
					raw, err := unpackRaw(r.z)
					if err != nil {
						rows.Close()
						return fmt.Errorf("sample %d: %w", r.id, err)
					}
					batch = append(batch, row{r.id, packSample(raw)})
				}
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
			for _, r := range batch {
				if _, err := tx.ExecContext(ctx, s.rebind(`UPDATE sample_raw SET z = ? WHERE id = ?`), r.z, r.id); err != nil {
					return err
				}
			}
			if done = read < packBatch; done {
				_, err = tx.ExecContext(ctx, `DROP TABLE repack_samples`)
				return err
			}
			_, err = tx.ExecContext(ctx, s.rebind(`UPDATE repack_samples SET after = ?`), after)
			return err
		})
		if err != nil {
			return fmt.Errorf("upgrading to schema 9, repacking the samples: %w", err)
		}
		if afterPackBatch != nil && !done {
			if err := afterPackBatch(); err != nil {
				return err
			}
		}
	}
	// The old tables' and records' pages go back to the file system.
	vacuum := `VACUUM`
	if s.postgres {
		vacuum = `VACUUM FULL sample_raw`
	}
	if _, err := s.db.ExecContext(ctx, vacuum); err != nil {
		return fmt.Errorf("upgrading to schema 9, %s: %w", vacuum, err)
	}
	return nil
}
