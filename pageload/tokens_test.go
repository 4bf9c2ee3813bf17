package pageload

import (
	"crypto/tls"
	"testing"

	"github.com/quic-go/quic-go"
)

// conn plays one QUIC connection to server "s" against k: it pops a
// token, as quic-go does when dialling, then handles the server's frames
// in the order given ("ticket", "token", "settings"), and says whether
// it presented a token.
func conn(k *tokenKeeper, sessions tls.ClientSessionCache, frames ...string) bool {
	c := k.forConn(sessions)
	c.Pop("s")
	for _, f := range frames {
		switch f {
		case "ticket":
			c.Tickets().Put("s", &tls.ClientSessionState{})
		case "token":
			c.Put("s", &quic.ClientToken{})
		case "settings":
			c.Settled()
		}
	}
	return c.Presented()
}

func TestTokensChromium(t *testing.T) {
	// Each case is a sequence of connections; want is whether each
	// presented a token.
	cases := []struct {
		name   string
		conns  [][]string
		wantTo []bool
	}{
		{"token after ticket is kept, and used once",
			[][]string{{"settings", "ticket", "token"}, {}, {}},
			[]bool{false, true, false}},
		{"token before the first ticket has no entry to land on",
			[][]string{{"settings", "token", "ticket"}, {}},
			[]bool{false, false}},
		{"token before its own ticket lands on the old entry, replaced",
			[][]string{{"settings", "ticket", "token"}, {"settings", "token", "ticket"}, {}},
			[]bool{false, true, false}},
		{"ticket waits for SETTINGS: a token before them is lost",
			[][]string{{"ticket", "token", "settings"}, {}},
			[]bool{false, false}},
		{"token after SETTINGS and the ticket they released",
			[][]string{{"ticket", "settings", "token"}, {}},
			[]bool{false, true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k, sessions := newTokenKeeper(TokensChromium), tls.NewLRUClientSessionCache(4)
			for i, frames := range tc.conns {
				if got := conn(k, sessions, frames...); got != tc.wantTo[i] {
					t.Errorf("connection %d presented a token: %v, want %v", i, got, tc.wantTo[i])
				}
			}
			if _, ok := sessions.Get("s"); !ok {
				t.Error("the tickets did not reach the session cache")
			}
		})
	}
}

func TestTokensKeep(t *testing.T) {
	k, sessions := newTokenKeeper(TokensKeep), tls.NewLRUClientSessionCache(4)
	for i, want := range []bool{false, true, true} {
		if got := conn(k, sessions, "token", "ticket"); got != want {
			t.Errorf("connection %d presented a token: %v, want %v", i, got, want)
		}
	}
}
