package pageload

import (
	"time"
)

// Result is one replayed load. Times are milliseconds from its start, on
// the monotonic clock.
type Result struct {
	Page     string    `json:"page"`
	Start    time.Time `json:"start"`
	Protocol string    `json:"protocol"` // h3 or h2
	ZeroRTT  bool      `json:"zero_rtt"` // asked for
	Status   string    `json:"status"`   // ok, error, timeout
	Error    string    `json:"error,omitempty"`
	// PLTMs is the last resource's end plus the captured onload gap:
	// comparable with the browser's loadEventEnd.
	PLTMs       float64   `json:"plt_ms"`
	NetworkMs   float64   `json:"network_ms"` // the last resource's end
	OnloadGapMs float64   `json:"onload_gap_ms"`
	TTFBMs      float64   `json:"ttfb_ms"` // the document's first byte
	Resources   []Fetch   `json:"resources"`
	Lookups     []*Lookup `json:"lookups"`
	Conns       []*Conn   `json:"conns"`
}

// Fetch is one resource's load.
type Fetch struct {
	URL       string  `json:"url"`
	Due       float64 `json:"due_ms"`        // when the graph says to ask for it
	Sent      float64 `json:"sent_ms"`       // the request handed to the connection (after DNS and the handshake as needed)
	FirstByte float64 `json:"first_byte_ms"` // response headers
	End       float64 `json:"end_ms"`
	Bytes     int64   `json:"bytes"`
	Status    int     `json:"http_status"`
	Conn      int     `json:"conn"` // index into the load's Conns
	Error     string  `json:"error,omitempty"`
}

// Lookup is one name resolved for a load.
type Lookup struct {
	Host      string `json:"host"`
	Transport string `json:"transport"` // udp, doh2, doq, ..., hosts; doh3-coalesced, dnsstream
	// Coalesced lookups went on the load's connection Conn, Early ones
	// before its handshake completed (in 0-RTT).
	Coalesced bool `json:"coalesced,omitempty"`
	Conn      int  `json:"conn,omitempty"`
	Early     bool `json:"early,omitempty"`
	// HTTPS is what the host's HTTPS record said, when it was asked.
	HTTPS *HTTPSInfo `json:"https,omitempty"`
	// HTTPSAlongside: an HTTPS query went beside the A query, its answer
	// not waited for (Config.HTTPSAlongside).
	HTTPSAlongside bool     `json:"https_alongside,omitempty"`
	StartMs        float64  `json:"start_ms"`
	EndMs          float64  `json:"end_ms"`
	Addrs          []string `json:"addrs"`
	// Record is the DNS exchange's record, for transports that make one.
	Record any    `json:"record,omitempty"`
	Error  string `json:"error,omitempty"`
}

// Conn is one connection a load opened, and what it really did.
type Conn struct {
	Origin      string  `json:"origin"` // host:port
	Remote      string  `json:"remote"`
	Local       string  `json:"local"` // the socket's own address, as the server sees its port
	Protocol    string  `json:"protocol"`
	StartMs     float64 `json:"start_ms"`
	HandshakeMs float64 `json:"handshake_done_ms"` // when the handshake completed, from the load's start
	Resumed     bool    `json:"resumed"`
	TokenSent   bool    `json:"token_sent,omitempty"` // its first packet carried a NEW_TOKEN token
	Sent0RTT    bool    `json:"sent_0rtt"`            // requests went out before the handshake completed
	Used0RTT    bool    `json:"used_0rtt"`            // and the server accepted them
	// Rejected0RTT: the server refused the 0-RTT the handshake offered;
	// the requests were asked again on the connection that follows it.
	Rejected0RTT bool `json:"rejected_0rtt,omitempty"`
	Requests     int  `json:"requests"`
	// Origins are those the connection served, the first one it was
	// opened for; a later one was pooled onto it (same address, and the
	// certificate covers it), as browsers reuse HTTP/2 and HTTP/3
	// connections.
	Origins    []string `json:"origins"`
	DNSQueries int      `json:"dns_queries,omitempty"` // lookups coalesced onto it
	// Announced is the origin set the server's ORIGIN frames gave, and
	// OriginMs when the first arrived.
	Announced []string `json:"announced,omitempty"`
	OriginMs  float64  `json:"origin_ms,omitempty"`
	// AnnouncedIgnored counts announced origins past MaxAnnounced.
	AnnouncedIgnored int `json:"announced_ignored,omitempty"`
	// SettingsMs is when the server's HTTP/3 SETTINGS arrived; requests
	// waited for them with WaitSettings.
	SettingsMs     float64 `json:"settings_ms,omitempty"`
	WaitedSettings bool    `json:"waited_settings,omitempty"`
	// ECH is what the connection's Encrypted Client Hello came to, when
	// the host's HTTPS record gave a config: accepted, retried (rejected,
	// then accepted with the retry configs on a second handshake), or
	// offered (not accepted). Without a config Go's client sends GREASE.
	ECH        string `json:"ech,omitempty"`
	ECHRetried bool   `json:"ech_retried,omitempty"`
	Error      string `json:"error,omitempty"`
}
