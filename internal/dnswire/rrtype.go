package dnswire

import (
	"strconv"
	"strings"

	"github.com/miekg/dns"
)

// ParseType is a record type's number from its mnemonic (A, HTTPS) or
// from RFC 3597's generic TYPEnnn, in any case: what dig, kdig and
// dnsperf's query files accept, so a type miekg/dns has no name for yet
// can still be asked.
func ParseType(s string) (uint16, bool) {
	s = strings.ToUpper(s)
	if t, ok := dns.StringToType[s]; ok {
		return t, true
	}
	digits, ok := strings.CutPrefix(s, "TYPE")
	if !ok || digits == "" || digits[0] == '+' || digits[0] == '-' {
		return 0, false
	}
	t, err := strconv.ParseUint(digits, 10, 16)
	return uint16(t), err == nil
}
