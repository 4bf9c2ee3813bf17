package bench

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/miekg/dns"

	"github.com/doxlab/doxlab/internal/listfile"
)

// ReadQueries reads a query mix in dnsperf's format: NAME TYPE per line,
// # for comments; a name alone asks for A, a type by its mnemonic or as
// RFC 3597's TYPEnnn. An error names file and line.
func ReadQueries(path string) ([]Query, error) {
	var out []Query
	err := listfile.Each(path, func(_ int, line string) error {
		fields := strings.Fields(line)
		q := Query{Name: dns.Fqdn(fields[0]), Type: dns.TypeA}
		if len(fields) > 1 {
			t, ok := queryType(fields[1])
			if !ok {
				return fmt.Errorf("unknown type %q", fields[1])
			}
			q.Type = t
		}
		if len(q.Name) > 255 { // said, not quoted: it may be a megabyte
			return fmt.Errorf("a name of %d octets (DNS allows 255)", len(q.Name))
		}
		if _, ok := dns.IsDomainName(q.Name); !ok {
			return fmt.Errorf("%q is not a domain name", fields[0])
		}
		out = append(out, q)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no queries", path)
	}
	return out, nil
}

// queryType is a type's number from its mnemonic (A, HTTPS) or from
// RFC 3597's generic TYPEnnn, in any case.
func queryType(s string) (uint16, bool) {
	s = strings.ToUpper(s)
	if t, ok := dns.StringToType[s]; ok {
		return t, true
	}
	if digits, ok := strings.CutPrefix(s, "TYPE"); ok {
		if t, err := strconv.ParseUint(digits, 10, 16); err == nil {
			return uint16(t), true
		}
	}
	return 0, false
}
