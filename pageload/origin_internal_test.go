package pageload

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestAnnouncedOriginsAreBounded: a server announcing thousands of
// origins (97 MB of ORIGIN frames took the loader to 669 MiB) fills a
// connection's set up to MaxAnnounced and no further, the rest counted;
// the frames' octets count against the page's bound.
func TestAnnouncedOriginsAreBounded(t *testing.T) {
	ld := &load{l: &Loader{cfg: Config{MaxPageBytes: 1 << 20}}, t0: time.Now()}
	c := &originConn{originCh: make(chan struct{})}
	info := &Conn{}
	var origins []string
	for i := range 3000 {
		origins = append(origins, fmt.Sprintf("https://o%d.example", i))
	}
	ld.announced(c, info, origins[:1000])
	ld.announced(c, info, origins[1000:])
	ld.announced(c, info, origins[:10]) // known already: not counted again
	require.Len(t, info.Announced, MaxAnnounced)
	require.Len(t, c.announced, MaxAnnounced)
	require.Equal(t, 3000-MaxAnnounced, info.AnnouncedIgnored)
	require.True(t, c.announces("o5.example", 443))
	select {
	case <-c.originCh:
	default:
		t.Fatal("the first frame is signalled")
	}
	require.NoError(t, ld.charge(1<<19))
	require.NoError(t, ld.charge(1<<19))
	require.ErrorIs(t, ld.charge(1), ErrTooLarge)
}
