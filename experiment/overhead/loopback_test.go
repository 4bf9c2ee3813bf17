package overhead

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/experiment"
	"github.com/doxlab/doxlab/experiment/internal/looptest"
	"github.com/doxlab/doxlab/internal/testutil"
	layers "github.com/doxlab/doxlab/overhead"
	"github.com/doxlab/doxlab/protocol"
)

func TestMain(m *testing.M) { testutil.Rootless(m) }

// TestRunOnLoopback: overhead's whole path on the loopback net, without
// root: three names over every direct transport, a connection per query
// and one kept, captured on loopback (only the net's own hosts'
// packets), every connection found and its octets attributed to layers
// with the client's keys (the path itself: looptest), and the capture
// kept for Wireshark. The octets are loopback's (its MTU is
// 64 KiB): the papers' sizes are the testbed's test.
func TestRunOnLoopback(t *testing.T) {
	dir := t.TempDir()
	names := layers.Names[:3]
	c := &Overhead{Names: names, Keep: filepath.Join(dir, "keep"), Env: experiment.Env{Store: filepath.Join(dir, "o.db"), Net: experiment.NetLoopback}}
	res, _, _ := looptest.Run(t, c)
	cs := res.(Conns)
	perCell := map[string][]*Conn{}
	for _, cn := range cs {
		perCell[cn.Transport+" "+cn.Mode] = append(perCell[cn.Transport+" "+cn.Mode], cn)
	}
	for _, tr := range protocol.Direct() {
		for _, mode := range []string{"new", "persistent"} {
			conns := perCell[tr+" "+mode]
			queries := 0
			for _, cn := range conns {
				queries += cn.Queries
				require.True(t, tr == protocol.UDP || tr == protocol.TCP || cn.Decrypted, "%s %s: decrypted with the logged keys", tr, mode)
				require.Positive(t, cn.Up[layers.DNS], "%s %s: the query's octets", tr, mode)
				require.Positive(t, cn.Down[layers.DNS], "%s %s: the answer's octets", tr, mode)
				require.Positive(t, cn.UpPkts, "%s %s", tr, mode)
			}
			require.Equal(t, len(names), queries, "%s %s: every resolution found in the capture", tr, mode)
			if mode == "persistent" && tr != protocol.UDP {
				require.Len(t, conns, 1, "%s: one connection kept", tr)
			} else if mode == "new" {
				require.Len(t, conns, len(names), "%s: a connection per query", tr)
			}
		}
	}
	for _, f := range []string{"client-up.pcap", "client-down.pcap", "keys.log"} {
		fi, err := os.Stat(filepath.Join(c.Keep, f))
		require.NoError(t, err)
		require.Positive(t, fi.Size(), f)
	}
}
