package server

import (
	"fmt"
	"math/rand/v2"
	"net"
	"testing"

	"github.com/miekg/dns"
	"github.com/stretchr/testify/require"
)

// TestTruncateFitsAndSaysWhatWent: whatever an answer holds, truncated
// to a UDP size it packs into that many octets, keeps its records in
// order (a prefix of each section), and sets TC exactly when a record
// of the answer or authority section had to go: an additional record
// dropped is no reason to retry over TCP (RFC 2181 §9).
func TestTruncateFitsAndSaysWhatWent(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 2000 {
		q := new(dns.Msg)
		q.SetQuestion(fmt.Sprintf("n%d.test.", i), dns.TypeA)
		r := new(dns.Msg).SetReply(q)
		r.Compress = true
		rr := func(j int) dns.RR {
			if rng.IntN(3) == 0 {
				return &dns.TXT{Hdr: dns.RR_Header{Name: q.Question[0].Name, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 60}, Txt: []string{fmt.Sprintf("%0*d", rng.IntN(200), j)}}
			}
			return &dns.A{Hdr: dns.RR_Header{Name: q.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: net.IPv4(192, 0, 2, byte(j))}
		}
		for j := range rng.IntN(30) {
			r.Answer = append(r.Answer, rr(j))
		}
		for j := range rng.IntN(4) {
			r.Ns = append(r.Ns, rr(100+j))
		}
		for j := range rng.IntN(20) {
			r.Extra = append(r.Extra, rr(200+j))
		}
		an, ns, ex := r.Copy().Answer, r.Copy().Ns, r.Copy().Extra
		size := []int{512, 1232}[rng.IntN(2)]
		truncate(r, size)
		b, err := r.Pack()
		require.NoError(t, err)
		require.LessOrEqual(t, len(b), size, "answer %d", i)
		for j, x := range r.Answer {
			require.Equal(t, an[j].String(), x.String(), "answer %d: a prefix of the answers", i)
		}
		for j, x := range r.Ns {
			require.Equal(t, ns[j].String(), x.String(), "answer %d: a prefix of the authority", i)
		}
		require.Equal(t, len(r.Answer) < len(an) || len(r.Ns) < len(ns), r.Truncated, "answer %d: TC when an answer or authority record went (%d of %d, %d of %d, %d of %d extra)",
			i, len(r.Answer), len(an), len(r.Ns), len(ns), len(r.Extra), len(ex))
	}
}
