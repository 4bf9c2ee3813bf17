package transport_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/doxlab/doxlab/server"
	"github.com/doxlab/doxlab/transport"
)

// An exchange over the transport a URL names, against doxlab's own
// server on loopback: the record says what happened and how long it took.
func Example() {
	srv, err := server.New(&server.Config{Listen: server.Listen{UDP: "127.0.0.1:0"}, Answers: server.Answers{Any: "192.0.2.1"}})
	if err != nil {
		panic(err)
	}
	if err := srv.Start(); err != nil {
		panic(err)
	}
	defer srv.Close()

	t, err := transport.New("udp://"+srv.Addr("udp").String(), transport.Options{Timeout: 2 * time.Second})
	if err != nil {
		panic(err)
	}
	defer t.Close()
	q := new(dns.Msg)
	q.SetQuestion("example.test.", dns.TypeA)
	rec, err := t.Exchange(context.Background(), q)
	if err != nil {
		panic(err)
	}
	fmt.Println(rec.Status, rec.Protocol, strings.Join(strings.Fields(rec.Answers[0]), " "))
	fmt.Println(rec.Timing.TotalMs > 0, rec.Conn.Reused)
	// Output:
	// ok udp example.test. 300 IN A 192.0.2.1
	// true false
}

// The papers' conditions: a session carries tickets, tokens and the QUIC
// version from one connection to the next, so a later DoQ exchange
// resumes and sends its query in 0-RTT.
func ExampleNewSession() {
	srv, err := server.New(&server.Config{Listen: server.Listen{DoQ: "127.0.0.1:0"}, Answers: server.Answers{Any: "192.0.2.1"}})
	if err != nil {
		panic(err)
	}
	if err := srv.Start(); err != nil {
		panic(err)
	}
	defer srv.Close()
	opts := transport.Options{Insecure: true, Timeout: 2 * time.Second, ZeroRTT: true,
		Session: transport.NewSession(transport.SessionConfig{Tickets: true, Tokens: true})}
	url := "quic://" + srv.Addr("doq").String()
	q := new(dns.Msg)
	q.SetQuestion("example.test.", dns.TypeA)
	for range 2 {
		t, err := transport.New(url, opts)
		if err != nil {
			panic(err)
		}
		rec, err := t.Exchange(context.Background(), q)
		t.Close()
		if err != nil {
			panic(err)
		}
		fmt.Println(rec.Status, "resumed:", rec.Conn.TLSResumed, "0-RTT:", rec.Conn.Used0RTT)
	}
	// Output:
	// ok resumed: false 0-RTT: false
	// ok resumed: true 0-RTT: true
}
