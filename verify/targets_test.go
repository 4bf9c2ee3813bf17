package verify

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestReadTargets(t *testing.T) {
	in := "saddr,sport\n192.0.2.1,784\n# a comment\n\n192.0.2.2\n[2001:db8::1]:8853\n"
	got, err := readTargets(strings.NewReader(in), "t.csv", 853)
	require.NoError(t, err)
	require.Equal(t, []string{"192.0.2.1:784", "192.0.2.2:853", "[2001:db8::1]:8853"}, got)

	_, err = readTargets(strings.NewReader("192.0.2.1\nnot-an-ip\n"), "t.txt", 853)
	require.EqualError(t, err, `t.txt:2: "not-an-ip" is not an IP address or IP:PORT`)
}
