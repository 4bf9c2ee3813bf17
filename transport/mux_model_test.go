package transport_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/stretchr/testify/require"

	"github.com/doxlab/doxlab/internal/testutil"
	"github.com/doxlab/doxlab/transport"
)

// TestPipelinedAnswersGoToTheirOwnQueries: on one reused TCP connection,
// queries from many goroutines drawing their IDs from four values (so
// that the transport must keep them apart) are answered by a server
// that answers each query at once, late (after the client's timeout),
// twice, or never, in whatever order its delays give. Whatever comes,
// a query is either answered with its own answer (its own name, the
// address the server gave that name) or times out: never another's,
// never taken as malformed for carrying another's question.
func TestPipelinedAnswersGoToTheirOwnQueries(t *testing.T) {
	for seed := range testutil.Seeds(2) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 21))
			var mu sync.Mutex
			draw := func(n int) int { mu.Lock(); defer mu.Unlock(); return rng.IntN(n) }
			url := "tcp://" + testutil.TCPPeer(t, func(c net.Conn) {
				var wmu sync.Mutex
				write := func(b []byte) {
					wmu.Lock()
					defer wmu.Unlock()
					c.Write(b)
				}
				for {
					var l [2]byte
					if _, err := io.ReadFull(c, l[:]); err != nil {
						return
					}
					q := make([]byte, binary.BigEndian.Uint16(l[:]))
					if _, err := io.ReadFull(c, q); err != nil {
						return
					}
					m := new(dns.Msg)
					if m.Unpack(q) != nil {
						return
					}
					r := new(dns.Msg).SetReply(m)
					// The address is the name's: a.17.test. gets 192.0.2.17.
					var n int
					fmt.Sscanf(m.Question[0].Name, "a.%d.test.", &n)
					r.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: m.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: net.IPv4(192, 0, 2, byte(n))}}
					b, _ := r.Pack()
					b = append([]byte{byte(len(b) >> 8), byte(len(b))}, b...)
					var delays []time.Duration
					switch draw(5) {
					case 0: // never
					case 1: // late
						delays = []time.Duration{250 * time.Millisecond}
					case 2: // twice
						delays = []time.Duration{time.Duration(draw(40)) * time.Millisecond, time.Duration(draw(250)) * time.Millisecond}
					default:
						delays = []time.Duration{time.Duration(draw(60)) * time.Millisecond}
					}
					for _, d := range delays {
						time.AfterFunc(d, func() { write(b) })
					}
				}
			})
			tr, err := transport.New(url, transport.Options{Reuse: true, Timeout: 150 * time.Millisecond})
			require.NoError(t, err)
			defer tr.Close()
			var wg sync.WaitGroup
			statuses := make(chan string, 120)
			for w := range 8 {
				wg.Go(func() {
					for i := range 15 {
						n := 1 + w*15 + i
						q := new(dns.Msg)
						q.SetQuestion(fmt.Sprintf("a.%d.test.", n), dns.TypeA)
						q.Id = uint16(1 + draw(4))
						rec, err := tr.Exchange(context.Background(), q)
						switch {
						case err == nil:
							if !strings.HasSuffix(rec.Answers[0], fmt.Sprintf("192.0.2.%d", n)) || rec.Response.Id != q.Id {
								statuses <- "another's answer: " + rec.Answers[0]
								continue
							}
							statuses <- "ok"
						default:
							statuses <- string(rec.Status)
						}
					}
				})
			}
			wg.Wait()
			close(statuses)
			count := map[string]int{}
			for s := range statuses {
				count[s]++
			}
			require.Equal(t, 120, count["ok"]+count["timeout"], "%v", count)
			require.Positive(t, count["ok"])
			require.Positive(t, count["timeout"])
		})
	}
}
