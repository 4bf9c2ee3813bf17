package odoh_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/odoh"
)

// TestFetchConfigFromHostileTargets: a target's well-known configs come
// from a server doxlab measures, which may answer anything. The largest
// ObliviousDoHConfigs the wire allows (a 16-bit length and 65,535
// octets) is read whole, its last config used; a longer body, a status
// other than 200, garbage and a server that never answers are each an
// error naming the cause, read no further than that length.
func TestFetchConfigFromHostileTargets(t *testing.T) {
	kp, err := odoh.NewKeyPair(nil)
	require.NoError(t, err)
	good := odoh.MarshalConfigs(kp.Config)
	// Configs of an unknown version fill the list up to its largest
	// length, the target's own last.
	own := good[2:]
	var list []byte
	for rest := 65535 - len(own); rest > 0; {
		n := min(rest-4, 1000)
		list = append(list, 0xff, 0xfe, byte(n>>8), byte(n))
		list = append(list, make([]byte, n)...)
		rest -= 4 + n
	}
	largest := append(append([]byte{0xff, 0xff}, list...), own...)

	hang := make(chan struct{})
	ts := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, odoh.ConfigsPath, r.URL.Path)
		switch r.Host[:strings.IndexByte(r.Host, ':')] {
		case "good.test":
			w.Write(good)
		case "largest.test":
			w.Write(largest)
		case "longer.test":
			w.Write(append(append([]byte{}, largest...), make([]byte, 1<<20)...))
		case "missing.test":
			http.NotFound(w, r)
		case "garbage.test":
			w.Write([]byte("<html>not configs</html>"))
		case "hang.test":
			<-hang
		}
	}))
	defer ts.Close()
	defer close(hang) // before Close, which waits for the handler
	tr := ts.Client().Transport.(*http.Transport).Clone()
	addr := ts.Listener.Addr().String()
	tr.DialTLSContext = nil
	tr.DialContext = func(ctx context.Context, network, _ string) (c net.Conn, err error) {
		var d net.Dialer
		return d.DialContext(ctx, network, addr) // every name is the test server
	}
	tr.TLSClientConfig.InsecureSkipVerify = true
	port := addr[strings.LastIndexByte(addr, ':'):]
	fetch := func(host string) (odoh.Config, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		return odoh.FetchConfig(ctx, tr, host+port)
	}

	c, err := fetch("good.test")
	require.NoError(t, err)
	require.Equal(t, kp.Config, c)
	require.Equal(t, 65537, len(largest))
	c, err = fetch("largest.test")
	require.NoError(t, err, "the largest configs the wire allows")
	require.Equal(t, kp.Config, c)
	for host, want := range map[string]string{
		"longer.test":  "longer than",
		"missing.test": "HTTP 404",
		"garbage.test": "malformed",
		"hang.test":    "deadline",
	} {
		_, err := fetch(host)
		require.ErrorContains(t, err, want, host)
		require.NotContains(t, err.Error(), "\n", host)
	}
}
