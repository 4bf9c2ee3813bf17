package testutil

import (
	"context"
	"crypto/tls"
	"net"
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
