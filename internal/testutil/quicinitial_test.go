package testutil

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/hex"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/stretchr/testify/require"
)

// TestReadClientHelloOfQuicGo: the Initial packets quic-go's client
// sends to a socket that never answers decrypt with the keys their
// connection ID gives, and their ClientHello names the server asked for;
// a datagram that is not QUIC is no ClientHello.
func TestReadClientHelloOfQuicGo(t *testing.T) {
	sink, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	defer sink.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	go quic.DialAddr(ctx, sink.LocalAddr().String(), &tls.Config{ServerName: "hidden.test", NextProtos: []string{"h3"}}, nil)
	var got [][]byte
	buf := make([]byte, 65536)
	sink.SetReadDeadline(time.Now().Add(2 * time.Second))
	for len(got) < 2 {
		n, _, err := sink.ReadFromUDP(buf)
		if err != nil {
			break
		}
		got = append(got, append([]byte(nil), buf[:n]...))
	}
	require.NotEmpty(t, got)
	ch, err := ReadClientHello(got) // a ClientHello with a post-quantum key share takes two
	require.NoError(t, err)
	require.Equal(t, "hidden.test", ch.SNI)
	require.False(t, ch.ECH)

	_, err = ReadClientHello([][]byte{[]byte("\x00not quic")})
	require.Error(t, err)
	broken := append([]byte(nil), got[0]...)
	broken[len(broken)-1] ^= 1 // the AEAD tag
	_, err = ReadClientHello([][]byte{broken})
	require.ErrorContains(t, err, "does not decrypt")
}

// rfcInitial is RFC 9001's sample client Initial (Appendix A.2).
func rfcInitial(t *testing.T) []byte {
	b, err := os.ReadFile("testdata/rfc9001-client-initial.hex")
	require.NoError(t, err)
	var hexs strings.Builder
	for line := range strings.SplitSeq(string(b), "\n") {
		if !strings.HasPrefix(line, "#") {
			hexs.WriteString(strings.TrimSpace(line))
		}
	}
	p, err := hex.DecodeString(hexs.String())
	require.NoError(t, err)
	return p
}

// TestReadClientHelloOfRFC9001: the RFC's own sample packet, whose keys
// come from its connection ID as any observer's do, holds a ClientHello
// for example.com in one CRYPTO frame of 241 octets; every truncation of
// it, and every octet of it changed, is an error, never a panic or
// another name: the observer reads what a broken network sends too.
func TestReadClientHelloOfRFC9001(t *testing.T) {
	p := rfcInitial(t)
	require.Len(t, p, 1200)
	ch, err := ReadClientHello([][]byte{p})
	require.NoError(t, err)
	require.Equal(t, "example.com", ch.SNI)
	require.False(t, ch.ECH)
	require.Len(t, ch.Raw, 241)
	require.Equal(t, byte(1), ch.Raw[0], "a ClientHello")

	for n := range len(p) {
		_, err := ReadClientHello([][]byte{p[:n]})
		require.Error(t, err, "cut to %d octets", n)
	}
	// Every octet is covered: the header is the AEAD's associated data
	// (its first octet's protected bits too), the connection ID its
	// keys, the rest its ciphertext and tag.
	for i := range p {
		q := bytes.Clone(p)
		q[i] ^= 0x40
		_, err := ReadClientHello([][]byte{q})
		require.Error(t, err, "octet %d changed", i)
	}
}
