// Package verify checks candidates from a discovery scan the way the PAM
// 2022 paper did, and more strictly: a QUIC handshake offering QUIC v1
// and v2 and the DoQ ALPNs (doq and the drafts doq-i00 ... doq-i11), and
// then a real DNS query, since a handshake alone does not make a DNS
// server (the paper's tool counted one). It records the negotiated
// versions and ALPN, the certificate chain, Retry, NEW_TOKEN and 0-RTT.
package verify

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/x509"
	"encoding/asn1"
	"fmt"
	"os/exec"
	"time"

	"github.com/miekg/dns"
	"github.com/quic-go/quic-go"

	"github.com/doxlab/doxlab/probe"
	"github.com/doxlab/doxlab/transport"
)

// DoQ is what one candidate turned out to be.
type DoQ struct {
	Target string `json:"target"` // ip:port
	// Verdict: doq (a DNS answer over DoQ), handshake-only (QUIC with a
	// DoQ ALPN, but no DNS answer), quic-not-doq (QUIC, no DoQ ALPN),
	// no-quic (no Version Negotiation, no handshake).
	Verdict string   `json:"verdict"`
	Error   string   `json:"error,omitempty"`
	Offered []string `json:"versions_offered,omitempty"` // from Version Negotiation, hex

	QUICVersion string  `json:"quic_version,omitempty"`
	ALPN        string  `json:"alpn,omitempty"`
	Rcode       string  `json:"rcode,omitempty"`
	HandshakeMs float64 `json:"handshake_ms,omitempty"`
	Retry       bool    `json:"retry"`
	// From a second connection with the first's ticket and token.
	TokenAccepted bool `json:"token_used"`
	Resumed       bool `json:"resumed"`
	ZeroRTT       bool `json:"zero_rtt"`
	// TicketLifetimeS is the session ticket's lifetime in seconds.
	TicketLifetimeS int64 `json:"ticket_lifetime_s"`

	Cert *Cert `json:"certificate,omitempty"`
}

// Cert summarises a certificate chain.
type Cert struct {
	Subject  string    `json:"subject"`
	SANs     []string  `json:"sans,omitempty"`
	Issuer   string    `json:"issuer"`
	KeyType  string    `json:"key_type"`
	KeyBits  int       `json:"key_bits"`
	Chain    int       `json:"chain_certificates"`
	Octets   int       `json:"chain_octets"`
	NotAfter time.Time `json:"not_after"`
	SelfSign bool      `json:"self_signed"`
	// SCT: the leaf embeds Certificate Transparency timestamps (RFC 6962);
	// MustStaple: it has the TLS feature status_request (RFC 7633).
	SCT        bool `json:"ct_embedded_sct"`
	MustStaple bool `json:"ocsp_must_staple"`
}

var (
	oidSCT        = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 11129, 2, 4, 2}
	oidTLSFeature = asn1.ObjectIdentifier{1, 3, 6, 1, 5, 5, 7, 1, 24}
)

// Options configure a verification.
type Options struct {
	Name        string        // the query; default example.com A
	Timeout     time.Duration // per step; default 5 s
	OpenSockets func(open func() error) error
	// Command runs a helper program (the QUIC-draft client) where the
	// sockets should be; nil runs it here. The testbed's Command fits.
	Command func(argv ...string) *exec.Cmd
}

// VerifyDoQ checks one candidate.
func VerifyDoQ(ctx context.Context, target string, o Options) *DoQ {
	o.defaults()
	r := &DoQ{Target: target}
	pctx, cancel := context.WithTimeout(ctx, o.Timeout)
	var vn probe.Result
	var perr error
	openIn(o, func() error { vn, perr = probe.QUIC(pctx, target); return nil })
	cancel()
	for _, v := range vn.Versions {
		r.Offered = append(r.Offered, fmt.Sprintf("0x%08x", v))
	}
	sess := transport.NewSession(transport.SessionConfig{Tickets: true, Tokens: true, Versions: true})
	opts := transport.Options{Insecure: true, Timeout: o.Timeout, Session: sess, ZeroRTT: true, OpenSockets: o.OpenSockets,
		QUICVersions: []quic.Version{quic.Version1, quic.Version2}, DoQALPNs: append([]string{"doq"}, transport.DraftDoQALPNs...)}
	q := new(dns.Msg)
	q.SetQuestion(dns.Fqdn(o.Name), dns.TypeA)
	q.RecursionDesired = true
	rec, err := exchange(ctx, target, opts, q)
	c := rec.Conn
	r.QUICVersion, r.ALPN, r.Retry, r.HandshakeMs = c.QUICVersion, c.ALPN, c.Retry, rec.Timing.HandshakeMs
	r.Cert = summarize(c.PeerCertificates)
	r.TicketLifetimeS = int64(sess.TicketLifetime().Seconds())
	switch {
	case err == nil:
		r.Verdict, r.Rcode = "doq", rec.Rcode
	case c.ALPN != "":
		r.Verdict, r.Error = "handshake-only", err.Error()
	case perr == nil: // it answered Version Negotiation, but no DoQ handshake
		r.Verdict, r.Error = "quic-not-doq", err.Error()
	default:
		r.Verdict, r.Error = "no-quic", err.Error()
	}
	if r.Verdict != "doq" {
		// Servers from the DoQ drafts' days may speak only a QUIC draft.
		if r.Verdict != "handshake-only" {
			tryDrafts(ctx, target, o, r)
		}
		return r
	}
	// A second connection: does the ticket resume, is 0-RTT accepted, is
	// the NEW_TOKEN token taken?
	if again, err := exchange(ctx, target, opts, q); err == nil {
		r.TokenAccepted, r.Resumed, r.ZeroRTT = again.Conn.TokenUsed, again.Conn.TLSResumed, again.Conn.Used0RTT
	}
	return r
}

func exchange(ctx context.Context, target string, opts transport.Options, q *dns.Msg) (*transport.Record, error) {
	t, err := transport.New("quic://"+target, opts)
	if err != nil {
		return &transport.Record{Status: transport.StatusBadRequest, Error: err.Error()}, err
	}
	defer t.Close()
	return t.Exchange(ctx, q.Copy())
}

func summarize(chain []*x509.Certificate) *Cert {
	if len(chain) == 0 {
		return nil
	}
	leaf := chain[0]
	c := &Cert{Subject: leaf.Subject.String(), SANs: leaf.DNSNames, Issuer: leaf.Issuer.String(), Chain: len(chain), NotAfter: leaf.NotAfter,
		SelfSign: leaf.Subject.String() == leaf.Issuer.String()}
	for _, ip := range leaf.IPAddresses {
		c.SANs = append(c.SANs, ip.String())
	}
	for _, x := range chain {
		c.Octets += len(x.Raw)
	}
	for _, e := range leaf.Extensions {
		switch {
		case e.Id.Equal(oidSCT):
			c.SCT = true
		case e.Id.Equal(oidTLSFeature):
			var features []int
			if _, err := asn1.Unmarshal(e.Value, &features); err == nil {
				for _, f := range features {
					c.MustStaple = c.MustStaple || f == 5 // status_request
				}
			}
		}
	}
	switch k := leaf.PublicKey.(type) {
	case *rsa.PublicKey:
		c.KeyType, c.KeyBits = "RSA", k.N.BitLen()
	case *ecdsa.PublicKey:
		c.KeyType, c.KeyBits = "ECDSA", k.Curve.Params().BitSize
	case ed25519.PublicKey:
		c.KeyType, c.KeyBits = "Ed25519", 256
	}
	return c
}
