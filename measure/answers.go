package measure

import (
	"fmt"
	"slices"
	"strings"

	"github.com/miekg/dns"

	"github.com/doxlab/doxlab/transport"
)

// DefaultOKRcodes are the rcodes that answer a query, as a stub resolver
// takes them: NOERROR (a NODATA answer included) and NXDOMAIN. REFUSED,
// SERVFAIL, NOTIMP, FORMERR and the rest are failures: a resolver that
// refuses a vantage point (an ACL, a rate limit) is not the fastest.
var DefaultOKRcodes = []string{"NOERROR", "NXDOMAIN"}

// Answers says which samples count as answered: those whose exchange got
// a whole answer (not cut short: TC) with an rcode in its set. Only they
// are timed; every other one is a failure named by its rcode or status.
type Answers struct {
	ok []string // rcode names, upper case
}

// DefaultAnswers takes DefaultOKRcodes.
func DefaultAnswers() Answers { return Answers{ok: slices.Clone(DefaultOKRcodes)} }

// ParseAnswers reads a list of rcode names (NOERROR, NXDOMAIN, SERVFAIL,
// REFUSED, ...); an empty list is DefaultAnswers.
func ParseAnswers(names []string) (Answers, error) {
	if len(names) == 0 {
		return DefaultAnswers(), nil
	}
	var a Answers
	for _, n := range names {
		n = strings.ToUpper(strings.TrimSpace(n))
		if _, ok := dns.StringToRcode[n]; !ok {
			return Answers{}, fmt.Errorf("%q is not an rcode (NOERROR, NXDOMAIN, SERVFAIL, REFUSED, NOTIMP, FORMERR, ...)", n)
		}
		if !slices.Contains(a.ok, n) {
			a.ok = append(a.ok, n)
		}
	}
	return a, nil
}

// Rcodes are the rcodes taken as answers.
func (a Answers) Rcodes() []string {
	if a.ok == nil {
		return slices.Clone(DefaultOKRcodes)
	}
	return slices.Clone(a.ok)
}

// Answered says whether an exchange that ended with status and rcode (as
// stored: rcode is empty without an answer) answered.
func (a Answers) Answered(status transport.Status, rcode string) bool {
	return a.Outcome(status, rcode) == ""
}

// Outcome is "" for an answered exchange, else what it failed with: the
// rcode of an answer not taken (REFUSED), "truncated", or the status
// (timeout, refused, tls-error, ...).
func (a Answers) Outcome(status transport.Status, rcode string) string {
	if !status.HasResponse() {
		if status == "" {
			return "unknown"
		}
		return string(status)
	}
	if status == transport.StatusTruncated {
		return string(status)
	}
	if rcode == "" { // a store too old to hold the rcode: the status says it
		rcode = map[transport.Status]string{transport.StatusOK: "NOERROR", transport.StatusNXDomain: "NXDOMAIN", transport.StatusServFail: "SERVFAIL"}[status]
		if rcode == "" {
			return "rcode-error"
		}
	}
	ok := a.ok
	if ok == nil {
		ok = DefaultOKRcodes
	}
	if slices.Contains(ok, rcode) { // not Rcodes: a copy per sample counts at ten million
		return ""
	}
	return rcode
}

// SampleOutcome is Outcome of a sample's measured exchange.
func (a Answers) SampleOutcome(s *Sample) string {
	if s.Measure == nil {
		return a.Outcome(s.Status, "")
	}
	return a.Outcome(s.Status, s.Measure.Rcode)
}
