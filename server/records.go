package server

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"math"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/doxlab/doxlab/transport"
)

// Record is what the server saw of one query or one connection.
type Record struct {
	Time      time.Time `json:"time"`
	Kind      string    `json:"kind"`      // query, conn, refusal, or proxy (an ODoH relay)
	Transport string    `json:"transport"` // udp, tcp, dot, doh1, doh2, doh3, doq; a web listener's conn records h1, h2, h3
	Listener  string    `json:"listener"`  // the listener's name in the config
	Remote    string    `json:"remote"`
	Local     string    `json:"local"`

	ALPN       string `json:"alpn,omitempty"`
	TLSVersion string `json:"tls_version,omitempty"`
	SNI        string `json:"sni,omitempty"` // the server name the client asked for: the origin a web connection was opened to (with ECH accepted, the inner ClientHello's)
	// ECH is what the connection's Encrypted Client Hello came to:
	// accepted, rejected (a config the server no longer holds: retry
	// configs sent, the client aborted), grease (an ECH extension no key
	// opens, and the handshake went on under the outer name), or empty
	// (none offered). OuterSNI is the name the network saw.
	ECH          string `json:"ech,omitempty"`
	OuterSNI     string `json:"outer_sni,omitempty"`
	Resumed      bool   `json:"resumed"`
	Used0RTT     bool   `json:"used_0rtt"`
	EarlyData    bool   `json:"early"`          // the server took the query before the handshake completed (checked as the stream or request was accepted; on loopback the client's Finished can beat a busy server to it)
	Retry        bool   `json:"retry"`          // this connection followed a Retry we sent
	AddrVerified bool   `json:"addr_verified"`  // the client's address was validated (Retry or NEW_TOKEN token)
	TokenUsed    bool   `json:"token_accepted"` // validated by a NEW_TOKEN token

	QName   string  `json:"qname,omitempty"`
	QType   string  `json:"qtype,omitempty"`
	Rcode   string  `json:"rcode,omitempty"`
	DelayMs float64 `json:"delay_ms,omitempty"` // injected delay
	Dropped bool    `json:"dropped,omitempty"`
	// ServerMs is the time from the query read to the answer written,
	// injected delay included.
	ServerMs    float64 `json:"server_ms,omitempty"`
	HandshakeMs float64 `json:"handshake_ms,omitempty"` // conn records: first packet (QUIC) or accept (TCP) to handshake complete
	// Unfinished: a QUIC conn record of a connection its client closed
	// before the server saw its Finished, after asking in 0-RTT (a
	// one-request load closes at once): it was served, and its handshake
	// time is unknown (0).
	Unfinished bool `json:"unfinished,omitempty"`
	// Began is a conn record's connection's first packet (QUIC) or
	// accept (TCP): a record written late is still known by when its
	// connection began.
	Began   time.Time `json:"began,omitzero"`
	Origins []string  `json:"origins,omitempty"` // conn records: the origins an ORIGIN frame announced on it
	// Target and TargetMs: an ODoH proxy's record (kind proxy) names the
	// target it relayed to and how long the target's exchange took.
	Target   string  `json:"target,omitempty"`
	TargetMs float64 `json:"target_ms,omitempty"`
	// Upstream is the forwarder's exchange for this query, when it was
	// forwarded and not answered from the cache: a stub resolver's
	// per-query timings and connection facts.
	Upstream *transport.Record `json:"upstream,omitempty"`
	Error    string            `json:"error,omitempty"`
	// Reason is why a refusal record's message or connection was refused,
	// dropped or closed (a Reason). Suppressed counts the refusals before
	// this one that were not written, to keep an attack from filling the
	// disk; the metrics count them all.
	Reason     string `json:"reason,omitempty"`
	Suppressed int    `json:"suppressed,omitempty"`
}

func ms(d time.Duration) float64 {
	return math.Round(float64(d)/float64(time.Microsecond)) / 1000
}

// recorder writes records as JSON lines; a nil recorder writes nothing.
type recorder struct {
	mu  sync.Mutex
	w   *bufio.Writer
	c   io.Closer
	enc *json.Encoder
	// hook, if set, sees every record (tests, metrics).
	hook func(*Record)
	// on says whether a record goes anywhere (a file or a hook), so that
	// a server writing none spares building them.
	on atomic.Bool
}

func newRecorder(path string) (*recorder, error) {
	r := &recorder{}
	switch path {
	case "":
		return r, nil
	case "-":
		r.w = bufio.NewWriter(os.Stdout)
	default:
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return nil, err
		}
		r.w, r.c = bufio.NewWriter(f), f
	}
	r.enc = json.NewEncoder(r.w)
	r.on.Store(true)
	return r, nil
}

func (r *recorder) write(rec *Record) {
	if !r.on.Load() {
		return
	}
	if rec.Time.IsZero() {
		rec.Time = time.Now()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.hook != nil {
		r.hook(rec)
	}
	if r.enc != nil {
		r.enc.Encode(rec)
		r.w.Flush() // a record per line on disk as it happens: nothing lost on a kill
	}
}

func (r *recorder) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.w != nil {
		r.w.Flush()
	}
	if r.c != nil {
		r.c.Close()
	}
}

// RecordLog collects a server's records as they come (OnRecord(log.Add));
// an experiment's sample, or a test, takes those since a mark.
type RecordLog struct {
	mu   sync.Mutex
	recs []*Record
	more chan struct{} // closed by the next Add, for Await
}

// Add appends a record (a server's OnRecord hook).
func (l *RecordLog) Add(r *Record) {
	l.mu.Lock()
	l.recs = append(l.recs, r)
	if l.more != nil {
		close(l.more)
		l.more = nil
	}
	l.mu.Unlock()
}

// Mark is the position of the next record.
func (l *RecordLog) Mark() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.recs)
}

// Await returns the records from mark i on once enough says they are
// all a caller needs, or, when ctx ends first, those there are and
// false: a measurement that knows which connections it made waits for
// their records, where Server.Settle only knows of connections whose
// handshakes the server has seen complete.
func (l *RecordLog) Await(ctx context.Context, i int, enough func([]*Record) bool) ([]*Record, bool) {
	for {
		l.mu.Lock()
		recs := append([]*Record(nil), l.recs[i:]...)
		if enough(recs) {
			l.mu.Unlock()
			return recs, true
		}
		if l.more == nil {
			l.more = make(chan struct{})
		}
		more := l.more
		l.mu.Unlock()
		select {
		case <-more:
		case <-ctx.Done():
			return l.Since(i), false
		}
	}
}

// RemotePort is the client's port as the server saw it ("" for none):
// a client knows its connections by their local ports.
func (r *Record) RemotePort() string {
	_, p, _ := net.SplitHostPort(r.Remote)
	return p
}

// Since returns the records from mark i on.
func (l *RecordLog) Since(i int) []*Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*Record(nil), l.recs[i:]...)
}
