// Package protocol is doxlab's one table of DNS transports: each
// protocol's name (as records, flags and tables spell it), URL scheme,
// default port, whether it runs over UDP, its HTTP version and its place
// in tables and figures. Endpoints, the measurement's ports, default
// lists, flag defaults and the order of every table derive from it.
package protocol

import (
	"image/color"
	"slices"
	"strings"
)

// The protocols' names.
const (
	UDP  = "udp"
	TCP  = "tcp"
	DoT  = "dot"
	DoH1 = "doh1"
	DoH2 = "doh2"
	DoH3 = "doh3"
	DoQ  = "doq"
	// ODoH is Oblivious DoH (RFC 9230): DoH to a proxy that relays the
	// query, sealed to the target, over HTTP/2 (or /3, an option).
	ODoH = "odoh"
)

// Protocol is one row of the table.
type Protocol struct {
	Name     string // udp, tcp, dot, doh1, doh2, doh3, doq, odoh
	Scheme   string // the URL scheme that names it: udp, tcp, tls, https, h3, quic, odoh
	Port     int    // the default port
	Datagram bool   // runs over UDP, plain or QUIC
	HTTP     string // DoH's HTTP version: "1.1", "2" or "3"; "" for the others
	Label    string // its name in figures: DoUDP, DoTCP, DoT, DoH/1.1, DoH, DoH3, DoQ
	// Secondary protocols are measured only when asked for: DoH/1.1 is
	// in no paper's default set.
	Secondary bool
	// Relayed protocols reach their resolver through a proxy (ODoH): an
	// experiment of one server and its clients (hol, overhead,
	// server-load) leaves them out (Direct).
	Relayed bool
	// Color is its colour in every figure: Okabe-Ito's palette, which
	// colour-blind readers tell apart, one colour a protocol.
	Color color.RGBA
	// Marker is the shape its lines are marked with, so that a series is
	// told apart without its colour (in greyscale print, say): circle,
	// ring, square, box, triangle, pyramid, cross or plus.
	Marker string
}

// Hides says what the protocol's lookups hide, and from whom: its rung
// on the privacy ladder (docs/privacy.md). The TLS ClientHello that
// follows a lookup is another rung (ECH), not the protocol's.
func (p Protocol) Hides() string {
	switch {
	case p.Relayed:
		return "names from the network, the client from the resolver"
	case p.Name == UDP || p.Name == TCP:
		return "nothing: names in clear"
	}
	return "names from the network"
}

// DoH says whether the protocol is DNS over HTTPS.
func (p Protocol) DoH() bool { return p.HTTP != "" }

// All is the table, in display order: plain before encrypted, TCP before
// QUIC.
var All = []Protocol{
	{Name: UDP, Scheme: "udp", Port: 53, Datagram: true, Label: "DoUDP", Color: color.RGBA{0x00, 0x00, 0x00, 0xff}, Marker: "circle"},
	{Name: TCP, Scheme: "tcp", Port: 53, Label: "DoTCP", Color: color.RGBA{0x00, 0x9e, 0x73, 0xff}, Marker: "square"},
	{Name: DoT, Scheme: "tls", Port: 853, Label: "DoT", Color: color.RGBA{0x56, 0xb4, 0xe9, 0xff}, Marker: "triangle"},
	{Name: DoH1, Scheme: "https", Port: 443, HTTP: "1.1", Label: "DoH/1.1", Secondary: true, Color: color.RGBA{0xcc, 0x79, 0xa7, 0xff}, Marker: "plus"},
	{Name: DoH2, Scheme: "https", Port: 443, HTTP: "2", Label: "DoH", Color: color.RGBA{0xd5, 0x5e, 0x00, 0xff}, Marker: "box"},
	{Name: DoH3, Scheme: "h3", Port: 443, Datagram: true, HTTP: "3", Label: "DoH3", Color: color.RGBA{0xe6, 0x9f, 0x00, 0xff}, Marker: "pyramid"},
	{Name: DoQ, Scheme: "quic", Port: 853, Datagram: true, Label: "DoQ", Color: color.RGBA{0x00, 0x72, 0xb2, 0xff}, Marker: "ring"},
	{Name: ODoH, Scheme: "odoh", Port: 443, HTTP: "2", Label: "ODoH", Secondary: true, Relayed: true, Color: color.RGBA{0x88, 0x88, 0x88, 0xff}, Marker: "cross"},
}

// Listener is the doxlab serve listener that speaks the protocol: DoH
// over HTTP/1.1 and HTTP/2 share "doh"; the others have their own name.
func (p Protocol) Listener() string {
	if p.DoH() && p.HTTP != "3" {
		return "doh"
	}
	return p.Name
}

// URL is the URL of the protocol at hostport, DoH's at dohPath; the HTTP
// version of DoH over TCP is an option, not part of the URL.
// ODoH's is the server relaying to itself, proxy and target at once.
func (p Protocol) URL(hostport, dohPath string) string {
	u := p.Scheme + "://" + hostport
	if p.DoH() {
		u += dohPath
	}
	if p.Name == ODoH {
		u += "?target=" + hostport + dohPath
	}
	return u
}

// RoundTrips is what an exchange on a new connection costs in round
// trips, by design: plain UDP 1; TCP 2 and QUIC 2 (a handshake, then the
// query); TLS 1.3 over TCP 3 (TCP's handshake, TLS's, the query).
func (p Protocol) RoundTrips() int {
	switch {
	case p.Datagram && p.Scheme == "udp":
		return 1
	case p.Datagram, p.Scheme == "tcp":
		return 2
	}
	return 3
}

// Lookup finds a protocol by name.
func Lookup(name string) (Protocol, bool) {
	i := slices.IndexFunc(All, func(p Protocol) bool { return p.Name == name })
	if i < 0 {
		return Protocol{}, false
	}
	return All[i], true
}

// ForScheme is the protocol a URL scheme names; https is DoH over
// HTTP/2, its default version.
func ForScheme(scheme string) (Protocol, bool) {
	for _, p := range All {
		if p.Scheme == scheme && (p.HTTP == "" || p.HTTP == "2" || p.HTTP == "3") {
			return p, true
		}
	}
	return Protocol{}, false
}

// Names lists the names of the protocols keep accepts (all for nil), in
// display order.
func Names(keep func(Protocol) bool) []string {
	var out []string
	for _, p := range All {
		if keep == nil || keep(p) {
			out = append(out, p.Name)
		}
	}
	return out
}

// Default is the protocols measured unless told otherwise: all but the
// secondary ones.
func Default() []string { return Names(func(p Protocol) bool { return !p.Secondary }) }

// Direct is every protocol a client speaks to its resolver itself, in
// display order: all but the relayed ones.
func Direct() []string { return Names(func(p Protocol) bool { return !p.Relayed }) }

// Schemes lists the URL schemes, each once, in display order.
func Schemes() []string {
	var out []string
	for _, p := range All {
		if !slices.Contains(out, p.Scheme) {
			out = append(out, p.Scheme)
		}
	}
	return out
}

// OneOf spells a list for an error message: "udp, tcp or doq".
func OneOf(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// InOrder marks a stream protocol whose server answers pipelined queries
// strictly in query order, as many resolvers do (the hol experiment's
// "tcp-inorder" and "dot-inorder").
const InOrder = "-inorder"

// Pipelined says whether a client may send queries back to back on one
// connection that the server may answer out of order (RFC 7766 §6.2.1.1):
// DNS over TCP and DoT, which InOrder variants exist for.
func (p Protocol) Pipelined() bool { return !p.Datagram && !p.DoH() }

// AnswersInOrder says whether a connection of the named transport (a
// WithVariants name) returns answers in query order, so that one late
// answer holds back those behind it: DoH/1.1 (HTTP/1.1 answers in
// request order) and the InOrder variants (a TCP or DoT server that
// answers in query order, as many do).
func AnswersInOrder(name string) bool {
	base, inOrder := strings.CutSuffix(name, InOrder)
	p, ok := Lookup(base)
	return ok && (inOrder && p.Pipelined() || p.HTTP == "1.1")
}

// Independent says whether each query on a connection of the named
// transport travels apart from the others, a datagram or a stream of
// its own (UDP, HTTP/2, HTTP/3, QUIC), so that no answer waits for
// another's. Plain TCP and DoT are neither this nor in order: their
// answers may overtake each other, on one byte stream.
func Independent(name string) bool {
	p, ok := Lookup(name)
	return ok && (p.Datagram || p.HTTP == "2")
}

// WithVariants lists every direct protocol in display order, each
// pipelined one followed by its InOrder variant.
func WithVariants() []string {
	var out []string
	for _, p := range All {
		if p.Relayed {
			continue
		}
		out = append(out, p.Name)
		if p.Pipelined() {
			out = append(out, p.Name+InOrder)
		}
	}
	return out
}
