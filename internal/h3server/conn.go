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
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
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
	// StreamTimeout bounds the wait for a unidirectional stream's type;
	// one that has not come whole by then is refused, so a peer cannot
	// park streams of one octet until the connection ends. 0: no bound.
	StreamTimeout time.Duration
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
	// pending are PRIORITY_UPDATEs for requests not yet open, applied
	// when they open, over their own Priority field (RFC 9218 §7.1);
	// at most maxPending, the oldest dropped first.
	pending      map[quic.StreamID]priority
	pendingOrder []quic.StreamID
	held         int // the caller's streams in flight (Hold)
	idle         *time.Timer
}

// priority is an RFC 9218 signal.
type priority struct {
	urgency     int8
	incremental bool
}

// maxPending bounds the PRIORITY_UPDATEs held for requests not yet open.
const maxPending = 64

// errCodeQPACKEncoderStream and errCodeQPACKDecoderStream are RFC 9204's
// stream errors (§6), which quic-go's http3 does not name.
const (
	errCodeQPACKEncoderStream http3.ErrCode = 0x201
	errCodeQPACKDecoderStream http3.ErrCode = 0x202
)

// New opens the connection's control stream and writes its SETTINGS
// and cfg.ControlFrames. ctx is every request's base context.
func New(ctx context.Context, qc *quic.Conn, cfg *Config) (*Conn, error) {
	c := &Conn{qc: qc, cfg: cfg, ctx: ctx, dec: qpack.NewDecoder(), streams: map[quic.StreamID]*quic.Stream{}, pending: map[quic.StreamID]priority{}}
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
// streams, checked against a dynamic table of capacity 0 (RFC 9204);
// any other type is refused (RFC 9114 §6.2.3).
func (c *Conn) HandleUnidirectionalStream(str *quic.ReceiveStream) {
	if c.cfg.StreamTimeout > 0 {
		str.SetReadDeadline(time.Now().Add(c.cfg.StreamTimeout))
	}
	r := quicvarint.NewReader(str)
	typ, err := quicvarint.Read(r)
	if err != nil {
		str.CancelRead(quic.StreamErrorCode(http3.ErrCodeStreamCreationError))
		return
	}
	str.SetReadDeadline(time.Time{})
	// The control and QPACK streams live as long as the connection: they
	// count against no limit of the peer's.
	str.ReleaseStreamCredit()
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
		if typ == h3ext.StreamQPACKEncoder {
			c.readEncoder(r)
			return
		}
		// The decoder stream's instructions are about a dynamic table
		// this side never uses: read, until the connection ends.
		if _, err := io.Copy(io.Discard, r); err == nil {
			c.closeWith(http3.ErrCodeClosedCriticalStream, "the QPACK decoder stream ended")
		}
	case h3ext.StreamPush:
		c.closeWith(http3.ErrCodeStreamCreationError, "a push stream from a client")
	default:
		str.CancelRead(quic.StreamErrorCode(http3.ErrCodeStreamCreationError))
	}
}

// readEncoder reads the client's QPACK encoder stream. This side
// allows a dynamic table of capacity 0 (SETTINGS_QPACK_MAX_TABLE_CAPACITY
// unsent), so the only instruction it may carry is Set Dynamic Table
// Capacity to 0; any other, or a capacity above 0, is
// QPACK_ENCODER_STREAM_ERROR, and the stream's end is
// H3_CLOSED_CRITICAL_STREAM (RFC 9204 §4.2, §4.3.1).
func (c *Conn) readEncoder(r quicvarint.Reader) {
	for {
		b, err := r.ReadByte()
		if err != nil {
			if errors.Is(err, io.EOF) {
				c.closeWith(http3.ErrCodeClosedCriticalStream, "the QPACK encoder stream ended")
			}
			return
		}
		if b&0xe0 != 0x20 { // not Set Dynamic Table Capacity
			c.closeWith(errCodeQPACKEncoderStream, "an instruction for a dynamic table of capacity 0")
			return
		}
		capacity := uint64(b & 0x1f)
		if capacity == 0x1f { // a longer integer (RFC 7541 §5.1): more than 0 anyway
			c.closeWith(errCodeQPACKEncoderStream, "a dynamic table capacity above 0")
			return
		}
		if capacity != 0 {
			c.closeWith(errCodeQPACKEncoderStream, "a dynamic table capacity above 0")
			return
		}
	}
}

// readControl reads the client's control stream: SETTINGS first, then
// PRIORITY_UPDATE frames, which reprioritize requests; GOAWAY and
// MAX_PUSH_ID are held to their order and CANCEL_PUSH refused (no push
// is ever promised here). Unknown frames are skipped (RFC 9114 §9).
func (c *Conn) readControl(r quicvarint.Reader) {
	var goaway, maxPushID uint64
	var goawaySeen, maxPushSeen bool
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
			c.reprioritize(quic.StreamID(id), priority{u, i})
		case typ == h3ext.FramePriorityUpdatePush, typ == h3ext.FrameCancelPush:
			c.closeWith(http3.ErrCodeIDError, "no push was promised")
			return
		case typ == h3ext.FrameGoAway, typ == h3ext.FrameMaxPushID:
			payload, err := h3ext.ReadPayload(r, n)
			if err != nil {
				c.closeWith(http3.ErrCodeFrameError, "")
				return
			}
			id, k, err := quicvarint.Parse(payload)
			if err != nil || k != len(payload) {
				c.closeWith(http3.ErrCodeFrameError, "")
				return
			}
			// A client's GOAWAY names a push ID and may only shrink; its
			// MAX_PUSH_ID may only grow (RFC 9114 §5.2, §7.2.7).
			if typ == h3ext.FrameGoAway {
				if goawaySeen && id > goaway {
					c.closeWith(http3.ErrCodeIDError, "a GOAWAY whose push ID grew")
					return
				}
				goaway, goawaySeen = id, true
			} else {
				if maxPushSeen && id < maxPushID {
					c.closeWith(http3.ErrCodeIDError, "a MAX_PUSH_ID that shrank")
					return
				}
				maxPushID, maxPushSeen = id, true
			}
		case h3ext.UnexpectedOnControl(typ):
			c.closeWith(http3.ErrCodeFrameUnexpected, "")
			return
		default: // unknown frames
			if err := h3ext.Skip(r, n); err != nil {
				c.closeWith(http3.ErrCodeClosedCriticalStream, "the control stream ended")
				return
			}
		}
	}
}

// reprioritize applies a PRIORITY_UPDATE to request id, in flight, or
// holds it for the request to open.
func (c *Conn) reprioritize(id quic.StreamID, p priority) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if str := c.streams[id]; str != nil {
		str.SetPriority(p.urgency, p.incremental)
		return
	}
	if _, ok := c.pending[id]; !ok {
		if len(c.pendingOrder) >= maxPending {
			delete(c.pending, c.pendingOrder[0])
			c.pendingOrder = c.pendingOrder[1:]
		}
		c.pendingOrder = append(c.pendingOrder, id)
	}
	c.pending[id] = p
}

// begin and end keep count of requests in flight, for PRIORITY_UPDATE
// and the idle timeout.
func (c *Conn) begin(str *quic.Stream) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.streams[str.StreamID()] = str
	c.busyLocked()
}

// takePending is the PRIORITY_UPDATE held for request id, if one came
// before it opened.
func (c *Conn) takePending(id quic.StreamID) (priority, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.pending[id]
	if ok {
		delete(c.pending, id)
		c.pendingOrder = slices.DeleteFunc(c.pendingOrder, func(x quic.StreamID) bool { return x == id })
	}
	return p, ok
}

func (c *Conn) end(str *quic.Stream) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.streams, str.StreamID())
	c.idleLocked()
}

// Hold keeps the connection from its idle timeout while a stream the
// caller took for itself (a DNS stream) is in flight, as a request does;
// the returned func lets it go.
func (c *Conn) Hold() (release func()) {
	c.mu.Lock()
	c.held++
	c.busyLocked()
	c.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			c.held--
			c.idleLocked()
			c.mu.Unlock()
		})
	}
}

func (c *Conn) busyLocked() {
	if c.idle != nil {
		c.idle.Stop()
	}
}

// idleLocked starts the idle timeout once nothing is in flight.
func (c *Conn) idleLocked() {
	if len(c.streams) == 0 && c.held == 0 && c.idle != nil {
		c.idle.Reset(c.cfg.IdleTimeout)
	}
}
