// Package h3server serves HTTP/3 on QUIC connections its caller
// accepts, one Conn per connection, as quic-go's http3.RawServerConn
// does, but with a control stream of its own: quic-go writes its control
// stream itself with no way to add a frame, and RFC 9412 puts the ORIGIN
// frame there (docs/origin.md).
//
// It speaks what doxlab's web listener needs and no more: requests with
// bodies and trailers, responses with flushes and informational
// responses, RFC 9218 priorities, QPACK without a dynamic table. No
// server push, no datagrams, no extended CONNECT, no response trailers.
package h3server

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/qpack"
	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"github.com/quic-go/quic-go/quicvarint"

	"github.com/doxlab/doxlab/internal/h3ext"
)

// Config is what every connection of one listener shares.
type Config struct {
	Handler http.Handler
	// MaxHeaderBytes bounds a request's header section, read whole
	// before it is parsed; one larger gets 431. It is advertised as
	// SETTINGS_MAX_FIELD_SECTION_SIZE.
	MaxHeaderBytes int
	// IdleTimeout closes a connection with no request in flight for
	// this long (H3_NO_ERROR); 0 never does.
	IdleTimeout time.Duration
	// Settings are sent beside SETTINGS_MAX_FIELD_SECTION_SIZE.
	Settings map[uint64]uint64
	// ControlFrames are written on the control stream right after
	// SETTINGS, in the server's first flight (an ORIGIN frame).
	ControlFrames []byte
}

// Conn is the HTTP/3 server side of one QUIC connection. The caller
// accepts its streams and hands them to HandleRequestStream and
// HandleUnidirectionalStream, so it may take some for itself first.
type Conn struct {
	qc  *quic.Conn
	cfg *Config
	ctx context.Context
	dec *qpack.Decoder

	peerControl, peerEncoder, peerDecoder atomic.Bool
	priorityAware                         atomic.Bool // the client has sent an RFC 9218 signal

	mu      sync.Mutex
	streams map[quic.StreamID]*quic.Stream // requests in flight, for PRIORITY_UPDATE
	idle    *time.Timer
}

// New opens the connection's control stream and writes its SETTINGS
// and cfg.ControlFrames. ctx is every request's base context.
func New(ctx context.Context, qc *quic.Conn, cfg *Config) (*Conn, error) {
	c := &Conn{qc: qc, cfg: cfg, ctx: ctx, dec: qpack.NewDecoder(), streams: map[quic.StreamID]*quic.Stream{}}
	str, err := qc.OpenUniStream()
	if err != nil {
		return nil, fmt.Errorf("opening the control stream: %w", err)
	}
	settings := maps.Clone(cfg.Settings)
	if settings == nil {
		settings = map[uint64]uint64{}
	}
	settings[h3ext.SettingMaxFieldSection] = uint64(c.maxHeaderBytes())
	b := quicvarint.Append(nil, h3ext.StreamControl)
	b = h3ext.AppendSettings(b, settings)
	b = append(b, cfg.ControlFrames...)
	// The control stream stays open for the connection's life: a peer
	// takes its end as a connection error (RFC 9114 §6.2.1).
	if _, err := str.Write(b); err != nil {
		return nil, fmt.Errorf("writing the control stream: %w", err)
	}
	if cfg.IdleTimeout > 0 {
		c.idle = time.AfterFunc(cfg.IdleTimeout, func() { c.closeWith(http3.ErrCodeNoError, "idle timeout") })
	}
	return c, nil
}

func (c *Conn) maxHeaderBytes() int {
	if c.cfg.MaxHeaderBytes <= 0 {
		return http.DefaultMaxHeaderBytes
	}
	return c.cfg.MaxHeaderBytes
}

func (c *Conn) closeWith(code http3.ErrCode, msg string) {
	c.qc.CloseWithError(quic.ApplicationErrorCode(code), msg)
}

// HandleUnidirectionalStream reads one of the client's unidirectional
// streams: its control stream, until the connection ends; its QPACK
// streams, drained (with no dynamic table there is nothing to learn);
// any other type is refused (RFC 9114 §6.2.3).
func (c *Conn) HandleUnidirectionalStream(str *quic.ReceiveStream) {
	str.ReleaseStreamCredit()
	r := quicvarint.NewReader(str)
	typ, err := quicvarint.Read(r)
	if err != nil {
		return
	}
	switch typ {
	case h3ext.StreamControl:
		if !c.peerControl.CompareAndSwap(false, true) {
			c.closeWith(http3.ErrCodeStreamCreationError, "a second control stream")
			return
		}
		c.readControl(r)
	case h3ext.StreamQPACKEncoder, h3ext.StreamQPACKDecoder:
		seen := &c.peerEncoder
		if typ == h3ext.StreamQPACKDecoder {
			seen = &c.peerDecoder
		}
		if !seen.CompareAndSwap(false, true) {
			c.closeWith(http3.ErrCodeStreamCreationError, "a second QPACK stream of one type")
			return
		}
		io.Copy(io.Discard, str)
	case h3ext.StreamPush:
		c.closeWith(http3.ErrCodeStreamCreationError, "a push stream from a client")
	default:
		str.CancelRead(quic.StreamErrorCode(http3.ErrCodeStreamCreationError))
	}
}

// readControl reads the client's control stream: SETTINGS first, then
// PRIORITY_UPDATE frames, which reprioritize requests in flight.
// Unknown frames are skipped (RFC 9114 §9).
func (c *Conn) readControl(r quicvarint.Reader) {
	for first := true; ; first = false {
		typ, n, err := h3ext.ReadFrameHeader(r)
		if err != nil {
			c.closeWith(http3.ErrCodeClosedCriticalStream, "the control stream ended")
			return
		}
		if first && typ != h3ext.FrameSettings {
			c.closeWith(http3.ErrCodeMissingSettings, "")
			return
		}
		switch {
		case typ == h3ext.FrameSettings:
			if !first {
				c.closeWith(http3.ErrCodeFrameUnexpected, "a second SETTINGS frame")
				return
			}
			payload, err := h3ext.ReadPayload(r, n)
			if err != nil {
				c.closeWith(http3.ErrCodeFrameError, "")
				return
			}
			if _, err := h3ext.ParseSettings(payload); err != nil {
				c.closeWith(http3.ErrCodeSettingsError, err.Error())
				return
			}
		case typ == h3ext.FramePriorityUpdate:
			payload, err := h3ext.ReadPayload(r, n)
			if err != nil {
				c.closeWith(http3.ErrCodeFrameError, "")
				return
			}
			id, k, err := quicvarint.Parse(payload)
			if err != nil {
				c.closeWith(http3.ErrCodeFrameError, "")
				return
			}
			if id%4 != 0 { // not a client-initiated bidirectional stream
				c.closeWith(http3.ErrCodeIDError, "")
				return
			}
			c.priorityAware.Store(true)
			u, i := parsePriority(string(payload[k:]))
			c.mu.Lock()
			if str := c.streams[quic.StreamID(id)]; str != nil {
				str.SetPriority(u, i) // one not yet open keeps its own signal
			}
			c.mu.Unlock()
		case typ == h3ext.FramePriorityUpdatePush:
			c.closeWith(http3.ErrCodeIDError, "no push was promised")
			return
		case h3ext.UnexpectedOnControl(typ):
			c.closeWith(http3.ErrCodeFrameUnexpected, "")
			return
		default: // GOAWAY, MAX_PUSH_ID, CANCEL_PUSH (no push here) and unknown frames
			if err := h3ext.Skip(r, n); err != nil {
				c.closeWith(http3.ErrCodeClosedCriticalStream, "the control stream ended")
				return
			}
		}
	}
}

// begin and end keep count of requests in flight, for PRIORITY_UPDATE
// and the idle timeout.
func (c *Conn) begin(str *quic.Stream) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.streams[str.StreamID()] = str
	if c.idle != nil {
		c.idle.Stop()
	}
}

func (c *Conn) end(str *quic.Stream) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.streams, str.StreamID())
	if len(c.streams) == 0 && c.idle != nil {
		c.idle.Reset(c.cfg.IdleTimeout)
	}
}
