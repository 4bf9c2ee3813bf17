package transport_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/odoh"
	"github.com/doxlab/doxlab/transport"
)

// hostileODoH is an ODoH target and a proxy in one HTTPS server (HTTP/2)
// whose answers a test chooses: the proxy is the client's only peer for
// its queries, and may answer anything.
type hostileODoH struct {
	url     string // odoh://proxy/dns-query?target=...
	roots   *x509.CertPool
	kp      *odoh.KeyPair
	mode    atomic.Value // what the proxy answers; see serve
	configs atomic.Int32 // fetches of the target's config
	config  atomic.Value // []byte served as the config, when set
	silent  atomic.Bool  // the config is never served

	mu    sync.Mutex
	first []byte // the first answer sealed, for a replay
}

func startHostileODoH(t *testing.T) *hostileODoH {
	kp, err := odoh.NewKeyPair(nil)
	require.NoError(t, err)
	h := &hostileODoH{kp: kp}
	h.mode.Store("ok")
	s := httptest.NewUnstartedServer(http.HandlerFunc(h.serve))
	s.EnableHTTP2 = true
	s.StartTLS()
	t.Cleanup(s.Close)
	h.roots = x509.NewCertPool()
	h.roots.AddCert(s.Certificate())
	addr := strings.TrimPrefix(s.URL, "https://")
	h.url = "odoh://" + addr + "/dns-query?target=" + addr + "/dns-query"
	return h
}

func (h *hostileODoH) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == odoh.ConfigsPath {
		h.configs.Add(1)
		if h.silent.Load() {
			<-r.Context().Done()
			return
		}
		if b, ok := h.config.Load().([]byte); ok {
			w.Write(b)
			return
		}
		w.Write(odoh.MarshalConfigs(h.kp.Config))
		return
	}
	body, _ := io.ReadAll(r.Body)
	mode := h.mode.Load().(string)
	wire, rcv, err := h.kp.Open(body)
	if err != nil || mode == "401" {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	q := new(dns.Msg)
	if err := q.Unpack(wire); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	a := new(dns.Msg)
	a.SetReply(q)
	if mode == "other-question" {
		a.Question[0].Name = "other.example."
	}
	rr, _ := dns.NewRR(a.Question[0].Name + " 60 IN A 192.0.2.7")
	a.Answer = append(a.Answer, rr)
	packed, _ := a.Pack()
	sealed, err := rcv.Seal(packed, 0)
	if err != nil {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	h.mu.Lock()
	if h.first == nil {
		h.first = sealed
	}
	first := h.first
	h.mu.Unlock()
	w.Header().Set("Content-Type", odoh.ContentType)
	w.Header().Set("Server-Timing", "target;dur=1.5")
	switch mode {
	case "dns-message":
		w.Header().Set("Content-Type", "application/dns-message")
	case "garbage":
		sealed = bytes.Repeat([]byte{0x5a}, len(sealed))
	case "replay": // the answer to an earlier query, sealed to its key
		sealed = first
	case "huge":
		sealed = bytes.Repeat([]byte{1}, 1<<20)
	}
	w.Write(sealed)
}

// TestODoHAgainstAHostileProxy: what an ODoH proxy answers is the
// client's only word, and it may lie. An answer that is not ODoH, that
// does not open, that is an earlier query's (replayed: sealed to
// another query's key), that answers another question, or that is a
// megabyte long is a malformed exchange with its cause named, never an
// answer; a 401 is an HTTP error after which the next exchange fetches
// the target's config anew (a key rotated), which the exchange that
// fetched it records, and no other does.
func TestODoHAgainstAHostileProxy(t *testing.T) {
	h := startHostileODoH(t)
	tr, err := transport.New(h.url, transport.Options{RootCAs: h.roots, Timeout: 5 * time.Second, Reuse: true})
	require.NoError(t, err)
	defer tr.Close()
	ask := func(name string) (*transport.Record, error) {
		rec, err := tr.Exchange(context.Background(), query(name, dns.TypeA))
		require.NotNil(t, rec)
		return rec, err
	}

	rec, err := ask("a.example.")
	require.NoError(t, err)
	require.Equal(t, transport.StatusOK, rec.Status)
	require.Contains(t, rec.Answers[0], "192.0.2.7")
	require.NotNil(t, rec.ODoH)
	require.Positive(t, rec.ODoH.ConfigMs, "the first exchange fetched the config")
	require.InDelta(t, 1.5, rec.ODoH.TargetMs, 1e-9)
	rec, err = ask("b.example.")
	require.NoError(t, err)
	require.Zero(t, rec.ODoH.ConfigMs, "the config is fetched once")
	require.EqualValues(t, 1, h.configs.Load())

	for _, c := range []struct{ mode, why string }{
		{"dns-message", "the proxy answered \"application/dns-message\""},
		{"garbage", "odoh"},
		{"replay", "odoh"},
		{"other-question", "answer is for other.example."},
		{"huge", ""},
	} {
		h.mode.Store(c.mode)
		rec, err := ask("c.example.")
		require.Error(t, err, c.mode)
		require.Equal(t, transport.StatusMalformed, rec.Status, "%s: %s", c.mode, rec.Error)
		require.Empty(t, rec.Answers, c.mode)
		require.Contains(t, rec.Error, c.why, c.mode)
		require.NotContains(t, rec.Error, "\n", "%s: one line", c.mode)
	}

	h.mode.Store("401")
	rec, err = ask("d.example.")
	require.Error(t, err)
	require.Equal(t, transport.StatusHTTP, rec.Status, rec.Error)
	require.Equal(t, http.StatusUnauthorized, rec.Conn.HTTPStatus)
	h.mode.Store("ok")
	rec, err = ask("e.example.")
	require.NoError(t, err)
	require.Positive(t, rec.ODoH.ConfigMs, "fetched anew after the 401")
	require.EqualValues(t, 2, h.configs.Load())
}

// TestODoHTargetConfigs: a target whose config is not one this client
// speaks (garbage, another version, a body past the 64 KiB the format
// holds) or that never serves it fails the exchange before any query
// leaves, saying so in one line, having asked for the config once: the
// exchange fetched it again after the failed fetch before its timing
// began, and a silent target held it for two timeouts.
func TestODoHTargetConfigs(t *testing.T) {
	kp, err := odoh.NewKeyPair(nil)
	require.NoError(t, err)
	v2 := odoh.MarshalConfigs(kp.Config)
	v2[2], v2[3] = 0xff, 0x02 // the first config's version: not 0x0001
	for _, c := range []struct {
		name   string
		config []byte
		why    string
	}{
		{"garbage", []byte("not a config"), "the ODoH target's config"},
		{"empty", []byte{}, "the ODoH target's config"},
		{"another version", v2, "no config of version 1"},
		{"too long", bytes.Repeat([]byte{0}, 70000), "longer than"},
		{"silent", nil, "fetching the ODoH target's config"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := startHostileODoH(t)
			h.config.Store(c.config)
			h.silent.Store(c.config == nil)
			opts := transport.Options{RootCAs: h.roots}
			if c.config == nil {
				opts.Timeout = 500 * time.Millisecond // only the silent target times out
			}
			rec := fail(t, h.url, opts)
			require.Contains(t, rec.Error, c.why)
			require.NotContains(t, rec.Error, "\n")
			require.EqualValues(t, 1, h.configs.Load())
		})
	}
}
