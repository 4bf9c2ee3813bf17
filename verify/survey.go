package verify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/doxlab/doxlab/internal/printable"
	"github.com/doxlab/doxlab/store"
)

// LoadSurvey reads the verifications stored by runs whose ID starts with
// prefix.
func LoadSurvey(ctx context.Context, st *store.Store, prefix string) (*Survey, error) {
	sv := &Survey{}
	load := func(kind store.Kind, add func([]byte) error) error {
		return st.Results(ctx, prefix, kind, func(_ string, raw []byte) error { return add(raw) })
	}
	err := errors.Join(
		load(KindDoQ, func(b []byte) error { r := new(DoQ); sv.DoQ = append(sv.DoQ, r); return json.Unmarshal(b, r) }),
		load(KindDoT, func(b []byte) error { r := new(DoT); sv.DoT = append(sv.DoT, r); return json.Unmarshal(b, r) }),
		load(KindDoH, func(b []byte) error { r := new(DoH); sv.DoH = append(sv.DoH, r); return json.Unmarshal(b, r) }))
	return sv, err
}

// The kinds of stored verifications.
var (
	KindDoQ = store.NewKind("verify-doq")
	KindDoT = store.NewKind("verify-dot")
	KindDoH = store.NewKind("verify-doh")
)

// Save stores one verification (a *DoQ, *DoT or *DoH) of target under
// its kind.
func Save(ctx context.Context, st *store.Store, runID, target string, v any) error {
	var k store.Kind
	switch v.(type) {
	case *DoQ:
		k = KindDoQ
	case *DoT:
		k = KindDoT
	case *DoH:
		k = KindDoH
	default:
		return fmt.Errorf("verify: cannot store a %T", v)
	}
	return st.WriteResult(ctx, runID, k, target, time.Now(), v)
}

// Empty reports whether there is nothing to tabulate.
func (s *Survey) Empty() bool { return len(s.DoQ)+len(s.DoT)+len(s.DoH) == 0 }

// Survey is what a set of verifications found, tabulated like the PAM
// paper's version breakdown and the DoH-cost paper's Tables 1-2.
type Survey struct {
	DoQ []*DoQ
	DoT []*DoT
	DoH []*DoH
}

// Write prints the survey's tables.
func (s *Survey) Write(w io.Writer) {
	table := func(title string, counts map[string]int, total int) {
		if total == 0 {
			return
		}
		fmt.Fprintf(w, "\n%s (of %d):\n", title, total)
		var keys []string
		for k := range counts {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool {
			if counts[keys[i]] != counts[keys[j]] {
				return counts[keys[i]] > counts[keys[j]]
			}
			return keys[i] < keys[j]
		})
		for _, k := range keys {
			fmt.Fprintf(w, "  %-52s %5d  %5.1f%%\n", k, counts[k], 100*float64(counts[k])/float64(total))
		}
	}
	c := map[string]int{}
	for _, r := range s.DoQ {
		c[fmt.Sprintf("%-14s QUIC %-3s ALPN %s", r.Verdict, orDash(r.QUICVersion), orDash(r.ALPN))]++
	}
	table("DoQ: verdict × QUIC version × DoQ ALPN", c, len(s.DoQ))
	c = map[string]int{}
	for _, r := range s.DoQ {
		if r.Verdict == "doq" {
			c["answers over DoQ"]++
			if r.TicketLifetimeS > 0 {
				c[fmt.Sprintf("session ticket lifetime %s", time.Duration(r.TicketLifetimeS)*time.Second)]++
			}
			for k, ok := range map[string]bool{"Retry": r.Retry, "NEW_TOKEN accepted": r.TokenAccepted, "resumption": r.Resumed, "0-RTT": r.ZeroRTT} {
				if ok {
					c[k]++
				}
			}
		}
	}
	table("DoQ features", c, len(s.DoQ))
	c = map[string]int{}
	for _, r := range s.DoT {
		if !r.Answers {
			c["no DoT"]++
			continue
		}
		c["DoT, TLS "+r.TLS]++
		for k, ok := range map[string]bool{"ALPN dot": r.ALPNDoT, "answers without ALPN": r.NoALPN, "edns-tcp-keepalive": r.Keepalive, "TCP Fast Open": r.FastOpen} {
			if ok {
				c[k]++
			}
		}
	}
	table("DoT", c, len(s.DoT))
	c = map[string]int{}
	for _, r := range s.DoH {
		for _, e := range r.Endpoints {
			c[e]++
		}
		if len(r.Endpoints) == 0 {
			c["no DoH endpoint"]++
		}
	}
	table("DoH endpoints: path, content type, method (Table 1)", c, len(s.DoH))
	c = map[string]int{}
	for _, r := range s.DoH {
		for k, ok := range map[string]bool{"HTTP/1.1": r.HTTP11, "HTTP/2": r.HTTP2, "HTTP/3": r.HTTP3, "Alt-Svc announces h3": strings.Contains(r.AltSvc, "h3")} {
			if ok {
				c[k]++
			}
		}
		for _, v := range r.TLSVersions {
			c["TLS "+v]++
		}
	}
	table("DoH: HTTP and TLS versions (Table 2)", c, len(s.DoH))
	c = map[string]int{}
	for _, r := range s.DoH {
		for k, ok := range map[string]bool{"ODoH target config published (RFC 9230)": r.ODoH != nil, "ODoH: a sealed query answered": r.ODoHAnswers,
			"ECH config in its own name's HTTPS record (RFC 9848)": r.ECH != "", "ODoH config in its own HTTPS record (odohconfig)": r.ODoHInHTTPS != nil} {
			c[k] += 0 // none is a finding too
			if ok {
				c[k]++
			}
		}
	}
	table("DoH: the privacy ladder (Oblivious DoH, ECH)", c, len(s.DoH))
	c = map[string]int{}
	certs := 0
	add := func(cert *Cert, f TLSFacts, caa []string) {
		if cert == nil {
			return
		}
		certs++
		for k, ok := range map[string]bool{"CT: SCT embedded in the certificate": cert.SCT, "CT: SCTs in the TLS handshake": f.SCTsInTLS > 0,
			"OCSP Must-Staple": cert.MustStaple, "OCSP response stapled": f.OCSPStapled, "CAA record for the certificate's name": len(caa) > 0,
			"self-signed": cert.SelfSign, "session tickets": f.TicketLifetimeS > 0} {
			if ok {
				c[k]++
			}
		}
		c[fmt.Sprintf("key %s-%d", cert.KeyType, cert.KeyBits)]++
	}
	for _, r := range s.DoH {
		add(r.Cert, r.TLSFacts, r.CAA)
	}
	for _, r := range s.DoT {
		add(r.Cert, r.TLSFacts, nil)
	}
	table("certificates and TLS (DoH and DoT)", c, certs)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// Passed is a host that passed every protocol asked for, with what was
// verified of it: a line of a campaign's targets file.
type Passed struct {
	Host  string   // the IP address
	Facts []string // per protocol: "doq QUIC v1 ALPN doq, Retry, token, resumed, 0-RTT"
}

// Passed lists the hosts that passed every protocol in speaks (doq: a DNS
// answer over DoQ; dot: an answer over TLS; doh: an endpoint answered),
// in address order: scan → verify → campaign as one pipeline.
func (s *Survey) Passed(speaks []string) ([]Passed, error) {
	facts := map[string]map[string]string{} // host → protocol → facts
	add := func(target, proto, f string) {
		host, _, err := net.SplitHostPort(target)
		if err != nil {
			host = target
		}
		if facts[host] == nil {
			facts[host] = map[string]string{}
		}
		facts[host][proto] = f
	}
	for _, r := range s.DoQ {
		if r.Verdict != "doq" {
			continue
		}
		f := []string{"doq QUIC " + r.QUICVersion + " ALPN " + r.ALPN}
		for _, x := range []struct {
			on   bool
			what string
		}{{r.Retry, "Retry"}, {r.TokenAccepted, "token"}, {r.Resumed, "resumed"}, {r.ZeroRTT, "0-RTT"}} {
			if x.on {
				f = append(f, x.what)
			}
		}
		add(r.Target, "doq", strings.Join(f, ", "))
	}
	for _, r := range s.DoT {
		if r.Answers {
			f := "dot " + r.TLS
			if r.ALPNDoT {
				f += " ALPN dot"
			}
			add(r.Target, "dot", f)
		}
	}
	for _, r := range s.DoH {
		if len(r.Endpoints) > 0 {
			f := "doh " + strings.Join(r.Endpoints, "; ")
			if r.HTTP3 {
				f += ", HTTP/3"
			}
			add(r.Target, "doh", f)
		}
	}
	for _, p := range speaks {
		if p != "doq" && p != "dot" && p != "doh" {
			return nil, fmt.Errorf("cannot select on %q: verify checks doq, dot and doh", p)
		}
	}
	var out []Passed
	for host, by := range facts {
		ok := true
		var fs []string
		for _, p := range speaks {
			f, passed := by[p]
			ok = ok && passed
			fs = append(fs, f)
		}
		if ok {
			out = append(out, Passed{Host: host, Facts: fs})
		}
	}
	slices.SortFunc(out, func(a, b Passed) int {
		x, errA := netip.ParseAddr(a.Host)
		y, errB := netip.ParseAddr(b.Host)
		if errA != nil || errB != nil {
			return strings.Compare(a.Host, b.Host)
		}
		return x.Compare(y)
	})
	return out, nil
}

// WriteTargets writes ps as a campaign's targets file: a host a line, what
// was verified of it after a #, which campaign plan keeps with the run.
func WriteTargets(w io.Writer, ps []Passed, header string) error {
	if _, err := fmt.Fprintf(w, "# %s\n", header); err != nil {
		return err
	}
	for _, p := range ps {
		// A peer's strings (ALPNs, paths) are escaped: a newline in one
		// must not become a target line of its own.
		if _, err := fmt.Fprintf(w, "%s  # %s\n", printable.String(p.Host), printable.String(strings.Join(p.Facts, "; "))); err != nil {
			return err
		}
	}
	return nil
}
