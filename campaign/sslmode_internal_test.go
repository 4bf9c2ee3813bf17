package campaign

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSSLModeAsTheDriverTakesIt: the check names the sslmode the
// connection was made with: the DSN's, else $PGSSLMODE's (which pgx
// honours, as libpq does), else prefer. It said prefer, and so FAIL,
// for a store reached with PGSSLMODE=verify-full.
func TestSSLModeAsTheDriverTakesIt(t *testing.T) {
	t.Setenv("PGSSLMODE", "")
	require.Equal(t, "prefer", sslMode("postgres://u@db/x"))
	require.Equal(t, "verify-ca", sslMode("postgres://u@db/x?sslmode=verify-ca&sslrootcert=ca.crt"))
	t.Setenv("PGSSLMODE", "verify-full")
	require.Equal(t, "verify-full", sslMode("postgres://u@db/x"))
	require.Equal(t, "disable", sslMode("postgres://u@db/x?sslmode=disable"), "the DSN's own wins")
}
