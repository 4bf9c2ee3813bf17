package transport

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"

	"github.com/miekg/dns"

	"github.com/doxlab/doxlab/internal/dnswire"
	"github.com/quic-go/quic-go"
	"golang.org/x/net/http2"
)

// Status says how an exchange ended, from a closed set (like zgrab2's), so
// that stored samples can be grouped by cause without parsing error text.
type Status string

// The statuses. The first four carry a parsed response.
const (
	StatusOK         Status = "ok"          // NOERROR
	StatusNXDomain   Status = "nxdomain"    // rcode NXDOMAIN
	StatusServFail   Status = "servfail"    // rcode SERVFAIL
	StatusRcode      Status = "rcode-error" // any other non-zero rcode (REFUSED, FORMERR, NOTIMP, ...)
	StatusTruncated  Status = "truncated"   // UDP answer with TC set
	StatusTimeout    Status = "timeout"     // nothing (complete) arrived in time
	StatusRefused    Status = "refused"     // connection refused or ICMP port unreachable
	StatusUnreach    Status = "unreachable" // no route, host or network unreachable
	StatusResolve    Status = "resolve-error"
	StatusTLS        Status = "tls-error"
	StatusCert       Status = "cert-error"
	StatusQUIC       Status = "quic-error"
	StatusReset      Status = "stream-reset" // the server reset the query's stream: HTTP/2 RST_STREAM, QUIC RESET_STREAM
	StatusHTTP       Status = "http-error"
	StatusMalformed  Status = "malformed" // bad framing or a message that does not parse or match the query
	StatusClosed     Status = "closed"    // the server closed the connection without answering
	StatusCanceled   Status = "canceled"
	StatusError      Status = "error" // anything else; see the error text
	StatusBadRequest Status = "bad-input"
	StatusBlocked    Status = "blocked" // Options.Refuse refused the server's address: nothing was sent
)

// ErrNotAllowed is a server address Options.Refuse refused.
var ErrNotAllowed = errors.New("address not allowed")

// HasResponse reports whether a record with this status carries an answer.
func (s Status) HasResponse() bool {
	switch s {
	case StatusOK, StatusNXDomain, StatusServFail, StatusRcode, StatusTruncated:
		return true
	}
	return false
}

// StatusForRcode is the status of an answer with rcode.
func StatusForRcode(rcode int) Status {
	switch rcode {
	case dns.RcodeSuccess:
		return StatusOK
	case dns.RcodeNameError:
		return StatusNXDomain
	case dns.RcodeServerFailure:
		return StatusServFail
	}
	return StatusRcode
}

// ErrMalformed marks a peer that broke the protocol: bad framing, a message
// that does not parse, or an answer to a question we did not ask.
var ErrMalformed = dnswire.ErrMalformed

// HTTPError is a DoH answer with a status other than 200.
type HTTPError = dnswire.HTTPError

// errClosed is a connection the server ended before the answer came.
var errClosed = errors.New("server closed the connection")

// errTLSHandshake marks a failed TLS handshake whose cause crypto/tls does not
// type (a remote alert, an EOF mid-handshake).
var errTLSHandshake = errors.New("TLS handshake")

// tlsErr labels a handshake error that Classify would not place otherwise.
func tlsErr(err error) error {
	if Classify(err) == StatusError || Classify(err) == StatusClosed {
		return fmt.Errorf("%w: %w", errTLSHandshake, err)
	}
	return err
}

var malformed = dnswire.Malformed

// Classify maps an error from any transport to a Status. Order matters:
// certificate errors are also TLS errors, and QUIC wraps TLS alerts.
func Classify(err error) Status {
	if err == nil {
		return StatusOK
	}
	var (
		certErr    *tls.CertificateVerificationError
		unknownCA  x509.UnknownAuthorityError
		hostErr    x509.HostnameError
		invalidErr x509.CertificateInvalidError
		alertErr   tls.AlertError
		recErr     tls.RecordHeaderError
		httpErr    *HTTPError
		dnsErr     *net.DNSError
		idleErr    *quic.IdleTimeoutError
		hsErr      *quic.HandshakeTimeoutError
		trErr      *quic.TransportError
		appErr     *quic.ApplicationError
		vnErr      *quic.VersionNegotiationError
		strErr     *quic.StreamError
		h2Err      http2.StreamError // net/http's bundled copy converts to it (errors.As)
		netErr     net.Error
	)
	switch {
	case errors.Is(err, ErrNotAllowed):
		return StatusBlocked
	case errors.Is(err, errClosed), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return StatusClosed
	case errors.Is(err, ErrMalformed):
		return StatusMalformed
	case errors.As(err, &httpErr):
		return StatusHTTP
	case errors.As(err, &certErr), errors.As(err, &unknownCA), errors.As(err, &hostErr), errors.As(err, &invalidErr):
		return StatusCert
	case errors.Is(err, syscall.ECONNREFUSED):
		return StatusRefused
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH), errors.Is(err, syscall.EHOSTDOWN), errors.Is(err, syscall.EADDRNOTAVAIL):
		return StatusUnreach
	case errors.As(err, &dnsErr):
		return StatusResolve
	case errors.As(err, &idleErr), errors.As(err, &hsErr):
		return StatusTimeout
	case errors.As(err, &trErr):
		if trErr.ErrorCode.IsCryptoError() {
			// CRYPTO_ERROR carries a TLS alert (RFC 9001 §4.8); 42-46 and 48 are certificate alerts.
			switch uint8(trErr.ErrorCode & 0xff) {
			case 42, 43, 44, 45, 46, 48:
				return StatusCert
			}
			return StatusTLS
		}
		return StatusQUIC
	case errors.As(err, &strErr) && strErr.Remote, errors.As(err, &h2Err):
		// One status for a reset stream, whichever layer reset it, so
		// that DoH/2, DoH/3 and DoQ compare.
		return StatusReset
	case errors.As(err, &appErr), errors.As(err, &vnErr), errors.As(err, &strErr):
		return StatusQUIC
	case errors.As(err, &alertErr), errors.As(err, &recErr):
		return StatusTLS
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		return StatusTimeout
	case errors.Is(err, context.Canceled):
		return StatusCanceled
	case errors.As(err, &netErr) && netErr.Timeout():
		return StatusTimeout
	case errors.Is(err, errTLSHandshake):
		return StatusTLS
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		// After the handshake (tlsErr labels EOFs inside it), an EOF is
		// the server ending the connection before its answer was whole.
		return StatusClosed
	}
	return StatusError
}
