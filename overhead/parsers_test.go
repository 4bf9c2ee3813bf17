package overhead

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
	"github.com/stretchr/testify/require"
)

// spans reads labels back as runs: "headers:40 dns:33" for 40 octets of
// HTTP headers then 33 of DNS.
func spans(labels []Layer) string {
	var out []string
	for i := 0; i < len(labels); {
		j := i
		for j < len(labels) && labels[j] == labels[i] {
			j++
		}
		out = append(out, labels[i].String()+":"+strconv.Itoa(j-i))
		i = j
	}
	return strings.Join(out, " ")
}

// TestHTTP1Labels: a DoH/1.1 exchange's header block (its blank line
// in) is HTTP headers and its body, as long as Content-Length says, the
// DNS message; messages one after another on a connection each so; a
// block without its end is headers to the end; a length past the data
// is DNS to the end (however large); a length that is no count
// (negative, not a number) is no body, never a step back into what was
// labelled.
func TestHTTP1Labels(t *testing.T) {
	msg := func(head string, body int) string {
		return head + "\r\n\r\n" + strings.Repeat("d", body)
	}
	resp := msg("HTTP/1.1 200 OK\r\nContent-Type: application/dns-message\r\nContent-Length: 33", 33)
	for _, c := range []struct {
		name, in, want string
	}{
		{"one answer", resp, "http-headers:" + strconv.Itoa(len(resp)-33) + " dns:33"},
		{"two answers", resp + resp, "http-headers:" + strconv.Itoa(len(resp)-33) + " dns:33 http-headers:" + strconv.Itoa(len(resp)-33) + " dns:33"},
		{"a GET, no body", msg("GET /dns-query?dns=AAAB HTTP/1.1\r\nHost: r", 0), "http-headers:45"},
		{"the length's name in any case, spaced", msg("HTTP/1.1 200 OK\r\ncontent-LENGTH :  4 ", 4), "http-headers:41 dns:4"},
		{"cut in the headers", "HTTP/1.1 200 OK\r\nContent-Le", "http-headers:27"},
		{"cut in the body", msg("HTTP/1.1 200 OK\r\nContent-Length: 100", 10), "http-headers:40 dns:10"},
		{"a negative length", msg("HTTP/1.1 200 OK\r\nContent-Length: -50", 7), "http-headers:47"},
		{"a length past any capture", msg("HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999999", 3), "http-headers:60 dns:3"},
		{"no number", msg("HTTP/1.1 200 OK\r\nContent-Length: x", 3), "http-headers:41"},
	} {
		labels := make([]Layer, len(c.in))
		http1Labels([]byte(c.in), labels)
		require.Equal(t, c.want, spans(labels), c.name)
	}
}

// frame is an HTTP/2 frame: its 9-octet header and payload.
func frame(typ, flags byte, payload string) string {
	n := len(payload)
	return string([]byte{byte(n >> 16), byte(n >> 8), byte(n), typ, flags, 0, 0, 0, 1}) + payload
}

// TestHTTP2Labels: the client's preface and SETTINGS, PING and
// WINDOW_UPDATE are management; HEADERS and CONTINUATION are headers; a
// DATA frame's header and padding are headers and its payload the DNS
// message; a frame cut short is labelled as far as it goes, and octets
// too few for a frame header are management.
func TestHTTP2Labels(t *testing.T) {
	const preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
	padded := "\x05" + strings.Repeat("d", 12) + strings.Repeat("\x00", 5) // pad length, DNS, padding
	for _, c := range []struct {
		name, in, want string
	}{
		{"the client's first flight", preface + frame(4, 0, "ssssss") + frame(1, 4, "hhhhh") + frame(0, 1, strings.Repeat("d", 33)),
			"http-mgmt:39 http-headers:23 dns:33"},
		{"a continuation", frame(1, 0, "hh") + frame(9, 4, "cc"), "http-headers:22"},
		{"padded data", frame(0, 0x08, padded), "http-headers:10 dns:12 http-headers:5"},
		{"padding past the frame", frame(0, 0x08, "\xff"+"dd"), "http-headers:12"},
		{"ping and window update", frame(6, 0, "pppppppp") + frame(8, 0, "wwww"), "http-mgmt:30"},
		{"data cut short", frame(0, 0, strings.Repeat("d", 20))[:15], "http-headers:9 dns:6"},
		{"a tail too short for a header", frame(1, 0, "h") + "\x00\x00", "http-headers:10 http-mgmt:2"},
	} {
		labels := make([]Layer, len(c.in))
		http2Labels([]byte(c.in), labels)
		require.Equal(t, c.want, spans(labels), c.name)
	}
	// A server's stream starts with its SETTINGS frame, which tells it
	// from HTTP/1.1.
	require.True(t, looksHTTP2([]byte(frame(4, 0, ""))))
	require.False(t, looksHTTP2([]byte("HTTP/1.1 200 OK\r\n")))
	require.False(t, looksHTTP2([]byte{0, 0, 0, 4}), "too short for a frame header")
	require.Equal(t, "dns:33", spans(appLabels("dot", 1, make([]byte, 33))), "DoT's message and its prefix")
}

// TestH3Labels: on a request stream, HEADERS frames are headers and a
// DATA frame's type and length are headers, its payload the DNS
// message, other frames management; a unidirectional stream (control,
// QPACK) is management whole; a frame header cut short is headers to
// the end.
func TestH3Labels(t *testing.T) {
	for _, c := range []struct {
		name string
		id   uint64
		in   []byte
		want string
	}{
		{"headers then data", 0, append(append([]byte{0x01, 0x04}, "hhhh"...), append([]byte{0x00, 0x21}, strings.Repeat("d", 33)...)...), "http-headers:8 dns:33"},
		{"a reserved frame", 4, []byte{0x21, 0x02, 'x', 'x', 0x01, 0x01, 'h'}, "http-mgmt:4 http-headers:3"},
		{"a two-octet length", 8, append([]byte{0x00, 0x40, 0x40}, strings.Repeat("d", 64)...), "http-headers:3 dns:64"},
		{"the control stream", 2, []byte{0x00, 0x04, 0x00}, "http-mgmt:3"},
		{"a length cut short", 0, []byte{0x00, 0x40}, "http-headers:2"},
		{"a payload cut short", 0, []byte{0x00, 0x10, 'd', 'd'}, "http-headers:2 dns:2"},
	} {
		labels := make([]Layer, len(c.in))
		h3Labels(c.id, c.in, labels)
		require.Equal(t, c.want, spans(labels), c.name)
	}
}

// FuzzLabels: whatever a decrypted stream holds, its application's
// labels cover each octet once, as HTTP or DNS, and never panic (the
// stream is the measured server's, and a server can be hostile).
func FuzzLabels(f *testing.F) {
	f.Add("doh", 0, []byte("HTTP/1.1 200 OK\r\nContent-Length: -9\r\n\r\nxx"))
	f.Add("doh", 1, []byte(frame(4, 0, "")+frame(0, 8, "\x02dd\x00\x00")))
	f.Add("doh3", 0, []byte{0x00, 0x02, 'd', 'd', 0x01, 0xc0})
	f.Fuzz(func(t *testing.T, app string, dir int, b []byte) {
		var labels []Layer
		if app == "doh3" {
			labels = make([]Layer, len(b))
			h3Labels(uint64(dir), b, labels)
		} else {
			labels = appLabels(app, dir&1, b)
		}
		require.Len(t, labels, len(b))
		for i, l := range labels {
			require.Contains(t, []Layer{HTTPHeaders, HTTPMgmt, DNS}, l, "octet %d", i)
		}
	})
}

// ipv4 is an IPv4 header of ihl octets (options zeroed) for proto,
// from 10.0.0.1 to 10.0.0.2, its total length the header's and l4's.
func ipv4(ihl int, proto byte, l4 []byte) []byte {
	b := make([]byte, ihl, ihl+len(l4))
	b[0] = 0x40 | byte(ihl/4)
	total := ihl + len(l4)
	b[2], b[3] = byte(total>>8), byte(total)
	b[8], b[9] = 64, proto
	copy(b[12:], []byte{10, 0, 0, 1, 10, 0, 0, 2})
	return append(b, l4...)
}

// TestParseIP: a TCP segment's header (with options, in the IP header
// and TCP's) and payload, its sequence number and flags; a UDP
// datagram's; ICMP and other protocols counted as their header whole;
// octets past the IP total length (a link's padding) left out; and a
// clear error for what is no IPv4 packet or is cut short.
func TestParseIP(t *testing.T) {
	tcp := make([]byte, 24) // header with 4 octets of options
	copy(tcp, []byte{0x9c, 0x40, 0x03, 0x55, 0x01, 0x02, 0x03, 0x04})
	tcp[12], tcp[13] = 6<<4, 0x02|0x01 // data offset 24, SYN and FIN
	p, err := parseIP(append(ipv4(24, 6, append(tcp, "query"...)), 0, 0, 0))
	require.NoError(t, err)
	require.Equal(t, "tcp", p.proto)
	require.Equal(t, "10.0.0.1:40000", p.src.String())
	require.Equal(t, "10.0.0.2:853", p.dst.String())
	require.Equal(t, []int{24, 24}, []int{p.ipHdr, p.l4Hdr})
	require.Equal(t, "query", string(p.payload), "the link's padding left out")
	require.Equal(t, uint32(0x01020304), p.seq)
	require.True(t, p.syn && p.fin)

	p, err = parseIP(ipv4(20, 17, []byte{0x9c, 0x40, 0x01, 0xbb, 0, 12, 0, 0, 'q', 'u', 'i', 'c'}))
	require.NoError(t, err)
	require.Equal(t, []any{"udp", 8, "quic", "10.0.0.2:443"}, []any{p.proto, p.l4Hdr, string(p.payload), p.dst.String()})
	for proto, name := range map[byte]string{1: "icmp", 47: "other"} {
		p, err = parseIP(ipv4(20, proto, []byte{3, 3, 0, 0, 1, 2, 3, 4}))
		require.NoError(t, err)
		require.Equal(t, []any{name, 8}, []any{p.proto, p.l4Hdr})
		require.Empty(t, p.payload)
	}

	good := ipv4(20, 17, make([]byte, 8))
	for name, b := range map[string][]byte{
		"empty":                      nil,
		"IPv6":                       append([]byte{0x60}, make([]byte, 39)...),
		"a total past the data":      good[:27],
		"a header below 20":          append([]byte{0x44}, good[1:]...),
		"a header past the total":    append([]byte{0x4f}, good[1:]...),
		"UDP cut short":              ipv4(20, 17, make([]byte, 7)),
		"TCP cut short":              ipv4(20, 6, make([]byte, 19)),
		"a TCP offset below 20":      ipv4(20, 6, append(make([]byte, 12), 4<<4, 0, 0, 0, 0, 0, 0, 0)),
		"a TCP offset past the data": ipv4(20, 6, append(make([]byte, 12), 15<<4, 0, 0, 0, 0, 0, 0, 0)),
	} {
		_, err := parseIP(b)
		require.Error(t, err, name)
	}
}

// TestReadPcapDamaged: a capture's packets in order with their times; a
// file that is no capture, or is missing, is an error naming it; one cut
// short in its last record keeps the packets before it beside the
// error.
func TestReadPcapDamaged(t *testing.T) {
	dir := t.TempDir()
	var buf bytes.Buffer
	w := pcapgo.NewWriter(&buf)
	require.NoError(t, w.WriteFileHeader(65535, layers.LinkTypeRaw))
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for i, data := range [][]byte{ipv4(20, 17, make([]byte, 8)), ipv4(20, 17, make([]byte, 40))} {
		ts := t0.Add(time.Duration(i) * time.Millisecond)
		require.NoError(t, w.WritePacket(gopacket.CaptureInfo{Timestamp: ts, CaptureLength: len(data), Length: len(data)}, data))
	}
	whole := filepath.Join(dir, "whole.pcap")
	require.NoError(t, os.WriteFile(whole, buf.Bytes(), 0o644))
	raws, err := ReadPcap(whole)
	require.NoError(t, err)
	require.Len(t, raws, 2)
	require.True(t, raws[1].Time.Equal(t0.Add(time.Millisecond)))
	require.Len(t, raws[1].Data, 60)

	cut := filepath.Join(dir, "cut.pcap")
	require.NoError(t, os.WriteFile(cut, buf.Bytes()[:buf.Len()-10], 0o644))
	raws, err = ReadPcap(cut)
	require.ErrorContains(t, err, "cut.pcap")
	require.Len(t, raws, 1, "the packet before the cut")

	text := filepath.Join(dir, "notes.pcap")
	require.NoError(t, os.WriteFile(text, []byte("not a capture at all, only words"), 0o644))
	_, err = ReadPcap(text)
	require.ErrorContains(t, err, "notes.pcap")
	_, err = ReadPcap(filepath.Join(dir, "missing.pcap"))
	require.ErrorIs(t, err, os.ErrNotExist)
}
