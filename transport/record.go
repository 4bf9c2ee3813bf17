package transport

import (
	"crypto/x509"
	"math"
	"time"

	"github.com/miekg/dns"
)

// Record is what one exchange measured. Exchange always returns one, also on
// failure, so a campaign stores why a sample failed instead of dropping it.
type Record struct {
	URL      string    `json:"url"`
	Protocol string    `json:"protocol"` // udp, tcp, dot, doh1, doh2, doh3, doq
	Server   string    `json:"server"`   // host:port dialled
	QName    string    `json:"qname"`
	QType    string    `json:"qtype"`
	Start    time.Time `json:"start"` // wall clock, for the store; durations use the monotonic clock
	// WireStart is when the exchange's first packet left, by the kernel's
	// clock (Timing.WireMs): to find the exchange in a capture.
	WireStart time.Time `json:"wire_start,omitzero"`
	Warmup    bool      `json:"warmup,omitempty"` // a cache-warming exchange, not a measurement

	Status  Status   `json:"status"`
	Error   string   `json:"error,omitempty"`
	Rcode   string   `json:"rcode"`
	Answers []string `json:"answers"`

	Timing   Timing   `json:"timing"`
	Conn     ConnInfo `json:"conn"`
	Bytes    Counts   `json:"bytes"`     // at the socket: UDP payloads, or TCP payload incl. TLS; handshake included on a new connection
	Packets  Counts   `json:"packets"`   // UDP datagrams, or TCP segments from TCP_INFO (incl. SYN/ACKs)
	DNSBytes Counts   `json:"dns_bytes"` // the DNS messages alone
	// ODoH is an Oblivious DoH exchange's own facts; nil for the others.
	ODoH *ODoHFacts `json:"odoh,omitempty"`

	// Response is the parsed answer; nil when none arrived.
	Response *dns.Msg `json:"-"`
}

// Timing holds the phases of one exchange in milliseconds (microsecond
// precision), all from the monotonic clock. Phases a reused connection skips
// are zero. With 0-RTT the query overlaps the handshake: QueryStartMs then
// lies before SocketMs+ConnectMs+HandshakeMs.
type Timing struct {
	SocketMs     float64 `json:"socket_ms"`      // creating and binding the socket
	ConnectMs    float64 `json:"connect_ms"`     // TCP three-way handshake
	HandshakeMs  float64 `json:"handshake_ms"`   // TLS, or QUIC until the handshake is confirmed complete
	QueryStartMs float64 `json:"query_start_ms"` // offset of the first query byte written, from the start
	QueryMs      float64 `json:"query_ms"`       // first query byte written -> full response read
	TotalMs      float64 `json:"total_ms"`       // Exchange called -> response parsed
	// AnswerSpreadMs is the response's first octet in -> its last octet
	// in, over TCP (DoTCP, DoT, DoH/1.1 and /2); near 0 unless the server
	// sent the answer in parts (see ConnInfo.DelayedACKStall).
	AnswerSpreadMs float64 `json:"answer_spread_ms,omitempty"`
	// WireMs is the exchange as the client's kernel saw it cross the
	// socket (software timestamps, SO_TIMESTAMPING): the first packet out
	// (the UDP query, the QUIC Initial; for TCP, just before connect(2)
	// sends the SYN) to the answer's last packet in. TotalMs - WireMs is
	// the client's own time. 0 where the kernel gave no timestamps.
	WireMs float64 `json:"wire_ms,omitempty"`
	// WireQueryMs is the query's first packet out to the answer in, by
	// the same clock.
	WireQueryMs float64 `json:"wire_query_ms,omitempty"`
}

// ConnInfo says what the connection really did, so a sample labelled
// "0-RTT" or "resumed" can be checked against what happened.
type ConnInfo struct {
	Reused     bool   `json:"reused"` // an existing connection carried the query
	LocalAddr  string `json:"local_addr,omitempty"`
	RemoteAddr string `json:"remote_addr,omitempty"`
	TLSVersion string `json:"tls_version"` // "1.3"; "" when no handshake chose one
	Cipher     string `json:"cipher,omitempty"`
	ALPN       string `json:"alpn"`
	TLSResumed bool   `json:"tls_resumed"`
	// Attempted0RTT: the query itself went out in early data (a 0-RTT
	// packet carried its stream, from the client's qlog), accepted or not.
	Attempted0RTT bool `json:"attempted_0rtt"`
	// Used0RTT: the server accepted 0-RTT on this connection (TLS early
	// data accepted). It does not say the query was in it: see
	// Attempted0RTT.
	Used0RTT     bool   `json:"used_0rtt"`
	Rejected0RTT bool   `json:"rejected_0rtt"` // refused; the query was resent after the handshake
	QUICVersion  string `json:"quic_version"`
	VersionNeg   bool   `json:"version_negotiation"` // a Version Negotiation packet was received
	Retry        bool   `json:"retry"`               // the server sent a Retry
	TokenUsed    bool   `json:"token_used"`          // the Initial carried a NEW_TOKEN token from an earlier connection
	HTTPStatus   int    `json:"http_status,omitempty"`
	// DelayedACKStall says the answer's tail came 30 ms or more after its
	// head: the server left Nagle's algorithm on and wrote the answer in
	// two parts, so its kernel held the second until our delayed ACK of
	// the first. The time is the server's setup, not the protocol's cost.
	DelayedACKStall bool `json:"delayed_ack_stall"` // always present: false is a finding too
	// ECH is what an offered ECH config came to (Options.ECHConfigList):
	// accepted or rejected; empty when none was offered.
	ECH string `json:"ech,omitempty"`
	// PeerCertificates is the chain the server sent (not on resumption).
	PeerCertificates []*x509.Certificate `json:"-"`
}

// Counts is a sent/received pair.
type Counts struct {
	Sent     int64 `json:"sent"`
	Received int64 `json:"received"`
}

// ms converts a duration to milliseconds rounded to the microsecond.
func ms(d time.Duration) float64 {
	return math.Round(float64(d)/float64(time.Microsecond)) / 1000
}

// fill copies the answer's facts into the record and sets the status from
// its rcode.
func (r *Record) fill(resp *dns.Msg) {
	r.Response = resp
	r.Rcode = dns.RcodeToString[resp.Rcode]
	r.Answers = r.Answers[:0]
	for _, rr := range resp.Answer {
		r.Answers = append(r.Answers, rr.String())
	}
	r.Status = StatusForRcode(resp.Rcode)
}
