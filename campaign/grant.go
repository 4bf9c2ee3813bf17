package campaign

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"slices"

	"github.com/doxlab/doxlab/store"
)

// roleName is what a worker's role may be called: a plain SQL
// identifier, so it goes into the statements as it is.
var roleName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// workerGrants are the least a worker's role needs, and all it gets: to
// read runs (its plans) and the schema's version, to add samples, page
// loads and duplicates (never to change or delete them), and to work
// River's queue (take, complete and retry jobs; River's leader, which
// any worker may be, rescues jobs of dead workers and deletes finished
// ones). It may create no table and read no other.
var workerGrants = []string{
	`GRANT SELECT ON runs, schema_version TO %[1]s`,
	`GRANT SELECT, INSERT ON samples, sample_cols, results TO %[1]s`,
}

// Grant gives an existing PostgreSQL role what a worker needs of the
// store (workerGrants) and nothing more; the store's schema and queue
// are created first if need be, by the caller's (the coordinator's)
// role. Run it once per worker role.
func Grant(ctx context.Context, st *store.Store, role string) error {
	if err := needPostgres(st); err != nil {
		return err
	}
	if !roleName.MatchString(role) {
		return fmt.Errorf("role %q: want a plain name (lower-case letters, digits and _)", role)
	}
	if err := migrate(ctx, st); err != nil {
		return err
	}
	var exists bool
	if err := st.DB().QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)`, role).Scan(&exists); err != nil {
		return err
	}
	if !exists {
		return fmt.Errorf("no role %q: create it first (CREATE ROLE %[1]s LOGIN PASSWORD '...', or with a client certificate)", role)
	}
	grants := slices.Clone(workerGrants)
	// River's tables are whatever its migrations made: its history read
	// only, every other table worked, its sequences used.
	err := eachRow(ctx, st.DB(), `SELECT c.relname, c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = current_schema() AND c.relname LIKE 'river\_%' AND c.relkind IN ('r', 'S') ORDER BY 1`, nil, func(rows *sql.Rows) error {
		var name, kind string
		if err := rows.Scan(&name, &kind); err != nil {
			return err
		}
		switch {
		case kind == "S":
			grants = append(grants, `GRANT USAGE, SELECT ON SEQUENCE `+name+` TO %[1]s`)
		case name == "river_migration":
			grants = append(grants, `GRANT SELECT ON river_migration TO %[1]s`)
		default:
			grants = append(grants, `GRANT SELECT, INSERT, UPDATE, DELETE ON `+name+` TO %[1]s`)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, g := range grants {
		if _, err := st.DB().ExecContext(ctx, fmt.Sprintf(g, role)); err != nil {
			return fmt.Errorf("granting %s: %w", role, err)
		}
	}
	return nil
}
